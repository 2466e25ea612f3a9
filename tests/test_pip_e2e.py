"""Real TensorFlow from PyPI, built by the real tool, checked in every launch path.

Marked ``network`` (PyPI) and ``slow`` (a few GB of wheels; ~40 s each with a cold uv cache).
On this GPU-less machine the GPU itself cannot be shown: these tests check that every CUDA
library TensorFlow would open resolves to the env's own file, that TensorFlow imports, and that
`verify` says "no driver" (exit 1) instead of claiming success. The GPU proof runs on the H200.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import run_tool
from packaging.version import Version

pytestmark = [pytest.mark.network, pytest.mark.slow]
CASES = {  # TF -> (Python, libraries that must resolve inside the env, extra create flags)
    "2.22.0rc0": ("3.12", ("libcudart.so.12", "libcublas.so.12", "libcusolver.so.11", "libcudnn.so.9"), ()),
    "2.21": ("3.12", ("libcudart.so.12", "libcublas.so.12", "libcusolver.so.11", "libcudnn.so.9"), ("--jupyter",)),
    "2.16.1": ("3.11", ("libcudart.so.12", "libcublas.so.12", "libcusolver.so.11", "libcudnn.so.8"), ()),
    "2.13": ("3.11", ("libcudart.so.11.0", "libcublas.so.11", "libcusolver.so.11", "libcudnn.so.8"), ()),
}
MAPS = (
    "import json, os\nprint(json.dumps(sorted({l.split()[-1] for l in open('/proc/self/maps') if '/nvidia/' in l})))\n"
)


@pytest.fixture(scope="module", params=list(CASES))
def real_env(request, tmp_path_factory, shared_cache):
    tf = request.param
    python, libraries, extra = CASES[tf]
    root = tmp_path_factory.mktemp(f"tf{tf}")
    env = dict(
        os.environ,
        TFGPU_CACHE_DIR=str(shared_cache),
        TFGPU_LOG_DIR=str(root / "logs"),
        JUPYTER_DATA_DIR=str(root / "jupyter"),
        COLUMNS="160",
    )
    prefix = root / "env"
    done = run_tool(
        "create",
        "--tf",
        tf,
        "--mode",
        "pip",
        "--python",
        python,
        "--prefix",
        str(prefix),
        "--no-verify",
        "--json",
        *extra,
        env=env,
        timeout=1800,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    yield tf, prefix, libraries, env, json.loads(done.stdout)
    shutil.rmtree(root, ignore_errors=True)  # the envs hard-link the cache, but their bytecode is their own


def test_tensorflow_imports_by_absolute_path_with_the_envs_libraries(real_env):
    tf, prefix, libraries, _, result = real_env
    assert result["tensorflow"].startswith(tf)
    clean = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "XLA_FLAGS", "VIRTUAL_ENV")}
    done = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", "import tensorflow as tf\nprint(tf.__version__)\n" + MAPS],
        capture_output=True,
        text=True,
        env=clean,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    version, maps = done.stdout.strip().splitlines()[-2:]
    assert str(Version(version)).startswith(tf)  # tf.__version__ is "2.22.0-rc0", PEP 440 says 2.22.0rc0
    loaded = json.loads(maps)
    assert {Path(p).name for p in loaded} >= set(libraries)
    assert all(p.startswith(str(prefix)) for p in loaded)


def test_activated_shell_resolves_each_soname_to_the_env(real_env):
    """The loader's own search (TFGPU_NO_PRELOAD=1: no hook), through LD_LIBRARY_PATH alone."""
    _, prefix, libraries, _, _ = real_env
    check = (
        "import ctypes, json\n"
        f"names = {list(libraries)!r}\n"
        "for n in names: ctypes.CDLL(n)\n"
        "maps = [l.split()[-1] for l in open('/proc/self/maps')]\n"
        "print(json.dumps({n: next(p for p in maps if p.endswith('/' + n)) for n in names}))\n"
    )
    script = f'. "{prefix}/bin/activate" && TFGPU_NO_PRELOAD=1 python -c "$CHECK" && command -v ptxas'
    done = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env={**os.environ, "CHECK": check}, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    resolved, ptxas = done.stdout.strip().splitlines()[-2:]
    assert all(path.startswith(str(prefix)) for path in json.loads(resolved).values())
    assert ptxas == f"{prefix}/bin/ptxas"


