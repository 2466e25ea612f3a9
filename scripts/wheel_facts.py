"""Parse what was read from a wheel into the facts regen_tf_data.py records.

This module owns the parsing of what was read, as pure functions on text (no I/O):

* METADATA ``Requires-Dist`` entries and the parts of their environment markers that matter
  here (``extra``, the platform variables);
* shim detection: a wheel whose METADATA pins another TensorFlow distribution for a platform;
* ``build_info.py``, read with ``ast`` (never executed), in both its old and new layout, with
  Windows DLL version suffixes normalised ("64_112" -> "11.2");
* the output platform keys (``PLATFORMS``, their marker environments, the key of a wheel
  platform tag) and the sort keys of TensorFlow and Python versions.

Standard library only.
"""

from __future__ import annotations

import ast
import dataclasses
import email.parser
import re

from remote_wheel import RegenError  # one error class for fetching, reading and parsing

#: Output platform keys, in the order they are written.
PLATFORMS = ("linux_x86_64", "linux_aarch64", "windows_x86_64", "macos_x86_64", "macos_arm64")

#: Marker environment of each platform, used to find which shim requirement applies.
MARKER_ENV = {
    "linux_x86_64": {"platform_system": "Linux", "platform_machine": "x86_64", "sys_platform": "linux"},
    "linux_aarch64": {"platform_system": "Linux", "platform_machine": "aarch64", "sys_platform": "linux"},
    "windows_x86_64": {"platform_system": "Windows", "platform_machine": "AMD64", "sys_platform": "win32"},
    "macos_x86_64": {"platform_system": "Darwin", "platform_machine": "x86_64", "sys_platform": "darwin"},
    "macos_arm64": {"platform_system": "Darwin", "platform_machine": "arm64", "sys_platform": "darwin"},
}

#: A final TensorFlow 2.x release, post releases included (2.15.0.post1).
FINAL_2X = re.compile(r"^2\.(\d+)\.(\d+)(?:\.post(\d+))?$")


# --------------------------------------------------------------------------------------------
# METADATA requirements, environment markers, build_info.py


@dataclasses.dataclass(frozen=True)
class Requirement:
    """One Requires-Dist entry."""

    name: str       # PEP 503-normalised
    specifier: str  # as written, without spaces or parentheses, e.g. "<=1.24.3,>=1.22"
    marker: str


_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*([^;]*?)\s*(?:;\s*(.*))?$")


def parse_requirements(metadata: str) -> list[Requirement]:
    """The Requires-Dist entries of a METADATA file."""
    message = email.parser.HeaderParser().parsestr(metadata)
    result = []
    for line in message.get_all("Requires-Dist") or []:
        match = _REQUIREMENT.match(line.replace("\n", " "))
        if not match:
            raise RegenError(f"cannot parse Requires-Dist: {line!r}")
        name, spec, marker = match.groups()
        result.append(Requirement(normalize_name(name),
                                  re.sub(r"[\s()]", "", spec), (marker or "").strip()))
    return result


def normalize_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def marker_extra(marker: str) -> str | None:
    match = re.search(r"""\bextra\s*==\s*['"]([^'"]+)['"]""", marker)
    return normalize_name(match.group(1)) if match else None


def marker_matches(marker: str, env: dict[str, str]) -> bool:
    """Evaluate the platform parts of an environment marker; anything else counts as true."""
    def evaluate(node) -> bool:
        if isinstance(node, ast.BoolOp):
            results = [evaluate(value) for value in node.values]
            return all(results) if isinstance(node.op, ast.And) else any(results)
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            left, right = node.left, node.comparators[0]
            if isinstance(right, ast.Name):
                left, right = right, left
            if isinstance(left, ast.Name) and left.id in env and isinstance(right, ast.Constant):
                if isinstance(node.ops[0], ast.Eq):
                    return env[left.id] == right.value
                if isinstance(node.ops[0], ast.NotEq):
                    return env[left.id] != right.value
        return True
    return evaluate(ast.parse(marker, mode="eval").body) if marker else True


