"""Readers for the files that record NVIDIA's download checksums (used by regen_nvidia_data.py).

Each reader turns one file into ``Fact`` records: one per downloadable file it describes, with
the checksums and location it gives. The kind of file is told from its content:

* NVIDIA's cuDNN ``redistrib_<version>.json`` (primary): per platform and CUDA variant the
  ``relative_path``, ``sha256``, ``md5`` and ``size`` of each archive;
* NVIDIA's CUDA ``redistrib_<version>.json`` (primary): per-component archives only; it names
  no runfile, so it yields nothing the data records;
* NVIDIA's ``md5sum.txt`` (primary): ``<md5>  <file name>`` lines of one toolkit release;
* spack's ``_versions`` table of its ``cuda`` or ``cudnn`` package (derived: the sha256 spack
  computed from the downloaded file);
* nixpkgs' ``releases.nix`` for cudatoolkit or cudnn (derived: nixpkgs' own sha256, SRI or
  nix base-32);
* conda-forge's cudatoolkit recipe ``cudavars`` table (derived: runfile md5 values its
  comments say were copied from NVIDIA's md5sum.txt).

Only Linux x86_64 files are returned: that is the only platform tfgpu's system mode installs.
Standard library only.
"""

from __future__ import annotations

import ast
import base64
import binascii
import json
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

CUDNN_REDIST = "https://developer.download.nvidia.com/compute/cudnn/redist/"
NIX_BASE32 = "0123456789abcdfghijklmnpqrsvwxyz"


class ManifestError(Exception):
    """A file that is none of the known kinds, or that cannot be read as its kind."""


@dataclass(frozen=True)
class Fact:
    """What one file says about one download."""

    filename: str
    origin: str
    """The manifest's file name (the key sources.toml's ``fixture`` entries are matched on)."""
    primary: bool
    """NVIDIA's own manifest (True) or a list derived from the downloads by someone else."""
    sha256: str = ""
    md5: str = ""
    size: int = 0
    url: str = ""
    manifest: str = ""
    """The URL of NVIDIA's manifest that lists the file ("" for derived lists)."""
    version: str = ""
    cuda_major: int = 0
    cuda_min: str = ""
    cuda_max: str = ""


@dataclass(frozen=True)
class Manifest:
    path: Path
    kind: str
    facts: tuple[Fact, ...]
    warnings: tuple[str, ...] = ()


def read(path: Path, cudnn_base: str = CUDNN_REDIST) -> Manifest:
    """Read one manifest file, whatever its kind."""
    text = path.read_text(encoding="utf-8")
    name = path.name
    if name.endswith(".json"):
        try:
            document = json.loads(text)
        except json.JSONDecodeError as error:
            raise ManifestError(f"{path}: not JSON ({error})") from None
        if isinstance(document, dict) and isinstance(document.get("cudnn"), dict):
            return Manifest(path, "NVIDIA cuDNN redistrib manifest", tuple(_cudnn_redist(document, name, cudnn_base)))
        if isinstance(document, dict) and "release_label" in document:
            return Manifest(path, "NVIDIA CUDA redistrib manifest (component archives, no runfile)", ())
        raise ManifestError(f"{path}: JSON, but not an NVIDIA redistrib manifest")
    if "{% set cudavars" in text:
        return Manifest(
            path,
            "conda-forge cudatoolkit cudavars (md5 from NVIDIA's md5sum.txt)",
            tuple(_conda_forge_cudavars(text, name)),
        )
    if re.search(r"^_versions = \{", text, re.MULTILINE):
        facts, kind = _spack_versions(text, name)
        return Manifest(path, kind, tuple(facts))
    if "cudnn.releases" in text:
        facts, warnings = _nix_cudnn(text, name)
        return Manifest(path, "nixpkgs cudnn releases.nix (derived sha256)", tuple(facts), tuple(warnings))
    if re.search(r'^\s*sha256 = "', text, re.MULTILINE) and "local_installers" in text:
        facts, warnings = _nix_cudatoolkit(text, name)
        return Manifest(path, "nixpkgs cudatoolkit releases.nix (derived sha256)", tuple(facts), tuple(warnings))
    lines = [line for line in text.splitlines() if line.strip()]
    if lines and all(re.fullmatch(r"[0-9a-f]{32}\s+\*?\S+", line.strip()) for line in lines):
        return Manifest(path, "NVIDIA md5sum.txt", tuple(_md5sum(lines, name)))
    raise ManifestError(f"{path}: not a manifest this script knows (see its docstring)")


