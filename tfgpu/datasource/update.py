"""``tfgpu-install update-data``: fetch the TensorFlow releases published since the shipped data.

It reads PyPI the way ``scripts/regen_tf_data.py`` does (``tfgpu.datasource``: the JSON API, then
range requests into each new release's wheels, every request bounded in size and by its own deadline), checks
every row it builds, and writes the rows to the user's overlay as each release is read (``tfgpu.doors.paths.data_dir()``),
which the resolver adds to the shipped table for versions that table lacks; newer shipped data
supersedes it. Answers are cached under the user cache dir, and ``offline=True`` uses only those:
it never opens a connection. Nothing else in tfgpu-install fetches release data: ``plan`` only
reads tables.

The index is untrusted: an answer of the wrong shape is ``update-failed``, never a traceback;
every wheel URL it lists passes the transport rule before anything is fetched; the overlay is
written only when there is something new, and only after the loader ``plan`` uses has read it
back (a temporary file, checked, then renamed over the old one), so a bad answer never leaves
an overlay that breaks every later command.
"""

from __future__ import annotations

import concurrent.futures
import datetime
import os
import struct
import zlib

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from tfgpu.data.updates import COMPANION_UPDATES_FILE, UPDATES_FILE, load, load_companions, updates
from tfgpu.doors import trees
from tfgpu.doors.paths import cache_root, data_dir
from tfgpu.errors import OperationError, TfgpuError, UsageError
from tfgpu.records import as_dict, record
from tfgpu.resolver import tables
from tfgpu.resolver.tables import release_from_row

DEFAULT_INDEX = "https://pypi.org/pypi"
TIMEOUT_S = 30.0
"""One request's deadline in seconds, its retries included (``TFGPU_UPDATE_TIMEOUT`` changes it); the
run as a whole has none: it keeps each release as it is read."""
MAX_JSON_BYTES = 32 * 1024 * 1024
MAX_RANGE_BYTES = 8 * 1024 * 1024
JOBS = 4

HEADER = """\
# Fetched by `tfgpu-install update-data` on {date} from {index}: TensorFlow releases that the data
# shipped with tfgpu-install (generated {shipped}) does not list. Same format as tfgpu/data/tensorflow.toml;
# rows for versions the shipped data lists are ignored, so a newer tfgpu-install supersedes this file.
"""


def _check_index(url: str) -> str:
    # Start-up cost: `matrix --json` loads this module but not tfgpu.doors.urls.
    from tfgpu.doors.urls import checked

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


@record
class UpdateReport:
    """What ``update-data`` fetched and wrote (``--json`` prints :meth:`to_dict`: its keys, in this
    order, are a contract). ``skipped``: the releases that failed validation, ``{version, reason}``."""

    index: str
    fetched: str
    offline: bool
    overlay: str | None
    shipped_generated: str
    new_releases: list[str]
    fetched_releases: list[str]
    kept_releases: list[str]
    new_companions: list[str]
    fetched_companions: list[str]
    kept_companions: list[str]
    not_written: list[dict[str, str]]
    skipped: list[dict[str, str]]
    requests: int
    bytes: int
    summary: str

    def to_dict(self) -> dict:
        return as_dict(self)


