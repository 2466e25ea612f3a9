"""The guards of an install against two CUDA stacks in one env: never a silent overwrite.

NVIDIA's CUDA 12 and CUDA 13 wheels own the same paths (``nvidia/cudnn/lib/libcudnn*.so.9``,
``nvidia/nccl/lib/libnccl.so.2``, nvSHMEM, cuSPARSELt); uv and pip unpack both without a word and
the file on disk is whichever came last. This module owns telling the stacks apart in resolved pins
(:func:`stacks_of_pins`), cutting TensorFlow's stack out of a compiled lock so pip mode installs it
into a directory of its own (:func:`split_lock`, :data:`APART`), refusing what cannot be kept apart
(:func:`refuse_two_stacks`, :func:`refuse_into_other_stack`: ``two-cuda-stacks``, exit 3) and the
check after every install (:func:`refuse_files_owned_twice`: ``files-owned-twice``, exit 1; the
build or repair is rolled back), which also covers a lock or a bundle that pins both stacks.
"""

from __future__ import annotations

import re
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from tfgpu.doctor.ownership import distributions, shared_files, stack_of
from tfgpu.errors import ImpossibleError, OperationError

_SUFFIXED = re.compile(r"^nvidia-[a-z0-9-]+?-cu(\d{1,3})$")
_JAX_PLUGIN = re.compile(r"^jax-cuda(\d{1,3})-(plugin|pjrt)$")
WAYS = [
    "Choose versions of the frameworks that share one CUDA stack (e.g. TensorFlow 2.20 with torch 2.10, or "
    "TensorFlow 2.21 with jax[cuda12]); `tfgpu-install plan` shows what TensorFlow needs.",
    "Keep TensorFlow and the other framework in separate environments, side by side.",
    "Install the other framework's CUDA 12 build (for torch, its cu12x index) so one stack serves both.",
]


def stacks_of_pins(pins: list[str]) -> dict[int, list[str]]:
    """CUDA major -> the pins that bring it: ``nvidia-*-cuNN`` wheels, ``cuda-toolkit==NN.*`` (torch's
    CUDA 13 builds pull their libraries through it) and ``jax-cudaNN-plugin``/``-pjrt``."""
    found: dict[int, list[str]] = {}
    for pin in pins:
        try:
            requirement = Requirement(pin.split(";")[0].strip())
        except InvalidRequirement:
            continue
        name = re.sub(r"[-_.]+", "-", requirement.name).lower()
        match = _SUFFIXED.match(name) or _JAX_PLUGIN.match(name)
        major = int(match.group(1)) if match else None
        if name == "cuda-toolkit":
            exact = [s.version for s in requirement.specifier if s.operator == "=="]
            major = int(exact[0].split(".")[0]) if exact and re.fullmatch(r"\d{1,3}", exact[0].split(".")[0]) else None
        if major is not None:
            found.setdefault(major, []).append(pin)
    return dict(sorted(found.items()))


def refuse_two_stacks(pins: list[str], where: str) -> None:
    """Raise ``two-cuda-stacks`` when the resolved ``pins`` hold more than one CUDA stack."""
    found = stacks_of_pins(pins)
    if len(found) < 2:
        return
    listed = "; ".join(f"CUDA {major}: {', '.join(sorted(items)[:4])}" for major, items in found.items())
    raise ImpossibleError(
        "two-cuda-stacks",
        f"The packages resolved for {where} hold {len(found)} CUDA stacks ({listed}). Their wheels own the "
        "same files (nvidia/cudnn/lib/libcudnn*.so.9, nvidia/nccl/lib/libnccl.so.2), so installing both would "
        "silently overwrite one stack's libraries with the other's; this tool does not build such an env yet.",
        list(WAYS),
    )


