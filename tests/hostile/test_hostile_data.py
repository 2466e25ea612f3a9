"""Data never becomes options: a data overlay (``TFGPU_DATA_DIR``) or the ``update-data`` overlay
whose table keys or values look like uv/pip options, hold a line break, a URL requirement or a
confusable letter is refused when the table is read, before anything is resolved, installed or
written; and the requirement door itself refuses the same texts wherever they come from."""

from __future__ import annotations

import marshal
import re
from importlib.resources import files

import pytest

from .conftest import changed, no_traceback, snapshot

SHIPPED = files("tfgpu.data").joinpath("tensorflow.toml").read_text("utf-8")
PIP_CUDA = files("tfgpu.data").joinpath("pip_cuda.toml").read_text("utf-8")
FIRST_PIN = '"nvidia-cublas-cu12" = "==12.2.5.6"\n'
GPU_PACKAGE = 'gpu_package = "tensorflow"\n'
MARK = '[[release]]\nversion = "2.15.0"\n'


def block_2_15(text: str = SHIPPED) -> str:
    return text.split(MARK, 1)[1].split("\n[[release]]\n", 1)[0]


def with_2_15(old: str, new: str) -> str:
    """tensorflow.toml with one line of the 2.15.0 row replaced."""
    head, tail = SHIPPED.split(MARK, 1)
    block, sep, rest = tail.partition("\n[[release]]\n")
    assert block.count(old) == 1, old
    return head + MARK + block.replace(old, new) + sep + rest


HOSTILE_ROWS = {
    "option-key": with_2_15(FIRST_PIN, FIRST_PIN + '"--extra-index-url=http://10.9.9.9/simple" = ">=1"\n'),
    "newline-key": with_2_15(FIRST_PIN, FIRST_PIN + '"nvidia-nccl-cu11\\n-e /etc" = ">=1"\n'),
    "url-key": with_2_15(FIRST_PIN, FIRST_PIN + '"evil @ file:///etc/passwd" = ""\n'),
    "confusable-key": with_2_15(FIRST_PIN, FIRST_PIN + '"nvidia-cudnn-cu1\u0662" = ">=1"\n'),
    "option-value": with_2_15(FIRST_PIN, '"nvidia-cublas-cu12" = "--index-url=http://10.9.9.9/simple"\n'),
    "spaced-value": with_2_15(FIRST_PIN, '"nvidia-cublas-cu12" = ">=1 --no-deps"\n'),
    "gpu-package-option": with_2_15(GPU_PACKAGE, GPU_PACKAGE.replace('"tensorflow"', '"--no-index"')),
    "gpu-package-confusable": with_2_15(GPU_PACKAGE, GPU_PACKAGE.replace('"tensorflow"', '"tensorfl\u043ew"')),
    "extra-option": with_2_15('cuda_extra = "and-cuda"', 'cuda_extra = "-e"'),
    "platform-key": with_2_15("[release.wheels.linux_x86_64]", '[release.wheels."linux_x86_64 --pre"]'),
}


@pytest.fixture
def overlay(sandbox):
    """``overlay(name, text)``: a TFGPU_DATA_DIR holding one replaced table; returns the env to pass."""

    def make(name: str, text: str) -> dict[str, str]:
        directory = sandbox.parent / "overlay"
        directory.mkdir(exist_ok=True)
        (directory / name).write_text(text, "utf-8")
        return {"TFGPU_DATA_DIR": str(directory)}

    return make


COMMANDS = {
    "plan": ["plan", "--tf", "2.15.0", "--os", "linux", "--arch", "x86_64", "--no-detect", "--json"],
    "create": [
        "create",
        "--tf",
        "2.15.0",
        "--os",
        "linux",
        "--no-detect",
        "--driver",
        "550.54",
        "--gpu-cc",
        "8.0",
        "--no-verify",
        "--offline",
        "--prefix",
        "env",
        "--json",
    ],
    "script": [
        "script",
        "--format",
        "bash",
        "--tf",
        "2.15.0",
        "--os",
        "linux",
        "--no-detect",
        "--driver",
        "550.54",
        "--gpu-cc",
        "8.0",
        "-o",
        "install.sh",
        "--json",
    ],
}


