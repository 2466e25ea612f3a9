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

from tests.hostile.test_hostile_child_start import _as_subprocess_says, _program, way  # noqa: F401 - a fixture
from tfgpu.process import spawning
from tfgpu.process.runner import Runner

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's death signal")

TRUE = Path(shutil.which("true")).read_bytes()
ENV = {"PATH": os.environ["PATH"]}


def test_a_program_still_open_for_writing_fails_as_subprocess_says(tmp_path, way):
    # A program being written (copied into place, a download not yet closed): the kernel refuses
    # it (ETXTBSY). Through setpriv that was setpriv's exit 126, reported as the program's own.
    program = _program(tmp_path, "busy", TRUE)
    writer = os.open(program, os.O_WRONLY)
    try:
        _as_subprocess_says([program])
    finally:
        os.close(writer)


def test_a_script_still_open_for_writing_fails_as_subprocess_says(tmp_path, way):
    program = _program(tmp_path, "busy.sh", b"#!/bin/sh\necho hi\n")
    writer = os.open(program, os.O_WRONLY | os.O_APPEND)
    try:
        _as_subprocess_says([program])
    finally:
        os.close(writer)


def test_a_script_whose_interpreter_is_open_for_writing_fails_as_subprocess_says(tmp_path, way):
    interpreter = _program(tmp_path, "sh", Path("/bin/sh").resolve().read_bytes())
    script = _program(tmp_path, "s", f"#!{interpreter}\necho hi\n".encode())
    writer = os.open(interpreter, os.O_WRONLY)
    try:
        _as_subprocess_says([script])
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
