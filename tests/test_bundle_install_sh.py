"""The bundle's install.sh chooses its interpreter by running it: under real bash, with a real
broken shim on PATH (a script that exits 127, as a pyenv shim for an uninstalled version does)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tfgpu import __version__
from tfgpu.lock.bundle.files import install_script

WANT = f"{sys.version_info[0]}.{sys.version_info[1]}"


def _bundle(tmp_path: Path) -> Path:
    """A directory holding only install.sh: no tool wheels, so once it has an interpreter it looks
    for tfgpu-install on PATH, finds none and says so (exit 3) — far enough to show its choice."""
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "install.sh").write_text(install_script(WANT, __version__, "2.21.0", "linux-64"))
    (bundle / "install.sh").chmod(0o755)
    return bundle


def _shims(tmp_path: Path, broken: list[str], working: list[str]) -> Path:
    shims = tmp_path / "shims"
    shims.mkdir()
    for name in broken:
        shim = shims / name
        shim.write_text('#!/bin/sh\necho "pyenv: $0: command not found" >&2\nexit 127\n')
        shim.chmod(0o755)
    for name in working:
        (shims / name).symlink_to(sys.executable)
    return shims


def _run(bundle: Path, shims: Path, tmp_path: Path, **extra: str) -> subprocess.CompletedProcess:
    bash = shutil.which("bash")
    env = {"PATH": f"{shims}:/usr/bin:/bin", "HOME": str(tmp_path / "home"), **extra}
    return subprocess.run(
        [bash, str(bundle / "install.sh"), str(tmp_path / "env")], capture_output=True, text=True, env=env, timeout=60
    )


def test_a_broken_shim_is_passed_over_for_the_next_candidate(tmp_path):
    shims = _shims(tmp_path, broken=[f"python{WANT}"], working=["python3"])
    done = _run(_bundle(tmp_path), shims, tmp_path)
    # past the interpreter: the next thing it says is that there is no tfgpu-install
    assert done.returncode == 3, done.stderr
    assert "carries no tfgpu-install wheels" in done.stderr
    assert "no working one" not in done.stderr


def test_only_broken_interpreters_end_with_its_own_message(tmp_path):
    shims = _shims(tmp_path, broken=[f"python{WANT}", "python3"], working=[])
    done = _run(_bundle(tmp_path), shims, tmp_path)
    assert done.returncode == 3, done.stderr
    assert f"needs Python {WANT}, and no working one was found" in done.stderr
    assert f"{shims}/python{WANT}: does not run (exit 127)" in done.stderr
    assert f"{shims}/python3: does not run (exit 127)" in done.stderr
    assert "TFGPU_PYTHON=" in done.stderr  # the way forward
    assert "command not found" not in done.stderr.replace("pyenv:", "")  # no bash error of its own


def test_a_broken_tfgpu_python_is_named_not_trusted(tmp_path):
    shims = _shims(tmp_path, broken=["broken-python"], working=["python3"])
    done = _run(_bundle(tmp_path), shims, tmp_path, TFGPU_PYTHON=str(shims / "broken-python"))
    assert done.returncode == 3
    assert f"{shims}/broken-python: does not run (exit 127)" in done.stderr


def test_a_python_of_another_version_is_named(tmp_path):
    shims = tmp_path / "shims"
    shims.mkdir()
    for name in (f"python{WANT}", "python3"):  # each answers the version question with another version
        (shims / name).write_text("#!/bin/sh\necho 3.1\n")
        (shims / name).chmod(0o755)
    done = _run(_bundle(tmp_path), shims, tmp_path)
    assert done.returncode == 3
    assert f"{shims}/python{WANT}: Python 3.1" in done.stderr and f"{shims}/python3: Python 3.1" in done.stderr


def test_install_sh_passes_shellcheck(tmp_path):
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck is not installed")
    script = _bundle(tmp_path) / "install.sh"
    done = subprocess.run([shellcheck, "--shell=bash", str(script)], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == "", done.stdout
    assert os.access(script, os.X_OK)
