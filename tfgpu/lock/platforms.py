"""The platforms a lock can target: conda-style names, the resolver's os/arch, uv's target.

One documented set of names (the ones conda uses, so a pip lock and a conda lock for the same
machine say the same thing): ``linux-64``, ``linux-aarch64``, ``win-64``, ``osx-arm64``,
``osx-64``. Anything else is a usage error that lists them.
"""

from __future__ import annotations

import sys
from functools import cached_property

from tfgpu.errors import UsageError
from tfgpu.records import record

# glibc 2.28 (RHEL 8, Debian 10, Ubuntu 20.04 and newer): TensorFlow's and NVIDIA's wheels are
# manylinux_2_27/2_17, so this admits all of them while staying portable across current distros.
_GLIBC = (2, 28)
_MACOS = (14, 0)


@record
class Platform:
    """A lock target."""

    name: str
    """The conda-style name: ``linux-64``."""
    os: str
    """The resolver's OS: ``linux``, ``windows``, ``macos``."""
    arch: str
    """The resolver's architecture: ``x86_64`` or ``aarch64``."""
    uv: str
    """uv's ``--python-platform`` value."""
    oses: tuple[str, ...]
    """``--os`` values that agree with this platform (``wsl2`` is Linux x86_64 too)."""

    @cached_property
    def wheel_platforms(self) -> tuple[str, ...]:
        """Wheel platform tags this target runs, best first."""
        if self.os == "linux":
            newest = _GLIBC[1]
            many = [f"manylinux_2_{minor}_{self.arch}" for minor in range(newest, 4, -1)]
            legacy = [f"manylinux2014_{self.arch}"] + (
                [f"manylinux2010_{self.arch}", f"manylinux1_{self.arch}"] if self.arch == "x86_64" else []
            )
            return (*many, *legacy)
        if self.os == "macos":
            # Start-up cost: a lock starts uv knowing only the platform's names; packaging's tags
            # (logging, sysconfig and platform with them) are for a bundle's wheels.
            from packaging import tags

            return tuple(tags.mac_platforms(_MACOS, "arm64" if self.arch == "aarch64" else "x86_64"))
        return ("win_amd64",)

    def wheel_rank(self, filename: str, python: str) -> int | None:
        """How good a wheel is for this platform and Python (lower is better); None if it does not run."""
        # Start-up cost: as in wheel_platforms, only a bundle ranks wheels.
        from packaging.utils import InvalidWheelFilename, parse_wheel_filename

        try:
            wheel_tags = parse_wheel_filename(filename)[3]
        except InvalidWheelFilename:
            return None
        ranks = _tag_ranks(self, python)
        found = [ranks[tag] for tag in wheel_tags if tag in ranks]
        return min(found) if found else None


PLATFORMS: dict[str, Platform] = {
    p.name: p
    for p in (
        Platform("linux-64", "linux", "x86_64", "x86_64-manylinux_2_28", ("linux", "wsl2")),
        Platform("linux-aarch64", "linux", "aarch64", "aarch64-manylinux_2_28", ("linux",)),
        Platform("win-64", "windows", "x86_64", "x86_64-pc-windows-msvc", ("windows",)),
        Platform("osx-arm64", "macos", "aarch64", "aarch64-apple-darwin", ("macos",)),
        Platform("osx-64", "macos", "x86_64", "x86_64-apple-darwin", ("macos",)),
    )
}

_RANKS: dict[tuple[str, str], dict] = {}


def _tag_ranks(platform: Platform, python: str) -> dict:
    key = (platform.name, python)
    if key not in _RANKS:
        version = tuple(int(part) for part in python.split("."))
        interpreter = f"cp{version[0]}{version[1]}"
        # Start-up cost: as in Platform.wheel_platforms, only a bundle ranks wheels.
        from packaging import tags

        ordered = [
            *tags.cpython_tags(version, platforms=platform.wheel_platforms),
            *tags.compatible_tags(version, interpreter, platform.wheel_platforms),
        ]
        _RANKS[key] = {tag: rank for rank, tag in reversed(list(enumerate(ordered)))}
    return _RANKS[key]


def parse_platform(value: str) -> Platform:
    """The :class:`Platform` named ``value``; a :class:`UsageError` (exit 2) naming the valid ones."""
    name = value.strip().lower()
    if name in PLATFORMS:
        return PLATFORMS[name]
    import difflib  # Start-up cost: only a name that is not a platform needs a near one.

    close = difflib.get_close_matches(name, list(PLATFORMS), n=1)
    hint = [f"Did you mean --platform {close[0]}?"] if close else []
    raise UsageError(
        "bad-platform",
        f"--platform {value!r} is not a platform tfgpu-install can lock for.",
        hint + [f"Use one of: {', '.join(PLATFORMS)} (conda's names; linux-64 is Linux x86_64, including WSL2)."],
    )


def host_platform() -> Platform | None:
    """The platform of the machine this runs on, if it is one of :data:`PLATFORMS`."""
    import platform as stdlib_platform  # Start-up cost: a lock for a named platform never asks this machine's.

    machine = stdlib_platform.machine().lower()
    arch = {"amd64": "x86_64", "x86_64": "x86_64", "arm64": "aarch64", "aarch64": "aarch64"}.get(machine)
    system = {"linux": "linux", "win32": "windows", "darwin": "macos"}.get(sys.platform)
    return next((p for p in PLATFORMS.values() if (p.os, p.arch) == (system, arch)), None)
