"""A repair interrupted at the moment its install is half done (SIGTERM, SIGINT, SIGKILL) leaves
the user's env as it was, says so, and the next ``repair``, ``repair --undo``, ``doctor`` and the
user's own ``uv pip install`` all work.

Everything is real: a venv made with uv, real uv installing real wheels from a local wheelhouse
(stand-ins for NVIDIA's, fattened to a few thousand files so an install takes long enough to be
caught half way), the tool as a child process, real signals. The moment is seen, not timed: the
test polls the env until the state it wants is there (a package directory, a ``.dist-info``, the
journal) and then freezes uv (SIGSTOP on its process group) so the state it saw is the state the
signal meets. uv gets its own cache directory here, never the user's.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
import repairhelpers as rh
import wheelhouse

pytestmark = pytest.mark.slow

QUIET = ("--no-detect", "--yes", "--no-verify")
HANG = 240
"""Seconds after which a wait is a hang (never a timing the test asserts)."""
FILES = 4000
"""Small files added to each fat wheel: enough for the poll below to see each state on a busy machine."""
FAT = {"nvidia-cuda-nvcc-cu12": "nvidia/cuda_nvcc/lib", "nvidia-cudnn-cu12": "nvidia/cudnn/lib"}


def _fatten(wheels: Path, dist: str, where: str, count: int = FILES) -> None:
    """Rebuild ``dist``'s wheel in ``wheels`` with ``count`` more small files under ``where``."""
    stem = dist.replace("-", "_")
    for path in wheels.glob(f"{stem}-*.whl"):
        with zipfile.ZipFile(path) as archive:
            files = {n: archive.read(n) for n in archive.namelist() if ".dist-info/" not in n}
            executables = tuple(n for n in archive.namelist() if (archive.getinfo(n).external_attr >> 16) & 0o111)
        version = path.name.split("-")[1]
        files.update({f"{where}/part-{i:05d}.txt": f"{dist} {i}\n".encode() for i in range(count)})
        path.unlink()
        wheelhouse.wheel(wheels, dist, version, files, executables=executables)


@pytest.fixture(scope="module")
def fat_wheels(repair_wheels, tmp_path_factory) -> Path:
    wheels = tmp_path_factory.mktemp("fat-repair-wheels")
    for path in repair_wheels.iterdir():
        if path.is_file():
            shutil.copy2(path, wheels / path.name)
    for dist, where in FAT.items():
        _fatten(wheels, dist, where)
    return wheels


@pytest.fixture
def tool_env(tmp_path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        TFGPU_CACHE_DIR=str(tmp_path / "cache"),
        TFGPU_LOG_DIR=str(tmp_path / "logs"),
        TFGPU_ENVS_DIR=str(tmp_path / "envs"),
        UV_CACHE_DIR=str(tmp_path / "uv-cache"),
        COLUMNS="160",
    )
    env.pop("VIRTUAL_ENV", None)
    return env


@pytest.fixture
def user_env(tmp_path, fat_wheels, tool_env) -> Path:
    return rh.user_venv(tmp_path / "env", fat_wheels, "tensorflow==2.21.0", env=tool_env)


def tree(prefix: Path) -> dict[str, str]:
    """``find`` + sha256 of the env (rh.snapshot: uv's own cache note aside)."""
    return rh.snapshot(prefix)


def site(prefix: Path) -> Path:
    return next(prefix.glob("lib/python3*/site-packages"))


def tool(env: dict, *argv: str, timeout: int = HANG) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tfgpu", *argv], capture_output=True, text=True, env=env, timeout=timeout
    )


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        try:
            children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
        except OSError:
            continue
        found += [int(c) for c in children]
        todo += [int(c) for c in children]
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][0] != "Z"
    except OSError:
        return False


