"""Which NVIDIA driver a CUDA build needs, on which OS.

NVIDIA's rule (CUDA release notes, Table 3, and the minor-version-compatibility page):
before CUDA 11 an application needs at least the driver its toolkit shipped with; from CUDA 11 on,
any driver at or above the major's compatibility floor runs it, except for PTX that must be
JIT-compiled by the driver, which needs the toolkit's own minimum.
"""

from __future__ import annotations

from tfgpu.records import record
from tfgpu.resolver import tables
from tfgpu.versions import parse


def driver_key(version: str) -> tuple[int, ...]:
    """``"535.104.05"`` -> ``(535, 104, 5)``; comparable across 1-3 components."""
    parts = [int(p) for p in version.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def driver_at_least(found: str, needed: str) -> bool:
    """Whether driver ``found`` is ``needed`` or newer."""
    return driver_key(found) >= driver_key(needed)


@record
class DriverNeed:
    """The driver a CUDA build needs on one OS, and why."""

    cuda: str
    minimum: str
    """The lowest driver that runs it (the plan's ``min_driver``)."""
    toolkit_minimum: str
    """The driver the toolkit itself shipped with; below it, PTX JIT may fail."""
    rule: str
    """One sentence: which rule gave ``minimum``."""
    source: tuple[str, ...]


def toolkit_for(cuda: str) -> tables.Toolkit | None:
    """The toolkit row for a build's CUDA: the exact release, or the first release of its minor."""
    wanted = parse(cuda)
    rows = tables.toolkits()
    exact = [t for t in rows if t.version == wanted and len(cuda.split(".")) >= 3]
    if exact:
        return exact[0]
    same_minor = [t for t in rows if t.version.release[:2] == wanted.release[:2]]
    return same_minor[0] if same_minor else None


def driver_need(cuda: str, os: str) -> DriverNeed | None:
    """The minimum driver for a build made with ``cuda`` on ``os`` (linux, wsl2, windows)."""
    toolkit = toolkit_for(cuda)
    if toolkit is None:
        return None
    column = "linux" if os == "linux" else "windows"
    own = getattr(toolkit, column)
    if not own:
        return None
    facts = tables.cuda_facts()
    floor = facts.mvc.get(parse(cuda).major)
    floor_value = getattr(floor, column, "") if floor else ""
    source = toolkit.source
    if floor_value and driver_key(floor_value) < driver_key(own):
        minimum = floor_value
        rule = (
            f"CUDA {cuda} runs on any driver >= {floor_value} by minor-version compatibility "
            f"(the toolkit itself shipped with {own})."
        )
        source = tuple(dict.fromkeys(source + floor.source))
    else:
        minimum = own
        rule = f"CUDA {cuda} needs the driver its toolkit shipped with, >= {own}."
    # WSL2: the floor TF's docs gave for builds of this CUDA major, from the docs of their time.
    wsl = facts.wsl2_driver.get(parse(cuda).major)
    if os == "wsl2" and wsl is not None and wsl.min_driver and driver_key(wsl.min_driver) > driver_key(minimum):
        minimum = wsl.min_driver
        rule += f" WSL2 needs a Windows driver >= {minimum}."
        source = tuple(dict.fromkeys(source + wsl.source))
    return DriverNeed(cuda=cuda, minimum=minimum, toolkit_minimum=own, rule=rule, source=source)


def cuda_for_driver(driver: str, os: str = "linux") -> str | None:
    """The newest CUDA ``X.Y`` whose toolkit's own minimum ``driver`` meets: what conda's ``__cuda``
    virtual package would report for that driver. None when the driver is older than every row."""
    column = "linux" if os in ("linux", "wsl2") else "windows"
    best = None
    for toolkit in tables.toolkits():
        own = getattr(toolkit, column)
        if own and driver_at_least(driver, own) and (best is None or toolkit.version > best):
            best = toolkit.version
    return f"{best.major}.{best.minor}" if best else None
