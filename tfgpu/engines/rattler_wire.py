"""What the tool and its rattler process (``tfgpu.engines.rattler_child``) both read: the prefixes of
the process's progress lines, the virtual packages of a target, and rattler's records from their JSON.

Apart from ``tfgpu.engines.rattler_engine`` so that the engine process, started for every solve, query and
install, loads rattler and this alone: not the channel checks, the HTTP transport, the resolver and
the process machinery the tool uses to start it, which it never runs (a tenth of a second of CPU at
each start). Plain records only: everything asynchronous stays in the engine process.
"""

from __future__ import annotations

import json
from pathlib import Path

from rattler import (
    BuildString,
    GenericVirtualPackage,
    PackageName,
    PackageRecord,
    RepoDataRecord,
    Version,
    VirtualPackage,
)

GLIBC = "2.28"
"""The glibc a lock for linux-* assumes (the floor the pip side locks for: manylinux_2_28)."""
MACOS = "14.0"
PROGRESS = "progress: "
"""The prefix of the engine process's lines that are passed on to the reporter."""
BYTES = "bytes "
"""After :data:`PROGRESS`: ``bytes DONE TOTAL`` (TOTAL ``-`` when unknown), the package downloads so far."""


def virtual_packages(platform: str, cuda: str | None, *, this_host: bool):
    """The virtual packages of the machine an env is for: ``__cuda`` from the plan; the rest
    detected on this host (``this_host``), or the stated floors of ``platform`` (a lock for
    another machine: ``__glibc`` 2.28, ``__osx`` 14.0)."""

    def virtual(name: str, version: str) -> GenericVirtualPackage:
        return GenericVirtualPackage(PackageName(name), Version(version), BuildString("0"))

    if this_host:
        found = [p.into_generic() for p in VirtualPackage.detect()]
        found = [p for p in found if p.name.normalized != "__cuda"]
    else:
        found = [virtual("__archspec", "1")]
        if platform.startswith("linux"):
            found += [virtual("__unix", "0"), virtual("__linux", "5.10"), virtual("__glibc", GLIBC)]
        elif platform.startswith("osx"):
            found += [virtual("__unix", "0"), virtual("__osx", MACOS)]
        else:
            found.append(virtual("__win", "0"))
    if cuda:
        found.append(virtual("__cuda", cuda))
    return found


def records_from_json(rows: list[dict], scratch: Path) -> list:
    """rattler's repodata records from their JSON (the engine's answers and requests): rattler reads
    a record from an ``index.json``-like file, and takes its checksums and size apart."""
    records = []
    for number, row in enumerate(rows):
        path = scratch / f"record-{number}.json"
        path.write_text(json.dumps(row), encoding="utf-8")
        package = PackageRecord.from_index_json(
            path, size=row.get("size"), sha256=row.get("sha256"), md5=row.get("md5")
        )
        url = str(row["url"])
        records.append(RepoDataRecord(package, row.get("fn") or url.rsplit("/", 1)[-1], url, row.get("channel") or ""))
    return records
