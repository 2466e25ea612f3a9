"""``tfgpu-install update-data``: fetch the TensorFlow releases published since the shipped data.

It reads PyPI the way ``scripts/regen_tf_data.py`` does (``tfgpu.datasource``: the JSON API, then
range requests into each new release's wheels, every request bounded in size and time), checks
every row it builds, and writes the rows to the user's overlay (``tfgpu.paths.data_dir()``),
which the resolver adds to the shipped table for versions that table lacks; newer shipped data
supersedes it. Answers are cached under the user cache dir, and ``offline=True`` uses only those:
it never opens a connection. Nothing else in tfgpu-install fetches release data: ``plan`` only
reads tables.
"""

from __future__ import annotations

import concurrent.futures
import datetime

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from tfgpu.errors import OperationError

DEFAULT_INDEX = "https://pypi.org/pypi"
TIMEOUT_S = 30.0
MAX_JSON_BYTES = 32 * 1024 * 1024
MAX_RANGE_BYTES = 8 * 1024 * 1024
JOBS = 4

HEADER = """\
# Fetched by `tfgpu-install update-data` on {date} from {index}: TensorFlow releases that the data
# shipped with tfgpu-install (generated {shipped}) does not list. Same format as tfgpu/data/tensorflow.toml;
# rows for versions the shipped data lists are ignored, so a newer tfgpu-install supersedes this file.
"""


def _check_index(url: str) -> str:
    from tfgpu.urls import checked

    return checked(url, "--index").rstrip("/")


def validate(record) -> str:
    """Why a fetched release row cannot be used ("" when it can): the shapes the resolver relies on."""
    try:
        Version(record.version)
        for spec in record.and_cuda.values():
            SpecifierSet(spec)
        if record.requires_python:
            SpecifierSet(record.requires_python)
    except (InvalidVersion, InvalidSpecifier) as error:
        return f"unparseable version or specifier ({error})"
    if not record.wheels:
        return "no wheel for any platform tfgpu-install covers"
    for platform, wheel in record.wheels.items():
        if not wheel.python or not all(p.count(".") == 1 and p.replace(".", "").isdigit() for p in wheel.python):
            return f"{platform}: no CPython wheels"
        if wheel.cuda_build and (wheel.cuda.count(".") < 1 or not wheel.cudnn):
            return f"{platform}: a CUDA build whose CUDA ({wheel.cuda or '?'}) or cuDNN ({wheel.cudnn or '?'}) is unrecorded"
    return ""


def update_data(*, offline: bool = False, index_url: str | None = None) -> dict:
    """Fetch new release rows into the overlay; returns a report (``--json`` prints it)."""
    from tfgpu.datasource.http import Fetcher, SourceError
    from tfgpu.datasource.releases import Index, ReleaseReader, select_versions
    from tfgpu.datasource.toml_out import render_toml
    from tfgpu.paths import cache_root, data_dir
    from tfgpu.resolver import tables
    from tfgpu.data.updates import UPDATES_FILE

    if index_url is None and offline:  # the cache holds the answers of the index used last time
        from tfgpu.data.updates import updates

        index_url = updates().get("index")
    url = _check_index(index_url or DEFAULT_INDEX)
    fetcher = Fetcher(cache_root() / "pypi", refresh_json=not offline, timeout=TIMEOUT_S, retries=2,
                      offline=offline, max_json_bytes=MAX_JSON_BYTES, max_range_bytes=MAX_RANGE_BYTES)
    shipped = tables.load_toml("tensorflow.toml")
    rows = shipped.get("release", [])
    known = {Version(row["version"]) for row in rows}
    capabilities = [w.get("compute_capabilities") for row in rows for w in row.get("wheels", {}).values()
                    if w.get("compute_capabilities") and not w.get("unverified")]
    index = Index(fetcher, url)
    try:
        document = index.project("tensorflow")
        if document is None:
            raise SourceError(f"{index.project_url('tensorflow')}: no such project")
        wanted = [v for v in select_versions(document) if Version(v) not in known]
        reader = ReleaseReader(index, known_capabilities=capabilities)
        with concurrent.futures.ThreadPoolExecutor(JOBS) as pool:
            records = list(pool.map(reader.read, wanted))
    except SourceError as error:
        if offline:
            raise OperationError("offline-no-cache", f"update-data --offline has no cached answer for what it "
                                 f"needs: {error}.", ["Run `tfgpu-install update-data` once with network access; "
                                                      "later runs can be --offline."]) from None
        raise OperationError("update-failed", f"Could not read the release data from {url}: {error}.",
                             ["Check the network (PyPI must be reachable), or give a mirror of the PyPI JSON API "
                              "with --index URL.", "The data shipped with tfgpu-install still works: "
                              "`tfgpu-install plan` needs no network."]) from None
    good = [r for r in records if not validate(r)]
    skipped = [{"version": r.version, "reason": validate(r)} for r in records if validate(r)]
    fetched = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    header = HEADER.format(date=fetched, index=url, shipped=shipped.get("generated", "?"))
    text = render_toml(good, header, {"fetched": fetched, "index": url, "shipped_generated": shipped.get("generated", "")})
    target = data_dir() / UPDATES_FILE
    try:
        from tfgpu.datasource.http import write_atomic

        write_atomic(target, text.encode("utf-8"))
    except OSError as error:
        raise OperationError("update-not-written", f"Cannot write {target}: {error.strerror}.",
                             ["Set TFGPU_USER_DATA_DIR to a directory you may write."]) from None
    new = [r.version for r in good]
    return {
        "index": url, "fetched": fetched, "offline": offline, "overlay": str(target),
        "shipped_generated": shipped.get("generated", ""), "new_releases": new, "skipped": skipped,
        "requests": fetcher.requests, "bytes": fetcher.bytes,
        "summary": (f"{len(new)} release(s) newer than the shipped data ({shipped.get('generated', '?')}): "
                    f"{', '.join(new)}; stored in {target}." if new else
                    f"Up to date: {url} lists no TensorFlow release the shipped data "
                    f"({shipped.get('generated', '?')}) lacks.")
                   + (f" Skipped {len(skipped)}: " + "; ".join(f"{s['version']} ({s['reason']})" for s in skipped)
                      if skipped else ""),
    }
