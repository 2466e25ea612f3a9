"""A lock's recorded resolution whose list fields (``requirements``, ``compute_capabilities``,
``companions``, ``conda_specs``) hold another type: a number, a boolean, a table. Each format's
reader checks the fields it writes, but a pip lock may carry a conda field and a conda lock a pip
one (anyone can recompute the checksum), and the record was built from them as they stood: a
number became ``tuple(5)``, a traceback. The one check both readers call refuses every such field
(``lock-malformed``, exit 2), whatever lock it is in, before anything reads it: nothing written.

The pip lock is forged from the tool's own renderer (its checksum recomputed); the conda lock is a
real one from tests/condachannel.py's channel and the suite's local index, edited and re-signed.
Every command runs in this process (``cli``, through ``no_traceback``): the exit code, the error's
code and what is printed are the subject, not a new interpreter, whose start and imports cost more
than the refusal.
"""

from __future__ import annotations

import json

import pytest
from conftest import LOOPBACK_HOSTS

from .conftest import changed, no_traceback, snapshot
from .test_hostile_locks import forged_pip_lock

HOSTILE = [5, True, 2.5, {"sm_80": 1}, "sm_80", [1], [None], [["x"]]]
"""What a list of text may be given as instead: each is refused, none iterated into the record."""


def _reforged(path, key: str, value) -> None:
    """The pip lock at ``path`` with its resolution's ``key`` set to ``value``, signed again. The
    renderer writes only well-formed records (a hostile ``companions`` would not render), so a
    stand-in list is rendered and swapped for ``value`` in the text, its checksum recomputed."""
    from tfgpu.lock.pip import lockfile as pip_lock

    lock = pip_lock.read(path)
    meta = {name: field for name, field in lock.meta.items() if name != "sha256"}
    meta["resolution"] = {**meta["resolution"], key: ["STAND-IN"]}
    text = pip_lock.render(meta, lock.body, str(path))
    hostile = {**meta, "resolution": {**meta["resolution"], key: value}}
    text = text.replace(pip_lock._digest(meta, lock.body), pip_lock._digest(hostile, lock.body))
    text = text.replace(f'"{key}":["STAND-IN"]', f'"{key}":' + json.dumps(value, separators=(",", ":")))
    assert json.dumps(value, separators=(",", ":")) in text
    path.write_text(text, encoding="utf-8")


@pytest.mark.parametrize("key", ["conda_specs", "compute_capabilities", "companions"])
@pytest.mark.parametrize("value", HOSTILE, ids=repr)
def test_a_pip_lock_whose_record_holds_a_list_field_of_another_type_is_refused(cli, sandbox, key, value):
    lock = sandbox / "tfgpu-lock.linux-64.txt"
    forged_pip_lock(lock)
    _reforged(lock, key, value)
    out = sandbox / "install.sh"
    before = snapshot(sandbox)
    for argv in (
        ("create", "--from-lock", str(lock), "--prefix", str(sandbox / "E"), "--dry-run", "--no-detect"),
        ("script", "--format", "bash", "--from-lock", str(lock), "-o", str(out)),
    ):
        done = no_traceback(cli, *argv, "--json")
        assert (done.code, done.error) == (2, "lock-malformed"), done.out + done.err
        assert key in json.loads(done.out)["error"]["message"]
    assert not out.exists()
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []


@pytest.mark.parametrize("key", ["compute_capabilities", "companions", "conda_specs"])
@pytest.mark.parametrize("value", [5, False, {"sm_80": 1}, [""], ["x\n--channel evil"]], ids=repr)
def test_a_conda_record_holding_a_list_field_of_another_type_is_refused(key, value):
    """The record alone (the reader's check is pure): what the real lock below goes through."""
    from test_lock_recorded import _conda_lock_with

    from tfgpu.errors import TfgpuError

    with pytest.raises(TfgpuError) as refused:
        _conda_lock_with(**{key: value}).resolution("linux-64")
    assert refused.value.code == "lock-malformed"


@pytest.mark.parametrize(("key", "value"), [("compute_capabilities", 5), ("conda_specs", ["python 3.10.*", " "])])
def test_a_real_conda_lock_whose_record_holds_a_hostile_list_is_refused(
    cli, sandbox, lock_channel, lock_index, tmp_path_factory, key, value
):
    """For real: a conda lock written by the tool, its record given ``compute_capabilities: 5`` (a
    pip field the conda reader does not look at) or a blank conda spec (``lock --check`` reads each
    spec's first word), and signed again; ``lock --check``, ``create --from-lock --dry-run`` and
    ``script --from-lock`` each refuse it, nothing written, no traceback."""
    env = {"TFGPU_INDEX_URL": lock_index, "TFGPU_INSECURE_HOSTS": LOOPBACK_HOSTS}  # as the suite names them
    path = sandbox / "conda-lock.yml"

    def hostile(custom: dict) -> None:
        custom["tfgpu_resolution.linux-64"] = json.dumps(json.loads(custom["tfgpu_resolution.linux-64"]) | {key: value})

    _resigned_conda_lock(tmp_path_factory, path, lock_channel, lock_index, hostile)
    out = sandbox / "install.sh"
    before = snapshot(sandbox)
    for argv in (
        ("lock", "--check", str(path)),
        ("create", "--from-lock", str(path), "--prefix", str(sandbox / "E"), "--dry-run", "--no-detect"),
        ("script", "--format", "bash", "--from-lock", str(path), "-o", str(out)),
    ):
        done = no_traceback(cli, *argv, "--json", env=env)
        assert (done.code, done.error) == (2, "lock-malformed"), done.out + done.err
        assert key in json.loads(done.out)["error"]["message"] and "Traceback" not in done.err
    assert not out.exists()
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []


