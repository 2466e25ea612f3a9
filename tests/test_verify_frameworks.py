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

ANY = """
class _Any:
    \"\"\"Whatever the check asks of a GPU tensor, layer or op answers: callable, indexable, a
    context manager, a number (``value``), on ``GPU:0``.\"\"\"
    def __init__(self, value=1.0):
        self.value = value
    def __call__(self, *args, **kwargs):
        return self
    def __getattr__(self, name):
        return self
    def __getitem__(self, key):
        return self
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        return False
    def __float__(self):
        return float(self.value)
    def __bool__(self):
        return True
    def __str__(self):
        return "/job:localhost/replica:0/task:0/device:GPU:0"
    __matmul__ = __mul__ = __add__ = __rmul__ = __pow__ = lambda self, other: self
"""

FAKE_TF = (
    ANY
    + """
import ctypes, glob, os
# what the env's load hook does: load TensorFlow's own CUDA libraries by path (the stand-ins the test built)
for _path in sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "..", "..", "tfgpu", "cuda12",
                                           "nvidia", "*", "lib", "*.so*"))):
    ctypes.CDLL(_path, mode=ctypes.RTLD_GLOBAL)
__version__ = "2.21.0"
class config:
    @staticmethod
    def list_physical_devices(kind):
        return ["/physical_device:GPU:0"]
def device(name):
    return _Any()
def reduce_sum(t):
    return 42.0
def __getattr__(name):
    return _Any()
"""
)

FAKE_NCCL_OPS = ANY + "\ndef __getattr__(name):\n    return _Any()\n"

FAKE_TORCH = (
    ANY
    + """
import ctypes, glob, os, signal, sys
# what a CUDA build's import does: map its CUDA libraries (real shared objects the test built)
ctypes.CDLL(os.path.join(os.path.dirname(__file__), "lib", "libcudart.so.13"))
for _path in sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "nvidia", "*", "lib", "*.so*"))):
    ctypes.CDLL(_path, mode=ctypes.RTLD_GLOBAL)
__version__ = "2.11.0+cu130"
class _Device:
    type = "cuda"
    def __str__(self):
        return "cuda:0"
class _T(_Any):
    device = _Device()
class cuda:
    @staticmethod
    def is_available():
        return True
    @staticmethod
    def synchronize():
        pass
    class nccl:
        @staticmethod
        def version():
            return (2, 28, 9)
def randn(*shape, device=None):
    if "tensorflow" in sys.modules and os.path.exists(os.path.join(os.path.dirname(__file__), "crash-after-tf")):
        os.kill(os.getpid(), signal.SIGFPE)  # what the real torch did after TF 2.21 loaded first
    return _T(7.0)
def full(shape, value, device=None):
    return _T(value * shape[0])
def __getattr__(name):
    return _Any()
"""
)

FAKE_DISTRIBUTED = """
def is_available():
    return True
def is_nccl_available():
    return True
def init_process_group(backend, init_method=None, rank=None, world_size=None):
    assert backend == "nccl" and world_size == 1 and init_method.startswith("file://")
def all_reduce(tensor):
    pass  # world size 1: the sum is the tensor
def destroy_process_group():
    pass
"""

VERSIONED = {
    "libcudnn.so.9": "unsigned long cudnnGetVersion(void) {{ return {}; }}",
    "libnccl.so.2": "int ncclGetVersion(int *v) {{ *v = {}; return 0; }}",
}


def versioned_library(path: Path, soname: str, version: int) -> None:
    """A real shared object with ``soname`` whose version call answers ``version``."""
    wheelhouse.gcc(path, ["-shared", "-fPIC", f"-Wl,-soname,{soname}"], VERSIONED[soname].format(version) + "\n")


def cuda_set(site: Path, suffix: str, cudnn: tuple[str, int], nccl: tuple[str, int]) -> None:
    """nvidia/cudnn and nvidia/nccl stand-ins in ``site``, each with its wheel's RECORD."""
    for (dist_version, code), (folder, soname) in zip(
        (cudnn, nccl), (("cudnn", "libcudnn.so.9"), ("nccl", "libnccl.so.2")), strict=True
    ):
        relative = f"nvidia/{folder}/lib/{soname}"
        versioned_library(site / relative, soname, code)
        info = site / f"nvidia_{folder}_{suffix}-{dist_version}.dist-info"
        info.mkdir(parents=True)
        (info / "RECORD").write_text(f"{relative},sha256=x,1\n")