# Each hostile row is its own check of the table's schema, which every command passes through
# when the table is read, before it does anything else: each row is read by one of the commands in
# turn (every command meets several rows), not by all three.
ROW_AND_COMMAND = [(case, list(COMMANDS)[i % len(COMMANDS)]) for i, case in enumerate(HOSTILE_ROWS)]


@pytest.mark.parametrize(
    "case, command", ROW_AND_COMMAND, ids=[f"{case}-{command}" for case, command in ROW_AND_COMMAND]
)
def test_a_hostile_overlay_row_is_bad_data_before_anything_runs(cli, sandbox, overlay, case, command):
    env = overlay("tensorflow.toml", HOSTILE_ROWS[case])
    before = snapshot(sandbox)
    done = cli(*COMMANDS[command], env=env)
    assert (done.code, done.error) == (2, "bad-data"), done.out
    assert "tensorflow.toml" in done.out and "release[" in done.out  # the file and the key, named
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []
    assert not (sandbox / "env").exists() and not (sandbox / "install.sh").exists()


@pytest.mark.parametrize(
    "package",
    [
        "--no-index",
        "nvidia-cudnn-cu11 @ file:///etc/passwd",
        "nvidia-cudnn-cu11==8.6.0.163\n-e /etc",
        "nvidia-cudnn-cu11==8.6; os_name=='nt'",
        "nvidia-cudnn-cu1\u0131==8.6",
    ],
)
def test_a_hostile_pip_cuda_pin_is_bad_data(cli, sandbox, overlay, package):
    first = re.search(r'packages = \[\s*"([^"]+)"', PIP_CUDA)
    text = PIP_CUDA.replace(f'"{first.group(1)}"', f'"{package}"'.replace("\n", "\\n"), 1)
    before = snapshot(sandbox)
    done = cli("plan", "--tf", "2.11", "--os", "linux", "--no-detect", "--json", env=overlay("pip_cuda.toml", text))
    assert (done.code, done.error) == (2, "bad-data"), done.out
    assert "pip_cuda.toml" in done.out and "packages" in done.out
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []


@pytest.mark.parametrize("case", ["option-key", "newline-key", "gpu-package-option"])
def test_the_update_overlay_with_a_hostile_row_is_data_overlay_corrupt(cli, sandbox, case):
    """The same rows in the overlay update-data writes (in the user data dir) are that file's
    documented error, naming it and the way forward."""
    data = sandbox.parent / "user-data"
    data.mkdir()
    block = block_2_15(HOSTILE_ROWS[case])
    path = data / "tensorflow-updates.toml"
    path.write_text('fetched = "2027-01-01"\n\n[[release]]\nversion = "2.99.0"\n' + block, "utf-8")
    before = snapshot(sandbox)
    done = cli("plan", "--tf", "2.21", "--os", "linux", "--no-detect", "--json", env={"TFGPU_USER_DATA_DIR": str(data)})
    assert (done.code, done.error) == (1, "data-overlay-corrupt"), done.out
    assert str(path) in done.out and "update-data" in done.out
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []


HOSTILE_REQUIREMENTS = [
    "--extra-index-url=http://10.9.9.9/simple",
    "-e /etc",
    "--no-index",
    "tensorflow==2.15\n-e /etc",
    "tensorflow==2.15\r--pre",
    "evil @ file:///etc/passwd",
    "tensorfl\u043ew==2.15",
    "nump\u0131",
    " tensorflow",
    "tensorflow==2.15 --no-deps",
    "tensorflow; os_name == 'nt'",
    "\x1b[31mtensorflow",
    "",
]


