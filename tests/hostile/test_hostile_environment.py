"""Bad data and odd environments are errors, never tracebacks: broken overlays, a damaged parsed-
table cache, any locale, endless or binary logs, a read-only home, paths that are files."""

from __future__ import annotations

import json
import marshal
import os
import shutil
import subprocess
import sys
import tempfile
from importlib.resources import files

import pytest

from tfgpu import data

from .conftest import changed, snapshot

PY = f"{sys.version_info.major}.{sys.version_info.minor}"

OVERLAYS = {
    "not-toml": ("cuda.toml", "[[toolkit\n"),
    "empty": ("cuda.toml", ""),
    "float-version": ("cuda.toml", None),
    "missing-key": ("quirks.toml", None),
    "not-utf8": ("cuda.toml", b'note = "caf\xe9"\n'),
    "unknown-table": ("cudaa.toml", "x = 1\n"),
    "array-is-a-table": ("tensorflow.toml", "[release]\nversion = '2.13.1'\n"),
    "rows-are-strings": ("quirks.toml", "quirk = ['a', 'b']\n"),
}


def _write_overlay(directory, case):
    name, content = OVERLAYS[case]
    directory.mkdir(exist_ok=True)
    if case == "float-version":
        content = files("tfgpu.data").joinpath("cuda.toml").read_text().replace('version = "12.5.1"', "version = 12.51")
    if case == "missing-key":
        import re

        content = re.sub(
            r"^message = .*\n", "", files("tfgpu.data").joinpath("quirks.toml").read_text(), count=1, flags=re.M
        )
    path = directory / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return name


@pytest.mark.parametrize("case", OVERLAYS, ids=list(OVERLAYS))
@pytest.mark.parametrize(
    "command", [["plan", "--tf", "2.13"], ["matrix"], ["doctor", "--log", "/dev/null"], ["script", "--format", "bash"]]
)
def test_a_malformed_overlay_is_bad_data_naming_the_file(cli, sandbox, case, command):
    name = _write_overlay(sandbox / "overlay", case)
    done = cli(
        *command,
        "--json",
        *(["--no-detect"] if command[0] in ("plan", "script") else []),
        env={"TFGPU_DATA_DIR": str(sandbox / "overlay")},
    )
    assert (done.code, done.error) == (2, "bad-data") and name in done.out


def test_an_overlay_that_is_not_a_directory(cli, sandbox):
    (sandbox / "overlay").write_text("x")
    done = cli("plan", "--json", "--no-detect", env={"TFGPU_DATA_DIR": str(sandbox / "overlay")})
    assert (done.code, done.error) == (2, "bad-data")


def _cache_file(sandbox):
    found = sorted((sandbox / "cache" / "data").glob("tables-*.bin"))
    assert len(found) == 1, found
    return found[0]


def _min_driver(cli) -> str:
    done = cli("plan", "--tf", "2.21", "--no-detect", "--json")
    assert done.code == 0, done.out
    return json.loads(done.out)["min_driver"]


