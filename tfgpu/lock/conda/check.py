"""``lock --check`` of a conda-lock.yml: each platform solved again from the recorded channels
with the recorded ``__cuda``, its inputs compared with ``content_hash`` and its packages with the
lock's entries. The comparison itself is ``tfgpu.lock.check``'s, shared with pip locks."""

from __future__ import annotations

from pathlib import Path

from tfgpu.doors import quoting
from tfgpu.doors.paths import cache_root
from tfgpu.engines import rattler_engine
from tfgpu.errors import ImpossibleError, OperationError
from tfgpu.lock.check import Check, input_changes, package_changes, target_today
from tfgpu.lock.conda import write
from tfgpu.lock.platforms import parse_platform
from tfgpu.lock.recorded import Recorded
from tfgpu.lock.tools import tools


def check(lock, reporter=None) -> Check:
    """Whether a conda lock (read and checked by :func:`tfgpu.lock.conda.read.read`) is current."""

    metadata = lock.lockfile.metadata
    platforms = list(metadata.platforms)
    channels = list(lock.channels())
    first = lock.resolution(platforms[0])
    found = Check(Path(lock.path), "conda", platforms, first.tensorflow, first.python)
    found.regenerate = regenerate_command(lock.path, platforms, channels, first)
    runner, uv, _ = tools("lock-check")
    for name in platforms:
        recorded = lock.resolution(name)
        platform = parse_platform(name)
        old_inputs = {
            "format": write.FORMAT,
            "specs": list(recorded.conda_specs),
            "pip": list(recorded.requirements),
            "channels": channels,
            "cuda": recorded.virtual_cuda,
            "glibc": rattler_engine.GLIBC if name.startswith("linux") else None,
        }
        try:
            # A locked conda spec of tensorflow itself: the lock took conda-forge's build, and is checked as such.
            source = (
                "conda-forge" if any(str(spec).split()[0] == "tensorflow" for spec in recorded.conda_specs) else None
            )
            _, resolution, cpu_only = target_today(
                recorded.tensorflow, "conda", recorded.python, recorded.os, name, recorded.cpu_only, source
            )
        except (ImpossibleError, OperationError) as error:
            found.add(
                "inputs",
                f"this tfgpu-install no longer resolves TF {recorded.tensorflow} for {name}: {error.message}",
                code=error.code,
            )
            continue
        if reporter is not None:
            reporter.note(f"re-solving {name} from {', '.join(channels)}")
        entries, inputs = write.lock_platform(
            platform,
            resolution,
            cpu_only,
            channels,
            runner=runner,
            uv=uv,
            cache=cache_root(),
            cuda=recorded.virtual_cuda,
        )
        if write.inputs_digest(inputs) != metadata.content_hash.get(name):
            input_changes(found, old_inputs, dict(inputs))
            if write.inputs_digest(old_inputs) != metadata.content_hash.get(name):
                found.add("inputs", f"{name}: the recorded content_hash does not match the recorded inputs")
        before = {
            (p.manager, str(p.name)): (str(p.version), frozenset({p.hash.sha256 or ""}))
            for p in lock.lockfile.package
            if p.platform == name
        }
        after = {(e["manager"], e["name"]): (e["version"], frozenset({e["hash"].get("sha256", "")})) for e in entries}
        found.packages += len(before)
        package_changes(
            found, name, {f"{m}:{n}": v for (m, n), v in before.items()}, {f"{m}:{n}": v for (m, n), v in after.items()}
        )
    return found


def regenerate_command(path, platforms: list[str], channels: list[str], recorded: Recorded) -> str:
    """The command that writes this conda lock again, for the same target (``--no-detect``: the host plays no part)."""
    argv = ["tfgpu-install", "lock", "--tf", recorded.tensorflow, "--mode", "conda", "--python", recorded.python]
    argv += ["--os", recorded.os, *(f for name in platforms for f in ("--platform", name))]
    argv += [*(f for channel in channels for f in ("--channel", channel)), "--no-detect"]
    return quoting.sh_join([*argv, *(("--allow-cpu",) if recorded.cpu_only else ()), "-o", str(path)])
