"""Who owns which file of an env: the RECORDs of every installed distribution, read as files.

Two CUDA stacks in one env (TensorFlow's CUDA 12 wheels next to torch's or JAX's CUDA 13 wheels)
overwrite each other without a word: ``nvidia-cudnn-cu12`` and ``nvidia-cudnn-cu13`` both own
``nvidia/cudnn/lib/libcudnn*.so.9``, NCCL, nvSHMEM and cuSPARSELt likewise; uv and pip unpack both,
the file on disk is whichever came last, uninstalling one deletes the other's library, and
``pip check`` is content. This module owns reading that state, for doctor, repair and the
post-install check of ``create``:

- :func:`shared_files`: every path two or more distributions list in their RECORD, each owner's
  sha256 for it and the sha256 of the bytes on disk, so which distribution *won* and which *lost*;
- :func:`soname_pairs`: SONAMEs that two stacks ship in *different* files (``libcurand.so.10`` in
  ``nvidia/curand/lib`` for CUDA 12 and ``nvidia/cu13/lib`` for CUDA 13): the dynamic loader reuses
  whichever was loaded first for both;
- :func:`stack_of`: which CUDA major a distribution belongs to (``-cu12`` names, or the merged
  ``nvidia/cu13/`` tree of CUDA 13's wheels);
- :func:`frameworks`: each framework's Requires-Python and numpy requirement from its METADATA.

Everything goes through :mod:`tfgpu.doors.untrusted`; nothing is imported or loaded.
"""

from __future__ import annotations

import binascii
import csv
import os
import posixpath
import re
from pathlib import Path

from tfgpu.doctor.reads import RunReads
from tfgpu.doors import untrusted
from tfgpu.records import factory, record

NAMESPACE_FILES = re.compile(r"(^|/)__init__\.py$|(^|/)__pycache__/")
"""Files every wheel of a namespace package ships alike (``nvidia/__init__.py``, empty in each)."""
_SUFFIX = re.compile(r"[-_]cu(\d{1,3})$")
_MERGED = re.compile(r"^nvidia/cu(\d{1,3})/")
_LIBRARY = re.compile(r"(^|/)lib[^/]*\.so(\.\d+)+$")


@record
class Dist:
    """One installed distribution: its normalised name, version and RECORD (path -> sha256 or "")."""

    name: str
    version: str
    files: dict[str, str]
    sizes: dict[str, int] = factory(dict)
    """path -> the size its RECORD row lists, for the rows that list one."""

    @property
    def label(self) -> str:
        return f"{self.name} {self.version}"


@record
class SharedFile:
    """One path listed by two or more RECORDs."""

    path: str
    owners: tuple[tuple[str, str], ...]
    """(distribution label, sha256 its RECORD lists) per owner."""
    on_disk: str | None
    """sha256 of the file now; None when it is missing or was not hashed (its size matches no
    owner's RECORD, which decides without hashing, or ``unchecked``)."""
    size: int | None = None
    """Its size now; None when it is missing (or was not looked at)."""
    owner_sizes: tuple[int | None, ...] = ()
    """The size each owner's RECORD lists, in the order of ``owners`` (None where a row lists none)."""
    unchecked: str = ""
    """Why its bytes were not compared ("not checked (too large ...)"); then neither won nor lost is known."""

    @property
    def differ(self) -> bool:
        """The owners ship different bytes: one of them lost."""
        return len({digest for _, digest in self.owners}) > 1

    def _matches(self, index: int) -> bool:
        listed = self.owner_sizes[index] if index < len(self.owner_sizes) else None
        if listed is not None and self.size is not None and listed != self.size:
            return False
        digest = self.owners[index][1]
        return bool(digest) and digest == self.on_disk

    @property
    def winners(self) -> tuple[str, ...]:
        return tuple(label for i, (label, _) in enumerate(self.owners) if self._matches(i))

    @property
    def losers(self) -> tuple[str, ...]:
        if self.unchecked:
            return ()
        return tuple(label for i, (label, _) in enumerate(self.owners) if not self._matches(i))


@record
class SonamePair:
    """One SONAME shipped by two stacks in different files: (stack, site-relative path, distribution)."""

    soname: str
    files: tuple[tuple[str, str, str], ...]


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


_URLSAFE = bytes.maketrans(b"-_", b"+/")
_FIELD_LIMIT = 128 * 1024  # the csv module's longest field (csv.field_size_limit()): a longer row it refuses


