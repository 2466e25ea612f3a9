"""Release rows written as TOML, by hand and deterministically (the standard library only reads TOML).

The same writer produces ``tfgpu/data/tensorflow.toml`` (scripts/regen_tf_data.py) and the user's
update overlay (``tfgpu-install update-data``), so both have one format.
"""

from __future__ import annotations

import json

from packaging.version import Version

from tfgpu.datasource.releases import ReleaseRecord
from tfgpu.datasource.wheel_facts import PLATFORMS, version_key

WHEEL_KEYS = ("python", "platform_tag", "cuda_build", "cuda", "cudnn", "compute_capabilities", "shim_for", "wheel")
#: A companion row's keys, in order: what it is, what it pins, and what its build runs on (the CUDA
#: it was built with, the driver that needs, the GPU code it carries and the member that said so).
COMPANION_KEYS = (
    "framework",
    "version",
    "extra",
    "stack",
    "python",
    "numpy",
    "wheels",
    "cuda",
    "driver",
    "gpu_archs",
    "gpu_range",
    "archs_from",
)
OPTIONAL_WHEEL_KEYS = ("cudnn_compiled", "ptx_isa", "cuda_raw", "cudnn_raw", "note", "unverified")


def toml_value(value) -> str:
    """A TOML literal for a bool, a string or a list of those."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)  # JSON string escapes are valid TOML basic-string escapes
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} as TOML")


def render_release(release: ReleaseRecord) -> list[str]:
    """The lines of one ``[[release]]`` entry."""
    lines = ["[[release]]"]
    for key in ("version", "uploaded", "requires_python", "gpu_package", "numpy"):
        lines.append(f"{key} = {toml_value(getattr(release, key))}")
    lines.append(f"source = {toml_value(release.sources)}")
    if release.prerelease:
        lines.append("prerelease = true")
    if release.cuda_extra:
        lines.append(f"cuda_extra = {toml_value(release.cuda_extra)}")
    if release.cuda_extras and release.cuda_extras != [release.cuda_extra]:
        lines.append(f"cuda_extras = {toml_value(release.cuda_extras)}")
    if release.and_cuda:
        lines += ["", "[release.and_cuda]"]
        lines += [f"{toml_value(k)} = {toml_value(v)}" for k, v in sorted(release.and_cuda.items())]
    if release.numpy_markers:
        lines += ["", "[release.numpy_markers]"]
        lines += [f"{toml_value(k)} = {toml_value(v)}" for k, v in sorted(release.numpy_markers.items())]
    for platform in PLATFORMS:
        if (record := release.wheels.get(platform)) is None:
            continue
        lines += ["", f"[release.wheels.{platform}]"]
        lines += [f"{key} = {toml_value(getattr(record, key))}" for key in WHEEL_KEYS]
        lines += [f"{key} = {toml_value(getattr(record, key))}" for key in OPTIONAL_WHEEL_KEYS if getattr(record, key)]
        lines.append(f"source = {toml_value(record.source)}")
    return lines


def render_toml(releases: list[ReleaseRecord], header: str, fields: dict[str, str]) -> str:
    """A whole file: ``header`` comment lines, top-level ``fields``, then the releases newest first."""
    lines = [header.rstrip("\n")] + [f"{key} = {toml_value(value)}" for key, value in fields.items()]
    for release in sorted(releases, key=lambda r: version_key(r.version), reverse=True):
        lines += ["", *render_release(release)]
    return "\n".join(lines) + "\n"


def render_companions(document: dict, header: str, fields: dict[str, str]) -> str:
    """``companions.toml``: the PyTorch/JAX rows (newest first per framework), the nvidia-*
    release lists and the paths both CUDA stacks install; ``document`` as
    ``scripts/regen_companion_data.py`` collects it."""
    lines = [header.rstrip("\n")] + [f"{key} = {toml_value(value)}" for key, value in fields.items()]
    rows = sorted(document["rows"], key=lambda r: (r.framework, Version(r.version), r.extra), reverse=True)
    for row in rows:
        lines += ["", "[[release]]"]
        for key in COMPANION_KEYS:
            lines.append(f"{key} = {toml_value(getattr(row, key))}")
        lines.append(f"source = {toml_value(row.sources)}")
        lines += ["", "[release.nvidia]"]
        lines += [f"{toml_value(k)} = {toml_value(v)}" for k, v in sorted(row.nvidia.items())]
    lines += ["", "[versions]"]
    lines += [f"{toml_value(k)} = {toml_value(v)}" for k, v in sorted(document["versions"].items())]
    for collision in document["collisions"]:
        lines += ["", "[[collision]]"]
        lines.append(f"distributions = {toml_value(collision['distributions'])}")
        lines.append(f"paths = {toml_value(collision['paths'])}")
        lines.append(f"source = {toml_value(['WHL-ZIP'])}")
    return "\n".join(lines) + "\n"
