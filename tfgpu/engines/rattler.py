"""The embedded conda engine: every py-rattler call the tool makes (channels, virtual packages,
solve, query, install), so that creating an env and locking one for another machine solve the
same way.

The solve sees the *target's* virtual packages, never a silent default: ``__cuda`` comes from the
resolution (the driver's CUDA, or the build's CUDA when no driver is known); ``__glibc`` and the
rest come from this host when the env is for this host, and from the target platform's stated
floors when it is a lock for another machine. Packages are hard-linked from rattler's package
cache into the staging prefix, with the final prefix written into every file that embeds its path,
so the env can be built aside and moved.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from tfgpu.errors import ImpossibleError, OperationError
from tfgpu.requirements import match_spec
from tfgpu.urls import is_secure

CONDA_FORGE = "https://conda.anaconda.org/conda-forge"
GLIBC = "2.28"
"""The glibc a lock for linux-* assumes (the floor the pip side locks for: manylinux_2_28)."""
MACOS = "14.0"


def channel_urls(channels: tuple[str, ...]) -> list[str]:
    """``--channel`` values as URLs; a bare name means anaconda.org, a path a local channel."""
    urls = []
    for channel in channels or (CONDA_FORGE,):
        if "://" in channel:
            # repodata.json carries the packages' checksums: served over plain HTTP, a forged one
            # vouches for forged packages (tfgpu.urls).
            if not (channel.startswith("file://") or is_secure(channel)):
                raise ImpossibleError("insecure-download", f"Refusing the channel {channel}: channels are read over "
                                      "HTTPS only (plain HTTP only from this machine's loopback address), since "
                                      "its repodata holds the checksums the packages are checked against.",
                                      ["Use the channel's https:// URL, or a local copy: --channel /path/to/channel."])
            urls.append(channel.rstrip("/"))
        elif channel.startswith(("/", ".", "~")):
            urls.append(Path(channel).expanduser().absolute().as_uri())
        else:
            urls.append(f"https://conda.anaconda.org/{channel}")
    return urls


def check_channels(urls: list[str]) -> None:
    """A local channel that is not there is a usage error before anything else happens."""
    for url in urls:
        if url.startswith("file://"):
            path = Path(url.removeprefix("file://"))
            if not path.is_dir():
                raise ImpossibleError("unknown-channel", f"The channel {url} does not exist ({path} is not a directory).",
                                      ["Give a channel directory holding linux-64/ and noarch/ (with repodata.json), "
                                       "or a URL such as https://conda.anaconda.org/conda-forge."])


def virtual_cuda(resolution) -> str:
    """``__cuda`` for the solve: the target driver's CUDA, else the build's own (never a default)."""
    from tfgpu.resolver.drivers import cuda_for_driver

    if resolution.driver:
        found = cuda_for_driver(resolution.driver, resolution.os)
        if found:
            return found
    return ".".join((resolution.cuda or "").split(".")[:2])


def conda_specs(resolution, tf_source: str = "pypi", cpu_only: bool = False) -> tuple[list[str], list[str]]:
    """(conda specs, PyPI requirements) of an env: the plan's, or with ``--tf-source conda-forge``
    TensorFlow's own CUDA build from conda-forge (which brings its CUDA and cuDNN); a CPU-only
    platform of a lock gets its Python alone (TensorFlow comes from PyPI)."""
    specs, pip = list(resolution.packages.conda), list(resolution.packages.pip)
    if cpu_only or not specs:
        return [match_spec(f"python {resolution.python}.*", what="The env's Python")], pip
    if tf_source != "conda-forge":
        return specs, pip
    from tfgpu.resolver import tables

    builds = tables.conda_forge().tensorflow_cuda
    series = ".".join(resolution.tensorflow.split(".")[:2])
    if resolution.tensorflow not in builds and series not in builds:
        newest = max(builds, key=lambda v: tuple(int(p) for p in v.split(".")))
        raise ImpossibleError(
            "no-conda-forge-build", f"conda-forge has no CUDA build of TensorFlow {resolution.tensorflow} "
            f"(its newest is {newest}).",
            [f"--tf {newest} --tf-source conda-forge", "Or drop --tf-source: TensorFlow from PyPI into the conda env."])
    python = next(s for s in specs if s.startswith("python "))
    return [python, match_spec(f"tensorflow =={resolution.tensorflow} cuda*", what="--tf-source conda-forge")], []


def virtual_packages(platform: str, cuda: str | None, *, this_host: bool):
    """The virtual packages of the machine an env is for: ``__cuda`` from the plan; the rest
    detected on this host (``this_host``), or the stated floors of ``platform`` (a lock for
    another machine: ``__glibc`` 2.28, ``__osx`` 14.0)."""
    from rattler import BuildString, GenericVirtualPackage, PackageName, Version, VirtualPackage

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


def _gateway(repodata_cache: Path, offline: bool):
    from rattler import Gateway, SourceConfig

    config = SourceConfig(cache_action="force-cache-only" if offline else "cache-or-fetch")
    return Gateway(cache_dir=repodata_cache, default_config=config)


def solve(specs: list[str], channels: list[str], *, platform: str, cuda: str | None, this_host: bool,
          repodata_cache: Path, offline: bool, pinned: list | None = None) -> list:
    """rattler's solve for ``platform``; a conflict becomes ``unsolvable`` (exit 3) with the solver's
    own explanation and the virtual packages it saw. ``pinned``: records (an env's installed
    packages) the solution must keep exactly."""
    from rattler import Channel
    from rattler import solve as rattler_solve
    from rattler.exceptions import SolverError

    virtual = virtual_packages(platform, cuda, this_host=this_host)
    shown = ", ".join(f"{v.name.normalized}={v.version}" for v in virtual if v.name.normalized in ("__cuda", "__glibc"))

    async def run():
        return await rattler_solve([Channel(url) for url in channels], specs, gateway=_gateway(repodata_cache, offline),
                                   platforms=[platform, "noarch"], virtual_packages=virtual,
                                   channel_relations="disabled", pinned_packages=pinned or None)

    try:
        return asyncio.run(run())
    except SolverError as error:
        raise ImpossibleError(
            "unsolvable", f"The conda packages cannot be installed together on {platform} "
            f"({shown or 'no __cuda'}):\n{_explain(error)}",
            ["`tfgpu-install plan --mode conda` shows the specs and why each was chosen.",
             "An older TensorFlow, or --mode pip (CUDA from PyPI wheels), may solve where this does not."]) from None
    except Exception as error:  # rattler raises its own classes for network and cache problems
        if offline:
            raise OperationError(
                "offline-no-cache", f"--offline, but the channel index is not in the cache: {_explain(error)}",
                ["Run once with network to fill the cache, or use a local channel: --channel /path/to/channel."]) from None
        raise OperationError("channel-unreachable", f"Could not read the channel index: {_explain(error)}",
                             ["Check the network and the --channel URL; a local mirror works with "
                              "--channel file:///path --offline.", "Or --mode pip: CUDA from PyPI wheels, no conda "
                              "channel needed."]) from None


def locked_records(packages, channels: list[str], *, platform: str, repodata_cache: Path, offline: bool,
                   local_channel: str | None = None) -> list:
    """The full repodata records of locked packages (``(name, version, url, sha256)``; a lock keeps no
    noarch, build number or size), read from the locked channels, matched by URL and checked against
    the locked sha256 — all before anything is installed. ``local_channel`` (a bundle's ``file://``
    channel) is read instead, its records matched by file name."""
    from rattler import Channel

    def key(url: str) -> str:
        return url.rsplit("/", 1)[-1] if local_channel else url

    wanted = {key(p.url): p for p in packages}
    readers = [Channel(local_channel)] if local_channel else [Channel(c) for c in channels]
    gateway = _gateway(repodata_cache, offline and local_channel is None)  # a local channel needs no network

    async def query():
        return await gateway.query(readers, [platform, "noarch"], sorted({p.name for p in wanted.values()}),
                                   recursive=False)

    try:
        found = {key(str(record.url)): record for records in asyncio.run(query()) for record in records}
    except Exception as error:  # network / cache: rattler has no common base class
        raise OperationError("channel-unreachable", f"Could not read the locked channels' index: {_explain(error)}",
                             ["The lock installs from the channels it names; check the network (or run once "
                              "with network so --offline has the index cached)."]) from None
    records = []
    for url, locked in sorted(wanted.items()):
        record = found.get(url)
        if record is None:
            raise ImpossibleError("locked-package-missing", f"{locked.name} {locked.version} ({url}) is no longer "
                                  "in its channel; nothing was installed.",
                                  ["Regenerate the lock against the channel as it is now."])
        sha256 = record.sha256.hex() if record.sha256 else None
        if locked.sha256 and sha256 != locked.sha256:
            raise ImpossibleError("lock-hash-mismatch", f"{locked.name} {locked.version}: the channel's sha256 "
                                  f"{sha256} is not the locked {locked.sha256}; nothing was installed.",
                                  ["Someone replaced the package, or the lock was edited: regenerate it and "
                                   "compare before trusting either."])
        records.append(record)
    return records


def _explain(error: Exception) -> str:
    text = str(error).strip()
    return text[:3000]


def install(records: list, staging: Path, final: Path, *, package_cache: Path, reporter, offline: bool,
            keep: set[str] | None = None) -> None:
    """Link ``records`` into ``staging`` with ``final`` as the prefix embedded in files.

    rattler checks the sha256 of every archive it downloads, but links a ``file://`` archive as it
    finds it, and keeps what it extracted in its package cache for every later env. So each
    ``file://`` archive is first copied into the tool's own store and hashed there
    (:func:`verified_copy`), and rattler is given that copy: nothing unverified reaches the cache.
    ``keep``: packages already in the prefix that are left exactly as they are (adding to an env).
    """
    from rattler import install as rattler_install

    originals = [record.url for record in records]
    store = package_cache.parent / "verified-archives"
    try:
        for record in records:
            if str(record.url).startswith("file://"):
                record.url = verified_copy(record, store).as_uri()
        try:
            asyncio.run(rattler_install(records, target_prefix=staging, alternative_target_prefix=final,
                                        cache_dir=package_cache, show_progress=False,
                                        reporter=_Progress(reporter, len(records)), execute_link_scripts=False,
                                        ignored_packages=keep))
        except Exception as error:  # noqa: BLE001 - rattler's download/link errors have no common base
            hint = ("--offline, and a package is not in the package cache: run once with network." if offline else
                    "Check the network and free disk space; the package cache is " + str(package_cache))
            raise OperationError("install-failed", f"Installing the conda packages failed: {_explain(error)}",
                                 [hint]) from None
    finally:
        for record, url in zip(records, originals):
            record.url = url
    _restore_urls(staging, records)


def verified_copy(record, store: Path) -> Path:
    """The ``file://`` archive of ``record`` copied into ``store`` and checked against the record's
    sha256 (its md5 where an old index has no sha256); a mismatch is ``checksum-mismatch``."""
    import shutil
    from urllib.parse import unquote, urlsplit

    from tfgpu.engines.download import file_digest

    source = Path(unquote(urlsplit(str(record.url)).path))
    if record.sha256:
        algorithm, expected = "sha256", record.sha256.hex()
    elif record.md5:
        algorithm, expected = "md5", record.md5.hex()
    else:
        raise ImpossibleError("unverified-package", f"{record.file_name} has no sha256 or md5 in its channel's "
                              "index, so it is not installed: every package is verified before it is linked.",
                              ["Index the channel with a current tool (`rattler-index`, `conda index`)."])
    target = store / expected / record.file_name
    if target.is_file() and file_digest(target, algorithm) == expected:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.part")
    try:
        shutil.copyfile(source, partial)
    except OSError as error:
        partial.unlink(missing_ok=True)
        raise OperationError("install-failed", f"Cannot read {source}: {error.strerror}; nothing was installed.",
                             ["Check the channel directory (--channel) or the bundle."]) from None
    found = file_digest(partial, algorithm)
    if found != expected:
        partial.unlink(missing_ok=True)
        raise OperationError("checksum-mismatch", f"{source} is not the package its index and lock name: its "
                              f"{algorithm} is {found}, not {expected}. Nothing was installed.",
                              ["Someone replaced the file after it was indexed: rebuild the channel or bundle from "
                               "a trusted copy, and compare before trusting either."])
    os.replace(partial, target)
    return target


def _restore_urls(prefix: Path, records: list) -> None:
    """conda-meta names where each package came from (the channel), not the verified copy."""
    by_name = {f"{r.name.normalized}-{r.version}-{r.build}.json": str(r.url) for r in records}
    for path in (prefix / "conda-meta").glob("*.json"):
        url = by_name.get(path.name)
        if url is None:
            continue
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(document, dict) and document.get("url") != url:
            document["url"] = url
            path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


class _Progress:
    """rattler's installer callbacks, passed on to the tool's reporter as one line each."""

    def __init__(self, reporter, total: int) -> None:
        self.reporter = reporter
        self.total = total
        self.linked = 0

    def on_transaction_start(self, total_operations: int) -> None:
        self.total = total_operations

    def on_download_start(self, cache_entry: int) -> int:
        return cache_entry

    def on_link_complete(self, index: int) -> None:
        self.linked += 1
        if self.reporter is not None:
            self.reporter.output(f"linked {self.linked}/{self.total} packages")

    def __getattr__(self, name: str):  # every other callback: nothing to report
        if name.startswith("on_"):
            return lambda *args, **kwargs: 0
        raise AttributeError(name)


def records_to_json(records: list) -> list[dict]:
    """What the env was solved to, as full repodata records (URL, sha256, md5, depends): written
    into the env and read back by lockfiles."""
    return sorted((json.loads(record.to_json()) for record in records), key=lambda row: row["name"])


def write_records(records: list, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps(records_to_json(records), indent=1) + "\n", encoding="utf-8")
    os.replace(partial, path)
