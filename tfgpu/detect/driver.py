"""The NVIDIA driver, asked four ways and cross-checked.

Sources, in order: NVML (nvidia-ml-py), libcuda's ``cuDriverGetVersion``, ``nvidia-smi``, and
``/proc/driver/nvidia/version``. Every peer tool trusts one of these; asking all of them lets the
report say which answered and catch the cases where they disagree (a driver upgraded without a
reboot: the user-space libraries are new, the loaded kernel module is old).
"""

from __future__ import annotations

import re

from tfgpu.detect.host import DriverInfo, DriverReading, Gpu
from tfgpu.detect.nvidia_smi import find_nvidia_smi, read_nvidia_smi
from tfgpu.detect.platform_facts import WSL_LIB
from tfgpu.detect.system import NvmlDevice, NvmlSnapshot, System, in_background
from tfgpu.records import record

PROCFS = "/proc/driver/nvidia/version"
# "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023"
# "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build ..."
# Patterns, compiled on first use (``re`` caches them): most runs never need them.
_NVRM = r"NVRM version:.*?Kernel Module\b.*?\s(\d+\.\d+(?:\.\d+)?)(?=\s|$)"
_SOURCE_NAMES = {"nvml": "NVML", "libcuda": "libcuda", "nvidia-smi": "nvidia-smi", "procfs": PROCFS}


@record
class DriverFindings:
    info: DriverInfo | None
    gpus: tuple[Gpu, ...]
    notes: tuple[str, ...]


def detect_driver(system: System, os_name: str) -> DriverFindings:
    """Ask every source that applies to ``os_name`` and reconcile the answers."""
    if os_name not in ("linux", "wsl2", "windows"):
        return DriverFindings(None, (), ())  # no CUDA driver exists for current macOS
    notes: list[str] = []
    if find_nvidia_smi(system, os_name) is None:  # nothing to overlap: no thread (nor threading)
        smi_pending = lambda: read_nvidia_smi(system, os_name)  # noqa: E731
    else:
        smi_pending = in_background(read_nvidia_smi, system, os_name)  # the slowest source: overlap it
    nvml_reading, nvml_gpus = read_nvml(system, notes)
    libcuda_reading = read_libcuda(system, os_name, notes)
    procfs_reading = read_procfs(system) if os_name != "windows" else None
    smi = smi_pending()
    readings = [nvml_reading, libcuda_reading, smi.reading]
    if procfs_reading is not None:
        readings.append(procfs_reading)
    if smi.cuda_err:
        notes.append(
            "nvidia-smi printed 'CUDA Version: ERR!' (a known WSL2 quirk, microsoft/WSL#11589); "
            "the supported CUDA version is taken from the other sources."
        )
    if "mismatch" in (nvml_reading.error or "").lower():
        notes.append(
            "NVML reports a driver/library version mismatch: the loaded kernel module is not the "
            "installed driver; reboot (or reload the nvidia kernel module) after a driver upgrade."
        )
    info = reconcile(tuple(readings))
    if info is None:
        notes.append("No NVIDIA driver answered (" + "; ".join(_failures(readings)) + ").")
    gpus = nvml_gpus or smi.gpus  # NVML's when it listed any (it also gives exact memory)
    return DriverFindings(info, gpus, tuple(notes))


def read_nvml(system: System, notes: list[str]) -> tuple[DriverReading, tuple[Gpu, ...]]:
    answer = system.nvml()
    if not isinstance(answer, NvmlSnapshot):
        return DriverReading("nvml", False, error=str(answer)), ()
    notes.extend(f"NVML could not read {error}" for error in answer.device_errors)
    gpus = tuple(_gpu_from_nvml(device) for device in answer.devices)
    cuda = cuda_from_int(answer.cuda_driver_version) if answer.cuda_driver_version else None
    return DriverReading("nvml", True, driver_version=answer.driver_version, cuda=cuda), gpus


