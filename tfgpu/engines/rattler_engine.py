"""The embedded conda engine: every py-rattler call the tool makes (channels, virtual packages,
solve, query, install), so that creating an env and locking one for another machine solve the
same way.

The solve sees the *target's* virtual packages, never a silent default: ``__cuda`` comes from the
resolution (the driver's CUDA, or the build's CUDA when no driver is known); ``__glibc`` and the
rest come from this host when the env is for this host, and from the target platform's stated
floors when it is a lock for another machine. Packages are hard-linked from rattler's package
cache into the staging prefix, with the final prefix written into every file that embeds its path,
so the env can be built aside and moved.

Everything asynchronous (solve, reading the channels' index, install, indexing) runs in a child
process, ``tfgpu.engines.rattler_child``, started through ``tfgpu.process.runner.Runner``: rattler's native
threads can outlive an interpreter and abort it as it exits, and there such a crash is the engine's,
reported as ``engine-crashed`` with the log, never the tool's. This module builds the requests and
turns the answers back into rattler's records (plain data: no runtime is started here).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from tfgpu.doors import secrets, trees, untrusted
from tfgpu.doors.requirements import match_spec
from tfgpu.doors.urls import local_path
from tfgpu.engines.channels import CONDA_FORGE, channel_urls, check_channels, check_local_indexes  # noqa: F401
from tfgpu.engines.download import file_digest
from tfgpu.engines.rattler_wire import BYTES, GLIBC, MACOS, PROGRESS, records_from_json, virtual_packages  # noqa: F401
from tfgpu.errors import ImpossibleError, OperationError
from tfgpu.process.runner import Runner
from tfgpu.resolver.drivers import cuda_for_driver


def transfer_of(line: str) -> tuple[int, int | None] | None:
    """``(done, total)`` from an engine's ``bytes DONE TOTAL`` line, else None."""
    parts = line.removeprefix(BYTES).split() if line.startswith(BYTES) else []
    if len(parts) != 2 or not parts[0].isdigit() or not (parts[1].isdigit() or parts[1] == "-"):
        return None
    return int(parts[0]), (int(parts[1]) if parts[1] != "-" else None)


def engine_timeout() -> float:
    """The most seconds one engine operation may run (``TFGPU_ENGINE_TIMEOUT``, default 30 minutes):
    generous for a cold solve over conda-forge, and a bound, so no hang of the child is for ever."""
    try:
        value = float(os.environ.get("TFGPU_ENGINE_TIMEOUT", "") or 1800)
    except ValueError:
        value = 1800.0
    return value if value > 0 else 1800.0


def virtual_cuda(resolution) -> str:
    """``__cuda`` for the solve: the target driver's CUDA, else the build's own (never a default)."""
    if resolution.driver:
        found = cuda_for_driver(resolution.driver, resolution.os)
        if found:
            return found
    return ".".join((resolution.cuda or "").split(".")[:2])


def conda_specs(resolution, cpu_only: bool = False) -> tuple[list[str], list[str]]:
    """(conda specs, PyPI requirements) of an env: the resolution's, which already say where
    TensorFlow comes from (``Resolution.tensorflow_source``: PyPI, or conda-forge's CUDA build, as the
    resolver decided); a CPU-only platform of a lock gets its Python alone (TensorFlow from PyPI)."""
    specs, pip = list(resolution.packages.conda), list(resolution.packages.pip)
    if cpu_only or not specs:
        return [match_spec(f"python {resolution.python}.*", what="The env's Python")], pip
    return specs, pip


