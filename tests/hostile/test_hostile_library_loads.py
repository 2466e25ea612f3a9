"""doctor's library probe (a child that ``dlopen``s the env's CUDA libraries) on libraries that are
not files: the loader opens and reads whatever a name is, so a FIFO named ``libcudart.so.12`` kept
doctor waiting on the probe's whole timeout and then blamed a crash on every library. A name that
is not a regular file is refused before ``dlopen`` and said so; a load that still blocks (a library
it needs is the FIFO) is said to have not finished, never to have crashed.

The libraries are real gcc-built shared objects, the FIFOs real; the probe is the real child.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import wheelhouse

from tfgpu.doctor.libraries import Resolved, load_in_child

pytestmark = pytest.mark.skipif(not wheelhouse.have_compiler(), reason="gcc is needed to build the test libraries")


def resolved(path: Path, soname: str) -> Resolved:
    return Resolved(name=soname, soname=soname, path=str(path), via="load hook")


def test_a_fifo_named_like_a_library_is_refused_not_opened(tmp_path):
    good = wheelhouse.shared_library(tmp_path / "libcublas.so.12", "libcublas.so.12")
    fifo = tmp_path / "libcudart.so.12"
    os.mkfifo(fifo)
    device = tmp_path / "libcufft.so.11"
    device.symlink_to("/dev/zero")
    # Generous: the probe answers in well under a second; a probe stuck on the FIFO would use it all.
    found = [resolved(fifo, "libcudart.so.12"), resolved(device, "libcufft.so.11"), resolved(good, "libcublas.so.12")]
    load_in_child(found, timeout=120)
    assert not found[0].loaded and "not a regular file (a FIFO)" in found[0].error
    assert not found[1].loaded and "not a regular file" in found[1].error
    assert found[2].loaded, found[2].error


def test_a_load_that_blocks_on_a_fifo_it_needs_is_said_to_have_not_finished(tmp_path):
    dependency = wheelhouse.shared_library(tmp_path / "libdep.so.1", "libdep.so.1")
    caller = tmp_path / "libcublas.so.12"
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-Wl,-soname,libcublas.so.12", "-Wl,--no-as-needed", "-Wl,-rpath,$ORIGIN",
         "-o", str(caller), "-x", "c", "-", "-x", "none", f"-L{tmp_path}", "-l:libdep.so.1"],
        input="int tfgpu_test_caller(void) { return 1; }\n", text=True, check=True,
    )  # fmt: skip
    dependency.unlink()
    os.mkfifo(dependency)
    found = [resolved(caller, "libcublas.so.12")]
    load_in_child(found, timeout=3)
    assert not found[0].loaded
    assert "did not finish within 3 s" in found[0].error and "crashed" not in found[0].error


def test_the_probe_loads_a_file_by_path_only_through_its_regular_file_door():
    """Every ``ctypes.CDLL`` in the probe either names a soname for the loader's own search or is
    ``open_library``'s: a new load by path that goes around it would open a FIFO again."""
    import ast
    import inspect

    from tfgpu.verify import probe_libs

    tree = ast.parse(inspect.getsource(probe_libs))
    door = next(node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == "open_library")
    inside = {id(node) for node in ast.walk(door)}
    around = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "CDLL"
        and id(node) not in inside
        and not (node.args and isinstance(node.args[0], ast.Name) and node.args[0].id == "name")
        and not (node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value is None)
    ]
    assert around == [], f"ctypes.CDLL of a path outside open_library at line(s) {around}"
