"""Parse what was read from a TensorFlow wheel into facts (pure functions on text, no I/O).

* METADATA ``Requires-Dist`` entries, ``Provides-Extra`` and the parts of environment markers
  that matter here (``extra``, the platform variables); the CUDA extras among the extras;
* shim detection: a wheel whose METADATA pins another TensorFlow distribution for a platform;
* ``build_info.py``, read with ``ast`` (never executed), old and new layout, Windows DLL suffixes
  normalised ("64_112" -> "11.2");
* ``cuda_config.h`` (TF_CUDA_VERSION, TF_CUDNN_VERSION and the compute capabilities, in either of
  the forms TensorFlow has written) and ``cudnn_version.h`` (CUDNN_MAJOR/MINOR/PATCHLEVEL); from
  TF 2.22 on these headers are the only record of the CUDA facts inside the wheel;
* platform keys of wheel tags, and sort keys of TensorFlow (pre-releases included) and Python versions.

``tfgpu.doctor`` uses the same header parsers on an installed TensorFlow.
"""

from __future__ import annotations

import ast
import email.parser
import re
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from tfgpu.datasource.errors import SourceError
from tfgpu.doors import pysource

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

#: A TensorFlow 2.x version: final, post, or pre-release (a/b/rc). Dev builds (tf-nightly) are not rows.
TF_2X = re.compile(r"^2\.(\d+)\.(\d+)(?:(a|b|rc)(\d+))?(?:\.post(\d+))?$")

#: Extras that install CUDA from PyPI, in the order a plan prefers them: TensorFlow's ``and-cuda``,
#: and the names tf-nightly added (``cuda12``, ``cuda``). ``cuda12-local`` installs nothing: it
#: means "the CUDA installed on this system".
CUDA_EXTRAS = ("and-cuda", "cuda12", "cuda13", "cuda")
LOCAL_CUDA_EXTRA = re.compile(r"^cuda\d*-local$")


class Requirement(NamedTuple):
    """One Requires-Dist entry."""

    name: str  # PEP 503-normalised
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
            raise SourceError(f"cannot parse Requires-Dist: {line!r}")
        name, spec, marker = match.groups()
        result.append(Requirement(normalize_name(name), re.sub(r"[\s()]", "", spec), (marker or "").strip()))
    return result


def provided_extras(metadata: str) -> list[str]:
    """The ``Provides-Extra`` names of a METADATA file, normalised, in order."""
    message = email.parser.HeaderParser().parsestr(metadata)
    return [normalize_name(extra.strip()) for extra in message.get_all("Provides-Extra") or []]