def _record_digest(field: str) -> str:
    """``sha256=<urlsafe b64>`` -> hex; anything else (no hash, another algorithm) -> "". ``base64``'s own
    steps without its wrappers (24,000 rows an env): non-ASCII refused, non-alphabet characters dropped."""
    algorithm, _, value = field.partition("=")
    if algorithm != "sha256" or not value or not value.isascii():
        return ""
    try:
        return binascii.a2b_base64(value.encode("ascii").translate(_URLSAFE) + b"=" * (-len(value) % 4)).hex()
    except ValueError:  # binascii.Error
        return ""


def distributions(site: Path) -> list[Dist]:
    """Every ``*.dist-info`` with a readable RECORD under ``site``; paths relative to ``site``."""
    found = []
    for dist_info in sorted(Path(site).glob("*.dist-info")):
        rows = _rows_of(dist_info / "RECORD")
        if rows is None:
            continue
        name, _, version = dist_info.name.removesuffix(".dist-info").partition("-")
        found.append(Dist(_normal(name), version, dict(rows[0]), dict(rows[1])))
    return found


_ROWS: dict[tuple, tuple[dict[str, str], dict[str, int]]] = {}
_ROWS_KEPT = 1024  # a repair reads an env's RECORDs six times (TF 2.21's 24,469 rows: 60 ms a reading)


def _rows_of(record: Path) -> tuple[dict[str, str], dict[str, int]] | None:
    """:func:`_record_rows` of the RECORD at ``record``, parsed again only when the file changed:
    keyed by its device, inode, size, modification and change times (a rewrite with its times put
    back has a new change time). Stat before read: a file changed between them is keyed by its
    older stat, which no later stat gives again."""
    try:
        info = os.stat(record)
    except (OSError, ValueError):
        info = None
    key = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns) if info else None
    if key is not None and key in _ROWS:
        return _ROWS[key]
    text = untrusted.text_or_none(record, untrusted.ENV_FILE, errors="replace")
    if text is None:
        return None
    rows = _record_rows(text)
    if key is not None:
        if len(_ROWS) >= _ROWS_KEPT:
            _ROWS.clear()
        _ROWS[key] = rows
    return rows


def _record_rows(text: str) -> tuple[dict[str, str], dict[str, int]]:
    """A RECORD's rows, path -> sha256 hex and path -> size, each line read on its own: an open
    quote does not swallow the rows after it (hiding them from the checks), and a row the csv module
    refuses (a field past its 128 KiB limit) is left out, the others kept."""
    files, sizes = {}, {}
    # Without a quote or a NUL anywhere, the csv module splits each line on its commas and nothing
    # else: the same rows, at a third of the cost per row.
    plain = '"' not in text and "\0" not in text
    row: list[str] | None
    for line in text.splitlines():
        if plain and len(line) <= _FIELD_LIMIT:
            row = line.split(",")
        else:
            try:
                row = next(csv.reader([line]), None)
            except csv.Error:
                continue
        if row and row[0]:
            path = posixpath.normpath(row[0])
            files[path] = _record_digest(row[1]) if len(row) > 1 else ""
            size = row[2].strip() if len(row) > 2 else ""
            if size.isascii() and size.isdigit() and len(size) <= 20:
                sizes[path] = int(size)
            else:
                sizes.pop(path, None)
    return files, sizes


def inside(site: Path, path: str) -> bool:
    """Whether a RECORD path names a file inside ``site`` itself: relative, no ``..`` out of it, and
    no symbolic link on the way that leads out. A RECORD is the env's text, so a row may name
    ``/tmp/x/libcudnn.so.9``, ``../../../../tmp/x/libcudnn.so.9`` or a link out of the env; such a
    file is no library of the env, and the load hook must never be handed it (a wheel holds no links
    and NVIDIA's libraries sit under ``nvidia/``; pip's ``../../../bin`` rows are scripts, not libraries)."""
    if not path or posixpath.isabs(path) or path == ".." or path.startswith("../"):
        return False
    try:
        root = Path(site).resolve()
        return (root / path).resolve().is_relative_to(root)
    except (OSError, RuntimeError, ValueError):
        return False