def _cudnn_redist(document: dict, name: str, base: str) -> list[Fact]:
    product = document["cudnn"]
    entry = product.get("linux-x86_64")
    if not isinstance(entry, dict):
        return []
    # Manifests before cuDNN 8.9.7 list one archive per platform; later ones one per CUDA variant.
    variants = [entry] if "relative_path" in entry else [v for k, v in sorted(entry.items()) if k.startswith("cuda")]
    facts = []
    for item in variants:
        relative = item["relative_path"]
        filename = PurePosixPath(relative).name
        facts.append(
            Fact(
                filename=filename,
                origin=name,
                primary=True,
                sha256=item.get("sha256", ""),
                md5=item.get("md5", ""),
                size=int(item.get("size", 0) or 0),
                url=base + relative,
                manifest=base + name,
                version=product.get("version", ""),
                cuda_major=_cudnn_cuda_major(filename),
            )
        )
    return facts


def _cudnn_cuda_major(filename: str) -> int:
    """The CUDA major an archive is built for, from NVIDIA's file name patterns."""
    match = re.search(r"_cuda(\d+)(?:\.\d+)?-archive\.", filename) or re.match(r"cudnn-(\d+)\.\d+-linux-x64-", filename)
    return int(match.group(1)) if match else 0


def cudnn_filename(version: str, cuda: str) -> str:
    """NVIDIA's Linux x86_64 cuDNN file name for one version and CUDA variant.

    Up to 8.3.0 the tarballs are ``cudnn-<cuda X.Y>-linux-x64-v<version>.tgz``; from 8.3.1 the
    archives are ``cudnn-linux-x86_64-<version>_cuda<variant>-archive.tar.xz`` with an X.Y variant
    (``cuda11.5``) until 8.5.0, the major alone (``cuda11``) from then on.
    """
    release = tuple(int(part) for part in version.split("."))
    if release < (8, 3, 1):
        return f"cudnn-{cuda}-linux-x64-v{version}.tgz"
    variant = cuda if release < (8, 5) else cuda.split(".")[0]
    return f"cudnn-linux-x86_64-{version}_cuda{variant}-archive.tar.xz"


def _spack_versions(text: str, name: str) -> tuple[list[Fact], str]:
    start = re.search(r"^_versions = \{", text, re.MULTILINE).end() - 1
    end = _closing_brace(text, start)
    try:
        table = ast.literal_eval(text[start : end + 1])
    except (ValueError, SyntaxError) as error:
        raise ManifestError(f"{name}: spack _versions is not a literal ({error})") from None
    facts = []
    runfiles = any(isinstance(v.get("Linux-x86_64"), tuple) for v in table.values())
    for key, platforms in table.items():
        value = platforms.get("Linux-x86_64")
        if value is None:
            continue
        if isinstance(value, tuple):  # cuda: (sha256, url)
            sha256, url = value
            facts.append(Fact(filename=_basename(url), origin=name, primary=False, sha256=sha256, url=url, version=key))
        else:  # cudnn: "<version>-<cuda>": sha256
            version, cuda = key.split("-", 1)
            filename = cudnn_filename(version, cuda)
            facts.append(
                Fact(
                    filename=filename,
                    origin=name,
                    primary=False,
                    sha256=value,
                    version=version,
                    cuda_major=_cudnn_cuda_major(filename),
                )
            )
    return facts, f"spack {'cuda' if runfiles else 'cudnn'} _versions (derived sha256)"


def _closing_brace(text: str, start: int) -> int:
    depth = 0
    for index in range(start, len(text)):
        if text[index] == "{":
            depth += 1
        elif text[index] == "}":
            depth -= 1
            if depth == 0:
                return index
    raise ManifestError("unbalanced braces in spack _versions")


def _nix_blocks(text: str) -> list[str]:
    return re.findall(r"\{([^{}]*\burl = \"[^\"]+\"[^{}]*)\}", text)


def _nix_field(block: str, key: str) -> str:
    match = re.search(rf'\b{key} = "([^"]*)";', block)
    return match.group(1) if match else ""


