"""Whether a torch/JAX release can run on the target: its build's driver floor and GPU code.

Owns the two checks a companion must pass besides its pins: the NVIDIA driver its CUDA build needs
(``driver`` of its ``companions.toml`` row, from ``cuda.toml``: NVIDIA's compatibility table) and
the GPU architectures its build carries (``gpu_archs``: cubins and PTX read from the wheel, or
``gpu_range``: the range the wheel states for its build). A row whose wheel states no
architectures is not refused on them; the plan says they were not checked.

Pure: the row and the target are all it reads.
"""

from __future__ import annotations

from tfgpu.records import replace
from tfgpu.resolver.drivers import driver_key, driver_need
from tfgpu.resolver.gpu import Arch, Coverage, cc_tuple, coverage

RUNS = (Coverage.NATIVE, Coverage.PTX_JIT)


def gpu_verdict(row, cc: str) -> bool | None:
    """True/False: the build carries code for ``cc`` or not; None: the wheel does not say."""
    if row.gpu_archs:
        return coverage(cc, tuple(row.gpu_archs)) in RUNS
    if len(row.gpu_range) == 2:
        low, high = (cc_tuple(c) for c in row.gpu_range)
        return low <= cc_tuple(cc) <= high
    return None


def carried(row) -> str:
    """What GPU code the row carries, in words."""
    if row.gpu_archs:
        archs = sorted((Arch.parse(a) for a in row.gpu_archs), key=lambda a: a.cc)
        sass = [f"{a.major}.{a.minor}" for a in archs if not a.ptx]
        ptx = [f"{a.major}.{a.minor}" for a in archs if a.ptx]
        return f"compute capability {', '.join(sass)}" + (f" and PTX {', '.join(ptx)}" if ptx else "")
    if len(row.gpu_range) == 2:
        return f"compute capability {row.gpu_range[0]} to {row.gpu_range[1]}"
    return "architectures its wheel does not state"


def for_os(row, os: str):
    """``row`` with the driver floor of ``os``: the table records Linux's; inside WSL2 the driver is
    Windows' and its floor for that CUDA is ``cuda.toml``'s (NVIDIA's Windows minimum, WSL2's own)."""
    if os == "linux" or not row.cuda:
        return row
    need = driver_need(row.cuda, os)
    return replace(row, driver=need.minimum if need else "")


def why_not(row, driver: str | None, ccs: tuple[str, ...]) -> list[str]:
    """Why ``row`` cannot run on a target with ``driver`` and GPUs ``ccs`` ([] = it can, as far as
    its wheel says)."""
    why = []
    if driver and row.driver and driver_key(driver) < driver_key(row.driver):
        why.append(
            f"{row.label} is a CUDA {row.cuda} build: it needs an NVIDIA driver >= {row.driver}, "
            f"this target has {driver}"
        )
    for cc in ccs:
        if gpu_verdict(row, cc) is False:
            why.append(
                f"{row.label} carries GPU code for {carried(row)} (read from {row.archs_from}); none runs on {cc}"
            )
    return why


def unchecked(row, ccs: tuple[str, ...]) -> list[str]:
    """The GPUs of ``ccs`` the row's wheel says nothing about."""
    return [cc for cc in ccs if gpu_verdict(row, cc) is None]
