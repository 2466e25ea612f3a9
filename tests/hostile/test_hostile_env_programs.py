"""doctor runs one program the env holds, ``ptxas --version`` (XLA's PTX compiler). A ptxas that
exits with an error, prints tens of megabytes of anything but a version, or hangs, is no ptxas XLA
can use: doctor said "ok: ptxas ? for XLA" of each. It now warns, saying how it answered.

The env is tests/envtree.py's layout; the ptxas stand-ins are real shell scripts.
"""

from __future__ import annotations

import pytest
import wheelhouse
from envtree import make_env

from tfgpu.detect import probe
from tfgpu.detect.recorded import RecordedSystem
from tfgpu.detect.system import PlatformFacts
from tfgpu.doctor import run_doctor

PTXAS = "lib/python3.11/site-packages/nvidia/cuda_nvcc/bin/ptxas"
ANSWERS = {
    "an error": ("#!/bin/sh\necho 'ptxas: cannot execute' >&2\nexit 3\n", "exited 3 without saying its version"),
    "megabytes of noise": ("#!/bin/sh\nyes noise | head -c 50000000\n", "printed no version"),
}


def host():
    return probe(RecordedSystem(facts=PlatformFacts(system="Linux", machine="x86_64", python="3.11", glibc="2.36")))


@pytest.mark.skipif(not wheelhouse.have_compiler(), reason="gcc builds the test libraries")
@pytest.mark.parametrize("answer", list(ANSWERS))
def test_a_ptxas_that_says_no_version_is_a_warning_not_an_ok(tmp_path, answer):
    env = make_env(tmp_path / "env")
    script, said = ANSWERS[answer]
    (env / PTXAS).write_text(script)
    report = run_doctor(env, host=host(), environ={"PATH": "/usr/bin:/bin"})
    finding = next(f for f in report.findings if f.id == "xla.ptxas")
    assert finding.status == "warn" and said in finding.title, finding
