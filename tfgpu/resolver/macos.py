"""TensorFlow on macOS: which TensorFlow package and tensorflow-metal to pair, from the wheels PyPI has.

The pairing comes from tensorflow-metal's published compatibility table (metal.toml) and Apple's
rule (TF <= 2.12: tensorflow-macos; from 2.13: tensorflow); whether a pin exists, and for which
Pythons, comes from the wheels themselves (macos_wheels.toml, generated from PyPI, and
tensorflow.toml). A pin PyPI has no wheel for is never planned.
"""

from __future__ import annotations

from tfgpu.data import derived
from tfgpu.records import record, replace
from tfgpu.resolver import tables
from tfgpu.versions import parse


@record
class Pairing:
    """What a macOS plan installs: the TF distribution, the metal row (``python`` = usable Pythons)."""

    row: tables.MetalRow | None
    problem: str = ""
    alternatives: tuple[str, ...] = ()


@derived
def _wheels() -> dict[tuple[str, str], dict]:
    return {(row["project"], row["version"]): row for row in tables.load_toml("macos_wheels.toml").get("wheels", [])}


def wheel_pythons(project: str, version: str, platform: str) -> tuple[str, ...] | None:
    """The CPython minors of ``project==version``'s wheels for ``platform``; None: no such version on PyPI."""
    row = _wheels().get((project, version))
    if row is None or row.get("yanked"):
        return None
    return tuple(row.get(platform, ()))


def _published(project: str, platform: str) -> list[str]:
    versions = [
        v for (p, v), row in _wheels().items() if p == project and row.get(platform) and not row.get("prerelease")
    ]
    try:
        return sorted(versions, key=parse)
    except ValueError:
        return versions


def pair(release: tables.Release, platform: str) -> Pairing:
    """The tensorflow-metal pairing of ``release`` on ``platform`` (macos_x86_64 / macos_arm64)."""
    row = next((r for r in tables.metal() if release.version in r.tensorflow), None)
    if row is None:
        return Pairing(
            None,
            f"tensorflow-metal, Apple's GPU plugin, publishes no pairing for TF {release.version}.",
            ("On Apple silicon, TF 2.13-2.17 pair with tensorflow-metal 1.1.0.",),
        )
    metal = wheel_pythons("tensorflow-metal", row.metal, platform)
    if not metal:
        have = ", ".join(_published("tensorflow-metal", platform)[-3:]) or "none"
        return Pairing(
            None,
            f"tensorflow-metal {row.metal}, the plugin published for TF {row.tensorflow}, has no "
            f"{platform} wheels on PyPI (newest with {platform} wheels: {have}).",
        )
    if row.package == "tensorflow":
        wheel = release.wheels.get(platform)
        package = wheel.python if wheel else None
    else:
        package = wheel_pythons(row.package, str(release.version), platform)
    if not package:
        published = _published(row.package, platform)
        same = [v for v in published if v.startswith(f"{release.series}.")]
        hint = (f"Use the {release.series} release PyPI has: --tf {same[-1]}.",) if same else ()
        return Pairing(
            None,
            f"{row.package} {release.version} has no {platform} wheels on PyPI "
            f"({row.package} versions with {platform} wheels: {', '.join(published) or 'none'}).",
            hint,
        )
    both = tuple(p for p in package if p in metal)
    if not both:
        return Pairing(
            None,
            f"{row.package} {release.version} ({', '.join(package)}) and tensorflow-metal "
            f"{row.metal} ({', '.join(metal)}) have no CPython in common on {platform}.",
        )
    return Pairing(replace(row, python=both, x86_64=platform == "macos_x86_64"))
