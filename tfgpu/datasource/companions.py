"""PyTorch and JAX releases read from PyPI: what each one needs next to TensorFlow.

Owns reading the companion frameworks' wheel metadata and turning it into rows of
``tfgpu/data/companions.toml`` (scripts/regen_companion_data.py and ``update-data`` share it).
For every final release of ``torch`` (>= 2.5) and ``jax`` (>= 0.4.30) it reads:

* the PyPI JSON API: the release list, the Linux x86_64 wheels and their CPython tags [PYPI-JSON];
* one Linux x86_64 wheel's ``METADATA`` per distribution and version [WHL-META]: the
  ``*.dist-info/METADATA`` member, by HTTP range requests (PyPI serves no PEP 658 ``.metadata``
  for these wheels: :func:`read_metadata`). No wheel is ever downloaded whole.

A JAX row joins ``jax`` (pure Python: numpy, the jaxlib pin, the CUDA extras), ``jaxlib`` (cp tags,
numpy) and the CUDA plugin of each extra (``jax-cudaNN-plugin[with-cuda]`` and the ``pjrt`` it pins:
the ``nvidia-*`` pins). The CUDA stack of a row is derived from its ``nvidia-*`` requirements: a
``-cu12``/``-cu13`` suffix, or (CUDA 13 wheels dropped the suffix) the major of the pinned version
of ``nvidia-cuda-runtime``/``nvidia-cublas``.
"""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version

from tfgpu.datasource import build_facts
from tfgpu.datasource import wheel_facts as facts
from tfgpu.datasource.http import SourceError
from tfgpu.datasource.releases import Index, WheelFile, best_wheel, wheel_from_json
from tfgpu.datasource.remote_zip import ZipEntry, central_directory, read_member, read_wheel_members
from tfgpu.doors import urls
from tfgpu.records import factory, record

#: The oldest release of each framework the table keeps (older ones predate TF 2.18's CUDA 12.5).
MINIMUM = {"torch": "2.5", "jax": "0.4.30"}
#: The CUDA extras of ``jax`` that install CUDA from PyPI, and the plugin each pins.
JAX_EXTRAS = {"cuda12": "jax-cuda12-plugin", "cuda13": "jax-cuda13-plugin"}
LINUX = facts.MARKER_ENV["linux_x86_64"]


@record(frozen=False)
class CompanionRow:
    """One framework release (per CUDA extra for JAX): what it asks of an env on Linux x86_64."""

    framework: str  # "torch" or "jax"
    version: str
    extra: str  # "" for torch; "cuda12"/"cuda13" for jax
    stack: str  # "cu12", "cu13" or "" (no CUDA from PyPI)
    python: list[str]
    numpy: str
    nvidia: dict[str, str]
    wheels: list[str]  # the distributions whose METADATA the row was read from, pinned
    sources: list[str] = factory(lambda: ["PYPI-JSON", "WHL-META"])
    cuda: str = ""  # the CUDA the build was made with (torch/version.py; JAX: its runtime floor)
    driver: str = ""  # the Linux driver that CUDA needs (cuda.toml)
    gpu_archs: list[str] = factory(list)  # sm_NN cubins, compute_NN PTX
    gpu_range: list[str] = factory(list)  # [min CC, max CC] where only that is stated
    archs_from: str = ""  # the wheel member that stated them ('' = the wheel states none)


#: The largest kernel library of a JAX plugin read for its fatbins (the smallest carry one).
MAX_FATBIN_MEMBER = 8 * 1024 * 1024
#: Where torch states its build: the CUDA (version.py) and the architectures per CUDA build.
TORCH_VERSION_PY = "torch/version.py"
TORCH_CUDA_INIT = "torch/cuda/__init__.py"


def final_versions(document: dict, minimum: str) -> list[str]:
    """The final (non-pre, non-dev) releases at or above ``minimum`` that have files, oldest first."""
    found = []
    for version, files in (document.get("releases") or {}).items():
        try:
            parsed = Version(version)
        except InvalidVersion:
            continue
        if files and not parsed.is_prerelease and not parsed.is_devrelease and parsed >= Version(minimum):
            found.append(version)
    return sorted(found, key=Version)


def linux_wheels(index: Index, project: str, version: str) -> list[WheelFile]:
    """The release's Linux x86_64 wheels, or its pure-Python wheel (``py3-none-any``)."""
    wheels = index.wheels(project, version).get("linux_x86_64", [])
    if wheels:
        return wheels
    base = index.project_url(project)
    for entry in index.files(project, version):
        name = entry.get("filename", "")
        if entry.get("packagetype") == "bdist_wheel" and name.endswith("-none-any.whl"):
            url = urls.join(base, entry["url"], f"the index's file list ({name})")
            return [WheelFile(name, url, int(entry["size"]), "any", "any", ())]
    return []


