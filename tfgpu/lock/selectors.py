"""What a lock allows around it, one rule for pip and conda locks: its recorded resolution is
parsed by the parsers of the user's own selectors, selectors given with ``--from-lock``/
``--from-bundle`` must agree with it, and it must be a GPU lock for this machine.
"""

from __future__ import annotations

import re

from tfgpu.doors.requirements import name_problem, spec_problem
from tfgpu.errors import ImpossibleError, UsageError
from tfgpu.lock.platforms import PLATFORMS, host_platform
from tfgpu.lock.recorded import Recorded
from tfgpu.resolver.request import (
    OSES,
    parse_arch,
    parse_choice,
    parse_compute_capability,
    parse_driver,
    parse_python,
    parse_tf_spec,
    parse_with,
)
from tfgpu.versions import is_canonical_release, specifier, version

_ACCELERATORS = ("cuda", "metal", "cpu")
_WHEEL_PLATFORM = re.compile(r"[a-z0-9_-]{1,64}", re.ASCII)
_COMPONENT = re.compile(r"\d{1,4}(?:\.\d{1,4}){0,3}")
_PINNED = re.compile(r"==[0-9][0-9A-Za-z.+!_-]*", re.ASCII)
"""One exact release (``==2.10.0``): no range, no wildcard, no arbitrary equality (``===``)."""
_WHEEL_ARCH = re.compile(r"(?:sm|compute)_[1-9][0-9]{1,2}", re.ASCII)
"""A recorded compute capability as the wheel lists it (``tfgpu.resolver.gpu.Arch.parse`` reads it)."""
_LISTS = ("requirements", "compute_capabilities", "companions", "conda_specs")
"""The record's fields that are lists of text (``requirements`` always there, the others optional)."""


def check_record(recorded: dict, *, path, mode: str, cpu_only: object, conda_keys: tuple[str, ...] = ()) -> Recorded:
    """A lock's recorded resolution as a :class:`Recorded`, every field parsed first by the parsers
    that parse the user's own selectors (``lock-malformed``, exit 2, otherwise). Both lock readers
    call this before any field is used: a checksum proves nothing (anyone can recompute it), and
    these fields become ``uv venv --python X``, ``--python-version X`` and file names (the bytecode
    store's marker). ``cpu_only``: the record's (a pip lock keeps it in its header).
    ``conda_keys``: the fields a conda lock's record always holds, even when null."""

    def refuse(key: str, why: str):
        return UsageError(
            "lock-malformed",
            f"{path}: the recorded {key} {str(recorded.get(key))[:80]!r} is not {why}.",
            ["Regenerate the lock with `tfgpu-install lock`; a lock's record is never edited by hand."],
        )

    def parsed(key: str, parser, why: str, optional: bool = False) -> None:
        value = recorded.get(key)
        if optional and value in (None, ""):
            return
        try:
            ok = isinstance(value, str) and parser(value) == value
        except UsageError:
            ok = False
        if not ok:
            raise refuse(key, why)

    if not isinstance(cpu_only, bool):
        raise refuse("cpu_only", "true or false")
    for key in conda_keys:
        if key not in recorded:
            raise refuse(key, "there (a conda lock records it, null when it has none)")
    parsed(
        "tensorflow",
        lambda v: v if parse_tf_spec(v) == v and is_canonical_release(v) else None,
        "a TensorFlow version (e.g. 2.15.1)",
    )
    parsed("python", parse_python, "a Python version written X.Y (e.g. 3.11)")
    parsed("mode", lambda v: v if v == mode else None, f"{mode!r} (this is a {mode} lock)")
    parsed("os", lambda v: parse_choice("--os", v, OSES), "one of " + ", ".join(OSES))
    parsed("arch", parse_arch, "x86_64 or aarch64")
    parsed("package", lambda v: None if name_problem(v) else v, "a distribution name")
    parsed("platform", lambda v: v if _WHEEL_PLATFORM.fullmatch(v) else None, "a wheel platform tag", optional=True)
    parsed("accelerator", lambda v: v if v in _ACCELERATORS else None, " or ".join(_ACCELERATORS), optional=True)
    for key in ("cuda", "cuda_build", "cudnn", "virtual_cuda"):
        parsed(key, lambda v: v if _COMPONENT.fullmatch(v) else None, "a version (e.g. 12.2)", optional=True)
    for key in ("min_driver", "toolkit_driver"):
        parsed(key, parse_driver, "an NVIDIA driver version", optional=True)
    if recorded.get("accelerator") in (None, "") or (recorded["accelerator"] == "cuda" and not cpu_only):
        # This format always records the accelerator, and a CUDA build its CUDA, cuDNN and driver
        # floor: without them a script said "needs NVIDIA driver >= None" (or another export
        # `bad-data`), an install "this plan is for linux" for a Linux lock.
        for key in ("accelerator", "cuda", "cudnn", "min_driver"):
            if recorded.get(key) in (None, ""):
                raise refuse(key, "there (a lock of a CUDA build records it)" if key != "accelerator" else "there")
    # Each reader checks the lists its own format writes, but a lock may carry the other format's
    # (a pip lock's conda_specs, a conda lock's compute_capabilities): the record is built from all
    # four, so each is a list of text here, whichever lock holds it, or absent.
    for key in _LISTS:
        required = key == "requirements" or key in conda_keys
        items = recorded.get(key)
        if (items is not None or required) and not (
            isinstance(items, list) and all(isinstance(item, str) for item in items)
        ):
            raise refuse(key, "a list of text")
    # A conda lock's specs are read back (`lock --check` looks for tensorflow's among them by its
    # first word): each is what the tool writes, a match spec through the requirement door.
    if any(spec_problem(spec) for spec in recorded.get("conda_specs") or ()):
        raise refuse("conda_specs", "a list of conda match specs (name version build)")
    for cc in recorded.get("compute_capabilities") or ():
        try:
            # the wheel's own form (sm_80, compute_90), the one every reader of the record parses
            if not isinstance(cc, str) or not _WHEEL_ARCH.fullmatch(cc):
                raise UsageError("lock-malformed", "not text")
            parse_compute_capability(cc)
        except UsageError:
            raise refuse("compute_capabilities", "a list of GPU compute capabilities") from None
    if recorded.get("companions"):
        try:
            parsed_companions = parse_with(recorded["companions"])
        except UsageError:
            raise refuse("companions", "a list of pinned torch/jax requirements") from None
        # A lock pins: the tool records each companion as the one release it planned
        # (``torch==2.10.0``). A name alone or a range would let `lock --check` plan whatever is
        # newest today and call the lock current, and an install take a release nobody reviewed.
        for _framework, _extra, spec, typed in parsed_companions:
            if not _PINNED.fullmatch(spec):
                raise UsageError(
                    "lock-malformed",
                    f"{path}: the recorded companion {typed[:80]!r} is not pinned to one release "
                    "(a lock records each --with companion as name==version, e.g. torch==2.10.0).",
                    ["Regenerate the lock with `tfgpu-install lock`; a lock's record is never edited by hand."],
                )
    return Recorded.from_file(recorded, cpu_only=cpu_only)