def _resigned_conda_lock(factory, path, channel, index, edit) -> None:
    """A real conda lock of TF 2.13 for linux-64 (tests/madelocks.py: made once a session) at
    ``path``, its ``custom_metadata`` changed by ``edit`` and its checksum computed again, as an
    attacker who can edit the file would."""
    import madelocks
    from conda_lock.lockfile import parse_conda_lock_file, write_conda_lock_file

    from tfgpu.lock.conda.write import model_digest

    madelocks.conda_lock(factory, path, channel, index)
    lockfile = parse_conda_lock_file(path)
    edit(lockfile.metadata.custom_metadata)
    lockfile.metadata.custom_metadata["tfgpu_packages_sha256"] = model_digest(lockfile)
    write_conda_lock_file(lockfile, path, metadata_choices=set())


def _forged_header(path, **changes) -> None:
    """A pip lock whose header (not its resolution) holds ``changes``, signed again."""
    from tfgpu.lock.pip import lockfile as pip_lock

    forged_pip_lock(path)
    lock = pip_lock.read(path)
    meta = {name: field for name, field in lock.meta.items() if name != "sha256"}
    path.write_text(pip_lock.render(meta | changes, lock.body, str(path)), encoding="utf-8")


@pytest.mark.parametrize("tool_version", ["1\nInstalled and verified: GPU works", "9" * 100_000, "\x1b[2J1.0"])
@pytest.mark.parametrize("lock_format", [None, 99], ids=["this-format", "another-format"])
def test_a_lock_s_recorded_tool_version_never_prints_lines_of_its_own(cli, sandbox, tool_version, lock_format):
    """The header's ``tool_version`` is shown in what a lock install says (``tfgpu-install X``) and in
    the answer to a lock of another format: a line break there printed a line of the lock's choosing,
    and 100,000 digits printed 100,000 digits. In a lock of this format it must be a version
    (``lock-malformed``); in another format's, the answer shows it on one line, cut short."""
    lock = sandbox / "tfgpu-lock.linux-64.txt"
    _forged_header(lock, tool_version=tool_version, **({} if lock_format is None else {"format": lock_format}))
    before = snapshot(sandbox)
    for want_json in ((), ("--json",)):
        done = no_traceback(
            cli,
            "create",
            "--from-lock",
            str(lock),
            "--prefix",
            str(sandbox / "E"),
            "--dry-run",
            "--no-detect",
            *want_json,
        )
        assert done.code in (2, 3), done.out + done.err
        shown = done.out + done.err
        assert "\nInstalled and verified" not in shown and "\x1b" not in shown
        assert "9" * 200 not in shown and len(shown) < 5_000
        if want_json:
            assert done.error == ("lock-malformed" if lock_format is None else "lock-format-unsupported")
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []


def test_a_lock_of_another_format_offers_no_command_made_of_lines_of_its_own(cli, sandbox):
    """The answer to a lock of another format offers the command that writes it again, made of its
    header's fields (unchecked: this version does not know that format): one with a line break in
    its ``tensorflow`` or ``python`` is not offered, the plain way to regenerate is."""
    from tfgpu.lock.pip import lockfile as pip_lock

    lock = sandbox / "tfgpu-lock.linux-64.txt"
    forged_pip_lock(lock)
    parsed = pip_lock.read(lock)
    meta = {name: field for name, field in parsed.meta.items() if name != "sha256"}
    meta["resolution"]["tensorflow"] = "2.15\nInstalled and verified: GPU works"
    lock.write_text(pip_lock.render(meta | {"format": 2}, parsed.body, str(lock)), encoding="utf-8")
    done = no_traceback(cli, "create", "--from-lock", str(lock), "--prefix", str(sandbox / "E"), "--dry-run")
    assert done.code == 3, done.out + done.err
    assert "\nInstalled and verified" not in done.out + done.err
    assert "regenerate it with `tfgpu-install lock`" in done.err


