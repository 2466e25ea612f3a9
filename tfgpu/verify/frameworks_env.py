"""Run by an env's own Python (``tfgpu-install verify --with torch|jax``): import TensorFlow and the
other frameworks in the order given, run GPU operations in each right after its import (a matmul,
then ``framework_ops``: cuDNN conv and LSTM, cuSPARSE, NCCL, cuRAND), and print one JSON line per
step with the CUDA library files that step mapped into the process and the copy of each library
the process uses (``libuse``).

An env that holds TensorFlow next to PyTorch or JAX can compute in one import order and crash in
the other (seen on an H200: torch 2.11+cu130 imported after TF 2.21 died with SIGFPE on its first
CUDA tensor, because TensorFlow's framework library exports CUDA API stubs without symbol
versions). So each order runs in a process of its own, and a line is printed (and flushed) after
every step: the steps before a crash are still reported. Standard library only.

Usage: python frameworks_env.py tensorflow,torch
"""

import json
import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # check_env beside this file; -I leaves it out
import framework_ops  # noqa: E402 - the cuDNN/cuSPARSE/NCCL/cuRAND operations of each framework
import libuse  # noqa: E402 - which copy of each library the process uses
from check_env import mapped_cuda_files  # noqa: E402 - the one reader of this process's mapped CUDA files


def mapped():
    """The CUDA library files mapped into this process."""
    return set(mapped_cuda_files())


def tensorflow_step():
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return {"ok": False, "error": "TensorFlow lists no GPU"}
    with tf.device("/GPU:0"):
        a = tf.random.normal([256, 256])
        product = tf.matmul(a, a)
        total = float(tf.reduce_sum(product))
    device = str(product.device)
    ops = framework_ops.tensorflow_ops(tf)
    return {
        "ok": "GPU" in device.upper() and _all_ok(ops),
        "device": device,
        "value": total,
        "version": tf.__version__,
        "ops": ops,
    }


def torch_step():
    import torch

    if not torch.cuda.is_available():
        return {"ok": False, "error": "torch.cuda.is_available() is False"}
    t = torch.randn(256, 256, device="cuda")
    total = float((t @ t).sum())
    torch.cuda.synchronize()
    ops = framework_ops.torch_ops(torch)
    return {
        "ok": t.device.type == "cuda" and _all_ok(ops),
        "device": str(t.device),
        "value": total,
        "version": torch.__version__,
        "ops": ops,
    }


def jax_step():
    import jax
    import jax.numpy as jnp

    gpus = [d for d in jax.devices() if d.platform in ("gpu", "cuda")]
    if not gpus:
        return {"ok": False, "error": "JAX lists no GPU"}
    a = jax.device_put(jnp.ones((256, 256)), gpus[0])
    total = float((a @ a).sum())
    ops = framework_ops.jax_ops(jax)
    return {"ok": _all_ok(ops), "device": str(gpus[0]), "value": total, "version": jax.__version__, "ops": ops}


def _all_ok(ops):
    return all(op.get("ok") for op in ops)


STEPS = {"tensorflow": tensorflow_step, "torch": torch_step, "jax": jax_step}


def main(order):
    before = mapped()
    for name in order:
        try:
            step = STEPS[name]()
        except Exception as error:  # the report says what failed; the next framework still runs
            step = {
                "ok": False,
                "error": f"{type(error).__name__}: {error}",
                "trace": traceback.format_exc().splitlines()[-6:],
            }
        failed = [op for op in step.get("ops", []) if not op.get("ok")]
        if failed and not step.get("error"):
            step["error"] = "; ".join(
                "{} ({}) failed: {}".format(op["op"], op["library"], op.get("error") or "wrong result") for op in failed
            )
        now = mapped()
        # "uses": the copy of each library the loader gives this process by name, after this
        # framework's operations ran: with two stacks, which stack's cuDNN/NCCL/... it computed with
        step.update({"framework": name, "loaded": sorted(now - before), "uses": libuse.uses()})
        before = now
        print(json.dumps(step), flush=True)


if __name__ == "__main__":
    main([name for name in sys.argv[1].split(",") if name in STEPS])