@pytest.mark.parametrize(
    "damage",
    ["flip-a-byte-of-a-value", "truncate", "other-marshal-with-a-valid-checksum", "not-a-dict", "empty", "garbage"],
)
def test_a_damaged_table_cache_is_parsed_afresh_not_trusted(cli, sandbox, damage):
    expected = _min_driver(cli)
    path = _cache_file(sandbox)
    blob = bytearray(path.read_bytes())
    head = len(data._MAGIC) + 32
    if damage == "flip-a-byte-of-a-value":
        at = blob.index(b"525.60.13", head)
        blob[at + 2] = ord("5")  # 525 -> 555: still valid marshal, different data
    elif damage == "truncate":
        blob = blob[: len(blob) // 2]
    elif damage in ("other-marshal-with-a-valid-checksum", "not-a-dict"):
        payload = marshal.dumps({"cuda.toml": {}} if damage == "other-marshal-with-a-valid-checksum" else [1, 2])
        blob = bytearray(data._MAGIC + data._digest(payload).digest() + payload)
    elif damage == "empty":
        blob = bytearray()
    else:
        blob = bytearray(os.urandom(4096))
    path.write_bytes(bytes(blob))
    data.clear()
    assert _min_driver(cli) == expected


def test_an_unwritable_cache_costs_only_time(cli, sandbox):
    (sandbox / "cache").write_text("a file where the cache directory should be\n")
    assert _min_driver(cli) == "525.60.13"


def _forge(path) -> None:
    """Replace the cache with one that has a valid checksum and one more key in a table (a value no
    shipped table has): a cache the tool would use as written, if it read it."""
    value = marshal.loads(path.read_bytes()[len(data._MAGIC) + 32 :])
    value["cuda.toml"] = marshal.dumps({**marshal.loads(value["cuda.toml"]), "forged": "by someone else"})
    payload = marshal.dumps(value)
    path.write_bytes(data._MAGIC + data._digest(payload).digest() + payload)


@pytest.mark.parametrize("opening", ["group-writable directory", "world-writable file", "another owner"])
def test_a_cache_others_could_write_is_never_read(cli, sandbox, opening):
    """The cache is used as written only where no one but this user could have written it (the rule
    OpenSSH applies to a private key); a cache that others could have forged is ignored, not read."""
    if opening == "another owner" and os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    expected = _min_driver(cli)
    path = _cache_file(sandbox)
    _forge(path)
    if opening == "group-writable directory":
        path.parent.chmod(0o775)
    elif opening == "world-writable file":
        path.chmod(0o666)
    else:
        os.chown(path, 65534, 65534)
    data.clear()
    assert "forged" not in data.load("cuda.toml")
    assert _min_driver(cli) == expected


def test_a_private_cache_is_used_as_written(cli, sandbox):
    """The other side of the rule: the tool's own private cache is read without a walk of its types
    (that walk was a third of a plan's time). This is what makes the rule above the door."""
    _min_driver(cli)
    path = _cache_file(sandbox)
    assert (path.stat().st_mode & 0o777, path.parent.stat().st_mode & 0o777) == (0o600, 0o700)
    _forge(path)
    data.clear()
    assert data.load("cuda.toml")["forged"] == "by someone else"


def test_the_cache_is_private_under_a_permissive_umask(cli, sandbox):
    """Under umask 002 (user-private groups, Debian's and Ubuntu's default for users) the cache is
    still written for this user alone, so the next run can read it."""
    old = os.umask(0o002)
    try:
        _min_driver(cli)
    finally:
        os.umask(old)
    path = _cache_file(sandbox)
    assert (path.stat().st_mode & 0o777, path.parent.stat().st_mode & 0o777) == (0o600, 0o700)


ENCODINGS = [
    # The command line makes its streams replace what they cannot encode, whatever the encoding:
    # ASCII, the narrowest, holds that in the fast tier; latin-1 takes the same branch with more
    # characters it can write, and runs in the full one.
    pytest.param("latin-1", marks=pytest.mark.slow),
    "ascii",
]


@pytest.fixture(scope="module")
def parsed_tables(tmp_path_factory):
    """A cache directory of the tool's as its first run on a machine leaves it: the shipped tables'
    parse written there (by the real command line, in this process, once for the module)."""
    from conftest import run_tool

    cache = tmp_path_factory.mktemp("parsed-tables") / "cache"
    env = {key: value for key, value in os.environ.items() if key != "TFGPU_DATA_DIR"}
    done = run_tool("plan", "--tf", "2.21", "--json", "--no-detect", env={**env, "TFGPU_CACHE_DIR": str(cache)})
    assert done.returncode == 0, done.stderr
    assert list((cache / "data").glob("tables-*.bin")), "the run wrote no parse of the tables"
    return cache


@pytest.fixture
def a_later_run(sandbox, parsed_tables):
    """The sandbox's cache (TFGPU_CACHE_DIR) as every run after a machine's first finds it: the
    tables' parse is there, so the tool process reads it instead of parsing the tables again
    (some 0.15 CPU-s a process). What the tests that take this are about (a locale, what a log
    holds, an argument's raw bytes) is not the tables' parse; the first run, which parses them, is held under a hostile
    locale by ``test_any_locale_works[plan-*]``."""
    shutil.copytree(parsed_tables, sandbox / "cache", symlinks=True)


FIRST_RUN = ["plan", "--tf", "2.13", "--mode", "conda"]
"""The locale case run as a machine's first run: it parses the tables and writes their cache."""


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize(
    "argv",
    [
        FIRST_RUN,
        ["matrix"],
        ["doctor"],
        ["--tf", "2.21", "--prefix", "env", "--dry-run"],
        ["--help"],
        ["plan", "--tf", "9.99"],
    ],
    ids=["plan", "matrix", "doctor", "dry-run", "help", "error"],
)
def test_any_locale_works(tool, request, encoding, argv):
    """``plan`` runs as a machine's first run (an empty cache); the other cases as a later run."""
    if argv != FIRST_RUN:
        request.getfixturevalue("a_later_run")
    done = tool(*argv, env={"PYTHONIOENCODING": encoding, "LANG": "en_US.ISO-8859-1", "LC_ALL": "C"})
    assert done.code in (0, 1, 3)


@pytest.mark.parametrize(
    "content", [b"\xff\xfe\n", b"Could not load dynamic library 'libcudnn.so.8'\xff\n", b"\x00" * 100000]
)
def test_doctor_reads_any_bytes_from_stdin(sandbox, a_later_run, content):
    done = subprocess.run(
        [sys.executable, "-m", "tfgpu", "doctor", "--log", "-", "--json"],
        input=content,
        capture_output=True,
        cwd=sandbox,
        timeout=60,
    )
    assert done.returncode in (0, 1) and b"Traceback" not in done.stderr
    json.loads(done.stdout)


def test_doctor_reads_a_bounded_amount_of_an_endless_log(sandbox, a_later_run):
    done = subprocess.run(
        [sys.executable, "-m", "tfgpu", "doctor", "--log", "/dev/zero", "--json"],
        capture_output=True,
        cwd=sandbox,
        timeout=60,
    )
    assert done.returncode == 0 and json.loads(done.stdout)["truncated"] is True


@pytest.mark.parametrize("what", ["missing", "directory"])
def test_doctor_log_that_cannot_be_read(cli, sandbox, what):
    path = sandbox / "log"
    if what == "directory":
        path.mkdir()
    done = cli("doctor", "--log", str(path), "--json")
    assert (done.code, done.error) == (2, "bad-log-file")


def test_a_home_where_nothing_can_be_written(tool, sandbox, local_wheels):
    home = sandbox / "home-is-a-file"
    home.write_text("")
    env = {
        "HOME": str(home),
        "TFGPU_CACHE_DIR": "",
        "TFGPU_LOG_DIR": "",
        "XDG_CACHE_HOME": "",
        "XDG_DATA_HOME": "",
        "XDG_STATE_HOME": "",
    }
    env = {k: v for k, v in env.items()}
    clean = {k: v for k, v in os.environ.items() if k not in env}
    for argv in (["plan", "--tf", "2.21", "--json"], ["--tf", "2.21", "--prefix", str(sandbox / "env"), "--dry-run"]):
        done = subprocess.run(
            [sys.executable, "-m", "tfgpu", *argv],
            capture_output=True,
            text=True,
            cwd=sandbox,
            env={**clean, "HOME": str(home)},
            timeout=120,
        )
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr


def test_an_unwritable_log_directory_is_reported_not_raised(cli, build, sandbox, monkeypatch, tmp_path):
    (sandbox / "logs").write_text("a file where the log directory should be\n")
    fallback = tmp_path / "tmp"  # where the logs go instead: the test's own directory, not the user's $TMPDIR
    fallback.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(fallback))
    done = build(sandbox / "env")
    assert done.code == 0 and "log directory cannot be written" in done.err
    assert list(fallback.glob("tfgpu-*.log"))