def _is_file(path: Path) -> bool:
    """``path.is_file()``, False where the name itself is refused (a RECORD row with a component
    longer than the file system allows raises ENAMETOOLONG, which ``is_file`` lets through)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def shared_files(site: Path, dists: list[Dist] | None = None, reads: RunReads | None = None) -> list[SharedFile]:
    """Every path two or more distributions own (namespace ``__init__.py`` files aside), with the
    bytes on disk compared with each owner's RECORD: by size first (a size no owner lists decides
    without reading), then by sha256 within ``reads``' budget; a file not hashed says why."""
    dists = distributions(site) if dists is None else dists
    reads = RunReads() if reads is None else reads
    # Found as sets first: a TF env's 44 RECORDs list 24,000 paths and share none (a step per path was slow).
    seen: set[str] = set()
    twice: set[str] = set()
    for dist in dists:
        twice.update(seen.intersection(dist.files))
        seen.update(dist.files)
    owners: dict[str, list[tuple[str, str, int | None]]] = {}
    for dist in dists:
        for path in twice.intersection(dist.files):
            if not NAMESPACE_FILES.search(path) and not path.endswith(".pyc"):
                owners.setdefault(path, []).append((dist.label, dist.files[path], dist.sizes.get(path)))
    shared = []
    for path, listed in sorted(owners.items()):
        if len(listed) > 1:
            sizes = [size for _, _, size in listed]
            hashed = reads.hash(
                Path(site) / path, {size for size in sizes if size is not None} if None not in sizes else set()
            )
            shared.append(
                SharedFile(
                    path,
                    tuple((label, digest) for label, digest, _ in listed),
                    hashed.digest,
                    hashed.size,
                    tuple(sizes),
                    hashed.skipped,
                )
            )
    return shared


def stack_of(dist: Dist) -> int | None:
    """The CUDA major a distribution's libraries are built for: its ``-cuNN`` suffix, else the
    merged ``nvidia/cuNN/`` tree its files sit in (CUDA 13's ``nvidia-curand``); None for others."""
    match = _SUFFIX.search(dist.name)
    if match:
        return int(match.group(1))
    majors = {int(m.group(1)) for m in (_MERGED.match(p) for p in dist.files if p.startswith("nvidia/cu")) if m}
    return majors.pop() if len(majors) == 1 else None


def stacks(dists: list[Dist]) -> dict[int, list[str]]:
    """CUDA major -> the labels of its distributions."""
    found: dict[int, list[str]] = {}
    for dist in dists:
        major = stack_of(dist)
        if major is not None:
            found.setdefault(major, []).append(dist.label)
    return dict(sorted(found.items()))


def libraries(
    site: Path, dists: list[Dist], reads: RunReads | None = None
) -> dict[int, dict[str, list[tuple[str, str]]]]:
    """CUDA major -> SONAME -> [(site-relative path, distribution label)] of its shared libraries
    (the SONAME read from the ELF file; its file name where the file has none): files inside ``site``
    (:func:`inside`) that are ELF shared objects; a RECORD row for anything else names no library."""
    reads = RunReads() if reads is None else reads
    found: dict[int, dict[str, list[tuple[str, str]]]] = {}
    for dist in dists:
        major = stack_of(dist)
        if major is None:
            continue
        for path in dist.files:
            # A stat first: a RECORD of 100,000 rows naming no file costs no path resolution (inside's two).
            if not _LIBRARY.search(path) or not _is_file(Path(site) / path) or not inside(site, path):
                continue
            dynamic = reads.dynamic(Path(site) / path)
            if dynamic is None:  # not an ELF shared object (or a damaged, huge one): nothing a loader could use
                continue
            soname = dynamic.soname or posixpath.basename(path)
            found.setdefault(major, {}).setdefault(soname, []).append((path, dist.label))
    return found


def soname_pairs(site: Path, dists: list[Dist] | None = None, reads: RunReads | None = None) -> list[SonamePair]:
    """SONAMEs that two or more stacks ship in different files (a SONAME both ship in one and the
    same file is :func:`shared_files`' matter: one copy, the other's lost)."""
    dists = distributions(site) if dists is None else dists
    by_stack = libraries(site, dists, reads)
    pairs = []
    names = sorted({soname for libs in by_stack.values() for soname in libs})
    for soname in names:
        files = tuple(
            (f"cu{major}", path, label) for major, libs in by_stack.items() for path, label in libs.get(soname, ())
        )
        if len({stack for stack, _, _ in files}) > 1 and len({path for _, path, _ in files}) > 1:
            pairs.append(SonamePair(soname, files))
    return pairs


def colliding(site: Path, own: int, dists: list[Dist] | None = None, reads: RunReads | None = None) -> list[str]:
    """The other stacks' library files (site-relative, one per SONAME) whose SONAME the ``own``
    stack ships too: what a load hook loads *before* TensorFlow's own, so that whichever framework
    is imported first, the process ends with the other stack's copies loaded once (see docs/modes.md)."""
    dists = distributions(site) if dists is None else dists
    by_stack = libraries(site, dists, reads)
    mine = by_stack.get(own, {})
    chosen: dict[str, str] = {}
    for major, libs in by_stack.items():
        if major == own:
            continue
        for soname, files in libs.items():
            if soname in mine and soname not in chosen:
                theirs = [path for path, _ in files if path not in {p for p, _ in mine[soname]}]
                if theirs:
                    chosen[soname] = theirs[0]
    return [chosen[soname] for soname in sorted(chosen)]