def check_selectors(recorded: Recorded, *, mode: str, python: str, platform: str, selectors, path) -> None:
    """Selectors given with --from-lock/--from-bundle must agree with the lock (UsageError, exit 2);
    the same rule for pip and conda locks: ``--tf`` as a version, a series or a PEP 440 range,
    ``--python``/``--os``/``--arch`` as the lock has them, ``--driver``/``--gpu-cc`` never (the lock
    fixes the build; ``verify`` checks the GPU)."""
    target = PLATFORMS[platform]
    problems = []
    tf = parse_tf_spec(selectors.tf)
    if tf is not None and not tf_agrees(tf, recorded.tensorflow):
        problems.append(f"--tf {tf} (the lock has TensorFlow {recorded.tensorflow})")
    if selectors.mode and selectors.mode.lower() != mode:
        problems.append(f"--mode {selectors.mode} (the lock is a {mode} lock)")
    wanted = parse_python(selectors.python)
    if wanted is not None and wanted != python:
        problems.append(f"--python {wanted} (the lock is for Python {python})")
    target_os = parse_choice("--os", selectors.os, OSES)
    if target_os is not None and target_os not in target.oses:
        problems.append(f"--os {target_os} (the lock is for {target.name})")
    arch = parse_arch(selectors.arch)
    if arch is not None and arch != target.arch:
        problems.append(f"--arch {arch} (the lock is for {target.name})")
    for flag in ("driver", "gpu_cc"):
        if getattr(selectors, flag):
            problems.append(f"--{flag.replace('_', '-')} (a lock fixes the build; `verify` checks the GPU)")
    if problems:
        raise UsageError(
            "conflicting-options",
            f"With a lock, the lock decides what is built; these options "
            f"disagree with {path}: " + "; ".join(problems) + ".",
            ["Drop them, or write a new lock with `tfgpu-install lock` for what you want."],
        )


def tf_agrees(spec: str, locked: str) -> bool:
    """Whether a --tf value (a version, a series or a range) admits the locked version."""
    if spec == "latest":
        return False
    if spec[0] in "<>=!~":
        parsed = version(locked)  # bounded first; packaging's set is handed the text
        return specifier(spec).contains(None if parsed is None else str(parsed), prereleases=True)
    return locked == spec or locked.startswith(spec + ".")


def check_platform(lock) -> None:
    """The lock must be a GPU lock for this machine's platform (ImpossibleError, exit 3)."""
    here = host_platform()
    name = lock.header.platform
    if lock.header.cpu_only:
        raise ImpossibleError(
            "lock-cpu-only",
            f"{lock.path} is a CPU-only lock (locked with --allow-cpu for {name}); "
            "tfgpu-install builds GPU environments only.",
            [f"Install it with plain pip: pip install --require-hashes -r {lock.path}"],
        )
    if here is None or here.name != name:
        raise ImpossibleError(
            "lock-wrong-platform",
            f"{lock.path} is for {name}; this machine is {here.name if here else 'another platform'}.",
            [
                f"Run it on a {name} machine, or write a lock for this one: --platform "
                f"{here.name if here else 'linux-64'}."
            ],
        )
