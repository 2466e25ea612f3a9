"""Hostile files at every surface the tool reads (``tfgpu.doors.untrusted``, the one reader): a FIFO in
place of the file (reading one blocks forever), a link to ``/dev/zero`` (never ends), a sparse file
far over the cap, 200,000 levels of nesting (the parsers recurse), YAML aliases that expand to 10^9
nodes, bytes that are not UTF-8, and the wrong types. Each case runs the command that reads the
surface in this process under a 20 s alarm (the door opens without blocking; were a read ever to
block again, the alarm ends it and the case fails), and asserts the documented exit code and error code,
no traceback, and nothing changed outside what the tool itself keeps (cache, logs).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import run_tool

from hostile.conftest import changed, no_traceback, snapshot

DEEP = 200_000
HAZARDS = ("fifo", "dev-zero", "huge", "deep", "aliases", "not-utf8", "wrong-types")
TOOL_STATE = ("cache", "logs", "envs/.")  # what the tool keeps for itself in the sandbox


def deep_json() -> str:
    return "[" * DEEP + "]" * DEEP


def billion_laughs() -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, 9):
        prior = chr(ord("a") + level - 1)
        lines.append(f"{chr(ord('a') + level)}: &{chr(ord('a') + level)} [{', '.join(['*' + prior] * 9)}]")
    return "\n".join(lines) + "\n"


@dataclass
class Surface:
    """One file the tool reads: where it goes, the command that reads it, and the expected outcome."""

    name: str
    path: str
    """Where the hostile file goes, relative to the sandbox."""
    argv: tuple[str, ...]
    expected: dict[str, tuple[int, str]]
    """hazard -> (exit code, error code); "" where the tool goes on without the file (exit as given)."""
    content: dict[str, str | bytes] = field(default_factory=dict)
    """hazard -> what the file holds (deep, aliases, not-utf8, wrong-types)."""
    setup: Callable[[Path, pytest.FixtureRequest], None] | None = None
    """What the surface needs in the sandbox first (given the test's request, for a fixture)."""
    env: dict[str, str] = field(default_factory=dict)
    """Variables naming paths in the sandbox ("" unsets the variable)."""


def fake_env(root: Path) -> None:
    """A directory shaped like a Python env (its python is this interpreter), cheap to make."""
    (root / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages").mkdir(parents=True)
    (root / "bin").mkdir()
    (root / "bin" / "python").symlink_to(sys.executable)


def json_content(wrong: str) -> dict[str, str | bytes]:
    return {"deep": deep_json(), "not-utf8": b'{"tool": "tfgpu-install\xff"}', "wrong-types": wrong}


def toml_content(wrong: str, prefix: str = "") -> dict[str, str | bytes]:
    return {
        "deep": prefix + "tf = " + "[" * DEEP + "]" * DEEP + "\n",
        "not-utf8": prefix.encode() + b'tf = "2.21\xff"\n',
        "wrong-types": prefix + wrong,
    }


YAML = {
    "deep": deep_json(),
    "aliases": billion_laughs(),
    "not-utf8": b"version: 1\nmetadata: \xff\n",
    "wrong-types": "- version\n- 1\n",
}
PIP_LOCK = {
    "deep": "# tfgpu-lock: " + deep_json() + "\nx==1\n",
    "not-utf8": b"# tfgpu-lock: {}\nx==1 \xff\n",
    "wrong-types": "# tfgpu-lock: "
    + json.dumps({"tool": "tfgpu-install", "format": 1, "mode": "pip", "platform": ["linux-64"], "resolution": "2.21"})
    + "\nx==1\n",
}
PIP_LOCK_EXPECTED = {
    "fifo": (2, "lock-unreadable"),
    "dev-zero": (2, "lock-unreadable"),
    "huge": (2, "lock-unreadable"),
    "not-utf8": (2, "lock-unreadable"),
    "deep": (2, "lock-malformed"),
    "wrong-types": (2, "lock-malformed"),
}
TARGET = (
    "--tf",
    "2.21",
    "--mode",
    "pip",
    "--python",
    "3.11",
    "--os",
    "linux",
    "--arch",
    "x86_64",
    "--driver",
    "580",
    "--gpu-cc",
    "8.0",
    "--no-detect",
    "--offline",
)


def every(outcome: tuple[int, str], *, but: dict | None = None) -> dict[str, tuple[int, str]]:
    return {hazard: outcome for hazard in HAZARDS if hazard != "aliases"} | (but or {})


@pytest.fixture(scope="module")
def venv_template(tmp_path_factory) -> Path:
    """A real venv made by Python's ``venv`` once for the module (each is an interpreter start), copied
    where a case needs one."""
    prefix = tmp_path_factory.mktemp("venv-template") / "V"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True, timeout=60)
    return prefix


def _journal_env(sandbox: Path, request: pytest.FixtureRequest) -> None:
    """A real venv (repair asks its interpreter) that seems to hold TensorFlow: a copy of the
    module's, which runs as a venv made in place (its interpreter finds its prefix by where it is)."""
    shutil.copytree(request.getfixturevalue("venv_template"), sandbox / "V", symlinks=True)
    site = next((sandbox / "V" / "lib").glob("python3*/site-packages"))
    info = site / "tensorflow-2.21.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tensorflow\nVersion: 2.21.0\n")
    (sandbox / "V" / "etc" / "tfgpu").mkdir(parents=True)


