"""How a build that succeeded ends on a machine without an NVIDIA driver, and with one that fails.

Real envs built by uv from the local wheelhouse (tests/wheelhouse.py), whose TensorFlow imports and
lists no GPU, so the real check (``check_env.py``, in the env's own Python) looks for the driver
itself. This machine has none, which is the case under test; where a test host has one, the tests
that need its absence skip, visibly. The driver that is present and fails is the one fake here: a
``libcuda.so.1`` built with gcc whose ``cuDriverGetVersion`` says CUDA 11.2, found by the env's
Python through ``LD_LIBRARY_PATH`` (no real driver can be installed on a test machine).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import builtenvs
import pytest
import repairhelpers as rh
import wheelhouse
from conftest import run_process, run_tool

from tfgpu.detect import probe

TARGET = ("--tf", "2.21", "--mode", "pip", "--python", "3.11")
REASON = "no NVIDIA driver on this machine"
PRELOADED = "CUDA libraries preloaded"


@pytest.fixture(scope="module", autouse=True)
def no_driver_here():
    host = probe()
    if host.driver is not None or host.gpus or Path("/proc/driver/nvidia").exists():
        pytest.skip("this host has an NVIDIA driver: a GPU-less ending cannot be seen here")


def create(prefix: Path, wheels: Path, env: dict, *extra: str) -> subprocess.CompletedProcess:
    return run_tool(
        "create", *TARGET, "--prefix", str(prefix), "--find-links", str(wheels), "--offline", *extra, env=env
    )


@pytest.fixture(scope="module")
def module_tool_env(uv_cache, tmp_path_factory) -> dict[str, str]:
    """conftest's ``tool_env`` (its own logs, envs and Jupyter directories, 160 columns) for the
    builds this module's tests share."""
    root = tmp_path_factory.mktemp("shared-builds")
    return {
        **os.environ,
        "TFGPU_CACHE_DIR": str(uv_cache),
        "TFGPU_LOG_DIR": str(root / "logs"),
        "TFGPU_ENVS_DIR": str(root / "envs"),
        "JUPYTER_DATA_DIR": str(root / "jupyter"),
        "COLUMNS": "160",
    }


