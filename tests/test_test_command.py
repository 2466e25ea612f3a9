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


# The files that start the most uv and pip (users' venvs made for repair and its faults, pip mode's
# builds, interrupted builds): run with a home of their own, they must leave its caches and data as
# they found them. The home stands in for the user's, so that a run elsewhere on the machine (the
# user's own uv, another test run) cannot change what is compared.
HEAVIEST = ("tests/hostile/test_hostile_repair.py", "tests/test_pip_mode.py", "tests/test_interrupts.py")


def user_places(home: Path) -> dict[str, Path]:
    """The user's caches and data, as a shell that exports nothing finds them (uv, pip, the tool's
    own, Jupyter's kernels) and as one that exports their own (``UV_CACHE_DIR`` and the rest)."""
    return {
        "~/.cache": home / ".cache",
        "~/.local": home / ".local",
        "UV_CACHE_DIR": home / "exported" / "uv",
        "PIP_CACHE_DIR": home / "exported" / "pip",
        "TFGPU_CACHE_DIR": home / "exported" / "tfgpu-install",
    }


def snapshot(places: dict[str, Path]) -> dict[str, tuple[int, int]]:
    """Every entry under each place: its size and modification time (nanoseconds)."""
    found = {}
    for label, root in places.items():
        for directory, names, files in os.walk(root):
            for name in names + files:
                path = Path(directory, name)
                info = path.lstat()
                found[f"{label}/{path.relative_to(root)}"] = (info.st_size, info.st_mtime_ns)
    return found


@pytest.mark.slow
def test_the_heaviest_files_leave_the_users_caches_and_data_as_they_were(tmp_path):
    home = tmp_path / "home"
    places = user_places(home)
    for root in places.values():  # a user's, in use: each with something in it already
        root.mkdir(parents=True)
        (root / "the-users").write_text("kept\n")
    for cache in ("uv", "pip", "tfgpu-install"):
        (home / ".cache" / cache).mkdir()
        (home / ".cache" / cache / "the-users").write_text("kept\n")
    for data in ("share/uv", "share/tfgpu-install", "share/jupyter", "state/tfgpu-install"):
        (home / ".local" / data).mkdir(parents=True)
    before = snapshot(places)
    suite = {"TFGPU_", "UV_", "PIP_", "XDG_", "JUPYTER_"}  # what this run's conftest set: the child's shell did not
    env = {key: value for key, value in os.environ.items() if not any(key.startswith(p) for p in suite)}
    env |= {
        "HOME": str(home),
        "UV_CACHE_DIR": str(places["UV_CACHE_DIR"]),
        "PIP_CACHE_DIR": str(places["PIP_CACHE_DIR"]),
        "TFGPU_CACHE_DIR": str(places["TFGPU_CACHE_DIR"]),
        "TFGPU_TEST_CACHE": str(tmp_path / "test-cache"),  # the suite's own place: it may change
        "TMPDIR": str(tmp_path),
    }
    if os.environ.get("UV_PYTHON_INSTALL_DIR"):
        env["UV_PYTHON_INSTALL_DIR"] = os.environ["UV_PYTHON_INSTALL_DIR"]  # the Pythons uv installed, read only
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-m", "not network", *HEAVIEST]
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=3600)
    # Whether those files pass is their own tests' to say (they run in this suite too); this one asks
    # only what they left in the user's places, whatever the outcome.
    assert "collected 0 items" not in done.stdout and " passed" in done.stdout, (
        done.stdout[-3000:] + done.stderr[-2000:]
    )
    after = snapshot(places)
    changed = sorted(path for path in before.keys() | after.keys() if before.get(path) != after.get(path))
    assert changed == [], (changed[:20], done.stdout[-2000:])


def test_the_disk_the_network_tier_needs_is_named_with_the_place():
    from conftest import GB, network_disk_shortfall

    cache, temporary = Path("/cache/tfgpu-install-tests"), Path("/tmp")

    def disk(free_gb: dict, same: bool, held_gb: float = 0):
        return {
            "free": lambda path: free_gb[path] * GB,
            "device": lambda path: 1 if same or path == cache else 2,
            "held": lambda path: int(held_gb * GB),
        }

    assert network_disk_shortfall(cache, temporary, **disk({cache: 30, temporary: 30}, same=True)) is None
    assert network_disk_shortfall(cache, temporary, **disk({cache: 21, temporary: 6}, same=False)) is None
    said = network_disk_shortfall(cache, temporary, **disk({cache: 24, temporary: 24}, same=True))
    assert said.startswith("the network tests need about 25 GB free under /") and "24.0 GB is free" in said
    assert "TFGPU_TEST_CACHE=/cache/tfgpu-install-tests" in said
    # What the cache already holds is not downloaded again.
    assert network_disk_shortfall(cache, temporary, **disk({cache: 24, temporary: 24}, same=True, held_gb=19)) is None
    said = network_disk_shortfall(cache, temporary, **disk({cache: 30, temporary: 2}, same=False))
    assert "need about 5 GB free under /" in said


def test_a_small_disk_skips_the_network_tier_before_it_downloads(tmp_path):
    """The real session hook, with the disk reported nearly full (a plugin of the child run's
    replaces ``shutil.disk_usage``) and every proxy a dead port: a network test that started would
    fail, not download."""
    (tmp_path / "smalldisk.py").write_text(
        "import collections, shutil\n"
        "Usage = collections.namedtuple('Usage', 'total used free')\n"
        "shutil.disk_usage = lambda path: Usage(10**12, 10**12 - 10**9, 10**9)\n"
    )
    dead = "http://127.0.0.1:9"
    env = dict(os.environ, PYTHONPATH=str(tmp_path), TMPDIR=str(tmp_path), HTTPS_PROXY=dead, HTTP_PROXY=dead)
    env["TFGPU_TEST_CACHE"] = str(tmp_path / "test-cache")
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "smalldisk", "-m", "network"]
    done = subprocess.run(
        [*command, "tests/test_pip_e2e.py"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600
    )
    assert done.returncode == 0, done.stdout[-3000:]
    assert "failed" not in done.stdout and " passed" not in done.stdout
    assert "the network tests need about 25 GB free under /" in done.stdout
    assert "1.0 GB is free" in done.stdout and f"TFGPU_TEST_CACHE={tmp_path / 'test-cache'}" in done.stdout