def solve(
    specs: list[str],
    channels: list[str],
    *,
    platform: str,
    cuda: str | None,
    this_host: bool,
    repodata_cache: Path,
    offline: bool,
    pinned: list | None = None,
    runner=None,
) -> list:
    """rattler's solve for ``platform``; a conflict becomes ``unsolvable`` (exit 3) with the solver's
    own explanation and the virtual packages it saw. ``pinned``: records (an env's installed
    packages) the solution must keep exactly. ``runner``: whose log keeps the engine's output."""
    virtual = virtual_packages(platform, cuda, this_host=this_host)
    shown = ", ".join(f"{v.name.normalized}={v.version}" for v in virtual if v.name.normalized in ("__cuda", "__glibc"))
    what = f"{platform} ({shown or 'no __cuda'}): {' | '.join(specs)} from {', '.join(channels)}"
    answer = _engine(
        "solve",
        what,
        {
            "specs": specs,
            "channels": channels,
            "platform": platform,
            "cuda": cuda,
            "this_host": this_host,
            "repodata_cache": str(repodata_cache),
            "offline": offline,
            "pinned": records_to_json(pinned or []),
        },
        runner,
    )
    error = answer.get("error")
    if error is None:
        return _records(answer)
    if error["kind"] == "unsolvable":
        raise ImpossibleError(
            "unsolvable",
            f"The conda packages cannot be installed together on {platform} "
            f"({shown or 'no __cuda'}):\n{_explain(error['text'])}",
            [
                "`tfgpu-install plan --mode conda` shows the specs and why each was chosen.",
                "An older TensorFlow, or --mode pip (CUDA from PyPI wheels), may solve where this does not.",
            ],
        )
    if offline:
        raise OperationError(
            "offline-no-cache",
            f"--offline, but the channel index is not in the cache: {_explain(error['text'])}",
            ["Run once with network to fill the cache, or use a local channel: --channel /path/to/channel."],
        )
    raise OperationError(
        "channel-unreachable",
        f"Could not read the channel index: {_explain(error['text'])}",
        [
            *secrets.credential_hint(error["text"]),
            "Check the network and the --channel URL; a local mirror works with --channel file:///path --offline.",
            "Or --mode pip: CUDA from PyPI wheels, no conda channel needed.",
        ],
    )


def locked_records(
    packages,
    channels: list[str],
    *,
    platform: str,
    repodata_cache: Path,
    offline: bool,
    local_channel: str | None = None,
    runner=None,
) -> list:
    """The full repodata records of locked packages (``(name, version, url, sha256)``; a lock keeps no
    noarch, build number or size), read from the locked channels, matched by URL and checked against
    the locked sha256 — all before anything is installed. ``local_channel`` (a bundle's ``file://``
    channel) is read instead, its records matched by file name."""

    def key(url: str) -> str:
        return url.rsplit("/", 1)[-1] if local_channel else url

    wanted = {key(p.url): p for p in packages}
    readers = [local_channel] if local_channel else list(channels)
    names = sorted({p.name for p in wanted.values()})
    answer = _engine(
        "query",
        f"{platform}: {len(names)} locked packages from {', '.join(readers)}",
        {
            "channels": readers,
            "platforms": [platform, "noarch"],
            "names": names,
            "repodata_cache": str(repodata_cache),
            "offline": offline and local_channel is None,
        },
        runner,
    )  # a local channel needs no network
    if answer.get("error") is not None:
        raise OperationError(
            "channel-unreachable",
            f"Could not read the locked channels' index: {_explain(answer['error']['text'])}",
            [
                *secrets.credential_hint(answer["error"]["text"]),
                "The lock installs from the channels it names; check the network (or run once "
                "with network so --offline has the index cached).",
            ],
        )
    found = {key(str(record.url)): record for record in _records(answer)}
    records = []
    for url, locked in sorted(wanted.items()):
        record = found.get(url)
        if record is None:
            raise ImpossibleError(
                "locked-package-missing",
                f"{locked.name} {locked.version} ({url}) is no longer in its channel; nothing was installed.",
                ["Regenerate the lock against the channel as it is now."],
            )
        sha256 = record.sha256.hex() if record.sha256 else None
        if locked.sha256 and sha256 != locked.sha256:
            raise ImpossibleError(
                "lock-hash-mismatch",
                f"{locked.name} {locked.version}: the channel's sha256 "
                f"{sha256} is not the locked {locked.sha256}; nothing was installed.",
                [
                    "Someone replaced the package, or the lock was edited: regenerate it and "
                    "compare before trusting either."
                ],
            )
        records.append(record)
    return records


def _explain(error) -> str:
    text = str(error).strip()
    return text[:3000]


