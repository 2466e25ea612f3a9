"""The env-write door under attack: a directory in an existing env that links out of it (in
site-packages' ``nvidia/``, ``bin/``, ``etc/``, ``lib/``, ``conda-meta/``), a directory where a file
goes, a parent made read-only under a build or a remove, a target name as long as a name may be, a
full disk; and state changes under the lock: undo after the user changed the env, a journal the
tool cannot apply, the repair's own check writing bytecode, a repair and a remove at once.

Each case asserts the exit code and error code, no traceback (``cli`` runs in-process: an
exception fails the test), and nothing changed outside what the tool built.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import builtenvs
import pytest
import repairhelpers as rh
import wheelhouse

from hostile.conftest import changed, snapshot

QUIET = ("--no-detect", "--yes", "--no-verify")


@pytest.fixture(scope="module")
def kept_user_env(repair_wheels, tmp_path_factory) -> tuple[Path, Path]:
    """A user's own env (``uv venv`` + ``uv pip install tensorflow``, real uv), built once and kept
    (tests/builtenvs.py), and where it was built."""
    built = rh.user_venv(tmp_path_factory.mktemp("user-env") / "env", repair_wheels, "tensorflow==2.21.0")
    return builtenvs.keep(built, tmp_path_factory.mktemp("kept") / "env"), built


@pytest.fixture
def user_env(sandbox, kept_user_env, uv_cache, monkeypatch) -> Path:
    """The kept user env, copied into the sandbox for the test to attack and repair."""
    monkeypatch.setenv("TFGPU_CACHE_DIR", str(uv_cache))
    return builtenvs.relocated(*kept_user_env, sandbox / "env")


def site_of(env: Path) -> Path:
    return next(env.glob("lib/python3*/site-packages"))


def repair(cli, env: Path, wheels: Path, *extra: str):
    return cli("repair", "--prefix", str(env), "--find-links", str(wheels), "--offline", *QUIET, "--json", *extra)


def journal_of(env: Path) -> Path:
    return env / "etc" / "tfgpu" / "repair.json"


def user_wheel(directory: Path, name: str = "somepkg", version: str = "1.0") -> Path:
    directory.mkdir(exist_ok=True)
    return wheelhouse.wheel(directory, name, version, {f"{name}/__init__.py": b"VALUE = 1\n"})


def user_install(env: Path, wheels: Path, requirement: str) -> None:
    subprocess.run(
        [
            rh.uv(),
            "pip",
            "install",
            "--quiet",
            "--python",
            str(env / "bin" / "python"),
            "--no-index",
            "--find-links",
            str(wheels),
            requirement,
        ],
        check=True,
    )


def chattr(path: Path, flag: str) -> bool:
    return (
        shutil.which("chattr") is not None
        and subprocess.run(["chattr", flag, str(path)], capture_output=True).returncode == 0
    )


# --- a directory that links out of the env ------------------------------------------------------


@pytest.mark.parametrize("where", ["SITE/nvidia/cusolver", "bin/tools", "etc/jupyter", "lib/extra"])
def test_a_directory_linking_out_stops_the_repair_before_uv_writes(cli, sandbox, user_env, repair_wheels, where):
    outside = sandbox / "elsewhere"
    outside.mkdir()
    link = user_env / where.replace("SITE", str(site_of(user_env).relative_to(user_env)))
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside)
    before = snapshot(sandbox)
    done = repair(cli, user_env, repair_wheels)
    assert (done.code, done.error) == (3, "repair-path-outside"), done.out
    assert str(link) in json.loads(done.out)["error"]["message"]
    assert list(outside.iterdir()) == []
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []


def test_a_link_out_planted_after_the_repair_stops_the_undo(cli, sandbox, user_env, repair_wheels):
    assert repair(cli, user_env, repair_wheels).code == 0
    outside = sandbox / "elsewhere"
    outside.mkdir()
    (site_of(user_env) / "nvidia" / "planted").symlink_to(outside)
    before = snapshot(sandbox)
    done = cli("repair", "--undo", "--prefix", str(user_env), "--json")
    assert (done.code, done.error) == (3, "repair-path-outside"), done.out
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []


@pytest.mark.parametrize("where", ["conda-meta/linked", "pkgs/cache", "include/x", "share/y"])
def test_the_tree_check_finds_a_link_out_anywhere_in_a_conda_prefix(tmp_path, where):
    from tfgpu.envs import writes
    from tfgpu.errors import ImpossibleError

    prefix, outside = tmp_path / "prefix", tmp_path / "outside"
    for directory in ("conda-meta", "pkgs", "include", "share", "lib", "bin"):
        (prefix / directory).mkdir(parents=True)
    outside.mkdir()
    (prefix / "lib64").symlink_to("lib")  # links inside the env are fine
    (prefix / "bin" / "python3").symlink_to("/usr/bin/python3")  # a file link out is not a directory
    writes.check_tree(prefix)
    (prefix / where).symlink_to(outside)
    with pytest.raises(ImpossibleError) as refused:
        writes.check_tree(prefix)
    assert refused.value.code == "repair-path-outside" and where in refused.value.message


# --- a directory where a file goes --------------------------------------------------------------


def test_a_directory_where_an_activation_file_goes_is_a_typed_error_and_recoverable(
    cli, sandbox, user_env, repair_wheels
):
    blocker = user_env / "etc" / "tfgpu" / "activate.sh"
    blocker.mkdir(parents=True)
    before, env_before = snapshot(sandbox), rh.snapshot(user_env)
    done = repair(cli, user_env, repair_wheels)
    assert (done.code, done.error) == (3, "env-path-blocked"), done.out
    assert str(blocker) in json.loads(done.out)["error"]["message"]
    assert not journal_of(user_env).exists()  # rolled back: no journal left "applying"
    assert rh.snapshot(user_env) == env_before  # every byte, mode and link (directory times aside)
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache", "env")) == []
    blocker.rmdir()
    assert repair(cli, user_env, repair_wheels).code == 0  # the way forward works


def test_activation_writes_replace_a_planted_link_and_refuse_a_directory(tmp_path):
    from tfgpu.envs import writes
    from tfgpu.errors import ImpossibleError

    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    target = tmp_path / "env" / "etc" / "tfgpu" / "activate.sh"
    target.parent.mkdir(parents=True)
    target.symlink_to(victim)
    writes.put_text(target, "new\n")
    assert victim.read_text() == "keep\n" and not target.is_symlink() and target.read_text() == "new\n"
    target.unlink()
    target.mkdir()
    with pytest.raises(ImpossibleError) as refused:
        writes.put_text(target, "new\n")
    assert refused.value.code == "env-path-blocked"


# --- undo takes back only what the repair did ----------------------------------------------------


def test_undo_after_an_interrupted_repair_keeps_what_the_user_installed_since(cli, sandbox, user_env, repair_wheels):
    frozen = rh.freeze(user_env)
    assert repair(cli, user_env, repair_wheels).code == 0
    journal = json.loads(journal_of(user_env).read_text())
    assert {p["name"] for p in journal["intended"]} == {p["name"] for p in journal["added"]}  # uv's dry run
    # As a SIGKILL right after the install leaves it: packages in, journal still "applying".
    journal["state"] = "applying"
    for key in ("added", "changed", "written"):
        journal[key] = {} if key == "written" else []
    journal_of(user_env).write_text(json.dumps(journal))
    user_install(user_env, user_wheel(sandbox / "mine").parent, "somepkg==1.0")
    done = cli("repair", "--undo", "--prefix", str(user_env), "--json")
    assert done.code == 0, done.out
    report = json.loads(done.out)
    assert "somepkg" not in report["removed"] and any("somepkg" in line for line in report["left"])
    assert rh.freeze(user_env) == "".join(sorted([*frozen.splitlines(True), "somepkg==1.0\n"]))


def test_undo_keeps_a_file_and_a_package_the_user_changed_after_the_repair(cli, sandbox, user_env, repair_wheels):
    assert repair(cli, user_env, repair_wheels).code == 0
    script = user_env / "etc" / "tfgpu" / "activate.sh"
    script.write_text(script.read_text() + "# my own line\n")
    user_install(user_env, repair_wheels, f"nvidia-cudnn-cu12=={rh.OLD_CUDNN}")
    done = cli("repair", "--undo", "--prefix", str(user_env), "--json")
    assert done.code == 0, done.out
    report = json.loads(done.out)
    assert script.read_text().endswith("# my own line\n")
    assert "nvidia-cudnn-cu12" not in report["removed"]
    assert f"nvidia-cudnn-cu12=={rh.OLD_CUDNN}" in rh.freeze(user_env)
    assert {line.split()[0] for line in report["left"]} >= {"etc/tfgpu/activate.sh", "nvidia-cudnn-cu12"}


# --- a journal the tool cannot apply is recoverable by the tool -----------------------------------


def test_a_damaged_journal_is_set_aside_by_the_tool_not_by_hand(cli, user_env, repair_wheels):
    assert repair(cli, user_env, repair_wheels).code == 0
    journal_of(user_env).write_text("{ damaged")
    refused = cli("repair", "--undo", "--prefix", str(user_env), "--json")
    assert (refused.code, refused.error) == (3, "repair-journal-foreign")
    assert "--forget-journal" in " ".join(json.loads(refused.out)["error"]["alternatives"])
    wrong = cli("repair", "--forget-journal", "--prefix", str(user_env), "--yes", "--json")
    assert (wrong.code, wrong.error) == (2, "conflicting-options")
    done = cli("repair", "--undo", "--forget-journal", "--prefix", str(user_env), "--json")
    assert done.code == 0, done.out
    aside = Path(json.loads(done.out)["journal_set_aside"])
    assert aside.read_text() == "{ damaged" and aside.parent == journal_of(user_env).parent
    again = cli("repair", "--undo", "--prefix", str(user_env), "--json")
    assert (again.code, again.error) == (3, "nothing-to-undo")


# --- the lock comes before the state -----------------------------------------------------------


def test_repair_and_undo_read_the_env_only_while_holding_its_lock(cli, user_env, repair_wheels, monkeypatch):
    import fcntl

    from tfgpu.envs import txn
    from tfgpu.repair import survey as survey_module

    real, held = survey_module.survey, []

    def watched(prefix=None, python=None):
        path = txn.TargetLock(user_env).path
        fd = os.open(path, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held.append(False)
            fcntl.flock(fd, fcntl.LOCK_UN)
        except BlockingIOError:
            held.append(True)
        finally:
            os.close(fd)
        return real(prefix, python)

    monkeypatch.setattr(survey_module, "survey", watched)
    assert repair(cli, user_env, repair_wheels).code == 0
    assert cli("repair", "--undo", "--prefix", str(user_env), "--json").code == 0
    assert held and all(held), held


def test_a_remove_while_a_repair_holds_the_env_is_turned_away(cli, user_env):
    from tfgpu.envs import txn

    before = rh.snapshot(user_env)
    with txn.TargetLock(user_env):
        done = cli("remove", "--prefix", str(user_env), "--json")
    assert (done.code, done.error) == (1, "target-busy")
    assert rh.snapshot(user_env) == before


# --- what the repair's own check writes -------------------------------------------------------


def test_repair_with_its_check_then_undo_leaves_the_env_byte_identical(cli, user_env, repair_wheels):
    """The check imports (the stand-in) TensorFlow with the env's own interpreter; before, that
    left ``__pycache__`` files behind every undo."""
    before = rh.snapshot(user_env)
    done = cli(
        "repair",
        "--prefix",
        str(user_env),
        "--find-links",
        str(repair_wheels),
        "--offline",
        "--no-detect",
        "--yes",
        "--json",
    )
    assert journal_of(user_env).exists(), done.out  # repaired; the check itself may fail on the stand-in
    assert not [p for p in rh.snapshot(user_env) if "__pycache__" in p]
    undone = cli("repair", "--undo", "--prefix", str(user_env), "--json")
    assert undone.code == 0, undone.out
    assert rh.snapshot(user_env) == before


# --- rollback and remove touch only what the run made ---------------------------------------------


def test_rollback_never_changes_a_parents_mode_and_says_what_it_left(sandbox):
    from tfgpu.envs import txn
    from tfgpu.errors import ImpossibleError

    parent = sandbox / "P"
    parent.mkdir(mode=0o755)
    final = parent / "env"
    staging = txn.staging_of(final)
    staging.mkdir()
    txn.write_record(staging / txn.STAGING_RECORD, {"tool": "tfgpu-install", "target": os.path.realpath(final)})
    (staging / "pkg").mkdir()
    (staging / "pkg" / "file").write_text("x")
    (staging / "pkg").chmod(0o500)  # read-only inside the build: the run's own, made writable to delete
    if not chattr(parent, "+a"):
        pytest.skip("chattr +a is not available here (as root, only it makes a directory refuse deletes)")
    try:
        mode = parent.stat().st_mode
        with pytest.raises(ImpossibleError) as refused:
            txn.rollback(SimpleNamespace(in_place=False, staging=staging, prefix=final))
        assert refused.value.code == "target-not-writable" and str(staging) in refused.value.message
        assert parent.stat().st_mode == mode
        assert [p.name for p in staging.iterdir()] == [txn.STAGING_RECORD]
    finally:
        chattr(parent, "-a")
    assert txn.recover(final) and not staging.exists()  # the next run finishes the job


def test_remove_in_a_read_only_parent_is_a_clear_error(cli, build, sandbox):
    parent = sandbox / "P"
    parent.mkdir()
    assert build(parent / "env").code == 0
    if not chattr(parent, "+a"):
        pytest.skip("chattr +a is not available here")
    try:
        done = cli("remove", "--prefix", str(parent / "env"), "--json")
    finally:
        chattr(parent, "-a")
    assert (done.code, done.error) == (3, "target-not-writable"), done.out
    assert (parent / "env" / "tfgpu-env.json").is_file()
    assert cli("remove", "--prefix", str(parent / "env"), "--json").code == 0


def test_a_target_name_of_240_characters_builds_and_one_too_long_is_bad_prefix(cli, build, sandbox):
    assert build(sandbox / ("a" * 240)).code == 0
    assert not [p for p in sandbox.iterdir() if "tfgpu-" in p.name]
    done = build(sandbox / ("b" * 256))
    assert (done.code, done.error) == (2, "bad-prefix")


def test_repair_on_a_full_disk_is_a_clear_error_and_changes_nothing(cli, sandbox, repair_wheels, uv_cache, monkeypatch):
    disk = sandbox / "small"
    disk.mkdir()
    if (
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)], capture_output=True).returncode
        != 0
    ):
        pytest.skip("cannot mount a small tmpfs here")
    try:
        monkeypatch.setenv("TFGPU_CACHE_DIR", str(uv_cache))
        env = rh.user_venv(disk / "env", repair_wheels, "tensorflow==2.21.0")
        with open(disk / "filler", "wb") as filler:
            try:
                while True:
                    filler.write(b"\0" * 65536)
                    filler.flush()
            except OSError:
                pass
        os.truncate(disk / "filler", max(0, (disk / "filler").stat().st_size - 24 * 1024))
        before = rh.snapshot(env)
        done = repair(cli, env, repair_wheels)
        assert done.code == 1 and done.error in ("install-failed", "env-write-failed"), done.out
        assert rh.snapshot(env) == before
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


@pytest.mark.slow
def test_sigterm_after_the_parent_turned_read_only_leaves_its_mode_and_says_what_is_left(sandbox, local_wheels):
    import functools
    import signal
    import sys
    import threading
    import time
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    class Slow(SimpleHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            if self.path.endswith(".whl"):
                time.sleep(2.0)
            super().do_GET()

        def log_message(self, *args):  # noqa: D102 - quiet
            pass

    parent = sandbox / "P"
    parent.mkdir()
    if not chattr(parent, "+a"):
        pytest.skip("chattr +a is not available here")
    chattr(parent, "-a")
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Slow, directory=str(local_wheels)))
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    index = f"http://127.0.0.1:{server.server_address[1]}/"
    env = {**os.environ, "UV_DEFAULT_INDEX": index + "simple/", "TFGPU_CACHE_DIR": str(sandbox / "cold")}
    child = subprocess.Popen(
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
            f"{sys.version_info[0]}.{sys.version_info[1]}",
            "--prefix",
            str(parent / "env"),
            "--find-links",
            index,
            "--no-verify",
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        for line in child.stderr:
            if line.startswith("[") and "Resolve the exact" in line:
                break
        mode = parent.stat().st_mode
        assert chattr(parent, "+a")
        os.killpg(child.pid, signal.SIGTERM)
        out, err = child.communicate(timeout=120)
        assert parent.stat().st_mode == mode
    finally:
        chattr(parent, "-a")
        server.shutdown()
    assert "Traceback" not in err, err
    assert child.returncode == 3 and json.loads(out)["error"]["code"] == "target-not-writable", out + err
    staging = [p for p in parent.iterdir() if "tfgpu-staging" in p.name]
    assert [p.name for p in staging[0].iterdir()] == [".tfgpu-staging.json"]
    from tfgpu.envs import txn

    assert txn.recover(parent / "env") and not [p for p in parent.iterdir() if "tfgpu-staging" in p.name]


# --- reads for rewriting, and deletes, stay inside the env --------------------------------------


def test_repair_never_copies_a_file_an_env_link_points_to_outside_the_env(cli, sandbox, user_env, repair_wheels):
    """bin/activate -> a secret outside the env: repair refuses the link (it would read it to add
    its hook) and copies neither its bytes nor its mode into the env."""
    outside = sandbox / "private"
    outside.mkdir()
    secret = outside / "id_rsa"
    secret.write_text("-----BEGIN PRIVATE KEY----- SECRET-OUTSIDE-THE-ENV\n")
    activate = user_env / "bin" / "activate"
    activate.unlink()
    activate.symlink_to(secret)
    before = snapshot(sandbox)
    done = repair(cli, user_env, repair_wheels)
    assert (done.code, done.error) == (3, "repair-path-outside"), done.out + done.err
    assert "Traceback" not in done.err and str(activate) in json.loads(done.out)["error"]["message"]
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []
    assert activate.is_symlink() and b"SECRET" not in b"".join(
        p.read_bytes() for p in user_env.rglob("*") if p.is_file() and not p.is_symlink() and p.stat().st_size < 1 << 20
    )


def test_an_activate_script_linking_inside_the_env_is_followed(tmp_path):
    from tfgpu.envs import writes

    env = tmp_path / "env"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "activate.real").write_text("# the env's own\n")
    os.chmod(env / "bin" / "activate.real", 0o640)
    (env / "bin" / "activate").symlink_to("activate.real")
    assert writes.read_own(env / "bin" / "activate", env) == (b"# the env's own\n", 0o640)
    assert writes.read_own(env / "bin" / "absent", env) is None


def test_a_move_never_replaces_what_is_at_its_destination(tmp_path):
    """A file onto a file, a directory onto an empty directory: os.rename would replace both."""
    from tfgpu.envs import writes
    from tfgpu.errors import ImpossibleError

    (tmp_path / "new.txt").write_text("new")
    (tmp_path / "kept.txt").write_text("kept")
    (tmp_path / "newdir").mkdir()
    (tmp_path / "keptdir").mkdir()
    for source, there in (("new.txt", "kept.txt"), ("newdir", "keptdir")):
        with pytest.raises(ImpossibleError) as refused:
            writes.move(tmp_path / source, tmp_path / there)
        assert refused.value.code == "env-path-blocked" and (tmp_path / source).exists()
    assert (tmp_path / "kept.txt").read_text() == "kept"
    writes.move(tmp_path / "new.txt", tmp_path / "moved.txt")
    assert (tmp_path / "moved.txt").read_text() == "new" and not (tmp_path / "new.txt").exists()
    writes.move(tmp_path / "moved.txt", tmp_path / "kept.txt", replace=True)
    assert (tmp_path / "kept.txt").read_text() == "new"


def test_remove_never_deletes_into_a_file_system_mounted_inside_the_env(cli, sandbox):
    """A data set mounted at ``env/data``: ``remove`` stops before deleting or moving anything
    (``env-has-mount``, naming the mount point and ``umount``) and works once it is unmounted."""
    from tfgpu.envs import marker

    env = sandbox / "env"
    (env / "data").mkdir(parents=True)
    (env / "bin").mkdir()
    (env / "bin" / "python").write_text("#!/bin/sh\n")
    marker.write(env, env_id="0123456789abcdef0123456789abcdef", made_for=os.path.realpath(env), fields={})
    if (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(env / "data")], capture_output=True
        ).returncode
        != 0
    ):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        (env / "data" / "dataset.csv").write_text("precious\n")
        before = snapshot(sandbox)
        done = cli("remove", "--prefix", str(env), "--json")
        assert (done.code, done.error) == (3, "env-has-mount"), done.out + done.err
        error = json.loads(done.out)["error"]
        assert str(env / "data") in error["message"] and "umount" in " ".join(error["alternatives"])
        assert os.path.ismount(env / "data") and (env / "data" / "dataset.csv").read_text() == "precious\n"
        assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []
    finally:
        if os.path.ismount(env / "data"):
            subprocess.run(["umount", str(env / "data")], check=False)
    assert cli("remove", "--prefix", str(env), "--json").code == 0 and not env.exists()
