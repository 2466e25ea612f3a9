"""Merge the request with the detected host: what the plan is *for*.

Values on the command line describe the target and win; the host fills in the rest, but its
driver, GPUs, glibc and interpreter only when the target is this machine's own OS and arch
(a laptop planning for a server must not lend the server its own driver).
"""

from __future__ import annotations

from tfgpu.errors import ImpossibleError
from tfgpu.resolver.model import Target
from tfgpu.resolver.request import Request

_PLATFORM = {
    ("linux", "x86_64"): "linux_x86_64",
    ("wsl2", "x86_64"): "linux_x86_64",
    ("linux", "aarch64"): "linux_aarch64",
    ("wsl2", "aarch64"): "linux_aarch64",
    ("windows", "x86_64"): "windows_x86_64",
    ("macos", "x86_64"): "macos_x86_64",
    ("macos", "aarch64"): "macos_arm64",
}


def make_target(request: Request, host) -> Target:
    """The target machine of ``request``; ``host`` is a ``tfgpu.detect.Host`` or ``None``."""
    os = request.os or (host.os if host else "linux")
    arch = request.arch or (host.arch if host else "x86_64")
    platform = _PLATFORM.get((os, arch))
    if platform is None:
        raise ImpossibleError(
            "no-gpu-build",
            f"TensorFlow publishes no wheels for {os} on {arch}, so there is no GPU build to plan.",
            [
                "Use WSL2 on an x86_64 Windows machine (--os wsl2 --arch x86_64).",
                "Or run NVIDIA's NGC TensorFlow container on a Linux host.",
            ],
        )
    here = host is not None and (host.os, host.arch) == (os, arch)

    driver, driver_source = request.driver, "--driver"
    if driver is None and here and host.driver is not None and host.driver.version:
        answered = [r.source for r in host.driver.readings if r.ok]
        driver, driver_source = host.driver.version, "detected (" + ", ".join(answered) + ")"
    if driver is None:
        driver_source = "none detected" if here else "not given"
        if here and host.driver is not None and host.driver.cuda:
            driver_source = f"version unknown; the driver supports CUDA {host.driver.cuda} (libcuda)"

    if request.gpu_cc:
        ccs: tuple[str, ...]
        ccs, gpu_source = (request.gpu_cc,), "--gpu-cc"
    elif here and host.gpus:
        ccs = tuple(dict.fromkeys(g.compute_capability for g in host.gpus if g.compute_capability))
        gpu_source = "detected: " + ", ".join(f"{g.name} ({g.compute_capability})" for g in host.gpus)
    else:
        ccs, gpu_source = (), ("none detected" if here else "not given")

    return Target(
        os=os,
        arch=arch,
        platform=platform,
        python=request.python,
        python_given=request.python is not None,
        driver=driver,
        driver_source=driver_source,
        gpu_ccs=ccs,
        gpu_source=gpu_source,
        glibc=host.glibc if here and os in ("linux", "wsl2") else None,
        running_python=host.python if here else None,
        allow_unsupported_gpu=request.allow_unsupported_gpu,
    )


TARGET_SELECTORS = ("os", "arch", "driver", "gpu_cc")
"""The selectors that describe a machine (``--python`` chooses within one)."""


def names_another_machine(selectors) -> bool:
    """Whether an artefact (an export, a lock) is for a machine the command line describes.

    A plan merges the command line with this machine's facts, value by value. A file written for
    other machines must not: once any of ``--os``, ``--arch``, ``--driver`` or ``--gpu-cc`` is given,
    this machine's driver, GPUs, glibc, interpreter and toolkits play no part in what it says (a
    login node without GPUs exporting for its compute nodes, a laptop for a server).
    """
    return any(getattr(selectors, key) for key in TARGET_SELECTORS)
