"""One TensorFlow release, read from PyPI: its wheels per platform and what they say about CUDA.

For every platform the wheel with the highest cp tag is read by range requests (METADATA,
``build_info.py``, ``cuda_config.h``, ``cudnn_version.h``). Each CUDA fact is taken from the
first source that records it: ``build_info.py`` [WHL-BI], else the headers [WHL-CUDA-H],
[WHL-CUDNN-H], else (compute capabilities only) the fatbin of the GPU kernels library, through
the optional ``arch_scanner`` the regeneration script passes in [WHL-FATBIN]. Without a scanner,
capabilities the headers list as bare numbers take their SASS/PTX kinds from an older release with
the same numbers, and the row says that this is derived (``unverified``).

Shim wheels (a METADATA that pins another TensorFlow distribution for this platform, e.g.
``tensorflow-intel==X; platform_system == "Windows"``) are followed to the target distribution's
wheel of the same version. TF 2.0.x shipped its CUDA build as ``tensorflow-gpu``; that is read
where the ``tensorflow`` Linux wheel is not a CUDA build.
"""

from __future__ import annotations

import collections
import re
import threading

from tfgpu.datasource import wheel_facts as facts
from tfgpu.datasource.http import Fetcher, SourceError
from tfgpu.datasource.remote_zip import WheelMembers, ZipEntry, read_wheel_members
from tfgpu.doors import untrusted, urls
from tfgpu.records import factory, record

#: Source keys in the order rows list them (defined in tfgpu/data/sources.toml).
SOURCE_ORDER = ("PYPI-JSON", "WHL-META", "WHL-BI", "WHL-CUDA-H", "WHL-CUDNN-H", "WHL-FATBIN")


@record
class WheelFile:
    """A wheel listed in the PyPI JSON, classified by platform."""

    filename: str
    url: str
    size: int
    platform: str
    platform_tag: str  # first of the (possibly compressed) platform tags
    pythons: tuple[str, ...]  # "3.11", from the cp tags


def wheel_from_json(entry: dict, base_url: str) -> WheelFile | None:
    """A WheelFile for a PyPI JSON file entry, or None if it is no wheel for a known platform.
    Its URL must pass the transport rule here, before anything is fetched from it."""
    where = f"{base_url} (a file entry)"
    entry = untrusted.expect(entry, dict, untrusted.UPSTREAM, base_url, "a file entry")
    filename = untrusted.expect(entry.get("filename"), str, untrusted.UPSTREAM, where, "its filename")
    if entry.get("packagetype") != "bdist_wheel" or not filename.endswith(".whl"):
        return None
    untrusted.expect(entry.get("url"), str, untrusted.UPSTREAM, where, f"the url of {filename}")
    untrusted.expect(entry.get("size"), int, untrusted.UPSTREAM, where, f"the size of {filename}")
    parts = filename[:-4].split("-")
    if len(parts) not in (5, 6):
        return None
    platform_tags = parts[-1].split(".")
    platform = next(filter(None, map(facts.platform_key, platform_tags)), None)
    if platform is None:
        return None
    pythons = tuple(
        f"{m.group(1)}.{m.group(2)}" for tag in parts[-3].split(".") if (m := re.fullmatch(r"cp(\d)(\d+)", tag))
    )
    # The index's answer names where the wheel is: through the URL door before anything is fetched.
    return WheelFile(
        filename,
        urls.join(base_url, entry["url"], f"the index's file list ({filename})"),
        int(entry["size"]),
        platform,
        platform_tags[0],
        pythons,
    )


def checked_project(document, url: str) -> dict | None:
    """A PyPI JSON project document whose parts this module reads have the types it reads them as
    (anything else is the index's answer being wrong: ``update-failed``, never a KeyError)."""
    if document is None:
        return None
    kind = untrusted.UPSTREAM
    document = untrusted.expect(document, dict, kind, url)
    releases = untrusted.expect(document.get("releases", {}), dict, kind, url, "'releases'")
    for version, files in releases.items():
        for entry in untrusted.expect(files, list, kind, url, f"the files of {version}"):
            entry = untrusted.expect(entry, dict, kind, url, f"a file entry of {version}")
            for key in ("filename", "upload_time_iso_8601"):
                untrusted.expect(entry.get(key), str, kind, url, f"{key!r} of a file of {version}")
            untrusted.expect(
                entry.get("requires_python"),
                (str, type(None)),
                kind,
                url,
                f"'requires_python' of {entry['filename']!r}",
            )
            if entry.get("packagetype") == "bdist_wheel":
                untrusted.expect(entry.get("url"), str, kind, url, f"'url' of {entry['filename']!r}")
                untrusted.expect(entry.get("size"), int, kind, url, f"'size' of {entry['filename']!r}")
    return document


