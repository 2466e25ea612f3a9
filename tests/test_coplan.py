"""``--with``: TensorFlow planned next to PyTorch or JAX, from the wheels' metadata in companions.toml.

Each case's outcome is first pinned to the facts it rests on, read from the shipped tables (the
rows scripts/regen_companion_data.py and scripts/regen_tf_data.py wrote from PyPI), so a table
that changes under a case fails where the fact moved, not in the decision. The CLI runs in this
process (``conftest.run_tool``: argv, environment, exit code and output as ``python -m tfgpu`` has
them; what is tested is the planning, not the process); the network tests run it as a process of
its own, re-read PyPI and ask a real ``uv pip compile``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from importlib.resources import files

import conftest
import pytest
from conftest import suite_cache

from tfgpu.errors import ImpossibleError, UsageError
from tfgpu.resolver import make_request, resolve

TARGET = ("--no-detect", "--os", "linux", "--arch", "x86_64", "--driver", "580.65.06", "--gpu-cc", "9.0")
COMPANIONS = tomllib.loads(files("tfgpu.data").joinpath("companions.toml").read_text("utf-8"))
TENSORFLOW = tomllib.loads(files("tfgpu.data").joinpath("tensorflow.toml").read_text("utf-8"))


def row(framework: str, version: str, extra: str = "") -> dict:
    return next(
        r for r in COMPANIONS["release"] if (r["framework"], r["version"], r["extra"]) == (framework, version, extra)
    )


def tf(version: str) -> dict:
    return next(r for r in TENSORFLOW["release"] if r["version"] == version)


def plan(tf_spec: str, *specs: str, python: str | None = None):
    return resolve(
        make_request(
            tf=tf_spec, companions=specs, os="linux", arch="x86_64", driver="580.65.06", gpu_cc="9.0", python=python
        )
    )


def run_tool(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The tool in this process, with no project file unless ``env`` names one."""
    wanted = {"COLUMNS": "200", "TFGPU_PROJECT_FILE": os.environ.get("TFGPU_PROJECT_FILE", "none"), **(env or {})}
    return conftest.run_tool(*args, env={**os.environ, **wanted})


def test_tf_2_21_with_torch_2_15_is_two_stacks_naming_the_shared_libraries():
    torch = row("torch", "2.15.0")
    assert torch["stack"] == "cu13" and "nvidia-cudnn-cu13" in torch["nvidia"] and "3.10" not in torch["python"]
    assert "nvidia-cudnn-cu12" in tf("2.21.0")["and_cuda"]
    resolution = plan("2.21", "torch==2.15.0")
    assert resolution.two_stacks and resolution.companions == ("torch==2.15.0",)
    assert resolution.coplan.stacks == ("cu12", "cu13")
    assert {"nvidia-cudnn-cu12", "nvidia-cudnn-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu13"} <= set(
        resolution.colliding
    )
    assert "nvidia/cudnn/lib/libcudnn.so.9" in resolution.coplan.colliding_paths
    assert "nvidia/nccl/lib/libnccl.so.2" in resolution.coplan.colliding_paths
    # Python: TF 2.21's cp310-313 meet torch 2.15's >= 3.11.
    assert resolution.coplan.pythons == ("3.11", "3.12", "3.13")
    # torch joins the one uv resolution; create installs TensorFlow's CUDA wheels apart from it.
    assert "torch==2.15.0" in [str(p) for p in resolution.packages.pip]
    assert any(w.code == "two-cuda-stacks" for w in resolution.warnings)
    ways = resolution.coplan.ways_forward
    assert "TF 2.20.0 shares one CUDA stack with torch 2.10.0" in ways[0]
    assert "Separate environments" in ways[1] and "apart (lib/tfgpu/cudaNN)" in ways[2]


