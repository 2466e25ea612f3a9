"""The GPU checks ``check_env.py`` runs inside an env, one function each, any device.

Every function takes the imported ``tf`` module and a device string (``/GPU:0``; tests pass
``/CPU:0`` to exercise the same code on a machine without a GPU) and returns a JSON-able dict
with ``ok``. Standard library + TensorFlow + NumPy only: this file is copied into the env's
Python's view by path, it is never imported by tfgpu-install itself.
"""

import json
import time

import numpy as np


def _close(a, b, tolerance=2e-2):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    scale = max(float(np.max(np.abs(b))), 1e-30)
    error = float(np.max(np.abs(a - b)) / scale)
    return error, error < tolerance and bool(np.all(np.isfinite(a)))


def xla(tf, device):
    """``tf.function(jit_compile=True)``: needs ptxas or the driver, and libdevice, on a GPU."""
    x = tf.constant(np.linspace(-3, 3, 4096, dtype=np.float32).reshape(64, 64))

    def f(t):
        return tf.reduce_sum(tf.math.erf(t) * tf.math.exp(-t * t) + tf.math.log1p(tf.abs(t)))

    with tf.device(device):
        try:
            started = time.perf_counter()
            compiled = float(tf.function(f, jit_compile=True)(x))
            seconds = time.perf_counter() - started
        except Exception as error:  # noqa: BLE001 - the failure is the finding
            return {"ok": False, "error": str(error).strip().splitlines()[0][:300]}
    worst, ok = _close(compiled, float(f(x)), 1e-3)
    return {"ok": ok, "max_relative_error": worst, "compile_seconds": round(seconds, 2)}


def elementwise(tf, device):
    """Element-wise ops (multiply, tanh, add) that TensorFlow runs with its own generated kernels,
    not cuBLAS/cuDNN: on a GPU without SASS for them they come from the driver's PTX JIT."""
    x = np.linspace(-2, 2, 65536, dtype=np.float32)
    with tf.device("/CPU:0"):
        expected = (tf.tanh(x) * x + x).numpy()
    try:
        with tf.device(device):
            result = (tf.tanh(x) * x + x).numpy()
    except Exception as error:  # noqa: BLE001 - the failure is the finding
        return {"ok": False, "error": str(error).strip().splitlines()[0][:300]}
    worst, ok = _close(result, expected, 1e-4)
    return {"ok": ok, "max_relative_error": worst}


def conv(tf, device):
    """A cuDNN convolution (NHWC, 3x3) compared with the CPU's."""
    rng = np.random.default_rng(1)
    images = rng.standard_normal((8, 64, 64, 16), dtype=np.float32)
    kernel = rng.standard_normal((3, 3, 16, 32), dtype=np.float32)
    with tf.device("/CPU:0"):
        expected = tf.nn.conv2d(images, kernel, strides=1, padding="SAME").numpy()
    try:
        with tf.device(device):
            result = tf.nn.conv2d(images, kernel, strides=1, padding="SAME").numpy()
    except Exception as error:  # noqa: BLE001
        return {"ok": False, "error": str(error).strip().splitlines()[0][:300]}
    worst, ok = _close(result, expected)
    return {"ok": ok, "max_relative_error": worst}


