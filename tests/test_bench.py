"""``verify --bench``'s matmul figures: synchronised, warmed up, repeated, median and spread, never
above the GPU's peak.

The timing code (``tfgpu/verify/gpu_checks.py``) is run against a simulated asynchronous device
whose true speed is known, and (marked ``network``) against real TensorFlow on the CPU beside a long
reference loop; the peak table and the clamp are checked directly.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tfgpu.verify
from tfgpu.verify import peaks

sys.path.insert(0, str(Path(tfgpu.verify.__file__).parent))
try:
    import numpy  # noqa: F401 - gpu_checks imports it at the top; the timing code itself does not use it
except ImportError:
    import types

    sys.modules["numpy"] = types.ModuleType("numpy")
import gpu_checks  # noqa: E402 - the file check_env.py imports inside the env


class FakeDevice:
    """A GPU queue: a matmul returns at once and takes ``cost`` seconds of device time (``slow_first``
    calls ``jit`` times longer, as JIT-compiled kernels do); reading a value back waits for it."""

    def __init__(self, cost: float, slow_first: int = 0, jit: float = 20.0) -> None:
        self.cost, self.slow_first, self.jit, self.free_at, self.calls = cost, slow_first, jit, 0.0, 0


class FakeTensor:
    def __init__(self, device: FakeDevice, ready_at: float) -> None:
        self.device, self.ready_at = device, ready_at

    def __getitem__(self, _index):
        return self

    def numpy(self):
        time.sleep(max(0.0, self.ready_at - time.perf_counter()))
        return 0.0


class FakeTF:
    class float32:
        name = "float32"

    def __init__(self, device: FakeDevice) -> None:
        self.fake = device
        self.random = self

    def device(self, _name):
        import contextlib

        return contextlib.nullcontext()

    def uniform(self, *args, **kwargs):
        return FakeTensor(self.fake, 0.0)

    def cast(self, value, _dtype):
        return value

    def matmul(self, a, b):
        device = self.fake
        device.calls += 1
        cost = device.cost * (device.jit if device.calls <= device.slow_first else 1.0)
        device.free_at = max(time.perf_counter(), device.free_at) + cost
        return FakeTensor(device, device.free_at)


def test_the_clock_stops_when_the_device_is_done_not_when_the_calls_return():
    n, cost = 1024, 0.001
    true_rate = 2 * n ** 3 / cost / 1e12
    device = FakeDevice(cost, slow_first=10)  # the first 10 calls compile their kernels (0.2 s)
    row = gpu_checks.matmul_rate(FakeTF(device), "/GPU:0", n, FakeTF.float32, round_seconds=0.05, warm_seconds=0.3)
    assert abs(row["median_tflops"] - true_rate) / true_rate < 0.1, row
    assert row["warmup_settled"] and row["warmup_calls"] > 10 and row["calls_per_round"] >= 50
    assert row["rounds"] == 5 and len(row["round_tflops"]) == 5
    assert row["min_tflops"] <= row["median_tflops"] <= row["max_tflops"] and 0 <= row["spread"] < 0.2


def test_the_method_is_stated_in_the_result():
    assert "median" in gpu_checks.BENCH_METHOD and "read back" in gpu_checks.BENCH_METHOD


def _bench(name: str, cc: str = "9.0", **rates) -> dict:
    rows = [{"dtype": dtype, "median_tflops": value} for dtype, value in rates.items()]
    return {"matmul": {"device": rows, "device_info": {"name": name, "compute_capability": cc, "sm_count": 132,
                                                        "clock_mhz": 1980.0},
                       "device_tflops_fp32": rates.get("float32"), "device_tflops_fp16": rates.get("float16")}}


def test_a_figure_above_the_peak_is_clamped_with_a_warning():
    bench = _bench("NVIDIA H200", float32=237.0, float16=1200.0, bfloat16=482.0)
    peaks.apply_peaks(bench)
    rows = {row["dtype"]: row for row in bench["matmul"]["device"]}
    assert rows["float16"]["median_tflops"] == 989.4 and rows["float16"]["measured_tflops"] == 1200.0
    assert rows["float16"]["clamped"] and "NV-H200" in rows["float16"]["peak_source"]
    assert rows["float32"]["median_tflops"] == 237.0 and not rows["float32"].get("clamped")
    assert rows["float32"]["peak_tflops"] == 494.7
    assert bench["matmul"]["device_tflops_fp16"] == 989.4
    [warning] = bench["warnings"]
    assert "1200.0" in warning and "989.4" in warning


def test_a_gpu_not_in_the_table_gets_its_peak_from_clocks_and_sms():
    ceiling, source = peaks.peak("NVIDIA H800 PCIe", "9.0", 114, 1755.0, "float16")
    assert ceiling == round(4096 * 114 * 1755e6 / 1e12, 1) and "FLOPs/clock/SM" in source
    assert peaks.peak("Some future GPU", "12.0", 100, 2000.0, "float16")[0] is None


def test_table_peaks_agree_with_the_per_sm_rates():
    """The datasheet figures and the per-SM rates are two readings of one fact (rounding aside)."""
    for name, cc, sms, clock, dtype in (("H100 SXM5", "9.0", 132, 1830, "float16"), ("A100", "8.0", 108, 1410, "float16"),
                                        ("A10", "8.6", 72, 1695, "float32"), ("V100-SXM2", "7.0", 80, 1530, "float16"),
                                        ("Tesla T4", "7.5", 40, 1590, "float16")):
        table = peaks.peak(name, cc, sms, clock, dtype)[0]
        derived = peaks.peak("unlisted", cc, sms, clock, dtype)[0]
        assert abs(table - derived) / table < 0.05, (name, table, derived)


REFERENCE = r"""
import json, statistics, sys, time
sys.path.insert(0, sys.argv[1])
import tensorflow as tf
import gpu_checks
n = 512
ours = gpu_checks.matmul_rate(tf, "/CPU:0", n, tf.float32, warmup=8, round_seconds=0.5)
with tf.device("/CPU:0"):
    a = tf.random.uniform((n, n)); b = tf.random.uniform((n, n))
    for _ in range(100):
        c = tf.matmul(a, b).numpy()
    rates = []
    for _ in range(20):
        started = time.perf_counter()
        for _ in range(40):
            c = tf.matmul(a, b).numpy()
        rates.append(2 * n ** 3 * 40 / (time.perf_counter() - started) / 1e12)