@pytest.mark.parametrize("text", HOSTILE_REQUIREMENTS)
def test_the_door_refuses_requirements_that_are_options_urls_or_confusables(text):
    from tfgpu.doors import requirements
    from tfgpu.errors import UsageError

    with pytest.raises(UsageError) as caught:
        requirements.canonical(text, what="A test's requirement")
    assert caught.value.code == "bad-requirement" and "A test's requirement" in caught.value.message


@pytest.mark.parametrize(
    ("name", "spec"),
    [
        ("--no-index", ""),
        ("tensorflow", "--pre"),
        ("tensorflow", "==1\n-e ."),
        ("tensorflow==1", ""),
        ("a b", ""),
        ("tensorflow", "1.0"),
        ("tensorflow", ">=1 ; os_name=='nt'"),
    ],
)
def test_the_door_checks_name_and_spec_each_on_its_own(name, spec):
    from tfgpu.doors import requirements
    from tfgpu.errors import UsageError

    with pytest.raises(UsageError):
        requirements.requirement(name, spec, what="A test's requirement")


@pytest.mark.parametrize(
    "text",
    [
        "--override-channels",
        "cudnn\n-c evil",
        "evil::cudnn",
        "cudnn >=9 --force",
        "CUDNN",
        "cudnn >=9 build x",
        "python 3.11.* \u2028",
    ],
)
def test_the_door_refuses_conda_specs_that_are_options_or_channels(text):
    from tfgpu.doors import requirements
    from tfgpu.errors import UsageError

    with pytest.raises(UsageError):
        requirements.match_spec(text, what="A test's spec")


def test_the_door_renders_the_canonical_form():
    from tfgpu.doors import requirements

    assert requirements.canonical("TensorFlow[and-cuda] == 2.15.0", what="t") == "TensorFlow[and-cuda]==2.15.0"
    assert (
        requirements.requirement("nvidia-cudnn-cu12", ">=9.3.0.75,<10.0", what="t")
        == "nvidia-cudnn-cu12<10.0,>=9.3.0.75"
    )
    assert requirements.match_spec("tensorflow ==2.17.0 cuda*", what="t") == "tensorflow ==2.17.0 cuda*"


_UNCHECKED: dict[tuple[str, bytes, str], bytes] = {}
"""Tables parsed with the schema switched off, by name, bytes and path (see :func:`unchecked_parse`)."""


def unchecked_parse(monkeypatch) -> None:
    """The schema switched off, and each table parsed once for the tests that switch it off.

    The suite keeps the parse of a set of tables for the next command that reads the same set
    (tests/conftest.py), but not a parse made with the schema replaced, so each such command
    parsed every shipped table again (most of what these tests cost). Here each table's bytes,
    the hostile table's included, are parsed by the tool's own ``parse`` the first time they are
    read and a copy of that parse is given each later time; the door under test reads the copy."""
    from tfgpu import data

    monkeypatch.setattr("tfgpu.data.schema.validate", lambda *args: None)
    parse = data.parse

    def parse_once(name: str, raw: bytes, where: str) -> dict:
        key = (name, raw, where)
        if key not in _UNCHECKED:
            _UNCHECKED[key] = marshal.dumps(parse(name, raw, where))
        return marshal.loads(_UNCHECKED[key])  # a copy the command may change

    monkeypatch.setattr(data, "parse", parse_once)


@pytest.mark.parametrize("case", ["option-key", "newline-key", "gpu-package-option", "option-value"])
@pytest.mark.parametrize("command", ["plan", "script"])
def test_the_door_holds_where_a_table_escaped_its_schema(cli, sandbox, overlay, monkeypatch, case, command):
    """The schema is the first check, not the only one: with it switched off (a forged parse cache,
    a table added without a schema), the requirement door still refuses the row."""
    unchecked_parse(monkeypatch)
    before = snapshot(sandbox)
    done = cli(*COMMANDS[command], env=overlay("tensorflow.toml", HOSTILE_ROWS[case]))
    assert (done.code, done.error) == (2, "bad-requirement"), done.out
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []
    assert not (sandbox / "install.sh").exists()


