#!/usr/bin/env python3
"""Record the PyPI responses regen_tf_data.py needs for a few releases, as a test fixture.

Runs ``regen_tf_data.run`` against the real index for the given versions and stores, under
``--out`` (default ``tests/fixtures/pypi``):

* ``index/<project>.json``: each project JSON document fetched, trimmed to the recorded
  versions (plus ``--also-list`` versions, kept in the listing only so that the test sees
  releases the script must skip). File URLs are rewritten to ``/files/<filename>``, which a
  local test server resolves against its own address.
* ``ranges.tar.xz``: every byte range fetched, as members ``<filename>/<start>-<end>``
  (inclusive bounds). One solid xz archive, because the central directories of the wheels
  of one release share most of their file names: that keeps the fixture well under 1 MB.

Example::

    python scripts/record_fixture.py 2.0.0 2.14.1 --also-list 2.14.0rc1 1.15.5 --cache /tmp/tfdata-cache
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


def load_regen():
    """Import regen_tf_data.py from this directory (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location("regen_tf_data", HERE / "regen_tf_data.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("regen_tf_data", module)
    spec.loader.exec_module(module)
    return sys.modules["regen_tf_data"]


regen = load_regen()


class RecordingFetcher(regen.Fetcher):
    """A Fetcher that remembers every JSON document and byte range it returned."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.documents: dict[str, dict | None] = {}
        self.ranges: dict[tuple[str, int, int], bytes] = {}

    def json(self, url: str) -> dict | None:
        document = super().json(url)
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
        for version, files in document.get("releases", {}).items() if version in versions
    }
    return {"info": info, "releases": releases}


def write_fixture(fetcher: RecordingFetcher, out: Path, versions: set[str], also_list: set[str]) -> None:
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
            member = tarfile.TarInfo(f"{filename}/{start}-{end}")
            member.size, member.mode = len(data), 0o644  # mtime 0, no owner: reproducible
            tar.addfile(member, io.BytesIO(data))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("versions", nargs="+", metavar="VERSION")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="fixture directory (default: %(default)s)")
    parser.add_argument("--also-list", nargs="*", default=[], metavar="VERSION",
                        help="versions kept in the tensorflow listing without their wheels being read")
    parser.add_argument("--index-url", default=regen.DEFAULT_INDEX)
    parser.add_argument("--cache", type=Path, help="cache directory, as for regen_tf_data.py")
    args = parser.parse_args(argv)

    fetcher = RecordingFetcher(args.cache)
    with tempfile.TemporaryDirectory() as tmp:
        run_args = argparse.Namespace(out=Path(tmp) / "tensorflow.toml", index_url=args.index_url,
                                      only=args.versions, jobs=regen.MAX_JOBS)
        try:
            regen.run(run_args, fetcher)
        except regen.RegenError as exc:
            regen.log(f"error: {exc}")
            return 1
    write_fixture(fetcher, args.out, set(args.versions), set(args.also_list))
    size = sum(p.stat().st_size for p in args.out.rglob("*") if p.is_file())
    regen.log(f"recorded {len(fetcher.documents)} documents and {len(fetcher.ranges)} ranges "
              f"into {args.out} ({size / 1e6:.2f} MB on disk)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
