"""update-data against a local index (tests/test_update_resume.py's recorded PyPI) whose torch wheels
carry a crafted ``torch/cuda/__init__.py`` or ``torch/version.py``: megabytes long, nested past any
parser's depth, or code that would write a file if it ran. update-data never runs them, keeps no
row it could not validate, and ``plan`` afterwards reads what it left; two runs at once leave an
overlay ``plan`` reads.

update-data and plan run in this process (``run_tool``: the crafted code would run here just the
same if it were ever run); the two runs at once stay two processes, since they race for the overlay.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
import test_update_resume as resume
from conftest import run_tool
from test_update_resume import index_url, make_env, update  # noqa: F401 - index_url: the fixture

PWNED = Path("/tmp") / "tfgpu-hostile-update-wheels-PWNED"
CRAFTED = {
    "megabytes": ("x = 1\n" * 3_000_000, "cuda: Optional[str] = '12.8'\n"),
    "deep": ("PYTORCH_RELEASES_CODE_CC = " + "[" * 100_000 + "]" * 100_000 + "\n", "cuda = " + "-" * 200_000 + "1\n"),
    "code": (
        f"open({str(PWNED)!r}, 'w').write('ran')\nPYTORCH_RELEASES_CODE_CC = __import__('os').getcwd()\n",
        f"cuda = open({str(PWNED)!r}, 'w').write('ran')\n",
    ),
    "wrong types": ("PYTORCH_RELEASES_CODE_CC = {'12.8': {'x86_64': {'a', None}}, 5: [1]}\n", "cuda = 12.8\n"),
}


def crafted_wheel(kind: str):
    cuda_init, version_py = CRAFTED[kind]

    def wheel(version: str) -> bytes:
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr(
                f"torch-{version}.dist-info/METADATA",
                f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n",
            )
            archive.writestr("torch/version.py", version_py + f"__version__ = '{version}'\n")
            archive.writestr("torch/cuda/__init__.py", cuda_init)
        return buffer.getvalue()

    return wheel


@pytest.fixture(params=list(CRAFTED))
def crafted(request, monkeypatch):
    monkeypatch.setattr(resume, "wheel", crafted_wheel(request.param))
    PWNED.unlink(missing_ok=True)
    return request.param


def plan_reads(env) -> subprocess.CompletedProcess:
    return run_tool("plan", "--json", "--os", "linux", "--no-detect", "--with", "torch", env=env)


def test_crafted_torch_sources_are_never_run_and_plan_reads_what_is_left(crafted, index_url, tmp_path):  # noqa: F811
    url, _ = index_url
    env = make_env(tmp_path, "one")
    done = update(env, url)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    assert "Traceback" not in done.stderr and json.loads(done.stdout)
    assert not PWNED.exists()
    for name in ("tensorflow-updates.toml", "companions-updates.toml"):
        path = Path(env["TFGPU_USER_DATA_DIR"]) / name
        if path.exists():
            tomllib.loads(path.read_text("utf-8"))
    planned = plan_reads(env)
    assert planned.returncode in (0, 1, 3) and "Traceback" not in planned.stderr, planned.stderr
    assert json.loads(planned.stdout)


def test_two_update_data_at_once_leave_an_overlay_plan_reads(index_url, tmp_path):  # noqa: F811
    url, _ = index_url
    first, second = make_env(tmp_path, "one"), make_env(tmp_path, "two")
    command = [sys.executable, "-m", "tfgpu", "update-data", "--index", url, "--json"]
    runs = [subprocess.Popen(command, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for e in (first, second)]  # fmt: skip
    outputs = [run.communicate(timeout=300) for run in runs]
    for run, (out, err) in zip(runs, outputs, strict=True):
        assert run.returncode in (0, 1), out + err
        assert "Traceback" not in err and json.loads(out)
    planned = plan_reads(first)
    assert planned.returncode in (0, 1, 3) and "Traceback" not in planned.stderr, planned.stderr
    versions = sorted(
        r["version"]
        for r in tomllib.loads((Path(first["TFGPU_USER_DATA_DIR"]) / "companions-updates.toml").read_text())["release"]
    )
    assert versions == list(resume.TORCH)
