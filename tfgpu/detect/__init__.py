"""Read the host: OS, arch, Pythons, NVIDIA driver and GPUs, CUDA toolkits, conda executables.

``probe()`` never raises because something is missing or prints garbage: a machine without a GPU
gets ``driver=None`` and no GPUs, and each driver source records why it did not answer.

A command probes only what its options leave open (:func:`probe`'s ``given``): with ``--driver``
and ``--gpu-cc`` both given the driver and the GPUs are not read, and when ``--os``/``--arch`` name
another machine than this one nothing past the OS and architecture is, since none of this
machine's facts can then play a part. What was left out is said in the host's notes.
"""

from __future__ import annotations

from collections.abc import Mapping

from tfgpu.detect.conda import find_conda
from tfgpu.detect.host import CondaExe, DriverInfo, DriverReading, Gpu, Host, Toolkit
from tfgpu.detect.platform_facts import WSL_LIB, detect_os, detect_platform, normalize_arch
from tfgpu.detect.system import System
from tfgpu.detect.toolkits import find_toolkits

__all__ = ["probe", "Host", "DriverInfo", "DriverReading", "Gpu", "Toolkit", "CondaExe", "System"]


def probe(system: System | None = None, *, given: Mapping[str, object] | None = None) -> Host:
    """Everything detectable about this machine (or the one ``system`` describes) that ``given``
    leaves open: the selectors the command line set (``os``, ``arch``, ``driver``, ``gpu_cc``;
    others are ignored). Without ``given``, everything.

    Fast by design: no ``cuInit``, no Python interpreter is run, nvidia-ml-py is imported only
    when libnvidia-ml is present, and ``nvcc`` runs only for an install with no version file.
    """
    system = system if system is not None else System()
    given = given or {}
    if _names_another_machine(system, given):
        return _elsewhere(system, given)
    facts = detect_platform(system)
    notes = [*facts.notes, *_wsl_notes(system, facts.os)]
    toolkits = find_toolkits(system, facts.os)
    gpus: tuple[Gpu, ...]
    if given.get("driver") and given.get("gpu_cc"):
        driver_info, gpus = None, ()
        notes.append("The NVIDIA driver and the GPUs were not probed: --driver and --gpu-cc were given.")
    else:
        # Start-up cost: a plan given --driver and --gpu-cc loads this package but not the driver's
        # readers (tfgpu.detect.driver, tfgpu.detect.nvidia_smi).
        from tfgpu.detect.driver import detect_driver

        driver = detect_driver(system, facts.os)
        driver_info, gpus = driver.info, driver.gpus
        notes += [*driver.notes, *_toolkit_notes(toolkits, driver.info)]
    return Host(
        os=facts.os,
        arch=facts.arch,
        os_release=facts.os_release,
        glibc=facts.glibc,
        python=facts.python,
        pythons=facts.pythons,
        driver=driver_info,
        gpus=gpus,
        toolkits=toolkits,
        conda=find_conda(system),
        notes=tuple(notes),
    )


def _this_os_arch(system: System) -> tuple[str, str, tuple[str, ...]]:
    facts = system.platform()
    os_name, notes = detect_os(system, facts.system)
    return os_name, normalize_arch(facts.machine), notes


def _names_another_machine(system: System, given: Mapping[str, object]) -> bool:
    """Whether ``--os``/``--arch`` describe a machine other than this one (read cheaply: the
    kernel's name and the machine type, no files beyond /proc's osrelease)."""
    if not (given.get("os") or given.get("arch")):
        return False
    os_name, arch, _ = _this_os_arch(system)
    wanted_os = str(given.get("os") or os_name).strip().lower()
    wanted_arch = normalize_arch(str(given.get("arch") or arch).strip())
    return (wanted_os, wanted_arch) != (os_name, arch)


def _elsewhere(system: System, given: Mapping[str, object]) -> Host:
    """This machine's OS and architecture only: the target is another machine, so its driver,
    GPUs, glibc, interpreters, toolkits and conda play no part and are not probed."""
    facts = system.platform()
    os_name, arch, notes = _this_os_arch(system)
    wanted = "/".join(str(given[key]) for key in ("os", "arch") if given.get(key))
    return Host(
        os=os_name,
        arch=arch,
        os_release="",
        glibc=None,
        python=facts.python,
        pythons=(),
        driver=None,
        gpus=(),
        toolkits=(),
        conda=(),
        notes=(
            *notes,
            f"Only this machine's OS and architecture were read: the target ({wanted}) is "
            "another machine, so nothing else here plays a part.",
        ),
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
        if not (part.isascii() and part.isdigit()):  # "¹²".isdigit() is True, and int() refuses it
            break
        parts.append(int(part))
    return tuple(parts)
