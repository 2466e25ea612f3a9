"""The Kubernetes export: every manifest valid against the Kubernetes API schemas (offline, with
kubernetes-validate's bundled schemas), node affinity derived from the resolution, and the
worker's TF_CONFIG built by its real shell command from the pod's index."""

from __future__ import annotations

import functools
import json
import subprocess

import pytest
import yaml
from exporthelpers import MODES, VERSIONS, render, resolution

from tfgpu.export.kubernetes import PORT, WORKER_SH, node_affinity

KUBERNETES = ("1.29", "1.30")


def documents(tf: str, mode: str) -> list[dict]:
    out = {item.name: item.content for item in render(tf, mode, "kubernetes").files}
    return [doc for doc in yaml.safe_load_all(out["tfgpu-job.yaml"]) if doc]


@functools.cache
def _schema(read, filename: str, desired_version: str):
    return read(filename, desired_version)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tf", VERSIONS)
def test_every_manifest_validates_against_the_kubernetes_schemas(tf, mode, monkeypatch):
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    # The validator reads its bundled schema files (megabytes of JSON) again for every document: read
    # once for the file's cases, the same files, used as they are (a validation only reads them).
    read = kubernetes_validate.utils.schema_contents
    monkeypatch.setattr(kubernetes_validate.utils, "schema_contents", lambda *args: _schema(read, *args))
    try:
        docs = documents(tf, mode)
    except Exception as error:  # TF 2.16 system mode: no nvidia/cuda image (the Dockerfile export says so)
        assert (tf, mode, getattr(error, "code", None)) == ("2.16.1", "system", "no-docker-image")
        return
    assert [doc["kind"] for doc in docs] == ["Service", "ConfigMap", "Job"]
    for doc in docs:
        for version in KUBERNETES:
            kubernetes_validate.validate(doc, version, strict=True)


def test_the_job_is_indexed_asks_for_gpus_verifies_first_and_keeps_nvlink_multicast_off():
    service, config, job = documents("2.21", "pip")
    spec = job["spec"]
    pod = spec["template"]["spec"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == spec["parallelism"] == 2
    assert service["spec"]["clusterIP"] == "None" and pod["subdomain"] == service["metadata"]["name"]
    (init,), (worker,) = pod["initContainers"], pod["containers"]
    assert init["name"] == "verify" and "check_env.py" in init["command"][2]
    for container in (init, worker):
        assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
        assert {"name": "NCCL_NVLS_ENABLE", "value": "0"} in container["env"]
        assert container["image"] == "tf2.21-gpu:2.21.0"
    assert set(config["data"]) == {"multiworker.py", "check_env.py", "gpu_checks.py", "preflight.py"}


def test_node_affinity_follows_the_driver_and_the_lowest_architecture():
    plan = resolution("2.21", "pip")  # driver >= 525.60.13; kernels from compute capability 6.0
    terms = node_affinity(plan)["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]

    def admits(labels: dict[str, str]) -> bool:
        def holds(expr):
            value = labels.get(expr["key"])
            if value is None:
                return False
            if expr["operator"] == "In":
                return value in expr["values"]
            return int(value) > int(expr["values"][0])  # Gt

        return any(all(holds(e) for e in term["matchExpressions"]) for term in terms)

    def node(driver: str, cc: str) -> dict[str, str]:
        major, minor = driver.split(".")[:2]
        cmajor, cminor = cc.split(".")
        return {
            "nvidia.com/gpu.present": "true",
            "nvidia.com/cuda.driver.major": major,
            "nvidia.com/cuda.driver.minor": str(int(minor)),
            "nvidia.com/gpu.compute.major": cmajor,
            "nvidia.com/gpu.compute.minor": cminor,
        }

    assert admits(node("535.104.05", "9.0")) and admits(node("525.60.13", "6.0")) and admits(node("530.30", "8.6"))
    assert not admits(node("525.50.0", "9.0")) and not admits(node("470.82.01", "9.0"))
    assert not admits(node("550.54", "5.2")) and not admits(
        {**node("550.54", "9.0"), "nvidia.com/gpu.present": "false"}
    )


def test_the_worker_command_builds_tf_config_from_the_job_index(tmp_path):
    _, _, job = documents("2.21", "pip")
    worker = job["spec"]["template"]["spec"]["containers"][0]
    env = {item["name"]: item["value"] for item in worker["env"]}
    fake_python = tmp_path / "python"
    fake_python.write_text('#!/bin/sh\nprintf "%s\\n" "$TF_CONFIG"\n')
    fake_python.chmod(0o755)
    assert worker["command"][2] == WORKER_SH
    done = subprocess.run(
        [*worker["command"], *worker["args"]],
        capture_output=True,
        text=True,
        timeout=30,
        env={**env, "TFGPU_PYTHON": str(fake_python), "JOB_COMPLETION_INDEX": "1", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    config = json.loads(done.stdout.strip().splitlines()[-1])
    assert config == {
        "cluster": {"worker": [f"tf2-21-train-0.tf2-21-workers:{PORT}", f"tf2-21-train-1.tf2-21-workers:{PORT}"]},
        "task": {"type": "worker", "index": 1},
    }
