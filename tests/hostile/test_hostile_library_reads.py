"""doctor on an env whose TensorFlow framework library (the file whose RUNPATH says where
TensorFlow's own loader looks) is no library to read: a FIFO, a directory, a link loop, a link to
/dev/zero, an ELF file cut short, one whose string table lies past its end. Each used to be passed
over in silence, as if TensorFlow had no framework library; each is now named in
``env.library-reads`` ("not read" / "not fully read") with why, and doctor finishes.

The envs are tests/envtree.py's layout with gcc-built libraries; the hostile files are real.
"""

from __future__ import annotations

import os
import struct

import pytest
import wheelhouse
from envtree import make_env

from tfgpu.detect import probe
from tfgpu.detect.recorded import RecordedSystem
from tfgpu.detect.system import PlatformFacts
from tfgpu.doctor import run_doctor

pytestmark = pytest.mark.skipif(not wheelhouse.have_compiler(), reason="gcc builds the test libraries")
FRAMEWORK = "lib/python3.11/site-packages/tensorflow/libtensorflow_framework.so.2"


def host():
    return probe(RecordedSystem(facts=PlatformFacts(system="Linux", machine="x86_64", python="3.11", glibc="2.36")))


def _replace(path, data: bytes) -> None:
    path.unlink()
    path.write_bytes(data)


def _strtab_past_the_end(path) -> None:
    data = bytearray(path.read_bytes())
    phoff = struct.unpack_from("<Q", data, 32)[0]
    phentsize, phnum = struct.unpack_from("<HH", data, 54)
    for index in range(phnum):
        header = phoff + index * phentsize
        if struct.unpack_from("<I", data, header)[0] == 2:  # PT_DYNAMIC
            start, size = struct.unpack_from("<Q", data, header + 8)[0], struct.unpack_from("<Q", data, header + 32)[0]
            for entry in range(start, start + size, 16):
                if struct.unpack_from("<q", data, entry)[0] == 5:  # DT_STRTAB
                    struct.pack_into("<Q", data, entry + 8, 1 << 40)
    _replace(path, bytes(data))


HOSTILE = {
    "fifo": (lambda path: (path.unlink(), os.mkfifo(path)), "not read: it is not a regular file"),
    "directory": (lambda path: (path.unlink(), path.mkdir()), "not read: it is not a regular file"),
    "link loop": (lambda path: (path.unlink(), path.symlink_to(path.name)), "not read: Too many levels"),
    "device": (lambda path: (path.unlink(), path.symlink_to("/dev/zero")), "not read: it is not a regular file"),
    "cut short": (lambda path: _replace(path, path.read_bytes()[:100]), "not fully read: its structure is damaged"),
    "cut in half": (lambda path: _replace(path, path.read_bytes()[: path.stat().st_size // 2]), "damaged"),
    "names past the end": (_strtab_past_the_end, "not fully read: its structure is damaged"),
}


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_a_framework_library_that_cannot_be_read_is_named_not_passed_over(tmp_path, kind):
    env = make_env(tmp_path / "env")
    craft, said = HOSTILE[kind]
    craft(env / FRAMEWORK)
    report = run_doctor(env, host=host(), environ={"PATH": "/usr/bin:/bin"})
    reads = next((f for f in report.findings if f.id == "env.library-reads"), None)
    assert reads is not None and reads.status == "warn", [f.id for f in report.findings]
    line = next(line for line in reads.evidence if "libtensorflow_framework.so.2" in line)
    assert said in line, line
