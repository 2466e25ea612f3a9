"""``repair`` of real TensorFlow envs a user made with plain uv (``tensorflow==X`` without its CUDA
wheels), from PyPI: TF 2.13.1 (CUDA 11.8, explicit cu11 pins), 2.16.1 and 2.21.0 (``and-cuda``).

Marked ``network`` and ``slow`` (the CUDA wheels are 2-3 GB per release; the uv cache is the one
tests/test_pip_e2e.py keeps). On this GPU-less machine the GPU cannot be shown: each test checks
that every CUDA library TensorFlow opens resolves to the env's own file once repaired, that doctor
finds nothing left to fix in the libraries, and that ``--undo`` gives back the env uv made (the
same ``uv pip freeze``, the same files). The GPU proof runs on the H200.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import repairhelpers as rh
from conftest import run_tool

pytestmark = [pytest.mark.network, pytest.mark.slow]
CASES = {  # TF -> (Python, libraries that must map from the env once repaired)
    "2.21.0": ("3.12", ("libcudart.so.12", "libcublas.so.12", "libcusolver.so.11", "libcudnn.so.9")),
    "2.16.1": ("3.11", ("libcudart.so.12", "libcublas.so.12", "libcusolver.so.11", "libcudnn.so.8")),
    "2.13.1": ("3.11", ("libcudart.so.11.0", "libcublas.so.11", "libcusolver.so.11", "libcudnn.so.8")),
}
MAPS = "import json\nprint(json.dumps(sorted({l.split()[-1] for l in open('/proc/self/maps') if '/nvidia/' in l})))\n"


def clean_environ() -> dict:
    return {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "XLA_FLAGS", "VIRTUAL_ENV")}


def loaded(prefix: Path) -> list[str]:
    done = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", "import tensorflow\n" + MAPS],
        capture_output=True,
        text=True,
        env=clean_environ(),
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("tf", list(CASES))
def test_a_real_plain_uv_env_is_repaired_and_undone(tf, tmp_path, shared_cache):
    python, libraries = CASES[tf]
    from tfgpu.detect.interpreters import find_python

    interpreter = find_python(python)
    if interpreter is None:
        pytest.skip(f"no Python {python} on this machine")
    prefix = tmp_path / "env"
    user = {**os.environ, "UV_CACHE_DIR": str(shared_cache / "uv")}  # the cache the tool's own uv uses
    subprocess.run([rh.uv(), "venv", "--quiet", "--python", interpreter, str(prefix)], check=True, env=user)
    subprocess.run(
        [rh.uv(), "pip", "install", "--quiet", "--python", str(prefix / "bin" / "python"), f"tensorflow=={tf}"],
        check=True,
        env=user,
        timeout=1800,
    )
    assert loaded(prefix) == []  # what the user arrives with: TensorFlow finds no CUDA library at all
    before, frozen = rh.snapshot(prefix), rh.freeze(prefix)

    env = {**os.environ, "TFGPU_CACHE_DIR": str(shared_cache), "TFGPU_LOG_DIR": str(tmp_path / "logs")}
    done = run_tool(
        "repair", "--prefix", str(prefix), "--no-detect", "--yes", "--no-verify", "--json", env=env, timeout=1800
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["changed"] == [] and summary["added"]
    after_repair = rh.freeze(prefix)
    assert all(line in after_repair for line in frozen.splitlines())  # nothing the user had moved
    maps = loaded(prefix)
    assert {Path(p).name for p in maps} >= set(libraries)
    assert all(p.startswith(str(prefix)) for p in maps)

    report = run_tool("doctor", "--prefix", str(prefix), "--json", env=env)
    findings = {f["id"]: f for f in json.loads(report.stdout)["findings"]}
    assert [i for i, f in findings.items() if i.startswith(("libs.", "cudnn.", "xla.")) and f["status"] == "fail"] == []

    undone = run_tool("repair", "--undo", "--prefix", str(prefix), "--json", env=env, timeout=1800)
    assert undone.returncode == 0, undone.stdout[-3000:] + undone.stderr[-3000:]
    assert rh.freeze(prefix) == frozen
    assert {k: v for k, v in rh.snapshot(prefix).items() if "__pycache__" not in k} == {
        k: v for k, v in before.items() if "__pycache__" not in k
    }
