"""``verify --with torch|jax``: TensorFlow and another framework computing in one process, in both
import orders, each step's mapped library files reported.

This machine has no GPU, so the frameworks are stand-ins at the GPU boundary: a real venv whose
``tensorflow`` and ``torch`` packages answer the few calls the check makes as a GPU build would, and
whose torch, when told to, dies the way torch 2.11+cu130 died on an H200 when TF 2.21 was imported
first (SIGFPE on its first CUDA tensor). The check itself, its processes, the signal and the report
are real. On a GPU machine the same command runs the real frameworks (docs/maintainers/gpu-proofs.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import wheelhouse
from conftest import run_tool

FAKE_TF = """
import contextlib
__version__ = "2.21.0"
class _T:
    device = "/job:localhost/replica:0/task:0/device:GPU:0"
class config:
    @staticmethod
    def list_physical_devices(kind):
        return ["/physical_device:GPU:0"]
class random:
    @staticmethod
    def normal(shape):
        return _T()
def device(name):
    return contextlib.nullcontext()
def matmul(a, b):
    return _T()
def reduce_sum(t):
    return 42.0
"""

FAKE_TORCH = """
import ctypes, os, signal, sys
# what a CUDA build's import does: map its CUDA runtime (a real shared object the test built)
ctypes.CDLL(os.path.join(os.path.dirname(__file__), "lib", "libcudart.so.13"))
__version__ = "2.11.0+cu130"
class _Device:
    type = "cuda"
    def __str__(self):
        return "cuda:0"
class _T:
    device = _Device()
    def __matmul__(self, other):
        return self
    def sum(self):
        return 7.0
    def __float__(self):
        return 7.0
class cuda:
    @staticmethod
    def is_available():
        return True
    @staticmethod
    def synchronize():
        pass
def randn(*shape, device=None):
    if "tensorflow" in sys.modules and os.path.exists(os.path.join(os.path.dirname(__file__), "crash-after-tf")):
        os.kill(os.getpid(), signal.SIGFPE)  # what the real torch did after TF 2.21 loaded first
    return _T()