def update_data(*, offline: bool = False, index_url: str | None = None) -> UpdateReport:
    """Fetch new release rows into the overlay; returns a report (``--json`` prints it).

    Every request has its own deadline (:data:`TIMEOUT_S`), not the run: a run that reads many
    releases takes as long as they need. Each release read and validated is written to the overlay
    at once (``tfgpu.datasource.overlay``), so a failure later keeps it, and the next run against the
    same index resumes from what is kept. A run where something failed ends ``update-incomplete``
    (what was written, what was not and why) or, where nothing could be read, ``update-failed``."""
    # Start-up cost: `matrix --json` loads this module but not tfgpu.datasource.http, tfgpu.datasource.releases.
    from tfgpu.datasource.http import Fetcher
    from tfgpu.datasource.releases import Index
    from tfgpu.doors.paths import data_dir
    from tfgpu.resolver import tables

    if index_url is None and offline:  # the cache holds the answers of the index used last time
        index_url = updates().get("index")
    url = _check_index(index_url or DEFAULT_INDEX)
    per_request = _budget()
    fetcher = Fetcher(
        cache_root() / "pypi",
        refresh_json=not offline,
        timeout=per_request,
        retries=2,
        offline=offline,
        max_json_bytes=MAX_JSON_BYTES,
        max_range_bytes=MAX_RANGE_BYTES,
        request_deadline=per_request,
    )
    shipped = tables.load_toml("tensorflow.toml")
    fetched = datetime.datetime.now(datetime.UTC).date().isoformat()
    header = HEADER.format(date=fetched, index=url, shipped=shipped.get("generated", "?"))
    target = data_dir() / UPDATES_FILE
    progress = _progress(shipped, url, header, fetched)
    index = Index(fetcher, url)
    skipped = _read_releases(index, shipped, progress, offline, url)
    _read_companions(index, progress)
    if progress.not_written:
        raise _incomplete(progress, url, offline)
    new, new_companions = progress.releases, progress.companions
    return UpdateReport(
        index=url,
        fetched=fetched,
        offline=offline,
        overlay=str(target) if new else None,
        shipped_generated=shipped.get("generated", ""),
        new_releases=new,
        fetched_releases=[r.version for r in progress.fetched_releases],
        kept_releases=[r.version for r in progress.kept_releases],
        new_companions=new_companions,
        fetched_companions=[label(r) for r in progress.fetched_companions],
        kept_companions=[label(r) for r in progress.kept_companions],
        not_written=progress.not_written,
        skipped=skipped,
        requests=fetcher.requests,
        bytes=fetcher.bytes,
        summary=(
            f"{len(new)} release(s) newer than the shipped data ({shipped.get('generated', '?')}): "
            f"{', '.join(new)}; stored in {target}" + _kept_note(progress) + "."
            if new
            else f"Up to date: {url} lists no TensorFlow release the shipped data "
            f"({shipped.get('generated', '?')}) lacks"
            + ("." if progress.fetched_companions else "; nothing was written.")
        )
        + (f" New torch/JAX releases: {', '.join(new_companions)}." if new_companions else "")
        + (
            f" Skipped {len(skipped)}: " + "; ".join(f"{s['version']} ({s['reason']})" for s in skipped)
            if skipped
            else ""
        ),
    )


def _kept_note(progress) -> str:
    if not progress.kept_releases:
        return ""
    return f" ({', '.join(r.version for r in progress.kept_releases)} kept from an earlier run, not fetched again)"


def label(row) -> str:
    # Start-up cost: `matrix --json` loads this module but not tfgpu.datasource.overlay.
    from tfgpu.datasource.overlay import label as companion_label

    return companion_label(row)


def _progress(shipped: dict, url: str, header: str, fetched: str):
    """What earlier runs against ``url`` kept (rows for versions the shipped data now has are
    dropped; an overlay from another index, or one that no longer loads, is started over)."""
    # Start-up cost: `matrix --json` loads this module but not tfgpu.datasource.toml_out, tfgpu.datasource.overlay.
    from tfgpu.datasource.overlay import Progress, companion_from_row, record_from_row
    from tfgpu.datasource.toml_out import render_companions, render_toml

    def earlier(path, loader) -> dict:
        try:
            document = loader(path)
        except TfgpuError:
            return {}
        return document if document.get("index") == url else {}

    known = {Version(row["version"]) for row in shipped.get("release", [])}
    kept = [
        record_from_row(row)
        for row in earlier(data_dir() / UPDATES_FILE, load).get("release", [])
        if Version(row["version"]) not in known
    ]
    shipped_companions = {
        (r["framework"], r["version"]) for r in tables.load_toml("companions.toml").get("release", [])
    }
    companions = earlier(data_dir() / COMPANION_UPDATES_FILE, load_companions)
    # a row written before the build columns (a CUDA stack, no ``cuda``) is read again, so that
    # every kept row says what driver and GPU it runs on
    kept_companions = [
        companion_from_row(row)
        for row in companions.get("release", [])
        if (row["framework"], row["version"]) not in shipped_companions and (row.get("cuda") or not row["stack"])
    ]
    fields = {"fetched": fetched, "index": url, "shipped_generated": shipped.get("generated", "")}

    def write_releases(records) -> None:
        _install(data_dir() / UPDATES_FILE, render_toml(records, header, fields).encode("utf-8"), url)

    def write_companions(rows, versions) -> None:
        document = {"rows": rows, "versions": versions, "collisions": []}
        text = render_companions(document, header, {"fetched": fetched, "index": url})
        _install(data_dir() / COMPANION_UPDATES_FILE, text.encode("utf-8"), url, load_companions)

    return Progress(write_releases, write_companions, kept, kept_companions, companions.get("versions", {}))


