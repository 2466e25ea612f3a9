"""What ``update-data`` has kept so far: the overlay rows, re-written after every release it reads.

Owns the progress of one ``update-data`` run. The rows a run (or an earlier run against the same
index) fetched and validated are held here; each new release read is added and the whole overlay
is written again at once, through ``tfgpu.datasource.update``'s write door (a temporary file, read back with
the loader ``plan`` uses, renamed over the old one). So a request that fails later loses nothing
already read, and the next run starts from what is kept: it does not fetch those releases again.
"""

from __future__ import annotations

from tfgpu.datasource.companions import CompanionRow
from tfgpu.datasource.releases import PlatformRecord, ReleaseRecord
from tfgpu.errors import OperationError
from tfgpu.records import fields

_PLATFORM_KEYS = set(fields(PlatformRecord)) - {"metadata"}


def record_from_row(row: dict) -> ReleaseRecord:
    """A ``[[release]]`` row of an overlay (already checked by its loader) as the record it was."""
    wheels = {
        platform: PlatformRecord(**{k: v for k, v in wheel.items() if k in _PLATFORM_KEYS})
        for platform, wheel in row.get("wheels", {}).items()
    }
    return ReleaseRecord(
        version=row["version"],
        uploaded=row.get("uploaded", ""),
        requires_python=row.get("requires_python", ""),
        gpu_package=row.get("gpu_package", ""),
        numpy=row.get("numpy", ""),
        numpy_markers=dict(row.get("numpy_markers", {})),
        sources=list(row.get("source", [])),
        and_cuda=dict(row.get("and_cuda", {})),
        wheels=wheels,
        prerelease=bool(row.get("prerelease", False)),
        cuda_extra=row.get("cuda_extra", ""),
        cuda_extras=list(row.get("cuda_extras", [])),
    )


def companion_from_row(row: dict) -> CompanionRow:
    """A companion overlay row as the record it was read into."""
    return CompanionRow(
        row["framework"],
        row["version"],
        row["extra"],
        row["stack"],
        list(row["python"]),
        row["numpy"],
        dict(row["nvidia"]),
        list(row["wheels"]),
        sources=list(row.get("source", [])),
        cuda=row.get("cuda", ""),
        driver=row.get("driver", ""),
        gpu_archs=list(row.get("gpu_archs", [])),
        gpu_range=list(row.get("gpu_range", [])),
        archs_from=row.get("archs_from", ""),
    )


def label(row: CompanionRow) -> str:
    return f"{row.framework}{f'[{row.extra}]' if row.extra else ''}=={row.version}"


class Progress:
    """The rows kept so far, and what was not written and why; ``write_releases``/``write_companions``
    (given by ``tfgpu.datasource.update``) put the whole overlay of one table in place."""

    def __init__(self, write_releases, write_companions, kept_releases, kept_companions, kept_versions) -> None:
        self._write_releases = write_releases
        self._write_companions = write_companions
        self.kept_releases: list[ReleaseRecord] = list(kept_releases)
        self.kept_companions: list[CompanionRow] = list(kept_companions)
        self.versions: dict[str, list[str]] = dict(kept_versions)
        self.fetched_releases: list[ReleaseRecord] = []
        self.fetched_companions: list[CompanionRow] = []
        self.not_written: list[dict[str, str]] = []

    def add_release(self, record: ReleaseRecord) -> bool:
        """Keep ``record`` and write the overlay; False (and why, in ``not_written``) when it fails
        the checks every table passes (the overlay there stays as it was)."""
        try:
            self._write_releases([*self.kept_releases, *self.fetched_releases, record])
        except OperationError as error:
            if error.code != "update-failed":
                raise
            self.fail(f"tensorflow {record.version}", error.message)
            return False
        self.fetched_releases.append(record)
        return True

    def add_companions(self, rows: list[CompanionRow], versions: dict[str, list[str]], what: str) -> bool:
        """Keep the rows of one companion release with the release lists of what they pin."""
        merged = {**self.versions, **versions}
        try:
            self._write_companions([*self.kept_companions, *self.fetched_companions, *rows], merged)
        except OperationError as error:
            if error.code != "update-failed":
                raise
            self.fail(what, error.message)
            return False
        self.fetched_companions += rows
        self.versions = merged
        return True

    def fail(self, what: str, why: str) -> None:
        self.not_written.append({"what": what, "reason": why})

    @property
    def releases(self) -> list[str]:
        return [r.version for r in [*self.kept_releases, *self.fetched_releases]]

    @property
    def companions(self) -> list[str]:
        return [label(r) for r in [*self.kept_companions, *self.fetched_companions]]
