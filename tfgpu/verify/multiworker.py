"""A MultiWorkerMirroredStrategy training step across worker processes, run by an env's own Python.

Two roles, standard library + TensorFlow + NumPy only (this file runs in the target env, and is
embedded into the Slurm and Kubernetes exports):

* ``--worker``: one worker. ``TF_CONFIG`` (set by whoever started it: the coordinator below, a
  Slurm task, a Kubernetes pod) says which; it trains one step of a small model on a fixed batch
  and prints one line ``TFGPU-WORKER {json}``: its index, the loss before and after the step, the
  collective implementation, its devices, its wall time.
* ``--workers N`` (``tfgpu-install verify --workers N``): starts N workers on this machine (on the
  CPU, on one GPU each, or N sharing one GPU under a memory limit each), with ``TF_CONFIG`` on
  loopback ports, and prints one JSON report. Every worker must finish and report the same loss
  after the step: the all-reduce made their weights equal.

``NCCL_NVLS_ENABLE=0`` is in every worker's environment: NVLink multicast stays off on shared GPU
hosts, where it can take the fabric from other jobs.
"""

import json
import os
import socket
import subprocess
import sys
import time

MARK = "TFGPU-WORKER "
FEATURES = 8
PER_REPLICA_BATCH = 16
LEARNING_RATE = 0.05


def _collective(tf, devices):
    """The all-reduce to ask for: NCCL when each worker has a GPU of its own, the gRPC ring
    otherwise (NCCL refuses two ranks on one GPU, and has nothing to do on the CPU);
    ``TFGPU_COLLECTIVE`` (AUTO, RING, NCCL) overrides."""
    names = tf.distribute.experimental.CommunicationImplementation
    chosen = os.environ.get("TFGPU_COLLECTIVE", "").upper()
    if chosen not in ("AUTO", "RING", "NCCL"):
        chosen = "NCCL" if devices == "gpu" else "RING"
    return getattr(names, chosen)


def _memory_limit(tf):
    """A worker sharing one GPU gets a slice of it (``TFGPU_WORKER_MEMORY_MB``), set before any op."""
    limit = os.environ.get("TFGPU_WORKER_MEMORY_MB")
    gpus = tf.config.list_physical_devices("GPU")
    if gpus and limit:
        tf.config.set_logical_device_configuration(
            gpus[0], [tf.config.LogicalDeviceConfiguration(memory_limit=int(limit))])
    elif gpus:
        for gpu in gpus:
            tf.config.experimental.set_memory_growth(gpu, True)
    return [gpu.name for gpu in gpus]


def worker():
    """One worker's step; returns the exit code (0: the step ran)."""
    started = time.perf_counter()
    config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    task = config.get("task", {})
    report = {"worker": task.get("index"), "workers": len(config.get("cluster", {}).get("worker", [])),
              "host": socket.gethostname(), "ok": False}
    try:
        import numpy as np
        import tensorflow as tf

        report["tensorflow"] = tf.__version__
        gpus = _memory_limit(tf)
        devices = os.environ.get("TFGPU_WORKER_DEVICES") or ("gpu" if gpus else "cpu")
        implementation = _collective(tf, devices)
        strategy = tf.distribute.MultiWorkerMirroredStrategy(
            communication_options=tf.distribute.experimental.CommunicationOptions(implementation=implementation))
        replicas = strategy.num_replicas_in_sync
        global_batch = PER_REPLICA_BATCH * replicas
        rng = np.random.default_rng(0)  # the same data on every worker; each trains on its shard
        x = rng.standard_normal((global_batch, FEATURES)).astype("float32")
        y = (x @ np.linspace(-1.0, 1.0, FEATURES, dtype="float32"))[:, None]
        init = np.random.default_rng(1)  # the same initial weights on every worker
        shapes = ((FEATURES, 16), (16,), (16, 1), (1,))
        with strategy.scope():
            # MEAN: each replica applies the same all-reduced gradient, so the mean is that update.
            weights = [tf.Variable(0.3 * init.standard_normal(shape).astype("float32"),
                                   aggregation=tf.VariableAggregation.MEAN) for shape in shapes]

        def predict(inputs):
            return tf.matmul(tf.nn.relu(tf.matmul(inputs, weights[0]) + weights[1]), weights[2]) + weights[3]

        def replica_step(xb, yb):
            with tf.GradientTape() as tape:
                per_example = tf.reduce_mean(tf.square(predict(xb) - yb), axis=1)
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
            grads = tape.gradient(loss, weights)
            grads = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, grads)
            for weight, grad in zip(weights, grads):
                weight.assign_sub(LEARNING_RATE * grad)
            return loss

        @tf.function
        def train_step(batch):
            per_replica = strategy.run(replica_step, args=batch)
            return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
        dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(global_batch).with_options(options)
        batch = next(iter(strategy.experimental_distribute_dataset(dataset)))
        step_started = time.perf_counter()
        before = float(train_step(batch))
        step_seconds = time.perf_counter() - step_started
        after = float(np.mean((predict(tf.constant(x)).numpy() - y) ** 2))
        extended = getattr(strategy, "extended", None)
        options_used = getattr(extended, "_communication_options", None)
        used = getattr(getattr(options_used, "implementation", None), "name", None)
        report.update(ok=bool(np.isfinite(after)), replicas=replicas, global_batch=global_batch,
                      loss_before=before, loss_after=after,
                      collective=used or implementation.name, devices=devices, gpus=gpus,
                      step_seconds=round(step_seconds, 3))
    except Exception as error:  # noqa: BLE001 - the failure is the finding, reported as data
        report["error"] = "%s: %s" % (type(error).__name__, str(error).strip().splitlines()[0][:400]
                                      if str(error).strip() else "")
    report["seconds"] = round(time.perf_counter() - started, 3)
    print(MARK + json.dumps(report), flush=True)
    return 0 if report["ok"] else 1