def _read_releases(index, shipped: dict, progress, offline: bool, url: str) -> list[dict]:
    """Read every TensorFlow release neither the shipped data nor the kept overlay has, keeping each
    as it is validated; the rows that fail validation (``skipped``). Where the release list itself
    cannot be read, nothing can be: that is ``update-failed`` (or ``offline-no-cache``) at once."""
    # Start-up cost: `matrix --json` loads this module but not tfgpu.datasource.http, tfgpu.datasource.releases.
    from tfgpu.datasource.http import SourceError
    from tfgpu.datasource.releases import ReleaseReader, select_versions

    rows = shipped.get("release", [])
    known = {Version(row["version"]) for row in rows} | {Version(v) for v in progress.releases}
    capabilities = [
        w.get("compute_capabilities")
        for row in rows
        for w in row.get("wheels", {}).values()
        if w.get("compute_capabilities") and not w.get("unverified")
    ]
    try:
        document = index.project("tensorflow")
        if document is None:
            raise SourceError(f"{index.project_url('tensorflow')}: no such project")
        wanted = [v for v in select_versions(document) if Version(v) not in known]
        for version in wanted:  # every listed wheel URL passes the transport rule before any fetch
            index.wheels("tensorflow", version)
    except (SourceError, *_MALFORMED) as error:
        raise _failed(error, url, offline) from None
    reader = ReleaseReader(index, known_capabilities=capabilities)
    skipped = []
    with concurrent.futures.ThreadPoolExecutor(JOBS) as pool:
        reading = {pool.submit(reader.read, version): version for version in wanted}
        for done in concurrent.futures.as_completed(reading):
            try:
                record = done.result()
            except (SourceError, *_MALFORMED) as error:
                progress.fail(f"tensorflow {reading[done]}", _why(error))
                continue
            if why := validate(record):
                skipped.append({"version": record.version, "reason": why})
            else:
                progress.add_release(record)
    return skipped


def _read_companions(index, progress) -> None:
    """Read every torch/JAX release neither the shipped table nor the kept overlay has; each is kept
    with the release lists of what it pins, as soon as both are read."""
    # Start-up cost: `matrix --json` loads this module but not tfgpu.datasource.companions, tfgpu.datasource.http.
    from tfgpu.datasource import companions
    from tfgpu.datasource.http import SourceError

    shipped = {(r["framework"], r["version"]) for r in tables.load_toml("companions.toml").get("release", [])}
    known = shipped | {(r.framework, r.version) for r in [*progress.kept_companions, *progress.fetched_companions]}
    try:
        wanted = companions.missing_releases(index, known)
    except (SourceError, *_MALFORMED) as error:
        progress.fail("the torch and JAX release lists", _why(error))
        return
    reader = companions.CompanionReader(index)
    lists: dict[str, list[str]] = {}
    with concurrent.futures.ThreadPoolExecutor(JOBS) as pool:
        reading = {pool.submit(companions.read_release, reader, fw, v): (fw, v) for fw, v in wanted}
        for done in concurrent.futures.as_completed(reading):
            framework, version = reading[done]
            try:
                rows = done.result()
                names = companions.pinned_names(rows) - set(lists)
                lists |= companions.release_lists(index, names)
            except (SourceError, *_MALFORMED) as error:
                progress.fail(f"{framework} {version}", _why(error))
                continue
            if rows:
                needed = {name: lists[name] for name in companions.pinned_names(rows)}
                progress.add_companions(rows, needed, f"{framework} {version}")


def _why(error: Exception) -> str:
    # Start-up cost: `matrix --json` loads this module but not tfgpu.datasource.http.
    from tfgpu.datasource.http import SourceError

    return str(error)[:300] if isinstance(error, SourceError) else f"{type(error).__name__}: {str(error)[:200]}"


