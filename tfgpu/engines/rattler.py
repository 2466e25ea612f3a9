"""The embedded conda engine: py-rattler solves and installs, no conda executable needed.

The solve sees the *target's* virtual packages, never a silent default: ``__cuda`` comes from the
resolution (the driver's CUDA, or the build's CUDA when no driver is known) and ``__glibc`` from
this host. Packages are hard-linked from rattler's package cache into the staging prefix, with the
final prefix written into every file that embeds its path, so the env can be built aside and moved.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from tfgpu.errors import ImpossibleError, OperationError

CONDA_FORGE = "https://conda.anaconda.org/conda-forge"


def channel_urls(channels: tuple[str, ...]) -> list[str]:
    """``--channel`` values as URLs; a bare name means anaconda.org, a path a local channel."""
    urls = []
    for channel in channels or (CONDA_FORGE,):
        if "://" in channel:
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


def virtual_packages(cuda: str | None, glibc: str | None, platform: str):
    """``__cuda`` from the plan; ``__glibc`` given (a lock for another machine) or this host's;
    ``__linux``/``__unix``/``__archspec`` from this host."""
    from rattler import BuildString, GenericVirtualPackage, PackageName, Version, VirtualPackage

    found = []
    for package in VirtualPackage.detect():
        generic = package.into_generic()
        if generic.name.normalized == "__cuda" or (glibc and generic.name.normalized == "__glibc"):
            continue
        found.append(generic)
    if glibc and platform.startswith("linux"):
        found.append(GenericVirtualPackage(PackageName("__glibc"), Version(glibc), BuildString("0")))
    if cuda:
        found.append(GenericVirtualPackage(PackageName("__cuda"), Version(cuda), BuildString("0")))
    return found


def solve(specs: list[str], channels: list[str], *, platform: str, cuda: str | None, glibc: str | None,
          repodata_cache: Path, offline: bool) -> list:
    """rattler's solve; a conflict becomes ``unsolvable`` (exit 3) with the solver's own explanation."""
    from rattler import Channel, Gateway, SourceConfig
    from rattler.exceptions import SolverError

    config = SourceConfig(cache_action="force-cache-only" if offline else "cache-or-fetch")
    gateway = Gateway(cache_dir=repodata_cache, default_config=config)
    virtual = virtual_packages(cuda, glibc, platform)
    shown = ", ".join(f"{v.name.normalized}={v.version}" for v in virtual if v.name.normalized in ("__cuda", "__glibc"))
    try:
        return asyncio.run(_solve(gateway, specs, [Channel(url) for url in channels], platform, virtual))
    except SolverError as error:
        raise ImpossibleError(
            "unsolvable", f"The conda packages cannot be installed together on {platform} "
            f"({shown or 'no __cuda'}):\n{_explain(error)}",
            ["`tfgpu-install plan --mode conda` shows the specs and why each was chosen.",
             "An older TensorFlow, or --mode pip (CUDA from PyPI wheels), may solve where this does not."]) from None
    except Exception as error:  # rattler raises its own classes for network and cache problems
        if offline:
            raise ImpossibleError(
                "offline-no-cache", f"--offline, but the channel index is not in the cache: {_explain(error)}",
                ["Run once with network to fill the cache, or use a local channel: --channel /path/to/channel."]) from None
        raise OperationError("channel-unreachable", f"Could not read the channel index: {_explain(error)}",
                             ["Check the network and the --channel URL; a local mirror works with "
                              "--channel file:///path --offline."]) from None


async def _solve(gateway, specs, channels, platform, virtual):
    from rattler import solve as rattler_solve

    return await rattler_solve(
        channels, specs, gateway=gateway, platforms=[platform, "noarch"], virtual_packages=virtual,
        channel_relations="disabled")


def _explain(error: Exception) -> str:
    text = str(error).strip()
    return text[:3000]


def install(records: list, staging: Path, final: Path, *, package_cache: Path, reporter, offline: bool) -> None:
    """Link ``records`` into ``staging`` with ``final`` as the prefix embedded in files.

    rattler checks the sha256 of every archive it downloads, but links a ``file://`` archive as it
    finds it, and keeps what it extracted in its package cache for every later env. So each
    ``file://`` archive is first copied into the tool's own store and hashed there
    (:func:`verified_copy`), and rattler is given that copy: nothing unverified reaches the cache.
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
                                        reporter=_Progress(reporter, len(records)), execute_link_scripts=False))
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
    if target.is_file() and _file_digest(target, algorithm) == expected:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.part")
    try:
        shutil.copyfile(source, partial)
    except OSError as error:
        partial.unlink(missing_ok=True)
        raise OperationError("install-failed", f"Cannot read {source}: {error.strerror}; nothing was installed.",
                             ["Check the channel directory (--channel) or the bundle."]) from None
    found = _file_digest(partial, algorithm)
    if found != expected:
        partial.unlink(missing_ok=True)
        raise ImpossibleError("checksum-mismatch", f"{source} is not the package its index and lock name: its "
                              f"{algorithm} is {found}, not {expected}. Nothing was installed.",
                              ["Someone replaced the file after it was indexed: rebuild the channel or bundle from "
                               "a trusted copy, and compare before trusting either."])
    os.replace(partial, target)
    return target


def _file_digest(path: Path, algorithm: str) -> str:
    import hashlib

    digest = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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
