"""GPU proof helper: the CUDA files a TensorFlow process maps, and whether each is the env's.

Run with the env's own interpreter on the GPU machine (docs/maintainers/gpu-proofs.md, 2026-12-02):
    ENV/bin/python scripts/gpu/cuda_maps.py ENV
It runs a matmul and a cuDNN convolution on GPU:0 (cuDNN 8 and cuBLASLt ``dlopen`` NVRTC by an
unversioned name only then), reads ``/proc/self/maps`` and prints one JSON document: the files
under ENV, the driver's (``libcuda``, ``libnvidia-*``), and ``outside_env`` — every other CUDA
file, which a closed env must not have. `tfgpu-install verify` reports the same list as
``outside_env``; this is the check without the tool, so a reader can trust it independently.
"""

import json
import os
import re
import sys

ENV = os.path.realpath(sys.argv[1])
import tensorflow as tf  # noqa: E402  (after ENV: a missing argument fails before a slow import)

gpus = tf.config.list_physical_devices("GPU")
with tf.device("/GPU:0"):
    a = tf.random.normal([2048, 2048])
    product = tf.matmul(a, a)
    image = tf.random.normal([16, 64, 64, 32])
    kernel = tf.random.normal([3, 3, 32, 64])
    conv = tf.nn.conv2d(image, kernel, 1, "SAME")
    total = float(tf.reduce_sum(product)) + float(tf.reduce_sum(conv))
CUDA = re.compile(
    r"lib(cuda|cudart|cudnn|cublas|cufft|curand|cusolver|cusparse|nccl|nvrtc|nvJitLink|cupti|nvidia|nvToolsExt)",
    re.I,
)
DRIVER = re.compile(r"/lib(cuda\.so|nvidia-)")
files = set()
with open("/proc/self/maps") as maps:
    for line in maps:
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/"):
            files.add(parts[5].strip())
mapped = sorted(p for p in files if CUDA.search(os.path.basename(p)))
inside = [p for p in mapped if os.path.realpath(p).startswith(ENV + "/")]
driver = [p for p in mapped if p not in inside and DRIVER.search(p)]
outside = [p for p in mapped if p not in inside and p not in driver]
print(
    json.dumps(
        {
            "tensorflow": tf.__version__,
            "gpus": [gpu.name for gpu in gpus],
            "op_device": product.device,
            "finite": total == total,
            "inside_env": inside,
            "driver": driver,
            "outside_env": outside,
        },
        indent=1,
    )
)
