#!/usr/bin/env python3
"""Record the PyPI responses regen_tf_data.py needs for a few releases, as a test fixture.

Runs ``regen_tf_data.run`` against the real index for the given versions and stores, under
``--out`` (default ``tests/fixtures/pypi``):

* ``index/<project>.json``: each project JSON document fetched, trimmed to the recorded
  versions (plus ``--also-list`` versions, kept in the listing only so that the test sees
  releases the script must skip). File URLs are rewritten to ``/files/<filename>``, which a
  local test server resolves against its own address.
* ``ranges.tar.xz``: every byte range fetched, as members ``<filename>/<start>-<end>``
  (inclusive bounds), except the data of GPU kernels libraries that scripts/fatbin.py streams:
  hundreds of MB per wheel, of which the parser needs only the fatbin headers.
* ``fatbin.tar.xz``: for each such library, ``<filename>/scan.json`` (the member, where its data
  starts in the wheel, its inflated size, what the scan found) and ``<filename>/<offset>`` for
  every piece of the inflated member the parser read: a sparse image the test server deflates
  and serves in place of the member's data.

Both archives are solid xz: the central directories of one release's wheels share most of their
file names, and fatbin headers repeat. Example::

    python scripts/record_fixture.py 2.0.0 2.14.1 2.22.0rc0 --also-list 2.14.0rc1 1.15.5 \\
        --linux-only 2.22.0rc0 --cache /tmp/tfdata-cache
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import lzma
import shutil
import sys
import tarfile
import tempfile
import urllib.parse
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE.parent / "tests" / "fixtures" / "pypi"
RANGES_ARCHIVE = "ranges.tar.xz"
FATBIN_ARCHIVE = "fatbin.tar.xz"


def load_regen():
    """Import regen_tf_data.py from this directory (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location("regen_tf_data", HERE / "regen_tf_data.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("regen_tf_data", module)
    spec.loader.exec_module(module)
    return sys.modules["regen_tf_data"]


regen = load_regen()
import fatbin  # noqa: E402 (regen_tf_data put scripts/ on sys.path)


class RecordingFetcher(regen.Fetcher):
    """A Fetcher that remembers every JSON document and byte range it returned.

    ``linux_only`` versions keep only their Linux x86_64 files in the tensorflow listing (the run
    then reads one wheel of theirs, which keeps the fixture small)."""

    def __init__(self, *args, linux_only: set[str] = frozenset(), **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.linux_only = linux_only
        self.documents: dict[str, dict | None] = {}
        self.ranges: dict[tuple[str, int, int], bytes] = {}

    def json(self, url: str) -> dict | None:
        document = super().json(url)
        if document and url.rstrip("/").endswith("/tensorflow/json"):
            releases = document.get("releases", {})
            for version in self.linux_only & set(releases):
                releases[version] = [
                    f
                    for f in releases[version]
                    if f["filename"].endswith("_x86_64.whl") and "manylinux" in f["filename"]
                ]
        self.documents[url] = document
        return document

    def range(self, url: str, start: int, end: int) -> bytes:
        data = super().range(url, start, end)
        self.ranges[(url, start, end)] = data
        return data


def trim(document: dict, versions: set[str]) -> dict:
    """The project document cut down to ``versions``, with file URLs made root-relative."""
    info = {k: document["info"].get(k) for k in ("name", "version", "requires_python", "summary")}
    releases = {
        version: [dict(entry, url=f"/files/{entry['filename']}") for entry in files]
        for version, files in document.get("releases", {}).items()
        if version in versions
    }
    return {"info": info, "releases": releases}


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    member = tarfile.TarInfo(name)
    member.size, member.mode = len(data), 0o644  # mtime 0, no owner: reproducible
    tar.addfile(member, io.BytesIO(data))


def write_fixture(
    fetcher: RecordingFetcher, scanned: dict[str, dict], out: Path, versions: set[str], also_list: set[str]
) -> None:
    shutil.rmtree(out / "index", ignore_errors=True)
    for url, document in sorted(fetcher.documents.items()):
        if document is None:
            continue  # the test server answers 404 for anything it does not hold
        project = urllib.parse.urlsplit(url).path.rstrip("/").split("/")[-2]
        keep = versions | also_list if project == "tensorflow" else versions
        path = out / "index" / f"{project}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(trim(document, keep), indent=1, sort_keys=True) + "\n", "utf-8")
    preset = 9 | lzma.PRESET_EXTREME
    with tarfile.open(out / RANGES_ARCHIVE, "w:xz", preset=preset, format=tarfile.USTAR_FORMAT) as tar:
        for (url, start, end), data in sorted(fetcher.ranges.items()):
            filename = urllib.parse.unquote(urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1])
            _add(tar, f"{filename}/{start}-{end}", data)
    with tarfile.open(out / FATBIN_ARCHIVE, "w:xz", preset=preset, format=tarfile.USTAR_FORMAT) as tar:
        for filename, document in sorted(scanned.items()):
            about = {k: document[k] for k in ("member", "data_start", "inflated_size", "found")}
            _add(tar, f"{filename}/scan.json", json.dumps(about, sort_keys=True).encode())
            for offset, hex_data in document["image"]:
                _add(tar, f"{filename}/{offset}", bytes.fromhex(hex_data))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("versions", nargs="+", metavar="VERSION")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="fixture directory (default: %(default)s)")
    parser.add_argument(
        "--also-list",
        nargs="*",
        default=[],
        metavar="VERSION",
        help="versions kept in the tensorflow listing without their wheels being read",
    )
    parser.add_argument("--index-url", default=regen.DEFAULT_INDEX)
    parser.add_argument("--cache", type=Path, help="cache directory, as for regen_tf_data.py")
    parser.add_argument(
        "--linux-only",
        nargs="*",
        default=[],
        metavar="VERSION",
        help="versions recorded with their Linux x86_64 wheels only",
    )
    args = parser.parse_args(argv)

    fetcher = RecordingFetcher(args.cache, linux_only=set(args.linux_only))
    scanner = fatbin.FatbinScanner(fetcher, args.cache, regen.log, bulk_fetcher=regen.Fetcher(args.cache))
    with tempfile.TemporaryDirectory() as tmp:
        run_args = argparse.Namespace(
            out=Path(tmp) / "tensorflow.toml",
            index_url=args.index_url,
            only=args.versions,
            jobs=regen.MAX_JOBS,
            cache=args.cache,
        )
        try:
            regen.run(run_args, fetcher, scanner=scanner)
        except regen.RegenError as exc:
            regen.log(f"error: {exc}")
            return 1
    write_fixture(fetcher, scanner.scanned, args.out, set(args.versions), set(args.also_list))
    size = sum(p.stat().st_size for p in args.out.rglob("*") if p.is_file())
    regen.log(
        f"recorded {len(fetcher.documents)} documents, {len(fetcher.ranges)} ranges and "
        f"{len(scanner.scanned)} fatbin images into {args.out} ({size / 1e6:.2f} MB on disk)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
