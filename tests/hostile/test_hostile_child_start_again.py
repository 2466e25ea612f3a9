"""Hostile starts of a child, the checks ``tfgpu.process.spawning`` makes before it hands a program to
setpriv: programs the checks pass but the kernel, exec'ing from setpriv, runs otherwise or refuses
(a program still open for writing, names that mean another process from inside setpriv), and crafted
ELF headers that must neither slow, hang nor break a start. On both ways of starting a child a
program must run as ``subprocess`` runs it, or fail as ``subprocess`` reports it. Real processes."""

from __future__ import annotations

import os
import shutil
import struct
import sys
import time
from pathlib import Path

import pytest

from tests.hostile.test_hostile_child_start import _as_subprocess_says, _program
from tfgpu.process import spawning
from tfgpu.process.runner import Runner

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's death signal")

TRUE = Path(shutil.which("true")).read_bytes()
ENV = {"PATH": os.environ["PATH"]}


def _busy_program(tmp_path):
    return _program(tmp_path, "busy", TRUE), None


def _busy_script(tmp_path):
    return _program(tmp_path, "busy.sh", b"#!/bin/sh\necho hi\n"), None


def _busy_interpreter(tmp_path):
    interpreter = _program(tmp_path, "sh", Path("/bin/sh").resolve().read_bytes())
    return _program(tmp_path, "s", f"#!{interpreter}\necho hi\n".encode()), interpreter


@pytest.mark.parametrize(
    "made", [_busy_program, _busy_script, _busy_interpreter], ids=["program", "script", "interpreter"]
)
def test_a_file_still_open_for_writing_fails_as_subprocess_says(tmp_path, way, made):
    # A program, script or interpreter being written (copied into place, a download not yet
    # closed): the kernel refuses it (ETXTBSY). Through setpriv that was setpriv's exit 126,
    # reported as the program's own.
    program, interpreter = made(tmp_path)
    writer = os.open(interpreter or program, os.O_WRONLY | os.O_APPEND)
    try:
        _as_subprocess_says([program])
    finally:
        os.close(writer)


def test_proc_self_exe_runs_the_tools_own_interpreter(tmp_path, way):
    # /proc/self/exe names the process that execs it: setpriv, once setpriv execs it.
    _as_subprocess_says(["/proc/self/exe", "-c", "print('hi')"])


def test_a_link_to_proc_self_exe_runs_the_tools_own_interpreter(tmp_path, way):
    link = tmp_path / "py"
    link.symlink_to("/proc/self/exe")
    _as_subprocess_says([str(link), "-c", "print('hi')"])


def test_a_script_run_by_proc_self_exe_runs_the_tools_own_interpreter(tmp_path, way):
    _as_subprocess_says([_program(tmp_path, "s.py", b"#!/proc/self/exe\nprint('hi')\n")])


def test_dev_fd_of_a_descriptor_the_child_does_not_get_fails_as_subprocess_says(tmp_path, way):
    # The tool has the descriptor open, the child (close_fds) has not: /dev/fd/N is there for the
    # check and gone for the exec.
    program = _program(tmp_path, "t", TRUE)
    held = os.open(program, os.O_RDONLY)
    try:
        _as_subprocess_says([f"/dev/fd/{held}"])
    finally:
        os.close(held)


def _headers(elf: bytes) -> tuple[int, int]:
    """Where a 64-bit little-endian image's program headers start, and how many there are."""
    return struct.unpack_from("<Q", elf, 32)[0], struct.unpack_from("<H", elf, 56)[0]