def test_tf_2_20_with_torch_2_10_is_one_cuda12_stack_installed_in_one_resolution():
    torch, tf220 = row("torch", "2.10.0"), tf("2.20.0")
    assert torch["stack"] == "cu12" and torch["nvidia"]["nvidia-nccl-cu12"] == "==2.27.5"
    assert tf220["and_cuda"]["nvidia-nccl-cu12"] == "<3.0,>=2.25.1"
    resolution = plan("2.20", "torch==2.10.0")
    assert not resolution.two_stacks and resolution.coplan.outcome == "single-stack"
    assert "torch==2.10.0" in [str(p) for p in resolution.packages.pip]
    assert resolution.modes["pip"].packages == resolution.packages
    assert resolution.coplan.ways_forward == () and resolution.colliding == ()


def test_tf_2_21_with_torch_2_10_conflicts_on_nccl_and_names_tf_2_20():
    assert tf("2.21.0")["and_cuda"]["nvidia-nccl-cu12"] == "<3.0,>=2.27.7"
    with pytest.raises(ImpossibleError) as caught:
        plan("2.21", "torch==2.10.0")
    assert caught.value.code == "companion-conflict"
    assert "nvidia-nccl-cu12: TF 2.21.0 needs <3.0,>=2.27.7, torch 2.10.0 needs ==2.27.5" in caught.value.message
    assert caught.value.alternatives[0].startswith("TF 2.20.0 shares one CUDA stack with torch 2.10.0")


def test_tf_2_21_with_jax_cuda12_is_one_stack_on_a_python_both_have():
    jax = row("jax", "0.12.0.1", "cuda12")
    assert jax["stack"] == "cu12" and jax["python"][0] == "3.12"
    resolution = plan("2.21", "jax[cuda12]")
    assert resolution.companions == ("jax[cuda12]==0.12.0.1",) and not resolution.two_stacks
    assert resolution.python in ("3.12", "3.13") and resolution.coplan.pythons == ("3.12", "3.13")
    assert "jax[cuda12]==0.12.0.1" in [str(p) for p in resolution.packages.pip]


def test_tf_2_21_with_jax_on_a_python_3_11_machine_takes_3_13_unless_python_was_given():
    """The machine is a detection record (Python 3.11 running, no GPU): the one input that makes
    TensorFlow alone choose a Python JAX 0.12 has no wheel for."""
    from tfgpu.detect.host import Host

    here = Host(
        os="linux", arch="x86_64", os_release="", glibc="2.36", python="3.11",
        pythons=(), driver=None, gpus=(), toolkits=(), conda=(),
    )  # fmt: skip
    request = {"tf": "2.21", "driver": "580.65.06", "gpu_cc": "9.0"}
    assert resolve(make_request(**request), here).python == "3.11"
    resolution = resolve(make_request(**request, companions=("jax[cuda12]",)), here)
    assert resolution.python == "3.13" and resolution.companions == ("jax[cuda12]==0.12.0.1",)
    assert any("Python 3.13: the newest every side has wheels for" in r for r in resolution.reasons)
    with pytest.raises(ImpossibleError) as caught:
        resolve(make_request(**request, python="3.11", companions=("jax[cuda12]==0.12.0.1",)), here)
    assert caught.value.code == "companion-conflict" and "Python 3.11" in caught.value.message


def test_tf_2_19_with_jax_0_12_conflicts_on_numpy_and_names_what_fits():
    assert tf("2.19.1")["numpy"] == "<2.2.0,>=1.26.0"
    assert ">=2.2" in row("jax", "0.12.0.1", "cuda12")["numpy"]
    with pytest.raises(ImpossibleError) as caught:
        plan("2.19", "jax==0.12.0.1")
    message = caught.value.message
    assert caught.value.code == "companion-conflict"
    assert "numpy: TF 2.19.1 needs <2.2.0,>=1.26.0, jax[cuda12] 0.12.0.1 needs >=2.2" in message
    ways = caught.value.alternatives
    assert ways[0].startswith("Versions that share TF 2.19.1's CUDA stack: jax[cuda12] ")
    assert any(w.startswith("TF 2.21.0 shares one CUDA stack with jax[cuda12] 0.12.0.1") for w in ways)


