"""Deleting and replacing: only a directory whose marker proves the tool made it *there* is removed
or replaced, and outside it only the tool's own kernels under the Jupyter kernels directory."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import sys
from pathlib import Path

import builtenvs
import pytest
from conftest import run_tool

from tfgpu.envs import jupyter, marker

from .conftest import Result, changed, no_traceback, snapshot

PY = f"{sys.version_info.major}.{sys.version_info.minor}"


@pytest.fixture(scope="module")
def module_tmp(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("ownership")


@pytest.fixture
def tmp_path(module_tmp) -> Path:
    """One temporary directory for every test of this module, emptied before each, so the sandbox
    (tests/hostile/conftest.py) and ``sandbox/env`` in it are at the same path in each: the env
    ``kept_env`` built there, put back, is the env a build there leaves, byte for byte (its marker
    names that path, which is what these tests attack)."""
    builtenvs.clear(module_tmp)
    return module_tmp


@pytest.fixture(scope="module")
def kept_env(module_tmp, local_wheels, uv_cache, tmp_path_factory) -> tuple[Path, Result]:
    """``sandbox/env`` as the ``build`` fixture makes it (the real command line, uv, offline, run in
    the sandbox with its directories), made once and kept aside (tests/builtenvs.py), with what the
    build said. The module's directory is emptied first: a test before the first that asks for this
    env (the slow ones, run in the same process) may have left an env at that path."""
    builtenvs.clear(module_tmp)
    sandbox = module_tmp / "sandbox"
    sandbox.mkdir()
    env = {
        **os.environ,
        "TFGPU_CACHE_DIR": str(uv_cache),
        "TFGPU_LOG_DIR": str(sandbox / "logs"),
        "TFGPU_ENVS_DIR": str(sandbox / "envs"),
        "JUPYTER_DATA_DIR": str(sandbox / "jupyter"),
        "COLUMNS": "160",
    }
    env.pop("TFGPU_DATA_DIR", None)
    with contextlib.chdir(sandbox):
        done = run_tool(
            "create", "--tf", "2.21", "--mode", "pip", "--python", PY, "--prefix", str(sandbox / "env"),
            "--find-links", str(local_wheels), "--offline", "--no-verify", "--json", env=env,
        )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    kept = builtenvs.keep(sandbox / "env", tmp_path_factory.mktemp("kept") / "env")
    return kept, Result(done.returncode, done.stdout, done.stderr)


@pytest.fixture
def build(build, kept_env, sandbox):
    """The hostile suite's ``build``; ``sandbox/env`` without extra options is the kept env put back
    where it was built (files copied, not linked: some tests rewrite its marker), with what its
    build said. Any other prefix is built for real."""

    def make(prefix: Path | str, *extra: str) -> Result:
        if Path(prefix) != sandbox / "env" or extra:
            return build(prefix, *extra)
        kept, said = kept_env
        builtenvs.restore(kept, sandbox / "env", link=False)
        return said

    return make


def precious(directory):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "precious.txt").write_text("keep me\n")
    return directory


FORGED = {
    "empty-object": "{}",
    "old-format": json.dumps({"tool": "tfgpu-install", "mode": "pip", "tensorflow": "2.21.0"}),
    "json-list": json.dumps([{"tool": "tfgpu-install"}]),
    "json-string": json.dumps("tfgpu-install"),
    "not-json": "tool = tfgpu-install",
    "non-utf8": b"\xff\xfe{}".decode("latin-1"),
    "bad-id": json.dumps({"tool": "tfgpu-install", "marker_format": 2, "id": "../../x", "prefix": "@PREFIX@"}),
    "id-as-list": json.dumps({"tool": "tfgpu-install", "marker_format": 2, "id": ["a"], "prefix": "@PREFIX@"}),
    "future-format": json.dumps({"tool": "tfgpu-install", "marker_format": 99, "id": "0" * 32, "prefix": "@PREFIX@"}),
    "other-tool": json.dumps({"tool": "conda", "marker_format": 2, "id": "0" * 32, "prefix": "@PREFIX@"}),
    "made-elsewhere": json.dumps(
        {"tool": "tfgpu-install", "marker_format": 2, "id": "0" * 32, "prefix": "/somewhere/else"}
    ),
}


@pytest.mark.parametrize("forged", FORGED, ids=list(FORGED))
@pytest.mark.parametrize("command", ["remove", "create-force"])
def test_a_forged_marker_proves_nothing(cli, sandbox, forged, command, local_wheels):
    project = precious(sandbox / "project")
    text = FORGED[forged].replace("@PREFIX@", os.path.realpath(project))
    (project / marker.NAME).write_text(text, encoding="latin-1")
    before = snapshot(sandbox)
    if command == "remove":
        done = cli("remove", "--prefix", str(project), "--json")
        assert (done.code, done.error) == (3, "not-a-tfgpu-env")
    else:
        done = cli(
            "create",
            "--tf",
            "2.21",
            "--mode",
            "pip",
            "--prefix",
            str(project),
            "--force",
            "--no-verify",
            "--find-links",
            str(local_wheels),
            "--offline",
            "--json",
        )
        assert (done.code, done.error) == (3, "target-not-empty")
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []


def test_a_marker_copied_from_a_real_env_proves_nothing(cli, build, sandbox):
    assert build(sandbox / "env").code == 0
    project = precious(sandbox / "project")
    shutil.copy(sandbox / "env" / marker.NAME, project / marker.NAME)
    before = snapshot(sandbox)
    done = cli("remove", "--prefix", str(project), "--json")
    assert (done.code, done.error) == (3, "not-a-tfgpu-env") and "made for" in json.loads(done.out)["error"]["message"]
    assert changed(before, snapshot(sandbox)) == []


def test_a_moved_env_is_not_removed_where_it_was_not_made(cli, build, sandbox):
    assert build(sandbox / "env").code == 0
    os.rename(sandbox / "env", sandbox / "moved")
    done = cli("remove", "--prefix", str(sandbox / "moved"), "--json")
    assert (done.code, done.error) == (3, "not-a-tfgpu-env")
    assert (sandbox / "moved" / "bin" / "python").exists()


@pytest.mark.parametrize("kind", ["huge", "symlink", "directory"])
def test_an_odd_marker_file_proves_nothing(cli, sandbox, kind, build):
    assert build(sandbox / "env").code == 0
    path = sandbox / "env" / marker.NAME
    real = json.loads(path.read_text())
    path.unlink()
    if kind == "huge":
        path.write_text(json.dumps({**real, "padding": "x" * (marker.MAX_BYTES + 1)}))
    elif kind == "symlink":
        (sandbox / "elsewhere.json").write_text(json.dumps(real))
        path.symlink_to(sandbox / "elsewhere.json")
    else:
        path.mkdir()
    done = cli("remove", "--prefix", str(sandbox / "env"), "--json")
    assert (done.code, done.error) == (3, "not-a-tfgpu-env")
    assert (sandbox / "env" / "bin" / "python").exists()


def test_a_path_in_the_marker_is_never_deleted(cli, build, sandbox):
    """The old marker named its kernel by path ("jupyter_kernel"); now only names under the kernels
    directory count, and only when the kernel's own file carries the env's id."""
    assert build(sandbox / "env").code == 0
    victim = precious(sandbox / "victim")
    path = sandbox / "env" / marker.NAME
    found = json.loads(path.read_text())
    found["jupyter_kernel"] = str(victim)
    found["owned"] = {"kernels": [str(victim), "../../victim", "tfgpu-env-" + found["id"][:8] + "/../../../victim"]}
    path.write_text(json.dumps(found))
    done = cli("remove", "--prefix", str(sandbox / "env"), "--json")
    assert done.code == 0 and not (sandbox / "env").exists()
    assert (victim / "precious.txt").read_text() == "keep me\n"


def test_a_kernel_of_another_env_is_not_deleted(cli, build, sandbox):
    assert build(sandbox / "env").code == 0
    found = json.loads((sandbox / "env" / marker.NAME).read_text())
    other = jupyter.kernels_dir() / jupyter.kernel_name("env", found["id"])
    other.mkdir(parents=True)
    (other / "kernel.json").write_text(json.dumps({"metadata": {"tfgpu-install": {"id": "f" * 32}}}))
    found["owned"] = {"kernels": [other.name]}
    (sandbox / "env" / marker.NAME).write_text(json.dumps(found))
    assert cli("remove", "--prefix", str(sandbox / "env")).code == 0
    assert (other / "kernel.json").exists()


def test_two_envs_with_one_basename_get_two_kernels(sandbox):
    """Kernel names carry the env's id: removing one env's kernel leaves the other's."""
    names = []
    for parent in ("a", "b"):
        staging = sandbox / parent / ".env.tfgpu-staging"
        (staging / "etc" / "tfgpu").mkdir(parents=True)
        (staging / "etc" / "tfgpu" / "layout.json").write_text(json.dumps({"lib_dirs": [], "cuda_data_dir": None}))
        env_id = secrets.token_hex(16)
        names.append((jupyter.register(staging, sandbox / parent / "env", "env", env_id, "2.21.0"), env_id))
    (first, first_id), (second, second_id) = names
    assert first != second
    assert jupyter.unregister(first, first_id)
    assert not (jupyter.kernels_dir() / first).exists() and (jupyter.kernels_dir() / second).is_dir()
    assert not jupyter.unregister(second, first_id)  # another env's id deletes nothing