print(json.dumps({"ours": ours, "reference": statistics.median(rates)}))
"""


@pytest.mark.network
@pytest.mark.slow
def test_real_tensorflow_on_the_cpu_agrees_with_a_long_reference_loop(tmp_path):
    """Real TensorFlow (tensorflow-cpu from PyPI): the bench's median against 20 rounds x 40 calls after
    100 warm-up calls, each call read back in full."""
    from conftest import suite_cache
    from tfgpu.engines.uv import find_uv

    uv = find_uv()
    env_dir = suite_cache() / "bench-tf-cpu-env"
    python = env_dir / "bin" / "python"
    if not (env_dir / ".complete").exists():  # built once per TFGPU_TEST_CACHE
        shutil.rmtree(env_dir, ignore_errors=True)
        for argv in ([uv, "venv", str(env_dir), "--python", sys.executable],
                     [uv, "pip", "install", "--python", str(python), "tensorflow-cpu", "--cache-dir",
                      str(suite_cache("e2e", "uv"))]):
            done = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
            assert done.returncode == 0, done.stderr[-2000:]
        (env_dir / ".complete").write_text("")
    done = subprocess.run([str(python), "-c", REFERENCE, str(Path(gpu_checks.__file__).parent)], capture_output=True,
                          text=True, timeout=900, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    ours, reference = result["ours"]["median_tflops"], result["reference"]
    assert abs(ours - reference) / reference < 0.3, result
    assert result["ours"]["spread"] < 0.5


def test_the_report_shows_median_spread_peak_and_method():
    import contextlib
    import io

    from tfgpu import render

    bench = _bench("NVIDIA H200", float32=237.0, float16=1200.0, bfloat16=482.0)
    for row in bench["matmul"]["device"]:
        row.update(spread=0.02, rounds=5, calls_per_round=50, min_tflops=1.0, max_tflops=2.0)
    bench["matmul"].update(n=8192, cpu={"median_tflops": 1.2, "spread": 0.05}, cpu_n=2048)
    bench.update(cnn=[{"batch": 128, "cpu_seconds": 9.0, "device_seconds": 1.0, "speedup": 9.0}],
                 method=gpu_checks.BENCH_METHOD.format(warmup=20, rounds=5, min_calls=50, round_seconds=0.25),
                 verdict="The CNN runs 9.0x faster.")
    peaks.apply_peaks(bench)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        render.bench_lines(bench)
    text = out.getvalue()
    assert "float16   989.4 TFLOP/s (spread 2%, 5 x 50 calls, peak 989.4) (clamped to the peak)" in text
    assert "float32   237.0 TFLOP/s" in text and "warning: float16: the measured 1200.0" in text
    assert "method: per dtype" in text and "…" not in text
