"""Run by an environment's own Python (``tfgpu-install verify``): does TensorFlow use the GPU?

Prints one JSON document on stdout. Imports TensorFlow, records its build info, which CUDA
libraries the process loaded and from which files, the GPUs TensorFlow lists, and for each GPU
a matmul checked against the CPU's result. With no GPU it finds the reason (no driver, a driver
too old for the build's CUDA, a CUDA library that will not load). Standard library + TensorFlow
only: it runs on whatever Python the env has.
"""

import ctypes
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for gpu_checks; -I leaves it out

CUDA_LIBRARY_PREFIXES = ("libcuda.so", "libcudart", "libcublas", "libcudnn", "libcufft", "libcurand",
                         "libcusolver", "libcusparse", "libnccl", "libnvrtc", "libnvJitLink", "libcupti",
                         "libnvshmem", "libnvidia-ml")


def mapped_cuda_files():
    """Every CUDA library file mapped into this process (/proc/self/maps), in map order: two copies
    of one name (a CUDA 12 and a CUDA 13 libcudnn.so.9) are both listed."""
    found = []
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                path = line.split(None, 5)[-1].strip() if line.count(" ") >= 5 else ""
                if path.startswith("/") and os.path.basename(path).startswith(CUDA_LIBRARY_PREFIXES) and path not in found:
                    found.append(path)
    except OSError:
        pass
    return found


def loaded_cuda_libraries():
    """{basename: path} of the CUDA libraries mapped into this process (the first of each name)."""
    found = {}
    for path in mapped_cuda_files():
        found.setdefault(os.path.basename(path), path)
    return found


def outside_env(libraries):
    """The CUDA libraries this process mapped from outside the env, the driver's aside (libcuda,
    libnvidia-*): none in an env tfgpu-install built or repaired. A system-mode env's toolkit, named
    by absolute path in its etc/tfgpu/layout.json, counts as the env's."""
    root = os.path.realpath(sys.prefix).rstrip("/") + "/"
    toolkits = []  # only the files directly in such a directory: a layout naming / or /usr covers nothing more
    try:
        with open(os.path.join(sys.prefix, "etc", "tfgpu", "layout.json"), encoding="utf-8") as handle:
            toolkits = [os.path.realpath(d) for d in json.load(handle).get("lib_dirs", []) if str(d).startswith("/")]
    except (OSError, ValueError, AttributeError, TypeError):
        pass
    return sorted(path for name, path in libraries.items()
                  if not name.startswith(("libcuda.so", "libnvidia-"))
                  and not os.path.realpath(path).startswith(root)
                  and os.path.dirname(os.path.realpath(path)) not in toolkits)


