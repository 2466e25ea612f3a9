"""Whether a TensorFlow wheel has kernels for a GPU's compute capability.

TensorFlow's .bazelrc: "compute_XY enables PTX embedding in addition to SASS. PTX is forward
compatible beyond the current compute capability major release while SASS is only forward
compatible inside the current major release." [TF-BAZELRC]
"""

from __future__ import annotations

import enum

from tfgpu.records import record


class Coverage(enum.Enum):
    NATIVE = "native"
    """SASS for this GPU's major at or below its minor: runs as compiled."""
    PTX_JIT = "ptx-jit"
    """Only PTX of an older architecture: the driver JIT-compiles it (slow first run)."""
    TOO_OLD = "too-old"
    """Older than every architecture in the wheel."""
    NO_KERNELS = "no-kernels"
    """Between the wheel's architectures, with neither SASS nor usable PTX."""
    UNKNOWN = "unknown"
    """The wheel does not record its architectures (TF 2.0-2.2)."""


@record
class Arch:
    major: int
    minor: int
    ptx: bool

    @classmethod
    def parse(cls, text: str) -> Arch:
        kind, _, digits = text.partition("_")
        return cls(int(digits[:-1]), int(digits[-1]), ptx=(kind == "compute"))

    @property
    def cc(self) -> tuple[int, int]:
        return (self.major, self.minor)


def cc_tuple(cc: str) -> tuple[int, int]:
    major, _, minor = cc.partition(".")
    return (int(major), int(minor or 0))


def coverage(cc: str, capabilities: tuple[str, ...]) -> Coverage:
    """How a GPU of compute capability ``cc`` ("8.6") runs a wheel built for ``capabilities``."""
    if not capabilities:
        return Coverage.UNKNOWN
    target = cc_tuple(cc)
    archs = [Arch.parse(c) for c in capabilities]
    # compute_XY also embeds SASS for XY (TF's bazelrc), so every entry counts as SASS.
    if any(a.major == target[0] and a.minor <= target[1] for a in archs):
        return Coverage.NATIVE
    if any(a.ptx and a.cc <= target for a in archs):
        return Coverage.PTX_JIT
    if target < min(a.cc for a in archs):
        return Coverage.TOO_OLD
    return Coverage.NO_KERNELS


def lowest_cc(capabilities: tuple[str, ...]) -> str:
    """The lowest compute capability a wheel was built for, as "X.Y"."""
    arch = min((Arch.parse(c) for c in capabilities), key=lambda a: a.cc)
    return f"{arch.major}.{arch.minor}"


def describe(capabilities: tuple[str, ...]) -> str:
    """``sm_60, sm_70, sm_80, sm_89, compute_90`` -> ``6.0, 7.0, 8.0, 8.9 and PTX 9.0``."""
    archs = [Arch.parse(c) for c in capabilities]
    sass = [f"{a.major}.{a.minor}" for a in archs if not a.ptx]
    ptx = [f"{a.major}.{a.minor}" for a in archs if a.ptx]
    text = ", ".join(sass + ptx)
    return text + (f" (PTX for {', '.join(ptx)})" if ptx else "")