def owned_twice(site: Path) -> frozenset[str]:
    """The paths two distributions' RECORDs list with different sha256 (RECORDs only: cheap enough to
    take before an install, to tell what the install itself did)."""
    digests: dict[str, set[str]] = {}
    for dist in distributions(site):
        for path, digest in dist.files.items():
            digests.setdefault(path, set()).add(digest)
    return frozenset(path for path, found in digests.items() if len(found) > 1)


def refuse_files_owned_twice(site: Path, where: str, already: frozenset[str] = frozenset()) -> None:
    """The post-install check: raise ``files-owned-twice`` when two distributions own a file with
    different bytes in ``site`` (one of them silently lost it); ``where`` names the env. ``already``:
    paths that were owned twice before this install (a repair of a mixed env does not answer for them)."""
    if not owned_twice(site) - already:
        return
    lost = [item for item in shared_files(site) if item.differ and item.path not in already]
    shown = "; ".join(
        f"{item.path} ({' and '.join(label for label, _ in item.owners)}; on disk: "
        f"{', '.join(item.winners) or 'neither'}'s bytes)"
        for item in lost[:5]
    )
    more = f" and {len(lost) - 5} more" if len(lost) > 5 else ""
    raise OperationError(
        "files-owned-twice",
        f"The install into {where} left {len(lost)} file(s) owned by two distributions with different bytes: "
        f"{shown}{more}. One distribution's copy was silently lost to the other, so the change was rolled back.",
        list(WAYS[:2]),
    )


def refuse_into_other_stack(site: Path, names: list[str], where: str) -> None:
    """Raise ``two-cuda-stacks`` before an install into an existing env (repair) when a CUDA wheel to
    install, ``nvidia-<x>-cuNN``, would unpack into ``nvidia/<x>/`` where a distribution of another
    stack keeps its files (NVIDIA's wheels of both majors use that one directory for cuDNN, NCCL,
    nvSHMEM and cuSPARSELt): checked before, because taking such an install back afterwards would
    delete the other distribution's file along with the added one."""
    dists = distributions(site)
    clashes = []
    for name in names:
        match = _SUFFIXED.match(re.sub(r"[-_.]+", "-", name).lower())
        if not match:
            continue
        major = int(match.group(1))
        directory = "nvidia/" + match.group(0).removeprefix("nvidia-").rsplit("-cu", 1)[0].replace("-", "_") + "/"
        for dist in dists:
            other = stack_of(dist)
            if other not in (None, major) and any(path.startswith(directory) for path in dist.files):
                clashes.append(f"{name} (CUDA {major}) into {directory}, which {dist.label} (CUDA {other}) holds")
    if clashes:
        raise ImpossibleError(
            "two-cuda-stacks",
            f"Repairing {where} would install {'; '.join(clashes)}: one stack's libraries would silently "
            "overwrite the other's. Nothing was changed.",
            list(WAYS),
        )


APART = "lib/tfgpu/cuda{major}"
"""Where TensorFlow's own CUDA wheels go, env-relative, when the env holds another stack too."""
APART_PINS = "cuda-apart.txt"
"""Beside the env's ``tfgpu/requirements.txt``: the pins installed into :data:`APART` (hashes kept)."""


def split_lock(text: str, major: int) -> tuple[str, str]:
    """A compiled requirements file (``uv pip compile`` output: a pin at the start of a line, its
    ``--hash`` and ``# via`` lines indented below it) cut in two: (everything but the CUDA ``major``
    stack's pins, those pins)."""
    blocks: list[list[str]] = [[]]
    for line in text.splitlines(keepends=True):
        if line[:1] not in (" ", "\t", "") and not line.startswith("#"):
            blocks.append([])
        blocks[-1].append(line)
    keep: list[str] = []
    apart: list[str] = []
    for block in blocks:
        head = block[0].split()[0].rstrip("\\") if block and block[0].strip() else ""
        found = stacks_of_pins([head]) if head and not head.startswith("#") else {}
        (apart if major in found else keep).append("".join(block))
    return "".join(keep), "".join(apart)
