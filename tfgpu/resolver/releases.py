"""The TensorFlow releases of ``tensorflow.toml`` (and of the update overlay) as records, read
through ``tfgpu.resolver.tables`` like every other table."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from tfgpu.data import derived, load
from tfgpu.records import record
from tfgpu.versions import PlainVersion, parse


@record
class Wheel:
    """What the wheel of one release for one platform contains (read from the wheel itself)."""

    python: tuple[str, ...]
    platform_tag: str
    cuda_build: bool
    cuda: str
    cudnn: str
    compute_capabilities: tuple[str, ...]
    shim_for: str
    file: str
    cudnn_compiled: str = ""
    """The cuDNN of the wheel's own cudnn_version.h ("9.10.0"), where it ships one."""
    ptx_isa: str = ""
    """The newest PTX ISA version in the wheel's fatbins ("8.5"), where they were read."""
    source: tuple[str, ...] = ()
    unverified: tuple[str, ...] = ()


@record
class Release:
    """One TensorFlow release, with its wheels per platform."""

    version: PlainVersion
    uploaded: str
    requires_python: str
    gpu_package: str
    numpy: str
    and_cuda: dict[str, str]
    wheels: Mapping[str, Wheel]
    """By wheel platform (``linux_x86_64``); from the tables, a :class:`Wheels`."""
    source: tuple[str, ...]
    prerelease: bool = False
    cuda_extra: str = ""
    """The pip extra that installs CUDA ("and-cuda"); "" where the release has none."""
    origin: str = "shipped"
    """``shipped`` (tfgpu/data) or ``update`` (fetched by ``tfgpu-install update-data``)."""

    @property
    def series(self) -> str:
        return f"{self.version.major}.{self.version.minor}"


def _tuple(row: dict, key: str) -> tuple[str, ...]:
    return tuple(row.get(key, ()))


class Wheels(Mapping[str, Wheel]):
    """A release's ``[release.wheels.*]`` rows by platform, each made a :class:`Wheel` when first
    read. A plan reads one or two wheels of the release it chooses (and the ones it rejects on the
    way), not the 245 of every release: building them all up front was 10M instructions of a
    ``plan --json`` (callgrind; a bare ``python -c pass`` is 39M). Read-only, equal to a dict of the
    same Wheels."""

    __slots__ = ("_rows", "_made")

    def __init__(self, rows: Mapping[str, dict]) -> None:
        self._rows = rows
        self._made: dict[str, Wheel] = {}

    def __getitem__(self, platform: str) -> Wheel:
        made = self._made.get(platform)
        if made is None:
            made = self._made[platform] = wheel_from_row(self._rows[platform])
        return made

    def __contains__(self, platform: object) -> bool:
        return platform in self._rows

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def __repr__(self) -> str:
        return repr(dict(self.items()))


def wheel_from_row(w: dict) -> Wheel:
    """One ``[release.wheels.<platform>]`` table as a Wheel."""
    return Wheel(
        python=_tuple(w, "python"),
        platform_tag=w.get("platform_tag", ""),
        cuda_build=bool(w.get("cuda_build", False)),
        cuda=w.get("cuda", ""),
        cudnn=w.get("cudnn", ""),
        compute_capabilities=_tuple(w, "compute_capabilities"),
        shim_for=w.get("shim_for", ""),
        file=w.get("wheel", ""),
        cudnn_compiled=w.get("cudnn_compiled", ""),
        ptx_isa=w.get("ptx_isa", ""),
        source=_tuple(w, "source"),
        unverified=_tuple(w, "unverified"),
    )


def release_from_row(row: dict, origin: str = "shipped") -> Release:
    """One ``[[release]]`` row of tensorflow.toml (or of the update overlay) as a Release (its wheels
    made as they are read: :class:`Wheels`)."""
    and_cuda = dict(row.get("and_cuda", {}))
    return Release(
        version=parse(row["version"]),
        uploaded=row.get("uploaded", ""),
        requires_python=row.get("requires_python", ""),
        gpu_package=row.get("gpu_package", "tensorflow"),
        numpy=row.get("numpy", ""),
        and_cuda=and_cuda,
        wheels=Wheels(row.get("wheels", {})),
        source=_tuple(row, "source"),
        prerelease=bool(row.get("prerelease", False)),
        cuda_extra=row.get("cuda_extra", "and-cuda" if and_cuda else ""),
        origin=origin,
    )


@derived
def releases() -> tuple[Release, ...]:
    """Every TensorFlow 2.x release, newest first: the shipped rows, plus the update overlay's rows for
    versions the shipped data lacks (``tfgpu.resolver.overlay``: newer shipped data supersedes it)."""
    shipped = [release_from_row(row) for row in load("tensorflow.toml")["release"]]
    return tuple(sorted(_merged(shipped), key=lambda r: r.version, reverse=True))


def _merged(shipped: list) -> list:
    """``shipped`` releases plus the overlay's for versions ``shipped`` lacks; a pre-release that a final
    release of its series (at or above its base version) has superseded is dropped."""
    # Start-up cost: `doctor` loads this module but not tfgpu.data.updates.
    from tfgpu.data.updates import update_rows

    known = [r.version for r in shipped]  # a list: hashing a version would import packaging (see versions.py)
    everything = shipped + [
        r for r in (release_from_row(row, "update") for row in update_rows()) if r.version not in known
    ]
    finals = [r.version for r in everything if not r.version.is_prerelease]

    def superseded(v) -> bool:
        return any(f.release[:2] == v.release[:2] and f >= parse(v.base_version) for f in finals)

    return [r for r in everything if not r.version.is_prerelease or not superseded(r.version)]