def test_tf_2_22rc0_with_torch_2_15_is_two_stacks_with_nvshmem_too():
    assert "nvidia-nvshmem-cu12" in tf("2.22.0rc0")["and_cuda"]
    resolution = plan("2.22.0rc0", "torch==2.15.0")
    assert resolution.two_stacks and "nvidia-nvshmem-cu13" in resolution.colliding
    assert resolution.coplan.pythons == ("3.11", "3.12", "3.13", "3.14")


def test_bare_torch_with_tf_2_21_takes_the_newest_and_says_no_torch_shares_its_stack():
    resolution = plan("2.21", "torch")
    assert resolution.companions == ("torch==2.15.0",) and resolution.two_stacks
    assert not resolution.coplan.ways_forward[0].startswith("Versions that share TF 2.21.0")


def test_torch_and_jax_together_share_tf_2_20s_stack_and_both_join_the_packages():
    resolution = plan("2.20", "torch==2.10.0", "jax[cuda12]")
    assert resolution.companions == ("torch==2.10.0", "jax[cuda12]==0.12.0.1")
    assert resolution.coplan.stacks == ("cu12", "cu12", "cu12") and not resolution.two_stacks
    assert {"torch==2.10.0", "jax[cuda12]==0.12.0.1"} <= {str(p) for p in resolution.packages.pip}
    both = plan("2.21", "torch", "jax")
    assert both.two_stacks and both.coplan.ways_forward[0].startswith(
        "TF 2.20.0 shares one CUDA stack with torch 2.10.0, jax[cuda12] 0.12.0.1"
    )


@pytest.mark.parametrize(
    "spec",
    ["numpy", "torch[cuda12]", "jax[tpu]", "jax[cuda12,cuda13]", "torch @ https://example.org/t.whl", "torch>>2"],
)
def test_anything_but_torch_or_jax_is_refused_with_exit_2(spec):
    with pytest.raises(UsageError) as caught:
        plan("2.21", spec)
    assert caught.value.code == "companion-unsupported" and caught.value.alternatives
    done = run_tool("plan", "--tf", "2.21", "--with", spec, *TARGET)
    assert done.returncode == 2 and "companion-unsupported" in done.stderr and "Traceback" not in done.stderr


def test_a_version_the_table_lacks_is_exit_3():
    done = run_tool("plan", "--tf", "2.21", "--with", "torch==1.0", *TARGET, "--json")
    assert done.returncode == 3
    assert json.loads(done.stdout)["error"]["code"] == "companion-unknown-version"


