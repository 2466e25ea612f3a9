"""Python source the tool parses and never runs (an env's build_info.py and load hook; a wheel's
build facts) crafted to make CPython's parser fail with more than SyntaxError: a NUL (ValueError),
``-`` 200,000 times (MemoryError), ``1+1+…`` a million long (RecursionError), a literal of the wrong
type (TypeError), a call where a list belongs. Each was a traceback of doctor's; now doctor finishes
and reads such a file as saying nothing. Every parse goes through ``tfgpu.doors.pysource`` (the door):
a layering test holds it.

The envs are tests/envtree.py's layout with gcc-built libraries; the crafted files are real.
"""

from __future__ import annotations

import ast

import packagesource
import pytest
import wheelhouse
from envtree import make_env

from tfgpu.detect import probe
from tfgpu.detect.recorded import RecordedSystem
from tfgpu.detect.system import PlatformFacts
from tfgpu.doctor import run_doctor

SITE = "lib/python3.11/site-packages"
BUILD_INFO = f"{SITE}/tensorflow/python/platform/build_info.py"
HOOK = f"{SITE}/_tfgpu_cuda_hook.py"
CRAFTED = {
    "a NUL": "a = 1\x00\n",
    "a deep unary": "a = " + "-" * 200_000 + "1\n",
    "a deep list": "build_info = " + "[1," * 5000 + "]" * 5000 + "\n",
    "a long sum": "a = " + "1+" * 1_000_000 + "1\n",
    "never closed": "LIBRARIES = [\n",
    "a call": "LIBRARIES = foo()\nbuild_info = dict(x=1)\n",
    "a number": "LIBRARIES = 5\nbuild_info = 5\n",
    "unhashable keys": "build_info = {(1, [2]): 3}\nLIBRARIES = [[1], None, 'a\\x00b']\n",
}


def host():
    return probe(RecordedSystem(facts=PlatformFacts(system="Linux", machine="x86_64", python="3.11", glibc="2.36")))


@pytest.mark.skipif(not wheelhouse.have_compiler(), reason="gcc builds the test libraries")
@pytest.mark.parametrize("which", [BUILD_INFO, HOOK], ids=["build_info.py", "load hook"])
@pytest.mark.parametrize("crafted", list(CRAFTED))
def test_doctor_reads_crafted_python_source_as_saying_nothing(tmp_path, which, crafted):
    env = make_env(tmp_path / "env")
    (env / which).write_text(CRAFTED[crafted])
    report = run_doctor(env, host=host(), environ={"PATH": "/usr/bin:/bin"})
    assert report.findings  # it finished, with findings, and raised nothing


def test_python_source_is_parsed_only_through_the_door():
    """Outside tfgpu/doors/pysource.py, nothing calls ``ast.parse`` or ``ast.literal_eval``: a parse that goes
    around the door meets MemoryError and RecursionError with no one to catch them."""
    root = packagesource.PACKAGE
    offenders = []
    for path in packagesource.modules():
        if path.relative_to(root).as_posix() == "doors/pysource.py":
            continue
        for node in packagesource.walked(path):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in ("parse", "literal_eval")
                and isinstance(node.value, ast.Name)
                and node.value.id == "ast"
            ):
                offenders.append(f"{path.relative_to(root)}:{node.lineno}")
    assert offenders == []