def _gpu_from_nvml(device: NvmlDevice) -> Gpu:
    cc = device.compute_capability
    memory = device.memory_total_bytes
    return Gpu(
        index=device.index,
        name=device.name,
        compute_capability=f"{cc[0]}.{cc[1]}" if cc else "",
        memory_mib=memory // (1 << 20) if memory else None,
        uuid=device.uuid,
        source="nvml",
    )


def read_libcuda(system: System, os_name: str, notes: list[str]) -> DriverReading:
    if os_name == "windows":
        libraries = ["nvcuda.dll"]
    elif os_name == "wsl2":
        libraries = ["libcuda.so.1", f"{WSL_LIB}/libcuda.so.1"]
    else:
        libraries = ["libcuda.so.1"]
    errors = []
    for library in libraries:
        answer = system.libcuda_driver_version(library)
        if isinstance(answer, int) and answer > 0:
            if library.startswith(WSL_LIB):
                notes.append(
                    f"WSL2: libcuda.so.1 loads only by its full path {library}: add {WSL_LIB} to "
                    "LD_LIBRARY_PATH (or /etc/ld.so.conf.d) or TensorFlow will not find the driver."
                )
            return DriverReading("libcuda", True, cuda=cuda_from_int(answer))
        errors.append(str(answer) if isinstance(answer, str) else f"{library}: version {answer}")
    return DriverReading("libcuda", False, error="; ".join(errors))


def read_procfs(system: System) -> DriverReading:
    text = system.file_text(PROCFS, max_bytes=4096)
    if text is None:
        return DriverReading("procfs", False, error="not found (no nvidia kernel module loaded)")
    version = parse_procfs(text)
    if version is None:
        return DriverReading("procfs", False, error=f"unexpected {PROCFS}: {text.strip()[:80]!r}")
    return DriverReading("procfs", True, driver_version=version)


def parse_procfs(text: str) -> str | None:
    """The kernel module's version from ``/proc/driver/nvidia/version``, or None."""
    match = re.search(_NVRM, text, re.M)
    return match.group(1) if match else None


def cuda_from_int(value: int) -> str:
    """CUDA's integer versions: 13000 → ``"13.0"``, 12040 → ``"12.4"``."""
    return f"{value // 1000}.{value % 1000 // 10}"


def reconcile(readings: tuple[DriverReading, ...]) -> DriverInfo | None:
    """One :class:`DriverInfo` from the readings; None when none answered."""
    answered = {reading.source: reading for reading in readings if reading.ok}
    if not answered:
        return None
    version = _first(answered, ("nvml", "nvidia-smi", "procfs"), "driver_version")
    cuda = _first(answered, ("nvml", "libcuda", "nvidia-smi"), "cuda")
    clashes = []
    for label, attribute in (("driver version", "driver_version"), ("CUDA version", "cuda")):
        said = {source: getattr(r, attribute) for source, r in answered.items() if getattr(r, attribute)}
        if len(set(said.values())) > 1:
            clashes.append(f"{label}: " + ", ".join(f"{_SOURCE_NAMES[s]} says {v}" for s, v in said.items()))
    disagreement = None
    if clashes:
        disagreement = "The driver sources disagree (" + "; ".join(clashes) + ")"
        procfs = answered.get("procfs")
        if procfs is not None and procfs.driver_version != version:
            disagreement += (
                f": the loaded kernel module is {procfs.driver_version} but the driver libraries "
                f"are {version}, which is what a driver upgrade without a reboot looks like"
            )
        disagreement += "."
    return DriverInfo(version, cuda, readings, agree=not clashes, disagreement=disagreement)


def _first(answered: dict[str, DriverReading], order: tuple[str, ...], attribute: str) -> str | None:
    for source in order:
        value = getattr(answered.get(source), attribute, None)
        if value:
            return value
    return None


def _failures(readings: list[DriverReading]) -> list[str]:
    return [f"{_SOURCE_NAMES[r.source]}: {r.error}" for r in readings if not r.ok]
