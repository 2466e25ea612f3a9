"""Half-built or lost state: signals, SIGKILL at any point, two runs at once. Whatever a run
leaves, the next create or remove of that target finishes or undoes it; a second concurrent run
fails at once with ``target-busy``."""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import builtenvs
import pytest
from conftest import run_tool
from hangguard import hang_guard

from tfgpu.envs import marker, txn

PY = f"{sys.version_info.major}.{sys.version_info.minor}"


@pytest.fixture(scope="module")
def module_tmp(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("crash")


@pytest.fixture
def tmp_path(module_tmp) -> Path:
    """One temporary directory for every test of this module, emptied before each, so the sandbox
    (tests/hostile/conftest.py) and the env in it are at the same path in each: the env
    ``kept_env`` built there, put back, is the env a build there leaves, byte for byte."""
    builtenvs.clear(module_tmp)
    return module_tmp


@pytest.fixture(scope="module")
def kept_env(module_tmp, local_wheels, uv_cache, tmp_path_factory) -> Path:
    """``sandbox/env`` as the ``build`` fixture makes it (the real command line, uv, offline), made
    once and kept aside (tests/builtenvs.py). The module's directory is emptied first: a test
    before the first that asks for this env (the slow ones, run in the same process) may have left
    an env at that path."""
    builtenvs.clear(module_tmp)
    sandbox = module_tmp / "sandbox"
    env = {
        **os.environ,
        "TFGPU_CACHE_DIR": str(uv_cache),
        "TFGPU_LOG_DIR": str(sandbox / "logs"),
        "TFGPU_ENVS_DIR": str(sandbox / "envs"),
        "JUPYTER_DATA_DIR": str(sandbox / "jupyter"),
    }
    env.pop("TFGPU_DATA_DIR", None)
    done = run_tool(
        "create", "--tf", "2.21", "--mode", "pip", "--python", PY, "--prefix", str(sandbox / "env"),
        "--find-links", str(local_wheels), "--offline", "--no-verify", "--json", env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return builtenvs.keep(sandbox / "env", tmp_path_factory.mktemp("kept") / "env")


@pytest.fixture
def built(kept_env, sandbox) -> Path:
    """``sandbox/env``, built: a copy of the kept env put back where it was built (files copied,
    not linked: some tests rewrite its marker)."""
    return builtenvs.restore(kept_env, sandbox / "env", link=False)


class SlowWheels(SimpleHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        if self.path.endswith(".whl"):
            time.sleep(3.0)
        super().do_GET()

    def log_message(self, *args):
        pass


@pytest.fixture
def slow_index(local_wheels):
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(SlowWheels, directory=str(local_wheels)))
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


def start_create(prefix: Path, index: str, sandbox: Path) -> subprocess.Popen:
    env = {**os.environ, "UV_DEFAULT_INDEX": index + "simple/", "TFGPU_CACHE_DIR": str(sandbox / "cold-cache")}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tfgpu",
            "create",
            "--tf",
            "2.21",
            "--mode",
            "pip",
            "--python",
            PY,
            "--prefix",
            str(prefix),
            "--find-links",
            index,
            "--no-verify",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )


def wait_for(child: subprocess.Popen, marker_text: str) -> list[str]:
    seen = []
    for line in child.stderr:
        seen.append(line)
        if marker_text in line:
            return seen
    raise AssertionError("".join(seen))


def siblings(prefix: Path) -> list[str]:
    return sorted(
        p.name
        for p in prefix.parent.iterdir()
        if p.name.startswith(f".{prefix.name}.tfgpu-") and not p.name.endswith("-lock")
    )


@pytest.mark.slow
@pytest.mark.parametrize("signum,code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_sigterm_and_sighup_roll_back_like_ctrl_c(sandbox, slow_index, signum, code):
    prefix = sandbox / "env"
    child = start_create(prefix, slow_index, sandbox)
    wait_for(child, "Install TensorFlow")
    os.kill(child.pid, signum)  # to the tool only, as `timeout` and systemd send it
    err = child.communicate(timeout=120)[1]
    assert child.returncode == code, err
    assert "nothing was left half-built" in err and "Traceback" not in err
    assert not prefix.exists() and siblings(prefix) == []


def _staging_writers(staging: Path) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if str(staging).encode() in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


@pytest.mark.slow
def test_sigkill_during_create_leaves_nothing_running_and_the_next_run_recovers(
    sandbox, slow_index, cli, local_wheels, uv_cache
):
    prefix = sandbox / "env"
    child = start_create(prefix, slow_index, sandbox)
    wait_for(child, "Install TensorFlow")
    time.sleep(0.5)
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    staging = txn.staging_of(prefix)
    assert staging.is_dir() and (staging / txn.STAGING_RECORD).is_file()
    deadline = time.monotonic() + 10
    while _staging_writers(staging) and time.monotonic() < deadline:  # uv dies with the tool (PDEATHSIG)
        time.sleep(0.2)
    assert _staging_writers(staging) == []
    done = cli(
        "create",
        "--tf",
        "2.21",
        "--mode",
        "pip",
        "--python",
        PY,
        "--prefix",
        str(prefix),
        "--find-links",
        str(local_wheels),
        "--offline",
        "--no-verify",
        "--json",
        env={"TFGPU_CACHE_DIR": str(uv_cache)},
    )
    assert done.code == 0, done.out + done.err
    assert "left by an interrupted build" in done.err and siblings(prefix) == []


def test_an_interrupted_remove_is_finished_by_the_next_remove(cli, sandbox, built):
    removing = txn.removing_of(sandbox / "env")
    os.rename(sandbox / "env", removing)  # what a SIGKILL right after remove's first step leaves
    for path in sorted(removing.rglob("*.py"))[:50]:
        path.unlink()
    done = cli("remove", "--prefix", str(sandbox / "env"), "--json")
    assert done.code == 0 and json.loads(done.out)["recovered"]
    assert siblings(sandbox / "env") == [] and not (sandbox / "env").exists()


def test_an_interrupted_remove_is_finished_by_the_next_create(cli, build, sandbox, built):
    os.rename(sandbox / "env", txn.removing_of(sandbox / "env"))
    assert build(sandbox / "env").code == 0
    assert siblings(sandbox / "env") == [] and marker.proof(sandbox / "env")


def test_a_kill_between_the_commit_renames_puts_the_old_env_back(cli, build, sandbox, built):
    old_id = marker.proof(sandbox / "env").id
    os.rename(sandbox / "env", txn.old_of(sandbox / "env"))  # --force moved the old env aside, then died
    staging = txn.staging_of(sandbox / "env")
    staging.mkdir()
    (staging / txn.STAGING_RECORD).write_text(json.dumps({"target": os.path.realpath(sandbox / "env")}))
    done = build(sandbox / "env")  # no --force: the old env is back, so this is env-exists
    assert (done.code, done.error) == (3, "env-exists")
    assert marker.proof(sandbox / "env").id == old_id and siblings(sandbox / "env") == []


def test_a_leftover_old_env_beside_a_finished_commit_is_deleted(cli, build, sandbox, built):
    assert build(sandbox / "other").code == 0
    # the old env of a --force that was killed after the new one was in place
    os.rename(sandbox / "other", txn.old_of(sandbox / "env"))
    found = json.loads((txn.old_of(sandbox / "env") / marker.NAME).read_text())
    found["prefix"] = os.path.realpath(sandbox / "env")
    (txn.old_of(sandbox / "env") / marker.NAME).write_text(json.dumps(found))
    assert build(sandbox / "env", "--force").code == 0
    assert siblings(sandbox / "env") == []


def test_an_interrupted_in_place_build_is_undone(cli, sandbox, built):
    os.rename(sandbox / "env", txn.old_of(sandbox / "env"))
    half = sandbox / "env"
    (half / "conda-meta").mkdir(parents=True)
    (half / "conda-meta" / "history").write_text("half built\n")
    txn.inplace_token(half, "1" * 32).write_text("1" * 32)  # what the build put inside the directory it made
    txn.journal_of(half).write_text(
        json.dumps({"tool": "tfgpu-install", "target": os.path.realpath(half), "id": "1" * 32})
    )
    done = cli("remove", "--prefix", str(half), "--json")
    recovered = json.loads(done.out)["recovered"]
    assert done.code == 0 and any("half-built" in line for line in recovered)
    assert any("put the previous environment back" in line for line in recovered)  # then removed, as asked
    assert siblings(half) == [] and not half.exists()


@pytest.mark.parametrize("command", ["create", "remove"])
def test_a_second_run_on_a_busy_target_fails_at_once(cli, build, sandbox, command, built):
    # The lock is held by this very process until the block ends: a run that waited for it would
    # never end, so "at once" is "ends at all", under a guard that catches the wait.
    with txn.TargetLock(sandbox / "env"), hang_guard(f"{command} on a target whose lock is held"):
        done = (
            build(sandbox / "env", "--force")
            if command == "create"
            else cli("remove", "--prefix", str(sandbox / "env"), "--json")
        )
        assert (done.code, done.error) == (1, "target-busy")
    assert marker.proof(sandbox / "env") and siblings(sandbox / "env") == []


@pytest.mark.slow
def test_two_creates_of_one_name_at_once_never_lose_the_env(sandbox, local_wheels, uv_cache):
    env = {**os.environ, "TFGPU_CACHE_DIR": str(uv_cache), "TFGPU_ENVS_DIR": str(sandbox / "envs")}
    argv = [
        sys.executable,
        "-m",
        "tfgpu",
        "create",
        "--tf",
        "2.21",
        "--mode",
        "pip",
        "--python",
        PY,
        "--name",
        "same",
        "--find-links",
        str(local_wheels),
        "--offline",
        "--no-verify",
        "--force",
        "--json",
    ]
    for _ in range(4):
        children = [
            subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)
        ]
        results = [(child.wait(timeout=300), child.stdout.read(), child.stderr.read()) for child in children]
        for code, out, err in results:
            assert "Traceback" not in err
            assert code == 0 or json.loads(out)["error"]["code"] in ("target-busy", "target-not-empty"), out + err
        assert any(code == 0 for code, _, _ in results)
        assert marker.proof(sandbox / "envs" / "same") and siblings(sandbox / "envs" / "same") == []


def test_a_stray_sigterm_becomes_exit_143_without_a_traceback(tmp_path):
    """SIGTERM and SIGHUP are installed through ``tfgpu.process.interrupts``: a SIGTERM mid-command is the
    same clean interruption as Ctrl-C."""
    import subprocess
    import sys

    script = (
        "import os, signal, sys\nfrom tfgpu.cli import main\n"
        "import tfgpu.cli.commands.plan as c\n"
        "c.cmd_plan = lambda s: os.kill(os.getpid(), signal.SIGTERM)\n"
        "sys.exit(main(['plan', '--no-detect']))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 143, done.stderr
    assert "Interrupted (SIGTERM): nothing was left half-built." in done.stderr and "Traceback" not in done.stderr
