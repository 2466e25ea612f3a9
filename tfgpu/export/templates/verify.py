"""Run on the target by the generated script, with the env's own Python (not tfgpu library code):
import TensorFlow, list the GPUs and run a matmul on one; prints the result, exit 1 without a GPU."""

import sys

tf_version, min_driver = sys.argv[1], sys.argv[2]
try:
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
except Exception as error:  # a stand-in or broken TensorFlow is a failure, not a crash
    print("FAIL: TensorFlow %s could not list GPUs: %s: %s" % (tf_version, type(error).__name__, error))
    sys.exit(1)
print("TensorFlow %s, GPUs: %s" % (tf.__version__, [g.name for g in gpus]))
if not gpus:
    print("FAIL: TensorFlow sees no GPU (an NVIDIA driver >= %s and a visible GPU are needed; "
          "`nvidia-smi` shows both)" % min_driver)
    sys.exit(1)
with tf.device("/GPU:0"):
    x = tf.random.normal((1024, 1024))
    y = tf.matmul(x, x)
print("OK: 1024x1024 matmul on %s, sum %.3f" % (y.device, float(tf.reduce_sum(y))))
