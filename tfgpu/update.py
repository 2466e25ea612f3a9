"""``tfgpu-install update-data``: fetch the TensorFlow releases published since the shipped data.

It reads PyPI the way ``scripts/regen_tf_data.py`` does (``tfgpu.datasource``: the JSON API, then
range requests into each new release's wheels, every request bounded in size, the whole run by one deadline), checks
every row it builds, and writes the rows to the user's overlay (``tfgpu.paths.data_dir()``),
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
import time
import zlib

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from tfgpu.errors import OperationError, UsageError

DEFAULT_INDEX = "https://pypi.org/pypi"
TIMEOUT_S = 30.0
"""The whole run's deadline in seconds (``TFGPU_UPDATE_TIMEOUT`` changes it)."""
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
    from tfgpu.data.updates import UPDATES_FILE
    from tfgpu.datasource.companions import new_rows
    from tfgpu.datasource.http import Fetcher, SourceError
    from tfgpu.datasource.releases import Index, ReleaseReader, select_versions
    from tfgpu.datasource.toml_out import render_toml
    from tfgpu.paths import cache_root, data_dir
    from tfgpu.resolver import tables

    if index_url is None and offline:  # the cache holds the answers of the index used last time
        from tfgpu.data.updates import updates

        index_url = updates().get("index")
    url = _check_index(index_url or DEFAULT_INDEX)
    budget = _budget()
    fetcher = Fetcher(
        cache_root() / "pypi",
        refresh_json=not offline,
        timeout=budget,
        retries=2,
        offline=offline,
        max_json_bytes=MAX_JSON_BYTES,
        max_range_bytes=MAX_RANGE_BYTES,
        deadline=time.monotonic() + budget,
    )
    shipped = tables.load_toml("tensorflow.toml")
    rows = shipped.get("release", [])
    known = {Version(row["version"]) for row in rows}
    capabilities = [
        w.get("compute_capabilities")
        for row in rows
        for w in row.get("wheels", {}).values()
        if w.get("compute_capabilities") and not w.get("unverified")
    ]
    index = Index(fetcher, url)
    try:
        document = index.project("tensorflow")
        if document is None:
            raise SourceError(f"{index.project_url('tensorflow')}: no such project")
        wanted = [v for v in select_versions(document) if Version(v) not in known]
        for version in wanted:  # every listed wheel URL passes the transport rule before any fetch
            index.wheels("tensorflow", version)
        reader = ReleaseReader(index, known_capabilities=capabilities)
        with concurrent.futures.ThreadPoolExecutor(JOBS) as pool:
            records = list(pool.map(reader.read, wanted))
        good = [r for r in records if not validate(r)]
        skipped = [{"version": r.version, "reason": validate(r)} for r in records if validate(r)]
        companions = new_rows(index, tables.load_toml("companions.toml"))
    except _MALFORMED as error:
        raise OperationError(
            "update-failed",
            f"The answer of {url} is not what a PyPI JSON API and its wheels "
            f"look like ({type(error).__name__}: {str(error)[:200]}); nothing was written.",
            [
                f"Check --index: it must be the root of a PyPI JSON API (as {DEFAULT_INDEX}).",
                "The data shipped with tfgpu-install still works.",
            ],
        ) from None
    except SourceError as error:
        if offline:
            raise OperationError(
                "offline-no-cache",
                f"update-data --offline has no cached answer for what it needs: {error}.",
                ["Run `tfgpu-install update-data` once with network access; later runs can be --offline."],
            ) from None
        raise OperationError(
            "update-failed",
            f"Could not read the release data from {url}: {error}.",
            [
                "Check the network (PyPI must be reachable), or give a mirror of the PyPI JSON API with --index URL.",
                "The data shipped with tfgpu-install still works: `tfgpu-install plan` needs no network.",
            ],
        ) from None
    fetched = datetime.datetime.now(datetime.UTC).date().isoformat()
    header = HEADER.format(date=fetched, index=url, shipped=shipped.get("generated", "?"))
    text = render_toml(
        good, header, {"fetched": fetched, "index": url, "shipped_generated": shipped.get("generated", "")}
    )
    target = data_dir() / UPDATES_FILE
    new = [r.version for r in good]
    if new:  # nothing new: the overlay there is (if any) stays as it is
        _install(target, text.encode("utf-8"), url)
    new_companions = _companions(companions, header, url, fetched)
    return {
        "index": url,
        "fetched": fetched,
        "offline": offline,
        "overlay": str(target) if new else None,
        "shipped_generated": shipped.get("generated", ""),
        "new_releases": new,
        "new_companions": new_companions,
        "skipped": skipped,
        "requests": fetcher.requests,
        "bytes": fetcher.bytes,
        "summary": (
            f"{len(new)} release(s) newer than the shipped data ({shipped.get('generated', '?')}): "
            f"{', '.join(new)}; stored in {target}."
            if new
            else f"Up to date: {url} lists no TensorFlow release the shipped data "
            f"({shipped.get('generated', '?')}) lacks; nothing was written."
        )
        + (f" New torch/JAX releases: {', '.join(new_companions)}." if new_companions else "")
        + (
            f" Skipped {len(skipped)}: " + "; ".join(f"{s['version']} ({s['reason']})" for s in skipped)
            if skipped
            else ""
        ),
    }


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
    """The run's deadline in seconds: ``TFGPU_UPDATE_TIMEOUT`` or :data:`TIMEOUT_S`."""
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


def _companions(document: dict | None, header: str, url: str, fetched: str) -> list[str]:
    """Write the torch/JAX rows the shipped companions.toml lacks to their overlay; their labels."""
    if document is None:
        return []
    from tfgpu.data.updates import COMPANION_UPDATES_FILE, load_companions
    from tfgpu.datasource.toml_out import render_companions
    from tfgpu.paths import data_dir

    text = render_companions(document, header, {"fetched": fetched, "index": url})
    _install(data_dir() / COMPANION_UPDATES_FILE, text.encode("utf-8"), url, load_companions)
    return [f"{r.framework}{f'[{r.extra}]' if r.extra else ''}=={r.version}" for r in document["rows"]]


def _install(target, data: bytes, url: str, check=None) -> None:
    """Put the new overlay at ``target``: written to a temporary file beside it, read back with the
    loader ``plan`` uses (schema and rows; ``check`` for another table than tensorflow.toml), then
    renamed over the old one in one step."""
    from tfgpu.data.updates import load
    from tfgpu.errors import TfgpuError
    from tfgpu.resolver.tables import release_from_row

    partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(partial, "xb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
    except OSError as error:
        partial.unlink(missing_ok=True)
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
        os.replace(partial, target)
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
        partial.unlink(missing_ok=True)
