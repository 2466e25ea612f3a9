"""`tfgpu-install update-data` keeps what it read when a later request fails, and resumes from there.

A real local HTTP server (tests/pypifixture.py's recorded PyPI) serves TensorFlow 2.22.0rc0, which
the "shipped" data here lacks, and three torch releases the shipped companions.toml lacks: small
real wheels built here (METADATA, torch/version.py, torch/cuda/__init__.py), read by the same range
requests as PyPI's. A fault is injected after N requests (every later answer is 403, which is not
retried), then a second run against a healthy server (and an empty cache, so that anything it
fetched again would show in the server's log) resumes.

The runs are in this process (``run_tool``): what is proved is what a run writes and what the
next run fetches, not the process boundary; tests/hostile/test_hostile_update_wheels.py keeps two
``update-data`` processes racing for the overlay.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import tomllib
import zipfile
from pathlib import Path

import pypifixture
import pytest
import recordedpypi
from conftest import run_tool
from test_update_data import SHIPPED, without

TORCH = ("9.0.0", "9.1.0", "9.2.0")
CUDA_INIT = 'PYTORCH_RELEASES_CODE_CC = {"12.8": {"x86_64": {75, 80, 90}}}\n'


def wheel(version: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(
            f"torch-{version}.dist-info/METADATA",
            f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n"
            'Requires-Dist: nvidia-cublas-cu12==12.8.4.1; platform_system == "Linux" and platform_machine == "x86_64"\n',
        )
        archive.writestr("torch/version.py", f"cuda: Optional[str] = '12.8'\n__version__ = '{version}'\n")
        archive.writestr("torch/cuda/__init__.py", CUDA_INIT)
    return buffer.getvalue()


def entry(filename: str, size: int) -> dict:
    return {
        "filename": filename,
        "url": f"/files/{filename}",
        "size": size,
        "packagetype": "bdist_wheel",
        "python_version": "cp312",
        "requires_python": ">=3.10",
        "upload_time_iso_8601": "2026-12-01T00:00:00.000000Z",
        "yanked": False,
        "digests": {"sha256": "0" * 64},
    }


@pytest.fixture
def index_url(tmp_path):
    """The server with a fault switch: ``(url, handler class)``."""
    folder = tmp_path / "index"
    shutil.copytree(pypifixture.FIXTURE / "index", folder)
    files = {}
    releases = {}
    for version in TORCH:
        name = f"torch-{version}-cp312-cp312-manylinux_2_28_x86_64.whl"
        files[name] = wheel(version)
        releases[version] = [entry(name, len(files[name]))]
    (folder / "torch.json").write_text(json.dumps({"info": {"name": "torch"}, "releases": releases}))
    cublas = "nvidia_cublas_cu12-12.8.4.1-py3-none-manylinux_2_27_x86_64.whl"
    (folder / "nvidia-cublas-cu12.json").write_text(
        json.dumps({"info": {"name": "nvidia-cublas-cu12"}, "releases": {"12.8.4.1": [entry(cublas, 1000)]}})
    )
    running = recordedpypi.serve(folder)
    base = running.handler

    class Faulty(base):
        fail_after: int | None = None
        fail_path: str | None = None
        requests: list[str] = []

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            late = self.fail_after is not None and len(self.requests) >= self.fail_after
            if late or (self.fail_path is not None and self.path.startswith(self.fail_path)):
                self.requests.append(self.path)
                return self._send(403, b"fault injected")
            return super().do_GET()

        def _body(self, filename: str, start: int, end: int) -> bytes | None:
            if filename in files:
                return files[filename][start : end + 1] if end < len(files[filename]) else None
            return super()._body(filename, start, end)

    running.handler = Faulty
    with running as url:
        yield url, Faulty


def make_env(root: Path, name: str) -> dict[str, str]:
    old = root / "shipped"
    if not old.exists():
        old.mkdir(parents=True)
        (old / "tensorflow.toml").write_text(without(SHIPPED, "2.22.0rc0"), "utf-8")
    return dict(
        os.environ,
        TFGPU_DATA_DIR=str(old),
        TFGPU_USER_DATA_DIR=str(root / "data"),
        TFGPU_CACHE_DIR=str(root / f"cache-{name}"),
        COLUMNS="200",
    )


def update(env: dict[str, str], url: str) -> subprocess.CompletedProcess:
    return run_tool("update-data", "--index", url, "--json", env=env)


def overlay(env: dict[str, str], name: str) -> dict:
    path = Path(env["TFGPU_USER_DATA_DIR"]) / name
    return tomllib.loads(path.read_text("utf-8")) if path.exists() else {}


def tf_versions(env) -> list[str]:
    return [r["version"] for r in overlay(env, "tensorflow-updates.toml").get("release", [])]


def torch_versions(env) -> list[str]:
    return sorted(r["version"] for r in overlay(env, "companions-updates.toml").get("release", []))


_BEFORE_TORCH: list[int] = []
"""The count :func:`requests_before_torch` found, kept for the module's other tests: every test's
server serves the same files, so a healthy run asks the same requests in the same order."""


def requests_before_torch(index_url, tmp_path) -> int:
    """How many requests a healthy run makes before it asks for the torch release list (a healthy
    run of its own, the first time a test of this module asks)."""
    if not _BEFORE_TORCH:
        url, handler = index_url
        handler.requests.clear()
        done = update(make_env(tmp_path / "probe", "probe"), url)
        assert done.returncode == 0, done.stdout + done.stderr
        _BEFORE_TORCH.append(handler.requests.index("/pypi/torch/json"))
    return _BEFORE_TORCH[0]


def test_a_failure_after_the_tensorflow_release_keeps_it_and_the_next_run_resumes(index_url, tmp_path):
    url, handler = index_url
    first_torch = requests_before_torch(index_url, tmp_path)
    env = make_env(tmp_path, "first")
    handler.requests.clear()
    handler.fail_after = first_torch  # everything up to the torch release list answers; then 403s
    done = update(env, url)
    error = json.loads(done.stdout)["error"]
    assert (done.returncode, error["code"]) == (1, "update-incomplete"), done.stdout + done.stderr
    assert "2.22.0rc0" in error["message"] and "torch and JAX release lists" in error["message"]
    assert "403" in error["message"] and any("again" in a for a in error["alternatives"])
    assert tf_versions(env) == ["2.22.0rc0"] and torch_versions(env) == []
    # what is written is usable at once
    plan = run_tool("plan", "--tf", "2.22.0rc0", "--json", "--os", "linux", "--no-detect", env=env)
    assert json.loads(plan.stdout)["tensorflow"] == "2.22.0rc0"

    handler.fail_after = None
    handler.requests.clear()
    again = update(dict(env, TFGPU_CACHE_DIR=str(tmp_path / "cache-second")), url)
    assert again.returncode == 0, again.stdout + again.stderr
    report = json.loads(again.stdout)
    assert report["kept_releases"] == ["2.22.0rc0"] and report["fetched_releases"] == []
    assert sorted(report["fetched_companions"]) == [f"torch=={v}" for v in TORCH]
    assert report["new_releases"] == ["2.22.0rc0"] and "kept from an earlier run" in report["summary"]
    # the kept release is not fetched again: no request for any of its wheels (the cache is empty)
    assert not [p for p in handler.requests if p.startswith("/files/tensorflow-")]
    assert tf_versions(env) == ["2.22.0rc0"] and torch_versions(env) == list(TORCH)
    row = next(r for r in overlay(env, "companions-updates.toml")["release"] if r["version"] == "9.2.0")
    assert (row["cuda"], row["gpu_archs"]) == ("12.8", ["sm_75", "sm_80", "sm_90"])


@pytest.mark.parametrize("broken", TORCH)
def test_a_failure_among_the_companions_keeps_every_row_it_read_and_the_next_run_reads_only_the_rest(
    index_url, tmp_path, broken
):
    url, handler = index_url
    env = make_env(tmp_path, "first")
    handler.fail_path = f"/files/torch-{broken}-"  # every request for this one wheel fails
    done = update(env, url)
    assert done.returncode == 1, done.stdout + done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "update-incomplete"
    written, not_written = error["message"].split("; not written: ")
    assert f"torch {broken} (" in not_written and "403" in not_written
    assert all(f"torch=={v}" in written for v in TORCH if v != broken)
    assert tf_versions(env) == ["2.22.0rc0"] and torch_versions(env) == [v for v in TORCH if v != broken]

    handler.fail_path = None
    handler.requests.clear()
    again = update(dict(env, TFGPU_CACHE_DIR=str(tmp_path / "cache-second")), url)
    assert again.returncode == 0, again.stdout + again.stderr
    report = json.loads(again.stdout)
    assert report["fetched_companions"] == [f"torch=={broken}"] and report["not_written"] == []
    assert torch_versions(env) == list(TORCH)
    fetched = {p.split("-")[1] for p in handler.requests if p.startswith("/files/")}
    assert fetched == {broken}  # neither the kept TF release nor the kept torch rows are fetched again


def test_a_fault_after_every_release_list_names_each_release_it_could_not_write(index_url, tmp_path):
    url, handler = index_url
    first_torch = requests_before_torch(index_url, tmp_path)
    env = make_env(tmp_path, "first")
    handler.requests.clear()
    handler.fail_after = first_torch + 2  # the torch and JAX release lists answer, no wheel does
    done = update(env, url)
    error = json.loads(done.stdout)["error"]
    assert (done.returncode, error["code"]) == (1, "update-incomplete")
    not_written = error["message"].split("; not written: ")[1]
    assert all(f"torch {v} (" in not_written for v in TORCH)
    assert tf_versions(env) == ["2.22.0rc0"] and torch_versions(env) == []


def test_a_kept_row_without_the_build_columns_is_read_again(index_url, tmp_path):
    url, handler = index_url
    env = make_env(tmp_path, "first")
    assert update(env, url).returncode == 0
    path = Path(env["TFGPU_USER_DATA_DIR"]) / "companions-updates.toml"
    text = path.read_text("utf-8")
    # as a tool before the build columns wrote it: no cuda, driver, gpu_archs, gpu_range, archs_from
    old = "\n".join(
        line for line in text.splitlines() if not line.startswith(("cuda =", "driver =", "gpu_", "archs_from ="))
    )
    path.write_text(old + "\n", "utf-8")
    handler.requests.clear()
    again = update(dict(env, TFGPU_CACHE_DIR=str(tmp_path / "cache-second")), url)
    assert again.returncode == 0, again.stdout + again.stderr
    assert sorted(json.loads(again.stdout)["fetched_companions"]) == [f"torch=={v}" for v in TORCH]
    assert all(r["cuda"] == "12.8" for r in overlay(env, "companions-updates.toml")["release"])


def test_each_request_has_its_own_deadline_not_the_run():
    from tfgpu.datasource.http import Fetcher

    fetcher = Fetcher(request_deadline=5.0)
    import time

    first = fetcher._deadline_of_request()
    time.sleep(0.01)
    assert fetcher._deadline_of_request() > first  # a later request gets its own full budget
    both = Fetcher(request_deadline=5.0, deadline=time.monotonic() + 1)
    assert both._deadline_of_request() == both.deadline  # a run deadline, where set, still bounds it
