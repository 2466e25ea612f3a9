"""pip mode, built for real by uv from a local wheelhouse (tests/wheelhouse.py) with no network.

Every env here is a real venv with real shared libraries; TensorFlow itself is the stand-in
package from the wheelhouse (the real one is in tests/test_pip_e2e.py, marked network).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import run_process, run_tool, shells, tool_environ
from localindex import remembered_index

TARGET = ("--tf", "2.21", "--mode", "pip", "--python", "3.11")
STUB_LIBS = {
    "libnvJitLink.so.12",
    "libcudart.so.12",
    "libcublasLt.so.12",
    "libcublas.so.12",
    "libcusolver.so.11",
    "libcudnn.so.9",
}

MAPS = (
    "import json, os\n"
    "paths = {line.split()[-1] for line in open('/proc/self/maps') if '/nvidia/' in line}\n"
    "print(json.dumps(sorted(paths)))\n"
)


def create(prefix: Path, local_wheels: Path, env: dict, *extra: str) -> subprocess.CompletedProcess:
    return run_tool(
        "create",
        *TARGET,
        "--prefix",
        str(prefix),
        "--find-links",
        str(local_wheels),
        "--offline",
        "--no-verify",
        *extra,
        env=env,
    )


@pytest.fixture(scope="module")
def first_build(tmp_path_factory, local_wheels, uv_cache) -> tuple[Path, subprocess.CompletedProcess]:
    """One env built by ``create --json`` (and what the command said), for every test here that
    only reads an env: building one costs far more than any of those tests. A test that changes
    its env builds its own (``built_env``) or works on a copy."""
    home = tmp_path_factory.mktemp("pip-env")
    env = tool_environ(home, uv_cache)
    prefix = home / "env"
    return prefix, create(prefix, local_wheels, env, "--json")


@pytest.fixture
def shared_env(first_build) -> Path:
    """The env of ``first_build``, for a test that only reads it."""
    prefix, done = first_build
    assert done.returncode == 0, done.stderr
    return prefix


@pytest.fixture
def built_env(tmp_path, local_wheels, tool_env) -> Path:
    """An env of the test's own, where the test changes it in place (its marker names its path, so
    a copy of the shared env would not be the tool's env there)."""
    prefix = tmp_path / "env"
    done = create(prefix, local_wheels, tool_env)
    assert done.returncode == 0, done.stderr
    return prefix


def leftovers(prefix: Path) -> list[str]:
    return sorted(p.name for p in prefix.parent.iterdir() if p.name.startswith(f".{prefix.name}."))


def test_create_builds_a_complete_env_and_nothing_else(first_build):
    prefix, done = first_build
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["installed"]["tensorflow"] == "2.21.0"
    assert result["installed"]["nvidia-cusolver-cu12"] == "11.7.5.82"
    marker = json.loads((prefix / "tfgpu-env.json").read_text())
    assert marker["tensorflow"] == "2.21.0" and "nvidia-cudnn-cu12==9.28.0.42" in marker["locked"]
    assert "chosen: nvidia-cudnn-cu12==9.28.0.42" in done.stderr  # exact versions are stated
    assert leftovers(prefix) == []
    assert (prefix / "bin" / "ptxas").resolve().is_file()


