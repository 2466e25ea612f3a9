"""Paths the file system cannot hold (a name over 255 bytes): every path option and ``TFGPU_*``
path variable is checked when it is read (``bad-path``, exit 2), so no ``stat()`` raises
ENAMETOOLONG in the middle of a command.
"""

from __future__ import annotations

import pytest

from .conftest import changed, snapshot

LONG = "x" * 300  # one component over NAME_MAX: stat() fails with ENAMETOOLONG, not ENOENT

TARGET = ("--tf", "2.15", "--no-detect", "--json")
OVERLONG = {
    "script-o-file": ("script", "--format", "bash", "-o", LONG, *TARGET),
    "script-o-dir": ("script", "--format", "slurm", "-o", LONG, *TARGET),
    "lock-o": ("lock", "--platform", "linux-64", "-o", LONG, *TARGET),
    "lock-check": ("lock", "--platform", "linux-64", "--check", LONG, *TARGET),
    "bundle-o": ("bundle", "--platform", "linux-64", "-o", LONG, *TARGET),
    "find-links": ("create", "--dry-run", "--no-verify", "--prefix", "E", "--find-links", LONG, *TARGET),
    "from-lock": ("create", "--dry-run", "--no-verify", "--prefix", "E", "--from-lock", LONG, *TARGET),
    "from-lock-yml": ("create", "--dry-run", "--no-verify", "--prefix", "E", "--from-lock", LONG + ".yml", *TARGET),
    "conda-channel": (
        "create",
        "--dry-run",
        "--no-verify",
        "--prefix",
        "E",
        "--mode",
        "conda",
        "--channel",
        "/tmp/" + LONG,
        *TARGET,
    ),
}


@pytest.mark.parametrize("argv", OVERLONG.values(), ids=list(OVERLONG))
def test_a_path_too_long_for_the_file_system_is_a_clear_error(cli, sandbox, argv):
    before = snapshot(sandbox)
    done = cli(*argv)
    assert (done.code, done.error) == (2, "bad-path"), done.out
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []


def test_a_data_dir_too_long_for_the_file_system_is_bad_data(cli, sandbox):
    done = cli("plan", *TARGET, env={"TFGPU_DATA_DIR": str(sandbox / LONG)})
    assert (done.code, done.error) == (2, "bad-path"), done.out


def test_a_nul_in_a_path_option_is_bad_path(cli, sandbox):
    done = cli("lock", "--platform", "linux-64", "-o", "a\x00b", *TARGET)
    assert (done.code, done.error) == (2, "bad-path"), done.out