def read_metadata(index: Index, project: str, wheel: WheelFile) -> str:
    """A wheel's METADATA, by range requests into the zip (never the whole wheel). PEP 658's
    ``<wheel>.metadata`` would be cheaper, but PyPI offers none for these wheels: its simple API
    lists no ``core-metadata`` for them and ``<wheel>.metadata`` answers 404 (checked 2026-12-02)."""
    return read_metadata_and_entries(index, wheel)[0]


def read_metadata_and_entries(index: Index, wheel: WheelFile) -> tuple[str, tuple[ZipEntry, ...]]:
    """A wheel's METADATA and its member list (one central-directory read serves both)."""
    members = read_wheel_members(lambda start, end: index.fetcher.range(wheel.url, start, end), wheel.size)
    if members.metadata is None:
        raise SourceError(f"{wheel.url}: no *.dist-info/METADATA member")
    return members.metadata, members.entries


def member_text(index: Index, wheel: WheelFile, entries, name: str) -> str:
    """One small member's text by range requests ('' when the wheel has no such member)."""
    entry = next((e for e in entries if e.name == name), None)
    if entry is None:
        return ""
    data = read_member(lambda start, end: index.fetcher.range(wheel.url, start, end), wheel.size, entry)
    return data.decode("utf-8", "replace")


def plugin_archs(index: Index, wheel: WheelFile, entries) -> tuple[list[str], str]:
    """The GPU targets of a JAX CUDA plugin: the fatbins of its smallest kernel library that has one."""
    libraries = sorted(
        (e for e in entries if e.name.endswith(".so") and 0 < e.compressed_size <= MAX_FATBIN_MEMBER),
        key=lambda e: e.compressed_size,
    )
    for entry in libraries:
        fetch = lambda start, end: index.fetcher.range(wheel.url, start, end)  # noqa: E731
        if archs := build_facts.fatbin_archs(read_member(fetch, wheel.size, entry, MAX_FATBIN_MEMBER)):
            return archs, entry.name
    return [], ""


def wheel_version(wheel: WheelFile) -> str:
    return wheel.filename.split("-")[1]


def requirements(metadata: str, extra: str = "") -> list[facts.Requirement]:
    """The Requires-Dist entries that apply on Linux x86_64, for no extra or for ``extra``."""
    found = []
    for req in facts.parse_requirements(metadata):
        if facts.marker_extra(req.marker) != (facts.normalize_name(extra) if extra else None):
            continue
        if facts.marker_matches(req.marker, LINUX):
            found.append(req)
    return found


def nvidia_pins(reqs: list[facts.Requirement]) -> dict[str, str]:
    """The CUDA libraries a release pins: ``nvidia-*`` wheels, and NVIDIA's ``cuda-toolkit`` meta
    package through which torch 2.11+ pulls the CUDA 13 libraries."""
    return {r.name: r.specifier for r in reqs if r.name.startswith("nvidia-") or r.name == "cuda-toolkit"}


def numpy_spec(*groups: list[facts.Requirement]) -> str:
    """Every numpy specifier of the groups, joined (a release can cap numpy in two places)."""
    parts = [r.specifier for reqs in groups for r in reqs if r.name == "numpy" and r.specifier]
    return ",".join(dict.fromkeys(parts))


def stack_of(pins: dict[str, str]) -> str:
    """cu12/cu13 from the names (``-cu12``) or, without a suffix, the pinned CUDA runtime's major."""
    majors = {m.group(1) for name in pins if (m := re.search(r"-cu(\d+)$", name))}
    for name in ("nvidia-cuda-runtime", "nvidia-cublas", "cuda-toolkit"):
        if name in pins and (m := re.search(r"[=~<>]=?\s*(\d+)\.", pins[name])):
            majors.add(m.group(1))
    if len(majors) > 1:
        raise SourceError(f"nvidia requirements from more than one CUDA major: {sorted(pins)}")
    return f"cu{majors.pop()}" if majors else ""


def python_tags(wheels: list[WheelFile]) -> list[str]:
    return sorted({p for w in wheels for p in w.pythons}, key=facts.python_key)


