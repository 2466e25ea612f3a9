"""GPU proof helper: TensorFlow and torch in one process, both import orders, in an env.

Run on the GPU machine (docs/maintainers/gpu-proofs.md, 2026-12-02):
    python3 scripts/gpu/import_orders.py ENV/bin/python ENV [fault_trace.so]
Prints one JSON line per order: the exit status, what each framework computed (device, values, the
cuDNN version torch loaded), the CUDA files mapped from outside ENV (the driver's aside), the load
hook's first libraries, and, with the LD_PRELOAD handler built from fault_trace.c
(``gcc -O1 -shared -fPIC -o fault_trace.so fault_trace.c -ldl``), where a crash happened.
`tfgpu-install verify --with torch` runs the same check as part of the tool.
"""

import json
import os
import subprocess
import sys

PY, ENV = sys.argv[1], os.path.realpath(sys.argv[2])
TRACE = os.path.abspath(sys.argv[3]) if len(sys.argv) > 3 else ""
COMMON = r"""
import json
def maps():
    seen = set()
    for line in open("/proc/self/maps"):
        parts = line.split()
        if len(parts) >= 6 and parts[-1].startswith("/"):
            b = parts[-1].rsplit("/", 1)[-1]
            keys = ("cud", "cublas", "cufft", "curand", "cusolver", "cusparse", "nccl", "nvrtc", "nvJitLink",
                    "nvshmem", "cupti")
            if any(k in b for k in keys):
                seen.add(parts[-1])
    return sorted(seen)
def tf_op():
    import tensorflow as tf
    a = tf.random.normal([512, 512]); x = tf.random.normal([8, 32, 32, 16]); k = tf.random.normal([3, 3, 16, 32])
    with tf.device("/GPU:0"):
        m = tf.matmul(a, a); c = tf.nn.conv2d(x, k, 1, "SAME")
        f = tf.function(lambda t: tf.reduce_sum(tf.sin(t) @ t), jit_compile=True)(a)
    print("RESULT", json.dumps({"tf": [m.device, float(tf.reduce_sum(m)), float(tf.reduce_sum(c)), float(f)]}),
          flush=True)
def torch_op():
    import torch
    t = torch.randn(512, 512, device="cuda"); s = float((t @ t).sum())
    w = torch.randn(32, 16, 3, 3, device="cuda")
    cv = torch.nn.functional.conv2d(torch.randn(8, 16, 32, 32, device="cuda"), w)
    torch.cuda.synchronize()
    print("RESULT", json.dumps({"torch": [str(t.device), s, float(cv.sum()), torch.backends.cudnn.version()]}),
          flush=True)
"""


def run(order):
    code = (
        COMMON
        + "".join(f"{part}_op()\n" for part in order)
        + (
            "import sys\nhook = sys.modules.get('_tfgpu_cuda_hook')\n"
            "print('RESULT', json.dumps({'maps': maps(), 'hook': list(getattr(hook, 'loaded', []))}), flush=True)\n"
        )
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_LIBRARY_PATH")}
    env.update({"TF_FORCE_GPU_ALLOW_GROWTH": "true", "TF_CPP_MIN_LOG_LEVEL": "2"})
    if TRACE:
        env["LD_PRELOAD"] = TRACE
    done = subprocess.run([PY, "-c", code], env=env, capture_output=True, text=True, timeout=400)
    out = {}
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            out.update(json.loads(line[7:]))
    maps = out.pop("maps", [])
    outside = [m for m in maps if not os.path.realpath(m).startswith(ENV + "/") and "/usr/local/nvidia/" not in m]
    crash = [line for line in done.stderr.splitlines() if "FPE-TRACE" in line][:3]
    hook = out.pop("hook", [])
    print(
        json.dumps(
            {
                "order": "-".join(order),
                "rc": done.returncode,
                **out,
                "outside_env": outside,
                "maps": len(maps),
                "hook_first": hook[:12],
                "crash": crash,
            }
        ),
        flush=True,
    )


for order in (["tf", "torch"], ["torch", "tf"]):
    run(order)