"""


def fake_env(root: Path, crash: bool = False) -> Path:
    if not wheelhouse.have_compiler():
        pytest.skip("gcc is needed to build the stand-in CUDA runtime")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    site = next(root.glob("lib/python3*/site-packages"))
    for name, source in (("tensorflow", FAKE_TF), ("torch", FAKE_TORCH)):
        (site / name).mkdir()
        (site / name / "__init__.py").write_text(source)
    wheelhouse.shared_library(site / "torch" / "lib" / "libcudart.so.13", "libcudart.so.13")
    if crash:
        (site / "torch" / "crash-after-tf").write_text("")
    return root


def test_both_orders_compute_and_each_step_is_reported(tmp_path, tool_env):
    prefix = fake_env(tmp_path / "env")
    done = run_tool("verify", "--prefix", str(prefix), "--with", "torch==2.11.0", "--json", env=tool_env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] and report["with"] == ["torch"]
    assert [entry["order"] for entry in report["orders"]] == [["tensorflow", "torch"], ["torch", "tensorflow"]]
    for entry in report["orders"]:
        assert entry["exit"] == "exit 0"
        assert [step["framework"] for step in entry["steps"]] == entry["order"]
        assert all(step["ok"] for step in entry["steps"])
        loaded = {step["framework"]: step["loaded"] for step in entry["steps"]}
        # each step reports what its own import mapped: torch's runtime under torch, never under TF
        assert [Path(p).name for p in loaded["torch"]] == ["libcudart.so.13"], loaded
        assert loaded["tensorflow"] == [], loaded
    text = run_tool("verify", "--prefix", str(prefix), "--with", "torch", env=tool_env)
    assert text.returncode == 0 and "tensorflow then torch" in text.stdout and "torch then tensorflow" in text.stdout


def test_a_crash_in_one_order_fails_naming_the_order_and_the_signal(tmp_path, tool_env):
    prefix = fake_env(tmp_path / "env", crash=True)
    done = run_tool("verify", "--prefix", str(prefix), "--with", "torch", "--json", env=tool_env)
    assert done.returncode == 1
    document = json.loads(done.stdout)
    error = document["error"]
    assert error["code"] == "frameworks-failed"
    assert "tensorflow then torch" in error["message"] and "SIGFPE" in error["message"]
    assert any("repair" in way for way in error["alternatives"])
    first, second = document["details"]["orders"]
    assert first["exit"] == "killed by SIGFPE (a crash)" and [s["framework"] for s in first["steps"]] == ["tensorflow"]
    assert second["ok"], second  # torch first: both computed


@pytest.mark.parametrize("spec", ["numpy", "tensorflow", "", "torch; os_name=='x' --index-url http://evil"])
def test_only_torch_and_jax_can_be_checked(tmp_path, tool_env, spec):
    prefix = fake_env(tmp_path / "env")
    done = run_tool("verify", "--prefix", str(prefix), "--with", spec, "--json", env=tool_env)
    if spec.startswith("torch"):
        assert done.returncode == 0, done.stderr  # the name is all verify takes from a spec
    else:
        assert done.returncode == 2 and json.loads(done.stdout)["error"]["code"] == "bad-option-value"


@pytest.mark.slow  # waits out a timeout or compares a large sample: the full run keeps it
def test_an_order_that_hangs_is_stopped_and_named(tmp_path):
    """A framework that never returns (a driver hang): the order is stopped at the timeout and the
    report says so instead of waiting for ever."""
    from tfgpu.verify.frameworks import run_frameworks

    prefix = fake_env(tmp_path / "env")
    site = next(prefix.glob("lib/python3*/site-packages"))
    (site / "torch" / "__init__.py").write_text("import time\ntime.sleep(600)\n")
    report = run_frameworks(prefix, ("torch",), timeout=3)
    assert not report["ok"]
    assert all("stopped after 3 s" in entry["reason"] for entry in report["orders"]), report


EXITS_AT_IMPORT = {
    "sys.exit(3)": ("import sys\nsys.stderr.write('torch: no CUDA 13 driver here\\n')\nsys.exit(3)\n", "exit 3"),
    "os._exit(124)": (
        "import os, sys\nsys.stderr.write('torch: giving up\\n')\nsys.stderr.flush()\nos._exit(124)\n",
        "exit 124",
    ),
    "sys.exit(0)": ("import sys\nsys.exit(0)\n", "exit 0"),
    "SIGSEGV": ("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n", "killed by SIGSEGV (a crash)"),
}


@pytest.mark.parametrize("how", list(EXITS_AT_IMPORT))
def test_a_framework_that_exits_or_crashes_at_import_is_said_as_such_never_a_hang(tmp_path, tool_env, how):
    """A stand-in torch whose import exits (with 3; with 124, the status the runner gives a child it
    stopped at its timeout; with 0) or crashes: the report names the exit and its code, or the
    crash and its signal, with the tail of its stderr; never "a hang", which only a real timeout is."""
    source, said = EXITS_AT_IMPORT[how]
    prefix = fake_env(tmp_path / "env")
    site = next(prefix.glob("lib/python3*/site-packages"))
    (site / "torch" / "__init__.py").write_text(source)
    done = run_tool("verify", "--prefix", str(prefix), "--with", "torch", "--json", env=tool_env)
    assert done.returncode == 1, done.stderr
    document = json.loads(done.stdout)
    error = document["error"]
    assert error["code"] == "frameworks-failed" and "hang" not in error["message"]
    first, second = document["details"]["orders"]
    assert first["exit"] == said and [s["framework"] for s in first["steps"]] == ["tensorflow"]
    assert second["exit"] == said and second["steps"] == []
    assert first["reason"].startswith(f"{said} before torch finished")
    if "stderr" in source:
        assert first["stderr_tail"].startswith("torch: ") and "(its stderr ends: torch: " in first["reason"]
    shown = run_tool("verify", "--prefix", str(prefix), "--with", "torch", env=tool_env)
    assert shown.returncode == 1 and f"({said})" in shown.stdout and "hang" not in shown.stdout + shown.stderr


def test_tensorflow_exiting_124_at_import_is_an_exit_not_a_timeout(tmp_path, tool_env):
    """The plain GPU check: TensorFlow's import exiting with the runner's timeout status is no timeout."""
    prefix = fake_env(tmp_path / "env")
    site = next(prefix.glob("lib/python3*/site-packages"))
    (site / "tensorflow" / "__init__.py").write_text("import sys\nsys.stderr.write('tf: bye\\n')\nsys.exit(124)\n")
    done = run_tool("verify", "--prefix", str(prefix), "--json", env=tool_env)
    error = json.loads(done.stdout)["error"]
    assert error["code"] != "verify-timeout" and "ran past" not in error["message"], error