BAD_NAMES = ["/abs/dir", "../x", "..", ".", "a/b", "-x", " x", "x y", "x$(touch PWNED)", "x" * 65, "\u00e9t\u00e9"]


@pytest.mark.parametrize("name", BAD_NAMES)
@pytest.mark.parametrize("command", ["remove", "create", "verify", "doctor"])
def test_names_are_checked_by_every_command(cli, sandbox, name, command):
    precious(sandbox / "abs")
    before = snapshot(sandbox)
    argv = {
        "remove": ["remove"],
        "create": ["create", "--tf", "2.21", "--no-verify"],
        "verify": ["verify"],
        "doctor": ["doctor"],
    }[command]
    done = cli(*argv, f"--name={name}", "--json")
    assert (done.code, done.error) == (2, "bad-env-name")
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []


def test_symlinked_prefix_is_refused_by_create_force_and_remove(cli, build, sandbox, local_wheels):
    """The link leads to a real env the tool built (``sandbox/env``): the refusal is the link's."""
    assert build(sandbox / "env").code == 0
    (sandbox / "link").symlink_to(sandbox / "env")
    before = snapshot(sandbox)
    done = cli(
        "create",
        "--tf",
        "2.21",
        "--mode",
        "pip",
        "--prefix",
        str(sandbox / "link"),
        "--force",
        "--no-verify",
        "--find-links",
        str(local_wheels),
        "--offline",
        "--json",
    )
    assert (done.code, done.error) == (3, "prefix-is-symlink") and str(sandbox / "env") in done.out
    done = cli("remove", "--prefix", str(sandbox / "link"), "--json")
    assert (done.code, done.error) == (3, "prefix-is-symlink")
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []


def test_remove_through_dot_dot_removes_the_env_itself(cli, build, sandbox):
    assert build(sandbox / "env").code == 0
    precious(sandbox / "neighbour")
    done = cli("remove", "--prefix", str(sandbox / "env" / "bin" / ".."), "--json")
    assert done.code == 0 and json.loads(done.out)["removed"] == str(sandbox / "env")
    assert not (sandbox / "env").exists() and (sandbox / "neighbour" / "precious.txt").exists()
    assert [p.name for p in sandbox.iterdir() if "tfgpu" in p.name] == []


@pytest.mark.parametrize("what", ["missing", "file", "empty-dir"])
def test_remove_of_what_is_not_an_env(cli, sandbox, what):
    target = sandbox / "target"
    if what == "file":
        target.write_text("not a dir\n")
    elif what == "empty-dir":
        target.mkdir()
    done = cli("remove", "--prefix", str(target), "--json")
    assert done.code == 3 and done.error == ("no-such-env" if what == "missing" else "not-a-tfgpu-env")
    assert target.exists() == (what != "missing")


LEFTOVERS = ["staging", "old", "removing"]


@pytest.mark.parametrize("leftover", LEFTOVERS)
@pytest.mark.parametrize("shape", ["foreign-dir", "symlink-to-victim"])
def test_a_leftover_name_the_tool_did_not_make_is_left_alone(cli, sandbox, leftover, shape, local_wheels):
    victim = precious(sandbox / "victim")
    path = sandbox / f".env.tfgpu-{leftover}"
    if shape == "foreign-dir":
        precious(path)
    else:
        path.symlink_to(victim)
    before = snapshot(sandbox)
    done = cli(
        "create",
        "--tf",
        "2.21",
        "--mode",
        "pip",
        "--prefix",
        str(sandbox / "env"),
        "--no-verify",
        "--find-links",
        str(local_wheels),
        "--offline",
        "--json",
    )
    assert (done.code, done.error) == (3, "foreign-leftover")
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache", ".env.tfgpu-lock")) == []
    assert (victim / "precious.txt").exists()