def _engine(operation: str, what: str, request: dict, runner=None, reporter=None) -> dict:
    """Run one rattler ``operation`` in ``tfgpu.engines.rattler_child`` (see the module docstring)
    and return its answer; an engine that ends without one is ``engine-crashed``. ``what`` names
    the operation in the log and in the error."""

    runner = runner if runner is not None else Runner()

    def passed_on(line: str) -> None:
        if reporter is None or not line.startswith(PROGRESS):
            return
        line = line.removeprefix(PROGRESS)
        moved = transfer_of(line)
        if moved is not None:
            reporter.transfer("conda packages", *moved)
        else:
            reporter.output(line)

    root = str(Path(__file__).resolve().parents[2])  # the child imports this very tfgpu
    platform = request.get("platform")
    subdirs = [platform] if isinstance(platform, str) else []
    subdirs += [p for p in request.get("platforms") or () if isinstance(p, str)]
    check_local_indexes([c for c in request.get("channels") or () if isinstance(c, str)], subdirs + ["noarch"])
    with tempfile.TemporaryDirectory(prefix="tfgpu-rattler-") as scratch:
        result = Path(scratch) / "answer.json"
        request = {**request, "op": operation, "what": what, "result": str(result)}
        done = runner.run(
            [sys.executable, "-m", "tfgpu.engines.rattler_child"],
            input=json.dumps(request),
            on_line=passed_on,
            env={"PYTHONPATH": root},
            timeout=engine_timeout(),
        )
        try:
            answer = untrusted.load_json(result, untrusted.CHILD_OUTPUT)
        except untrusted.Unreadable:
            answer = None
    if isinstance(answer, dict) and (isinstance(answer.get("records"), list) or isinstance(answer.get("error"), dict)):
        return answer
    if done.returncode == 124:
        raise OperationError(
            "engine-crashed",
            f"The conda engine (rattler) did not finish {operation} for {what} "
            f"within {engine_timeout():.0f} seconds and was stopped; nothing was changed by the tool.",
            ["Set TFGPU_ENGINE_TIMEOUT (seconds) higher if the solve is just slow."],
        )
    ended = (
        f"killed by {signal.Signals(-done.returncode).name}"
        if done.returncode < 0 and -done.returncode in signal.valid_signals()
        else f"exit status {done.returncode}"
    )
    where = f"Its whole output is in {runner.log_path}." if runner.log_path else "Run it again to see if it recurs."
    raise OperationError(
        "engine-crashed",
        f"The conda engine (rattler) ended without an answer ({ended}) while "
        f"running {operation} for {what}; nothing was changed by the tool.\n{done.tail()}",
        [where, "If it recurs, --mode pip takes CUDA from PyPI wheels without rattler."],
    )


def _records(answer: dict) -> list:
    with tempfile.TemporaryDirectory(prefix="tfgpu-rattler-") as scratch:
        return records_from_json(answer["records"], Path(scratch))


def install(
    records: list,
    staging: Path,
    final: Path,
    *,
    package_cache: Path,
    reporter,
    offline: bool,
    keep: set[str] | None = None,
    runner=None,
) -> None:
    """Link ``records`` into ``staging`` with ``final`` as the prefix embedded in files.

    rattler checks the sha256 of every archive it downloads, but links a ``file://`` archive as it
    finds it, and keeps what it extracted in its package cache for every later env. So each
    ``file://`` archive is first copied into the tool's own store and hashed there
    (:func:`verified_copy`), and rattler is given that copy: nothing unverified reaches the cache.
    ``keep``: packages already in the prefix that are left exactly as they are (adding to an env).
    """
    originals = [record.url for record in records]
    store = package_cache.parent / "verified-archives"
    try:
        for record in records:
            if str(record.url).startswith("file://"):
                record.url = verified_copy(record, store).as_uri()
        answer = _engine(
            "install",
            f"{len(records)} packages into {staging} (prefix {final})",
            {
                "records": records_to_json(records),
                "staging": str(staging),
                "final": str(final),
                "package_cache": str(package_cache),
                "keep": sorted(keep) if keep is not None else None,
            },
            runner,
            reporter,
        )
        if answer.get("error") is not None:
            hint = (
                "--offline, and a package is not in the package cache: run once with network."
                if offline
                else "Check the network and free disk space; the package cache is " + str(package_cache)
            )
            raise OperationError(
                "install-failed", f"Installing the conda packages failed: {_explain(answer['error']['text'])}", [hint]
            )
    finally:
        for record, url in zip(records, originals, strict=True):
            record.url = url
    _restore_urls(staging, records)


