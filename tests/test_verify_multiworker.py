"""``verify --workers N``: a MultiWorkerMirroredStrategy step across N local worker processes.

The network test runs two real TensorFlow workers (the CPU wheel) through the real CLI; the fast
tests check placement (one GPU each, a shared GPU under memory limits, the CPU), that every
worker's environment has NCCL_NVLS_ENABLE=0, and the failure and usage paths.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from importlib.resources import files
from pathlib import Path

import pytest
from conftest import run_tool


def multiworker():
    spec = importlib.util.spec_from_file_location("multiworker", files("tfgpu.verify").joinpath("multiworker.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("gpus, expected", [(0, "cpu"), (1, "shared-gpu"), (2, "gpu"), (4, "gpu")])
def test_placement_one_gpu_each_a_shared_gpu_or_the_cpu(gpus, expected):
    chosen, envs = multiworker().placement(2, gpus, 1024)
    assert chosen == expected and len(envs) == 2
    if expected == "gpu":
        assert [env["CUDA_VISIBLE_DEVICES"] for env in envs] == ["0", "1"]
    elif expected == "shared-gpu":
        assert all(env == {"CUDA_VISIBLE_DEVICES": "0", "TFGPU_WORKER_MEMORY_MB": "1024"} for env in envs)
    else:
        assert all(env["CUDA_VISIBLE_DEVICES"] == "" for env in envs)


def test_every_worker_gets_its_tf_config_and_nvlink_multicast_off(monkeypatch):
    """The process boundary faked: record each worker's environment instead of starting it."""
    module = multiworker()
    started = []

    class Recorded:
        returncode = 0

        def __init__(self, argv, env, **_):
            started.append(env)
            config = json.loads(env["TF_CONFIG"])
            self.report = {
                "worker": config["task"]["index"],
                "ok": True,
                "loss_before": 2.0,
                "loss_after": 1.5,
                "collective": "RING",
            }

        def communicate(self, timeout=None):
            return module.MARK + json.dumps(self.report) + "\n", ""

    monkeypatch.setattr(module.subprocess, "Popen", Recorded)
    report = module.coordinate(3, timeout=30, memory_mb=512, devices=1)
    assert report["ok"] and report["devices"] == "shared-gpu" and report["collective"] == ["RING"]
    assert [json.loads(env["TF_CONFIG"])["task"]["index"] for env in started] == [0, 1, 2]
    assert len({tuple(json.loads(env["TF_CONFIG"])["cluster"]["worker"]) for env in started}) == 1
    assert all(env["NCCL_NVLS_ENABLE"] == "0" and env["TFGPU_WORKER_MEMORY_MB"] == "512" for env in started)


def test_workers_whose_losses_differ_fail(monkeypatch):
    module = multiworker()

    class Diverged:
        returncode = 0

        def __init__(self, argv, env, **_):
            self.index = json.loads(env["TF_CONFIG"])["task"]["index"]

        def communicate(self, timeout=None):
            return module.MARK + json.dumps({"worker": self.index, "ok": True, "loss_after": 1.0 + self.index}), ""

    monkeypatch.setattr(module.subprocess, "Popen", Diverged)
    report = module.coordinate(2, timeout=30, memory_mb=512, devices=0)
    assert not report["ok"] and "differ" in report["reason"]


def fake_env(tmp_path: Path) -> Path:
    """An env whose Python has no TensorFlow (this interpreter, linked in)."""
    env = tmp_path / "env"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").symlink_to(sys.executable)
    return env


def test_workers_without_tensorflow_fail_with_the_reason(tmp_path):
    done = run_tool(
        "verify",
        "--prefix",
        str(fake_env(tmp_path)),
        "--workers",
        "2",
        "--json",
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
    )
    document = json.loads(done.stdout)
    assert done.returncode == 1 and document["error"]["code"] == "multiworker-failed", done.stdout
    assert "No module named 'numpy'" in document["error"]["message"] or "tensorflow" in document["error"]["message"]
    assert len(document["details"]["results"]) == 2


@pytest.mark.parametrize("workers", ["1", "0", "65"])
def test_a_worker_count_out_of_range_is_a_usage_error(tmp_path, workers):
    done = run_tool("verify", "--prefix", str(fake_env(tmp_path)), "--workers", workers, "--json")
    assert done.returncode == 2 and json.loads(done.stdout)["error"]["code"] == "bad-option-value"


@pytest.mark.parametrize("workers", [[], ["--workers", "2"]])
def test_a_directory_without_python_is_not_an_env_for_either_check(tmp_path, workers):
    done = run_tool("verify", "--prefix", str(tmp_path), *workers, "--json")
    assert done.returncode == 3 and json.loads(done.stdout)["error"]["code"] == "not-an-env"


@pytest.mark.network
@pytest.mark.slow
def test_two_real_tensorflow_workers_train_one_step_on_the_cpu(real_tf_env):
    done = run_tool(
        "verify",
        "--prefix",
        str(real_tf_env),
        "--workers",
        "2",
        "--json",
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["ok"] and report["workers"] == 2 and report["devices"] == "cpu" and report["collective"] == ["RING"]
    losses = [entry["loss_after"] for entry in report["results"]]
    assert [entry["worker"] for entry in report["results"]] == [0, 1] and losses[0] == pytest.approx(losses[1])
    assert all(entry["loss_after"] < entry["loss_before"] for entry in report["results"]) and report["seconds"] > 0
    human = run_tool(
        "verify",
        "--prefix",
        str(real_tf_env),
        "--workers",
        "2",
        env={**os.environ, "CUDA_VISIBLE_DEVICES": "", "COLUMNS": "200"},
    )
    assert human.returncode == 0 and "worker 0: loss" in human.stdout and "worker 1: loss" in human.stdout