def driver_facts():
    """(driver CUDA version as "12.4" or None, error or None) through libcuda, without cuInit."""
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
    except OSError as error:
        return None, str(error)
    version = ctypes.c_int(0)
    if libcuda.cuDriverGetVersion(ctypes.byref(version)) != 0:
        return None, "cuDriverGetVersion failed"
    status = libcuda.cuInit(0)
    value = version.value
    return "%d.%d" % (value // 1000, value % 1000 // 10), (None if status == 0 else "cuInit returned %d" % status)


def diagnose(report, build_cuda):
    """Why TensorFlow lists no GPU: the first cause found, as (code, message)."""
    if not report["build_info"].get("is_cuda_build", False):
        return "cpu-only-build", "This TensorFlow wheel is not a CUDA build (is_cuda_build is False)."
    cuda, error = driver_facts()
    report["driver_cuda"] = cuda
    if cuda is None:
        return "no-driver", ("No NVIDIA driver: libcuda.so.1 cannot be loaded (%s). Install the NVIDIA "
                             "driver; the env already holds every other CUDA library." % error)
    built = tuple(int(x) for x in build_cuda.split(".")[:2]) if build_cuda else None
    have = tuple(int(x) for x in cuda.split("."))
    if built and (have[0] < built[0] or (built[0] < 11 and have < built)):
        return "driver-too-old", ("The driver supports CUDA %s; TensorFlow was built with CUDA %s. Upgrade "
                                  "the NVIDIA driver." % (cuda, build_cuda))
    if error:
        return "cuda-init-failed", "The driver is there (CUDA %s) but %s: no usable GPU." % (cuda, error)
    hook = sys.modules.get("_tfgpu_cuda_hook")
    for path, problem in getattr(hook, "errors", []):
        return "library-not-loadable", "%s does not load: %s" % (os.path.basename(path), problem)
    return "no-gpu-registered", "TensorFlow registered no GPU; its log (below) says why."


def has_native_kernels(build_info, cc):
    """Whether the wheel carries SASS a GPU of compute capability ``cc`` ("12.0") runs as compiled:
    one of its architectures (``sm_XY``/``compute_XY``, or bare ``X.Y`` from 2.22 on; compute_XY
    embeds SASS too, TensorFlow's .bazelrc) of the same major at or below its minor. None where the
    wheel does not record them or the GPU's capability is unknown."""
    archs = build_info.get("cuda_compute_capabilities") or []
    if isinstance(archs, str):
        archs = [a for a in archs.replace(",", " ").split() if a]
    try:
        major, minor = (int(x) for x in cc.split("."))
    except ValueError:
        return None
    found = []
    for arch in archs:
        digits = arch.rpartition("_")[2].replace(".", "")
        if digits.isdigit() and len(digits) >= 2:
            found.append((int(digits[:-1]), int(digits[-1])))
    if not found:
        return None
    return any(a == major and b <= minor for a, b in found)


ISOLATED_CHILD = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
import tensorflow as tf
import gpu_checks
for gpu in tf.config.list_physical_devices("GPU"):
    tf.config.experimental.set_memory_growth(gpu, True)
print(json.dumps(getattr(gpu_checks, sys.argv[2])(tf, "/GPU:%d" % int(sys.argv[3]))))
"""


def isolated(python, check, index, timeout=600, child=ISOLATED_CHILD):
    """``gpu_checks.<check>`` on GPU ``index`` in a fresh process. On a GPU the wheel has no SASS
    for, XLA's compile can abort the whole process (LLVM's fatal "PTX version 8.5 does not support
    target 'sm_120'", tensorflow/tensorflow#111958) instead of raising: the abort is the finding."""
    import subprocess

    here = os.path.dirname(os.path.abspath(__file__))
    try:
        done = subprocess.run([python, "-I", "-B", "-c", child, here, check, str(index)], capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "isolated": True, "error": "ran past %d s" % timeout}
    lines = done.stdout.strip().splitlines()
    if done.returncode == 0 and lines:
        try:
            result = json.loads(lines[-1])
            result["isolated"] = True
            return result
        except ValueError:
            pass
    errors = [line for line in done.stderr.splitlines() if "ERROR" in line or "rror:" in line]
    last = (errors or done.stderr.strip().splitlines() or ["no output"])[-1].strip()
    return {"ok": False, "isolated": True, "exit": done.returncode, "aborted": done.returncode < 0,
            "error": last[:300]}


def check_gpu(tf, index):
    """A 2048x2048 matmul on one GPU, compared with the CPU's."""
    import numpy as np

    rng = np.random.default_rng(index)
    a = rng.standard_normal((2048, 2048), dtype=np.float32)
    b = rng.standard_normal((2048, 2048), dtype=np.float32)
    with tf.device("/CPU:0"):
        expected = tf.matmul(a, b).numpy()
    with tf.device("/GPU:%d" % index):
        started = time.perf_counter()
        first = tf.matmul(a, b).numpy()
        first_seconds = time.perf_counter() - started
        started = time.perf_counter()
        for _ in range(10):
            result = tf.matmul(a, b)
        result = result.numpy()
        seconds = (time.perf_counter() - started) / 10
    error = float(np.max(np.abs(result - expected)) / max(float(np.max(np.abs(expected))), 1e-30))
    return {"max_relative_error": error, "ok": error < 2e-2 and bool(np.all(np.isfinite(result))),
            "first_call_seconds": round(first_seconds, 3), "tflops": round(2 * 2048 ** 3 / seconds / 1e12, 2),
            "matches_first": bool(np.allclose(first, result, rtol=1e-3, atol=1e-3))}


def main():
    report = {"python": sys.version.split()[0], "executable": sys.executable, "ok": False, "gpus": [],
              "code": None, "reason": None, "build_info": {}, "libraries": {}}
    started = time.perf_counter()
    try:
        import tensorflow as tf
    except Exception as error:  # noqa: BLE001 - any import failure is the finding
        report.update(code="tensorflow-import-failed", reason="import tensorflow failed: %r" % (error,))
        print(json.dumps(report))
        return
    report["import_seconds"] = round(time.perf_counter() - started, 2)
    growth = set_memory_growth(tf)  # before any op: afterwards TensorFlow refuses
    report["tensorflow"] = tf.__version__
    report["build_info"] = {k: (v if isinstance(v, (str, int, float, bool, list)) else str(v))
                            for k, v in dict(tf.sysconfig.get_build_info()).items()}
    gpus = tf.config.list_physical_devices("GPU")
    report["libraries"] = loaded_cuda_libraries()
    report["outside_env"] = outside_env(report["libraries"])
    hook = sys.modules.get("_tfgpu_cuda_hook")
    report["load_hook"] = {"loaded": len(getattr(hook, "loaded", [])), "errors": getattr(hook, "errors", [])} \
        if hook else None
    if not gpus:
        report["code"], report["reason"] = diagnose(report, report["build_info"].get("cuda_version"))
        print(json.dumps(report))
        return
    import gpu_checks

    for index, device in enumerate(gpus):
        details = tf.config.experimental.get_device_details(device)
        entry = {"device": device.name, "name": details.get("device_name"),
                 "compute_capability": ".".join(map(str, details.get("compute_capability", ()) or ()))}
        try:
            entry.update(check_gpu(tf, index))
        except Exception as error:  # noqa: BLE001 - a failing op is the finding
            entry.update(ok=False, error=repr(error))
        name = "/GPU:%d" % index
        entry["native_kernels"] = has_native_kernels(report["build_info"], entry["compute_capability"])
        # TensorFlow's own (MLIR-generated) kernels are what the driver JIT failed on for
        # Blackwell (tensorflow/tensorflow#99592); XLA may abort the process there, so it runs apart.
        entry["elementwise"] = gpu_checks.elementwise(tf, name)
        entry["xla"] = isolated(sys.executable, "xla", index) if entry["native_kernels"] is False \
            else gpu_checks.xla(tf, name)
        entry["conv"] = gpu_checks.conv(tf, name)
        entry["mixed_precision"] = gpu_checks.mixed_precision(tf, name, entry["compute_capability"])
        report["gpus"].append(entry)
    report["memory"] = gpu_checks.memory(tf, gpus, growth)
    report["memory_limit"] = gpu_checks.memory_limit(sys.executable)
    if len(gpus) >= 2:
        report["mirrored"] = gpu_checks.mirrored(tf, ["/GPU:%d" % i for i in range(len(gpus))])
    if "--bench" in sys.argv:
        peaks = json.loads(sys.argv[sys.argv.index("--peaks") + 1]) if "--peaks" in sys.argv else []
        report["bench"] = gpu_checks.bench(tf, "/GPU:0", peaks, report["gpus"][0]["compute_capability"])
    report["libraries"] = loaded_cuda_libraries()  # again: cuDNN and cuBLASLt dlopen more while they run
    report["outside_env"] = outside_env(report["libraries"])
    import libuse

    # The copy of each library the loader gives TensorFlow by name, its version and wheel: with two
    # CUDA stacks the first of a SONAME loaded answers, which need not be TensorFlow's own.
    report["uses"] = libuse.uses()
    failed = [gpu["device"] + " " + part for gpu in report["gpus"]
              for part in ("matmul", "elementwise", "xla", "conv", "mixed_precision")
              if not (gpu if part == "matmul" else gpu[part]).get("ok")]
    if report.get("mirrored") and not report["mirrored"]["ok"]:
        failed.append("MirroredStrategy")
    if not report["memory_limit"]["ok"]:
        failed.append("memory limit")
    report["ok"] = not failed
    if failed:
        report["code"], report["reason"] = "gpu-op-failed", "Failed on the GPU: " + ", ".join(failed) + "."
    print(json.dumps(report))


def set_memory_growth(tf):
    """Memory growth on every GPU, as TensorFlow requires: before anything initializes them."""
    try:
        for device in tf.config.list_physical_devices("GPU"):
            tf.config.experimental.set_memory_growth(device, True)
        return True
    except (RuntimeError, ValueError) as error:
        return str(error)


if __name__ == "__main__":
    main()