FRAMEWORKS = ("tensorflow", "tensorflow-cpu", "tf-nightly", "torch", "jax", "jaxlib")


@record
class Framework:
    """What a framework's METADATA asks of the interpreter and numpy."""

    label: str
    requires_python: str
    numpy: str
    """The numpy specifier of its unconditional Requires-Dist ("" when it names none)."""


def framework_dist_infos(site: Path) -> list[Path]:
    """The ``*.dist-info`` directories of the frameworks (:data:`FRAMEWORKS`) installed in ``site``."""
    return [
        dist_info
        for dist_info in sorted(Path(site).glob("*.dist-info"))
        if _normal(dist_info.name.removesuffix(".dist-info").partition("-")[0]) in FRAMEWORKS
    ]


def frameworks(site: Path, dist_infos: list[Path] | None = None) -> list[Framework]:
    """TensorFlow, torch and JAX as installed (``dist_infos``: :func:`framework_dist_infos`, when
    already listed), with their Requires-Python and numpy requirement."""
    # Start-up cost: `doctor` loads this module but not packaging.requirements.
    from packaging.requirements import InvalidRequirement, Requirement

    found = []
    for dist_info in framework_dist_infos(site) if dist_infos is None else dist_infos:
        name, _, version = dist_info.name.removesuffix(".dist-info").partition("-")
        text = untrusted.text_or_none(dist_info / "METADATA", untrusted.ENV_FILE, errors="replace") or ""
        python = re.search(r"^Requires-Python:\s*(.+)$", text, re.M)
        numpy = ""
        for line in re.findall(r"^Requires-Dist:\s*(.+)$", text, re.M):
            try:
                requirement = Requirement(line)
            except InvalidRequirement:
                continue
            if _normal(requirement.name) == "numpy" and "extra" not in str(requirement.marker or ""):
                numpy = str(requirement.specifier)
        found.append(Framework(f"{_normal(name)} {version}", python.group(1).strip() if python else "", numpy))
    return found


def installed_version(site: Path, name: str) -> str | None:
    """The version of an installed distribution, from its dist-info directory name."""
    for dist_info in Path(site).glob("*.dist-info"):
        dist, _, version = dist_info.name.removesuffix(".dist-info").partition("-")
        if _normal(dist) == _normal(name):
            return version
    return None


def tensorflow_stack(site: Path) -> int | None:
    """The CUDA major of TensorFlow's own wheels: the ``nvidia-*-cuNN`` its METADATA requires (its
    ``and-cuda`` extra), else its ``build_info.py``'s CUDA, else the single stack the env holds;
    None without TensorFlow."""
    for dist_info in sorted(Path(site).glob("*.dist-info")):
        name = _normal(dist_info.name.removesuffix(".dist-info").partition("-")[0])
        if name not in ("tensorflow", "tf-nightly"):
            continue
        text = untrusted.text_or_none(dist_info / "METADATA", untrusted.ENV_FILE, errors="replace") or ""
        majors = {int(m) for m in re.findall(r"^Requires-Dist:\s*nvidia-[a-z0-9-]+?-cu(\d{1,3})\b", text, re.M)}
        if len(majors) == 1:
            return majors.pop()
        build = untrusted.text_or_none(
            Path(site) / "tensorflow" / "python" / "platform" / "build_info.py", untrusted.ENV_FILE, errors="replace"
        )
        if build:
            # Start-up cost: `doctor` loads this module but not tfgpu.doctor.envfacts.
            from tfgpu.doctor.envfacts import parse_build_info

            cuda = str(parse_build_info(build).get("cuda_version") or "")
            if cuda.split(".")[0].isdigit() and len(cuda.split(".")[0]) <= 3:
                return int(cuda.split(".")[0])
        present = stacks(distributions(site))
        return next(iter(present)) if len(present) == 1 else None
    return None


def other_stack_first(site: Path, reads: RunReads | None = None) -> tuple[str, ...]:
    """What the load hook loads before TensorFlow's libraries (:func:`colliding` and
    :func:`shadowed_apis`), or nothing in an env with one CUDA stack or no TensorFlow. ``reads``: the
    caller's, to say which libraries were not fully read (``reads.unfinished``)."""
    dists = distributions(site)
    own = tensorflow_stack(site)
    if own is None or len(stacks(dists)) < 2:
        return ()
    reads = RunReads() if reads is None else reads  # one read of each library for both questions
    first = colliding(site, own, dists, reads)
    return tuple(first + [path for path in shadowed_apis(site, site, own, dists, reads) if path not in first])


