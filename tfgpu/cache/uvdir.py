"""Which uv package cache the tool's uv commands use: the user's own, or the tool's.

By default the user's uv cache (``UV_CACHE_DIR``, else what ``uv cache dir`` answers) is reused
when it is on the same file system as the envs directory: uv installs a wheel by hard-linking its
files from the cache, which only works within one file system; across two, uv would copy every
file into every env, and the tool's own cache (under ``tfgpu.doors.paths.cache_root()``) is used
instead. ``TFGPU_UV_CACHE=own`` always uses the tool's own; ``TFGPU_UV_CACHE=user`` or ``auto``
(the default) the rule above.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path

from tfgpu.doors import untrusted
from tfgpu.doors.paths import cache_root, tag_cache
from tfgpu.engines.uv import find_uv
from tfgpu.envs.location import envs_dir
from tfgpu.errors import UsageError
from tfgpu.process.runner import Runner
from tfgpu.records import record

VARIABLE = "TFGPU_UV_CACHE"
CHOICES = ("auto", "user", "own")


@record
class UvCache:
    """The uv cache a run uses, and why (said by ``cache info`` and in each operation's log)."""

    path: Path
    shared: bool
    """The user's own uv cache (``cache clean`` leaves it alone)."""
    why: str


def _device(path: Path) -> int | None:
    """The device of ``path`` or, where it does not exist yet, of its nearest existing parent."""
    for candidate in (path, *path.parents):
        try:
            return os.stat(candidate).st_dev
        except OSError:
            continue
    return None


UV_TAG = "Signature: 8a477f597d28d172789f06886806bc55"
"""The first line of the ``CACHEDIR.TAG`` uv writes at the top of its cache (the cache-tag standard's)."""
_UV_ENTRY = re.compile(r"[a-z][a-z0-9-]*-v[0-9]+|\.gitignore|\.lock|\.tmp\w*|CACHEDIR\.TAG")


def not_a_uv_cache(path: Path, *holds: Path) -> str | None:
    """Why ``path`` is not a uv cache the tool may use, prune or size (None: it is one, or it is not
    there yet and uv will make it). ``UV_CACHE_DIR`` is the user's word, but ``uv cache prune``
    removes every top-level entry it does not know: pointed at a home directory, it empties it. So a
    directory with anything in it must be uv's (its CACHEDIR.TAG, only uv's entries at its top), and
    never one that holds ``holds`` (the envs, the tool's own cache)."""
    resolved = Path(os.path.realpath(path))
    if resolved == Path("/") or resolved == Path(os.path.realpath(os.path.expanduser("~"))):
        return f"{path} is the root or your home directory, not a uv cache"
    for inner in holds:
        inner = Path(os.path.realpath(inner))
        if inner == resolved or resolved in inner.parents:
            return f"{path} holds {inner}"
    try:
        names = os.listdir(resolved)
    except FileNotFoundError:
        return None
    except OSError as error:
        return f"{path} cannot be read ({error.strerror})"
    if not names:
        return None

    try:
        first = untrusted.read_head(resolved / "CACHEDIR.TAG", untrusted.CACHE, 200).split(b"\n", 1)[0]
    except untrusted.Unreadable:
        first = b""
    if not first.decode("ascii", "replace").startswith(UV_TAG):
        return f"{path} holds files and no uv CACHEDIR.TAG"
    strange = [name for name in names if not _UV_ENTRY.fullmatch(name)]
    if strange:
        return f"{path} holds entries uv does not make ({len(strange)}, e.g. {strange[0]!r})"
    return None


def users_uv_cache(uv: str | None, environ: Mapping[str, str] = os.environ) -> Path | None:
    """The user's own uv cache: ``UV_CACHE_DIR``, else uv's answer to ``uv cache dir`` (which
    follows ``XDG_CACHE_HOME``); None when neither answers. ``--no-config``: a ``uv.toml`` in a
    cloned project does not choose where the tool's wheels go."""
    given = environ.get("UV_CACHE_DIR", "").strip()
    if given:
        return Path(os.path.abspath(os.path.expanduser(given)))
    if uv is None:
        return None

    done = Runner().capture([uv, "cache", "dir", "--no-config"], timeout=20)
    answer = done.output.strip().splitlines()
    if done.returncode != 0 or len(answer) != 1 or not os.path.isabs(answer[0]):
        return None
    return Path(answer[0])


def uv_cache(
    uv: str | None = None,
    *,
    environ: Mapping[str, str] = os.environ,
    envs: Path | None = None,
    device: Callable[[Path], int | None] = _device,
) -> UvCache:
    """The uv cache to use (see the module docstring). ``device`` is injectable: two file systems
    cannot be made without root in a test."""

    own = cache_root() / "uv"
    setting = environ.get(VARIABLE, "").strip().lower() or "auto"
    if setting not in CHOICES:
        raise UsageError(
            "bad-uv-cache",
            f"{VARIABLE}={environ.get(VARIABLE)!r} is not one of {', '.join(CHOICES)}.",
            [f"{VARIABLE}=own keeps the tool's own uv cache; unset it to reuse your uv cache where possible."],
        )

    tag_cache(own.parent)  # uv makes its directory, not the tag the cache commands look for
    if setting == "own":
        return UvCache(own, False, f"{VARIABLE}=own")
    if uv is None:
        uv = find_uv()
    users = users_uv_cache(uv, environ)
    if users is None:
        return UvCache(own, False, "no uv cache of yours was found (UV_CACHE_DIR unset, `uv cache dir` gave no path)")
    if envs is None:
        envs = envs_dir()
    if users == own:
        return UvCache(own, False, "UV_CACHE_DIR is the tool's own uv cache")
    why_not = not_a_uv_cache(users, envs, cache_root())
    if why_not is not None:
        return UvCache(own, False, f"your uv cache was not used: {why_not}")
    mine, theirs = device(envs), device(users)
    if mine is None or mine != theirs:
        return UvCache(
            own,
            False,
            f"your uv cache {users} is on another file system than the envs ({envs}): uv's hard links "
            "could not reach the envs, so the tool keeps its own",
        )
    return UvCache(users, True, f"your own uv cache, on the same file system as the envs ({envs})")


def uv_cache_dir(uv: str | None = None) -> Path:
    """The path of :func:`uv_cache` (what every uv command is given as ``--cache-dir``)."""
    return uv_cache(uv).path