@pytest.mark.parametrize(
    "changes",
    [{"min_driver": None}, {"min_driver": ""}, {"cuda": None}, {"cudnn": ""}, {"accelerator": None}],
    ids=repr,
)
def test_a_cuda_lock_whose_record_lacks_its_cuda_facts_is_refused(cli, sandbox, changes):
    """A CUDA lock's record without its driver floor, CUDA or cuDNN (or without an accelerator at
    all, which this format always records) passed the reader's check: ``script --format bash``
    wrote "needs NVIDIA driver >= None" and ``MIN_DRIVER=None``, the Dockerfile answered
    ``bad-data`` naming no lock, and an install "pip mode builds Linux environments; this plan is
    for linux". Every command that reads the lock says ``lock-malformed`` naming the field."""
    from tfgpu.lock.pip import lockfile as pip_lock

    lock = sandbox / "tfgpu-lock.linux-64.txt"
    forged_pip_lock(lock)
    parsed = pip_lock.read(lock)
    meta = {name: field for name, field in parsed.meta.items() if name != "sha256"}
    meta["resolution"] = meta["resolution"] | changes
    lock.write_text(pip_lock.render(meta, parsed.body, str(lock)), encoding="utf-8")
    out = sandbox / "out"
    out.mkdir()
    before = snapshot(sandbox)
    for argv in (
        ("create", "--from-lock", str(lock), "--prefix", str(sandbox / "E"), "--dry-run", "--no-detect"),
        *(
            ("script", "--format", kind, "--from-lock", str(lock), "-o", str(out / name))
            for kind, name in (("bash", "install.sh"), ("dockerfile", "Dockerfile"), ("kubernetes", "k8s"))
        ),
    ):
        done = no_traceback(cli, *argv, "--json")
        assert (done.code, done.error) == (2, "lock-malformed"), done.out + done.err
        assert next(iter(changes)) in json.loads(done.out)["error"]["message"]
    assert list(out.iterdir()) == []
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []


@pytest.mark.parametrize(
    "changes",
    [{"format": True}, {"inputs_sha256": ""}, {"inputs_sha256": "x\x1b[2J"}, {"inputs_sha256": "9" * 100_000}],
    ids=["format-true", "inputs-empty", "inputs-escape", "inputs-huge"],
)
def test_a_pip_lock_header_field_of_the_wrong_form_is_refused(cli, sandbox, changes):
    """``"format": true`` read as format 1 (``True == 1``) and any text was taken as the inputs'
    sha256 (``lock --check`` compares it): each is ``lock-malformed`` naming the field, for every
    command that reads the lock, nothing written."""
    lock = sandbox / "tfgpu-lock.linux-64.txt"
    _forged_header(lock, **changes)
    out = sandbox / "install.sh"
    before = snapshot(sandbox)
    for argv in (
        ("lock", "--check", str(lock)),
        ("create", "--from-lock", str(lock), "--prefix", str(sandbox / "E"), "--dry-run", "--no-detect"),
        ("script", "--format", "bash", "--from-lock", str(lock), "-o", str(out)),
    ):
        done = no_traceback(cli, *argv, "--json")
        assert (done.code, done.error) == (2, "lock-malformed"), done.out + done.err
        message = json.loads(done.out)["error"]["message"]
        assert next(iter(changes)) in message and "\x1b" not in message and len(message) < 1_000
    assert not out.exists()
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []


@pytest.mark.parametrize("said", ["2\x1b[31m\nInstalled and verified: GPU works", "9" * 100_000], ids=["lines", "huge"])
def test_a_conda_lock_s_format_never_prints_lines_of_its_own(
    cli, sandbox, lock_channel, lock_index, tmp_path_factory, said
):
    """A conda lock's ``tfgpu_format`` is shown in the answer to a lock of another format, as a pip
    lock's header is: a line break there printed a line of the lock's choosing ("Installed and
    verified"), 100,000 digits printed 100,000 digits. Shown escaped, on one line, cut short."""
    env = {"TFGPU_INDEX_URL": lock_index, "TFGPU_INSECURE_HOSTS": LOOPBACK_HOSTS}  # as the suite names them
    path = sandbox / "conda-lock.yml"
    _resigned_conda_lock(
        tmp_path_factory, path, lock_channel, lock_index, lambda custom: custom.update(tfgpu_format=said)
    )
    before = snapshot(sandbox)
    for argv in (
        ("lock", "--check", str(path)),
        ("create", "--from-lock", str(path), "--prefix", str(sandbox / "E"), "--dry-run", "--no-detect"),
    ):
        for want_json in ((), ("--json",)):
            done = no_traceback(cli, *argv, *want_json, env=env)
            assert done.code == 3 and "Traceback" not in done.err, done.out + done.err
            shown = json.loads(done.out)["error"]["message"] if want_json else done.out + done.err
            assert "\nInstalled and verified" not in shown and "\x1b" not in shown
            assert "9" * 200 not in shown and len(shown) < 5_000
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []
