"""What :func:`tfgpu.detect.probe` found on a machine: plain, frozen facts.

Absence is a fact too: a machine with no NVIDIA driver has ``driver=None`` and no GPUs, and every
source that was tried says in its :class:`DriverReading` why it did not answer.
"""

from __future__ import annotations

from tfgpu.records import record

# Records, not dataclasses: each dataclass costs about a millisecond to create, and every command
# that probes imports this module (see tfgpu.records).


@record
class DriverReading:
    """What one driver source answered, or why it did not."""

    source: str
    """``"nvml"``, ``"libcuda"``, ``"nvidia-smi"`` or ``"procfs"``."""
    ok: bool
    """True when the source gave a driver version or a CUDA version."""
    driver_version: str | None = None
    """The driver version this source reports (``"580.159.04"``); libcuda never gives one."""
    cuda: str | None = None
    """The newest CUDA this driver supports (``"13.0"``); procfs never gives one, and nvidia-smi
    on WSL2 may print ``CUDA Version: ERR!``, which is recorded as None."""
    error: str | None = None
    """Why the source did not answer, in a few words; None when it answered."""

    def to_dict(self) -> dict:
        return {
            "source": self.source,
            "ok": self.ok,
            "driver_version": self.driver_version,
            "cuda": self.cuda,
            "error": self.error,
        }


@record
class DriverInfo:
    """The NVIDIA driver, reconciled from every source that answered."""

    version: str | None
    """The driver version: NVML's when it answered, else nvidia-smi's, else procfs's. None only
    when libcuda alone answered (it reports the CUDA version, not the driver's)."""
    cuda: str | None
    """The newest CUDA this driver supports (``"13.0"``): NVML's, else libcuda's, else
    nvidia-smi's. This is the driver's capability, not an installed toolkit."""
    readings: tuple[DriverReading, ...]
    """Every source tried, in the order tried, answered or not."""
    agree: bool
    """False when the answering sources disagree on the driver version or on the CUDA version."""
    disagreement: str | None = None
    """One sentence saying which sources disagree and what each said; None when they agree."""

    def to_dict(self) -> dict:
        return {
            "version": self.version,
            "cuda": self.cuda,
            "readings": [reading.to_dict() for reading in self.readings],
            "agree": self.agree,
            "disagreement": self.disagreement,
        }


@record
class Gpu:
    """One NVIDIA GPU."""

    index: int
    """The device index as NVML and nvidia-smi number it."""
    name: str
    """The marketing name, e.g. ``"NVIDIA H200"``."""
    compute_capability: str
    """``"9.0"``; ``""`` when the source could not tell (nvidia-smi of drivers before 510)."""
    memory_mib: int | None
    """Total memory in MiB, or None when the source did not say."""
    uuid: str | None
    """``"GPU-…"``, or None when the source did not say."""
    source: str
    """The source these facts came from: ``"nvml"`` or ``"nvidia-smi"``."""

    def to_dict(self) -> dict:
        return {
            "index": self.index,
            "name": self.name,
            "compute_capability": self.compute_capability,
            "memory_mib": self.memory_mib,
            "uuid": self.uuid,
            "source": self.source,
        }


@record
class Toolkit:
    """An installed CUDA toolkit. Installed is not the same as usable: what the driver supports
    is :attr:`DriverInfo.cuda`."""

    version: str
    """``"13.0.2"`` from version.json, ``"11.8.89"`` from version.txt, ``"13.0"`` from nvcc."""
    path: str
    """The install root as found (``/usr/local/cuda``); installs are deduplicated by real path."""
    source: str
    """Where the version came from: ``"version.json"``, ``"version.txt"`` or ``"nvcc"``."""

    def to_dict(self) -> dict:
        return {"version": self.version, "path": self.path, "source": self.source}


@record
class CondaExe:
    """A conda-family executable."""

    name: str
    """``"conda"``, ``"mamba"``, ``"micromamba"`` or ``"pixi"``."""
    path: str
    """Where it was found ($CONDA_EXE, $MAMBA_EXE or PATH)."""

    def to_dict(self) -> dict:
        return {"name": self.name, "path": self.path}


@record
class Host:
    """Everything the resolver and the doctor need to know about this machine."""

    os: str
    """``"linux"``, ``"wsl2"``, ``"windows"`` or ``"macos"`` (any other system: its
    ``platform.system()`` name, lower-cased)."""
    arch: str
    """``"x86_64"`` or ``"aarch64"`` (amd64 and arm64 are normalized; anything else as reported)."""
    os_release: str
    """``"Debian GNU/Linux 12 (bookworm)"`` from /etc/os-release, or the platform string on
    Windows and macOS; ``""`` when unknown."""
    glibc: str | None
    """``"2.36"``, or None where there is no glibc (musl, Windows, macOS)."""
    python: str
    """The running interpreter, ``"3.11"``."""
    pythons: tuple[str, ...]
    """``"3.N"`` for every ``python3.N`` executable on PATH (found, not run)."""
    driver: DriverInfo | None
    """The NVIDIA driver, or None when no source answered."""
    gpus: tuple[Gpu, ...]
    """GPUs from NVML when it answered, else from nvidia-smi; empty when neither did."""
    toolkits: tuple[Toolkit, ...]
    """Installed CUDA toolkits."""
    conda: tuple[CondaExe, ...]
    """conda-family executables."""
    notes: tuple[str, ...] = ()
    """Human-readable facts worth showing, one sentence each."""

    def to_dict(self) -> dict:
        return {
            "os": self.os,
            "arch": self.arch,
            "os_release": self.os_release,
            "glibc": self.glibc,
            "python": self.python,
            "pythons": list(self.pythons),
            "driver": self.driver.to_dict() if self.driver else None,
            "gpus": [gpu.to_dict() for gpu in self.gpus],
            "toolkits": [toolkit.to_dict() for toolkit in self.toolkits],
            "conda": [exe.to_dict() for exe in self.conda],
            "notes": list(self.notes),
        }