# TensorFlow's libtensorflow_framework.so.2 carries forwarding stubs for the CUDA APIs it calls
# (tsl/cuda/*_stub.cc: the runtime, cuBLAS, cuBLASLt, cuDNN, cuFFT, CUPTI, cuSPARSE, NCCL, the
# driver) and exports them *without* symbol versions; TensorFlow loads it RTLD_GLOBAL. An unversioned
# definition satisfies a versioned reference, so a library loaded later that binds
# ``cudaGetDeviceProperties_v2@libcudart.so.13`` gets TensorFlow's CUDA 12 stub. Seen on an H200:
# torch 2.11+cu130 imported after TF 2.21 dies with SIGFPE in its first kernel launch
# (``at::native::templates::cuda::normal_kernel``, a division by the multiprocessor count read
# through CUDA 12's ``cudaDeviceProp`` layout); with torch first its libcudart.so.13 is earlier in
# the global scope and both work. Loading the other stack's libraries of those APIs first gives the
# same order whichever framework is imported first.
API_LIBRARIES = (
    ("cublasLt", "libcublasLt"),
    ("cublas", "libcublas"),
    ("cudnn", "libcudnn"),
    ("cufft", "libcufft"),
    ("cupti", "libcupti"),
    ("cusparse", "libcusparse"),
    ("cusolver", "libcusolver"),
    ("curand", "libcurand"),
    ("nccl", "libnccl"),
    ("nvrtc", "libnvrtc"),
    ("nvJitLink", "libnvJitLink"),
    ("cuda", "libcudart"),
)
"""(symbol prefix, library stem): which library's API an exported name belongs to; the first prefix
that matches wins, so ``cublasLt`` comes before ``cublas`` and ``cudnn`` before ``cuda``."""
FRAMEWORK_LIBRARY = "tensorflow/libtensorflow_framework.so.2"


def reexported_libraries(site: Path, reads: RunReads | None = None) -> frozenset[str]:
    """The library stems (``libcudart``, ``libcublas`` …) whose API TensorFlow's framework library
    in ``site`` exports without symbol versions, read from its dynamic symbol table."""
    reads = RunReads() if reads is None else reads
    names = reads.exports(Path(site) / FRAMEWORK_LIBRARY) or frozenset()
    stems = set()
    for name in names:
        for prefix, stem in API_LIBRARIES:
            if name.startswith(prefix) and name[len(prefix) : len(prefix) + 1].isupper():  # cudaMalloc, not cudart_x
                stems.add(stem)
                break
    return frozenset(stems)


def shadowed_apis(
    site: Path, tf_site: Path, own: int, dists: list[Dist] | None = None, reads: RunReads | None = None
) -> list[str]:
    """The other stacks' libraries in ``site`` (site-relative, one per SONAME) of the APIs that
    TensorFlow's framework library in ``tf_site`` re-exports unversioned (see API_LIBRARIES)."""
    reads = RunReads() if reads is None else reads
    stems = reexported_libraries(tf_site, reads)
    if not stems:
        return []
    dists = distributions(site) if dists is None else dists
    chosen: dict[str, str] = {}
    for major, libs in libraries(site, dists, reads).items():
        if major == own:
            continue
        for soname, files in libs.items():
            if soname.split(".so")[0] in stems and soname not in chosen:
                chosen[soname] = files[0][0]
    return [chosen[soname] for soname in sorted(chosen)]


def colliding_apart(site: Path, apart: Path, own: int, reads: RunReads | None = None) -> tuple[str, ...]:
    """:func:`colliding` for an env whose TensorFlow CUDA wheels are installed apart (``apart``): the
    other stacks' files in ``site`` (site-relative) whose SONAMEs TensorFlow's stack in ``apart`` ships."""
    reads = RunReads() if reads is None else reads
    mine = libraries(apart, distributions(apart), reads).get(own, {})
    chosen: dict[str, str] = {}
    for major, libs in libraries(site, distributions(site), reads).items():
        for soname, files in libs.items():
            if major != own and soname in mine and soname not in chosen:
                chosen[soname] = files[0][0]
    first = [chosen[soname] for soname in sorted(chosen)]
    return tuple(first + [path for path in shadowed_apis(site, site, own, reads=reads) if path not in first])
