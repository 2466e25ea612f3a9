"""What each ``--platform`` of ``lock``/``bundle`` resolves to: the resolver's answer for that
platform's OS and architecture, or, with ``--allow-cpu`` on a platform TensorFlow has no GPU build
for, the CPU package of the release the GPU platforms get.
"""

from __future__ import annotations

from tfgpu.doors.requirements import requirement
from tfgpu.errors import ImpossibleError, UsageError
from tfgpu.lock.platforms import Platform, parse_platform
from tfgpu.records import replace
from tfgpu.resolver import request_for
from tfgpu.resolver import resolve as run_resolver
from tfgpu.resolver.coplanned import refuse_two_stacks
from tfgpu.resolver.model import Notice, Packages, Resolution
from tfgpu.resolver.request import OSES, parse_arch, parse_choice
from tfgpu.settings import Selectors

CPU_ONLY_CODES = ("no-gpu-build", "windows-native-gpu-unsupported")
"""Resolver errors that mean "this platform has no GPU build" (``--allow-cpu`` turns them into a CPU lock)."""


def parse_platforms(names: list[str]) -> list[Platform]:
    """The ``--platform`` values, checked, in order, without repeats."""
    seen: dict[str, Platform] = {}
    for name in names:
        platform = parse_platform(name)
        seen.setdefault(platform.name, platform)
    return list(seen.values())


def lock_targets(
    names: list[str], selectors: Selectors, *, allow_cpu: bool, host=None
) -> list[tuple[Platform, Resolution, bool]]:
    """``[(platform, resolution, cpu_only)]``: each platform resolved with the command's selectors
    (a ``tfgpu.settings.Selectors``) and that platform's OS and
    architecture; ``host`` is this machine's facts, which the resolver uses only where the target is
    this machine. ``--os``/``--arch``, when given, must agree with every platform."""

    def resolve(os_name: str, arch_name: str):
        resolution = run_resolver(request_for(replace(selectors, os=os_name, arch=arch_name)), host)
        refuse_two_stacks(resolution, "lock")
        return resolution

    os, arch = selectors.os, selectors.arch
    platforms = parse_platforms(names)
    target_os, target_arch = parse_choice("--os", os, OSES), parse_arch(arch)
    targets = []
    for platform in platforms:
        if target_os is not None and target_os not in platform.oses:
            raise UsageError(
                "conflicting-options",
                f"--os {target_os} contradicts --platform {platform.name} ({platform.os} {platform.arch}).",
                ["Drop --os: --platform says it."],
            )
        if target_arch is not None and target_arch != platform.arch:
            raise UsageError(
                "conflicting-options",
                f"--arch {target_arch} contradicts --platform {platform.name} ({platform.os} {platform.arch}).",
                ["Drop --arch: --platform says it."],
            )
        os_name = target_os or platform.os
        try:
            targets.append((platform, resolve(os_name, platform.arch), False))
        except ImpossibleError as error:
            if error.code not in CPU_ONLY_CODES:
                raise
            if not allow_cpu:
                error.alternatives.append(
                    f"Or lock TensorFlow's CPU-only package for {platform.name}: add "
                    "--allow-cpu (the lock then says it is CPU-only)."
                )
                raise
            reference = resolve("linux", "x86_64")
            targets.append((platform, cpu_resolution(reference, platform, error.message), True))
    return targets


def cpu_resolution(reference, platform: Platform, why: str):
    """``reference`` (the Linux GPU resolution) turned into the CPU package for ``platform``."""
    notice = Notice(
        "cpu-only",
        f"{platform.name} has no TensorFlow GPU build: this lock is CPU-only. {why}",
        "Run on Linux x86_64 (or WSL2) for the GPU.",
    )
    return replace(
        reference,
        os=platform.os,
        arch=platform.arch,
        platform=f"{platform.os}_{platform.arch}",
        accelerator="cpu",
        cuda=None,
        cuda_build=None,
        cudnn=None,
        min_driver=None,
        toolkit_driver=None,
        compute_capabilities=(),
        tensorflow_source="pypi",
        packages=Packages(pip=(requirement("tensorflow", f"=={reference.tensorflow}", what="--allow-cpu"),)),
        warnings=(*reference.warnings, notice),
        reasons=(*reference.reasons, f"--allow-cpu: {platform.name} gets the CPU package."),
    )