def _with_interp(elf: bytes, offset: int | None = None, size: int | None = None, name: bytes | None = None) -> bytes:
    data = bytearray(elf)
    start, count = _headers(elf)
    for at in range(start, start + 56 * count, 56):
        if struct.unpack_from("<I", data, at)[0] == 3:
            if name is not None:
                where = len(data)
                data += name + b"\0"
                struct.pack_into("<QQQQ", data, at + 8, where, 0, 0, len(name) + 1)
                struct.pack_into("<Q", data, at + 40, len(name) + 1)
            if offset is not None:
                struct.pack_into("<Q", data, at + 8, offset)
            if size is not None:
                struct.pack_into("<Q", data, at + 32, size)
                struct.pack_into("<Q", data, at + 40, size)
            return bytes(data)
    pytest.skip("true is static here")


def _patched(elf: bytes, at: int, fmt: str, value: int) -> bytes:
    data = bytearray(elf)
    struct.pack_into(fmt, data, at, value)
    return bytes(data)


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return str(path)


CRAFTED = {
    "phoff past everything": lambda tmp, fifo: _patched(TRUE, 32, "<Q", 2**64 - 1),
    "phoff near the page limit": lambda tmp, fifo: _patched(TRUE, 32, "<Q", 16 * 4096),
    "phnum 0xffff": lambda tmp, fifo: _patched(TRUE, 56, "<H", 0xFFFF),
    "phnum 0": lambda tmp, fifo: _patched(TRUE, 56, "<H", 0),
    "phentsize 0": lambda tmp, fifo: _patched(TRUE, 54, "<H", 0),
    "32-bit class": lambda tmp, fifo: _patched(TRUE, 4, "<B", 1),
    "big-endian": lambda tmp, fifo: _patched(TRUE, 5, "<B", 2),
    "type core": lambda tmp, fifo: _patched(TRUE, 16, "<H", 4),
    "interp past the file": lambda tmp, fifo: _with_interp(TRUE, offset=2**63),
    "interp huge": lambda tmp, fifo: _with_interp(TRUE, size=2**62),
    "interp one byte": lambda tmp, fifo: _with_interp(TRUE, size=1),
    "interp a fifo": lambda tmp, fifo: _with_interp(TRUE, name=fifo.encode()),
    "interp a device": lambda tmp, fifo: _with_interp(TRUE, name=b"/dev/zero"),
    "interp a directory": lambda tmp, fifo: _with_interp(TRUE, name=b"/"),
    "interp itself": lambda tmp, fifo: _with_interp(TRUE, name=str(tmp / "crafted").encode()),
    "interp relative": lambda tmp, fifo: _with_interp(TRUE, name=b"lib/ld.so"),
    "interp through proc": lambda tmp, fifo: _with_interp(TRUE, name=b"/proc/self/exe"),
    "cut after the header": lambda tmp, fifo: TRUE[:64],
    "cut inside the headers": lambda tmp, fifo: TRUE[: _headers(TRUE)[0] + 20],
}


@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_a_crafted_image_is_checked_quickly_and_fails_as_subprocess_says(tmp_path, way, fifo, case):
    program = _program(tmp_path, "crafted", CRAFTED[case](tmp_path, fifo))
    began = time.monotonic()
    for _ in range(20):
        spawning.how([program], ENV, None)
    assert time.monotonic() - began < 1.0
    _as_subprocess_says([program])


def test_a_path_entry_through_proc_self_cwd_finds_what_subprocess_finds(tmp_path, way, monkeypatch):
    # /proc/self/cwd is the tool's directory to the check and the child's (cwd=) to setpriv's exec.
    # Seen from the tool's directory the first entry has no such program, and a later one does.
    there, here, later = tmp_path / "there", tmp_path / "here", tmp_path / "later"
    for directory in (there, here, later):
        directory.mkdir()
    _program(there, "which-one", b"#!/bin/sh\necho there\n")
    _program(later, "which-one", b"#!/bin/sh\necho later\n")
    monkeypatch.chdir(here)
    env = {"PATH": f"/proc/self/cwd:{later}:{os.environ['PATH']}"}
    done = Runner(None).run(["which-one"], env=env, cwd=there)
    assert (done.started, done.returncode, done.output.strip()) == (True, 0, "there"), done