@pytest.fixture(scope="module")
def built_by_path(no_gpu_wheels, module_tool_env, tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """One plain ``create --prefix`` (what it printed, and the env), shared by the tests that only
    read them."""
    prefix = tmp_path_factory.mktemp("by-path") / "env"
    return prefix, create(prefix, no_gpu_wheels, module_tool_env)


@pytest.fixture(scope="module")
def built_unverified(no_gpu_wheels, module_tool_env, tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """One ``create --no-verify`` (what it printed, and the env), shared by the tests that only read them."""
    prefix = tmp_path_factory.mktemp("unverified") / "env"
    return prefix, create(prefix, no_gpu_wheels, module_tool_env, "--no-verify")


def test_create_without_a_driver_ends_with_exit_0_and_one_notice(built_by_path):
    prefix, done = built_by_path
    assert done.returncode == 0, done.stderr
    said = done.stdout + done.stderr
    assert said.count(REASON) == 1 and said.count("libcuda.so.1") == 1, said
    assert said.count(f"tfgpu-install verify --prefix {prefix}") == 1
    assert said.count(PRELOADED) == 1
    assert "error" not in done.stderr and "GPU check failed" not in said
    # The notice comes after what was built and before how to use it.
    lines = done.stdout.splitlines()
    built = next(i for i, line in enumerate(lines) if line.startswith("✓ TensorFlow 2.21.0"))
    notice = next(i for i, line in enumerate(lines) if "Built; the GPU was not checked" in line)
    activate = next(i for i, line in enumerate(lines) if "activate:" in line)
    assert built < notice < activate


def test_create_json_says_verified_false_and_why(tmp_path, no_gpu_wheels, tool_env):
    prefix = tmp_path / "env"
    done = create(prefix, no_gpu_wheels, tool_env, "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["verified"] is False
    assert document["not_verified"] == {
        "code": "no-driver-here",
        "reason": "no NVIDIA driver on this machine (no libcuda.so.1, no nvidia-smi, and no /proc/driver/nvidia)",
        "check_with": f"tfgpu-install verify --prefix {prefix}",
    }
    # The rest of the document is as it was: the env's own check is there whole.
    assert {"prefix", "tensorflow", "python", "installed", "log", "notes", "verify"} <= document.keys()
    assert document["verify"]["code"] == "no-driver" and document["verify"]["ok"] is False
    assert sum(PRELOADED in note for note in document["notes"]) == 1


def test_a_named_env_is_checked_by_name(no_gpu_wheels, tool_env):
    done = run_tool(
        "create", *TARGET, "--name", "gpuless", "--find-links", str(no_gpu_wheels), "--offline", "--json", env=tool_env
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["not_verified"]["check_with"] == "tfgpu-install verify --name gpuless"


def test_the_closing_lines_name_the_tools_verbs_and_they_work(no_gpu_wheels, tool_env, built_by_path):
    """A named env is entered by name (``shell``, ``activate``, ``run``), with the source line too;
    the ``run`` line printed, with its example command swapped for a probe, runs in the env."""
    done = run_tool(
        "create", *TARGET, "--name", "closing", "--find-links", str(no_gpu_wheels), "--offline", env=tool_env
    )
    assert done.returncode == 0, done.stderr
    prefix = Path(tool_env["TFGPU_ENVS_DIR"]) / "closing"
    lines = {line.split(":", 1)[0].strip(): line.split(":", 1)[1].strip() for line in done.stdout.splitlines()[-4:-1]}
    assert lines["shell"].startswith("tfgpu-install shell --name closing"), done.stdout
    assert lines["activate"].startswith('eval "$(tfgpu-install activate --name closing)"')
    assert f"source {prefix}/bin/activate" in lines["activate"]
    run = lines["run"].split("  (")[0]
    assert run == "tfgpu-install run --name closing -- python train.py"
    argv = shlex.split(run)[1:-1] + ["-c", "import sys; print(sys.prefix)"]
    ran = run_process(*argv, env=tool_env)  # run hands the command its own stdout: a process of its own
    assert ran.returncode == 0 and ran.stdout.strip() == str(prefix), ran.stderr
    # An env given by path is named by path: its name (the directory's) could find another env.
    elsewhere, other = built_by_path
    assert f"tfgpu-install shell --prefix {elsewhere}" in other.stdout, other.stdout


def test_require_gpu_makes_it_a_failure_and_keeps_the_env(tmp_path, no_gpu_wheels, tool_env):
    prefix = tmp_path / "env"
    done = create(prefix, no_gpu_wheels, tool_env, "--require-gpu")
    assert done.returncode == 1
    assert "error: gpu-required" in done.stderr
    said = done.stdout + done.stderr
    assert said.count(REASON) == 1, said
    assert f"tfgpu-install verify --prefix {prefix}" in done.stderr
    assert (prefix / "bin" / "python").exists()
    document = json.loads(create(tmp_path / "again", no_gpu_wheels, tool_env, "--require-gpu", "--json").stdout)
    assert document["error"]["code"] == "gpu-required" and document["error"]["exit_code"] == 1
    assert document["details"]["verified"] is False
    assert document["details"]["not_verified"]["code"] == "no-driver-here"


def test_require_gpu_and_no_verify_contradict(tmp_path, tool_env):
    for command in (("create", *TARGET, "--prefix", str(tmp_path / "env")), ("repair", "--prefix", str(tmp_path))):
        done = run_tool(*command, "--require-gpu", "--no-verify", "--no-detect", "--yes", "--json", env=tool_env)
        assert done.returncode == 2 and json.loads(done.stdout)["error"]["code"] == "conflicting-options"
    assert not (tmp_path / "env").exists()


def test_no_verify_shows_each_note_once(tmp_path, no_gpu_wheels, tool_env, built_unverified):
    prefix, done = built_unverified
    assert done.returncode == 0, done.stderr
    assert done.stdout.count(PRELOADED) == 1, done.stdout
    assert f"not verified (--no-verify): `tfgpu-install verify --prefix {prefix}` checks the GPU" in done.stdout
    document = json.loads(create(tmp_path / "json", no_gpu_wheels, tool_env, "--no-verify", "--json").stdout)
    assert document["verified"] is False and document["not_verified"]["code"] == "skipped"


def test_a_driver_that_is_here_and_fails_stays_exit_1_and_says_why_once(tmp_path, no_gpu_wheels, tool_env):
    driver = wheelhouse.fake_libcuda(tmp_path / "driver", 11020)
    env = tool_env | {"LD_LIBRARY_PATH": str(driver)}
    prefix = tmp_path / "env"
    done = create(prefix, no_gpu_wheels, env)
    assert done.returncode == 1 and "error: driver-too-old" in done.stderr, done.stderr
    said = done.stdout + done.stderr
    reason = "The driver supports CUDA 11.2; TensorFlow was built with CUDA 12.5.1."
    assert said.count(reason) == 1, said
    assert "GPU check failed" in done.stdout  # what the check saw, its reason left to the error
    # After the error's message, the first way forward is that the env is there to use.
    error = done.stderr.split("error: driver-too-old")[1]
    ways = [line for line in error.splitlines() if line.startswith("  → ")]
    assert ways[0].startswith("  → The env works for everything but the GPU now"), ways
    assert (prefix / "bin" / "python").exists()


def test_verify_says_the_reason_once(tool_env, built_unverified):
    prefix, built = built_unverified
    assert built.returncode == 0
    done = run_tool("verify", "--prefix", str(prefix), env=tool_env)
    assert done.returncode == 1 and "error: no-driver" in done.stderr
    assert (done.stdout + done.stderr).count("libcuda.so.1 cannot be loaded") == 1


def test_verify_says_no_driver_before_asking_the_env(tmp_path, tool_env):
    """What doctor knows in a second, verify says in a second: on a machine without a driver it
    does not start the env's Python (whose TensorFlow import takes seconds to minutes). The env's
    stand-in Python notes that it ran; with a driver that is here and fails (tests/fakenvidia.py)
    the same command asks it."""
    import fakenvidia

    prefix, ran = tmp_path / "env", tmp_path / "python-ran"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "pyvenv.cfg").write_text("home = /usr/bin\n")
    report = json.dumps({"ok": True, "python": "3.11.7", "tensorflow": "2.21.0", "gpus": [], "build_info": {}})
    (prefix / "bin" / "python").write_text(f"#!/bin/sh\ntouch {shlex.quote(str(ran))}\necho '{report}'\n")
    (prefix / "bin" / "python").chmod(0o755)
    done = run_tool("verify", "--prefix", str(prefix), "--json", env=tool_env)
    error = json.loads(done.stdout)
    assert done.returncode == 1 and error["error"]["code"] == "no-driver", done.stdout
    assert "TensorFlow was not imported" in error["error"]["message"]
    assert error["details"]["tensorflow_imported"] is False
    assert not ran.exists()
    text = run_tool("verify", "--prefix", str(prefix), env=tool_env)
    assert text.returncode == 1 and "error: no-driver" in text.stderr
    assert "imports TensorFlow" not in text.stderr and not ran.exists()
    driver = fakenvidia.driver_that_fails(tmp_path / "driver")
    asked = run_tool("verify", "--prefix", str(prefix), env=tool_env | {"PATH": f"{driver}:{tool_env['PATH']}"})
    assert asked.returncode == 0 and ran.exists(), asked.stderr


@pytest.fixture(scope="module")
def no_gpu_repair_wheels(repair_wheels, tmp_path_factory) -> Path:
    """The repair wheelhouse with a TensorFlow that imports, records its CUDA build (build_info.py,
    which repair reads) and lists no GPU, so repair's GPU check runs for real."""
    directory = tmp_path_factory.mktemp("no-gpu-repair-wheels")
    for found in repair_wheels.glob("*.whl"):
        if not found.name.startswith("tensorflow-"):
            shutil.copy2(found, directory)
    wheelhouse.wheel(
        directory,
        "tensorflow",
        "2.21.0",
        {
            "tensorflow/__init__.py": wheelhouse.NO_GPU_TENSORFLOW.format(version="2.21.0").encode(),
            "tensorflow/python/platform/build_info.py": rh.BUILD_INFO.format(cuda=True).encode(),
        },
    )
    return directory


@pytest.fixture(scope="module")
def kept_user_env(no_gpu_repair_wheels, tmp_path_factory) -> tuple[Path, Path]:
    """A user's own env of the GPU-less repair wheels (``uv venv`` + ``uv pip install tensorflow``,
    real uv), built once and kept (tests/builtenvs.py), and where it was built."""
    built = rh.user_venv(tmp_path_factory.mktemp("user-env") / "env", no_gpu_repair_wheels, "tensorflow==2.21.0")
    return builtenvs.keep(built, tmp_path_factory.mktemp("kept") / "env"), built


@pytest.fixture
def user_env(kept_user_env, tmp_path) -> Path:
    """The kept user env, copied to the test's own directory for its repair."""
    return builtenvs.relocated(*kept_user_env, tmp_path / "env")


def repair(prefix: Path, wheels: Path, env: dict, *extra: str) -> subprocess.CompletedProcess:
    return run_tool(
        "repair", "--prefix", str(prefix), "--find-links", str(wheels), "--offline", "--yes", *extra, env=env
    )


def test_repair_without_a_driver_says_what_it_did_that_it_is_kept_and_how_to_undo(
    no_gpu_repair_wheels, tool_env, user_env
):
    prefix = user_env
    done = repair(prefix, no_gpu_repair_wheels, tool_env)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    said = out + done.stderr
    assert said.count(REASON) == 1, said
    assert "the change is kept" in out
    assert out.count(f"Undo with: tfgpu-install repair --prefix {prefix} --undo") == 1
    added = next(line for line in out.splitlines() if line.startswith("  packages added: "))
    assert "nvidia-cudnn-cu12 9." in added  # names with versions
    assert "    lib/python" in out and "_tfgpu_cuda_hook.pth" in out  # every file written, by name
    assert out.count(f"tfgpu-install verify --prefix {prefix}") == 1

    undone = run_tool("repair", "--undo", "--prefix", str(prefix), "--offline", env=tool_env)
    assert undone.returncode == 0, undone.stderr


def test_repair_json_and_require_gpu(no_gpu_repair_wheels, tool_env, user_env):
    prefix = user_env
    done = repair(prefix, no_gpu_repair_wheels, tool_env, "--require-gpu", "--json")
    assert done.returncode == 1
    document = json.loads(done.stdout)
    assert document["error"]["code"] == "gpu-required"
    summary = document["details"]
    assert summary["repaired"] is True and summary["verified"] is False
    assert summary["undo"] == f"tfgpu-install repair --prefix {prefix} --undo"
    assert (prefix / "etc" / "tfgpu" / "repair.json").exists()  # the repair is kept
    assert "The repair is kept" in document["error"]["alternatives"][0]
    again = repair(prefix, no_gpu_repair_wheels, tool_env, "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["nothing_to_do"] is True


def test_decision_reads_every_driver_source():
    """``no_driver_here`` on recorded machines: the env's check found no libcuda, and the machine
    has no driver (an ending of exit 0), or a kernel module (a driver that fails: exit 1)."""
    from tfgpu.cli.endings import no_driver_here
    from tfgpu.detect.recorded import RecordedSystem

    report = {"ok": False, "code": "no-driver", "reason": "No NVIDIA driver: libcuda.so.1 cannot be loaded"}
    assert no_driver_here(report, RecordedSystem()) is not None
    assert no_driver_here(report, RecordedSystem(dirs=("/proc/driver/nvidia",))) is None
    module = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
    assert no_driver_here(report, RecordedSystem(files={"/proc/driver/nvidia/version": module})) is None
    assert no_driver_here(report, RecordedSystem(libcuda={"libcuda.so.1": 12040})) is None
    assert no_driver_here(report | {"code": "driver-too-old"}, RecordedSystem()) is None
    assert no_driver_here({"ok": True}, RecordedSystem()) is None
    # Installed but not answering is a failing driver, never "none": an nvidia-smi on PATH (it errs or
    # hangs), a libcuda.so.1 the loader finds and cannot load, WSL2's driver directory.
    assert no_driver_here(report, RecordedSystem(executables={"nvidia-smi": "/usr/bin/nvidia-smi"})) is None
    dependency = "libnvidia-missing.so: cannot open shared object file: No such file or directory"
    assert no_driver_here(report, RecordedSystem(libcuda={"libcuda.so.1": dependency})) is None
    assert no_driver_here(report, RecordedSystem(libcuda={"libcuda.so.1": "libcuda.so.1: wrong ELF class"})) is None
    assert no_driver_here(report, RecordedSystem(dirs=("/usr/lib/wsl/lib",))) is None


RUNPATH = "RUNPATH: " + ":".join(
    f"/envs/tf/lib/python3.11/site-packages/tensorflow/../nvidia/lib{n:02}" for n in range(32)
)


@pytest.mark.parametrize("terminal", [True, False])
def test_doctor_shows_a_shared_runpath_once_and_short_on_a_terminal(monkeypatch, capsys, terminal):
    """Three libraries not found name the same RUNPATH (some 2,000 characters): shown once; on a
    terminal as its count and first two directories, piped whole; ``--json`` keeps it in each."""
    from tfgpu.cli.render import results as render
    from tfgpu.doctor.findings import Report, fail

    assert len(RUNPATH) > 2000
    if terminal:
        monkeypatch.setenv("TTY_COMPATIBLE", "1")
    else:
        monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
        monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("COLUMNS", "120")
    report = Report(
        target={},
        findings=[
            fail(
                f"libs.{name}",
                f"lib{name}.so is not on any path TensorFlow searches",
                "repair it",
                f"lib{name}.so: not found",
                RUNPATH,
            )
            for name in ("cudnn", "cusolver", "cufft")
        ],
    )
    render.doctor(report)
    out = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)  # a terminal's colours
    assert out.count("RUNPATH") == 1, out
    assert out.count("not found") == 3  # the findings' own evidence stays
    assert out.count("fix: repair it") == 1 and out.count("fix: the same as libs.cudnn's (above)") == 2
    if terminal:
        assert "RUNPATH: 32 directories: /envs/tf/lib/python3.11/site-packages/tensorflow/../nvidia/lib00, " in out
        assert "and 30 more (`--json` lists them)" in out and "lib31" not in out
    else:
        assert RUNPATH in out
    assert sum(RUNPATH in finding["evidence"] for finding in report.to_dict()["findings"]) == 3


@pytest.fixture(scope="module")
def no_gpu_index(no_gpu_wheels, tmp_path_factory):
    """A real PEP 503 index on 127.0.0.1 serving the GPU-less wheelhouse (tests/localindex.py)."""
    import localindex

    root = localindex.build_index(no_gpu_wheels, tmp_path_factory.mktemp("no-gpu-index"))
    with localindex.Server(root) as url:
        yield url


LOCKED = ("--tf", "2.21", "--mode", "pip", "--python", "3.11", "--no-detect", "--platform", "linux-64")


def _locked_create_ends_without_a_driver(tmp_path, no_gpu_index, tool_env) -> dict:
    """A lock, then ``create --from-lock`` from it: built, not verified (no driver here). Returns
    the environment the two commands ran with."""
    env = tool_env | {"TFGPU_INDEX_URL": no_gpu_index, "TFGPU_BUNDLE_TOOL": "0"}
    lock = tmp_path / "tfgpu-lock.txt"
    assert run_tool("lock", *LOCKED, "-o", str(lock), env=env).returncode == 0
    [lock] = tmp_path.glob("tfgpu-lock*")
    done = run_tool("create", "--from-lock", str(lock), "--prefix", str(tmp_path / "locked"), "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["not_verified"]["code"] == "no-driver-here"
    return env


def test_a_create_from_a_lock_ends_the_same_way(tmp_path, no_gpu_index, tool_env):
    """``create --from-lock`` ends as a resolved create does: built, verified False, no driver here.
    A bundle's ``create --from-bundle`` takes the same branch of the create command (its lock is
    read where a lock's is) and so the same ending; its install.sh, which hands ``create
    --from-bundle`` the options it is given (tests/test_bundle.py's
    ``test_install_sh_builds_the_env_offline``), is run end to end in the full tier by
    ``test_from_lock_and_a_bundles_install_sh_end_the_same_way``."""
    _locked_create_ends_without_a_driver(tmp_path, no_gpu_index, tool_env)


@pytest.mark.slow
def test_from_lock_and_a_bundles_install_sh_end_the_same_way(tmp_path, no_gpu_index, tool_env):
    """A lock, then a bundle whose install.sh runs ``create --from-bundle`` with the options it is
    given (the tool on PATH: the bundle carries none of its own wheels here). In the full tier: the
    fast tier holds its parts in ``test_a_create_from_a_lock_ends_the_same_way`` (the ending of a
    locked create) and tests/test_bundle.py's ``test_install_sh_builds_the_env_offline``
    (install.sh runs ``create --from-bundle`` with its options)."""
    env = _locked_create_ends_without_a_driver(tmp_path, no_gpu_index, tool_env)

    bundle = tmp_path / "bundle"
    assert run_tool("bundle", *LOCKED, "-o", str(bundle), env=env).returncode == 0, "bundle"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "tfgpu-install").write_text(f'#!/bin/sh\nexec {sys.executable} -m tfgpu "$@"\n')
    (bindir / "tfgpu-install").chmod(0o755)
    shell_env = env | {"PATH": f"{bindir}:{os.environ['PATH']}", "TFGPU_PYTHON": sys.executable, "UV_OFFLINE": "1"}
    ran = {}
    for name, extra in (("plain", ()), ("required", ("--require-gpu",))):
        ran[name] = subprocess.run(
            [str(bundle / "install.sh"), str(tmp_path / name), *extra],
            capture_output=True,
            text=True,
            env=shell_env,
            timeout=600,
        )
    assert ran["plain"].returncode == 0, ran["plain"].stderr[-3000:]
    assert (ran["plain"].stdout + ran["plain"].stderr).count(REASON) == 1
    assert f"tfgpu-install verify --prefix {tmp_path / 'plain'}" in ran["plain"].stdout
    assert ran["required"].returncode == 1 and "error: gpu-required" in ran["required"].stderr


def test_a_repair_whose_check_fails_with_a_driver_here_still_says_what_it_kept(
    tmp_path, no_gpu_repair_wheels, tool_env, user_env
):
    """A driver here that is too old (the fake libcuda.so.1): exit 1, and the repair's report
    (what was added and written, that it is kept, the undo command) comes before the error."""
    prefix = user_env
    env = tool_env | {"LD_LIBRARY_PATH": str(wheelhouse.fake_libcuda(tmp_path / "driver", 11020))}
    done = repair(prefix, no_gpu_repair_wheels, env)
    assert done.returncode == 1 and "error: driver-too-old" in done.stderr, done.stderr
    assert "the change is kept" in done.stdout and "_tfgpu_cuda_hook.pth" in done.stdout
    assert f"Undo with: tfgpu-install repair --prefix {prefix} --undo" in done.stdout
    assert (done.stdout + done.stderr).count("The driver supports CUDA 11.2") == 1
    error = done.stderr.split("error: driver-too-old")[1]
    assert error.splitlines()[2].startswith("  → The repair is kept (undo it with `tfgpu-install repair --prefix")