# -- the parsed-data cache: a checksum anyone can recompute ---------------------------------------
# A cache others could write (a shared TFGPU_CACHE_DIR, group-writable) is never read: a forged entry
# with a valid checksum and a table of the wrong shape is parsed again, and the command works. The
# user's own private cache is used as written (test_hostile_environment.py holds both sides).


def test_a_forged_parsed_data_cache_is_rebuilt_not_trusted(cli, sandbox):
    from tfgpu.data import _MAGIC, _digest

    first = cli("plan", "--tf", "2.21", "--no-detect", "--json")
    assert first.code == 0, first.out
    (cached,) = (sandbox / "cache" / "data").glob("tables-*.bin")
    blob = cached.read_bytes()
    tables = marshal.loads(blob[len(_MAGIC) + 32 :])
    tables["tensorflow.toml"] = marshal.dumps({"release": "not a list of tables"})
    payload = marshal.dumps(tables)
    cached.write_bytes(_MAGIC + _digest(payload).digest() + payload)
    cached.parent.chmod(0o775)  # a directory the group may write: someone else's bytes, maybe
    done = no_traceback(cli, "plan", "--tf", "2.21", "--no-detect", "--json")
    assert done.code == 0, done.out  # the cache is only a cache: one others could forge is parsed again


# -- log_signatures.toml from a data overlay ------------------------------------------------------
# The schema makes "example" optional (opt(Str())), but doctor/logs.py:signatures reads row["example"]:
# an overlay row without one is a KeyError. And the schema only checks that "pattern" compiles: a
# pattern with nested quantifiers backtracks exponentially on one short line of the log, so
# `doctor --log` hangs (docs/doctor-and-verify.md: "never ... a hang").

SIGNATURE = """[[signature]]
id = "x"
title = "t"
pattern = '''{pattern}'''
severity = "fail"
cause = "c"
fix = "f"
source = []
{extra}"""


@pytest.mark.parametrize("missing", ["example", "source"])
def test_an_overlay_signature_without_an_optional_key_is_read(cli, sandbox, missing):
    (sandbox / "D").mkdir()
    text = SIGNATURE.format(pattern="Cannot dlopen", extra="example = 'Cannot dlopen'\n")
    text = "\n".join(line for line in text.splitlines() if not line.startswith(missing + " ")) + "\n"
    (sandbox / "D" / "log_signatures.toml").write_text(text)
    (sandbox / "train.log").write_text("Cannot dlopen some GPU libraries.\n")
    done = no_traceback(
        cli, "doctor", "--log", str(sandbox / "train.log"), "--json", env={"TFGPU_DATA_DIR": str(sandbox / "D")}
    )
    assert done.code in (0, 1, 2), done.out