def test_a_lock_file_that_is_a_symlink_is_not_followed(cli, sandbox, local_wheels):
    victim = sandbox / "victim.txt"
    victim.write_text("keep me\n")
    (sandbox / ".env.tfgpu-lock").symlink_to(victim)
    done = cli(
        "create",
        "--tf",
        "2.21",
        "--mode",
        "pip",
        "--prefix",
        str(sandbox / "env"),
        "--no-verify",
        "--find-links",
        str(local_wheels),
        "--offline",
        "--json",
    )
    assert (done.code, done.error) == (3, "target-not-writable")
    assert victim.read_text() == "keep me\n" and not (sandbox / "env").exists()


def test_a_forged_in_place_journal_for_another_target_is_refused(cli, sandbox, local_wheels):
    victim = precious(sandbox / "env")
    (victim / marker.NAME).write_text("{}")
    (sandbox / ".env.tfgpu-inplace.json").write_text(
        json.dumps({"tool": "tfgpu-install", "target": "/elsewhere", "id": "0" * 32})
    )
    done = cli("remove", "--prefix", str(sandbox / "env"), "--json")
    assert (done.code, done.error) == (3, "foreign-leftover")
    assert (victim / "precious.txt").exists()


@pytest.mark.parametrize("forged", ["tool-only", "copied-from-elsewhere", "symlinked-marker"])
def test_a_system_toolkit_the_tool_cannot_prove_it_installed_is_never_replaced(sandbox, monkeypatch, forged):
    """/usr/local/cuda-X.Y with a hand-written or copied tfgpu-toolkit.json: --force leaves it alone."""
    from tfgpu.errors import ImpossibleError
    from tfgpu.installers import system_toolkit as tk

    monkeypatch.setattr(tk, "SYSTEM_PREFIX", sandbox / "usr-local")
    monkeypatch.setattr(tk, "is_root", lambda: True)
    final = precious(sandbox / "usr-local" / "cuda-11.8")
    record = {"tool": "tfgpu-install"}
    if forged == "copied-from-elsewhere":
        record["prefix"] = "/opt/other/cuda-11.8"
    if forged == "symlinked-marker":
        (sandbox / "elsewhere.json").write_text(json.dumps({**record, "prefix": os.path.realpath(final)}))
        (final / tk.TOOLKIT_MARKER).symlink_to(sandbox / "elsewhere.json")
    else:
        (final / tk.TOOLKIT_MARKER).write_text(json.dumps(record))
    with pytest.raises(ImpossibleError) as caught:
        tk.place_toolkit("11.8", None, True, [], force=True)
    assert caught.value.code == "toolkit-exists" and (final / "precious.txt").exists()


def test_a_foreign_toolkit_staging_directory_is_left_alone(sandbox, monkeypatch):
    from tfgpu.errors import ImpossibleError
    from tfgpu.installers import system_toolkit as tk

    final = sandbox / "usr-local" / "cuda-11.8"
    staging = precious(final.with_name(".cuda-11.8.tfgpu-staging"))
    place = tk.ToolkitPlace(final=final, staging=staging, ref=str(final), system=True)
    with pytest.raises(ImpossibleError) as caught:
        tk.prepare_staging(place)
    assert caught.value.code == "foreign-leftover" and (staging / "precious.txt").exists()


