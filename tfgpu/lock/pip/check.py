"""``lock --check`` of a pip lock: the recorded requirements locked again by this tool (inputs),
then re-resolved against the recorded index (packages). The comparison itself is
``tfgpu.lock.check``'s, shared with conda locks."""

from __future__ import annotations

import re
from pathlib import Path

from tfgpu.doors.requirements import canonical
from tfgpu.errors import ImpossibleError, OperationError
from tfgpu.lock.check import Check, input_changes, package_changes, target_today
from tfgpu.lock.pip import lockfile
from tfgpu.lock.platforms import parse_platform
from tfgpu.lock.resolving import compile_pins
from tfgpu.lock.tools import tools


def check(lock, reporter=None) -> Check:
    """Whether a pip lock (read and checked by :func:`tfgpu.lock.pip.lockfile.read`) is current."""
    header, recorded = lock.header, lock.resolution
    found = Check(Path(lock.path), "pip", [header.platform], recorded.tensorflow, header.python)
    found.regenerate = lockfile.regenerate_command(header, str(lock.path))
    platform = parse_platform(header.platform)
    requirements = [canonical(text, what=f"The lock {lock.path}") for text in recorded.requirements]
    old = lockfile.lock_inputs(requirements, header.python, header.python_platform, header.index)
    try:
        _, resolution, _ = target_today(
            recorded.tensorflow,
            "pip",
            header.python,
            recorded.os,
            platform.name,
            header.cpu_only,
            companions=recorded.companions,
        )
        new = lockfile.lock_inputs(list(resolution.packages.pip), resolution.python, platform.uv, header.index)
        if lockfile.inputs_digest(new) != header.inputs_sha256:
            input_changes(found, old, new)
    # Only "no longer resolves" is a change; a record the parsers refuse (UsageError) ends the check.
    except (ImpossibleError, OperationError) as error:
        found.add(
            "inputs",
            f"this tfgpu-install no longer resolves TF {recorded.tensorflow} for {platform.name}: {error.message}",
            code=error.code,
        )
    if reporter is not None:
        reporter.note(
            f"re-resolving {len(old['requirements'])} requirements for {platform.name} against {header.index}"
        )
    runner, uv, cache = tools("lock-check")
    body, _ = compile_pins(
        old["requirements"],
        platform,
        header.python,
        runner=runner,
        uv=uv,
        cache_dir=cache,
        index=header.index,
        refresh=True,
        with_pylock=False,
    )
    before, after = _pinned(lock.body), _pinned(body)
    found.packages = len(before)
    package_changes(found, platform.name, before, after)
    return found


def _pinned(body: str) -> dict[str, tuple[str, frozenset]]:
    """``{name: (version, hashes)}`` of a hashed requirements body."""
    found: dict[str, tuple[str, frozenset]] = {}
    name = None
    for line in body.splitlines():
        pin = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s\\;]+)", line)
        if pin:
            name = pin.group(1).lower().replace("_", "-")
            found[name] = (pin.group(2), frozenset())
        for digest in re.findall(r"--hash=sha256:([0-9a-f]{64})", line):
            if name is not None:
                found[name] = (found[name][0], found[name][1] | {digest})
    return found
