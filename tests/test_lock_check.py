"""``lock --check FILE``: exit 0 while a lock is what its recorded inputs resolve to, 1 with what
changed. Real uv against a real local index that the tests change under the lock."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import localindex
import pytest
import wheelhouse
from conftest import run_tool

from tfgpu.lock.pip import lockfile as pip_lock

TARGET = ("--tf", "2.21", "--mode", "pip", "--python", "3.11", "--no-detect")


def _env(base: Path, url: str) -> dict:
    return dict(os.environ, TFGPU_INDEX_URL=url, TFGPU_CACHE_DIR=str(base / "cache"), TFGPU_LOG_DIR=str(base / "logs"))


@pytest.fixture(scope="module")
def shared(tmp_path_factory, local_wheels):
    """One index and one lock for the tests that do not change the index."""
    base = tmp_path_factory.mktemp("lock-check")
    root = localindex.build_index(local_wheels, base / "index")
    with localindex.Server(root) as url:
        env = _env(base, url)
        path = base / "team.txt"
        done = run_tool("lock", *TARGET, "--platform", "linux-64", "-o", str(path), env=env)
        assert done.returncode == 0, done.stderr
        yield env, path


@pytest.fixture
def env(shared) -> dict:
    return shared[0]


@pytest.fixture
def lock_file(shared, tmp_path) -> Path:
    """A copy of the shared lock (tests may edit it)."""
    path = tmp_path / "team.txt"
    shutil.copy2(shared[1], path)
    return path


def test_a_fresh_lock_is_current(lock_file, env):
    done = run_tool("lock", "--check", str(lock_file), env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"current: {lock_file}")
    report = json.loads(run_tool("lock", "--check", str(lock_file), "--json", env=env).stdout)
    assert report == {
        "lock": str(lock_file),
        "mode": "pip",
        "platforms": ["linux-64"],
        "tensorflow": "2.21.0",
        "python": "3.11",
        "current": True,
        "packages": 7,
        "changes": [],
    }


def test_a_new_release_inside_a_locked_range_makes_it_stale(tmp_path, local_wheels):
    """TF's and-cuda extra gives ranges: a newer cuDNN on the index means the lock is no longer what
    its inputs resolve to (uv's cached answers are not trusted: it asks the index again)."""
    wheels = tmp_path / "wheels"
    shutil.copytree(local_wheels, wheels, ignore=shutil.ignore_patterns(".*"))
    root = localindex.build_index(wheels, tmp_path / "index")
    with localindex.Server(root) as url:
        env, lock_file = _env(tmp_path, url), tmp_path / "team.txt"
        assert run_tool("lock", *TARGET, "--platform", "linux-64", "-o", str(lock_file), env=env).returncode == 0
        wheelhouse.wheel(wheels, "nvidia-cudnn-cu12", "9.29.0.1", {"nvidia/cudnn/lib/README": b"newer\n"})
        localindex.build_index(wheels, root)
        done = run_tool("lock", "--check", str(lock_file), "--json", env=env)
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["current"] is False
    assert [c for c in report["changes"] if c["kind"] == "package"] == [
        {
            "kind": "package",
            "text": "linux-64: nvidia-cudnn-cu12 9.28.0.42 -> 9.29.0.1",
            "platform": "linux-64",
            "package": "nvidia-cudnn-cu12",
            "locked": "9.28.0.42",
            "now": "9.29.0.1",
        }
    ]
    human = run_tool("lock", "--check", str(lock_file), env=env | {"UV_HTTP_RETRIES": "0"})  # no index: an error
    assert human.returncode == 1 and "error: lock-failed" in human.stderr


def test_inputs_this_tool_would_lock_differently_are_named(lock_file, env):
    """A lock from a tool whose data asked for other requirements (here: without the ptxas floor)."""
    lock = pip_lock.read(lock_file)
    meta = dict(lock.meta)
    meta.pop("sha256")
    older = [r for r in meta["resolution"]["requirements"] if not r.startswith("nvidia-cuda-nvcc")]
    meta["resolution"] = meta["resolution"] | {"requirements": older}
    meta["inputs_sha256"] = pip_lock.inputs_digest(
        pip_lock.lock_inputs(older, meta["python"], meta["python_platform"], meta["index"])
    )
    lock_file.write_text(pip_lock.render(meta, lock.body, str(lock_file)))
    done = run_tool("lock", "--check", str(lock_file), "--json", env=env)
    assert done.returncode == 1
    [change] = [c for c in json.loads(done.stdout)["changes"] if c["kind"] == "inputs"]
    assert change["input"] == "requirements" and "+ nvidia-cuda-nvcc-cu12>=12.6.3" in change["text"]


def test_a_project_file_that_moved_on_makes_the_lock_stale(lock_file, env, tmp_path):
    project = tmp_path / "tfgpu.toml"
    project.write_text('tf = "2.20"\nmode = "pip"\nplatforms = ["linux-64"]\n')
    done = run_tool("lock", "--check", str(lock_file), env=env | {"TFGPU_PROJECT_FILE": str(project)})
    assert done.returncode == 1
    assert "wanted: the project file asks for --tf 2.20; the lock has TensorFlow 2.21.0" in done.stdout


def test_an_edited_lock_is_an_error_not_a_stale_lock(lock_file, env):
    lock_file.write_text(lock_file.read_text().replace("9.28.0.42", "9.28.0.43"))
    done = run_tool("lock", "--check", str(lock_file), env=env)
    assert done.returncode == 2 and "error: lock-modified" in done.stderr


def test_a_conda_lock_is_checked_platform_by_platform(tmp_path, tmp_path_factory, lock_channel, lock_index):
    import madelocks

    env = dict(
        os.environ,
        TFGPU_INDEX_URL=lock_index,
        TFGPU_CACHE_DIR=str(tmp_path / "cache"),
        TFGPU_LOG_DIR=str(tmp_path / "logs"),
        HOME=str(tmp_path),
    )
    # The real lock, made once a session (tests/madelocks.py): the check is the subject here.
    path = madelocks.conda_lock(tmp_path_factory, tmp_path / "conda-lock.yml", lock_channel, lock_index)
    done = run_tool("lock", "--check", str(path), "--json", env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["current"] and report["mode"] == "conda" and report["platforms"] == ["linux-64"]
    assert report["packages"] > 3
    text = path.read_text()
    recorded = text.split("content_hash:")[1].split("linux-64:")[1].split()[0]
    path.write_text(text.replace(recorded, "f" * 64))  # the inputs record no longer matches
    stale = json.loads(run_tool("lock", "--check", str(path), "--json", env=env).stdout)
    assert not stale["current"] and "content_hash does not match" in stale["changes"][0]["text"]
