"""``lock --check`` with no file: the locks a project file describes, found where ``lock`` writes
them and checked; and the advice of a stale check, a command that writes the lock now wanted. Real
project files, real locks written by the tool with real uv from a real local index (tests/localindex.py)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
from pathlib import Path

import localindex
import pytest
from conftest import run_tool

LOCK = ("--no-detect",)  # the project file says the rest; the host plays no part


@pytest.fixture(scope="module")
def index(local_wheels, tmp_path_factory):
    root = localindex.build_index(local_wheels, tmp_path_factory.mktemp("index"))
    with localindex.Server(root) as url:
        yield url


@pytest.fixture
def env(index, tmp_path) -> dict:
    """The suite's environment with the project-file walk on (the suite turns it off by default)."""
    found = dict(os.environ, TFGPU_INDEX_URL=index, TFGPU_CACHE_DIR=str(tmp_path / "cache"))
    found["TFGPU_LOG_DIR"] = str(tmp_path / "logs")
    found.pop("TFGPU_PROJECT_FILE", None)
    return found


@pytest.fixture(scope="module")
def project_lock(index, tmp_path_factory) -> Path:
    """The lock ``tfgpu-install lock`` writes for PROJECT, made once for the module: the same bytes
    in any directory (the lock names no directory of its own). Tests that check a lock copy it in
    (``locked``); the tests of what ``lock`` writes for a project still run it."""
    directory = tmp_path_factory.mktemp("project-lock")
    _project(directory, PROJECT)
    env = dict(os.environ, TFGPU_INDEX_URL=index, TFGPU_CACHE_DIR=str(directory / "cache"))
    env["TFGPU_LOG_DIR"] = str(directory / "logs")
    env.pop("TFGPU_PROJECT_FILE", None)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(directory)
        made = run_tool("lock", *LOCK, env=env)
    assert made.returncode == 0, made.stderr
    return directory / "tfgpu-lock.linux-64.txt"


@pytest.fixture
def locked(project_lock):
    """``locked(directory)``: PROJECT's lock, as ``lock`` wrote it, copied into ``directory``."""

    def place(directory: Path) -> None:
        shutil.copyfile(project_lock, directory / project_lock.name)

    return place


def _project(directory: Path, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "tfgpu.toml"
    path.write_text(text)
    return path


PROJECT = 'tf = "2.21"\nmode = "pip"\npython = "3.11"\nplatforms = ["linux-64"]\n'


def _advice(stdout: str) -> str:
    [line] = [line for line in stdout.splitlines() if "to take these changes, run:" in line]
    return line.split("to take these changes, run: ", 1)[1]


def test_no_file_and_no_project_file_names_both_ways(tmp_path, env, monkeypatch):
    monkeypatch.chdir(tmp_path)
    done = run_tool("lock", "--check", env=env)
    assert done.returncode == 2
    assert "error: bad-arguments" in done.stderr
    assert "lock --check tfgpu-lock.linux-64.txt" in done.stderr and "tfgpu.toml" in done.stderr


@pytest.mark.parametrize("kind", ["tfgpu.toml", "pyproject.toml"])
def test_the_project_s_locks_are_found_and_checked(kind, tmp_path, env, monkeypatch):
    if kind == "tfgpu.toml":
        _project(tmp_path, PROJECT)
    else:
        (tmp_path / kind).write_text('[project]\nname = "team"\n\n[tool.tfgpu]\n' + PROJECT)
    monkeypatch.chdir(tmp_path)
    made = run_tool("lock", *LOCK, env=env)
    assert made.returncode == 0, made.stderr
    done = run_tool("lock", "--check", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"current: {tmp_path / 'tfgpu-lock.linux-64.txt'}")
    report = json.loads(run_tool("lock", "--check", "--json", env=env).stdout)
    assert report["project"] == str(tmp_path / kind) and report["current"] is True
    assert [lock["lock"] for lock in report["locks"]] == [str(tmp_path / "tfgpu-lock.linux-64.txt")]
    assert report["missing"] == []


def test_after_the_project_changes_the_advice_writes_the_new_lock(tmp_path, env, monkeypatch, locked):
    """The project moves to another Python: the lock's own command would write the old target again;
    the advice is `tfgpu-install lock`, and running it makes the check pass."""
    project = _project(tmp_path, PROJECT)
    monkeypatch.chdir(tmp_path)
    locked(tmp_path)
    old_header = (tmp_path / "tfgpu-lock.linux-64.txt").read_text()
    project.write_text(PROJECT.replace('"3.11"', '"3.12"'))
    done = run_tool("lock", "--check", env=env)
    assert done.returncode == 1, done.stderr
    assert "wanted: the project file asks for --python 3.12; the lock is for Python 3.11" in done.stdout
    # the check speaks of what the project wants, not of the file's header (the temporary path
    # may hold the word: the basetemp a run names)
    assert "header" not in done.stdout.replace(str(tmp_path), "TMP")
    advice = _advice(done.stdout)
    assert advice == "tfgpu-install lock"
    again = run_tool(*shlex.split(advice)[1:], *LOCK, env=env)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "tfgpu-lock.linux-64.txt").read_text() != old_header
    assert run_tool("lock", "--check", env=env).returncode == 0


