"""What the package install of a repair may have written, found after the fact: the listing the
journal takes of the areas uv writes (site-packages, ``bin``, ``include``) before uv runs, and the
sweep that takes out of them whatever appeared since.

uv writes a wheel in steps: the package's directories (``nvidia/cudnn/lib``, empty at first), its
files one by one, its ``.dist-info`` (the wheel's METADATA and RECORD), then INSTALLER, REQUESTED and
a RECORD of its own through a ``.tmp*`` file renamed into place. A repair interrupted anywhere in
between (SIGINT, SIGTERM, SIGKILL) leaves some prefix of that: a ``.dist-info`` without METADATA is
no distribution to ``uv pip uninstall``, an empty directory is in no RECORD, and a half one makes
the user's next ``uv pip install`` of that package fail. So the rollback of an interrupted repair
does not ask uv what it installed: it removes every path that was not in the listing, except what
a complete distribution the repair did not bring (a package the user installed since) owns, and
the files the journal itself restores.

Only paths whose inode changed after the listing was taken are removed (``st_ctime``: a file uv
links or writes gets a new one), so even a listing that lost entries cannot make the sweep take a
file that was there before. And a file is removed only where the install provably wrote it: it lies
in a ``.dist-info`` the install made, or a wheel of the install names it (the RECORD in that
``.dist-info``, else in uv's cache, where uv unpacked the wheel before linking it in) and it holds
that wheel's bytes (the RECORD's sha256). What the user put there after a
SIGKILL and before the undo (a module, a ``.pth``, a script in ``bin``, a note inside a package) is
kept, and named. One more thing uv writes is provably its own: a ``.tmp*`` it copies a wheel's file
through (when uv's cache is on another file system), holding the start of one of that wheel's files. Every delete goes through the env-write door.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import re
import stat
import time
from pathlib import Path

from tfgpu.doors import untrusted
from tfgpu.envs import writes
from tfgpu.errors import TfgpuError
from tfgpu.records import record
from tfgpu.repair.survey import canonical

AREAS = ("bin", "include")
"""Beside site-packages, where uv puts a wheel's scripts and headers in a venv."""
SLACK_NS = 2_000_000_000
"""File times come from the kernel's coarse clock, a tick behind ``time.time_ns()``."""
MAX_DEPTH = writes.MAX_DEPTH
MAX_ARCHIVES = 200_000
"""Entries of uv's cache looked at for an install's wheels: a bound on the walk, not a size anyone meets."""
UV_PARTIAL = re.compile(r"\.tmp[A-Za-z0-9]{6}\Z")
"""The temporary name uv copies a file through before renaming it into place."""
ARCHIVES = "archive-v0"
"""Where uv's cache keeps each wheel unpacked, the tree it links or copies into an env."""


@record
class Swept:
    """What :func:`sweep` did, env-relative: what went, what was listed and is gone, what appeared
    and was left (a package's since), and what appeared that no wheel of the install holds (the
    user's, kept)."""

    removed: tuple[str, ...]
    missing: tuple[str, ...]
    kept: tuple[str, ...]
    spared: tuple[str, ...]


def _areas(prefix: Path, site: Path | None) -> list[Path]:
    found = [site] if site is not None else []
    return found + [prefix / name for name in AREAS if (prefix / name).is_dir() and not (prefix / name).is_symlink()]


def _walk(prefix: Path, roots: list[Path]):
    """(env-relative path, lstat) of everything under ``roots``, the roots included; links are not
    followed, and nothing deeper than ``MAX_DEPTH`` is looked at."""
    for root in roots:
        stack = [(root, 0)]
        while stack:
            directory, depth = stack.pop()
            try:
                info = directory.lstat()
            except OSError:
                continue
            yield os.path.relpath(directory, prefix), info
            if not stat.S_ISDIR(info.st_mode) or depth >= MAX_DEPTH:
                continue
            try:
                entries = list(os.scandir(directory))
            except OSError:
                continue
            for entry in entries:
                path = Path(entry.path)
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(info.st_mode):
                    stack.append((path, depth + 1))
                else:
                    yield os.path.relpath(path, prefix), info


def _kind(path: Path, info: os.stat_result) -> str:
    if stat.S_ISDIR(info.st_mode):
        return "dir"
    if stat.S_ISLNK(info.st_mode):
        try:
            return "link " + os.readlink(path)
        except OSError:
            return "link"
    return f"file {info.st_size}"


def take(prefix: Path, site: Path | None) -> dict:
    """The listing the journal keeps: ``{"taken_ns", "paths": {relative: kind}}``."""
    taken = time.time_ns()
    paths = {relative: _kind(prefix / relative, info) for relative, info in _walk(prefix, _areas(prefix, site))}
    return {"taken_ns": taken, "paths": paths}


def _dist_name(directory: str) -> str:
    """``nvidia_cudnn_cu12-9.28.0.42.dist-info`` -> ``nvidia-cudnn-cu12`` (from the name: a half
    written one may have no METADATA)."""
    return canonical(Path(directory).name.removesuffix(".dist-info").split("-", 1)[0])


def _ctime(path: Path) -> int:
    try:
        return path.lstat().st_ctime_ns
    except OSError:
        return 0


def _owned(prefix: Path, site: Path, dist_info: Path) -> set[str]:
    """Env-relative paths a distribution owns: its RECORD's and its own ``.dist-info``'s."""
    owned = set()
    text = untrusted.text_or_none(dist_info / "RECORD", untrusted.ENV_FILE, errors="replace")
    for row in csv.reader(io.StringIO(text or "")):
        if row and row[0]:
            owned.add(os.path.relpath(os.path.normpath(site / row[0]), prefix))
    owned.add(os.path.relpath(dist_info, prefix))
    return owned


def _record(site: Path, dist_info: Path, source: Path | None, prefix: Path) -> dict[str, tuple[str, Path | None]]:
    """``prefix``-relative path -> (RECORD's hash field, the file in ``source``) of what ``dist_info``'s
    RECORD names; ``source``: the uv cache entry the wheel was unpacked into (None for a RECORD in
    the env itself, whose files prove nothing by being there)."""
    found = {}
    text = untrusted.text_or_none(dist_info / "RECORD", untrusted.ENV_FILE, errors="replace")
    for row in csv.reader(io.StringIO(text or "")):
        if not row or not row[0]:
            continue
        relative = os.path.relpath(os.path.normpath(site / row[0]), prefix)
        found[relative] = (row[1] if len(row) > 1 else "", source / row[0] if source is not None else None)
    return found


def wheel_files(prefix: Path, site: Path | None, made: list[Path], cache: Path | None, wanted: set) -> dict:
    """What the wheels of the install name, env-relative -> (hash field, cached copy): from the RECORD
    of each ``.dist-info`` the install made (``made``), and from uv's cache (``cache``) for each
    (canonical name, version) in ``wanted`` whose unpacked wheel is there."""
    if site is None:
        return {}
    found: dict = {}
    for dist_info in made:
        found |= _record(site, dist_info, None, prefix)
    archives = cache / ARCHIVES if cache is not None else None
    if not wanted or archives is None or not archives.is_dir() or archives.is_symlink():
        return found
    try:
        entries = os.scandir(archives)
    except OSError:
        return found
    with entries:
        for count, entry in enumerate(entries):
            if count >= MAX_ARCHIVES:
                break
            if not entry.is_dir(follow_symlinks=False):
                continue
            try:
                names = [e.name for e in os.scandir(entry.path) if e.name.endswith(".dist-info")]
            except OSError:
                continue
            for name in names:
                stem = name.removesuffix(".dist-info")
                dist, _, version = stem.partition("-")
                if (canonical(dist), version) in wanted:
                    root = Path(entry.path)
                    for key, value in _record(root, root / name, root, root).items():
                        # over the env's RECORD: the cached copy is what a half-copied ``.tmp*`` is
                        # compared with
                        found[os.path.relpath(os.path.normpath(site / key), prefix)] = value
    return found


def _partial_copy(path: Path, info: os.stat_result, candidates: list[Path]) -> bool:
    """``path`` (a ``.tmp*`` in a directory a wheel of the install fills) holds the start of one of
    that wheel's files: uv copying it (across file systems) when it was stopped."""
    if not stat.S_ISREG(info.st_mode):
        return False
    try:
        with untrusted.open_stream(path, untrusted.ARTIFACT) as stream:
            head = untrusted.read_at(stream, 0, info.st_size, str(path))
    except (OSError, ValueError, untrusted.Unreadable, TfgpuError):
        return False
    if len(head) != info.st_size:
        return False
    for cached in candidates:
        try:
            with untrusted.open_stream(cached, untrusted.ARTIFACT) as stream:
                if (
                    os.fstat(stream.fileno()).st_size >= len(head)
                    and untrusted.read_at(stream, 0, len(head), str(cached)) == head
                ):
                    return True
        except (OSError, ValueError, untrusted.Unreadable, TfgpuError):
            continue
    return False


def _same_bytes(path: Path, info: os.stat_result, field: str, _cached: Path | None) -> bool:
    """``path`` holds the wheel's bytes: its sha256 is the one the wheel's RECORD gives. Being the
    cache's own inode is no proof: a file uv linked in and the user then edited in place (``>>``)
    is still that inode, holding the user's bytes."""
    algorithm, _, expected = field.partition("=")
    if algorithm != "sha256" or not expected or not stat.S_ISREG(info.st_mode):
        return False
    digest = hashlib.sha256()
    try:
        with untrusted.open_stream(path, untrusted.ARTIFACT) as stream:
            while block := stream.read(1 << 20):
                digest.update(block)
    except (OSError, ValueError, untrusted.Unreadable, TfgpuError):  # an unreadable file is not proven ours
        return False
    return base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode() == expected


def sweep(
    prefix: Path,
    site: Path | None,
    listing: dict,
    ours: set[str],
    spare: set[str],
    *,
    cache: Path | None = None,
    wanted: set | None = None,
) -> Swept:
    """Remove what appeared under the listed areas since ``listing`` was taken and the install
    provably wrote (module docstring), but what a complete distribution not in ``ours`` (canonical
    names) owns and the paths in ``spare`` (the journal's files); ``cache``: uv's cache, ``wanted``:
    the (canonical name, version) the install meant. Returns the :class:`Swept` paths."""
    before = listing.get("paths", {})
    since = int(listing.get("taken_ns", 0)) - SLACK_NS
    keep: set[str] = set()
    for dist_info in sorted(site.glob("*.dist-info")) if site is not None else ():
        relative = os.path.relpath(dist_info, prefix)
        if relative in before and _ctime(dist_info / "RECORD") < since:
            continue  # there before and not written since: everything it owns is in the listing
        if not (relative not in before and _dist_name(relative) in ours) and (dist_info / "RECORD").is_file():
            keep |= _owned(prefix, dist_info.parent, dist_info)  # its parent: site
    found = dict(_walk(prefix, _areas(prefix, site)))
    made = [
        prefix / relative
        for relative in found
        if relative.endswith(".dist-info") and relative not in before and _dist_name(relative) in ours
    ]
    made_names = {os.path.relpath(d, prefix) for d in made}
    named = wheel_files(prefix, site, made, cache, wanted or set())
    copies: dict[str, list[Path]] = {}  # env-relative directory -> the cached wheel files uv copies into it
    for relative, (_field, cached) in named.items():
        if cached is not None:
            copies.setdefault(str(Path(relative).parent), []).append(cached)
    kept_dirs = {str(p) for k in keep for p in Path(k).parents}
    kept_infos = {k for k in keep if k.endswith(".dist-info")}
    removed, kept, dirs, spared = [], [], [], []
    for relative, info in sorted(found.items()):
        if relative in before or relative in spare:
            continue
        inside_kept = relative in keep or any(str(p) in kept_infos for p in Path(relative).parents)
        if inside_kept or info.st_ctime_ns < since:
            kept.append(relative)
            continue
        if stat.S_ISDIR(info.st_mode):
            if relative not in kept_dirs:
                dirs.append(relative)
            continue
        in_made = any(str(p) in made_names for p in Path(relative).parents)
        proven = in_made or (relative in named and _same_bytes(prefix / relative, info, *named[relative]))
        if not proven and UV_PARTIAL.match(Path(relative).name):
            proven = _partial_copy(prefix / relative, info, copies.get(str(Path(relative).parent), []))
        if not proven:
            spared.append(relative)  # no wheel of the install holds it: the user's
            continue
        writes.delete(writes.inside(prefix, relative), root=prefix)
        removed.append(relative)
    for relative in sorted(dirs, key=lambda d: d.count("/"), reverse=True):
        if writes.remove_empty_dir(writes.inside(prefix, relative)):
            removed.append(relative + "/")
        else:
            kept.append(relative + "/")
    now = {relative for relative, _ in _walk(prefix, _areas(prefix, site))}
    missing = sorted(relative for relative in before if relative not in now)
    return Swept(tuple(removed), tuple(missing), tuple(sorted(set(kept) - set(dirs))), tuple(spared))


def empty_dirs(prefix: Path, site: Path | None, listing: dict) -> list[str]:
    """After a completed repair is undone: remove the directories its packages made that nothing
    fills any more (uv leaves ``nvidia/<pkg>/lib`` behind when another file was put there)."""
    before = listing.get("paths", {})
    made = [
        relative
        for relative, info in _walk(prefix, _areas(prefix, site))
        if stat.S_ISDIR(info.st_mode) and relative not in before
    ]
    return [
        relative + "/"
        for relative in sorted(made, key=lambda d: d.count("/"), reverse=True)
        if writes.remove_empty_dir(writes.inside(prefix, relative))
    ]