def test_unactivated_python_preloads_the_envs_own_libraries(shared_env):
    """An IDE/cron/systemd start: the env's Python by absolute path, nothing activated."""
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "XLA_FLAGS", "VIRTUAL_ENV")}
    done = subprocess.run(
        [str(shared_env / "bin" / "python"), "-c", "import tensorflow\n" + MAPS + "print(os.environ['XLA_FLAGS'])"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    paths, xla = done.stdout.splitlines()
    loaded = json.loads(paths)
    assert {Path(p).name for p in loaded} == STUB_LIBS
    assert all(p.startswith(str(shared_env)) for p in loaded)
    assert xla == f"--xla_gpu_cuda_data_dir={shared_env}/lib/python3.11/site-packages/nvidia/cuda_nvcc"


def test_python_starts_without_tensorflow_load_nothing(shared_env):
    done = subprocess.run(
        [str(shared_env / "bin" / "python"), "-c", "import sys\n" + MAPS + "print('ctypes' in sys.modules)"],
        capture_output=True,
        text=True,
    )
    paths, ctypes_loaded = done.stdout.splitlines()
    assert json.loads(paths) == [] and ctypes_loaded == "False"


def test_preload_can_be_switched_off(shared_env):
    done = subprocess.run(
        [str(shared_env / "bin" / "python"), "-c", "import tensorflow\n" + MAPS],
        capture_output=True,
        text=True,
        env={**os.environ, "TFGPU_NO_PRELOAD": "1"},
    )
    assert json.loads(done.stdout) == []


SHELL_SCRIPT = {
    "bash": '{setup}\n. "{env}/bin/activate"\necho "LD=$LD_LIBRARY_PATH"\necho "XLA=$XLA_FLAGS"\n'
    'echo "PTXAS=$(command -v ptxas)"\nsoname_check\ndeactivate\n'
    'echo "AFTER_LD=${{LD_LIBRARY_PATH-<unset>}}"\necho "AFTER_XLA=${{XLA_FLAGS-<unset>}}"\n',
    "fish": '{setup}\nsource "{env}/bin/activate.fish"\necho "LD=$LD_LIBRARY_PATH"\necho "XLA=$XLA_FLAGS"\n'
    'echo "PTXAS="(command -v ptxas)\nsoname_check\ndeactivate\n'
    'if set -q LD_LIBRARY_PATH; echo "AFTER_LD=$LD_LIBRARY_PATH"; else; echo "AFTER_LD=<unset>"; end\n'
    'if set -q XLA_FLAGS; echo "AFTER_XLA=$XLA_FLAGS"; else; echo "AFTER_XLA=<unset>"; end\n',
}
SHELL_SCRIPT["zsh"] = SHELL_SCRIPT["bash"]
# The loader's own search: a Python without the load hook opens libcusolver by soname.
SONAME_CHECK = (
    "TFGPU_NO_PRELOAD=1 python -c \"import ctypes; ctypes.CDLL('libcusolver.so.11'); "
    "print('SONAME=' + [l.split()[-1] for l in open('/proc/self/maps') if 'libcusolver' in l][0])\""
)
STATES = {  # before activation -> (setup line for sh, for fish)
    "unset": ("unset LD_LIBRARY_PATH XLA_FLAGS", "set -e LD_LIBRARY_PATH; set -e XLA_FLAGS"),
    "empty": ("export LD_LIBRARY_PATH= XLA_FLAGS=", "set -gx LD_LIBRARY_PATH ''; set -gx XLA_FLAGS ''"),
    "set": (
        "export LD_LIBRARY_PATH=/opt/a:/opt/b XLA_FLAGS=--xla_dump_to=/tmp/x",
        "set -gx LD_LIBRARY_PATH /opt/a /opt/b; set -gx XLA_FLAGS --xla_dump_to=/tmp/x",
    ),
}
EXPECTED_AFTER = {"unset": ("<unset>", "<unset>"), "empty": ("", ""), "set": ("/opt/a:/opt/b", "--xla_dump_to=/tmp/x")}


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("shell", shells())
def test_activated_shell_puts_env_libraries_first_and_deactivate_restores_exactly(shared_env, shell, state):
    sh_setup, fish_setup = STATES[state]
    define = (
        f"function soname_check; {SONAME_CHECK}; end" if shell == "fish" else f"soname_check () {{ {SONAME_CHECK}; }}"
    )
    script = (
        define + "\n" + SHELL_SCRIPT[shell].format(setup=fish_setup if shell == "fish" else sh_setup, env=shared_env)
    )
    done = subprocess.run([shell, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    out = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    site = f"{shared_env}/lib/python3.11/site-packages"
    first = out["LD"].split(":")[0]
    assert first == f"{site}/nvidia/nvjitlink/lib"
    assert f"{site}/nvidia/cusolver/lib" in out["LD"].split(":")
    if state == "set":
        assert out["LD"].endswith(":/opt/a:/opt/b")
        assert out["XLA"].startswith("--xla_dump_to=/tmp/x ")
    assert out["XLA"].endswith(f"--xla_gpu_cuda_data_dir={site}/nvidia/cuda_nvcc")
    assert out["PTXAS"] == f"{shared_env}/bin/ptxas"
    assert out["SONAME"] == f"{site}/nvidia/cusolver/lib/libcusolver.so.11"
    assert (out["AFTER_LD"], out["AFTER_XLA"]) == EXPECTED_AFTER[state]


@pytest.mark.skipif(not shutil.which("shellcheck"), reason="shellcheck is not installed")
def test_activation_script_passes_shellcheck(shared_env):
    done = subprocess.run(
        ["shellcheck", "-s", "bash", str(shared_env / "etc" / "tfgpu" / "activate.sh")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout


def test_a_moved_env_still_finds_its_own_libraries(shared_env, tmp_path):
    """A copy at another path is the env moved there: nothing in it may name the old place (which
    still exists here, so every path is checked to be under the new one)."""
    moved = tmp_path / "moved"
    shutil.copytree(shared_env, moved, symlinks=True)
    done = subprocess.run(
        [str(moved / "bin" / "python"), "-c", "import tensorflow\n" + MAPS], capture_output=True, text=True
    )
    assert all(p.startswith(str(moved)) for p in json.loads(done.stdout)) and json.loads(done.stdout)
    done = subprocess.run(
        ["bash", "-c", f'. "{moved}/bin/activate"; echo "$LD_LIBRARY_PATH"'], capture_output=True, text=True
    )
    assert done.stdout.startswith(f"{moved}/lib/")


def test_pip_engine_builds_the_same_env(tmp_path, local_wheels, tool_env):
    prefix = tmp_path / "pip-env"
    done = create(prefix, local_wheels, tool_env, "--engine", "pip")
    assert done.returncode == 0, done.stderr
    assert json.loads((prefix / "tfgpu-env.json").read_text())["engine"] == "pip"
    activate = (prefix / "bin" / "activate").read_text()
    assert ".tfgpu-staging" not in activate and str(prefix) in activate  # relocated after staging
    run = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", "import tensorflow\n" + MAPS], capture_output=True, text=True
    )
    assert {Path(p).name for p in json.loads(run.stdout)} == STUB_LIBS


def test_dry_run_prints_every_command_and_touches_nothing(tmp_path, local_wheels, tool_env):
    prefix = tmp_path / "env"
    done = run_tool(
        "create",
        *TARGET,
        "--prefix",
        str(prefix),
        "--find-links",
        str(local_wheels),
        "--offline",
        "--dry-run",
        "--json",
        env=tool_env,
    )
    assert done.returncode == 0, done.stderr
    steps = json.loads(done.stdout)["steps"]
    commands = [" ".join(step["argv"][1:3]) for step in steps if step["argv"]]
    assert commands == ["venv " + str(prefix.parent / ".env.tfgpu-staging"), "pip compile", "pip install", "pip list"]
    after = [step["kind"] for step in steps[4:6]]
    # With the tool's own uv cache, wheels from --find-links are kept once (tfgpu.cache.dedupe).
    assert "--offline" in steps[3]["argv"] and (after[0] == "cache-dedupe" or after[0].startswith("bytecode-"))
    assert after[0] != "cache-dedupe" or after[1].startswith("bytecode-")
    assert not prefix.exists() and leftovers(prefix) == []


def test_an_existing_env_is_kept_without_force_and_replaced_with_it(built_env, local_wheels, tool_env):
    (built_env / "mine.txt").write_text("keep")
    again = create(built_env, local_wheels, tool_env)
    assert again.returncode == 3 and "error: env-exists" in again.stderr
    assert (built_env / "mine.txt").exists()
    forced = create(built_env, local_wheels, tool_env, "--force")
    assert forced.returncode == 0, forced.stderr
    assert not (built_env / "mine.txt").exists() and (built_env / "tfgpu-env.json").exists()
    assert leftovers(built_env) == []


def test_a_directory_tfgpu_did_not_build_is_never_touched(tmp_path, local_wheels, tool_env):
    prefix = tmp_path / "project"
    prefix.mkdir()
    (prefix / "data.csv").write_text("1,2\n")
    done = create(prefix, local_wheels, tool_env, "--force")
    assert done.returncode == 3 and "target-not-empty" in done.stderr
    assert [p.name for p in prefix.iterdir()] == ["data.csv"]


def test_an_unwritable_target_is_refused_before_anything_happens(tmp_path, local_wheels, tool_env):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    done = create(blocker / "env", local_wheels, tool_env)
    assert done.returncode == 3 and "target-not-writable" in done.stderr


def test_a_directory_that_cannot_be_created_is_refused(tmp_path, local_wheels, tool_env):
    """/proc accepts no new directories, even for root (a plain permission test would not fail as root)."""
    done = create(Path("/proc/tfgpu-test/env"), local_wheels, tool_env)
    assert done.returncode == 3 and "target-not-writable" in done.stderr and "Traceback" not in done.stderr


def test_a_missing_wheel_offline_fails_cleanly(tmp_path, local_wheels, tool_env):
    prefix = tmp_path / "env"
    done = run_tool(
        "create",
        "--tf",
        "2.20",
        "--mode",
        "pip",
        "--python",
        "3.11",
        "--prefix",
        str(prefix),
        "--find-links",
        str(local_wheels),
        "--offline",
        "--no-verify",
        env=tool_env,
    )
    assert done.returncode == 1 and "error: install-failed" in done.stderr
    assert f"--offline installs only from the --find-links directory ({local_wheels}) and" in done.stderr
    assert "No network?" not in done.stderr
    assert not prefix.exists() and leftovers(prefix) == []


def test_offline_installs_a_release_uvs_cache_already_holds(tmp_path, local_wheels, tool_env):
    """--offline alone: what an earlier online install left in uv's cache is enough, so the index
    must not be switched off (uv's --no-index would ignore the cached index answers too)."""
    import localindex

    root = localindex.build_index(local_wheels, tmp_path / "index")
    env = {**tool_env, "TFGPU_CACHE_DIR": str(tmp_path / "cache")}
    with localindex.Server(root) as url:
        env["UV_DEFAULT_INDEX"] = url
        first = run_tool("create", *TARGET, "--prefix", str(tmp_path / "online"), "--no-verify", env=env)
        assert first.returncode == 0, first.stderr
    # The index is gone: only uv's cache can answer now.
    done = run_tool(
        "create", *TARGET, "--prefix", str(tmp_path / "offline"), "--offline", "--no-verify", "--json", env=env
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["installed"]["tensorflow"] == "2.21.0"
    step_argv = json.loads(
        run_tool(
            "create", *TARGET, "--prefix", str(tmp_path / "dry"), "--offline", "--dry-run", "--json", env=env
        ).stdout
    )["steps"]
    assert all("--no-index" not in step["argv"] for step in step_argv)


def remembered(tmp_path: Path) -> str:
    """The index an earlier online run asked, gone now; uv's cache (the tool's own, under
    TFGPU_CACHE_DIR) keeps its page of nvidia-cudnn-cu12, which offers the wheel directory's 9.28.0.42
    as a wheel that ranks higher for Python 3.11, but not that file."""
    return remembered_index(tmp_path, tmp_path / "cache" / "uv", "nvidia-cudnn-cu12", "9.28.0.42", "3.11")


def test_offline_a_complete_wheel_directory_wins_over_what_uvs_cache_remembers_of_the_index(
    tmp_path, local_wheels, tool_env
):
    """Every wheel of the resolution is in the directory, and uv's cache remembers the index's page
    of one of them: offline, the directory's wheels are what is installed."""
    env = {**tool_env, "TFGPU_CACHE_DIR": str(tmp_path / "cache"), "UV_DEFAULT_INDEX": remembered(tmp_path)}
    prefix = tmp_path / "env"
    done = create(prefix, local_wheels, env, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["installed"]["nvidia-cudnn-cu12"] == "9.28.0.42"
    assert list(prefix.glob("lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.9"))  # the directory's
    steps = json.loads(create(tmp_path / "dry", local_wheels, env, "--json", "--dry-run").stdout)["steps"]
    resolve = next(step for step in steps if step["kind"] == "lock")
    assert resolve["argv"][-1] == "--no-index" and "--no-index" not in resolve["fallback"]


def test_offline_a_wheel_directory_that_lacks_a_package_is_told_which(tmp_path, local_wheels, tool_env):
    """Neither the directory alone nor the directory with uv's cache resolves: one error, naming
    the package the directory lacks, and advice to add it to that very directory."""
    partial = tmp_path / "partial"
    partial.mkdir()
    for wheel in local_wheels.glob("*.whl"):
        if not wheel.name.startswith("nvidia_cusolver"):
            shutil.copy2(wheel, partial / wheel.name)
    env = {**tool_env, "TFGPU_CACHE_DIR": str(tmp_path / "cache"), "UV_DEFAULT_INDEX": remembered(tmp_path)}
    prefix = tmp_path / "env"
    done = create(prefix, partial, env, "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "install-failed"
    assert f"The --find-links directory ({partial}) alone lacks nvidia-cusolver-cu12 (" in error["message"]
    assert any(
        f"({partial})" in way and "add nvidia-cusolver-cu12 to that directory" in way for way in error["alternatives"]
    )
    assert not prefix.exists() and leftovers(prefix) == []


def test_a_failure_that_is_not_the_network_does_not_blame_it():
    """uv heads a hash mismatch or an HTTP 404 with "Failed to fetch": that is not a missing network."""
    from tfgpu.installers.base import Step, StepKind
    from tfgpu.installers.failures import install_failed
    from tfgpu.installers.options import build_options
    from tfgpu.process.runner import Completed

    step = Step(StepKind.RUN, "Install TensorFlow", ("uv", "pip", "install"))
    online, offline = build_options(mode="pip"), build_options(mode="pip", offline=True)
    mismatch = (
        "error: Failed to fetch: `https://pypi.org/simple/tensorflow/`\n  cause: error sending request\n"
        "  cause: Hash mismatch for `tensorflow==2.21.0`"
    )
    missing = "error: No solution found\n  cause: Because there is no version of tensorflow==2.99 and you require it"
    dns = (
        "error: Failed to fetch: https://pypi.org/simple/tensorflow/\n  cause: dns error\n"
        "  cause: failed to lookup address information: Name or service not known"
    )
    for output, options in ((mismatch, online), (missing, online), (mismatch, offline)):
        error = install_failed(step, Completed(step.argv, 1, output), None, options)
        assert not any("--offline" in way or "No network" in way for way in error.alternatives), (output, options)
    assert any(
        "--offline installs only from what uv's cache" in way
        for way in install_failed(step, Completed(step.argv, 1, missing), None, offline).alternatives
    )
    assert any(
        "No network?" in way for way in install_failed(step, Completed(step.argv, 1, dns), None, online).alternatives
    )


def test_the_engine_reports_facts_and_the_installer_says_what_they_mean(tmp_path):
    """uv's engine reads the output (which command, exit status, the problem lines, whether the index
    was unreachable) and advises nothing; the installer turns those facts and the build's options
    into the install-failed error, with the staging path shown as the env's own."""
    from tfgpu.engines.uv import run_failure
    from tfgpu.envs.location import Location
    from tfgpu.installers.base import Step, StepKind
    from tfgpu.installers.failures import install_failed
    from tfgpu.installers.options import build_options
    from tfgpu.process.runner import Completed

    location = Location(prefix=tmp_path / "env", staging=tmp_path / ".env.staging", name="env")
    step = Step(StepKind.RUN, "Install TensorFlow", ("/opt/bin/uv", "pip", "install", "-r", "x"))
    output = (
        f"Using Python 3.11 at {location.staging}/bin/python\nerror: Failed to fetch\n"
        f"  cause: dns error in {location.staging}\n"
    )
    facts = run_failure(step.argv, Completed(step.argv, 2, output), location)
    assert (facts.command, facts.returncode, facts.unreachable, facts.not_found) == ("uv pip install", 2, True, False)
    assert str(location.staging) not in facts.detail and str(location.prefix) in facts.detail
    assert not hasattr(facts, "alternatives")
    error = install_failed(step, Completed(step.argv, 2, output), tmp_path / "log", build_options(mode="pip"), location)
    assert error.code == "install-failed"
    assert str(error).startswith("Install TensorFlow failed (`uv pip install` exited 2); nothing was installed.\n")
    assert (
        error.alternatives[0].startswith("No network?")
        and error.alternatives[-1] == f"The whole output is in {tmp_path / 'log'}."
    )


def test_no_network_is_named_as_the_cause(tmp_path, tool_env):
    prefix = tmp_path / "env"
    env = {**tool_env, "UV_DEFAULT_INDEX": "http://127.0.0.1:9/simple", "UV_HTTP_RETRIES": "0"}
    done = run_tool("create", *TARGET, "--prefix", str(prefix), "--no-verify", env=env)
    assert done.returncode == 1 and "error: install-failed" in done.stderr
    assert "No network?" in done.stderr
    assert not prefix.exists() and leftovers(prefix) == []


def test_a_python_that_is_not_installed_is_reported_first(tmp_path, local_wheels, tool_env):
    empty = tmp_path / "nothing"
    empty.mkdir()
    env = {
        **tool_env,
        "HOME": str(empty),
        "PYENV_ROOT": str(empty),
        "UV_PYTHON_INSTALL_DIR": str(empty),
        "PATH": "/usr/bin:/bin",
    }
    done = run_tool(
        "create",
        "--tf",
        "2.21",
        "--mode",
        "pip",
        "--python",
        "3.10",
        "--prefix",
        str(tmp_path / "env"),
        "--find-links",
        str(local_wheels),
        "--offline",
        env=env,
    )
    assert done.returncode == 3 and "error: python-not-found" in done.stderr
    assert not (tmp_path / "env").exists()


def test_remove_deletes_only_what_tfgpu_built(built_env, tmp_path, tool_env):
    other = tmp_path / "other"
    other.mkdir()
    refused = run_tool("remove", "--prefix", str(other), env=tool_env)
    assert refused.returncode == 3 and "not-a-tfgpu-env" in refused.stderr and other.exists()
    done = run_tool("remove", "--prefix", str(built_env), env=tool_env)
    assert done.returncode == 0 and not built_env.exists()
    assert run_tool("remove", "--prefix", str(built_env), env=tool_env).returncode == 3


def test_name_puts_the_env_in_the_envs_directory(local_wheels, tool_env):
    done = run_tool(
        "create",
        *TARGET,
        "--name",
        "team-tf",
        "--find-links",
        str(local_wheels),
        "--offline",
        "--no-verify",
        "--json",
        env=tool_env,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["prefix"] == str(Path(tool_env["TFGPU_ENVS_DIR"]) / "team-tf")
    assert run_tool("remove", "--name", "team-tf", env=tool_env).returncode == 0


def test_verify_without_tensorflow_is_a_clear_failure(shared_env, tool_env, tmp_path):
    """The stand-in tensorflow has no sysconfig: verify must fail with a reason, not a traceback.
    (A driver that fails, tests/fakenvidia.py, so the check imports TensorFlow: with none at all,
    verify says no-driver first.)"""
    import fakenvidia

    tool_env = tool_env | {"PATH": f"{fakenvidia.driver_that_fails(tmp_path / 'driver')}:{tool_env['PATH']}"}
    done = run_tool("verify", "--prefix", str(shared_env), "--json", env=tool_env)
    assert done.returncode == 1
    assert json.loads(done.stdout)["error"]["code"] in ("verify-crashed", "tensorflow-import-failed")


def test_a_failed_gpu_check_says_how_to_use_the_env_and_where_the_log_is(tmp_path, no_gpu_wheels, tool_env):
    """A driver that is here and fails the check (a fake libcuda.so.1 too old for the build, found
    through LD_LIBRARY_PATH: no real driver can be installed here): the env is built, and the
    error says so, how to activate the env, and where TensorFlow's output was kept. (With no
    driver at all the build ends with exit 0 and a notice: tests/test_endings.py.)"""
    import wheelhouse

    prefix = tmp_path / "env"
    tool_env = tool_env | {"LD_LIBRARY_PATH": str(wheelhouse.fake_libcuda(tmp_path / "driver", 11020))}
    done = run_tool(
        "create", *TARGET, "--prefix", str(prefix), "--find-links", str(no_gpu_wheels), "--offline", env=tool_env
    )
    assert done.returncode == 1 and "error: driver-too-old" in done.stderr, done.stderr
    assert f"source {prefix}/bin/activate" in done.stderr
    logs = sorted(Path(tool_env["TFGPU_LOG_DIR"]).glob("create-env-*.log"))
    assert len(logs) == 1 and f"TensorFlow's whole output is in {logs[0]}." in done.stderr
    assert "check_env.py" in logs[0].read_text()
    assert ".tfgpu-staging" not in done.stdout + done.stderr.split("error: driver-too-old")[1]
    assert (prefix / "bin" / "python").exists()  # the env stays built
    # A process of its own: the loader reads LD_LIBRARY_PATH (the fake libcuda) when a process starts.
    again = run_process("verify", "--prefix", str(prefix), env=tool_env)
    verify_logs = sorted(Path(tool_env["TFGPU_LOG_DIR"]).glob("verify-env-*.log"))
    assert again.returncode == 1 and len(verify_logs) == 1 and str(verify_logs[0]) in again.stderr
