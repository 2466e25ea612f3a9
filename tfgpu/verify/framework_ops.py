"""Run inside ``frameworks_env.py`` (``verify --with``): in each framework, the GPU operations that use
the CUDA libraries two stacks in one env can share: a cuDNN convolution and RNN (LSTM), a cuSPARSE
matrix product, a one-GPU NCCL all-reduce, and a cuRAND generator.

Each result says which library the operation is there for, whether it ran and matched the CPU (or
the expected sum), and why it was skipped where the framework has no such operation on one GPU.
What each operation DID load is read afterwards by ``libuse`` (the loader's own answer).

cuRAND: none of TensorFlow's, torch's or JAX's random ops call cuRAND's host library (each has its
own Philox kernels), so the cuRAND check makes a cuRAND generator through the copy of
``libcurand.so.10`` this process already has (never one it would load from elsewhere) and draws
normals into device memory, in the same process as the framework.

Standard library + the framework being checked.
"""

import ctypes
import os
import tempfile
import traceback


class Skipped(Exception):
    """The framework has no such operation here (not a failure)."""


def _close(got, want, tolerance=2e-2):
    scale = max(abs(want), 1e-6)
    return abs(got - want) / scale < tolerance


def _run(name, library, function, *args):
    entry = {"op": name, "library": library}
    try:
        entry.update(function(*args))
    except Skipped as why:
        entry.update(ok=True, skipped=True, note=str(why))
    except Exception as error:  # noqa: BLE001 - the failure is the finding
        entry.update(
            ok=False,
            error=f"{type(error).__name__}: {str(error).strip()[:300]}",
            trace=traceback.format_exc().splitlines()[-4:],
        )
    return entry


def curand():
    """Normals from a cuRAND generator of the ``libcurand`` this process already maps, on GPU 0."""
    try:
        rand = ctypes.CDLL("libcurand.so.10", mode=os.RTLD_NOLOAD | ctypes.RTLD_GLOBAL)
    except OSError:
        raise Skipped("this process maps no libcurand.so.10") from None
    cuda = ctypes.CDLL("libcuda.so.1")
    count = 1 << 16

    def check(status, what):
        if status != 0:
            raise RuntimeError(f"{what} returned {status}")

    device, context, memory, generator = ctypes.c_int(0), ctypes.c_void_p(), ctypes.c_uint64(), ctypes.c_void_p()
    check(cuda.cuInit(0), "cuInit")
    check(cuda.cuDeviceGet(ctypes.byref(device), 0), "cuDeviceGet")
    check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), device), "cuDevicePrimaryCtxRetain")
    check(cuda.cuCtxPushCurrent_v2(context), "cuCtxPushCurrent")
    try:
        check(cuda.cuMemAlloc_v2(ctypes.byref(memory), ctypes.c_size_t(4 * count)), "cuMemAlloc")
        check(rand.curandCreateGenerator(ctypes.byref(generator), 100), "curandCreateGenerator")  # PSEUDO_DEFAULT
        check(rand.curandSetPseudoRandomGeneratorSeed(generator, ctypes.c_ulonglong(1234)), "curandSetSeed")
        check(
            rand.curandGenerateNormal(
                generator,
                ctypes.c_void_p(memory.value),
                ctypes.c_size_t(count),
                ctypes.c_float(0.0),
                ctypes.c_float(1.0),
            ),
            "curandGenerateNormal",
        )
        check(cuda.cuCtxSynchronize(), "cuCtxSynchronize")
        host = (ctypes.c_float * count)()
        check(cuda.cuMemcpyDtoH_v2(host, memory, ctypes.c_size_t(4 * count)), "cuMemcpyDtoH")
        rand.curandDestroyGenerator(generator)
        cuda.cuMemFree_v2(memory)
    finally:
        cuda.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))
        cuda.cuDevicePrimaryCtxRelease_v2(device)
    mean = sum(host) / count
    spread = (sum((x - mean) ** 2 for x in host) / count) ** 0.5
    return {
        "ok": abs(mean) < 0.05 and abs(spread - 1) < 0.05,
        "mean": round(mean, 4),
        "std": round(spread, 4),
        "count": count,
    }


# TensorFlow


def _tf_sum(tf, t):
    return float(tf.reduce_sum(tf.square(t)))


