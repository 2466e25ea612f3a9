"""``cache prune`` and ``cache clean``: remove what the tool cached, and nothing outside it.

Safety, in order: the cache root must look like the tool's (only the kinds in
``tfgpu.cache.survey.KINDS`` and the root's own files at its top; anything else means
``TFGPU_CACHE_DIR`` names some other directory, and nothing is removed); no create, repair or
remove may be running on an env in the envs directory (their target locks), and two cache
commands never run at once (the cache's own lock); symbolic links are never followed, and are
left where they are with what they point at; uv's cache is emptied or pruned by uv itself, which
holds its own lock. The user's own uv cache, when the tool reuses it, is only ever pruned by uv
(which removes entries nothing refers to): ``clean`` leaves it and says how to empty it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from tfgpu.cache import guard
from tfgpu.cache.survey import KINDS, OWN_FILES, Kind, prunable, survey, usage
from tfgpu.cache.uvdir import not_a_uv_cache
from tfgpu.doors import trees
from tfgpu.doors.controls import shown
from tfgpu.doors.paths import CACHE_TAG, is_tagged
from tfgpu.errors import ImpossibleError, OperationError
from tfgpu.records import as_dict, factory, record


@record(frozen=False)
class KindTidied:
    """One kind's part of a prune or clean: what it freed (None: uv decides, not known ahead) and
    what was said of it (uv's words, why it was left)."""

    kind: str
    path: str
    shared: bool
    freed: int | None = 0
    said: str = ""

    def to_dict(self) -> dict:
        return as_dict(self)


@record
class Tidied:
    """``cache prune`` / ``cache clean``: what each kind freed (``dry_run``: would free)."""

    action: str
    dry_run: bool
    root: str
    kinds: list[KindTidied] = factory(list)

    @property
    def freed_bytes(self) -> int:
        return sum(item.freed or 0 for item in self.kinds)

    def to_dict(self) -> dict:
        return {
            "action": self.action,
            "dry_run": self.dry_run,
            "root": self.root,
            "kinds": [item.to_dict() for item in self.kinds],
            "freed_bytes": self.freed_bytes,
        }


WAY_FOREIGN = "Point TFGPU_CACHE_DIR at the tool's own cache (or unset it), or remove those entries yourself."


def check_root(root: Path) -> list[str]:
    """Why ``root`` is not the tool's cache, as names to show (empty: it is). The tool's cache has
    the tag the tool writes (:func:`tfgpu.doors.paths.tag_cache`) and only its kinds at its top: names
    alone prove nothing (a project with a ``data`` directory, an env named ``conda``)."""
    try:
        names = sorted(os.listdir(root))
    except FileNotFoundError:
        return []
    except OSError as error:
        raise ImpossibleError(
            "cache-unreadable", f"Cannot read the cache {shown(root)}: {error.strerror}.", [WAY_FOREIGN]
        ) from None
    foreign = [name for name in names if name not in KINDS and name not in OWN_FILES]
    if names and not foreign and not is_tagged(root):
        if not _made_by_an_earlier_version(root):
            return ["no tfgpu-install CACHEDIR.TAG, and its data/ is not the tool's parsed tables"]
        tag_cache_anyway(root)
    return foreign


def _made_by_an_earlier_version(root: Path) -> bool:
    """An untagged cache an earlier version made: every command leaves its parsed tables in
    ``data/``, and nothing else is ever there (``tables-*.bin``, a ``.tables-*.tmp`` cut short)."""
    try:
        names = os.listdir(root / "data")
    except OSError:
        return False
    return bool(names) and all(
        name.startswith("tables-") and name.endswith(".bin") or name.startswith(".tables-") for name in names
    )


def tag_cache_anyway(root: Path) -> None:
    """Adopt an earlier version's cache: write the tag into it (not empty, so ``tag_cache`` would not)."""

    with contextlib.suppress(OSError):
        fd = os.open(root / "CACHEDIR.TAG", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w") as out:
            out.write(CACHE_TAG)


@contextlib.contextmanager
def held(root: Path, envs: Path):
    """The cache's lock, held while no operation on an env in ``envs`` is under way."""
    if not root.is_dir():
        yield
        return
    try:
        fd = os.open(
            root / ".tfgpu-cache.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644
        )
    except OSError as error:
        raise ImpossibleError(
            "cache-unreadable",
            f"The cache's lock {shown(root / '.tfgpu-cache.lock')} cannot be opened ({error.strerror}): "
            "it should be a plain file; nothing was removed.",
            ["Remove that entry (a link, a directory) and run the same command again."],
        ) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise OperationError(
                "cache-busy",
                f"Another tfgpu-install cache command is working on {root}; nothing was removed.",
                ["Wait for it to finish, then run the same command again."],
            ) from None
        busy = _busy_targets(envs)
        if busy:
            raise OperationError(
                "cache-busy",
                f"An env is being created, repaired or removed right now ({', '.join(busy)}); nothing was removed.",
                ["Wait for it to finish, then run the same command again."],
            )
        yield
    finally:
        os.close(fd)


def _busy_targets(envs: Path) -> list[str]:
    """The envs in ``envs`` whose target lock another run holds (``tfgpu.envs.txn.TargetLock``)."""
    busy = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(envs):
            if not (entry.name.startswith(".") and entry.name.endswith(".tfgpu-lock")):
                continue
            try:
                # Opened for writing, as the lock's holder opens it (flock needs no read), never followed.
                fd = os.open(entry.path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                busy.append(entry.name.removeprefix(".").removesuffix(".tfgpu-lock"))
            finally:
                os.close(fd)
    return busy


def remove_files(root: Path, keep=None) -> tuple[int, int]:
    """Remove the regular files under ``root`` that ``keep`` (a test of path and stat) accepts, or
    all of them, and the directories left empty; returns (files, bytes freed). Symbolic links are
    neither followed nor removed. Bytes count only files with no other link (an env's hard link
    keeps the data on disk)."""
    # Every stat and unlink is relative to a directory opened without following a link and checked
    # to be the one listed (tfgpu.doors.trees): a directory swapped for a link while the walk runs is
    # never entered, a name that became a link is removed as the link; and no depth of nesting
    # makes the walk recurse.
    try:
        deleted = trees.delete_files(root, keep if keep is not None else (lambda path, info: True))
    except OSError:
        return 0, 0
    return len(deleted), sum(info.st_blocks * 512 for info in deleted if info.st_nlink == 1)


def _uv(uv: str | None, verb: str, cache: Path, runner) -> tuple[bool, str]:
    """``uv cache clean|prune`` on ``cache``; (done, what uv said)."""
    if uv is None:
        return False, "uv is not installed with this tfgpu-install"
    done = runner.run([uv, "cache", verb, "--no-config", "--cache-dir", str(cache)], timeout=3600)
    return done.returncode == 0, done.output.strip().splitlines()[-1] if done.output.strip() else ""


def tidy(root: Path, envs: Path, uv_cache, *, prune: bool, dry_run: bool, uv: str | None, runner, places=()) -> Tidied:
    """``cache prune`` (``prune``) or ``cache clean``; returns what was (or would be) freed, by kind.
    ``places``: the directories no kind may hold or lie in (``tfgpu.cache.guard.Place``), the envs
    directory ``envs`` always among them."""
    verb = "prune" if prune else "clean"
    foreign = check_root(root)
    if foreign:
        named = ", ".join(shown(name) for name in foreign[:5]) + (
            f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""
        )
        raise ImpossibleError(
            "cache-not-ours",
            f"{shown(root)} does not look like tfgpu-install's cache ({named}); nothing was removed.",
            [WAY_FOREIGN],
        )
    before = survey(root, uv_cache)
    done: list[KindTidied] = []
    context = contextlib.nullcontext() if dry_run else held(root, envs)
    with context:
        # Every kind this command would touch, checked before the first file of any goes (the user's
        # uv cache only by prune: clean leaves it).
        touched = [(kind.kind, kind.path) for kind in before if prune or not kind.shared]
        envs_place = guard.Place("the envs directory", envs, owns_below=True, way=guard.ENVS_APART)
        guard.check(verb, touched, [envs_place, *places])
        for kind in before:
            done.append(_one(kind, verb, dry_run=dry_run, uv=uv, runner=runner))
    return Tidied(verb, dry_run, str(root), done)


def _one(kind: Kind, verb: str, *, dry_run: bool, uv: str | None, runner) -> KindTidied:
    """Prune or clean one kind; its entry in the result."""
    item = KindTidied(kind.kind, str(kind.path), kind.shared)
    if kind.path.is_symlink() or not kind.path.is_dir():
        item.said = kind.note or "nothing there"
        return item
    if kind.kind == "uv" and kind.shared:
        why_not = not_a_uv_cache(kind.path)  # checked again when it is pruned: it may have changed since
        if why_not is not None:
            item.said = f"left as it is: {why_not}"
            return item
    if kind.kind == "uv" and (verb == "prune" or not kind.shared):
        if dry_run:
            item.freed = None if verb == "prune" else kind.usage.frees
            item.said = f"`uv cache {verb}` would run on it"
            return item
        ok, said = _uv(uv, verb, kind.path, runner)
        after = _usage_after(kind)
        item.freed = max(kind.usage.frees - after, 0)
        item.said = f"uv cache {verb}: {said}" if ok else f"uv cache {verb} failed: {said}"
        return item
    if kind.shared:
        item.said = f"your own uv cache: left as it is (`uv cache clean --cache-dir {kind.path}` empties it)"
        return item
    keep = prunable(kind.kind, kind.path) if verb == "prune" else (lambda path, info: True)
    if keep is None:
        item.said = kind.prune_says
        return item
    if dry_run:
        item.freed = kind.prune_frees if verb == "prune" else kind.usage.frees
        return item
    files, freed = remove_files(kind.path, keep)
    if kind.kind == "pyc" and files and verb == "prune":
        remove_files(kind.path / "envs")  # the store no longer holds every file of those releases
    item.freed, item.said = freed, f"{files} files removed"
    return item


def _usage_after(kind: Kind) -> int:
    return usage(kind.path).frees
