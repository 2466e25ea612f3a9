"""Where a ``--with`` decision meets the rest of a plan: which targets take companions, how the
decision joins a :class:`~tfgpu.resolver.model.Resolution` (the pip packages for one stack, a
notice for two) and the refusal of building commands to install two stacks plainly.

The decision itself is ``tfgpu.resolver.companions``'.
"""

from __future__ import annotations

from tfgpu.doors.requirements import canonical
from tfgpu.errors import ImpossibleError, UsageError
from tfgpu.records import replace
from tfgpu.resolver.companions import LINUX
from tfgpu.resolver.drivers import driver_key
from tfgpu.resolver.model import CoPlan, Notice


def check_target(request, resolution) -> None:
    """Companions come from PyPI wheels for Linux x86_64 next to TensorFlow's ``and-cuda`` extra."""
    if resolution.mode != "pip" or resolution.platform != LINUX or resolution.accelerator != "cuda":
        raise UsageError(
            "conflicting-options",
            f"--with plans torch/JAX wheels from PyPI next to TensorFlow's CUDA wheels: pip mode on Linux "
            f"x86_64 (or WSL2) only; this plan is {resolution.mode} mode for {resolution.platform}.",
            ["Use --mode pip on a Linux x86_64 or WSL2 target, or install the other framework separately."],
        )


def planned(resolution, plan: CoPlan):
    """``resolution`` with ``plan`` attached and the pinned companions in its pip packages, so one
    uv resolution installs and locks them all. Two stacks add a ``two-cuda-stacks`` notice: pip
    mode's ``create`` then installs TensorFlow's CUDA wheels apart (``tfgpu.installers.stacks``),
    and the commands that would install both as one set refuse (:func:`refuse_two_stacks`)."""

    reasons = (*resolution.reasons, *plan.reasons)
    warnings = resolution.warnings
    if plan.two_stacks:
        notice = Notice(
            "two-cuda-stacks",
            f"TF {resolution.tensorflow} ({plan.stacks[0]}) and {', '.join(plan.asked)} ({', '.join(plan.stacks[1:])}) "
            f"put two CUDA stacks into one env; {', '.join(plan.colliding) or 'no distributions'} install the same "
            "files. `create` installs TensorFlow's CUDA wheels apart (lib/tfgpu/cudaNN); lock, bundle and script "
            "refuse such a plan.",
            plan.ways_forward[0] if plan.ways_forward else "",
        )
        warnings = (*warnings, notice)
    extra = tuple(canonical(c.requirement, what="--with") for c in plan.companions)
    packages = replace(resolution.packages, pip=(*resolution.packages.pip, *extra))
    modes = dict(resolution.modes)
    if "pip" in modes:
        modes["pip"] = replace(modes["pip"], packages=packages)
    min_driver, why = env_min_driver(resolution, plan)
    reasons = (*reasons, *why)
    warnings = (*warnings, *unchecked_gpus(plan))
    sources = tuple(sorted({*resolution.sources, *(s for c in plan.companions for s in c.sources)}))
    return replace(
        resolution,
        coplan=plan,
        reasons=reasons,
        warnings=warnings,
        packages=packages,
        modes=modes,
        min_driver=min_driver,
        sources=sources,
    )


def unchecked_gpus(plan: CoPlan) -> tuple:
    """A ``companion-gpu-unchecked`` notice per companion whose wheel states no GPU architectures
    while the target names GPUs (torch before 2.8 lists them only inside libtorch_cuda.so)."""
    return tuple(
        Notice(
            "companion-gpu-unchecked",
            f"{c.framework} {c.version}: its wheel states no GPU architecture list, so whether it has kernels "
            "for this GPU was not checked.",
            "After `create`, `tfgpu-install verify --with " + c.framework + "` runs it on the GPU.",
        )
        for c in plan.companions
        if plan.gpu_ccs and not c.gpu_archs
    )


def env_min_driver(resolution, plan: CoPlan) -> tuple[str | None, tuple[str, ...]]:
    """The env's ``min_driver``: the highest any of its stacks needs (TensorFlow's, each companion's
    build), and the reason where a companion raised it."""
    minimum = resolution.min_driver
    why = []
    for companion in plan.companions:
        if companion.min_driver and (minimum is None or driver_key(companion.min_driver) > driver_key(minimum)):
            why.append(
                f"min_driver {companion.min_driver}: {companion.framework} {companion.version} is a CUDA "
                f"{companion.cuda} build (TF {resolution.tensorflow} alone needs {resolution.min_driver or 'unknown'})."
            )
            minimum = companion.min_driver
    return minimum, tuple(why[-1:])


#: The commands whose output installs the plan's packages as one set (a lock, a bundle, an exported
#: script): two stacks would overwrite each other's files there, so these refuse a two-stack plan.
ONE_SET = ("lock", "bundle", "script")


def refuse_two_stacks(resolution, command: str) -> None:
    """``lock``, ``bundle`` and ``script`` refuse a two-stack plan (``companion-two-stacks``);
    ``plan`` shows it, ``create`` keeps the stacks apart, ``repair`` repairs TensorFlow's side."""
    if resolution.two_stacks and command in ONE_SET:
        plan = resolution.coplan
        raise ImpossibleError(
            "companion-two-stacks",
            f"{command}: TF {resolution.tensorflow} with {', '.join(plan.asked)} needs two CUDA stacks in one env "
            f"({', '.join(plan.stacks)}); installed as one set, {', '.join(plan.colliding) or 'their libraries'} "
            "would overwrite each other's files.",
            [
                *plan.ways_forward,
                f"`tfgpu-install create --tf {resolution.tensorflow} --with ...` keeps the two "
                "stacks apart in one env (TensorFlow's CUDA wheels in lib/tfgpu/cudaNN).",
            ],
        )