def test_a_lock_given_by_name_takes_the_project_s_advice_too(tmp_path, env, monkeypatch):
    """``lock --check FILE`` under a project that moved on: the advice writes the project's lock, with
    ``-o`` naming the file when ``lock`` would not write that name by itself."""
    project = _project(tmp_path, PROJECT)
    monkeypatch.chdir(tmp_path)
    assert run_tool("lock", *LOCK, "-o", "team.txt", env=env).returncode == 0
    beside = run_tool("lock", "--check", "team.txt", "--tf", "2.20", env=env)  # a flag beside the project file
    assert beside.returncode == 1
    assert "wanted: the command line asks for --tf 2.20; the lock has TensorFlow 2.21.0" in beside.stdout
    assert _advice(beside.stdout) == "tfgpu-install lock --tf 2.20 -o team.txt"
    project.write_text(PROJECT.replace('"3.11"', '"3.12"'))
    done = run_tool("lock", "--check", "team.txt", env=env)
    assert done.returncode == 1
    assert "wanted: the project file asks for --python 3.12" in done.stdout
    assert _advice(done.stdout) == "tfgpu-install lock -o team.txt"


def test_selectors_on_the_command_line_give_the_exact_command(tmp_path, env, monkeypatch, locked):
    monkeypatch.chdir(tmp_path)
    env = env | {"TFGPU_PROJECT_FILE": "none"}
    locked(tmp_path)  # the lock of --tf 2.21 --python 3.11 --platform linux-64, as PROJECT's is
    done = run_tool("lock", "--check", "tfgpu-lock.linux-64.txt", "--python", "3.12", env=env)
    assert done.returncode == 1
    assert (
        _advice(done.stdout)
        == "tfgpu-install lock --tf 2.21.0 --mode pip --python 3.12 --platform linux-64 --no-detect"
    )


def test_a_stale_lock_of_an_unchanged_target_gets_its_own_command(tmp_path, env, monkeypatch):
    """Only the world moved on (here: the lock's index went away and came back with another file):
    the lock's own command, with its exact target, writes it again."""
    project = _project(tmp_path, PROJECT)
    monkeypatch.chdir(tmp_path)
    assert run_tool("lock", *LOCK, env=env).returncode == 0
    path = tmp_path / "tfgpu-lock.linux-64.txt"
    from tfgpu.lock.check import Check, advise
    from tfgpu.lock.pip import lockfile

    found = Check(path, "pip", ["linux-64"], "2.21.0", "3.11")
    found.regenerate = lockfile.regenerate_command(lockfile.read(path).header, str(path))
    found.add("package", "linux-64: numpy 2.0 -> 2.1")
    assert advise(found, {"project": str(project), "source": "the project file"}) == found.regenerate
    assert "--tf 2.21.0" in found.regenerate and "--python 3.11" in found.regenerate


def test_a_missing_platform_lock_is_not_current(tmp_path, env, monkeypatch, locked):
    project = _project(tmp_path, PROJECT)
    monkeypatch.chdir(tmp_path)
    locked(tmp_path)
    project.write_text(PROJECT.replace('["linux-64"]', '["linux-64", "linux-aarch64"]'))
    done = run_tool("lock", "--check", env=env)
    assert done.returncode == 1, done.stderr
    assert f"current: {tmp_path / 'tfgpu-lock.linux-64.txt'}" in done.stdout  # one platform of two is no change
    assert f"missing: {tmp_path / 'tfgpu-lock.linux-aarch64.txt'}" in done.stdout
    assert _advice(done.stdout) == "tfgpu-install lock"
    report = json.loads(run_tool("lock", "--check", "--json", env=env).stdout)
    assert report["current"] is False
    assert report["missing"] == [{"platform": "linux-aarch64", "lock": str(tmp_path / "tfgpu-lock.linux-aarch64.txt")}]


def test_locks_beside_the_project_are_found_from_a_subdirectory(tmp_path, env, monkeypatch, locked):
    project = _project(tmp_path / "team", PROJECT)
    monkeypatch.chdir(project.parent)
    locked(project.parent)
    (project.parent / "src").mkdir()
    monkeypatch.chdir(project.parent / "src")
    assert run_tool("lock", "--check", env=env).returncode == 0
    project.write_text(PROJECT.replace('"2.21"', '"2.20"'))
    done = run_tool("lock", "--check", env=env)
    assert done.returncode == 1
    assert _advice(done.stdout) == f"cd {project.parent} && tfgpu-install lock"


def test_a_project_whose_locks_were_never_written(tmp_path, env, monkeypatch):
    _project(tmp_path, PROJECT)
    monkeypatch.chdir(tmp_path)
    done = run_tool("lock", "--check", env=env)
    assert done.returncode == 2
    assert "error: lock-unreadable" in done.stderr and "tfgpu-lock.linux-64.txt" in done.stderr
    assert "Write it: tfgpu-install lock" in done.stderr


def test_a_conda_project_s_lock_is_found(tmp_path, lock_channel, lock_index, monkeypatch):
    import sys

    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    env = dict(os.environ, TFGPU_INDEX_URL=lock_index, TFGPU_CACHE_DIR=str(tmp_path / "cache"), HOME=str(tmp_path))
    env.pop("TFGPU_PROJECT_FILE", None)
    project = _project(
        tmp_path / "p",
        f'tf = "2.13"\nmode = "conda"\npython = "{python}"\nplatforms = ["linux-64"]\nchannels = ["{lock_channel}"]\n',
    )
    monkeypatch.chdir(project.parent)
    assert run_tool("lock", *LOCK, env=env).returncode == 0
    done = run_tool("lock", "--check", "--json", env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert [lock["lock"] for lock in report["locks"]] == [str(project.parent / "conda-lock.yml")]
    shutil.move(project.parent / "conda-lock.yml", tmp_path / "elsewhere.yml")
    assert run_tool("lock", "--check", env=env).returncode == 2