# -- a project file found by walking up, owned by someone else ----------------------------------
# project.find takes the nearest tfgpu.toml in any parent directory, whoever owns it: in a shared,
# world-writable directory (/tmp, a scratch volume) another user plants channels and insecure-hosts
# for root's next `create` (git refuses the same since CVE-2022-24765: safe.directory).


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown needs root")
def test_a_project_file_planted_by_another_user_in_a_parent_is_not_used(cli, sandbox, monkeypatch):
    monkeypatch.delenv("TFGPU_PROJECT_FILE", raising=False)
    shared = sandbox / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    planted = shared / "tfgpu.toml"
    planted.write_text('mode = "conda"\nchannels = ["https://evil.example/ch"]\ninsecure-hosts = ["evil.example"]\n')
    os.chown(planted, 65534, 65534)
    (shared / "victim").mkdir()
    monkeypatch.chdir(shared / "victim")
    done = no_traceback(cli, "plan", "--tf", "2.21", "--no-detect", "--json")
    assert done.code == 0, done.out
    assert json.loads(done.out)["mode"] == "pip", "the planted file chose the mode (and its channels and hosts)"
    assert "belongs to another user" in done.err and "--project" in done.err  # said, also under --json


# -- a hand-written in-place journal beside a directory the tool never made ----------------------
# envs/txn.py:recover trusts `.T.tfgpu-inplace.json` as proof: a record whose "target" is T's real
# path and whose "id" is any string makes the next `remove` of T delete T with writes.remove_tree —
# T holds no marker, nothing ties it to a build. `remove` then says "no-such-env". (`create` holds:
# it stops at target-not-empty before recovering.) docs/safety.md: "It deletes only what it can prove it made."


@pytest.mark.parametrize("command", ["remove"])
def test_a_planted_in_place_journal_does_not_delete_a_directory_the_tool_never_made(cli, sandbox, command):
    from tfgpu.envs import txn

    victim = sandbox / "T"
    victim.mkdir()
    (victim / "thesis.tex").write_text("years of work\n")
    txn.journal_of(victim).write_text(json.dumps({"target": os.path.realpath(victim), "id": "x"}))
    if command == "remove":
        done = no_traceback(cli, "remove", "--prefix", str(victim), "--json")
    else:
        done = no_traceback(
            cli,
            "create",
            "--tf",
            "2.21",
            "--mode",
            "pip",
            "--python",
            PY,
            "--prefix",
            str(victim),
            "--no-detect",
            "--offline",
            "--no-verify",
            "--json",
        )
    assert (victim / "thesis.tex").exists(), f"{command} deleted {victim}: {done.out[:300]}"
    assert (done.code, done.error) == (3, "foreign-leftover"), done.out


def test_a_project_file_in_a_parent_anyone_may_write_to_is_not_used(cli, sandbox, monkeypatch):
    # The file is the user's own, but the directory lets anyone swap it (no sticky bit).
    monkeypatch.delenv("TFGPU_PROJECT_FILE", raising=False)
    open_dir = sandbox / "open"
    open_dir.mkdir()
    (open_dir / "tfgpu.toml").write_text('mode = "conda"\n')
    open_dir.chmod(0o777)
    (open_dir / "work").mkdir()
    monkeypatch.chdir(open_dir / "work")
    try:
        done = no_traceback(cli, "plan", "--tf", "2.21", "--no-detect", "--json")
    finally:
        open_dir.chmod(0o755)
    assert done.code == 0, done.out
    assert json.loads(done.out)["mode"] == "pip"
    assert "anyone may write to" in done.err
    explicit = no_traceback(
        cli, "plan", "--tf", "2.21", "--no-detect", "--json", "--project", str(open_dir / "tfgpu.toml")
    )
    assert explicit.code == 0 and json.loads(explicit.out)["mode"] == "conda", explicit.out
