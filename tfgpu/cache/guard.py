"""What ``cache prune`` and ``cache clean`` check before any kind of cache is touched: that what
they would delete holds no environment and none of the places the user keeps, and lies in none.

Both settings that place things are the user's to choose: ``TFGPU_ENVS_DIR`` inside
``TFGPU_CACHE_DIR`` under a kind's own name (``uv``, ``pyc``, ``conda`` …) puts the envs where a
clean deletes every file, and ``uv cache clean`` empties the ``uv`` directory whole. So, for each
kind that would be pruned or cleaned (the tool's own kinds and the user's uv cache alike), and
before anything is deleted from any of them:

* no environment may lie inside it: a directory holding a ``tfgpu-env.json`` marker, a
  ``pyvenv.cfg`` or a ``conda-meta`` directory (uv's own throw-away environments, which it keeps
  inside its buckets such as ``archive-v0/`` and recreates at will, are uv's and do not count);
* it may not lie inside an environment, the envs directories or the data directories (a clean
  there would delete their files);
* it may not hold the envs directories, the data directories, the log directory, the working
  directory (the project) or the home directory.

Otherwise the command stops with ``cache-overlap`` (nothing removed), naming the overlap. The walk
never follows a link and never recurses (``tfgpu.doors.trees``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from tfgpu.doors import trees
from tfgpu.doors.controls import shown
from tfgpu.errors import ImpossibleError
from tfgpu.records import record

ENV_MARKS = ("tfgpu-env.json", "pyvenv.cfg", "conda-meta")
"""What makes a directory an environment: the tool's marker, a venv's config, a conda prefix's record."""
ENVS_APART = "Keep the envs out of the cache: set TFGPU_ENVS_DIR (or TFGPU_CACHE_DIR) so neither holds the other."
DATA_APART = "Keep the data directories out of the cache: set TFGPU_CACHE_DIR to a directory of its own."
LOGS_APART = "Keep the logs out of the cache: set TFGPU_LOG_DIR (or TFGPU_CACHE_DIR) so neither holds the other."
_UV_BUCKET = re.compile(r"[a-z][a-z0-9-]*-v[0-9]+")
"""The name of a bucket at the top of a uv cache (``archive-v0``, ``environments-v2`` …)."""


@record
class Place:
    """A directory a cache command must not reach: what it is (shown in the refusal) and where."""

    what: str
    path: Path
    owns_below: bool = False
    """Everything below it is its own (the envs and data directories): no kind may lie inside it either."""
    way: str = "Point TFGPU_CACHE_DIR (and UV_CACHE_DIR) at a directory of their own, then run it again."
    """How to set them apart, said in the refusal."""


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def _within(inner: Path, outer: Path) -> bool:
    return inner == outer or outer in inner.parents


def _is_env(directory: Path, names: list[str], others: list[str]) -> str | None:
    """The mark that makes ``directory`` an environment (None: it is not one)."""
    for mark in ENV_MARKS:
        if mark == "conda-meta" and mark in names or mark != "conda-meta" and mark in others:
            return mark
    return None


def _identities(places: Sequence[Place]) -> dict[tuple[int, int], Place]:
    """Each place that is there, by its directory's identity (device, inode)."""
    found: dict[tuple[int, int], Place] = {}
    for place in places:
        try:
            info = os.stat(place.path)
        except (OSError, ValueError):
            continue
        found.setdefault((info.st_dev, info.st_ino), place)
    return found


def env_inside(kind: str, path: Path, places: Sequence[Place] = ()) -> tuple[Path, str | Place] | None:
    """The first environment found inside ``path`` (a kind of cache), and its mark. In a uv cache a
    venv inside one of uv's buckets is uv's own (``uvx``'s cached tools); the tool's marker or a
    ``conda-meta`` there is not. One of ``places`` found inside under another name (a bind mount of
    the home directory, which no path comparison sees) is found too, returned in place of a mark."""
    known = _identities(list(places))
    for directory, identity, names, others, _ in trees.walk_identified(path):
        if identity in known:
            return directory, known[identity]
        mark = _is_env(directory, names, others)
        if mark is None:
            continue
        relative = directory.relative_to(path).parts
        if kind == "uv" and mark == "pyvenv.cfg" and relative and _UV_BUCKET.fullmatch(relative[0]):
            continue
        return directory, mark
    return None


def env_around(path: Path) -> tuple[Path, str] | None:
    """The environment ``path`` lies inside (one of its parents holds a mark), if any."""
    for parent in path.parents:
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for mark in ENV_MARKS:
            if mark in names and os.path.isdir(parent / mark) == (mark == "conda-meta"):
                return parent, mark
    return None


def check(verb: str, kinds: list[tuple[str, Path]], places: list[Place]) -> None:
    """Refuse (``cache-overlap``) before anything is removed when a kind to be ``verb``-ed
    (``prune``/``clean``) holds or lies in an env or one of ``places`` (see the module docstring).
    ``kinds``: (kind, path) of each kind to touch; a path that is a link or not there is skipped
    (the command leaves those alone)."""
    for kind, path in kinds:
        if path.is_symlink() or not path.is_dir():
            continue
        real = _real(path)
        for place in places:
            where = _real(place.path)
            if _within(where, real):
                _refuse(verb, kind, path, f"it holds {place.what} {shown(place.path)}", place)
            if place.owns_below and _within(real, where):
                _refuse(verb, kind, path, f"it lies inside {place.what} {shown(place.path)}", place)
        around = env_around(real)
        if around is not None:
            _refuse(verb, kind, path, f"it lies inside the environment {shown(around[0])} (its {around[1]})", None)
        inside = env_inside(kind, path, places)
        if inside is not None and isinstance(inside[1], Place):
            place = inside[1]
            why = f"it holds {place.what} {shown(place.path)} (reached as {shown(inside[0])})"
            _refuse(verb, kind, path, why, place)
        if inside is not None:
            _refuse(verb, kind, path, f"it holds the environment {shown(inside[0])} (its {inside[1]})", None)


def _refuse(verb: str, kind: str, path: Path, why: str, place: Place | None) -> None:
    way = (
        place.way
        if place is not None
        else (
            "Move the environment out of the cache (or remove it: `tfgpu-install remove --prefix ENV`), "
            "or point TFGPU_ENVS_DIR and TFGPU_CACHE_DIR at directories apart."
        )
    )
    raise ImpossibleError(
        "cache-overlap",
        f"`cache {verb}` would delete files of the {kind} cache {shown(path)}, and {why}; nothing was removed.",
        [way, f"`tfgpu-install cache {verb} --dry-run` shows what it would free once they are apart."],
    )
