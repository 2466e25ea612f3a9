"""``verify --bench``'s matmul method, held against a reference on a simulated GPU stream.

TensorFlow and a GPU do not run here, so the device is a stand-in with a virtual clock: a matmul
is queued and returns at once (as TensorFlow's GPU kernels are), the first calls cost extra (clock
ramp, PTX JIT), and only a copy to the host waits for the queue. The true rate is therefore known,
and the bench must report it; a method that stops the clock without waiting must not. On the H200
the bench is compared with a long synced reference timing in the same env (docs/maintainers/gpu-proofs.md, Proven on an
H200).
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import pytest

import tfgpu.verify

# The module runs inside the env on its own (check_env puts its directory on sys.path), so it is
# imported the same way here, from wherever the tool is installed (checkout or wheel).
sys.path.insert(0, str(Path(tfgpu.verify.__file__).resolve().parent))
import matmul_bench  # noqa: E402 - the env-side module, imported as check_env imports it

N = 8192
SECONDS_PER_CALL = 0.002  # so the true rate is 2 N^3 / 0.002 s
TRUE_TFLOPS = 2 * N**3 / SECONDS_PER_CALL / 1e12


class FakeStream:
    """A GPU stream on a virtual clock: work is queued; the host waits only when it copies."""

    def __init__(self, slow_first_calls: int = 5, slow_seconds: float = 0.5):
        """The first call takes ``slow_seconds`` (a JIT compile), the next ones less and less
        (clocks ramping), halving each call, until each takes SECONDS_PER_CALL."""
        self.host = 0.0
        self.device_free_at = 0.0
        self.calls = 0
        self.slow_first_calls, self.slow_seconds = slow_first_calls, slow_seconds

    def clock(self) -> float:
        return self.host

    def enqueue(self) -> None:
        self.calls += 1
        cost = SECONDS_PER_CALL + (self.slow_seconds / 2 ** (self.calls - 1) if self.slow_first_calls else 0.0)
        self.device_free_at = max(self.device_free_at, self.host) + cost
        self.host += 1e-6  # a launch costs the host almost nothing

    def wait(self) -> None:
        self.host = max(self.host, self.device_free_at)


class Tensor:
    def __init__(self, stream):
        self.stream = stream

    def __getitem__(self, index):
        return self

    def numpy(self):
        self.stream.wait()
        return 0.0


class FakeTF:
    float32, float16, bfloat16 = "float32", "float16", "bfloat16"

    def __init__(self, stream):
        self.stream = stream
        self.random = self

    @contextlib.contextmanager
    def device(self, name):
        yield

    def uniform(self, shape, dtype):
        return Tensor(self.stream)

    def cast(self, tensor, dtype):
        return tensor

    def matmul(self, a, b):
        self.stream.enqueue()
        return Tensor(self.stream)


def test_the_bench_reports_the_true_rate_despite_slow_first_calls():
    stream = FakeStream()
    figure = matmul_bench.rate(FakeTF(stream), "/GPU:0", N, "float32", clock=stream.clock)
    assert figure["median"] == pytest.approx(TRUE_TFLOPS, rel=0.01)
    assert figure["spread_pct"] < 1
    assert figure["warmup_calls"] >= 10  # the ramp was all in the warm-up


def test_a_method_that_does_not_wait_would_report_far_above_the_true_rate():
    """The reference: why the bench waits. Timing queued launches alone measures the host."""
    stream = FakeStream(slow_first_calls=0)
    tf = FakeTF(stream)
    started = stream.clock()
    for _ in range(20):
        tf.matmul(None, None)
    unsynced = 2 * N**3 * 20 / (stream.clock() - started) / 1e12
    assert unsynced > 100 * TRUE_TFLOPS


def test_a_figure_above_the_gpus_peak_is_not_given(monkeypatch):
    stream = FakeStream(slow_first_calls=0)
    monkeypatch.setattr(matmul_bench, "device_limits", lambda ordinal=0: (1, 1.0))  # 1 SM at 1 MHz: a tiny peak
    peaks = [{"cc": "9.0", "fp32": 256, "tf32": 2048, "fp16": 4096, "bf16": 4096}]
    monkeypatch.setattr(
        matmul_bench, "rate", lambda *a, **k: {"median": 5.0, "min": 4.9, "max": 5.1, "spread_pct": 4.0}
    )
    result = matmul_bench.matmul_figures(FakeTF(stream), "/GPU:0", peaks, "9.0", n=N, cpu_n=N)
    for name in ("fp32", "fp16", "bf16"):
        assert "median" not in result["dtypes"][name]
        assert "above this GPU's" in result["dtypes"][name]["error"]
    assert "warmed for" in result["method"]


def test_the_ceiling_is_the_whitepaper_peak_for_an_h100_sxm():
    """132 SMs at 1830 MHz x 4096 FP16 FLOP per SM and clock = NVIDIA's 989 dense TFLOP/s."""
    from tfgpu import data

    peaks = data.load("gpu_peaks.toml")["arch"]
    assert matmul_bench.ceiling_tflops(peaks, "9.0", 132, 1830, "fp16") == pytest.approx(989.4, rel=0.001)
    assert matmul_bench.ceiling_tflops(peaks, "9.0", 132, 1830, "tf32") == pytest.approx(494.7, rel=0.001)
    assert matmul_bench.ceiling_tflops(peaks, "8.0", 108, 1410, "fp16") == pytest.approx(312, rel=0.01)
    assert matmul_bench.ceiling_tflops(peaks, "7.0", 80, 1530, "fp16") == pytest.approx(125, rel=0.01)
    assert matmul_bench.ceiling_tflops(peaks, "3.5", 15, 875, "fp16") is None  # no row: no ceiling claimed


REFERENCE = r"""
import json, statistics, sys, time
sys.path.insert(0, sys.argv[1])
import tensorflow as tf
import matmul_bench
# One thread each: on a two-core machine that other work shares, a two-thread matmul runs at half
# speed whenever one core is taken, and the two measurements below are minutes apart.
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
n = 512
ours = matmul_bench.rate(tf, "/CPU:0", n, tf.float32, warm_seconds=0.5, rounds=7, per_round=20, round_seconds=0.5)
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
print(json.dumps({"ours": ours, "reference": statistics.median(rates), "reference_best": max(rates)}))
"""


@pytest.mark.network
@pytest.mark.slow
def test_real_tensorflow_on_the_cpu_agrees_with_a_long_reference_loop(real_tf_env):
    """Real TensorFlow (tensorflow-cpu from PyPI): the bench's figures against 20 rounds x 40 calls after
    100 warm-up calls, each call read back in full (on a CPU the copy is free, so this is the plain way).
    The best rounds are compared: each is what the machine gives when nothing else runs, where a
    median moves with whatever shares the cores (a busy minute once put the bench's median at twice
    the reference's, its best round equal to it)."""
    import json
    import os
    import subprocess

    done = subprocess.run(
        [str(real_tf_env / "bin" / "python"), "-c", REFERENCE, str(Path(matmul_bench.__file__).parent)],
        capture_output=True,
        text=True,
        timeout=900,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    ours, reference = result["ours"]["max"], result["reference_best"]
    assert abs(ours - reference) / reference < 0.3, result


def test_the_matmul_speedup_uses_the_unrounded_cpu_and_device_figures():
    """A CPU at 0.044449 TFLOP/s is shown as 0.0444 and a GPU at 49.96 as 50.0: the speed-up is
    computed from what was measured (1124.0x), not from the shown figures (1126.1x)."""
    cpu = {"median": matmul_bench._shown(0.044449), "median_exact": 0.044449}
    fp32 = {"median": matmul_bench._shown(49.96), "median_exact": 49.96}
    assert (cpu["median"], fp32["median"]) == (0.0444, 50.0)
    ratio = matmul_bench.matmul_speedup({"dtypes": {"fp32": fp32}, "cpu_fp32": cpu})
    assert ratio == pytest.approx(49.96 / 0.044449)
    assert round(ratio, 1) != round(50.0 / 0.0444, 1)


def test_rate_keeps_the_unrounded_median_beside_the_shown_one():
    stream = FakeStream(slow_first_calls=0)
    figure = matmul_bench.rate(FakeTF(stream), "/GPU:0", N, "float32", clock=stream.clock)
    assert figure["median"] == matmul_bench._shown(figure["median_exact"])
    assert figure["median_exact"] == pytest.approx(TRUE_TFLOPS, rel=0.01)