def fake_env(root: Path, crash: bool = False, two_stacks: bool = False) -> Path:
    """The stand-in env; ``two_stacks``: TensorFlow's CUDA 12 cuDNN/NCCL kept apart in
    ``lib/tfgpu/cuda12`` (its import loads them), torch's CUDA 13 ones in site-packages."""
    if not wheelhouse.have_compiler():
        pytest.skip("gcc is needed to build the stand-in CUDA runtime")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    site = next(root.glob("lib/python3*/site-packages"))
    for name, source in (("tensorflow", FAKE_TF), ("torch", FAKE_TORCH)):
        (site / name).mkdir()
        (site / name / "__init__.py").write_text(source)
    (site / "tensorflow" / "python" / "ops").mkdir(parents=True)
    (site / "tensorflow" / "python" / "__init__.py").write_text("")
    (site / "tensorflow" / "python" / "ops" / "__init__.py").write_text("")
    (site / "tensorflow" / "python" / "ops" / "nccl_ops.py").write_text(FAKE_NCCL_OPS)
    (site / "torch" / "distributed.py").write_text(FAKE_DISTRIBUTED)
    wheelhouse.shared_library(site / "torch" / "lib" / "libcudart.so.13", "libcudart.so.13")
    if two_stacks:
        cuda_set(root / "lib" / "tfgpu" / "cuda12", "cu12", ("9.28.0.5", 92800), ("2.32.3", 23203))
        cuda_set(site, "cu13", ("9.19.0.56", 91900), ("2.28.9", 22809))
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


def test_each_step_runs_each_librarys_operations_and_says_which_copy_it_used(tmp_path, tool_env):
    """Two copies of libcudnn.so.9 and libnccl.so.2 (TensorFlow's CUDA 12 ones kept apart, torch's
    CUDA 13 ones in site-packages): the copy each step reports is the loader's answer by SONAME,
    the one loaded first, so it changes with the import order; its version is the one that copy
    reports and its wheel is read from the RECORD that installed it."""
    prefix = fake_env(tmp_path / "env", two_stacks=True)
    done = run_tool("verify", "--prefix", str(prefix), "--with", "torch", "--json", env=tool_env)
    assert done.returncode == 0, done.stdout
    report = json.loads(done.stdout)
    assert report["two_stacks"] is True
    tf_first, torch_first = report["orders"]
    for entry in report["orders"]:
        for step in entry["steps"]:
            assert [(op["op"], op["library"]) for op in step["ops"]] == [
                ("conv2d", "cuDNN"),
                ("lstm", "cuDNN"),
                ("csr_matmul", "cuSPARSE"),
                ("all_reduce", "NCCL"),
                ("curand_normal", "cuRAND"),
            ], step
            curand = step["ops"][-1]
            assert curand["skipped"] and "maps no libcurand.so.10" in curand["note"]  # none built here
            assert all(op["ok"] for op in step["ops"])
            assert len(step["uses"]["libcudnn.so.9"]["copies"]) in (1, 2)

    def use(entry, framework, soname):
        return next(s for s in entry["steps"] if s["framework"] == framework)["uses"][soname]

    # TensorFlow first: its own CUDA 12 copies answer, torch's are mapped beside them
    for framework in ("tensorflow", "torch"):
        cudnn = use(tf_first, framework, "libcudnn.so.9")
        assert "/lib/tfgpu/cuda12/" in cudnn["path"] and cudnn["version"] == "9.28.0", cudnn
        assert cudnn["package"] == "nvidia-cudnn-cu12 9.28.0.5" and cudnn["stack"] == "TensorFlow's CUDA 12 set"
    assert len(use(tf_first, "torch", "libcudnn.so.9")["copies"]) == 2
    assert next(s for s in tf_first["steps"] if s["framework"] == "tensorflow")["other_stack"] == []
    # torch first: torch's CUDA 13 copies answer TensorFlow too, and the report says so
    for framework in ("torch", "tensorflow"):
        nccl = use(torch_first, framework, "libnccl.so.2")
        assert "/site-packages/nvidia/nccl/lib/" in nccl["path"] and nccl["version"] == "2.28.9", nccl
        assert nccl["package"] == "nvidia-nccl-cu13 2.28.9" and nccl["stack"] == "site-packages"
    tf_step = next(s for s in torch_first["steps"] if s["framework"] == "tensorflow")
    assert tf_step["other_stack"] == ["libcudnn.so.9", "libnccl.so.2"]
    assert use(torch_first, "tensorflow", "libcudnn.so.9")["version"] == "9.19.0"

    text = run_tool("verify", "--prefix", str(prefix), "--with", "torch", env=tool_env)
    assert text.returncode == 0, text.stdout
    said = " ".join(text.stdout.split())
    assert "lstm (cuDNN)" in said and "all_reduce (NCCL)" in said and "csr_matmul (cuSPARSE)" in said
    assert "libcudnn.so.9 9.19.0 ←" in said and "nvidia-cudnn-cu13 9.19.0.56" in said
    assert "TensorFlow computed with the other CUDA stack's copy of libcudnn.so.9, libnccl.so.2" in said


