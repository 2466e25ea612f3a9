"""The README's test command as a newcomer meets it: its header names the system programs whose
absence turns tests into skips (with the command that installs them), and a run leaves nothing
behind in the temporary directory unless a test failed. Real pytest runs in a process of their
own, with a temporary directory of their own (TMPDIR)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import systemprograms

ROOT = Path(__file__).resolve().parent.parent


def _pytest(*argv: str, tmp: Path, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = dict(os.environ, TMPDIR=str(tmp))
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *argv]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd, timeout=600)


def test_nothing_missing_is_one_line():
    assert systemprograms.header([]) == ["system programs the tests use: all present"]


def test_the_missing_are_named_with_the_command_that_installs_them():
    missing = [p for p in systemprograms.PROGRAMS if p.name in ("fish", "munged", "lmod", "hadolint")]
    lines = systemprograms.header(missing)
    assert lines[0] == "system programs missing (their tests will be skipped):"
    assert "  fish: activation in fish" in lines
    assert "  install them (as root): apt-get install -y fish lmod munge" in lines
    assert any(line.startswith("  hadolint: linting the exported Dockerfile; to install, ") for line in lines)


def test_every_package_is_one_ci_installs():
    """The header's command is .ci/run's: the same Debian package names."""
    if not (ROOT / ".ci" / "run").is_file():
        pytest.skip("no checkout here (CI's installed-wheel step): .ci/run is not beside the tests")
    ci = (ROOT / ".ci" / "run").read_text()
    installed = set(re.search(r"apt-get install -y -qq ([^>]*)>", ci.replace("\\\n", " ")).group(1).split())
    assert {p.package for p in systemprograms.PROGRAMS if p.package} <= installed


def test_pytest_keeps_temporary_directories_of_failures_only():
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert options["tmp_path_retention_policy"] == "failed"
    assert 1 <= options["tmp_path_retention_count"] <= 3


def test_a_run_leaves_behind_only_what_failed(tmp_path):
    """Under the project's own configuration: a passing test's directory goes, a failing one's
    stays; a run where everything passes leaves no directory at all."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    (project / "tests").mkdir()
    (project / "tests" / "test_it.py").write_text(
        "import os\n"
        "def test_passes(tmp_path):\n    (tmp_path / 'big').write_bytes(b'x' * 1000)\n"
        "def test_fails(tmp_path):\n    (tmp_path / 'evidence').write_text('look')\n"
        "    assert os.environ.get('FAIL') != '1'\n"
    )
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    env = dict(os.environ, TMPDIR=str(temporary), FAIL="1")
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q"]
    failed = subprocess.run(command, capture_output=True, text=True, env=env, cwd=project, timeout=300)
    assert failed.returncode == 1, failed.stdout
    kept = sorted(p.name for p in temporary.glob("pytest-of-*/pytest-[0-9]*/*") if not p.is_symlink())
    assert kept == ["test_fails0"], kept
    passed = subprocess.run(command, capture_output=True, text=True, env=env | {"FAIL": "0"}, cwd=project, timeout=300)
    assert passed.returncode == 0, passed.stdout
    runs = sorted(p.name for p in temporary.glob("pytest-of-*/pytest-[0-9]*") if not p.is_symlink())
    assert runs == ["pytest-0"]  # the failed run's, kept for a look; the passing run left nothing


def test_the_suite_states_what_is_missing_and_removes_its_session_directory(tmp_path):
    """The suite's own header, and its session directory (conftest.py) gone when the run ends."""
    done = _pytest("tests/test_test_command.py", "-k", "nothing_missing", tmp=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    header = done.stdout.split("collected", 1)[0]
    assert "system programs the tests use: all present" in header or "system programs missing" in header
    assert not list(tmp_path.glob("tfgpu-tests-*"))