def test_verify_says_no_driver_and_fails(real_env):
    _, prefix, _, env, _ = real_env
    done = run_tool("verify", "--prefix", str(prefix), "--json", env=env, timeout=900)
    assert done.returncode == 1
    document = json.loads(done.stdout)
    assert document["error"]["code"] == "no-driver"
    report = document["details"]
    # Said from this machine's detection, before TensorFlow's import (seconds, for nothing).
    assert report["tensorflow_imported"] is False and report["gpus"] == []


def test_jupyter_kernel_carries_the_env(real_env):
    tf, prefix, _, env, _ = real_env
    if tf != "2.21":
        pytest.skip("--jupyter is exercised on the 2.21 env")
    # The kernel is named after the env and its marker's id (tfgpu-<name>-<id8>, see docs/safety.md).
    [kernel] = (Path(env["JUPYTER_DATA_DIR"]) / "kernels").glob("tfgpu-env-*")
    spec = json.loads((kernel / "kernel.json").read_text())
    assert spec["argv"][0] == str(prefix / "bin" / "python")
    assert spec["env"]["LD_LIBRARY_PATH"].startswith(str(prefix))
    done = subprocess.run([spec["argv"][0], "-c", "import ipykernel_launcher"], capture_output=True, timeout=120)
    assert done.returncode == 0


GPU_CHECKS_ON_CPU = """
import json, sys
sys.path.insert(0, {verify_dir!r})
import tensorflow as tf
cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)
import gpu_checks
out = {{
    "xla": gpu_checks.xla(tf, "/CPU:0"),
    "conv": gpu_checks.conv(tf, "/CPU:0"),
    "mixed": gpu_checks.mixed_precision(tf, "/CPU:0", ""),
    "mirrored": gpu_checks.mirrored(tf, ["/CPU:0", "/CPU:1"]),
    "bench": gpu_checks.bench(tf, "/CPU:1", samples=1024, matmul_n=256, cpu_matmul_n=256),
}}
print(json.dumps(out))
"""


def test_verify_gpu_checks_run_on_this_tensorflow(real_env):
    """The GPU checks' code, run on real TensorFlow with CPU devices standing in for GPUs (the
    same functions run on GPUs on the H200; see the closing notes)."""
    from importlib.resources import files

    _, prefix, _, _, _ = real_env
    verify_dir = str(files("tfgpu.verify"))
    done = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", GPU_CHECKS_ON_CPU.format(verify_dir=verify_dir)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["xla"]["ok"] and out["conv"]["ok"], out
    assert out["mixed"]["ok"] and out["mixed"]["compute_dtype"] == "float16", out["mixed"]
    assert out["mirrored"]["ok"] and out["mirrored"]["replicas"] == 2 and out["mirrored"]["global_batch"] == 128
    assert out["bench"]["ok"] and len(out["bench"]["cnn"]) == 2 and "verdict" in out["bench"]


def test_the_real_framework_librarys_symbol_table_is_read_whole_within_the_budget(real_env):
    """The two-stack load hook decides what to load first from the unversioned exports of
    TensorFlow's own framework library; the per-file and per-run byte budgets that stop a crafted
    library must let the real one through whole (TF 2.21's: 128,870 symbols, 15.5 MB of names), or a
    two-stack env would lose the hook's protection silently."""
    from tfgpu.doctor import elf

    tf, prefix, _, _, _ = real_env
    (library,) = prefix.glob("lib/python3*/site-packages/tensorflow/libtensorflow_framework.so.2")
    budget = elf.Budget()
    with open(library, "rb") as stream:
        image = elf.Image.of_stream(stream, os.fstat(stream.fileno()).st_size, str(library), budget)
        exports = elf.parse_exports(image)
    assert exports is not None, tf
    if tf == "2.21":  # the CUDA API it re-exports unversioned: why the hook loads the other stack first
        assert "cudaMalloc" in exports
    assert budget.spent < budget.run / 2 and image.spent < image.cap / 1.5, (tf, budget.spent, image.spent)