def _nix_cudnn(text: str, name: str) -> tuple[list[Fact], list[str]]:
    section = re.search(r"linux-x86_64 = \[(.*?)\n    \];", text, re.DOTALL)
    facts, warnings = [], []
    for block in _nix_blocks(section.group(1) if section else ""):
        url = _nix_field(block, "url")
        sha256 = nix_hash_hex(_nix_field(block, "hash"))
        if not sha256:
            warnings.append(f"{name}: unreadable hash for {_basename(url)}: {_nix_field(block, 'hash')!r}")
            continue
        filename = _basename(url)
        facts.append(
            Fact(
                filename=filename,
                origin=name,
                primary=False,
                sha256=sha256,
                url=url,
                version=_nix_field(block, "version"),
                cuda_major=_cudnn_cuda_major(filename),
                cuda_min=_nix_field(block, "minCudaVersion"),
                cuda_max=_nix_field(block, "maxCudaVersion"),
            )
        )
    return facts, warnings


def _nix_cudatoolkit(text: str, name: str) -> tuple[list[Fact], list[str]]:
    facts, warnings = [], []
    for block in _nix_blocks(text):
        url = _nix_field(block, "url")
        if not url.endswith(("_linux.run", "_linux")):
            continue
        sha256 = nix_hash_hex(_nix_field(block, "sha256"))
        if not sha256:
            warnings.append(f"{name}: unreadable sha256 for {_basename(url)}")
            continue
        facts.append(
            Fact(
                filename=_basename(url),
                origin=name,
                primary=False,
                sha256=sha256,
                url=url,
                version=_nix_field(block, "version"),
            )
        )
    return facts, warnings


def nix_hash_hex(value: str) -> str:
    """A sha256 as nixpkgs writes it (``sha256-<base64>`` SRI, nix base-32, or hex) in hex; "" if
    it is none of these."""
    if value.startswith("sha256-"):
        encoded = value[len("sha256-") :]
        if not re.fullmatch(r"[A-Za-z0-9+/]+={0,2}", encoded):
            return ""
        try:  # nixpkgs accepts an SRI hash without its "=" padding
            digest = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
        except binascii.Error:
            return ""
        return digest.hex() if len(digest) == 32 else ""
    if re.fullmatch(r"[0-9a-f]{64}", value):
        return value
    if len(value) == 52 and all(c in NIX_BASE32 for c in value):
        return _nix_base32_decode(value).hex()
    return ""


def _nix_base32_decode(value: str) -> bytes:
    """Nix's base-32: the last character holds the lowest 5 bits, bytes filled little-endian."""
    size = len(value) * 5 // 8
    out = bytearray(size)
    for n in range(len(value)):
        digit = NIX_BASE32.index(value[len(value) - 1 - n])
        bit = n * 5
        index, shift = divmod(bit, 8)
        out[index] |= (digit << shift) & 0xFF
        if index + 1 < size:
            out[index + 1] |= digit >> (8 - shift)
        elif digit >> (8 - shift):
            raise ManifestError(f"nix base-32 value {value!r} overflows {size} bytes")
    return bytes(out)


def _conda_forge_cudavars(text: str, name: str) -> list[Fact]:
    facts = []
    for block in re.split(r'\n  "[0-9.]+": \{', text)[1:]:
        version = re.search(r'"version": "([^"]+)"', block)
        patch = _linux64(block, "version_patch")
        md5 = _linux64(block, "checksums")
        post = _linux64(block, "runfile_post") or "_linux.run"
        if not (version and patch and md5) or patch == "skip":
            continue
        facts.append(
            Fact(
                filename=f"cuda_{version.group(1)}_{patch}{post}",
                origin=name,
                primary=False,
                md5=md5,
                version=version.group(1),
            )
        )
    return facts


def _linux64(block: str, table: str) -> str:
    match = re.search(rf'"{table}": \{{([^}}]*)\}}', block)
    value = re.search(r'"linux64": "([^"]*)"', match.group(1)) if match else None
    return value.group(1) if value else ""


def _md5sum(lines: list[str], name: str) -> list[Fact]:
    facts = []
    for line in lines:
        md5, filename = line.split(None, 1)
        facts.append(Fact(filename=filename.strip().lstrip("*"), origin=name, primary=True, md5=md5))
    return facts


def _basename(url: str) -> str:
    return urlsplit(url).path.rsplit("/", 1)[-1]
