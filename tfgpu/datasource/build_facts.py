"""What a torch or JAX wheel was built for, read from the wheel itself: its CUDA and its GPU code.

Owns turning members of a companion wheel (fetched by range requests, ``tfgpu.datasource.companions``)
into three facts a plan needs besides the pins: the CUDA the build was made with, the driver that
CUDA needs (the tool's own table, ``cuda.toml``: NVIDIA's compatibility table) and the GPU
architectures the build carries code for.

* torch: ``torch/version.py`` states the CUDA of the build (``cuda = '13.2'``); since 2.11
  ``torch/cuda/__init__.py`` states the architectures of every CUDA build PyTorch releases
  (``PYTORCH_RELEASES_CODE_CC``, keyed by CUDA and host arch; the warning a GPU without kernels
  gets is made from it); 2.8 to 2.10 state the range of each build (``CUDA_ARCHES_SUPPORTED``:
  ``{"min": 70, "max": 120}``, what ``_check_capability`` refuses outside). Older releases state
  neither: their list exists only inside ``libtorch_cuda.so`` (600 MB deflated, never fetched), so
  their rows say the architectures are unknown rather than guess.
* JAX: the CUDA plugin's kernel libraries (``jax_cudaNN_plugin/_prng.so`` and its siblings) carry
  fatbins; each fatbin entry names its kind (cubin or PTX) and its SM. One build compiles all of a
  plugin's kernels for one list, so the smallest member that has a fatbin tells it.

Both sources are Python text or binary from a hostile server: Python is parsed with :mod:`ast` and
only literals are read (never executed); fatbins are scanned with every offset bounded.
"""

from __future__ import annotations

import ast
import re
import struct

from tfgpu.datasource.http import SourceError
from tfgpu.doors import pysource
from tfgpu.resolver.drivers import driver_need

#: A fatbin container's magic (little-endian ``0xBA55ED50``) and an entry's kinds.
FATBIN_MAGIC = b"\x50\xed\x55\xba"
FATBIN_PTX, FATBIN_CUBIN = 1, 2
#: At most this many entries are read from one container (a real one holds one per target).
MAX_FATBIN_ENTRIES = 4096


def torch_cuda(version_py: str) -> str:
    """The ``cuda`` that ``torch/version.py`` assigns ('' for a CPU build or none stated)."""
    value = _assigned(_parse(version_py), "cuda")
    return value if isinstance(value, str) else ""


def torch_archs(cuda_init: str, cuda: str, host: str = "x86_64") -> tuple[list[str], list[str], str]:
    """``(sm list, [min, max] range, where)`` for the build of ``cuda`` from ``torch/cuda/__init__.py``:
    the exact list of ``PYTORCH_RELEASES_CODE_CC`` where the release has it, else the range of
    ``CUDA_ARCHES_SUPPORTED``; ``([], [], "")`` when the file states neither for this CUDA."""
    if not cuda:
        return [], [], ""
    tree = _parse(cuda_init)
    table = _assigned(tree, "PYTORCH_RELEASES_CODE_CC")
    codes, where = None, "PYTORCH_RELEASES_CODE_CC"
    if isinstance(table, dict) and isinstance(table.get(cuda), dict):
        codes = table[cuda].get(host)
    elif isinstance(table, dict):
        # 2.11 and 2.12 key it by CUDA alone: the union of the x86_64 and aarch64 builds. A GPU
        # outside the union has no kernels on either; one inside may be an aarch64-only target.
        codes, where = table.get(cuda), "PYTORCH_RELEASES_CODE_CC (x86_64 and aarch64 together)"
    if isinstance(codes, set | list | tuple) and codes and all(isinstance(c, int) and 0 < c < 1000 for c in codes):
        return [f"sm_{c}" for c in sorted(codes)], [], where
    ranges = _assigned(tree, "CUDA_ARCHES_SUPPORTED")
    if isinstance(ranges, dict) and isinstance(ranges.get(cuda), dict):
        low, high = ranges[cuda].get("min"), ranges[cuda].get("max")
        if isinstance(low, int) and isinstance(high, int) and 0 < low <= high:
            return [], [_cc(low), _cc(high)], "CUDA_ARCHES_SUPPORTED"
    return [], [], ""


def _cc(code: int) -> str:
    """``75`` -> ``"7.5"``, ``120`` -> ``"12.0"`` (SM numbers are major*10 + minor)."""
    return f"{code // 10}.{code % 10}"


def _parse(source: str) -> ast.AST | None:
    """``source`` parsed (never run); None when it is not Python."""
    return pysource.parse(source)


def _assigned(tree: ast.AST | None, name: str):
    """The literal value of the first assignment to ``name`` anywhere in ``tree``, or None."""
    if tree is None:
        return None
    value: ast.expr | None
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            value = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            value = node.value
        else:
            continue
        found = pysource.literal(value)
        return None if found is pysource.NOT_LITERAL else found
    return None


def fatbin_archs(data: bytes) -> list[str]:
    """The targets of every fatbin in a shared library's bytes: ``sm_NN`` for a cubin, ``compute_NN``
    for PTX (which the driver compiles for that SM and newer), sorted and without repeats."""
    found: set[tuple[int, int]] = set()
    position = 0
    while (start := data.find(FATBIN_MAGIC, position)) >= 0:
        position = start + 4
        if start + 16 > len(data):
            break
        _, _, header_size, fat_size = struct.unpack_from("<IHHQ", data, start)
        entry, end = start + header_size, min(len(data), start + header_size + fat_size)
        for _ in range(MAX_FATBIN_ENTRIES):
            if header_size < 16 or entry + 32 > end:
                break
            kind, _, entry_header, payload = struct.unpack_from("<HHIQ", data, entry)
            sm = struct.unpack_from("<I", data, entry + 28)[0]
            if kind in (FATBIN_PTX, FATBIN_CUBIN) and 10 <= sm < 1000:
                found.add((sm, kind))
            if entry_header < 32:
                break
            entry += entry_header + payload
    return [f"{'sm' if kind == FATBIN_CUBIN else 'compute'}_{sm}" for sm, kind in sorted(found)]


def jax_cuda(pins: dict[str, str]) -> str:
    """The oldest CUDA runtime a JAX plugin accepts (``nvidia-cuda-runtime>=13.0.48`` -> ``13.0``):
    the plugin runs on any runtime of its major from there, so that is the build's CUDA floor."""
    for name in ("nvidia-cuda-runtime", "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu13", "nvidia-cublas"):
        if found := re.search(r">=\s*(\d+)\.(\d+)", pins.get(name, "")):
            return f"{found.group(1)}.{found.group(2)}"
    return ""


def driver_floor(cuda: str) -> tuple[str, list[str]]:
    """``(the Linux driver a build of CUDA ``cuda`` needs, the sources that say so)`` from the tool's own
    CUDA table (``cuda.toml``: NVIDIA's release notes and minor-version-compatibility table)."""
    if not cuda:
        return "", []
    need = driver_need(cuda, "linux")
    if need is None:
        raise SourceError(f"CUDA {cuda}: no row in cuda.toml; update the CUDA table before the companions")
    return need.minimum, list(need.source)