def _listed_env(sandbox: Path, _request) -> None:
    fake_env(sandbox / "envs" / "V")


def _marker_env(sandbox: Path, _request) -> None:
    fake_env(sandbox / "M")


def _staging(sandbox: Path, _request) -> None:
    (sandbox / ".S.tfgpu-staging").mkdir()


def _bundle(sandbox: Path, _request) -> None:
    (sandbox / "B").mkdir()


def _warm_cache(sandbox: Path, _request) -> None:
    """Run plan once so the parsed-data cache exists (in this process: the tool writes the file as
    a process of its own would); the hostile file then replaces it."""
    done = run_tool("plan", "--tf", "2.21", "--no-detect", "--json")
    assert done.returncode == 0, done.stderr
    (cached,) = (sandbox / "cache" / "data").glob("tables-*.bin")
    (sandbox / "cache-path").write_text(str(cached.relative_to(sandbox)))


SURFACES = [
    Surface(
        "bundle.json",
        "B/bundle.json",
        ("create", "--from-bundle", "B", "--prefix", "P"),
        every((3, "bundle-incomplete"), but={"wrong-types": (3, "bundle-corrupt")}),
        json_content("[]"),
        _bundle,
    ),
    Surface(
        "conda-lock-check",
        "conda-lock.yml",
        ("lock", "--check", "conda-lock.yml"),
        every((3, "lock-corrupt"), but={"aliases": (3, "lock-corrupt")}),
        YAML,
    ),
    Surface(
        "conda-lock-create",
        "conda-lock.yml",
        ("create", "--from-lock", "conda-lock.yml", "--prefix", "P"),
        every((3, "lock-corrupt"), but={"aliases": (3, "lock-corrupt")}),
        YAML,
    ),
    Surface(
        "pip-lock-check",
        "requirements.lock.txt",
        ("lock", "--check", "requirements.lock.txt"),
        PIP_LOCK_EXPECTED,
        PIP_LOCK,
    ),
    Surface(
        "pip-lock-create",
        "requirements.lock.txt",
        ("create", "--from-lock", "requirements.lock.txt", "--prefix", "P"),
        PIP_LOCK_EXPECTED,
        PIP_LOCK,
    ),
    Surface(
        "--project",
        "team.toml",
        ("plan", "--project", "team.toml", "--tf", "2.21", "--no-detect"),
        every((2, "bad-project-file")),
        toml_content('tf = ["2.21"]\n'),
    ),
    # Found by looking, not named: only a regular file is taken for one (a FIFO or device is no project file).
    Surface(
        "tfgpu.toml",
        "tfgpu.toml",
        ("plan", "--tf", "2.21", "--no-detect"),
        every((2, "bad-project-file"), but={"fifo": (0, ""), "dev-zero": (0, "")}),
        toml_content('tf = ["2.21"]\n'),
        env={"TFGPU_PROJECT_FILE": ""},
    ),
    Surface(
        "pyproject.toml",
        "pyproject.toml",
        ("plan", "--tf", "2.21", "--no-detect"),
        every((2, "bad-project-file"), but={"fifo": (0, ""), "dev-zero": (0, "")}),
        toml_content('tf = ["2.21"]\n', "[tool.tfgpu]\n") | {"wrong-types": '[tool]\ntfgpu = "2.21"\n'},
        env={"TFGPU_PROJECT_FILE": ""},
    ),
    Surface(
        "TFGPU_DATA_DIR",
        "D/tensorflow.toml",
        ("plan", "--tf", "2.21", "--no-detect"),
        every((2, "bad-data")),
        toml_content('release = "2.21"\n'),
        lambda s, _request: (s / "D").mkdir(),
        {"TFGPU_DATA_DIR": "D"},
    ),
    Surface(
        "update-data overlay",
        "U/tensorflow-updates.toml",
        ("plan", "--tf", "2.21", "--no-detect"),
        every((1, "data-overlay-corrupt")),
        toml_content('release = "2.21"\n'),
        lambda s, _request: (s / "U").mkdir(),
        {"TFGPU_USER_DATA_DIR": "U"},
    ),
    Surface(
        "marker-remove",
        "M/tfgpu-env.json",
        ("remove", "--prefix", "M"),
        every((3, "not-a-tfgpu-env")),
        json_content("[]"),
        _marker_env,
    ),
    Surface("marker-list", "envs/V/tfgpu-env.json", ("list",), every((0, "")), json_content("[]"), _listed_env),
    Surface(
        "staging record",
        ".S.tfgpu-staging/.tfgpu-staging.json",
        ("create", "--prefix", "S", *TARGET),
        every((3, "foreign-leftover")),
        json_content("[]"),
        _staging,
    ),
    Surface(
        "repair journal",
        "V/etc/tfgpu/repair.json",
        ("repair", "--prefix", "V", "--undo", "--yes"),
        every((3, "repair-journal-foreign")),
        json_content("[]"),
        _journal_env,
    ),
    Surface(
        "parsed-data cache",
        "@cache",
        ("plan", "--tf", "2.21", "--no-detect"),
        every((0, "")),
        {"deep": b"\0" * 64, "not-utf8": b"\xff" * 64, "wrong-types": b"TFGPU"},
        _warm_cache,
    ),
    Surface(
        "doctor --log",
        "train.log",
        ("doctor", "--log", "train.log"),
        # Read like standard input, bounded: a FIFO nobody writes to is an empty log, /dev/zero a cut one.
        {"fifo": (0, ""), "dev-zero": (0, ""), "huge": (0, ""), "not-utf8": (0, "")},
        {"not-utf8": b"Epoch 1 \xff\xfe\n"},
    ),
]


