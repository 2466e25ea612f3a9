"""The matmul figures of ``verify --bench``, taken so that a user can act on them (run by the env's
own Python: standard library + TensorFlow only).

Method, for each dtype: an n x n matmul (inputs made on the device) is called until at least
``warm_seconds`` have passed and two calls in a row take the same time (clocks ramp, kernels are picked or JIT-compiled: TF
2.13 on a compute capability 9.0 GPU JIT-compiles its fp16 kernels from PTX on the first calls), then
``rounds`` rounds of ``per_round`` calls are timed, each round ended by copying one element of the
last product to the host, which waits for every kernel queued before it on the stream. The figure
is the median of the per-round rates, with the lowest and highest. A figure above the GPU's
ceiling (SMs x maximum SM clock x the architecture's dense peak per SM and clock, from
tfgpu/data/gpu_peaks.toml) is a measurement error: it is reported as such, never as a result.
"""

import ctypes
import os
import statistics
import time

CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13  # kHz, the peak SM clock
CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
NVML_CLOCK_SM = 1
MAX_WARM_SECONDS = 60.0
MAX_PER_ROUND = 1000
METHOD = ("{n}x{n} matmul per dtype: warmed for >= {warm:g} s and until two calls in a row agree, then {rounds} rounds of >= {per_round} calls and >= 0.3 s each, each round "
          "ended by copying one element of the last product to the host (waits for the GPU); median of the "
          "per-round rates, with min-max. fp32 runs on TensorFloat-32 tensor cores where TensorFlow enables them "
          "(its default on compute capability >= 8.0).")


def device_limits(ordinal=0):
    """(SM count, maximum SM clock in MHz) of CUDA device ``ordinal``, or (None, None)."""
    sms = clock_khz = None
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
        device, value = ctypes.c_int(0), ctypes.c_int(0)
        if libcuda.cuInit(0) == 0 and libcuda.cuDeviceGet(ctypes.byref(device), ordinal) == 0:
            if libcuda.cuDeviceGetAttribute(ctypes.byref(value), CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                            device) == 0:
                sms = value.value or None
            if libcuda.cuDeviceGetAttribute(ctypes.byref(value), CU_DEVICE_ATTRIBUTE_CLOCK_RATE, device) == 0:
                clock_khz = value.value or None
    except (OSError, AttributeError):
        pass
    if clock_khz is None and not os.environ.get("CUDA_VISIBLE_DEVICES"):
        clock_khz = _nvml_max_sm_clock(ordinal)
    return sms, (clock_khz / 1000 if clock_khz else None)


def _nvml_max_sm_clock(index):
    """NVML's maximum SM clock in kHz (CUDA 13 drivers deprecate the CUDA attribute)."""
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
        handle, mhz = ctypes.c_void_p(), ctypes.c_uint(0)
        if nvml.nvmlInit_v2() != 0:
            return None
        try:
            if nvml.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(handle)) != 0:
                return None
            if nvml.nvmlDeviceGetMaxClockInfo(handle, NVML_CLOCK_SM, ctypes.byref(mhz)) != 0:
                return None
            return mhz.value * 1000 or None
        finally:
            nvml.nvmlShutdown()
    except (OSError, AttributeError):
        return None


def ceiling_tflops(peaks, compute_capability, sms, clock_mhz, dtype):
    """The GPU's dense peak for ``dtype`` in TFLOP/s, or None when a fact is missing."""
    row = next((r for r in peaks if r.get("cc") == compute_capability), None)
    if row is None or not sms or not clock_mhz or dtype not in row:
        return None
    return sms * clock_mhz * 1e6 * row[dtype] / 1e12


