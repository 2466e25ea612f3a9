"""Running ``nvidia-smi`` and reading what it prints.

The query drivers have understood since before 450 is
``--query-gpu=driver_version,name,memory.total,uuid``; ``compute_cap`` was added later (drivers
before ~510 answer ``Field "compute_cap" is not a valid field to query.``), so a failed query is
retried without it. The CUDA version the driver supports is not a query field: it is read from
``nvidia-smi -q -d COMPUTE`` (``CUDA Version : 13.0``), which takes ~25 ms on an H200 host where
the plain ``nvidia-smi`` table takes ~105 ms; both runs overlap. On WSL2 it can read
``CUDA Version: ERR!`` (https://github.com/microsoft/WSL/issues/11589), which means unknown, not a
broken driver.
"""

from __future__ import annotations

import re

from tfgpu.detect.host import DriverReading, Gpu
from tfgpu.detect.platform_facts import WSL_LIB
from tfgpu.detect.system import System, in_background
from tfgpu.records import record

FIELDS = "driver_version,name,compute_cap,memory.total,uuid"
LEGACY_FIELDS = "driver_version,name,memory.total,uuid"
TIMEOUT_S = 10.0

# Patterns, compiled on first use (``re`` caches them): most runs never need them.
_VERSION = r"^\d+(\.\d+)+$"
_CC = r"^\d+\.\d+$"
_BANNER_CUDA = r"CUDA Version\s*:\s*(\S+)"


@record
class SmiResult:
    reading: DriverReading
    gpus: tuple[Gpu, ...] = ()
    cuda_err: bool = False
    """nvidia-smi said ``CUDA Version: ERR!``."""


def summary_argv(exe: str) -> list[str]:
    """The short ``-q`` report whose header holds ``CUDA Version``."""
    return [exe, "-q", "-d", "COMPUTE"]


def query_argv(exe: str, fields: str = FIELDS) -> list[str]:
    return [exe, f"--query-gpu={fields}", "--format=csv,noheader,nounits"]


def find_nvidia_smi(system: System, os_name: str) -> str | None:
    """nvidia-smi on PATH, or where WSL2 mounts it from the Windows driver."""
    found = system.which("nvidia-smi")
    if found is None and os_name == "wsl2" and system.is_file(f"{WSL_LIB}/nvidia-smi"):
        found = f"{WSL_LIB}/nvidia-smi"
    return found


def read_nvidia_smi(system: System, os_name: str) -> SmiResult:
    exe = find_nvidia_smi(system, os_name)
    if exe is None:
        return _failed("not on PATH")
    summary = in_background(system.run, summary_argv(exe), TIMEOUT_S)
    with_cc = True
    done = system.run(query_argv(exe), TIMEOUT_S)
    if done is not None and "compute_cap" in done.stdout + done.stderr:  # a pre-510 driver
        with_cc = False
        done = system.run(query_argv(exe, LEGACY_FIELDS), TIMEOUT_S)
    report = summary()
    if done is None:
        return _failed(f"{exe} cannot be run")
    if done.returncode != 0:
        return _failed(_first_line(done) or f"exit status {done.returncode}")
    try:
        gpus = parse_query(done.stdout, with_cc)
    except ValueError as exc:
        return _failed(str(exc))

    cuda, cuda_err = None, False
    if report is not None and report.returncode == 0:
        try:
            cuda = parse_cuda_version(report.stdout)
        except ValueError:
            cuda = None
        cuda_err = cuda is None and "ERR!" in report.stdout
    reading = DriverReading("nvidia-smi", True, driver_version=gpus[0][0], cuda=cuda)
    return SmiResult(reading, tuple(gpu for _, gpu in gpus), cuda_err)


def parse_query(stdout: str, with_cc: bool = True) -> list[tuple[str, Gpu]]:
    """(driver version, GPU) per line of ``--query-gpu`` csv output; ValueError on garbage."""
    width = 5 if with_cc else 4
    rows: list[tuple[str, Gpu]] = []
    for line in (line.strip() for line in stdout.splitlines()):
        if not line:
            continue
        parts = [part.strip() for part in line.split(",")]
        if len(parts) < width:
            raise ValueError(f"unexpected output: {line[:80]!r}")
        # A name with a comma in it spreads over several fields: rejoin the middle.
        tail = parts[len(parts) - (width - 2) :]
        name = ", ".join(parts[1 : len(parts) - (width - 2)])
        driver = parts[0]
        if not re.match(_VERSION, driver):
            raise ValueError(f"unexpected driver version {driver[:40]!r}")
        cc = tail[0] if with_cc and re.match(_CC, tail[0]) else ""
        memory, uuid = tail[-2], tail[-1]
        gpu = Gpu(
            index=len(rows),
            name=name,
            compute_capability=cc,
            memory_mib=int(memory) if memory.isascii() and memory.isdigit() else None,
            uuid=uuid if uuid.startswith("GPU-") else None,
            source="nvidia-smi",
        )
        rows.append((driver, gpu))
    if not rows:
        raise ValueError("no GPU listed")
    return rows


def parse_cuda_version(stdout: str) -> str | None:
    """``CUDA Version`` from ``nvidia-smi -q`` (or the plain table's banner); None for
    ``ERR!``/``N/A``; ValueError when the output has no such line."""
    match = re.search(_BANNER_CUDA, stdout)
    if match is None:
        raise ValueError("no 'CUDA Version' in nvidia-smi output")
    value = match.group(1)
    return value if re.match(_CC, value) else None


def _failed(error: str) -> SmiResult:
    return SmiResult(DriverReading("nvidia-smi", False, error=error))


def _first_line(done) -> str:
    for line in (done.stdout + "\n" + done.stderr).splitlines():
        if line.strip():
            return line.strip()[:200]
    return ""
