"""Every script under ``scripts/`` that measures a figure the docs quote runs here, in a quick mode,
and prints its figure (a ratio to its anchor where it has one): a script that breaks (an option the
tool no longer takes, a loopback index the URL door now refuses) fails the slow tier instead of the
next person who wants the figure.

Nothing here asserts a time: the machine is shared, and the figures are the scripts' to print. The
scripts run as their users run them (a process of their own, from the checkout); the envs, wheels,
indexes and channels are the suite's real stand-ins (tests/envtree.py, tests/wheelhouse.py,
tests/localindex.py, tests/condachannel.py), so only the ``network`` ones reach PyPI. A timeout
only catches a hang.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import wheelhouse

import tfgpu

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"
HANG = 900
"""Seconds a quick run may take before it counts as hung (a few, or a minute on a loaded machine)."""
RATIO = re.compile(r"\d+\.\d+x")

pytestmark = pytest.mark.slow


def run_script(name: str, *args: str, env: dict | None = None, ok: tuple[int, ...] = (0,)) -> str:
    """Run ``scripts/<name>`` with this interpreter; its stdout, after checking it ended well."""
    done = subprocess.run(
        [sys.executable, str(SCRIPTS / name), *args],
        capture_output=True,
        text=True,
        timeout=HANG,
        cwd=ROOT,
        env=env,
    )
    assert done.returncode in ok, f"{name} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert "Traceback" not in done.stdout + done.stderr, done.stderr[-3000:]
    return done.stdout


def tool_env(tmp_path: Path) -> dict[str, str]:
    """The scripts' children keep their caches and logs in ``tmp_path``, never the user's."""
    return {
        **os.environ,
        "TFGPU_CACHE_DIR": str(tmp_path / "cache"),
        "TFGPU_LOG_DIR": str(tmp_path / "logs"),
        "TFGPU_ENVS_DIR": str(tmp_path / "envs"),
        "UV_CACHE_DIR": str(tmp_path / "uv-cache"),
        "XDG_CACHE_HOME": str(tmp_path / "xdg"),
    }


def test_bench_doctor_prints_its_ratio_to_a_bare_interpreter(tmp_path):
    if not wheelhouse.have_compiler():
        pytest.skip("gcc builds the env's libraries")
    from envtree import make_env

    env = make_env(tmp_path / "env")
    out = run_script("bench_doctor.py", "--prefix", str(env), "--runs", "1", env=tool_env(tmp_path))
    assert re.search(r"ratio \(doctor / python -c pass\) .*" + RATIO.pattern, out), out
    assert "CPU seconds" in out


def test_bench_plan_prints_its_ratio_to_a_bare_interpreter(tmp_path):
    # Exit 1 is the script's "over the target", which a loaded machine may be: the figure is printed either way.
    out = run_script("bench_plan.py", "--runs", "1", env=tool_env(tmp_path), ok=(0, 1))
    assert re.search(r"plan --json: \d+\.\d+x a bare interpreter start", out), out


def test_bench_lock_prints_its_ratio_to_uv_against_a_local_index(tmp_path, index_url):
    out = run_script(
        "bench_lock.py",
        "--runs",
        "1",
        "--tf",
        "2.21",
        "--python",
        f"{sys.version_info[0]}.{sys.version_info[1]}",
        "--index",
        index_url,
        "--cache",
        str(tmp_path / "cache"),
        env=tool_env(tmp_path),
    )
    assert re.search(r"ratio \(lock / uv\) .*" + RATIO.pattern, out), out
    assert re.search(r"ratio \(lock / both files by hand\) +median +\d+\.\d+x", out), out
    assert re.search(r"the floor: only the lock's three uv runs +median +\d+\.\d+ s .*ratio to uv \d+\.\d+x", out), out
    assert "the same pins as uv by hand" in out


@pytest.mark.network
def test_bench_lock_prints_its_ratio_to_uv_against_pypi(tmp_path):
    out = run_script("bench_lock.py", "--runs", "1", "--cache", str(tmp_path / "cache"), env=tool_env(tmp_path))
    assert re.search(r"ratio \(lock / uv\) .*" + RATIO.pattern, out), out


def test_bench_conda_prints_solve_install_and_lock_figures(tmp_path):
    if not wheelhouse.have_compiler():
        pytest.skip("gcc builds the channel's libraries")
    out = run_script("bench_conda.py", "--runs", "1", env=tool_env(tmp_path))
    assert re.search(r"solve \+ install: +\d+\.\d ms", out), out
    assert re.search(r"`lock --mode conda`.*: \d+ ms median", out), out


def test_bench_pip_prints_its_ratios_from_a_wheel_directory(tmp_path, local_wheels):
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    out = run_script(
        "bench_pip.py", "--tf", "2.21", "--python", python, "--find-links", str(local_wheels), env=tool_env(tmp_path)
    )
    for line in ("tool cold / uv cold", "tool cold / pip cold", "tool warm / uv warm"):
        assert re.search(re.escape(line) + r" +" + RATIO.pattern, out), out


def test_bench_repair_prints_its_ratios_from_a_wheel_directory(tmp_path, repair_wheels):
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    out = run_script(
        "bench_repair.py",
        "--tf",
        "2.21.0",
        "--python",
        python,
        "--runs",
        "1",
        "--find-links",
        str(repair_wheels),
        env=tool_env(tmp_path),
    )
    assert re.search(r"repair / uv by hand: " + RATIO.pattern + "; repair / rebuild: " + RATIO.pattern, out), out


def test_measure_disk_prints_what_an_env_shares_with_the_caches(tmp_path):
    if not wheelhouse.have_compiler():
        pytest.skip("gcc builds the env's libraries")
    from envtree import make_env

    env = make_env(tmp_path / "env")
    cache = tmp_path / "cache"
    cache.mkdir()
    out = run_script("measure_disk.py", "--prefix", str(env), "--cache", str(cache), env=tool_env(tmp_path))
    assert str(env) in out and "shared with the caches through hard links" in out, out


def test_measure_bytecode_prints_files_compiled_and_reused(tmp_path):
    # Two copies of one package's sources, other inodes and times: what two uv cache entries hold.
    first, second = tmp_path / "first", tmp_path / "second"
    sources = Path(tfgpu.__file__).parent / "resolver"  # the package under test (checkout or wheel)
    shutil.copytree(sources, first / "resolver", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(sources, second / "resolver", ignore=shutil.ignore_patterns("__pycache__"))
    out = run_script("measure_bytecode.py", "--first", str(first), "--second", str(second), env=tool_env(tmp_path))
    assert re.search(r"\d+ compiled", out) and re.search(r"\d+ reused", out), out


def test_measure_test_run_prints_the_outcome_line_and_the_disk_left(tmp_path):
    out = run_script(
        "measure_test_run.py",
        "--work",
        str(tmp_path / "work"),
        "--",
        "tests/test_controls.py",
        env=tool_env(tmp_path),
    )
    assert re.search(r"\d+ passed", out), out


@pytest.mark.network
def test_measure_twice_prints_the_cache_before_and_after_one_copy(tmp_path):
    out = run_script("measure_twice.py", "--package", "six==1.17.0", env=tool_env(tmp_path))
    assert re.search(r"cache and both envs, before -> after: +\d+\.\d -> \d+\.\d MB", out), out


@pytest.mark.gpu
def test_bench_matmul_reference_prints_its_rates():
    """Runs with an env's own Python holding TensorFlow, on a GPU (``TFGPU_TEST_TF_PYTHON``)."""
    python = os.environ.get("TFGPU_TEST_TF_PYTHON")
    if not python:
        pytest.skip("TFGPU_TEST_TF_PYTHON names no Python with TensorFlow and a GPU")
    done = subprocess.run(
        [python, str(SCRIPTS / "bench_matmul_reference.py"), "--n", "1024", "--rounds", "1", "--calls", "4"],
        capture_output=True,
        text=True,
        timeout=HANG,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    import json

    rates = json.loads(done.stdout.strip().splitlines()[-1])["dtypes"]
    assert all(rate["median"] > 0 for rate in rates.values()), rates