def rate(tf, device, n, dtype, warm_seconds=1.0, rounds=7, per_round=20, min_warm_calls=3, round_seconds=0.3,
         clock=time.perf_counter):
    """``{"median", "min", "max", "spread_pct", ...}`` TFLOP/s of an n x n ``dtype`` matmul on ``device``."""
    with tf.device(device):
        a = tf.cast(tf.random.uniform((n, n), dtype=tf.float32), dtype)
        b = tf.cast(tf.random.uniform((n, n), dtype=tf.float32), dtype)
        started, calls, last, steady = clock(), 0, None, False
        # Until warm_seconds have passed and two calls in a row took the same time (within 10%):
        # a first call that compiles, or clocks still ramping, never reach the timed rounds.
        while (calls < min_warm_calls or clock() - started < warm_seconds or not steady) and \
                clock() - started < MAX_WARM_SECONDS:
            call_started = clock()
            _wait(tf.matmul(a, b))
            took = clock() - call_started
            steady = last is not None and abs(took - last) <= 0.1 * max(last, 1e-9)
            last, calls = took, calls + 1
        # Each round long enough to show the sustained rate (power and clocks settle under load),
        # not a burst: at least per_round calls and round_seconds of work.
        per_round = min(MAX_PER_ROUND, max(per_round, int(round_seconds / max(last, 1e-9)) + 1))
        rates = []
        for _ in range(rounds):
            started = clock()
            for _ in range(per_round):
                product = tf.matmul(a, b)
            _wait(product)
            rates.append(2 * n ** 3 * per_round / (clock() - started) / 1e12)
    median = statistics.median(rates)
    return {"median": _shown(median), "min": _shown(min(rates)), "max": _shown(max(rates)),
            "spread_pct": round((max(rates) - min(rates)) / median * 100, 1), "warmup_calls": calls,
            "rounds": rounds, "per_round": per_round, "median_exact": median}


def _shown(tflops):
    """A rate as reported: one decimal for GPU-sized figures, three significant digits below 10
    TFLOP/s, so a small CPU matmul (0.04 TFLOP/s on a busy machine) is not reported as 0.0, which
    reads as "no figure" and fails the bench."""
    return round(tflops, 1) if tflops >= 10 else float(f"{tflops:.3g}")


def matmul_speedup(matmul):
    """The fp32 matmul's device/CPU ratio from the unrounded medians (``median_exact``): the shown
    figures are rounded (three significant digits for a CPU's 0.04 TFLOP/s), and a ratio of
    rounded figures is off by up to the rounding of both."""
    fp32, cpu = matmul["dtypes"]["fp32"], matmul["cpu_fp32"]
    device = fp32.get("median_exact", fp32.get("median"))
    return device / max(cpu.get("median_exact", cpu["median"]), 1e-9) if device else 0.0


def _wait(product):
    """Copy one element to the host: returns once every kernel queued before it has run."""
    return product[0, 0].numpy()


def matmul_figures(tf, device, peaks, compute_capability, n=8192, cpu_n=4096, ordinal=0):
    """Device figures for fp32, fp16 and bf16, each held to the ceiling, and a CPU fp32 figure."""
    sms, clock_mhz = device_limits(ordinal)
    result = {"n": n, "method": METHOD.format(n=n, warm=1.0, rounds=7, per_round=20), "sms": sms,
              "max_sm_clock_mhz": clock_mhz, "dtypes": {}}
    for name in ("fp32", "fp16", "bf16"):
        dtype = {"fp32": tf.float32, "fp16": tf.float16, "bf16": tf.bfloat16}[name]
        try:
            figure = rate(tf, device, n, dtype)
        except Exception as error:  # noqa: BLE001 - a dtype this GPU or build cannot run is reported
            result["dtypes"][name] = {"error": str(error).strip().splitlines()[0][:200]}
            continue
        ceiling = ceiling_tflops(peaks, compute_capability, sms, clock_mhz, "tf32" if name == "fp32" else name)
        figure["ceiling"] = round(ceiling, 1) if ceiling else None
        if ceiling and figure["max"] > ceiling:
            figure = {"error": "measured %.0f TFLOP/s, above this GPU's %.0f TFLOP/s peak: the timing is wrong, "
                               "so no figure is given" % (figure["max"], ceiling), "ceiling": round(ceiling, 1)}
        result["dtypes"][name] = figure
    result["cpu_n"] = cpu_n
    result["cpu_fp32"] = rate(tf, "/CPU:0", cpu_n, tf.float32, warm_seconds=0.0, rounds=3, per_round=1,
                                 min_warm_calls=1, round_seconds=0.0)
    return result