def test_a_failing_operation_fails_its_order_naming_the_library(tmp_path, tool_env):
    """An operation that raises (a cuSPARSE kernel missing from a build, say) fails the step and the
    order, and the error names the operation and its library; the other steps still report."""
    prefix = fake_env(tmp_path / "env")
    site = next(prefix.glob("lib/python3*/site-packages"))
    source = (site / "torch" / "__init__.py").read_text()
    (site / "torch" / "__init__.py").write_text(
        source + "\ndef relu(t):\n    raise RuntimeError('no cuSPARSE kernel for this GPU')\n"
    )
    done = run_tool("verify", "--prefix", str(prefix), "--with", "torch", "--json", env=tool_env)
    assert done.returncode == 1
    error = json.loads(done.stdout)["error"]
    assert "csr_matmul (cuSPARSE) failed: RuntimeError: no cuSPARSE kernel for this GPU" in error["message"]
    for entry in json.loads(done.stdout)["details"]["orders"]:
        assert [s["framework"] for s in entry["steps"]] == entry["order"]


def test_a_fifo_where_a_record_is_read_does_not_hang_the_report(tmp_path, tool_env):
    """A RECORD that is a FIFO (nothing ever writes it): the wheel of that file is unknown, and the
    report still comes."""
    import os

    prefix = fake_env(tmp_path / "env", two_stacks=True)
    site = next(prefix.glob("lib/python3*/site-packages"))
    record = next(site.glob("nvidia_nccl_cu13-*.dist-info")) / "RECORD"
    record.unlink()
    os.mkfifo(record)
    done = run_tool("verify", "--prefix", str(prefix), "--with", "torch", "--json", env=tool_env, timeout=120)
    assert done.returncode == 0, done.stdout
    torch_first = json.loads(done.stdout)["orders"][1]
    assert torch_first["steps"][0]["uses"]["libnccl.so.2"]["package"] is None
    assert torch_first["steps"][0]["uses"]["libcudnn.so.9"]["package"] == "nvidia-cudnn-cu13 9.19.0.56"


def test_verify_lists_the_copy_tensorflow_uses_not_merely_the_first_file_mapped():
    """``verify``'s library lines come from ``uses`` (the loader's answer by SONAME, its version and
    wheel, how many copies are mapped); a report without it keeps the old list of files."""
    from tfgpu.cli.render.libs import uses_lines

    report = {
        "libraries": {"libcudnn.so.9": "/env/lib/tfgpu/cuda12/nvidia/cudnn/lib/libcudnn.so.9"},
        "uses": {
            "libcudnn.so.9": {
                "path": "/env/site-packages/nvidia/cudnn/lib/libcudnn.so.9",
                "version": "9.19.0",
                "package": "nvidia-cudnn-cu13 9.19.0.56",
                "copies": ["/env/lib/tfgpu/cuda12/nvidia/cudnn/lib/libcudnn.so.9", "/env/site-packages/x"],
            }
        },
    }
    (line,) = uses_lines(report)
    assert "libcudnn.so.9 9.19.0 ← /env/site-packages/nvidia/cudnn/lib/libcudnn.so.9" in line
    assert "(nvidia-cudnn-cu13 9.19.0.56), 2 copies mapped" in line
    (old,) = uses_lines({"libraries": report["libraries"]})
    assert "libcudnn.so.9 ← /env/lib/tfgpu/cuda12/" in old