def test_jupyter_data_dir_that_is_a_file_is_refused_before_building(cli, build, sandbox, monkeypatch):
    (sandbox / "jupyter").write_text("not a directory\n")
    before = snapshot(sandbox)
    done = build(sandbox / "env", "--jupyter")
    assert (done.code, done.error) == (3, "jupyter-dir-unusable")
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []


@pytest.mark.parametrize("command", [["bundle", "--platform", "linux-64"], ["lock", "--platform", "linux-64"]])
@pytest.mark.parametrize("what", ["existing-file", "directory"])
def test_output_paths_of_the_wrong_kind(cli, sandbox, command, what):
    target = sandbox / "out"
    if what == "existing-file":
        target.write_text("mine\n")
    else:
        target.mkdir()
        (target / "mine.txt").write_text("mine\n")
    before = snapshot(sandbox)
    done = cli(
        *command,
        "--tf",
        "2.21",
        "--no-detect",
        "-o",
        str(target),
        "--json",
        env={"TFGPU_INDEX_URL": "http://127.0.0.1:9/simple", "UV_OFFLINE": "1"},
    )
    expected = {
        ("bundle", "existing-file"): "bad-output",
        ("bundle", "directory"): "target-not-empty",
        ("lock", "existing-file"): None,
        ("lock", "directory"): "bad-output",
    }[(command[0], what)]
    if expected is None:  # a lock may overwrite a file (its own, regenerated); here the index is dead
        assert done.code in (1, 3)
    else:
        assert (done.code, done.error) == (3, expected)
        assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []


# --- what -o points at, or holds, is not the tool's to follow -------------------------------------
# A checkout someone else prepared may hold links where an export or a lock will be written. The
# tool writes each file through a fresh temporary beside it and renames it into place, so a link
# is replaced, never written through; a linked *directory* inside -o stops the export before it
# writes anything.


def _victim(sandbox):
    victim = sandbox / "victim"
    victim.mkdir()
    (victim / "bashrc").write_text("# mine\n")
    (victim / "bashrc").chmod(0o600)
    return victim


def test_a_link_where_an_export_writes_a_file_is_replaced_not_followed(cli, sandbox):
    victim = _victim(sandbox)
    out = sandbox / "out"
    out.mkdir()
    (out / "install-tf.sh").symlink_to(victim / "bashrc")
    single = sandbox / "run.sh"
    single.symlink_to(victim / "bashrc")
    before = snapshot(victim)
    # A link the export did not make is not its file to replace: refused, unless --force.
    refused = cli("script", "--tf", "2.16.1", "--format", "slurm", "-o", str(out), "--no-detect", "--json")
    assert (refused.code, refused.error) == (3, "output-not-ours") and (out / "install-tf.sh").is_symlink()
    slurm = cli("script", "--tf", "2.16.1", "--format", "slurm", "-o", str(out), "--no-detect", "--json", "--force")
    bash = cli("script", "--tf", "2.16.1", "--format", "bash", "-o", str(single), "--no-detect", "--json")
    assert (slurm.code, bash.code) == (0, 0), slurm.out + bash.out
    assert changed(before, snapshot(victim)) == [] and (victim / "bashrc").read_text() == "# mine\n"
    for written in (out / "install-tf.sh", single):
        assert not written.is_symlink() and written.read_text().startswith("#!")
    assert not [p.name for p in [*out.rglob("*"), *sandbox.glob(".*")] if p.name.endswith(".tmp")]


def test_a_linked_directory_inside_the_export_directory_stops_it_before_anything_is_written(cli, sandbox):
    victim = _victim(sandbox)
    out = sandbox / "out"
    out.mkdir()
    (out / "tfgpu").symlink_to(victim)  # the export writes tfgpu/check_env.py ...
    before = snapshot(sandbox)
    done = cli("script", "--tf", "2.16.1", "--format", "slurm", "-o", str(out), "--no-detect", "--json")
    assert (done.code, done.error) == (3, "bad-output") and "symbolic link" in done.out
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []


def test_a_directory_where_an_export_writes_a_file_is_a_clear_error(cli, sandbox):
    out = sandbox / "out"
    (out / "install-tf.sh").mkdir(parents=True)
    before = snapshot(sandbox)
    done = cli("script", "--tf", "2.16.1", "--format", "slurm", "-o", str(out), "--no-detect", "--json")
    assert (done.code, done.error) == (3, "bad-output")
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []


def test_a_full_disk_half_way_through_an_export_leaves_whole_files_and_no_traceback(cli, sandbox, monkeypatch):
    import errno

    out = sandbox / "out"
    first = cli("script", "--tf", "2.16.1", "--format", "slurm", "-o", str(out), "--no-detect", "--json")
    assert first.code == 0
    old = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    real_replace, calls = os.replace, []

    def replace(source, target, **at):
        calls.append(target)
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_replace(source, target, **at)

    monkeypatch.setattr(os, "replace", replace)
    done = cli("script", "--tf", "2.21", "--format", "slurm", "-o", str(out), "--no-detect", "--json")
    assert (done.code, done.error) == (1, "disk-full") and "No space left" in done.out
    assert "Traceback" not in done.out
    for path in out.rglob("*"):
        assert not path.name.endswith(".tmp")
        if path in old:  # every file is the whole old one or the whole new one
            assert path.read_bytes() == old[path] or path.read_text().count("2.21") > 0


def test_a_link_where_a_lock_is_written_is_replaced_not_followed(cli, sandbox, lock_channel, lock_index):
    victim = _victim(sandbox)
    lock = sandbox / "conda-lock.yml"
    lock.symlink_to(victim / "bashrc")
    before = snapshot(victim)
    done = cli(
        "lock",
        "--tf",
        "2.13",
        "--mode",
        "conda",
        "--python",
        PY,
        "--no-detect",
        "--platform",
        "linux-64",
        "--channel",
        str(lock_channel),
        "-o",
        str(lock),
        "--json",
        env={"TFGPU_INDEX_URL": lock_index},
    )
    assert done.code == 0, done.out
    assert changed(before, snapshot(victim)) == [] and not lock.is_symlink() and "tfgpu" in lock.read_text()


def test_a_link_where_a_pip_lock_and_its_pylock_are_written_is_replaced_not_followed(cli, sandbox, local_wheels):
    import localindex

    victim = _victim(sandbox)
    lock = sandbox / "team.txt"
    lock.symlink_to(victim / "bashrc")
    (sandbox / "pylock.linux-64.toml").symlink_to(victim / "bashrc")
    before = snapshot(victim)
    with localindex.Server(localindex.build_index(local_wheels, sandbox / "index")) as url:
        done = cli(
            "lock",
            "--tf",
            "2.21",
            "--mode",
            "pip",
            "--python",
            "3.11",
            "--platform",
            "linux-64",
            "--no-detect",
            "-o",
            str(lock),
            "--json",
            env={"TFGPU_INDEX_URL": url},
        )
    assert done.code == 0, done.out
    assert changed(before, snapshot(victim)) == []
    assert not lock.is_symlink() and not (sandbox / "pylock.linux-64.toml").is_symlink()


def test_a_link_planted_in_a_bundle_being_resumed_is_refused(cli, sandbox):
    from tfgpu.lock.bundle.steps import PARTIAL

    victim = _victim(sandbox)
    out = sandbox / "bundle"
    out.mkdir()
    (out / PARTIAL).write_text("in progress\n")
    (out / "install.sh").symlink_to(victim / "bashrc")
    before = snapshot(sandbox)
    done = cli(
        "bundle",
        "--tf",
        "2.21",
        "--platform",
        "linux-64",
        "--no-detect",
        "-o",
        str(out),
        "--json",
        env={"TFGPU_INDEX_URL": "http://127.0.0.1:9/simple", "UV_OFFLINE": "1"},
    )
    assert (done.code, done.error) == (3, "bad-output") and "symbolic link" in done.out
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []
