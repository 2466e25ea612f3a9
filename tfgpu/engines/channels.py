"""Conda channels as the engine will read them: ``--channel`` values (names, paths, URLs) made into
URLs through the URL door, and the checks a channel passes before rattler's child reads it (a local
index that is a FIFO would block the child for ever; a plain-HTTP channel that redirects where the
door refuses would be followed by rattler unseen). ``tfgpu.engines.rattler_engine`` re-exports these.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from tfgpu.datasource.transport import preflight
from tfgpu.doors import secrets, untrusted
from tfgpu.doors.urls import checked, local_path, path_parts, shown
from tfgpu.errors import ImpossibleError, UsageError

CONDA_FORGE = "https://conda.anaconda.org/conda-forge"
DEFAULT = "conda-forge"
"""The channel conda mode reads when none is named (``--channel``, a project file's ``channels``)."""
CHANNEL_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}(/[A-Za-z0-9][A-Za-z0-9._-]{0,63}){0,3}"
"""A channel named rather than given as a URL: ``conda-forge``, ``nvidia``, ``conda-forge/label/x``."""


def channel_urls(channels: tuple[str, ...], what: str = "--channel") -> list[str]:
    """``--channel`` values as URLs; a bare name means anaconda.org, a path a local channel.
    ``what``: where the channels came from, for the URL door's messages (a project file's key)."""
    urls = []
    for channel in channels or (CONDA_FORGE,):
        if "://" in channel or "\\" in channel or channel.startswith("//"):
            # A channel beginning "//" is a URL without its scheme (maybe with a user:password@),
            # not the local path POSIX would read: the door refuses it, the password hidden.
            # repodata.json carries the packages' checksums: read over plain HTTP from a host not
            # named, a forged one vouches for forged packages (tfgpu.doors.urls).
            urls.append(_url(checked(channel, what, allow_file=True).rstrip("/"), channel, what))
        elif channel.startswith(("/", ".", "~")):
            urls.append(Path(channel).expanduser().absolute().as_uri())
        else:
            urls.append(checked(f"https://conda.anaconda.org/{channel}", what))
    return urls


def planned(channels: tuple[str, ...], what: str = "--channel", *, export: bool = False) -> tuple[str, ...]:
    """The channels a conda-mode plan or export names, in priority order (conda-forge when none):
    a name stays a name (the target's conda reads it as ``-c NAME``), a URL is the URL door's
    canonical form. Without ``export`` a local directory is its ``file://`` URL, as ``create``
    reads it. With ``export`` a local channel is refused (``export-local-channel``): it is a path
    on this machine, and an export runs on another one that never sees it (``tfgpu.export.target``)."""
    words = []
    for channel in channels or (DEFAULT,):
        local = (
            channel.startswith(("/", ".", "~")) and not channel.startswith("//") or channel.lower().startswith("file:")
        )
        if export and local:
            raise UsageError(
                "export-local-channel",
                f"{what} {shown(channel)} is a channel on this machine; the export runs on the target, "
                "which does not have it, so nothing was written.",
                [
                    "Serve the channel over HTTP(S) where the targets reach it (e.g. `python -m http.server` "
                    "in its directory, or a mirror) and give that URL.",
                    "Or name the URL the targets reach the same channel at: --channel https://mirror.example/conda-forge.",
                ],
            )
        if "://" in channel or "\\" in channel or channel.startswith("//") or local:
            url = channel_urls((channel,), what)[0]
            if export and _token(url):
                raise UsageError(
                    "bad-channel",
                    f"{what} {shown(_token(url))} carries an access token (/t/<token>/); an export is read "
                    "and copied by others, so nothing was written.",
                    [
                        "Give the channel's URL without /t/<token>/ and set the token on the target "
                        "(`conda token set`, or CONDA_TOKEN in its environment).",
                    ],
                )
            words.append(url)
        else:
            words.append(_name(channel, what))
    return tuple(words)


def _url(url: str, channel: str, what: str) -> str:
    """A channel URL the engines read as the directory it names: conda and rattler append
    ``/<subdir>/repodata.json`` to the text, so a query or fragment would swallow that (and a
    ``?token=`` would be written into every export), and ``.``/``..`` segments make the URL one
    engine normalises and another sends as it is (``%2e%2e`` too: the segments are read decoded)."""
    if "?" in url or "#" in url or any(part in (".", "..") for part in path_parts(url)):
        raise UsageError(
            "bad-channel",
            f"{what} {shown(channel)} has a query, a fragment or a '.'/'..' segment; a channel URL is "
            "the directory holding linux-64/ and noarch/, and nothing else.",
            ["Give the channel's directory URL itself, e.g. https://mirror.example/conda-forge."],
        )
    return url


def _token(url: str) -> str | None:
    """``url`` with its anaconda.org-style access token shown as ``***`` when it has one, else None.
    The secrets door decides what a token is (``/t/``, ``/T/``, ``/%74/``: a server reads them alike)."""
    return secrets.masked(url) if "conda-token" in secrets.forms(url) else None


def _name(channel: str, what: str) -> str:
    """A channel name, checked whole (a name is a path on anaconda.org: nothing else fits in it)."""
    if not re.fullmatch(CHANNEL_NAME, channel):
        raise UsageError(
            "bad-channel",
            f"{what} {shown(channel)} is neither a channel name (letters, digits, '.', '_', '-', "
            "'/label/...') nor a URL.",
            ["Give a name such as conda-forge, or the channel's https:// URL."],
        )
    checked(f"https://conda.anaconda.org/{channel}", what)
    return channel


INDEX_FILES = ("repodata.json", "repodata.json.zst", "repodata.json.bz2", "current_repodata.json")


def check_local_indexes(urls: list[str], subdirs: list[str]) -> None:
    """Every index file of a ``file://`` channel that the engine's child would read for ``subdirs``
    is a regular file within the reader's cap (``untrusted.CHANNEL_INDEX``): the child reads it
    without a bound, so a FIFO there would block it, and the tool waiting on it, for ever. Called
    by :func:`_engine` for every request, so no channel reaches rattler around it."""
    for url in urls:
        if not str(url).startswith("file://"):
            continue
        root = local_path(url)
        for subdir in dict.fromkeys(subdirs):
            for name in INDEX_FILES:
                path = root / subdir / name
                if os.path.lexists(path):
                    untrusted.check_file(path, untrusted.CHANNEL_INDEX)


def check_channels(urls: list[str]) -> None:
    """A local channel that is not there is a usage error before anything else happens; a channel
    over plain HTTP that redirects where the URL door refuses stops the run before rattler follows."""

    for url in urls:
        preflight(f"{url}/noarch/repodata.json", "a channel's redirect target")
        if url.startswith("file://"):
            path = local_path(url)
            if not path.is_dir():
                raise ImpossibleError(
                    "unknown-channel",
                    f"The channel {url} does not exist ({path} is not a directory).",
                    [
                        "Give a channel directory holding linux-64/ and noarch/ (with repodata.json), "
                        "or a URL such as https://conda.anaconda.org/conda-forge."
                    ],
                )