def _place(sandbox: Path, surface: Surface, hazard: str) -> Path:
    relative = surface.path
    if relative == "@cache":
        relative = (sandbox / "cache-path").read_text()
    path = sandbox / relative
    path.unlink(missing_ok=True)
    if hazard == "fifo":
        os.mkfifo(path)
    elif hazard == "dev-zero":
        path.symlink_to("/dev/zero")
    elif hazard == "huge":
        path.write_bytes(b"")
        os.truncate(path, 5 << 30)  # sparse: 5 GiB that take no disk, over every cap
    else:
        content = surface.content[hazard]
        path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


CASES = [
    pytest.param(surface, hazard, id=f"{surface.name}-{hazard}")
    for surface in SURFACES
    for hazard in HAZARDS
    if hazard in surface.expected
]


class Hung(Exception):
    pass


def run_guarded(argv, env: dict[str, str], seconds: int = 20) -> subprocess.CompletedProcess:
    """The tool in this process (no interpreter start per case), stopped by SIGALRM if it blocks."""
    import signal

    def alarm(*_):
        raise Hung(f"{' '.join(argv)} did not return within {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        return run_tool(*argv, env=env)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize(("surface", "hazard"), CASES)
def test_a_hostile_file_is_refused_promptly_with_its_code(sandbox, surface, hazard, request):
    if surface.setup:
        surface.setup(sandbox, request)
    _place(sandbox, surface, hazard)
    before = snapshot(sandbox)
    env = {**os.environ, **{k: str(sandbox / v) for k, v in surface.env.items() if v}}
    for key in (k for k, v in surface.env.items() if not v):
        env.pop(key, None)
    try:
        done = run_guarded([*surface.argv, "--json"], env)
    except Hung as hung:
        pytest.fail(f"{hung} with a {hazard} at {surface.path}")
    err = done.stderr
    assert "Traceback" not in err, err
    try:
        code = json.loads(done.stdout)["error"]["code"] if done.returncode else ""
    except (ValueError, KeyError, TypeError):
        code = "?"
    assert (done.returncode, code) == surface.expected[hazard], done.stdout[-2000:] + err
    assert changed(before, snapshot(sandbox), TOOL_STATE) == []


@pytest.mark.parametrize("hazard", [h for h in HAZARDS if h != "aliases"])
def test_doctor_reads_a_hostile_marker_as_no_marker(sandbox, hazard):
    """doctor reports on any env; a marker it cannot use is no marker (the same exit as without one),
    never a hang or a traceback."""
    fake_env(sandbox / "M")
    argv = ["doctor", "--prefix", "M", "--json"]
    without = run_guarded(argv, dict(os.environ))
    surface = next(s for s in SURFACES if s.name == "marker-remove")
    _place(sandbox, surface, hazard)
    before = snapshot(sandbox)
    done = run_guarded(argv, dict(os.environ))
    assert "Traceback" not in done.stderr
    assert done.returncode == without.returncode
    assert changed(before, snapshot(sandbox), TOOL_STATE) == []


WHEEL = {
    "filename": "tensorflow-2.99.0-cp311-cp311-manylinux_2_17_x86_64.whl",
    "packagetype": "bdist_wheel",
    "url": "https://files.example/tf.whl",
    "size": 1,
    "upload_time_iso_8601": "2026-01-01T00:00:00Z",
    "requires_python": ">=3.9",
}
ANSWERS = {
    "deep": deep_json().encode(),
    "not-utf8": b'{"releases": {"2.99.0": []}, "info": "\xff"}',
    "not-json": b"<html>maintenance</html>",
    "releases-is-a-string": json.dumps({"releases": "x"}).encode(),
    "size-is-a-string": json.dumps({"releases": {"2.99.0": [WHEEL | {"size": "big"}]}}).encode(),
    "file-is-a-string": json.dumps({"releases": {"2.99.0": ["tensorflow.whl"]}}).encode(),
    "a-list": b"[]",
}


@pytest.mark.parametrize("answer", list(ANSWERS))
def test_a_malformed_answer_from_the_index_is_update_failed(sandbox, answer):
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    body = ANSWERS[answer]

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the http.server name
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    before = snapshot(sandbox)
    try:
        done = run_guarded(
            ["update-data", "--index", f"http://127.0.0.1:{server.server_port}/pypi", "--json"],
            {**os.environ, "TFGPU_USER_DATA_DIR": str(sandbox / "U")},
            60,
        )
    finally:
        server.shutdown()
        server.server_close()
    assert "Traceback" not in done.stderr
    assert (done.returncode, json.loads(done.stdout)["error"]["code"]) == (1, "update-failed"), done.stdout
    assert not (sandbox / "U").exists()
    assert changed(before, snapshot(sandbox), TOOL_STATE) == []


PY = f"{sys.version_info.major}.{sys.version_info.minor}"


# -- YAML scalars that PyYAML's safe constructor turns into ValueError (not YAMLError) ----------
# untrusted.parse_yaml catches yaml.YAMLError and RecursionError only; a timestamp out of range, an
# explicit !!int / !!float tag on a non-number, or an int past Python's 4300-digit limit raise
# ValueError from the constructor and escape as a traceback.

YAML_VALUE_ERRORS = {
    "bad-timestamp": "version: 2\nmetadata: {created: 2020-99-99}\n",
    "tagged-int": "version: !!int abc\n",
    "tagged-float": "version: !!float abc\n",
    "long-int": "version: " + "9" * 5000 + "\n",
}


@pytest.mark.parametrize("content", YAML_VALUE_ERRORS.values(), ids=list(YAML_VALUE_ERRORS))
@pytest.mark.parametrize("command", ["check", "create"])
def test_a_conda_lock_whose_scalar_does_not_construct_is_lock_corrupt(cli, sandbox, content, command):
    lock = sandbox / "conda-lock.yml"
    lock.write_text(content)
    before = snapshot(sandbox)
    argv = (
        ("lock", "--check", str(lock))
        if command == "check"
        else ("create", "--from-lock", str(lock), "--prefix", str(sandbox / "P"), "--no-verify")
    )
    done = no_traceback(cli, *argv, "--json")
    assert (done.code, done.error) == (3, "lock-corrupt"), done.out
    assert changed(before, snapshot(sandbox), ("logs", "cache")) == []


# -- TOML integers past Python's int-string limit ------------------------------------------------
# tomllib raises ValueError ("Exceeds the limit (4300 digits)"), not TOMLDecodeError; parse_toml
# catches only the latter (and RecursionError).

HUGE_INT = "x = " + "9" * 5000 + "\n"


@pytest.mark.parametrize("where", ["--project", "tfgpu.toml-in-parent", "pyproject.toml", "TFGPU_DATA_DIR"])
def test_a_toml_file_with_a_huge_integer_is_its_kinds_error(cli, sandbox, where, monkeypatch):
    env = {}
    argv = ["plan", "--tf", "2.21", "--no-detect", "--json"]
    expected = (2, "bad-project-file")
    if where == "--project":
        (sandbox / "team.toml").write_text(HUGE_INT)
        argv += ["--project", str(sandbox / "team.toml")]
    elif where == "tfgpu.toml-in-parent":
        monkeypatch.delenv("TFGPU_PROJECT_FILE", raising=False)
        (sandbox / "tfgpu.toml").write_text(HUGE_INT)
        (sandbox / "sub").mkdir()
        monkeypatch.chdir(sandbox / "sub")
    elif where == "pyproject.toml":
        monkeypatch.delenv("TFGPU_PROJECT_FILE", raising=False)
        (sandbox / "pyproject.toml").write_text("[tool.tfgpu]\n" + HUGE_INT)
    else:
        (sandbox / "D").mkdir()
        (sandbox / "D" / "tensorflow.toml").write_text(HUGE_INT)
        env = {"TFGPU_DATA_DIR": str(sandbox / "D")}
        expected = (2, "bad-data")
    before = snapshot(sandbox)
    done = no_traceback(cli, *argv, env=env)
    assert (done.code, done.error) == expected, done.out
    assert changed(before, snapshot(sandbox), ("logs", "cache")) == []


# -- a proving marker with a wrong-typed field ---------------------------------------------------
# envs/listing.py:_health does `wanted not in found` (a set) with the marker's "tensorflow" as it is:
# a list or a table there is "unhashable type" — `list` (and `list --json`) crash on one env.


@pytest.mark.parametrize("value", [["2.21.0"], {"a": 1}], ids=["list", "table"])
def test_list_reports_an_env_whose_marker_records_a_wrong_typed_tensorflow(cli, sandbox, value):
    prefix = sandbox / "envs" / "V"
    site = prefix / "lib" / f"python{PY}" / "site-packages" / "tensorflow-2.21.0.dist-info"
    site.mkdir(parents=True)
    (site / "METADATA").write_text("Name: tensorflow\nVersion: 2.21.0\n")
    (prefix / "bin").mkdir()
    (prefix / "bin" / "python").symlink_to(sys.executable)
    (prefix / "tfgpu-env.json").write_text(
        json.dumps(
            {
                "tool": "tfgpu-install",
                "marker_format": 2,
                "id": "0" * 32,
                "prefix": os.path.realpath(prefix),
                "owned": {"kernels": []},
                "tensorflow": value,
            }
        )
    )
    before = snapshot(sandbox)
    done = no_traceback(cli, "list", "--json")
    assert done.code == 0, done.out
    assert changed(before, snapshot(sandbox), ("logs", "cache")) == []


# -- a local channel (--channel DIR, a team's file:// mirror) whose repodata.json is a FIFO -------
# The rattler child reads the channel's index with no bound: a FIFO nobody writes to blocks it for
# ever (the parent waits on the child). A bundle holds (its manifest lists repodata.json: a FIFO
# there is "missing"), a plain --channel directory does not.


def test_a_fifo_in_a_local_channel_does_not_hang_lock(tool, sandbox):
    import subprocess

    channel = sandbox / "ch"
    (channel / "linux-64").mkdir(parents=True)
    (channel / "noarch").mkdir()
    (channel / "noarch" / "repodata.json").write_text("{}")
    os.mkfifo(channel / "linux-64" / "repodata.json")
    try:
        done = tool(
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
            str(channel),
            "-o",
            str(sandbox / "conda-lock.yml"),
            "--json",
            timeout=45,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("lock hung reading a FIFO in the --channel directory")
    assert (done.code, done.error) == (2, "bad-channel"), done.out