def tf_conv(tf):
    x, k = tf.random.normal([4, 32, 32, 8], seed=1), tf.random.normal([3, 3, 8, 16], seed=2)
    with tf.device("/CPU:0"):
        want = _tf_sum(tf, tf.nn.conv2d(x, k, strides=1, padding="SAME"))
    with tf.device("/GPU:0"):
        out = tf.nn.conv2d(x, k, strides=1, padding="SAME")
        got = _tf_sum(tf, out)
    return {"ok": _close(got, want) and "GPU" in str(out.device).upper(), "device": str(out.device)}


def tf_lstm(tf):
    """Keras's LSTM with ``use_cudnn=True`` (Keras 3): it raises rather than fall back when cuDNN's
    RNN cannot run; older Keras takes cuDNN's kernel by itself with these default arguments. The
    CPU's answer comes from a twin layer without cuDNN holding the same weights."""
    try:
        layer, twin = tf.keras.layers.LSTM(32, use_cudnn=True), tf.keras.layers.LSTM(32, use_cudnn=False)
    except TypeError:
        layer, twin = tf.keras.layers.LSTM(32), tf.keras.layers.LSTM(32)
    x = tf.random.normal([8, 20, 16], seed=3)
    with tf.device("/GPU:0"):
        got = _tf_sum(tf, layer(x))
    with tf.device("/CPU:0"):
        twin.build(x.shape)
        twin.set_weights(layer.get_weights())
        want = _tf_sum(tf, twin(x))
    return {"ok": _close(got, want)}


def tf_csr_matmul(tf):
    """CSR sparse x dense: ``SparseTensorToCSRSparseMatrix`` and ``SparseMatrixMatMul`` run cuSPARSE
    on a GPU (TensorFlow's ``tf.sparse.sparse_dense_matmul`` is its own kernel, not cuSPARSE)."""
    with tf.device("/GPU:0"):
        a = tf.nn.relu(tf.random.normal([64, 64], seed=4))
        b = tf.random.normal([64, 16], seed=5)
        st = tf.sparse.from_dense(a)
        csr = tf.raw_ops.SparseTensorToCSRSparseMatrix(indices=st.indices, values=st.values, dense_shape=st.dense_shape)
        got = _tf_sum(tf, tf.raw_ops.SparseMatrixMatMul(a=csr, b=b))
    with tf.device("/CPU:0"):
        want = _tf_sum(tf, tf.matmul(a, b))
    return {"ok": _close(got, want)}


def tf_nccl(tf):
    """``nccl_ops.all_sum`` over the one GPU: TensorFlow's NcclAllReduce kernel, through NCCL."""
    try:
        from tensorflow.python.ops import nccl_ops
    except ImportError as error:
        raise Skipped(f"this TensorFlow has no nccl_ops: {error}") from None
    with tf.device("/GPU:0"):
        x = tf.random.normal([4096], seed=6)
        out = nccl_ops.all_sum([x])[0]
        got, want = _tf_sum(tf, out), _tf_sum(tf, x)
    return {"ok": _close(got, want, 1e-5), "device": str(out.device)}


def tensorflow_ops(tf):
    return [
        _run("conv2d", "cuDNN", tf_conv, tf),
        _run("lstm", "cuDNN", tf_lstm, tf),
        _run("csr_matmul", "cuSPARSE", tf_csr_matmul, tf),
        _run("all_reduce", "NCCL", tf_nccl, tf),
        _run("curand_normal", "cuRAND", curand),
    ]


# torch


def torch_conv(torch):
    x, k = torch.randn(4, 8, 32, 32), torch.randn(16, 8, 3, 3)
    want = float(torch.nn.functional.conv2d(x, k, padding=1).square().sum())
    out = torch.nn.functional.conv2d(x.cuda(), k.cuda(), padding=1)
    return {
        "ok": _close(float(out.square().sum()), want),
        "device": str(out.device),
        "cudnn": bool(torch.backends.cudnn.is_available()),
    }


def torch_lstm(torch):
    layer = torch.nn.LSTM(16, 32, batch_first=True)
    x = torch.randn(8, 20, 16)
    want = float(layer(x)[0].square().sum())
    got = float(layer.cuda()(x.cuda())[0].square().sum())
    return {
        "ok": _close(got, want) and bool(torch.backends.cudnn.is_available()),
        "cudnn": bool(torch.backends.cudnn.is_available()),
    }


def torch_csr_matmul(torch):
    a = torch.relu(torch.randn(64, 64))
    b = torch.randn(64, 16)
    got = float((a.cuda().to_sparse_csr() @ b.cuda()).square().sum())
    return {"ok": _close(got, float((a @ b).square().sum()))}