def interrupt_when(user_env: Path, wheels: Path, env: dict, seen, signum: int) -> subprocess.CompletedProcess:
    """Start a repair; when ``seen(site)`` first holds, freeze every process under it (uv), send it
    ``signum`` and wait for it to end; returns its result (stdout, stderr, returncode)."""
    child = subprocess.Popen(
        [sys.executable, "-m", "tfgpu", "repair", "--prefix", str(user_env), *QUIET]
        + ["--find-links", str(wheels), "--offline"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    packages = site(user_env)
    deadline = time.monotonic() + HANG
    try:
        while not seen(packages):
            assert child.poll() is None, f"the repair ended before the state was seen: {child.communicate()}"
            assert time.monotonic() < deadline, "hang: the state never came"
            time.sleep(0)  # a state may last a few milliseconds: poll, yielding the CPU only
        frozen = _descendants(child.pid)
        for pid in frozen:
            os.kill(pid, signal.SIGSTOP)
        os.kill(child.pid, signum)
        out, err = child.communicate(timeout=HANG)
        for pid in frozen:  # SIGKILL: the kernel kills uv with the tool (PR_SET_PDEATHSIG)
            while _alive(pid):
                assert time.monotonic() < deadline, f"hang: {pid} outlived the repair"
                time.sleep(0.05)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
    return subprocess.CompletedProcess(child.args, child.returncode, out, err)


def first_files(packages: Path) -> bool:
    """uv has made a package's directories and linked its first files into them."""
    return any((packages / where).is_dir() and len(os.listdir(packages / where)) < FILES // 3 for where in FAT.values())


def half_dist_info(packages: Path) -> bool:
    """A .dist-info of the install is there (the wheel's METADATA and RECORD), its files not all."""
    return any(
        list(packages.glob(f"{dist.replace('-', '_')}-*.dist-info"))
        and (packages / where).is_dir()
        and len(os.listdir(packages / where)) < FILES
        for dist, where in FAT.items()
    )


def requested(packages: Path) -> bool:
    """uv writes INSTALLER and REQUESTED, then its own RECORD through a ``.tmp*`` file: neither is
    in the wheel's RECORD, so ``uv pip uninstall`` of such a package leaves them behind."""
    return any(list(packages.glob(f"{dist.replace('-', '_')}-*.dist-info/REQUESTED")) for dist in FAT)


STATES = {"first-files": first_files, "half-dist-info": half_dist_info, "requested": requested}


@pytest.mark.parametrize("state", sorted(STATES))
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_an_interrupt_during_the_install_leaves_the_env_as_it_was(user_env, fat_wheels, tool_env, state, signum):
    before = tree(user_env)
    done = interrupt_when(user_env, fat_wheels, tool_env, STATES[state], signum)
    after = tree(user_env)
    assert done.returncode == 128 + signum, done.stderr
    assert "nothing was left half-built" not in done.stderr
    assert f"{user_env} is as it was before it" in done.stderr, done.stderr
    assert sorted(set(before) ^ set(after)) == [] and after == before
    assert not (user_env / "etc" / "tfgpu").exists()
    again = tool(tool_env, "repair", "--prefix", str(user_env), *QUIET, "--find-links", str(fat_wheels), "--offline")
    assert again.returncode == 0, again.stdout + again.stderr


@pytest.mark.parametrize("state", sorted(STATES))
def test_undo_after_a_sigkill_during_the_install_restores_the_env_byte_for_byte(user_env, fat_wheels, tool_env, state):
    before = tree(user_env)
    interrupt_when(user_env, fat_wheels, tool_env, STATES[state], signal.SIGKILL)
    journal = json.loads((user_env / "etc" / "tfgpu" / "repair.json").read_text())
    assert journal["state"] == "applying"
    assert tree(user_env) != before  # uv's half-written package is there
    undone = tool(tool_env, "repair", "--undo", "--prefix", str(user_env), "--json")
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert tree(user_env) == before
    mine = subprocess.run(
        [rh.uv(), "pip", "install", "--python", str(user_env / "bin" / "python"), "--no-index"]
        + ["--find-links", str(fat_wheels), "nvidia-cudnn-cu12==9.28.0.42", "nvidia-cuda-nvcc-cu12"],
        capture_output=True,
        text=True,
        env=tool_env,
        timeout=HANG,
    )
    assert mine.returncode == 0, mine.stderr


@pytest.mark.parametrize("state", sorted(STATES))
def test_the_next_repair_after_a_sigkill_takes_back_the_half_install_first(user_env, fat_wheels, tool_env, state):
    interrupt_when(user_env, fat_wheels, tool_env, STATES[state], signal.SIGKILL)
    again = tool(tool_env, "repair", "--prefix", str(user_env), *QUIET, "--find-links", str(fat_wheels), "--offline")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "interrupted" in again.stderr
    undone = tool(tool_env, "repair", "--undo", "--prefix", str(user_env), "--json")
    assert undone.returncode == 0, undone.stdout + undone.stderr


def test_doctor_names_a_repair_killed_before_its_install_and_its_undo(user_env, fat_wheels, tool_env):
    before = tree(user_env)
    journal = user_env / "etc" / "tfgpu" / "repair.json"
    interrupt_when(user_env, fat_wheels, tool_env, lambda _: journal.exists(), signal.SIGKILL)
    assert json.loads(journal.read_text())["state"] == "applying"
    doctor = tool(tool_env, "doctor", "--prefix", str(user_env), "--json")
    found = {f["id"]: f for f in json.loads(doctor.stdout)["findings"]}
    assert found["env.repair"]["status"] == "fail", found.get("env.repair")
    assert f"repair --undo --prefix {user_env}" in found["env.repair"]["fix"]
    assert "interrupted" in found["env.repair"]["title"]
    undone = tool(tool_env, "repair", "--undo", "--prefix", str(user_env), "--json")
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert tree(user_env) == before
    doctor = tool(tool_env, "doctor", "--prefix", str(user_env), "--json")
    assert "env.repair" not in {f["id"] for f in json.loads(doctor.stdout)["findings"]}