class CompanionReader:
    """Reads torch and JAX releases through an :class:`Index` (one fetch per document)."""

    def __init__(self, index: Index) -> None:
        self.index = index

    def project(self, name: str) -> dict:
        document = self.index.project(name)
        if document is None:
            raise SourceError(f"{self.index.project_url(name)}: not found")
        return document

    def _metadata(self, project: str, version: str) -> tuple[str, list[WheelFile]]:
        metadata, wheels, _, _ = self._wheel(project, version)
        return metadata, wheels

    def _wheel(self, project: str, version: str):
        """``(METADATA, the release's Linux wheels, the wheel read, its members)``."""
        wheels = linux_wheels(self.index, project, version)
        if not wheels:
            raise SourceError(f"{project} {version}: no Linux x86_64 wheel on {self.index.index_url}")
        wheel = best_wheel(wheels)
        metadata, entries = read_metadata_and_entries(self.index, wheel)
        return metadata, wheels, wheel, entries

    def torch(self, version: str) -> CompanionRow:
        metadata, wheels, wheel, entries = self._wheel("torch", version)
        reqs = requirements(metadata)
        pins = nvidia_pins(reqs)
        cuda = build_facts.torch_cuda(member_text(self.index, wheel, entries, TORCH_VERSION_PY))
        archs, span, table = build_facts.torch_archs(member_text(self.index, wheel, entries, TORCH_CUDA_INIT), cuda)
        driver, driver_sources = build_facts.driver_floor(cuda)
        return CompanionRow(
            "torch",
            version,
            "",
            stack_of(pins),
            python_tags(wheels),
            numpy_spec(reqs),
            pins,
            [f"torch=={version}"],
            sources=_sources(["PYPI-JSON", "WHL-META", "WHL-BUILD"], driver_sources),
            cuda=cuda,
            driver=driver,
            gpu_archs=archs,
            gpu_range=span,
            archs_from=f"{TORCH_CUDA_INIT} {table}" if table else "",
        )

    def jax(self, version: str) -> list[CompanionRow]:
        """One row per CUDA extra of ``jax`` whose plugin release exists (cuda12, cuda13)."""
        jax_meta, _ = self._metadata("jax", version)
        base = requirements(jax_meta)
        rows = []
        provided = facts.provided_extras(jax_meta)
        for extra, plugin in JAX_EXTRAS.items():
            if extra not in provided:
                continue
            extra_reqs = requirements(jax_meta, extra)
            plugin_version = _pinned(extra_reqs, plugin)
            if not plugin_version or not self.index.files(plugin, plugin_version):
                continue
            # jaxlib: the extra's pin, else the base pin, else the newest the base range admits.
            jaxlib_version = _pinned(extra_reqs, "jaxlib") or _pinned(base, "jaxlib") or _upper(base, "jaxlib")
            if not self.index.files("jaxlib", jaxlib_version):
                continue
            jaxlib_meta, jaxlib_wheels = self._metadata("jaxlib", jaxlib_version)
            plugin_meta, plugin_wheels, plugin_wheel, plugin_entries = self._wheel(plugin, plugin_version)
            pins = nvidia_pins(requirements(plugin_meta, "with-cuda"))
            archs, archs_member = plugin_archs(self.index, plugin_wheel, plugin_entries)
            used = [f"jax=={version}", f"jaxlib=={jaxlib_version}", f"{plugin}=={plugin_version}"]
            pjrt = plugin.replace("-plugin", "-pjrt")
            pjrt_version = _pinned(requirements(plugin_meta), pjrt)
            if pjrt_version and self.index.files(pjrt, pjrt_version):
                pjrt_meta, _ = self._metadata(pjrt, pjrt_version)
                pins |= nvidia_pins(requirements(pjrt_meta)) | nvidia_pins(requirements(pjrt_meta, "with-cuda"))
                used.append(f"{pjrt}=={pjrt_version}")
            pythons = sorted(set(python_tags(jaxlib_wheels)) & set(python_tags(plugin_wheels)), key=facts.python_key)
            cuda = build_facts.jax_cuda(pins)
            driver, driver_sources = build_facts.driver_floor(cuda)
            rows.append(
                CompanionRow(
                    "jax",
                    version,
                    extra,
                    stack_of(pins),
                    pythons,
                    numpy_spec(base, requirements(jaxlib_meta)),
                    dict(sorted(pins.items())),
                    used,
                    sources=_sources(["PYPI-JSON", "WHL-META", "WHL-FATBIN"], driver_sources),
                    cuda=cuda,
                    driver=driver,
                    gpu_archs=archs,
                    archs_from=f"{plugin}=={plugin_version} {archs_member}" if archs_member else "",
                )
            )
        return rows


def _sources(*groups: list[str]) -> list[str]:
    return list(dict.fromkeys(key for group in groups for key in group))