def test_an_overlay_signature_cannot_hang_doctor_log(tool, sandbox):
    import subprocess

    (sandbox / "D").mkdir()
    (sandbox / "D" / "log_signatures.toml").write_text(SIGNATURE.format(pattern="^(a+)+$", extra="example = 'aaa'\n"))
    (sandbox / "train.log").write_text("a" * 40 + "!\n")
    try:
        done = tool("doctor", "--log", "train.log", "--json", env={"TFGPU_DATA_DIR": str(sandbox / "D")}, timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail("doctor --log hung on a 41-byte log: the overlay's pattern backtracks exponentially")
    assert (done.code, done.error) == (2, "bad-data"), done.out


@pytest.mark.parametrize(
    "pattern",
    ["(a*)*", "(?:x+y?)*z", "(a?)+$", "(\\w{1,3}b)+", "a" * 1001],
    ids=["star-star", "group-plus-star", "optional-plus", "bounded-in-plus", "too-long"],
)
def test_an_overlay_signature_whose_pattern_could_run_away_is_bad_data(cli, sandbox, pattern):
    (sandbox / "D").mkdir()
    (sandbox / "D" / "log_signatures.toml").write_text(SIGNATURE.format(pattern=pattern, extra=""))
    (sandbox / "train.log").write_text("a" * 40 + "!\n")
    before = snapshot(sandbox)
    done = no_traceback(
        cli, "doctor", "--log", str(sandbox / "train.log"), "--json", env={"TFGPU_DATA_DIR": str(sandbox / "D")}
    )
    assert (done.code, done.error) == (2, "bad-data"), done.out
    assert "log_signatures.toml" in done.out
    assert changed(before, snapshot(sandbox), ("logs", "cache")) == []


def test_every_shipped_signature_pattern_passes_the_runaway_check():
    from tfgpu.data.checks import pattern_problem
    from tfgpu.resolver.tables import load_toml

    assert [row["id"] for row in load_toml("log_signatures.toml")["signature"] if pattern_problem(row["pattern"])] == []


# -- the parsed-data cache: an entry inside that does not decode -----------------------------------
# The digest covers the cache's outer form; each table (and arch_support.toml's [[fatbin]] part) is
# decoded only when a command reads it. An entry whose bytes lie about their lengths, or that decodes
# to no table at all, under a right digest, was a traceback from `plan`: it is a miss instead, every
# table parsed afresh and the cache rewritten.


@pytest.mark.parametrize(
    "entry, bytes_",
    [
        ("arch_support.toml:fatbin", b"\xff\xff not marshal"),
        ("arch_support.toml:fatbin", marshal.dumps([1, 2])),
        ("tensorflow.toml", b"\x00 not marshal"),
        ("tensorflow.toml", marshal.dumps([])),
        ("cuda.toml", None),  # the entry cut to half its length
    ],
)
def test_a_cache_entry_that_does_not_decode_is_parsed_afresh(cli, sandbox, entry, bytes_):
    from tfgpu.data import _MAGIC, _digest

    args = ("plan", "--tf", "2.21", "--json", "--os", "linux", "--driver", "580.65", "--gpu-cc", "9.0")
    cold = cli(*args)
    assert cold.code == 0, cold.out
    (cached,) = (sandbox / "cache" / "data").glob("tables-*.bin")
    good = cached.read_bytes()
    tables = marshal.loads(good[len(_MAGIC) + 32 :])
    tables[entry] = tables[entry][: len(tables[entry]) // 2] if bytes_ is None else bytes_
    payload = marshal.dumps(tables)
    cached.write_bytes(_MAGIC + _digest(payload).digest() + payload)
    from tfgpu import data

    data.clear()
    warm = no_traceback(cli, *args)
    assert (warm.code, warm.out) == (cold.code, cold.out)
    assert cached.read_bytes() == good  # rewritten


def test_a_cache_that_cannot_be_put_in_place_leaves_no_copy_behind(cli, sandbox):
    """A directory where the cache file goes: each run parsed the tables and left its half-megabyte
    temporary copy beside it, one more on every run."""
    first = cli("plan", "--tf", "2.21", "--no-detect", "--json")
    assert first.code == 0, first.out
    (cached,) = (sandbox / "cache" / "data").glob("tables-*.bin")
    cached.unlink()
    cached.mkdir()
    from tfgpu import data

    for _ in range(2):
        data.clear()
        assert no_traceback(cli, "plan", "--tf", "2.21", "--no-detect", "--json").code == 0
    assert sorted(p.name for p in cached.parent.iterdir()) == [cached.name]


def test_a_link_where_the_cache_directory_goes_is_not_written_through(cli, sandbox, tmp_path):
    """``<cache>/data`` a link to another directory: the cache is never read through it, and was
    written through it all the same, the directory it named closed to 0700 and a file put in it."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o755)
    elsewhere.chmod(0o755)
    (sandbox / "cache").mkdir(exist_ok=True)
    (sandbox / "cache" / "data").symlink_to(elsewhere)
    done = no_traceback(cli, "plan", "--tf", "2.21", "--no-detect", "--json")
    assert done.code == 0, done.out
    assert (elsewhere.stat().st_mode & 0o777, list(elsewhere.iterdir())) == (0o755, [])