def test_plan_json_adds_companion_keys_and_text_shows_the_stacks():
    done = run_tool("plan", "--tf", "2.20", "--with", "torch==2.10.0", *TARGET, "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["companions"] == ["torch==2.10.0"] and document["two_stacks"] is False
    assert document["coplan"]["outcome"] == "single-stack" and document["coplan"]["stacks"] == ["cu12", "cu12"]
    assert "torch==2.10.0" in document["packages"]["pip"]
    plain = json.loads(run_tool("plan", "--tf", "2.20", *TARGET, "--json").stdout)
    assert plain["companions"] == [] and plain["two_stacks"] is False and plain["coplan"] is None
    text = run_tool("plan", "--tf", "2.21", "--with", "torch==2.15.0", *TARGET)
    assert text.returncode == 0
    assert "TWO CUDA stacks" in text.stdout and "nvidia/cudnn/lib/libcudnn.so.9" in text.stdout
    # The numbered ways forward come under a heading of their own, after the colliding files.
    lines = text.stdout.splitlines()
    heading = lines.index("  ways forward, the first preferred:")
    assert lines[heading + 1].startswith("  1. ") and "libnccl.so.2" in lines[heading - 1]
    assert not any(line.startswith("  1. ") for line in lines[:heading])


def test_one_set_commands_refuse_a_two_stack_plan_create_keeps_it_and_all_carry_a_single_stack_one(tmp_path):
    refused = run_tool("script", "--format", "bash", "--tf", "2.21", "--with", "torch==2.15.0", *TARGET)
    assert refused.returncode == 3 and "companion-two-stacks" in refused.stderr
    locked = run_tool("lock", "--platform", "linux-64", "--tf", "2.21", "--with", "torch==2.15.0", *TARGET, "--json")
    assert locked.returncode == 3 and json.loads(locked.stdout)["error"]["code"] == "companion-two-stacks"
    dry = run_tool("create", "--dry-run", "--prefix", str(tmp_path / "env"), "--tf", "2.21", "--with", "torch==2.15.0",
                   "--python", "3.12", *TARGET, "--json")  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    assert "torch==2.15.0" in json.loads(dry.stdout)["packages"]["pip"] and not (tmp_path / "env").exists()
    script = run_tool("script", "--format", "bash", "--tf", "2.20", "--with", "torch==2.10.0", *TARGET)
    assert script.returncode == 0, script.stderr
    assert "torch==2.10.0" in script.stdout


def test_the_project_file_takes_with(tmp_path):
    (tmp_path / "tfgpu.toml").write_text('tf = "2.20"\nwith = ["torch==2.10.0"]\n')
    env_file = str(tmp_path / "tfgpu.toml")
    done = run_tool("plan", *TARGET, "--json", env={"TFGPU_PROJECT_FILE": env_file})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["companions"] == ["torch==2.10.0"]
    (tmp_path / "tfgpu.toml").write_text('tf = "2.20"\nwith = ["tensorflow"]\n')
    bad = run_tool("plan", *TARGET, env={"TFGPU_PROJECT_FILE": env_file})
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


# --- against PyPI itself ----------------------------------------------------------------------


def _uv() -> str:
    from uv import find_uv_bin

    return find_uv_bin()


def compile_(tmp_path, *requirements: str) -> subprocess.CompletedProcess:
    (tmp_path / "in.txt").write_text("\n".join(requirements) + "\n")
    return subprocess.run(
        [_uv(), "pip", "compile", str(tmp_path / "in.txt"), "--python-version", "3.12",
         "--python-platform", "x86_64-manylinux_2_28", "--no-header", "--quiet"],
        capture_output=True,
        text=True,
        env={**os.environ, "UV_CACHE_DIR": str(suite_cache("uv")), "UV_NO_CONFIG": "1"},
        timeout=300,
    )  # fmt: skip


@pytest.mark.network
def test_uv_agrees_tf_2_20_and_torch_2_10_share_one_cuda12_stack(tmp_path):
    done = compile_(tmp_path, "tensorflow[and-cuda]==2.20.0", "torch==2.10.0")
    assert done.returncode == 0, done.stderr
    names = [line.split("==")[0] for line in done.stdout.splitlines() if "==" in line]
    assert "nvidia-cudnn-cu12" in names and not [n for n in names if n.endswith("-cu13")]


@pytest.mark.network
def test_uv_agrees_tf_2_21_and_torch_2_10_conflict_and_torch_2_15_brings_a_second_stack(tmp_path):
    conflict = compile_(tmp_path, "tensorflow[and-cuda]==2.21.0", "torch==2.10.0")
    assert conflict.returncode != 0 and "nvidia-nccl-cu12" in conflict.stderr
    two = compile_(tmp_path, "tensorflow[and-cuda]==2.21.0", "torch==2.15.0")
    assert two.returncode == 0, two.stderr
    assert "nvidia-cudnn-cu12==" in two.stdout and "nvidia-cudnn-cu13==" in two.stdout


@pytest.mark.network
def test_the_regeneration_script_reads_the_shipped_rows_back_from_pypi(tmp_path):
    import importlib.util
    from pathlib import Path

    script = Path(__file__).resolve().parent.parent / "scripts" / "regen_companion_data.py"
    spec = importlib.util.spec_from_file_location("regen_companion_data", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "companions.toml"
    only = ["torch==2.10.0", "torch==2.15.0", "jax==0.12.0.1"]
    assert module.main(["--out", str(out), "--cache", str(suite_cache("companion-regen")), "--only", *only]) == 0
    fresh = tomllib.loads(out.read_text("utf-8"))
    for found in fresh["release"]:
        assert found == row(found["framework"], found["version"], found["extra"])
    assert len(fresh["release"]) == 4  # torch twice, jax for cuda12 and cuda13
    assert fresh["collision"] == COMPANIONS["collision"]


@pytest.mark.network
def test_update_data_fetches_a_torch_release_the_shipped_table_lacks(tmp_path):
    import re

    text = files("tfgpu.data").joinpath("companions.toml").read_text("utf-8")
    blocks = re.split(r"(?m)^(?=\[\[release\]\]$|\[versions\]$)", text)
    old = tmp_path / "shipped"
    old.mkdir()
    (old / "companions.toml").write_text(
        "".join(b for b in blocks if 'framework = "torch"\nversion = "2.15.0"\n' not in b), "utf-8"
    )
    env = {
        **os.environ,
        "TFGPU_DATA_DIR": str(old),
        "TFGPU_USER_DATA_DIR": str(tmp_path / "data"),
        "TFGPU_CACHE_DIR": str(suite_cache("companion-update")),
        "TFGPU_UPDATE_TIMEOUT": "120",
        "TFGPU_PROJECT_FILE": "none",
    }
    lacking = subprocess.run(
        [sys.executable, "-m", "tfgpu", "plan", "--tf", "2.21", "--with", "torch==2.15.0", *TARGET, "--json"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert lacking.returncode == 3 and json.loads(lacking.stdout)["error"]["code"] == "companion-unknown-version"
    done = subprocess.run(
        [sys.executable, "-m", "tfgpu", "update-data", "--json"], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr + done.stdout
    assert "torch==2.15.0" in json.loads(done.stdout)["new_companions"]
    planned = subprocess.run(
        [sys.executable, "-m", "tfgpu", "plan", "--tf", "2.21", "--with", "torch==2.15.0", *TARGET, "--json"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert planned.returncode == 0, planned.stderr
    assert json.loads(planned.stdout)["two_stacks"] is True


@pytest.mark.network
def test_lock_puts_tf_2_20_and_torch_2_10_into_one_cuda12_resolution(tmp_path):
    lock = tmp_path / "lock.txt"
    done = subprocess.run(
        [sys.executable, "-m", "tfgpu", "lock", "--tf", "2.20", "--with", "torch==2.10.0", "--platform", "linux-64",
         "--python", "3.12", "--no-detect", "--driver", "580.65.06", "--gpu-cc", "9.0", "-o", str(lock)],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
        env={**os.environ, "TFGPU_PROJECT_FILE": "none", "TFGPU_CACHE_DIR": str(suite_cache("companion-tool"))},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    pinned = [line.split(" ")[0] for line in lock.read_text("utf-8").splitlines() if "==" in line]
    assert "torch==2.10.0" in pinned and "tensorflow==2.20.0" in pinned
    assert "nvidia-nccl-cu12==2.27.5" in pinned and not [p for p in pinned if "-cu13==" in p]


# --- reading the wheels' METADATA (pure parts of tfgpu.datasource.companions) -------------------

TORCH_LIKE = """Metadata-Version: 2.4
Name: torch
Requires-Dist: filelock
Requires-Dist: cuda-toolkit[cublas,cudart]==13.2.2; platform_system == "Linux"
Requires-Dist: nvidia-cudnn-cu13==9.26.0.51; platform_system == "Linux"
Requires-Dist: nvidia-nccl-cu13==2.30.7; platform_system == "Linux" and platform_machine == "x86_64"
Requires-Dist: nvidia-nccl-cu13==9.9.9; platform_system == "Windows"
Requires-Dist: optree>=0.13.0; extra == "optree"
"""

JAX_LIKE = """Metadata-Version: 2.4
Name: jax
Provides-Extra: cuda12
Requires-Dist: jaxlib<=0.12.0.1,>=0.11.2
Requires-Dist: numpy>=2.2
Requires-Dist: jaxlib<=0.12.0.1,>=0.12.0.1; extra == "cuda12"
Requires-Dist: jax-cuda12-plugin[with-cuda]<=0.12.0.1,>=0.12.0.1; extra == "cuda12"
"""


def test_metadata_reading_keeps_the_linux_x86_64_pins_and_derives_the_stack():
    from tfgpu.datasource import companions as source

    pins = source.nvidia_pins(source.requirements(TORCH_LIKE))
    assert pins == {"cuda-toolkit": "==13.2.2", "nvidia-cudnn-cu13": "==9.26.0.51", "nvidia-nccl-cu13": "==2.30.7"}
    assert source.stack_of(pins) == "cu13"
    assert source.stack_of({"nvidia-cuda-runtime": ">=13.0.48", "nvidia-cublas": ">=13.0.0.19"}) == "cu13"
    assert source.stack_of({"cuda-toolkit": "==12.8.1"}) == "cu12" and source.stack_of({}) == ""
    base, extra = source.requirements(JAX_LIKE), source.requirements(JAX_LIKE, "cuda12")
    assert source.numpy_spec(base) == ">=2.2"
    assert source._pinned(extra, "jax-cuda12-plugin") == "0.12.0.1" and source._pinned(extra, "jaxlib") == "0.12.0.1"
    assert source._pinned(base, "jaxlib") == "" and source._upper(base, "jaxlib") == "0.12.0.1"


def test_a_pin_meets_another_only_where_a_published_version_satisfies_both():
    from tfgpu.resolver import companions as decide

    assert decide._meet("nvidia-nccl-cu12", [("TF", ">=2.25.1,<3.0"), ("torch", "==2.27.5")]) == ""
    why = decide._meet("nvidia-nccl-cu12", [("TF 2.21.0", "<3.0,>=2.27.7"), ("torch 2.10.0", "==2.27.5")])
    assert why.startswith("nvidia-nccl-cu12: TF 2.21.0 needs <3.0,>=2.27.7, torch 2.10.0 needs ==2.27.5")
    # A version both ranges admit but PyPI never published is no way to meet.
    published = {str(v) for v in decide.versions()["nvidia-nccl-cu12"]}
    assert {"2.27.7", "2.28.3"} <= published and not [v for v in published if v.startswith(("2.28.0", "2.28.1"))]
    assert decide._meet("nvidia-nccl-cu12", [("a", ">2.27.7"), ("b", "<2.28.3")]) != ""


@pytest.mark.network
def test_lock_check_of_a_lock_made_with_with_plans_the_companion_again(tmp_path):
    """The lock records the companions; `lock --check` re-resolves with them (nothing drifts) and
    its regenerate command names --with."""
    lock = tmp_path / "lock.txt"
    env = {**os.environ, "TFGPU_PROJECT_FILE": "none", "TFGPU_CACHE_DIR": str(suite_cache("companion-tool"))}
    made = subprocess.run(
        [sys.executable, "-m", "tfgpu", "lock", "--tf", "2.20", "--with", "torch==2.10.0", "--platform", "linux-64",
         "--python", "3.12", "--no-detect", "-o", str(lock)],
        capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    checked = subprocess.run(
        [sys.executable, "-m", "tfgpu", "lock", "--check", str(lock), "--json"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    document = json.loads(checked.stdout)
    assert document["changes"] == [] and "--with torch==2.10.0" in lock.read_text("utf-8")


def test_a_repair_with_with_keeps_the_companions_pins_and_never_installs_the_companion():
    from tfgpu.repair.plan import cuda_requirements

    wanted = cuda_requirements(plan("2.20", "torch==2.10.0"))
    assert not [w for w in wanted if w.startswith("torch")]
    assert "nvidia-nccl-cu12==2.27.5" in wanted and "nvidia-nccl-cu12<3.0,>=2.25.1" in wanted
    # Two stacks: torch's CUDA 13 wheels are none of TensorFlow's; a repair of TF's side names none.
    assert not [w for w in cuda_requirements(plan("2.21", "torch==2.15.0")) if "cu13" in w or w.startswith("torch")]