class Index:
    """Project documents from the PyPI JSON API, each fetched once."""

    def __init__(self, fetcher: Fetcher, index_url: str) -> None:
        self.fetcher = fetcher
        self.index_url = index_url.rstrip("/")
        self._projects: dict[str, dict | None] = {}
        self._lock = threading.Lock()

    def project_url(self, project: str) -> str:
        return f"{self.index_url}/{project}/json"

    def project(self, project: str) -> dict | None:
        """The project's JSON document (None when the index has no such project)."""
        with self._lock:
            if project not in self._projects:
                url = self.project_url(project)
                self._projects[project] = checked_project(self.fetcher.json(url), url)
            return self._projects[project]

    def files(self, project: str, version: str) -> list[dict]:
        document = self.project(project)
        return list((document or {}).get("releases", {}).get(version, []))

    def wheels(self, project: str, version: str) -> dict[str, list[WheelFile]]:
        """The release's wheels grouped by platform key."""
        base = self.project_url(project)
        grouped: dict[str, list[WheelFile]] = collections.defaultdict(list)
        for entry in self.files(project, version):
            if (wheel := wheel_from_json(entry, base)) is not None:
                grouped[wheel.platform].append(wheel)
        return grouped


def best_wheel(wheels: list[WheelFile]) -> WheelFile:
    """The wheel with the highest cp tag (ties, for determinism: the greatest file name)."""
    return max(wheels, key=lambda w: (max(map(facts.python_key, w.pythons), default=()), w.filename))


def superseded(version: str, finals) -> bool:
    """Whether a pre-release has a final release of its series at or above its base version
    (2.14.0rc1 once 2.14.0 or 2.14.1 is out; 2.22.0rc0 is not superseded by 2.21.1)."""
    base = facts.version_key(facts.base_version(version))
    return any(facts.version_key(f)[:2] == base[:2] and facts.version_key(f) >= base for f in finals)


def select_versions(document: dict, only: list[str] | None = None) -> list[str]:
    """The 2.x versions that become rows, newest first: every final and post release with files,
    and the pre-releases no final release of their series has superseded yet (2.22.0rc0 while
    there is no 2.22.0). Restricted to ``only`` if given (which must name such versions)."""
    releases = {v: files for v, files in document.get("releases", {}).items() if facts.TF_2X.match(v) and files}
    finals = [v for v in releases if not facts.is_prerelease(v)]
    versions = [v for v in releases if not facts.is_prerelease(v) or not superseded(v, finals)]
    if only:
        missing = sorted(set(only) - set(versions))
        if missing:
            raise SourceError(f"not TensorFlow 2.x releases listed on the index: {', '.join(missing)}")
        versions = [v for v in versions if v in only]
    return sorted(versions, key=facts.version_key, reverse=True)


@record(frozen=False)
class ArchScan:
    """What the regeneration script's fatbin scanner found in a wheel's GPU kernels library."""

    compute_capabilities: tuple[str, ...]  # TensorFlow's notation: sm_XY (SASS only), compute_XY (+PTX)
    ptx_isa: str  # newest PTX ISA version embedded, "8.5"
    member: str


@record(frozen=False)
class PlatformRecord:
    """One ``[release.wheels.<platform>]`` table, plus the requirements read on the way."""

    python: list[str]
    platform_tag: str
    cuda_build: bool = False
    cuda: str = ""
    cudnn: str = ""
    compute_capabilities: list[str] = factory(list)
    shim_for: str = ""
    wheel: str = ""
    cudnn_compiled: str = ""
    ptx_isa: str = ""
    cuda_raw: str = ""
    cudnn_raw: str = ""
    note: str = ""
    source: list[str] = factory(list)
    unverified: list[str] = factory(list)
    metadata: str | None = factory(lambda: None, shown=False)


