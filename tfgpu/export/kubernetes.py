"""Kubernetes manifests for multi-worker TensorFlow: an Indexed Job and a headless Service.

Kubeflow Trainer v2 no longer has TFJob, so nothing sets ``TF_CONFIG`` for TensorFlow any more;
these manifests do it with plain Kubernetes: an Indexed Job (one pod per worker, each with its
``JOB_COMPLETION_INDEX``) whose pods share a headless Service as their subdomain, so worker i is
``<job>-<i>.<service>``; each pod builds ``TF_CONFIG`` from that list and its index. Each pod asks
for ``nvidia.com/gpu``, is placed by node affinity on GPU Feature Discovery's labels (driver and
compute capability at least what the resolution needs), and runs tfgpu-install's verify as an
init container before its worker starts. The image is the Dockerfile export's (written beside);
the programs come from a ConfigMap. Everything is YAML through ``tfgpu.doors.quoting.yaml_document``.
"""

from __future__ import annotations

from packaging.version import Version

from tfgpu.doors import quoting, untrusted
from tfgpu.errors import ImpossibleError
from tfgpu.export.bash import comment, default_env_name, header, template
from tfgpu.export.dockerfile import render_dockerfile
from tfgpu.export.files import ExportFile
from tfgpu.resolver.gpu import lowest_cc

WORKERS, GPUS_PER_WORKER, PORT = 2, 1, 2222
PROGRAMS = ("multiworker.py", "check_env.py", "gpu_checks.py")
MOUNT = "/opt/tfgpu"
# GPU Feature Discovery's labels (NVIDIA k8s-device-plugin, docs/gpu-feature-discovery): the
# cuda.driver.* names are written by every GFD release (newer ones add cuda.driver-version.*).
DRIVER_MAJOR, DRIVER_MINOR = "nvidia.com/cuda.driver.major", "nvidia.com/cuda.driver.minor"
CC_MAJOR, CC_MINOR = "nvidia.com/gpu.compute.major", "nvidia.com/gpu.compute.minor"
GPU_PRESENT = "nvidia.com/gpu.present"

WORKER_SH = """set -eu
TF_CONFIG=$(printf '{"cluster": {"worker": [%s]}, "task": {"type": "worker", "index": %d}}' "$TFGPU_WORKERS" "$JOB_COMPLETION_INDEX")
export TF_CONFIG
echo "tfgpu: worker $JOB_COMPLETION_INDEX of $TFGPU_WORKER_COUNT: TF_CONFIG=$TF_CONFIG"
exec "$TFGPU_PYTHON" "$@"
"""
PREFLIGHT_SH = """set -eu
"$TFGPU_PYTHON" -I /opt/tfgpu/check_env.py | "$TFGPU_PYTHON" -I /opt/tfgpu/preflight.py 1 "$TFGPU_MIN_DRIVER"
"""


def _names(resolution) -> dict[str, str]:
    base = quoting.token(default_env_name(resolution).replace(".", "-"), r"[a-z][a-z0-9-]{0,40}", "The job name")
    return {
        "job": f"{base}-train",
        "service": f"{base}-workers",
        "programs": f"{base}-programs",
        "image": f"{quoting.token(default_env_name(resolution), quoting.NAME, 'The image name')}-gpu:"
        f"{quoting.token(resolution.tensorflow, quoting.IMAGE_TAG, 'The image tag')}",
    }


def _at_least(major_key: str, minor_key: str, version: str) -> list[list[dict]]:
    """Node-selector terms (ORed) for "the labels say at least ``version``": a newer major, or the
    same major with a minor at least as high (Gt takes one integer)."""
    major, minor = Version(version).major, Version(version).minor
    return [
        [{"key": major_key, "operator": "Gt", "values": [str(major - 1 if minor == 0 else major)]}],
        *(
            [
                [
                    {"key": major_key, "operator": "In", "values": [str(major)]},
                    {"key": minor_key, "operator": "Gt", "values": [str(minor - 1)]},
                ]
            ]
            if minor
            else []
        ),
    ]


def node_affinity(resolution) -> dict:
    """GPU nodes whose driver is new enough and whose GPUs the wheel's kernels cover."""
    driver = _at_least(DRIVER_MAJOR, DRIVER_MINOR, resolution.min_driver)
    lowest = lowest_cc(resolution.compute_capabilities) if resolution.compute_capabilities else None
    compute = _at_least(CC_MAJOR, CC_MINOR, lowest) if lowest else [[]]
    present = {"key": GPU_PRESENT, "operator": "In", "values": ["true"]}
    terms = [{"matchExpressions": [present, *d, *c]} for d in driver for c in compute]
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}


def _python(resolution) -> str:
    return "/opt/conda/bin/python" if resolution.mode == "conda" else "/opt/tf/bin/python"


