"""Read the host: OS, arch, Pythons, NVIDIA driver and GPUs, CUDA toolkits, conda executables.

``probe()`` never raises because something is missing or prints garbage: a machine without a GPU
gets ``driver=None`` and no GPUs, and each driver source records why it did not answer.
"""

from __future__ import annotations

from tfgpu.detect.conda import find_conda
from tfgpu.detect.driver import detect_driver
from tfgpu.detect.host import CondaExe, DriverInfo, DriverReading, Gpu, Host, Toolkit
from tfgpu.detect.platform_facts import WSL_LIB, detect_platform
from tfgpu.detect.system import System
from tfgpu.detect.toolkits import find_toolkits

__all__ = ["probe", "Host", "DriverInfo", "DriverReading", "Gpu", "Toolkit", "CondaExe", "System"]


def probe(system: System | None = None) -> Host:
    """Everything detectable about this machine (or the one ``system`` describes).

    Fast by design: no ``cuInit``, no Python interpreter is run, nvidia-ml-py is imported only
    when libnvidia-ml is present, and ``nvcc`` runs only for an install with no version file.
    """
    system = system if system is not None else System()
    facts = detect_platform(system)
    driver = detect_driver(system, facts.os)
    toolkits = find_toolkits(system, facts.os)
    notes = [*facts.notes, *_wsl_notes(system, facts.os), *driver.notes]
    notes += _toolkit_notes(toolkits, driver.info)
    return Host(
        os=facts.os,
        arch=facts.arch,
        os_release=facts.os_release,
        glibc=facts.glibc,
        python=facts.python,
        pythons=facts.pythons,
        driver=driver.info,
        gpus=driver.gpus,
        toolkits=toolkits,
        conda=find_conda(system),
        notes=tuple(notes),
    )


def _wsl_notes(system: System, os_name: str) -> list[str]:
    if os_name != "wsl2":
        return []
    if system.is_file(f"{WSL_LIB}/libcuda.so.1"):
        return [f"WSL2: libcuda is provided by the Windows driver at {WSL_LIB}."]
    return [
        f"WSL2: {WSL_LIB}/libcuda.so.1 is missing: install or update the NVIDIA driver on Windows "
        "(never install a Linux NVIDIA driver inside WSL)."
    ]


def _toolkit_notes(toolkits: tuple[Toolkit, ...], driver: DriverInfo | None) -> list[str]:
    if not toolkits:
        return []
    if driver is None:
        listed = ", ".join(f"{t.version} at {t.path}" for t in toolkits)
        return [
            f"CUDA toolkit {listed} is installed, but no NVIDIA driver answered: a toolkit alone "
            "cannot run anything on a GPU."
        ]
    if driver.cuda is None:
        return []
    notes = []
    for toolkit in toolkits:
        if _major_minor(toolkit.version) > _major_minor(driver.cuda):
            notes.append(
                f"CUDA toolkit {toolkit.version} at {toolkit.path} is newer than the CUDA "
                f"{driver.cuda} the driver supports: programs built with it need a newer driver "
                "(the toolkit's version is not what this machine can run)."
            )
    return notes


def _major_minor(version: str) -> tuple[int, ...]:
    parts = []
    for part in version.split(".")[:2]:
        if not part.isdigit():
            break
        parts.append(int(part))
    return tuple(parts)