@record(frozen=False)
class ReleaseRecord:
    """One ``[[release]]`` entry of tensorflow.toml."""

    version: str
    uploaded: str
    requires_python: str
    gpu_package: str
    numpy: str
    numpy_markers: dict[str, str]
    sources: list[str]
    and_cuda: dict[str, str]
    wheels: dict[str, PlatformRecord]
    prerelease: bool = False
    cuda_extra: str = ""
    cuda_extras: list[str] = factory(list)


def ordered_sources(keys) -> list[str]:
    """Source keys in SOURCE_ORDER, without repeats."""
    keys = set(keys)
    return [k for k in SOURCE_ORDER if k in keys]


class ReleaseReader:
    """Turns one TensorFlow release into a ReleaseRecord by reading its wheels.

    ``arch_scanner(wheel, entries) -> ArchScan | None`` reads compute capabilities from a GPU
    wheel's kernels library; ``known_capabilities`` are TF-notation capability lists of other
    releases, used (and marked unverified) where a header gives bare numbers and there is no scanner.
    """

    def __init__(self, index: Index, arch_scanner=None, known_capabilities=()) -> None:
        self.index = index
        self.arch_scanner = arch_scanner
        self.known_capabilities = [tuple(c) for c in known_capabilities if c]

    def read(self, version: str) -> ReleaseRecord:
        """The record of ``version`` of the ``tensorflow`` project."""
        files = self.index.files("tensorflow", version)
        wheels = self.index.wheels("tensorflow", version)
        records = {p: self._platform(wheels[p], p) for p in facts.PLATFORMS if wheels.get(p)}
        gpu_package = "tensorflow"
        linux = records.get("linux_x86_64")
        if linux and not linux.cuda_build:
            gpu_wheels = self.index.wheels("tensorflow-gpu", version)
            if gpu_wheels.get("linux_x86_64"):
                gpu_package = "tensorflow-gpu"
                for platform in ("linux_x86_64", "windows_x86_64"):
                    if gpu_wheels.get(platform):
                        records[platform] = self._platform(gpu_wheels[platform], platform)
                        records[
                            platform
                        ].note = f"CUDA build of tensorflow-gpu=={version}; the tensorflow wheel is CPU-only"
        metadata = records["linux_x86_64"].metadata if "linux_x86_64" in records else None
        requirements = facts.parse_requirements(metadata) if metadata else []
        extras = facts.cuda_extras(requirements, facts.provided_extras(metadata) if metadata else [])
        numpy = [r for r in requirements if r.name == "numpy" and facts.marker_extra(r.marker) is None]
        requires_python = collections.Counter(f.get("requires_python") or "" for f in files)
        return ReleaseRecord(
            version=version,
            uploaded=min(f["upload_time_iso_8601"] for f in files)[:10],
            requires_python=max(requires_python, key=lambda rp: (requires_python[rp], rp)),
            gpu_package=gpu_package,
            # Some releases split the numpy pin by Python version (2.16: python_version <= "3.11"
            # / >= "3.12"): `numpy` then holds the first one and `numpy_markers` all of them.
            numpy=next((r.specifier for r in numpy if not r.marker), numpy[0].specifier if numpy else ""),
            numpy_markers={r.marker: r.specifier for r in numpy if r.marker},
            sources=ordered_sources(s for r in records.values() for s in r.source),
            and_cuda=extras.pins,
            wheels=records,
            prerelease=facts.is_prerelease(version),
            cuda_extra=extras.name,
            cuda_extras=list(extras.names),
        )

    def _platform(self, wheels: list[WheelFile], platform: str) -> PlatformRecord:
        wheel = best_wheel(wheels)
        pythons = sorted({p for w in wheels for p in w.pythons}, key=facts.python_key)
        record = PlatformRecord(
            python=pythons, platform_tag=wheel.platform_tag, wheel=wheel.filename, source=["PYPI-JSON"]
        )
        members, read_from = self._members(wheel), wheel
        record.metadata = members.metadata
        requirements = facts.parse_requirements(members.metadata) if members.metadata else []
        if members.metadata is not None:
            record.source.append("WHL-META")
        find_target = None
        if members.build_info is None:
            find_target = facts.find_shim_target(requirements, platform)
        if find_target:
            record.shim_for = find_target[0]
            target_wheels = self.index.wheels(find_target[0], find_target[1]).get(platform)
            if target_wheels:
                target = best_wheel(target_wheels)
                members, read_from = self._members(target), target
                record.note = f"build_info read from {target.filename}"
            else:
                record.note = f"shim for {find_target[0]}=={find_target[1]}, which has no {platform} wheel on PyPI"
                return record
        elif members.build_info is None:
            record.note = "no build_info.py in the wheel"
        self._cuda_facts(record, members, read_from, platform)
        return record

    def _cuda_facts(self, record: PlatformRecord, members: WheelMembers, wheel: WheelFile, platform: str) -> None:
        info = facts.parse_build_info(members.build_info) if members.build_info is not None else None
        if info is not None:
            record.source.append("WHL-BI")
            record.cuda_build = info.cuda_build
        if info is None or not record.cuda_build:
            return
        config = facts.parse_cuda_config(members.cuda_config) if members.cuda_config else None
        record.cuda, record.cudnn = info.cuda, info.cudnn
        record.cuda_raw = info.cuda_raw if info.cuda_raw != info.cuda else ""
        record.cudnn_raw = info.cudnn_raw if info.cudnn_raw != info.cudnn else ""
        record.compute_capabilities = list(info.compute_capabilities)
        if config and (not record.cuda or not record.cudnn):
            record.cuda, record.cudnn = record.cuda or config.cuda, record.cudnn or config.cudnn
            record.source.append("WHL-CUDA-H")
        if members.cudnn_version and (compiled := facts.parse_cudnn_version(members.cudnn_version)):
            record.cudnn_compiled = compiled
            record.source.append("WHL-CUDNN-H")
        if not record.compute_capabilities:
            self._capabilities(record, config, wheel, members.entries)

    def _capabilities(self, record: PlatformRecord, config, wheel: WheelFile, entries: tuple[ZipEntry, ...]) -> None:
        numbers = config.compute_capabilities if config else ()
        scan = self.arch_scanner(wheel, entries) if self.arch_scanner else None
        if numbers and "WHL-CUDA-H" not in record.source:
            record.source.append("WHL-CUDA-H")
        if scan is not None:
            record.compute_capabilities, record.ptx_isa = list(scan.compute_capabilities), scan.ptx_isa
            record.source.append("WHL-FATBIN")
            found = sorted({arch_number(c) for c in scan.compute_capabilities}, key=facts.python_key)
            if numbers and found != sorted(numbers, key=facts.python_key):
                record.note = _join(
                    record.note,
                    f"cuda_config.h lists {', '.join(numbers)}; the fatbin of {scan.member} carries {', '.join(found)}",
                )
            return
        if not numbers:
            return
        same = next(
            (caps for caps in self.known_capabilities if sorted(arch_number(c) for c in caps) == sorted(numbers)), None
        )
        if same:
            record.compute_capabilities = list(same)
            record.unverified.append("compute_capabilities")
            record.note = _join(
                record.note,
                "cuda_config.h lists the targets without saying which carry PTX; "
                "the SASS/PTX kinds are those of an older release with the same targets",
            )
        else:
            record.unverified.append("compute_capabilities")
            record.note = _join(
                record.note,
                f"cuda_config.h lists compute capabilities {', '.join(numbers)} "
                "without saying which carry PTX; not recorded",
            )

    def _members(self, wheel: WheelFile) -> WheelMembers:
        try:
            return read_wheel_members(lambda a, b: self.index.fetcher.range(wheel.url, a, b), wheel.size)
        except SourceError as exc:
            raise SourceError(f"{wheel.filename}: {exc}") from None


def arch_number(capability: str) -> str:
    """``sm_89`` / ``compute_90`` -> ``8.9`` / ``9.0``."""
    digits = capability.partition("_")[2]
    return f"{digits[:-1]}.{digits[-1]}"


def _join(note: str, more: str) -> str:
    return f"{note}; {more}" if note else more