def torch_nccl(torch):
    """torch.distributed with the nccl backend, world size 1, a file:// rendezvous."""
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_nccl_available():
        raise Skipped("this torch has no NCCL backend")
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    with tempfile.TemporaryDirectory() as scratch:
        dist.init_process_group(
            "nccl", init_method="file://" + os.path.join(scratch, "rendezvous"), rank=0, world_size=1
        )
        try:
            t = torch.full((4096,), 2.0, device="cuda")
            dist.all_reduce(t)
            torch.cuda.synchronize()
            got = float(t.sum())
            version = ".".join(map(str, torch.cuda.nccl.version()))
        finally:
            dist.destroy_process_group()
    return {"ok": _close(got, 2.0 * 4096, 1e-6), "nccl": version}


def torch_ops(torch):
    return [
        _run("conv2d", "cuDNN", torch_conv, torch),
        _run("lstm", "cuDNN", torch_lstm, torch),
        _run("csr_matmul", "cuSPARSE", torch_csr_matmul, torch),
        _run("all_reduce", "NCCL", torch_nccl, torch),
        _run("curand_normal", "cuRAND", curand),
    ]


# JAX


def _jax_gpu(jax):
    return [d for d in jax.devices() if d.platform in ("gpu", "cuda")][0]


def jax_conv(jax):
    import jax.numpy as jnp

    x = jax.random.normal(jax.random.PRNGKey(1), (4, 8, 32, 32))
    k = jax.random.normal(jax.random.PRNGKey(2), (16, 8, 3, 3))

    def conv(a, b):
        return float(jnp.sum(jax.lax.conv_general_dilated(a, b, (1, 1), "SAME") ** 2))

    cpu = jax.devices("cpu")[0]
    want = conv(jax.device_put(x, cpu), jax.device_put(k, cpu))
    got = conv(jax.device_put(x, _jax_gpu(jax)), jax.device_put(k, _jax_gpu(jax)))
    return {"ok": _close(got, want)}


def jax_lstm(jax):
    """``jax.experimental.rnn.lstm``: cuDNN's RNN, held to JAX's own reference LSTM."""
    try:
        from jax.experimental import rnn
    except ImportError as error:
        raise Skipped(f"this JAX has no jax.experimental.rnn: {error}") from None
    import jax.numpy as jnp

    gpu = _jax_gpu(jax)
    batch, steps, size, hidden = 4, 10, 16, 32
    with jax.default_device(gpu):
        x = jax.random.normal(jax.random.PRNGKey(3), (batch, steps, size))
        h0 = jnp.zeros((1, batch, hidden))
        c0 = jnp.zeros((1, batch, hidden))
        weights = rnn.init_lstm_weight(jax.random.PRNGKey(4), size, hidden, 1, False)
        lengths = jnp.full((batch,), steps, dtype=jnp.int32)
        got = rnn.lstm(x, h0, c0, weights, lengths, size, hidden, 1, 0.0, False)[0]
        # JAX's reference LSTM takes the weights unpacked (W_ih, W_hh, b_ih, b_hh)
        unpacked = rnn.unpack_lstm_weights(weights, size, hidden, 1, False)
        want = rnn.lstm_ref(x, h0, c0, *unpacked, lengths, size, hidden, 1, 0.0, False)[0]
    return {"ok": _close(float(jnp.sum(got**2)), float(jnp.sum(want**2)))}


def jax_csr_matmul(jax):
    """BCSR x dense, which JAX lowers to cuSPARSE on a GPU where its cuSPARSE kernels are built."""
    import jax.numpy as jnp
    from jax.experimental import sparse

    with jax.default_device(_jax_gpu(jax)):
        a = jax.nn.relu(jax.random.normal(jax.random.PRNGKey(5), (64, 64)))
        b = jax.random.normal(jax.random.PRNGKey(6), (64, 16))
        got = float(jnp.sum((sparse.BCSR.fromdense(a) @ b) ** 2))
        want = float(jnp.sum((a @ b) ** 2))
    return {"ok": _close(got, want)}


def jax_nccl(jax):
    raise Skipped("one GPU: XLA runs an all-reduce over one device without NCCL")


def jax_ops(jax):
    return [
        _run("conv2d", "cuDNN", jax_conv, jax),
        _run("lstm", "cuDNN", jax_lstm, jax),
        _run("csr_matmul", "cuSPARSE", jax_csr_matmul, jax),
        _run("all_reduce", "NCCL", jax_nccl, jax),
        _run("curand_normal", "cuRAND", curand),
    ]