def normalize_name(name: str) -> str:
    """PEP 503 normalisation: ``Google_Pasta`` -> ``google-pasta``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def marker_extra(marker: str) -> str | None:
    """The extra a marker belongs to (``extra == "and-cuda"``), or None."""
    match = re.search(r"""\bextra\s*==\s*['"]([^'"]+)['"]""", marker)
    return normalize_name(match.group(1)) if match else None


class CudaExtras(NamedTuple):
    """The CUDA extras of a release: which one a plan installs, its pins, and all their names."""

    name: str  # "" when the release has none
    pins: dict[str, str]
    names: tuple[str, ...]  # every CUDA extra, local ones included (tf-nightly: and-cuda, cuda, cuda12, cuda12-local)


def cuda_extras(requirements: list[Requirement], extras: list[str]) -> CudaExtras:
    """Find the CUDA extras: the known names, plus any extra whose requirements are all NVIDIA wheels."""
    by_extra: dict[str, dict[str, str]] = {}
    for req in requirements:
        if (extra := marker_extra(req.marker)) is not None:
            by_extra.setdefault(extra, {})[req.name] = req.specifier
    names = [
        e
        for e in dict.fromkeys([*extras, *by_extra])
        if e in CUDA_EXTRAS
        or LOCAL_CUDA_EXTRA.match(e)
        or (by_extra.get(e) and all(n.startswith("nvidia-") or n.startswith("tensorrt") for n in by_extra[e]))
    ]
    chosen = next((e for e in CUDA_EXTRAS if by_extra.get(e)), "")
    if not chosen:
        chosen = next((e for e in names if by_extra.get(e)), "")
    return CudaExtras(chosen, dict(sorted(by_extra.get(chosen, {}).items())), tuple(names))


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

    if not marker:
        return True
    tree = pysource.parse(marker, mode="eval")  # a wheel's METADATA is the index's text
    if tree is None:  # a marker that is no expression is a bad answer
        raise SourceError(f"cannot parse the environment marker {marker[:100]!r}")
    assert isinstance(tree, ast.Expression)  # what mode="eval" parses to
    return evaluate(tree.body)


def find_shim_target(requirements: list[Requirement], platform: str) -> tuple[str, str] | None:
    """(distribution, version) a shim wheel pins for ``platform``, or None.

    A shim's METADATA carries e.g. ``tensorflow-intel==2.13.1; platform_system == "Windows"``.
    """
    for req in requirements:
        if (
            req.name.startswith("tensorflow")
            and req.specifier.startswith("==")
            and re.search(r"platform_system|platform_machine|sys_platform", req.marker)
            and marker_extra(req.marker) is None
            and marker_matches(req.marker, MARKER_ENV[platform])
        ):
            return req.name, req.specifier[2:]
    return None


class BuildInfo(NamedTuple):
    """The CUDA facts of one wheel (cuda/cudnn normalised, raw kept). Empty strings: not recorded."""

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
    tree = pysource.parse(source)
    if tree is None:
        raise SourceError("build_info.py does not parse as Python (or is too long or deep to)")
    assert isinstance(tree, ast.Module)  # what mode="exec" parses to
    body = tree.body
    for node in body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        if node.targets[0].id == "build_info":
            info = _literal_pairs(node.value)
        else:
            value = pysource.literal(node.value)
            if value is not pysource.NOT_LITERAL:
                constants[node.targets[0].id] = value
    capabilities = info.get("cuda_compute_capabilities", ())
    if not isinstance(capabilities, (list, tuple)):  # a number is no list, and a string no list of names
        raise SourceError(f"build_info.py's cuda_compute_capabilities is not a list: {str(capabilities)[:100]!r}")
    cuda_raw = str(info.get("cuda_version", constants.get("cuda_version_number", "")))
    cudnn_raw = str(info.get("cudnn_version", constants.get("cudnn_version_number", "")))
    return BuildInfo(
        cuda_build=bool(info.get("is_cuda_build", constants.get("is_cuda_build", False))),
        cuda=normalize_dll_version(cuda_raw),
        cudnn=normalize_dll_version(cudnn_raw),
        compute_capabilities=tuple(str(c) for c in capabilities),
        cuda_raw=cuda_raw,
        cudnn_raw=cudnn_raw,
    )


def _literal_pairs(node: ast.expr) -> dict[str, object]:
    """The literal items of ``{...}``, ``[(k, v), ...]`` or ``OrderedDict([...])``; others skipped."""
    if isinstance(node, ast.Call) and len(node.args) == 1:
        node = node.args[0]
    pairs: Iterable[Sequence[ast.expr | None]]
    if isinstance(node, ast.Dict):
        pairs = zip(node.keys, node.values, strict=True)
    elif isinstance(node, (ast.List, ast.Tuple)):
        pairs = [e.elts for e in node.elts if isinstance(e, ast.Tuple) and len(e.elts) == 2]
    else:
        return {}
    items = {}
    for key, value in pairs:
        key, value = pysource.literal(key), pysource.literal(value)
        # a value computed at import time, or a key no table can hold: not a fact recorded here
        if isinstance(key, str) and value is not pysource.NOT_LITERAL:
            items[key] = value
    return items


class CudaConfig(NamedTuple):
    """``cuda_config.h``: the CUDA and cuDNN TensorFlow was configured with, and its GPU targets.

    ``compute_capabilities`` are "X.Y" strings: the header does not say which are SASS and which PTX.
    """

    cuda: str
    cudnn: str
    compute_capabilities: tuple[str, ...]


_DEFINE = re.compile(r"^\s*#\s*define\s+(\w+)[ \t]+(.*?)\s*$", re.M)


def parse_cuda_config(text: str) -> CudaConfig:
    """Both forms: ``TF_CUDA_COMPUTE_CAPABILITIES 60, 70, 90`` (2.4+) and
    ``TF_CUDA_CAPABILITIES CudaVersion("3.5"), CudaVersion("7.0")`` (2.0-2.3)."""
    defines = {name: value for name, value in _DEFINE.findall(text)}
    caps: list[str] = []
    if "TF_CUDA_COMPUTE_CAPABILITIES" in defines:
        for number in re.findall(r"\d+", defines["TF_CUDA_COMPUTE_CAPABILITIES"]):
            caps.append(f"{number[:-1]}.{number[-1]}")
    elif "TF_CUDA_CAPABILITIES" in defines:
        caps = re.findall(r'CudaVersion\("(\d+\.\d+)"\)', defines["TF_CUDA_CAPABILITIES"])
    return CudaConfig(
        cuda=defines.get("TF_CUDA_VERSION", "").strip('"'),
        cudnn=defines.get("TF_CUDNN_VERSION", "").strip('"'),
        compute_capabilities=tuple(caps),
    )


def parse_cudnn_version(text: str) -> str:
    """``cudnn_version.h`` -> "9.10.0" (CUDNN_MAJOR.CUDNN_MINOR.CUDNN_PATCHLEVEL), or "" if absent."""
    defines = {name: value for name, value in _DEFINE.findall(text)}
    parts = [defines.get(f"CUDNN_{key}", "") for key in ("MAJOR", "MINOR", "PATCHLEVEL")]
    if not all(p.isdigit() for p in parts[:2]):
        return ""
    return ".".join(p for p in parts if p.isdigit())


def normalize_dll_version(value: str) -> str:
    """Windows wheels give DLL suffixes: "64_112" -> "11.2", "64_8" -> "8"; others unchanged."""
    match = re.fullmatch(r"64_(\d+)", value)
    if not match:
        return value
    digits = match.group(1)
    return f"{digits[:-1]}.{digits[-1]}" if len(digits) >= 3 else digits


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


_STAGES = {"a": 0, "b": 1, "rc": 2, None: 3}


def version_key(version: str) -> tuple[int, ...]:
    """Sort key of a 2.x version (PEP 440 order): 2.22.0rc0 < 2.22.0 < 2.22.0.post1."""
    match = TF_2X.match(version)
    if not match:
        raise SourceError(f"not a TensorFlow 2.x version: {version!r}")
    minor, patch, stage, number, post = match.groups()
    return (2, int(minor), int(patch), _STAGES[stage], int(number or 0), int(post or -1))


def is_prerelease(version: str) -> bool:
    """``2.22.0rc0`` and friends (a, b, rc)."""
    match = TF_2X.match(version)
    return bool(match and match.group(3))


def base_version(version: str) -> str:
    """``2.22.0rc0`` -> ``2.22.0``."""
    match = TF_2X.match(version)
    return f"2.{match.group(1)}.{match.group(2)}" if match else version


def python_key(python: str) -> tuple[int, ...]:
    """Sort key of "3.10": numeric, so that 3.10 follows 3.9."""
    return tuple(int(p) for p in python.split("."))