def _free_ports(count):
    sockets = []
    for _ in range(count):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sockets.append(sock)
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


def visible_gpus():
    """How many GPUs the workers could use: CUDA_VISIBLE_DEVICES when set, else nvidia-smi's list
    (no TensorFlow import here, so this process holds no GPU)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([part for part in visible.split(",") if part.strip() and part.strip() != "-1"])
    try:
        done = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return len([line for line in done.stdout.splitlines() if line.startswith("GPU ")]) if done.returncode == 0 else 0


def placement(workers, gpus, memory_mb):
    """Per worker, the environment that places it: one GPU each, a slice of GPU 0 each, or the CPU."""
    if gpus >= workers:
        return "gpu", [{"CUDA_VISIBLE_DEVICES": str(i)} for i in range(workers)]
    if gpus >= 1:
        return "shared-gpu", [{"CUDA_VISIBLE_DEVICES": "0", "TFGPU_WORKER_MEMORY_MB": str(memory_mb)}] * workers
    return "cpu", [{"CUDA_VISIBLE_DEVICES": ""}] * workers


def coordinate(workers, timeout, memory_mb, devices=None):
    """Start ``workers`` local workers, wait for them, and return the report."""
    started = time.perf_counter()
    chosen, placed = placement(workers, visible_gpus() if devices is None else devices, memory_mb)
    ports = _free_ports(workers)
    cluster = {"worker": ["127.0.0.1:%d" % port for port in ports]}
    procs = []
    for index in range(workers):
        env = dict(os.environ, TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}}),
                   NCCL_NVLS_ENABLE="0", TFGPU_WORKER_DEVICES=chosen, TF_CPP_MIN_LOG_LEVEL="2", **placed[index])
        procs.append(subprocess.Popen([sys.executable, "-I", "-B", os.path.abspath(__file__), "--worker"], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results, deadline = [], time.monotonic() + timeout
    for index, proc in enumerate(procs):
        try:
            out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for other in procs:
                other.kill()
            out, err = proc.communicate()
            err += "\n(timed out after %d s)" % timeout
        lines = [line[len(MARK):] for line in out.splitlines() if line.startswith(MARK)]
        entry = json.loads(lines[-1]) if lines else {"worker": index, "ok": False}
        entry["exit_code"] = proc.returncode
        if not entry.get("ok"):
            entry["stderr_tail"] = err.strip().splitlines()[-6:]
        results.append(entry)
    losses = [entry.get("loss_after") for entry in results]
    agree = all(loss is not None for loss in losses) and max(losses) - min(losses) <= 1e-4 * max(1.0, abs(losses[0]))
    ok = all(entry.get("ok") and entry["exit_code"] == 0 for entry in results) and agree
    report = {"ok": ok, "workers": workers, "devices": chosen, "results": results,
              "collective": sorted({str(entry.get("collective")) for entry in results if entry.get("collective")}),
              "losses_agree": agree, "seconds": round(time.perf_counter() - started, 2)}
    if not ok:
        failed = [entry for entry in results if not entry.get("ok")]
        report["reason"] = ("worker %s failed: %s" % (failed[0].get("worker"), failed[0].get("error") or
                                                       " | ".join(failed[0].get("stderr_tail", [])))
                            if failed else "the workers' losses after the step differ: %s" % losses)
    return report


def main(argv):
    if "--worker" in argv:
        return worker()
    workers = int(argv[argv.index("--workers") + 1]) if "--workers" in argv else 2
    timeout = float(argv[argv.index("--timeout") + 1]) if "--timeout" in argv else 600.0
    memory_mb = int(os.environ.get("TFGPU_WORKER_MEMORY_MB") or 2048)
    report = coordinate(workers, timeout, memory_mb)
    print(json.dumps(report))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
