"""verify on a GPU the wheel has no SASS for: which checks run and how, and the failure's
architecture reason.

No GPU here. What is faked is only what a GPU would give: the report's device facts (a recorded
shape: TF 2.21.0's build_info, an RTX 50xx's compute capability 12.0) and, for the isolated XLA
check, a child that aborts the way LLVM does ("LLVM ERROR: PTX version 8.5 does not support target
'sm_120'", tensorflow/tensorflow#111958). The child is a real process killed by a real SIGABRT.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import tfgpu.verify
from tfgpu.verify import failure

sys.path.insert(0, str(Path(tfgpu.verify.__file__).resolve().parent))
import check_env  # noqa: E402 - the env-side module, imported as the env's Python imports it

BUILD_2_21 = {"cuda_compute_capabilities": ["sm_60", "sm_70", "sm_80", "sm_89", "compute_90"], "cuda_version": "12.5.1"}
BUILD_2_22 = {"cuda_compute_capabilities": ["6.0", "7.0", "8.0", "8.9", "9.0"], "cuda_version": "12.5.1"}


@pytest.mark.parametrize(
    ("build", "cc", "native"),
    [
        (BUILD_2_21, "9.0", True),
        (BUILD_2_21, "8.6", True),  # sm_80 SASS runs on 8.6
        (BUILD_2_21, "12.0", False),
        (BUILD_2_21, "10.0", False),
        (BUILD_2_22, "12.0", False),
        (BUILD_2_22, "8.9", True),
        ({}, "12.0", None),
        (BUILD_2_21, "", None),
    ],
)
def test_which_gpus_have_native_kernels(build, cc, native):
    assert check_env.has_native_kernels(build, cc) is native


ABORTING_CHILD = r"""
import os, sys
sys.stderr.write("LLVM ERROR: PTX version 8.5 does not support target 'sm_120' (or 'sm_120a'). Minimum required PTX version is 8.7\n")
sys.stderr.flush()
os.abort()
"""


def test_an_xla_compile_that_aborts_the_process_is_reported_not_fatal():
    result = check_env.isolated(sys.executable, "xla", 0, timeout=60, child=ABORTING_CHILD)
    assert result["ok"] is False and result["aborted"] is True and result["isolated"] is True
    assert "PTX version 8.5 does not support target 'sm_120'" in result["error"]


def test_an_isolated_check_that_passes_returns_its_result():
    child = 'import json; print(json.dumps({"ok": True, "compile_seconds": 0.5}))'
    assert check_env.isolated(sys.executable, "xla", 0, timeout=60, child=child) == {
        "ok": True,
        "compile_seconds": 0.5,
        "isolated": True,
    }


def _report(cc: str, native: bool) -> dict:
    gpu = {
        "device": "/physical_device:GPU:0",
        "name": "NVIDIA GeForce RTX 5090",
        "compute_capability": cc,
        "native_kernels": native,
        "ok": True,
        "elementwise": {"ok": False, "error": "'cuLaunchKernel(...)' failed with 'CUDA_ERROR_INVALID_HANDLE'"},
        "xla": {"ok": False, "aborted": True, "error": "LLVM ERROR: PTX version 8.5 does not support target 'sm_120'"},
        "conv": {"ok": True},
        "mixed_precision": {"ok": True},
    }
    return {
        "tensorflow": "2.21.0",
        "build_info": BUILD_2_21,
        "gpus": [gpu],
        "code": "gpu-op-failed",
        "reason": "Failed on the GPU: /physical_device:GPU:0 elementwise, /physical_device:GPU:0 xla.",
        "prefix": "/envs/tf",
        "log_path": None,
    }


def test_a_failure_on_a_gpu_without_sass_names_the_architecture_and_the_sources():
    error = failure(_report("12.0", native=False))
    assert error.code == "gpu-op-failed"
    assert "compute capability 12.0 (sm_120" in error.message
    assert "elementwise, xla failed there" in error.message
    assert "PTX ISA 8.5" in error.message and "Sources:" in error.message
    assert error.alternatives[0].startswith("TF 2.15.1 is the newest release")
    assert any("nvcr.io/nvidia/tensorflow" in way for way in error.alternatives)
    assert not any(way.startswith("--allow-unsupported-gpu") for way in error.alternatives)


def test_a_failure_on_a_gpu_with_sass_says_nothing_of_the_architecture():
    error = failure(_report("9.0", native=True))
    assert "carries no SASS" not in error.message


def test_the_human_report_shows_the_architecture_note_and_the_elementwise_check(monkeypatch, capsys):
    from tfgpu.cli.render import results as render

    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    render.verify(_report("12.0", native=False), reason=False)
    out = capsys.readouterr().out
    assert "no SASS for CC 12.0 in this wheel" in out
    assert "elementwise: 'cuLaunchKernel(...)' failed with 'CUDA_ERROR_INVALID_HANDLE'" in out
    assert "xla: LLVM ERROR: PTX version 8.5 does not support target 'sm_120'" in out