def _mnist_model(tf, optimizer="adam"):
    keras = tf.keras
    model = keras.Sequential([
        keras.layers.Input((28, 28, 1)),
        keras.layers.Conv2D(32, 3, activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Flatten(),
        keras.layers.Dense(10, dtype="float32"),
    ])
    model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def _synthetic(samples):
    rng = np.random.default_rng(0)
    return (rng.random((samples, 28, 28, 1), dtype=np.float32), rng.integers(0, 10, samples).astype("int32"))


def _loss_scale_optimizer(tf):
    base = tf.keras.optimizers.Adam()
    for owner in (getattr(tf.keras, "mixed_precision", None), getattr(tf.keras, "optimizers", None)):
        wrapper = getattr(owner, "LossScaleOptimizer", None)
        if wrapper is not None:
            return wrapper(base)
    raise RuntimeError("this Keras has no LossScaleOptimizer")


def mixed_precision(tf, device, compute_capability):
    """A training step under ``mixed_float16`` with a loss-scale optimizer; says when the GPU
    gains nothing from it (compute capability below 7.0 has no tensor cores)."""
    major = int(str(compute_capability or "0").split(".")[0] or 0)
    if device.startswith("/GPU") and major and major < 7:
        return {"ok": True, "skipped": True,
                "note": f"compute capability {compute_capability} < 7.0: mixed_float16 brings no speed-up here"}
    policy = tf.keras.mixed_precision
    previous = policy.global_policy()
    try:
        policy.set_global_policy("mixed_float16")
        with tf.device(device):
            model = _mnist_model(tf, _loss_scale_optimizer(tf))
            x, y = _synthetic(512)
            history = model.fit(x, y, batch_size=128, epochs=1, verbose=0)
        loss = float(history.history["loss"][-1])
        compute = model.layers[0].compute_dtype
        return {"ok": bool(np.isfinite(loss)) and compute == "float16", "loss": loss, "compute_dtype": compute}
    except Exception as error:  # noqa: BLE001
        return {"ok": False, "error": str(error).strip().splitlines()[0][:300]}
    finally:
        policy.set_global_policy(previous)


def memory(tf, gpus, growth_applied, device_index=0):
    """What memory growth did (it must be set before the first op) and what was used."""
    result = {"ok": growth_applied is True, "growth": growth_applied,
              "note": "memory growth was set on every GPU right after import, before any op"}
    if growth_applied is not True:
        result["note"] = f"memory growth could not be set: {growth_applied}"
    try:
        info = tf.config.experimental.get_memory_info(f"GPU:{device_index}")
        result.update(current_mib=info["current"] // 2**20, peak_mib=info["peak"] // 2**20)
    except Exception:  # noqa: BLE001 - not every build reports memory
        pass
    return result


def mirrored(tf, devices):
    """One epoch under MirroredStrategy across ``devices``, global batch a multiple of replicas."""
    try:
        strategy = tf.distribute.MirroredStrategy(devices)
        replicas = strategy.num_replicas_in_sync
        global_batch = 64 * replicas
        with strategy.scope():
            model = _mnist_model(tf)
        x, y = _synthetic(global_batch * 4)
        history = model.fit(x, y, batch_size=global_batch, epochs=1, verbose=0)
        loss = float(history.history["loss"][-1])
        return {"ok": bool(np.isfinite(loss)), "replicas": replicas, "global_batch": global_batch, "loss": loss}
    except Exception as error:  # noqa: BLE001
        return {"ok": False, "error": str(error).strip().splitlines()[0][:300]}


def _epoch_seconds(tf, device, batch, samples, mixed=False):
    policy = tf.keras.mixed_precision
    previous = policy.global_policy()
    if mixed:
        policy.set_global_policy("mixed_float16")
    try:
        with tf.device(device):
            model = _mnist_model(tf)
            x, y = _synthetic(samples)
            model.fit(x[: batch * 2], y[: batch * 2], batch_size=batch, epochs=1, verbose=0)  # build and warm up
            started = time.perf_counter()
            model.fit(x, y, batch_size=batch, epochs=1, verbose=0)
            return time.perf_counter() - started
    finally:
        policy.set_global_policy(previous)


def bench(tf, device, peaks=(), compute_capability="", samples=60000, matmul_n=8192, cpu_matmul_n=4096):
    """The seeds' MNIST-shaped CNN on CPU vs ``device`` (synthetic data) and compute-bound matmuls
    (``matmul_bench``: warmed, synced, repeated, median, held to the GPU's peak).

    A small CNN is bound by per-step overhead, not by the GPU: its speed-up is reported with that
    verdict instead of being presented as what the GPU can do; the matmul shows the latter.
    """
    import matmul_bench

    result = {"cnn": []}
    for batch in (128, 1024):
        cpu = _epoch_seconds(tf, "/CPU:0", batch, samples)
        gpu = _epoch_seconds(tf, device, batch, samples)
        row = {"batch": batch, "cpu_seconds": round(cpu, 2), "device_seconds": round(gpu, 2),
               "speedup": round(cpu / gpu, 2)}
        try:
            row["device_mixed_seconds"] = round(_epoch_seconds(tf, device, batch, samples, mixed=True), 2)
        except Exception as error:  # noqa: BLE001
            row["mixed_error"] = str(error).splitlines()[0][:200]
        result["cnn"].append(row)
    result["matmul"] = matmul_bench.matmul_figures(tf, device, list(peaks), compute_capability, n=matmul_n,
                                                   cpu_n=cpu_matmul_n)
    fp32 = result["matmul"]["dtypes"]["fp32"].get("median")
    matmul_ratio = matmul_bench.matmul_speedup(result["matmul"])
    best_cnn = max(row["speedup"] for row in result["cnn"])
    result["matmul_speedup"] = round(matmul_ratio, 1)
    result["overhead_bound"] = bool(fp32) and best_cnn < 0.2 * matmul_ratio
    result["verdict"] = (
        f"The CNN runs {best_cnn:.1f}x faster on the device, while a compute-bound matmul runs {matmul_ratio:.0f}x "
        "faster: the small CNN is bound by per-step overhead (kernel launches, input pipeline), not by the GPU. "
        "Larger batches or models show the GPU's speed." if result["overhead_bound"] else
        f"The CNN runs {best_cnn:.1f}x faster on the device (compute-bound matmul: {matmul_ratio:.0f}x).")
    result["ok"] = bool(fp32)
    return result


MEMORY_LIMIT_CHILD = r"""
import json, sys
import tensorflow as tf
limit = int(sys.argv[1])
gpus = tf.config.list_physical_devices("GPU")
out = {"limit_mib": limit}
# The right way: a logical device with a memory limit, before anything touches the GPU.
tf.config.set_logical_device_configuration(gpus[0], [tf.config.LogicalDeviceConfiguration(memory_limit=limit)])
out["logical_gpus"] = len(tf.config.list_logical_devices("GPU"))
with tf.device("/GPU:0"):
    out["matmul_ok"] = bool(tf.reduce_all(tf.math.is_finite(tf.matmul(tf.ones((512, 512)), tf.ones((512, 512))))))
    try:
        tf.zeros((2 * limit * 2**20 // 4,), tf.float32).numpy()
        out["enforced"] = False
    except tf.errors.ResourceExhaustedError:
        out["enforced"] = True
# The wrong way: once the GPU is initialized, TensorFlow refuses a different configuration.
try:
    tf.config.set_logical_device_configuration(gpus[0], [tf.config.LogicalDeviceConfiguration(memory_limit=limit // 2)])
    out["late_change_refused"] = False
except RuntimeError as error:
    out["late_change_refused"] = True
    out["late_change_error"] = str(error).strip().splitlines()[0][:200]
print(json.dumps(out))
"""


def memory_limit(python, limit_mib=2048, timeout=300):
    """A memory limit on GPU 0, configured before the first op, in a fresh process (in this one
    memory growth is already set, and the two cannot be combined on one GPU): the limit holds
    (allocating twice the limit fails with ResourceExhaustedError) and a late change is refused."""
    import subprocess

    try:
        done = subprocess.run([python, "-I", "-B", "-c", MEMORY_LIMIT_CHILD, str(limit_mib)], capture_output=True,
                              text=True, timeout=timeout)
        out = json.loads(done.stdout.strip().splitlines()[-1])
    except Exception as error:  # noqa: BLE001
        return {"ok": False, "error": str(error)[:300]}
    out["ok"] = bool(out.get("matmul_ok") and out.get("enforced") and out.get("late_change_refused"))
    return out