def _failed(error: Exception, url: str, offline: bool) -> OperationError:
    """The error of a run that could read nothing new (its overlay, if any, stays as it was)."""
    # Start-up cost: `matrix --json` loads this module but not tfgpu.datasource.http.
    from tfgpu.datasource.http import SourceError

    if not isinstance(error, SourceError):
        return OperationError(
            "update-failed",
            f"The answer of {url} is not what a PyPI JSON API and its wheels "
            f"look like ({type(error).__name__}: {str(error)[:200]}); nothing was written.",
            [
                f"Check --index: it must be the root of a PyPI JSON API (as {DEFAULT_INDEX}).",
                "The data shipped with tfgpu-install still works.",
            ],
        )
    if offline:
        return OperationError(
            "offline-no-cache",
            f"update-data --offline has no cached answer for what it needs: {error}.",
            ["Run `tfgpu-install update-data` once with network access; later runs can be --offline."],
        )
    return OperationError(
        "update-failed",
        f"Could not read the release data from {url}: {error}.",
        [
            "Check the network (PyPI must be reachable), or give a mirror of the PyPI JSON API with --index URL.",
            "The data shipped with tfgpu-install still works: `tfgpu-install plan` needs no network.",
        ],
    )


def _incomplete(progress, url: str, offline: bool) -> OperationError:
    """A run where some release could not be read: what it kept, what it did not and why."""
    written = [r.version for r in progress.fetched_releases] + [label(r) for r in progress.fetched_companions]
    kept = [r.version for r in progress.kept_releases] + [label(r) for r in progress.kept_companions]
    missing = "; ".join(f"{n['what']} ({n['reason']})" for n in progress.not_written)
    if not written and not kept:
        first = progress.not_written[0]
        code = "offline-no-cache" if offline else "update-failed"
        return OperationError(
            code,
            f"Could not read the release data from {url}: {first['what']}: {first['reason']}; nothing was written.",
            [
                "Check the network (PyPI must be reachable), or give a mirror of the PyPI JSON API with --index URL.",
                "The data shipped with tfgpu-install still works: `tfgpu-install plan` needs no network.",
            ],
        )
    return OperationError(
        "update-incomplete",
        f"update-data wrote {len(written)} release row(s) from {url}"
        + (f" ({', '.join(written)})" if written else "")
        + (f", kept {len(kept)} from an earlier run ({', '.join(kept)})" if kept else "")
        + f"; not written: {missing}.",
        [
            "Run `tfgpu-install update-data` again: it resumes, keeping what is written, and fetches only the rest.",
            "What is written is used by `plan` already.",
        ],
    )


# What a malformed answer raises on its way through the readers (a value of the wrong type, a
# missing key, a zip that is not one): each is the index's fault, never the tool's.
_MALFORMED = (
    KeyError,
    TypeError,
    ValueError,
    AttributeError,
    IndexError,
    struct.error,
    UnicodeError,
    zlib.error,
    RecursionError,
)


def _budget() -> float:
    """One request's deadline in seconds: ``TFGPU_UPDATE_TIMEOUT`` or :data:`TIMEOUT_S`."""
    text = os.environ.get("TFGPU_UPDATE_TIMEOUT", "")
    if not text:
        return TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value <= 3600:
        raise UsageError(
            "bad-option-value",
            f"TFGPU_UPDATE_TIMEOUT={text!r} is not a number of seconds (0-3600].",
            [f"Unset it for the default of {TIMEOUT_S:g} s."],
        )
    return value


def _install(target, data: bytes, url: str, check=None) -> None:
    """Put the new overlay at ``target``: written to a temporary file beside it, read back with the
    loader ``plan`` uses (schema and rows; ``check`` for another table than tensorflow.toml), then
    renamed over the old one in one step."""
    partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(partial, "xb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
    except OSError as error:
        trees.unlink(partial, strict=False)
        raise OperationError(
            "update-not-written",
            f"Cannot write {target}: {error.strerror}.",
            ["Set TFGPU_USER_DATA_DIR to a directory you may write."],
        ) from None
    try:
        rows = (check or load)(partial).get("release", [])
        if not rows:
            raise ValueError("no release rows")
        for row in rows if check is None else ():
            release_from_row(row, "update")
        trees.replace(partial, target)
    except (TfgpuError, *_MALFORMED) as error:
        reason = error.message if isinstance(error, TfgpuError) else f"{type(error).__name__}: {error}"
        raise OperationError(
            "update-failed",
            f"The release data read from {url} does not pass the checks every "
            f"table passes ({reason[:300]}); nothing was written.",
            ["The data shipped with tfgpu-install still works; try again later."],
        ) from None
    except OSError as error:
        raise OperationError(
            "update-not-written",
            f"Cannot write {target}: {error.strerror}.",
            ["Set TFGPU_USER_DATA_DIR to a directory you may write."],
        ) from None
    finally:
        trees.unlink(partial, strict=False)