def find_shim_target(requirements: list[Requirement], platform: str) -> tuple[str, str] | None:
    """(distribution, version) a shim wheel pins for ``platform``, or None.

    A shim's METADATA carries e.g. ``tensorflow-intel==2.13.1; platform_system == "Windows"``.
    """
    for req in requirements:
        if (req.name.startswith("tensorflow") and req.specifier.startswith("==")
                and re.search(r"platform_system|platform_machine|sys_platform", req.marker)
                and marker_extra(req.marker) is None
                and marker_matches(req.marker, MARKER_ENV[platform])):
            return req.name, req.specifier[2:]
    return None


@dataclasses.dataclass(frozen=True)
class BuildInfo:
    """The facts this script keeps from build_info.py (cuda/cudnn normalised, raw kept)."""

    cuda_build: bool
    cuda: str
    cudnn: str
    compute_capabilities: tuple[str, ...]
    cuda_raw: str
    cudnn_raw: str


def parse_build_info(source: str) -> BuildInfo:
    """Read build_info.py with ``ast`` (never executed).

    Newer files define ``build_info = collections.OrderedDict([...])`` (or a dict); older ones
    module-level constants such as ``is_cuda_build = True`` and ``cuda_version_number = '10.1'``.
    """
    constants: dict[str, object] = {}
    info: dict[str, object] = {}
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)):
            continue
        if node.targets[0].id == "build_info":
            info = _literal_pairs(node.value)
        else:
            try:
                constants[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    cuda_raw = str(info.get("cuda_version", constants.get("cuda_version_number", "")))
    cudnn_raw = str(info.get("cudnn_version", constants.get("cudnn_version_number", "")))
    return BuildInfo(
        cuda_build=bool(info.get("is_cuda_build", constants.get("is_cuda_build", False))),
        cuda=normalize_dll_version(cuda_raw),
        cudnn=normalize_dll_version(cudnn_raw),
        compute_capabilities=tuple(str(c) for c in info.get("cuda_compute_capabilities", ())),
        cuda_raw=cuda_raw,
        cudnn_raw=cudnn_raw,
    )


def _literal_pairs(node: ast.expr) -> dict[str, object]:
    """The literal items of ``{...}``, ``[(k, v), ...]`` or ``OrderedDict([...])``; others skipped."""
    if isinstance(node, ast.Call) and len(node.args) == 1:
        node = node.args[0]
    if isinstance(node, ast.Dict):
        pairs = zip(node.keys, node.values)
    elif isinstance(node, (ast.List, ast.Tuple)):
        pairs = [e.elts for e in node.elts if isinstance(e, ast.Tuple) and len(e.elts) == 2]
    else:
        return {}
    items = {}
    for key, value in pairs:
        try:
            items[ast.literal_eval(key)] = ast.literal_eval(value)
        except ValueError:
            pass  # e.g. a value computed at import time: not a fact this script records
    return items


def normalize_dll_version(value: str) -> str:
    """Windows wheels give DLL suffixes: "64_112" -> "11.2", "64_8" -> "8"; others unchanged."""
    match = re.fullmatch(r"64_(\d+)", value)
    if not match:
        return value
    digits = match.group(1)
    return f"{digits[:-1]}.{digits[-1]}" if len(digits) >= 3 else digits


# --------------------------------------------------------------------------------------------
# Platform keys and sort keys


def platform_key(tag: str) -> str | None:
    """The output platform key of one wheel platform tag, or None for platforms not covered."""
    if tag.startswith(("manylinux", "linux_")):
        if tag.endswith("_x86_64"):
            return "linux_x86_64"
        if tag.endswith("_aarch64"):
            return "linux_aarch64"
    if tag == "win_amd64":
        return "windows_x86_64"
    if tag.startswith("macosx_"):
        if tag.endswith(("_x86_64", "_intel")):
            return "macos_x86_64"
        if tag.endswith("_arm64"):
            return "macos_arm64"
    return None


def version_key(version: str) -> tuple[int, ...]:
    """Sort key of a final 2.x version; a post release sorts after its base release."""
    match = FINAL_2X.match(version)
    return (2, int(match.group(1)), int(match.group(2)), int(match.group(3) or -1))


def python_key(python: str) -> tuple[int, ...]:
    """Sort key of "3.10": numeric, so that 3.10 follows 3.9."""
    return tuple(int(p) for p in python.split("."))