def _upper(reqs: list[facts.Requirement], name: str) -> str:
    """The ``<=X`` bound of a requirement (jax pins jaxlib as ``<=X,>=Y``), or ''."""
    for req in reqs:
        if req.name == facts.normalize_name(name) and (
            found := re.findall(r"<=\s*([0-9][0-9A-Za-z.]*)", req.specifier)
        ):
            return found[0]
    return ""


def _pinned(reqs: list[facts.Requirement], name: str) -> str:
    """The version a requirement pins exactly (``==X`` or ``<=X,>=X``), or ''."""
    for req in reqs:
        if req.name != facts.normalize_name(name):
            continue
        exact = re.findall(r"==\s*([0-9][0-9A-Za-z.]*)(?![.*])", req.specifier)
        if exact:
            return exact[0]
        low = re.findall(r">=\s*([0-9][0-9A-Za-z.]*)", req.specifier)
        high = re.findall(r"<=\s*([0-9][0-9A-Za-z.]*)", req.specifier)
        if low and high and low[0] == high[0]:
            return low[0]
    return ""


def release_lists(index: Index, names) -> dict[str, list[str]]:
    """The final versions of each distribution (``nvidia-*``, numpy) that have a Linux x86_64 wheel: what a
    resolver can choose from when two frameworks' ranges for the same library meet."""
    found = {}
    for name in sorted(set(names)):
        document = index.project(name) or {"releases": {}}
        versions = [
            v
            for v in final_versions(document, "0")
            if any(
                (w := wheel_from_json(e, index.project_url(name))) and w.platform == "linux_x86_64"
                for e in document["releases"][v]
            )
        ]
        found[name] = versions
    return found


def shared_paths(index: Index, first: str, second: str) -> list[str]:
    """The shared libraries (``*/lib/*``) both distributions' newest Linux x86_64 wheels install
    (their zip members, read from the central directories by range requests): what one overwrites
    of the other. Headers collide too; the libraries are what breaks a running framework."""
    listed = []
    for name in (first, second):
        document = index.project(name) or {"releases": {}}
        versions = final_versions(document, "0")
        wheels = linux_wheels(index, name, versions[-1]) if versions else []
        if not wheels:
            return []
        wheel = best_wheel(wheels)
        entries = central_directory(lambda start, end, url=wheel.url: index.fetcher.range(url, start, end), wheel.size)
        listed.append({e.name for e in entries if "/lib/" in e.name and not e.name.endswith("/")})
    return sorted(listed[0] & listed[1])


def missing_releases(index: Index, known: set[tuple[str, str]]) -> list[tuple[str, str]]:
    """``(framework, version)`` of every torch/JAX release the index lists that ``known`` lacks,
    oldest first per framework (a project the index does not list has none)."""
    found = []
    for framework, minimum in MINIMUM.items():
        document = index.project(framework)
        if document is not None:
            found += [(framework, v) for v in final_versions(document, minimum) if (framework, v) not in known]
    return found


def read_release(reader: CompanionReader, framework: str, version: str) -> list[CompanionRow]:
    """The rows of one release: torch's one, or JAX's per CUDA extra."""
    return [reader.torch(version)] if framework == "torch" else reader.jax(version)


def pinned_names(rows: list[CompanionRow]) -> set[str]:
    """The distributions whose release lists a resolver needs for ``rows``' pins (nvidia-*, numpy)."""
    names = {name for row in rows for name in row.nvidia if name.startswith("nvidia-")}
    return names | ({"numpy"} if any(row.numpy for row in rows) else set())


def new_rows(index: Index, shipped: dict) -> dict | None:
    """What ``update-data`` adds to ``companions.toml``: the torch and JAX releases the shipped
    table (``shipped``, parsed) lacks, and fresh release lists of every distribution they pin;
    None when there is nothing new (or the index lists neither project)."""
    known = {(row["framework"], row["version"]) for row in shipped.get("release", [])}
    reader = CompanionReader(index)
    rows: list[CompanionRow] = []
    for framework, minimum in MINIMUM.items():
        document = index.project(framework)
        if document is None:
            continue
        for version in final_versions(document, minimum):
            if (framework, version) not in known:
                rows += [reader.torch(version)] if framework == "torch" else reader.jax(version)
    if not rows:
        return None
    names = {name for row in rows for name in row.nvidia if name.startswith("nvidia-")}
    names |= {"numpy"} if any(row.numpy for row in rows) else set()
    return {"rows": rows, "versions": release_lists(index, names), "collisions": []}
