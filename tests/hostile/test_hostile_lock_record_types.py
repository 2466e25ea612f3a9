"""A lock's recorded resolution whose list fields (``requirements``, ``compute_capabilities``,
``companions``, ``conda_specs``) hold another type: a number, a boolean, a table. Each format's
reader checks the fields it writes, but a pip lock may carry a conda field and a conda lock a pip
one (anyone can recompute the checksum), and the record was built from them as they stood: a
number became ``tuple(5)``, a traceback. The one check both readers call refuses every such field
(``lock-malformed``, exit 2), whatever lock it is in, before anything reads it: nothing written.

The pip lock is forged from the tool's own renderer (its checksum recomputed); the conda lock is a
real one from tests/condachannel.py's channel and the suite's local index, edited and re-signed.
"""

from __future__ import annotations

import json

import pytest

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
        assert (done.code, done.error) in ((2, "lock-malformed"), (2, "lock-corrupt")), done.out + done.err
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
    assert refused.value.code in ("lock-malformed", "lock-corrupt")


@pytest.mark.parametrize(("key", "value"), [("compute_capabilities", 5), ("conda_specs", ["python 3.10.*", " "])])
def test_a_real_conda_lock_whose_record_holds_a_hostile_list_is_refused(
    tool, sandbox, lock_channel, lock_index, key, value
):
    """For real: a conda lock written by the tool, its record given ``compute_capabilities: 5`` (a
    pip field the conda reader does not look at) or a blank conda spec (``lock --check`` reads each
    spec's first word), and signed again; ``lock --check``, ``create --from-lock --dry-run`` and
    ``script --from-lock`` each refuse it, nothing written, no traceback."""
    import sys

    from conda_lock.lockfile import parse_conda_lock_file, write_conda_lock_file

    from tfgpu.lock.conda.write import model_digest

    env = {"TFGPU_INDEX_URL": lock_index, "TFGPU_INSECURE_HOSTS": "127.0.0.1"}
    path = sandbox / "conda-lock.yml"
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    made = tool(
        *("lock", "--tf", "2.13", "--mode", "conda", "--python", python, "--no-detect"),
        *("--channel", str(lock_channel), "--platform", "linux-64", "-o", str(path)),
        env=env,
    )
    assert made.code == 0, made.err
    lockfile = parse_conda_lock_file(path)
    custom = lockfile.metadata.custom_metadata
    entry = json.loads(custom["tfgpu_resolution.linux-64"])
    custom["tfgpu_resolution.linux-64"] = json.dumps(entry | {key: value})
    custom["tfgpu_packages_sha256"] = model_digest(lockfile)
    write_conda_lock_file(lockfile, path, metadata_choices=set())
    out = sandbox / "install.sh"
    before = snapshot(sandbox)
    for argv in (
        ("lock", "--check", str(path)),
        ("create", "--from-lock", str(path), "--prefix", str(sandbox / "E"), "--dry-run", "--no-detect"),
        ("script", "--format", "bash", "--from-lock", str(path), "-o", str(out)),
    ):
        done = tool(*argv, "--json", env=env)
        assert (done.code, done.error) == (2, "lock-malformed"), done.out + done.err
        assert key in json.loads(done.out)["error"]["message"]
    assert not out.exists()
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []
