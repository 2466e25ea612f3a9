"""``repair``: envs users made themselves (plain uv, a conda prefix), repaired in place and undone.

Real venvs, real uv installs from a local wheelhouse, a real conda prefix linked by rattler from a
local channel; the TensorFlow wheels are stand-ins with TensorFlow's build_info.py
(tests/repairhelpers.py). Real TensorFlow releases are repaired in tests/test_repair_e2e.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import builtenvs
import pytest
import repairhelpers as rh
from conftest import run_tool

MAPS = "import json\nprint(json.dumps(sorted({l.split()[-1] for l in open('/proc/self/maps') if '/nvidia/' in l})))\n"
QUIET = ("--no-detect", "--yes", "--no-verify", "--offline")


def repair(prefix: Path, wheels: Path, env: dict, *extra: str):
    return run_tool("repair", "--prefix", str(prefix), "--find-links", str(wheels), *QUIET, *extra, env=env)


def loaded_libraries(prefix: Path) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "XLA_FLAGS", "VIRTUAL_ENV")}
    done = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", "import tensorflow\n" + MAPS], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_plain_env_is_repaired_then_repair_is_a_no_op_then_undo_restores_every_byte(tmp_path, repair_wheels, tool_env):
    prefix = builtenvs.user_venv(tmp_path / "env", repair_wheels, "tensorflow==2.21.0")
    before, frozen = rh.snapshot(prefix), rh.freeze(prefix)

    done = repair(prefix, repair_wheels, tool_env, "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    wanted = {p["name"] for p in summary["plan"]["add"]}
    assert "nvidia-cudnn-cu12" in wanted and "nvidia-cuda-nvcc-cu12" in wanted
    assert {p["name"] for p in summary["added"]} == wanted  # nothing but the CUDA wheels came in
    assert summary["repaired"] is True and summary["changed"] == []
    assert not (prefix / "tfgpu-env.json").exists()  # repaired, not adopted: `remove` still refuses it
    loaded = loaded_libraries(prefix)
    assert {Path(p).name for p in loaded} >= {"libcudnn.so.9", "libcublas.so.12", "libcudart.so.12"}
    assert all(p.startswith(str(prefix)) for p in loaded)
    assert (prefix / "bin" / "ptxas").resolve().is_file()

    again = repair(prefix, repair_wheels, tool_env, "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["nothing_to_do"] is True

    undone = run_tool("repair", "--undo", "--prefix", str(prefix), "--offline", "--json", env=tool_env)
    assert undone.returncode == 0, undone.stderr
    after = {k: v for k, v in rh.snapshot(prefix).items() if "__pycache__" not in k}
    assert after == {k: v for k, v in before.items() if "__pycache__" not in k}
    assert rh.freeze(prefix) == frozen
    assert loaded_libraries(prefix) == []


def test_offline_repair_installs_from_the_wheel_directory_where_uvs_cache_remembers_a_better_wheel(
    tmp_path, repair_wheels, tool_env
):
    """uv's cache remembers an index page offering the directory's cuDNN version as a wheel that
    ranks higher for this Python (not its file): offline, the repair adds the directory's cuDNN."""
    import wheelhouse
    from localindex import remembered_index

    cudnn = next(version for dist, version, _ in wheelhouse.CUDA_WHEELS if dist == "nvidia-cudnn-cu12")
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    url = remembered_index(tmp_path, tmp_path / "cache" / "uv", "nvidia-cudnn-cu12", cudnn, python)
    prefix = builtenvs.user_venv(tmp_path / "env", repair_wheels, "tensorflow==2.21.0")
    env = {**tool_env, "TFGPU_CACHE_DIR": str(tmp_path / "cache"), "UV_DEFAULT_INDEX": url}
    done = repair(prefix, repair_wheels, env, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    added = {p["name"]: p["version"] for p in json.loads(done.stdout)["added"]}
    assert added["nvidia-cudnn-cu12"] == cudnn
    assert any(Path(p).name == "libcudnn.so.9" for p in loaded_libraries(prefix))  # the directory's, an ELF


def test_offline_repair_missing_a_wheel_names_it_and_calls_it_no_conflict(tmp_path, repair_wheels, tool_env):
    """Offline, with a --find-links directory that lacks one CUDA wheel (and an empty uv cache), uv
    answers "No solution found": that is a wheel it may not fetch, not a clash with what the env
    holds, so the error names the wheel and how to bring it, and nothing changes."""
    import shutil

    wheels = tmp_path / "wheels"
    shutil.copytree(repair_wheels, wheels)
    for wheel in wheels.glob("nvidia_cusolver_cu12-*.whl"):
        wheel.unlink()
    prefix = builtenvs.user_venv(tmp_path / "env", repair_wheels, "tensorflow==2.21.0")
    before = rh.snapshot(prefix)
    done = repair(prefix, wheels, {**tool_env, "TFGPU_CACHE_DIR": str(tmp_path / "cache")}, "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "install-failed" and "nvidia-cusolver-cu12" in error["message"], error
    assert "--find-links directory" in " ".join(error["alternatives"])
    assert rh.snapshot(prefix) == before


def test_a_second_repair_reports_what_it_did_and_undo_still_goes_back_before_the_first(
    tmp_path, repair_wheels, tool_env
):
    """The journal keeps every repair since the first (undo goes back before it), but a report says
    what its own run did: the second repair of an env only rewrites the load hook it lost."""
    prefix = builtenvs.user_venv(tmp_path / "env", repair_wheels, "tensorflow==2.21.0")
    frozen = rh.freeze(prefix)
    first = repair(prefix, repair_wheels, tool_env, "--json")
    assert first.returncode == 0, first.stdout + first.stderr
    assert json.loads(first.stdout)["added"]
    next(prefix.glob("lib/python3*/site-packages/_tfgpu_cuda_hook.pth")).unlink()
    second = repair(prefix, repair_wheels, tool_env, "--json")
    assert second.returncode == 0, second.stdout + second.stderr
    report = json.loads(second.stdout)
    assert report["added"] == [] and report["changed"] == []
    assert any(path.endswith("_tfgpu_cuda_hook.pth") for path in report["files"]), report["files"]
    undone = run_tool(
        "repair", "--undo", "--prefix", str(prefix), "--find-links", str(repair_wheels), "--offline", env=tool_env
    )
    assert undone.returncode == 0, undone.stderr
    assert rh.freeze(prefix) == frozen


def test_dry_run_changes_nothing_and_names_every_change(tmp_path, repair_wheels, tool_env):
    prefix = builtenvs.user_venv(tmp_path / "env", repair_wheels, "tensorflow==2.21.0")
    before = rh.snapshot(prefix)
    done = run_tool("repair", "--prefix", str(prefix), "--dry-run", "--no-detect", env=tool_env)
    assert done.returncode == 0, done.stderr
    assert "nvidia-cudnn-cu12" in done.stderr and "_tfgpu_cuda_hook.pth" in done.stderr
    assert "Dry run: nothing was changed" in done.stdout
    assert rh.snapshot(prefix) == before


def test_an_old_cudnn_is_changed_only_when_allowed_and_undo_puts_it_back(tmp_path, repair_wheels, tool_env):
    prefix = builtenvs.user_venv(
        tmp_path / "env", repair_wheels, "tensorflow==2.21.0", f"nvidia-cudnn-cu12=={rh.OLD_CUDNN}"
    )
    before = rh.snapshot(prefix)
    refused = repair(prefix, repair_wheels, tool_env, "--json")
    assert refused.returncode == 3
    error = json.loads(refused.stdout)["error"]
    assert error["code"] == "repair-needs-changes" and rh.OLD_CUDNN in error["message"]
    assert "--allow-changes" in " ".join(error["alternatives"])
    assert rh.snapshot(prefix) == before

    done = repair(prefix, repair_wheels, tool_env, "--allow-changes", "--json")
    assert done.returncode == 0, done.stderr
    changed = json.loads(done.stdout)["changed"]
    assert [(p["name"], p["from"]) for p in changed] == [("nvidia-cudnn-cu12", rh.OLD_CUDNN)]

    undone = run_tool(
        "repair", "--undo", "--prefix", str(prefix), "--find-links", str(repair_wheels), "--offline", env=tool_env
    )
    assert undone.returncode == 0, undone.stderr
    assert f"nvidia-cudnn-cu12=={rh.OLD_CUDNN}" in rh.freeze(prefix)
    assert rh.snapshot(prefix) == before


def test_a_failed_install_leaves_the_env_as_it_was(tmp_path, repair_wheels, tool_env):
    """The wheelhouse lacks the CUDA wheels: uv fails, nothing is left behind, not even the journal."""
    prefix = builtenvs.user_venv(tmp_path / "env", repair_wheels, "tensorflow==2.21.0")
    before = rh.snapshot(prefix)
    empty = tmp_path / "no-wheels"
    empty.mkdir()
    done = repair(prefix, empty, tool_env, "--json")
    assert done.returncode in (1, 3), done.stdout
    assert rh.snapshot(prefix) == before


def test_a_cpu_only_build_is_refused_with_the_way_forward(tmp_path, cpu_wheels, tool_env):
    prefix = builtenvs.user_venv(tmp_path / "env", cpu_wheels, "tensorflow==2.21.0")
    done = repair(prefix, cpu_wheels, tool_env, "--json")
    assert done.returncode == 3
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "cpu-only-build" and "and-cuda" in " ".join(error["alternatives"])


def test_a_prefix_that_is_not_an_env_is_refused(tmp_path, tool_env):
    (tmp_path / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    done = run_tool("repair", "--prefix", str(tmp_path), *QUIET, "--json", env=tool_env)
    assert done.returncode == 3
    assert json.loads(done.stdout)["error"]["code"] == "not-an-env-prefix"


def test_the_system_python_is_refused(tool_env, tmp_path):
    """Debian's /usr/bin/python3 carries EXTERNALLY-MANAGED (PEP 668)."""
    import sysconfig

    stdlib = Path(
        subprocess.run(
            ["/usr/bin/python3", "-c", "import sysconfig; print(sysconfig.get_path('stdlib'))"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        or sysconfig.get_path("stdlib")
    )
    if not (stdlib / "EXTERNALLY-MANAGED").is_file():
        pytest.skip("this machine's /usr/bin/python3 is not marked EXTERNALLY-MANAGED")
    done = run_tool("repair", "--interpreter", "/usr/bin/python3", *QUIET, "--json", env=tool_env)
    assert done.returncode == 3
    assert json.loads(done.stdout)["error"]["code"] in ("externally-managed", "not-an-env-prefix", "no-tensorflow")


def test_without_a_terminal_repair_needs_yes(tmp_path, repair_wheels, tool_env):
    prefix = builtenvs.user_venv(tmp_path / "env", repair_wheels, "tensorflow==2.21.0")
    done = run_tool("repair", "--prefix", str(prefix), "--no-detect", "--json", env=tool_env)
    assert done.returncode == 2
    assert json.loads(done.stdout)["error"]["code"] == "repair-needs-yes"


def test_undo_without_a_repair_says_so(tmp_path, repair_wheels, tool_env):
    prefix = builtenvs.user_venv(tmp_path / "env", repair_wheels, "tensorflow==2.21.0")
    done = run_tool("repair", "--undo", "--prefix", str(prefix), "--json", env=tool_env)
    assert done.returncode == 3
    assert json.loads(done.stdout)["error"]["code"] == "nothing-to-undo"


@pytest.fixture
def conda_prefix(tmp_path, lock_channel, local_wheels):
    """A conda prefix made with rattler from the local channel (CUDA 12.3 split packages, no cuDNN)
    and TensorFlow 2.16.1 installed into it with uv: a conda env tfgpu-install did not build."""
    import asyncio

    from rattler import install

    from tfgpu.engines import rattler_engine as rattler_engine

    prefix = tmp_path / "conda-env"
    version = ".".join(str(p) for p in sys.version_info[:2])
    specs = [
        f"python {version}.*",
        "cuda-version 12.3.*",
        "cuda-cudart",
        "libcublas",
        "libcufft",
        "libcurand",
        "libcusolver",
        "libcusparse",
        "cuda-nvrtc",
        "cuda-cupti",
        "libnvjitlink",
        "cuda-nvcc-tools",
    ]
    records = rattler_engine.solve(
        specs,
        [lock_channel.as_uri()],
        platform="linux-64",
        cuda="12.3",
        this_host=False,
        repodata_cache=tmp_path / "repodata",
        offline=True,
    )
    asyncio.run(
        install(
            records, target_prefix=prefix, cache_dir=tmp_path / "pkgs", show_progress=False, execute_link_scripts=False
        )
    )
    wheels = tmp_path / "tf-wheels"
    rh.tensorflow_wheel(wheels, "2.16.1", cuda=True)
    subprocess.run(
        [
            rh.uv(),
            "pip",
            "install",
            "--quiet",
            "--python",
            str(prefix / "bin" / "python"),
            "--no-index",
            "--find-links",
            str(wheels),
            "tensorflow==2.16.1",
        ],
        check=True,
    )
    return prefix


def test_a_conda_prefix_gets_the_missing_cudnn_from_conda_and_undo_unlinks_it(conda_prefix, lock_channel, tool_env):
    before = rh.snapshot(conda_prefix)
    done = run_tool(
        "repair", "--prefix", str(conda_prefix), "--channel", str(lock_channel), *QUIET, "--json", env=tool_env
    )
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads(done.stdout)
    assert summary["plan"]["manager"] == "conda"
    assert [p["name"] for p in summary["plan"]["add"]] == ["cudnn"]
    assert [p["name"] for p in summary["added"]] == ["cudnn"]  # the CUDA 12 build: no cudatoolkit came with it
    assert list((conda_prefix / "conda-meta").glob("cudnn-8.9.7.29-*.json"))
    assert (conda_prefix / "etc" / "conda" / "activate.d" / "tfgpu-cuda.sh").is_file()
    assert "libcudnn.so.8" in {Path(p).name for p in loaded_conda(conda_prefix)}

    undone = run_tool("repair", "--undo", "--prefix", str(conda_prefix), "--offline", "--json", env=tool_env)
    assert undone.returncode == 0, undone.stdout + undone.stderr
    after = {k: v for k, v in rh.snapshot(conda_prefix).items() if "__pycache__" not in k}
    assert after == {k: v for k, v in before.items() if "__pycache__" not in k}


def loaded_conda(prefix: Path) -> list[str]:
    done = subprocess.run(
        [
            str(prefix / "bin" / "python"),
            "-c",
            "import tensorflow, json\n"
            "print(json.dumps(sorted({l.split()[-1] for l in open('/proc/self/maps') "
            "if '/lib/lib' in l and 'libcu' in l})))",
        ],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"},
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)