def manifests(resolution) -> list[dict]:
    """The Service, the ConfigMap and the Job, as plain data."""
    names = _names(resolution)
    workers = ",".join(f'"{names["job"]}-{i}.{names["service"]}:{PORT}"' for i in range(WORKERS))
    labels = {"app.kubernetes.io/name": names["job"], "app.kubernetes.io/managed-by": "tfgpu-install"}
    env = [
        {"name": "TFGPU_PYTHON", "value": _python(resolution)},
        {"name": "TFGPU_WORKERS", "value": workers},
        {"name": "TFGPU_WORKER_COUNT", "value": str(WORKERS)},
        {"name": "TFGPU_MIN_DRIVER", "value": str(resolution.min_driver)},
        # NVLink multicast off: GPU nodes are shared between jobs.
        {"name": "NCCL_NVLS_ENABLE", "value": "0"},
        {"name": "NCCL_DEBUG", "value": "WARN"},
    ]
    gpus = {"limits": {"nvidia.com/gpu": GPUS_PER_WORKER}}
    mounts = [{"name": "programs", "mountPath": MOUNT, "readOnly": True}]
    data = {name: untrusted.package_text("tfgpu.verify", name) for name in PROGRAMS}
    data["preflight.py"] = template("slurm_preflight.py")
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": names["service"], "labels": labels},
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {"app.kubernetes.io/name": names["job"]},
            "ports": [{"name": "grpc", "port": PORT, "targetPort": PORT}],
        },
    }
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": names["programs"], "labels": labels},
        "data": data,
    }
    pod = {
        "metadata": {"labels": labels},
        "spec": {
            "subdomain": names["service"],
            "restartPolicy": "Never",
            "affinity": node_affinity(resolution),
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "initContainers": [
                {
                    "name": "verify",
                    "image": names["image"],
                    "command": ["/bin/sh", "-c", PREFLIGHT_SH],
                    "env": env,
                    "resources": gpus,
                    "volumeMounts": mounts,
                }
            ],
            "containers": [
                {
                    "name": "worker",
                    "image": names["image"],
                    "command": ["/bin/sh", "-c", WORKER_SH, "tfgpu-worker"],
                    "args": [f"{MOUNT}/multiworker.py", "--worker"],
                    "env": env,
                    "ports": [{"name": "grpc", "containerPort": PORT}],
                    "resources": gpus,
                    "volumeMounts": mounts,
                }
            ],
            "volumes": [{"name": "programs", "configMap": {"name": names["programs"]}}],
        },
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": names["job"], "labels": labels},
        "spec": {
            "completionMode": "Indexed",
            "completions": WORKERS,
            "parallelism": WORKERS,
            # A lost worker stalls the all-reduce of the others: fail the Job, restart it whole.
            "backoffLimit": 0,
            "template": pod,
        },
    }
    return [service, config, job]


README = """# TensorFlow {tf} on Kubernetes ({mode} mode, {workers} workers)

Generated by tfgpu-install (`tfgpu-install script --format kubernetes -o DIR`).

    docker build -t REGISTRY/{image} .          # the Dockerfile beside this file
    docker push REGISTRY/{image}
    sed -i 's#image: {image}#image: REGISTRY/{image}#' tfgpu-job.yaml
    kubectl apply -f tfgpu-job.yaml
    kubectl logs -l app.kubernetes.io/name={job} --prefix -c worker

`tfgpu-job.yaml` holds a headless Service `{service}`, a ConfigMap `{programs}` (the worker and
verify programs) and an Indexed Job `{job}` of {workers} pods, each with `nvidia.com/gpu: {gpus}`.
Pod i is `{job}-i.{service}`; its `TF_CONFIG` lists every worker at port {port} with index
`JOB_COMPLETION_INDEX`, so `tf.distribute.MultiWorkerMirroredStrategy()` finds the others. The
init container `verify` runs tfgpu-install's verify on the pod's GPU first; a pod without a working
GPU fails before training starts. Node affinity uses GPU Feature Discovery's labels: driver
(`{driver_major}`/`{driver_minor}`) >= {driver} and compute capability (`{cc_major}`/`{cc_minor}`)
>= {cc}. To run your own program, replace the worker's `args` (the image's Python runs them).
More workers: change `completions`, `parallelism` and `TFGPU_WORKERS` together.
"""


def render_kubernetes(resolution, pins=None) -> tuple[ExportFile, ...]:
    """tfgpu-job.yaml, Dockerfile and README.md."""
    if resolution.accelerator != "cuda" or resolution.os not in ("linux", "wsl2"):
        raise ImpossibleError(
            "export-unsupported",
            f"Kubernetes GPU nodes run Linux images; this plan is for {resolution.os}.",
            ["Plan for Linux: --os linux --arch x86_64."],
        )
    dockerfile = render_dockerfile(resolution, pins)  # the image carries the lock's pins
    names = _names(resolution)
    documents = [quoting.yaml_document(document) for document in manifests(resolution)]
    yaml_text = "\n".join(
        [
            comment(header(resolution, "Kubernetes manifests (Indexed Job, headless Service)", pins=pins)),
            "---\n" + "---\n".join(documents),
        ]
    )
    lowest = lowest_cc(resolution.compute_capabilities) if resolution.compute_capabilities else "any"
    line = quoting.one_line
    readme = README.format(
        tf=line(resolution.tensorflow),
        mode=line(resolution.mode),
        workers=WORKERS,
        gpus=GPUS_PER_WORKER,
        port=PORT,
        driver=line(resolution.min_driver),
        cc=line(lowest),
        driver_major=DRIVER_MAJOR,
        driver_minor=DRIVER_MINOR,
        cc_major=CC_MAJOR,
        cc_minor=CC_MINOR,
        **{key: line(value) for key, value in names.items()},
    )
    return (
        ExportFile("tfgpu-job.yaml", yaml_text),
        ExportFile("Dockerfile", dockerfile),
        ExportFile("README.md", readme),
    )