def verified_copy(record, store: Path) -> Path:
    """The ``file://`` archive of ``record`` copied into ``store`` and checked against the record's
    sha256 (its md5 where an old index has no sha256); a mismatch is ``checksum-mismatch``."""
    source = local_path(str(record.url))
    if record.sha256:
        algorithm, expected = "sha256", record.sha256.hex()
    elif record.md5:
        algorithm, expected = "md5", record.md5.hex()
    else:
        raise ImpossibleError(
            "unverified-package",
            f"{record.file_name} has no sha256 or md5 in its channel's "
            "index, so it is not installed: every package is verified before it is linked.",
            ["Index the channel with a current tool (`rattler-index`, `conda index`)."],
        )
    target = store / expected / record.file_name
    if target.is_file() and file_digest(target, algorithm) == expected:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.part")
    try:
        shutil.copyfile(source, partial)
    except OSError as error:
        trees.unlink(partial, strict=False)
        raise OperationError(
            "install-failed",
            f"Cannot read {source}: {error.strerror}; nothing was installed.",
            ["Check the channel directory (--channel) or the bundle."],
        ) from None
    found = file_digest(partial, algorithm)
    if found != expected:
        trees.unlink(partial, strict=False)
        raise OperationError(
            "checksum-mismatch",
            f"{source} is not the package its index and lock name: its "
            f"{algorithm} is {found}, not {expected}. Nothing was installed.",
            [
                "Someone replaced the file after it was indexed: rebuild the channel or bundle from "
                "a trusted copy, and compare before trusting either."
            ],
        )
    trees.replace(partial, target)
    return target


def _restore_urls(prefix: Path, records: list) -> None:
    """conda-meta names where each package came from (the channel), not the verified copy, and
    never with the channel's credential: rattler writes the URL it downloaded from, ``/t/<token>/``
    and all, into every record, which others read and copy (``tfgpu.doors.secrets``; the engine's own
    authentication supplies the credential whenever the URL is used again)."""
    by_name = {f"{r.name.normalized}-{r.version}-{r.build}.json": str(r.url) for r in records}
    for path in (prefix / "conda-meta").glob("*.json"):
        try:
            document = untrusted.load_json(path, untrusted.ENV_FILE)
        except untrusted.Unreadable:
            continue
        if not isinstance(document, dict):
            continue
        wanted = dict(document)
        if path.name in by_name:
            wanted["url"] = by_name[path.name]
        for key in ("url", "channel"):
            if isinstance(wanted.get(key), str):
                wanted[key] = secrets.strip(wanted[key])
        if wanted != document:
            path.write_text(json.dumps(wanted, indent=2) + "\n", encoding="utf-8")


def records_to_json(records: list) -> list[dict]:
    """What the env was solved to, as full repodata records (URL, sha256, md5, depends): written
    into the env and read back by lockfiles."""
    # A prefix record's own fields (its files) are not the package's.
    rows = (
        {
            key: value
            for key, value in untrusted.parse_json(record.to_json(), untrusted.CHILD_OUTPUT, "a solved record").items()
            if key
            not in (
                "files",
                "paths_data",
                "requested_spec",
                "requested_specs",
                "link",
                "package_tarball_full_path",
                "extracted_package_dir",
            )
        }
        for record in records
    )
    return sorted(rows, key=lambda row: row["name"])


def write_records(records: list, path: Path) -> None:
    """The env's record of its conda packages; a channel's credential is not kept in it
    (``tfgpu.doors.secrets``: the engine's own authentication supplies it whenever the URLs are used)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    text = secrets.stripped(json.dumps(records_to_json(records), indent=1))
    partial.write_text(text + "\n", encoding="utf-8")
    trees.replace(partial, path)


def index_channel(directory: Path, runner=None) -> None:
    """Write ``repodata.json`` for every subdirectory of the channel ``directory`` (rattler's indexer)."""
    answer = _engine("index", str(directory), {"channel": str(directory)}, runner)
    if answer.get("error") is not None:
        raise OperationError(
            "index-failed",
            f"Indexing the channel {directory} failed: {_explain(answer['error']['text'])}",
            ["Check free disk space and try again."],
        )
