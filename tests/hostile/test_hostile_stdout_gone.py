"""A ``--json`` document whose stdout cannot take it: a full disk (``> /dev/full``) or a reader that
left (a closed pipe, ``| head -1`` once ``head`` is gone). The tool, run as the console script runs
it (``python -m tfgpu``: :func:`tfgpu.cli.entry`), ends with the documented exit code and, where
stderr can still be read, the error said there (``disk-full``; the command's own error when the
document was an error's), never a traceback, and never the interpreter's own exit status 120 for a
flush that failed at its exit. The text output already ended so.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
FULL = "/dev/full"

COMMANDS = [
    (("matrix", "--json"), 1, "disk-full"),
    (("list", "--json"), 1, "disk-full"),
    (("plan", "--tf", "2.13", "--mode", "conda", "--python", PY, "--no-detect", "--json"), 1, "disk-full"),
    (("cache", "--json"), 2, "bad-arguments"),
    (("--help",), 1, "disk-full"),  # argparse's answers: it drops a write that fails
    (("--version",), 1, "disk-full"),
    (("plan", "--help"), 1, "disk-full"),
]


def _run(sandbox, argv, stdout):
    done = subprocess.run(
        [sys.executable, "-m", "tfgpu", *argv],
        stdout=stdout,
        stderr=subprocess.PIPE,
        cwd=sandbox,
        timeout=300,
    )
    return done.returncode, done.stderr.decode("utf-8", "replace")


@pytest.mark.skipif(not os.path.exists(FULL), reason="no /dev/full here")
@pytest.mark.parametrize(("argv", "code", "said"), COMMANDS, ids=lambda v: v if isinstance(v, str) else None)
def test_a_json_document_to_a_full_disk_is_said_on_stderr(sandbox, argv, code, said):
    with open(FULL, "w") as full:
        returncode, err = _run(sandbox, argv, full)
    assert "Traceback" not in err, err
    assert returncode == code, err
    assert said in err, err


@pytest.mark.parametrize(("argv", "code", "said"), COMMANDS, ids=lambda v: v if isinstance(v, str) else None)
def test_a_json_document_to_a_reader_that_left_ends_without_a_traceback(sandbox, argv, code, said):
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first byte: every write meets EPIPE
    try:
        returncode, err = _run(sandbox, argv, write)
    finally:
        os.close(write)
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert returncode == code, err


CLOSED = [
    (("matrix",), 0),
    (("matrix", "--json"), 0),
    (("list",), 0),
    (("cache", "--json"), 2),
]


@pytest.mark.parametrize("closing", ["2>&-", ">&-"], ids=["stderr", "stdout"])
@pytest.mark.parametrize(("argv", "code"), CLOSED, ids=lambda v: v if isinstance(v, str) else None)
def test_a_stream_closed_before_the_start_keeps_the_exit_code(sandbox, closing, argv, code):
    """``tfgpu-install ... 2>&-`` (or ``>&-``): Python starts with that stream None. The command's
    own exit code still comes back (a None stderr failed the flush at the exit: 1 for a success),
    and the open stream gets what it always gets."""
    done = subprocess.run(
        ["sh", "-c", f'exec "$@" {closing}', "sh", sys.executable, "-m", "tfgpu", *argv],
        capture_output=True,
        cwd=sandbox,
        timeout=300,
    )
    assert done.returncode == code, done.stderr
    assert b"Traceback" not in done.stderr + done.stdout
    if closing == "2>&-" and code == 0:
        assert done.stdout.strip(), "the output was lost"
