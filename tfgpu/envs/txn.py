"""Changing a target directory T without ever leaving it half-built, even after SIGKILL.

Every change to T happens under a lock (``.T.tfgpu-lock`` beside it: a second create or remove
of T fails at once with ``target-busy``), and uses only names the tool owns beside T:

* ``.T.tfgpu-staging/`` a build in progress; the record inside it (:data:`STAGING_RECORD`) names T;
* ``.T.tfgpu-old/`` the previous env, moved aside by ``--force`` until the new one is in place;
* ``.T.tfgpu-removing/`` an env being deleted (its marker is deleted last);
* ``.T.tfgpu-inplace.json`` an in-place build (conda/mamba/micromamba create at T itself).

:func:`recover` runs first in every create and remove of T and finishes or undoes what a killed
run left: staging is deleted, an env moved aside comes back when T is missing, a removal is
completed, a half-built in-place env is deleted and the old one put back. Each leftover is deleted
only when the record or marker inside it names T; anything else is reported and left alone.

Deleting goes through the env-write door (``tfgpu.envs.writes.remove_tree``): only a tree this
run made (or proved its own) is made writable to be emptied, never the directory holding T. Where
that directory refuses a delete or a rename, the run stops with ``target-not-writable`` and says
what is left where (a staging directory keeps its record, so the next run can prove it and delete
it). A target whose name is too long for ``.T.tfgpu-staging`` gets short, fixed-length sibling
names instead.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from pathlib import Path

from tfgpu.doors import trees, untrusted
from tfgpu.envs import jupyter, marker, writes
from tfgpu.envs.inuse import Exclusive
from tfgpu.envs.location import refuse_link
from tfgpu.envs.removal import delete_counted
from tfgpu.errors import ImpossibleError, OperationError
from tfgpu.process.runner import shielded
from tfgpu.records import record

STAGING_RECORD = ".tfgpu-staging.json"


def _sibling(final: Path, suffix: str) -> Path:
    name = f".{final.name}.tfgpu-{suffix}"
    if len(name.encode()) > 255:
        # A long target name would make a sibling's name longer than a file name may be: a short,
        # fixed-length name derived from the target's instead (the record inside still names it).

        name = f".tfgpu-{suffix}-{hashlib.sha256(final.name.encode()).hexdigest()[:16]}"
    return final.parent / name


def staging_of(final: Path) -> Path:
    return _sibling(final, "staging")


def old_of(final: Path) -> Path:
    return _sibling(final, "old")


def removing_of(final: Path) -> Path:
    return _sibling(final, "removing")


def hold_of(final: Path) -> Path:
    """The file ``run`` and ``shell`` hold while they use the env (``tfgpu.envs.inuse``)."""
    return _sibling(final, "inuse")


def journal_of(final: Path) -> Path:
    return _sibling(final, "inplace.json")


class TargetLock:
    """An exclusive lock on one target, held for a whole create or remove (flock: released by the
    kernel when the process dies, SIGKILL included)."""

    def __init__(self, final: Path) -> None:
        self.final = final
        self.path = _sibling(final, "lock")
        self.fd: int | None = None

    def __enter__(self) -> TargetLock:
        for _ in range(10):
            try:
                self.final.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            except OSError as error:
                raise ImpossibleError(
                    "target-not-writable",
                    f"Cannot lock {self.final}: {error.strerror} (the lock is the file {self.path}); nothing was done.",
                    [f"Check that {self.final.parent} is a directory you can write."],
                ) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise OperationError(
                    "target-busy",
                    f"Another tfgpu-install is creating, repairing or removing {self.final} "
                    "right now; nothing was done.",
                    ["Wait for it to finish, then run the same command again."],
                ) from None
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path, follow_symlinks=False).st_ino
            except FileNotFoundError:
                same = False
            if same:  # not a lock file another run deleted while we waited for it
                self.fd = fd
                return self
            os.close(fd)
        raise OperationError(
            "target-busy", f"Could not lock {self.final}; nothing was done.", ["Run the same command again."]
        )

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            trees.unlink(self.path, strict=False)
            os.close(self.fd)
            self.fd = None


def write_record(path: Path, value: dict) -> None:
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    partial.write_text(json.dumps(value) + "\n", encoding="utf-8")
    trees.replace(partial, path)


def read_record(path: Path, kind: untrusted.Kind = untrusted.STAGING_RECORD) -> dict | None:
    """The JSON object in ``path``; None for a link, a file over the kind's limit, or anything else."""
    try:
        value = untrusted.load_json(path, kind)
    except untrusted.Unreadable:
        return None
    return value if isinstance(value, dict) else None


def is_real_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def delete_contents(directory: Path, keep: str | None = None) -> None:
    """Delete everything inside ``directory`` but ``keep``; links are deleted, never followed. Another
    file system mounted anywhere inside stops it before the first delete (``env-has-mount``)."""
    writes.check_no_mounts(directory)
    with os.scandir(directory) as entries:
        for entry in list(entries):
            if entry.name == keep:
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    writes.remove_tree(Path(entry.path), owner=directory)
                else:
                    writes.delete(Path(entry.path))
            except FileNotFoundError:
                pass


def drop_staging(staging: Path) -> None:
    """Delete a staging directory; its record goes last, and comes back when the staging directory
    itself cannot be deleted (its parent is read-only): the next run can then prove it ours."""
    record = read_record(staging / STAGING_RECORD)
    delete_contents(staging, keep=STAGING_RECORD)
    writes.delete(staging / STAGING_RECORD)
    try:
        trees.remove_dir(staging, strict=True)
    except OSError as error:
        if record is not None:
            try:
                write_record(staging / STAGING_RECORD, record)
            except OSError:
                pass
        raise ImpossibleError(
            "target-not-writable",
            f"The build was rolled back, but its empty staging directory "
            f"{staging} could not be deleted: {error.strerror} (its directory {staging.parent} is "
            "not writable; tfgpu-install never changes the mode of a directory it did not make).",
            [
                f"Make {staging.parent} writable again, then run the same command (it deletes "
                f"{staging.name} first), or delete it yourself: rm -rf {staging}"
            ],
        ) from None


def finish_removal(directory: Path, made_for: Path, progress=None) -> bool:
    """Delete an env already moved to ``directory`` (its kernels first, its marker last). False when
    ``directory`` is not provably the env made for ``made_for`` and not empty: it is then left alone.
    ``progress``: told the files and bytes deleted as it goes (``tfgpu.envs.removal``)."""
    if not is_real_dir(directory):
        return False
    found = marker.proof(directory, made_for)
    if found is None:
        if any(directory.iterdir()):
            return False
        trees.remove_dir(directory, strict=True)
        return True
    for kernel in found.kernels:
        jupyter.unregister(kernel, found.id or "")  # proof() holds a valid id
    delete_counted(directory, marker.NAME, progress)
    trees.unlink(directory / marker.NAME)
    trees.remove_dir(directory, strict=True)
    return True


def foreign_leftover(path: Path, what: str) -> ImpossibleError:
    return ImpossibleError(
        "foreign-leftover",
        f"{path} looks like {what}, but nothing in it proves tfgpu-install "
        "made it for this target; it is left untouched and nothing was done.",
        [f"Look at {path} and delete it yourself if it is not yours to keep."],
    )


def inplace_token(final: Path, build_id: str) -> Path:
    """The file an in-place build leaves inside the directory it made, naming its journal's id
    (conda and mamba, run with ``-y``, build into a directory that exists)."""
    return final / f".tfgpu-inplace-{build_id}"


def _token_matches(final: Path, build_id: str) -> bool:
    if not build_id or "/" in build_id or build_id in (".", ".."):
        return False
    token = inplace_token(final, build_id)
    return untrusted.text_or_none(token, untrusted.MARKER) == build_id


def _rmdir_if_empty(directory: Path) -> bool:
    """``rmdir`` deletes only an empty directory, so nothing anyone put there can be lost."""
    return trees.remove_dir(directory)


def recover(final: Path, progress=None) -> list[str]:
    """Finish or undo what a killed create/remove of ``final`` left (call with the lock held);
    returns what was done, one sentence each."""
    done: list[str] = []
    target = os.path.realpath(final)
    journal = journal_of(final)
    if journal.exists() or journal.is_symlink():
        record = read_record(journal)
        if record is None or record.get("target") != target or not isinstance(record.get("id"), str):
            raise foreign_leftover(journal, "the record of an interrupted in-place build")
        built = marker.proof(final) if is_real_dir(final) else None
        if built is None or built.id != record["id"]:
            if is_real_dir(final):
                # The journal beside the target is no proof (anyone who can write there can write
                # one): only the token the build put inside the directory it made itself is.
                if built is not None or not _token_matches(final, record["id"]):
                    raise foreign_leftover(final, "an environment an interrupted in-place build left")
                writes.remove_tree(final)
                done.append(f"deleted the half-built environment an interrupted run left at {final}")
            if is_real_dir(old_of(final)) and marker.proof(old_of(final), final):
                trees.replace(old_of(final), final)
                done.append(f"put the previous environment back at {final}")
        trees.unlink(journal)
    staging = staging_of(final)
    if staging.exists() or staging.is_symlink():
        record = read_record(staging / STAGING_RECORD) if is_real_dir(staging) else None
        if record is None and is_real_dir(staging) and _rmdir_if_empty(staging):
            # A run killed (SIGKILL) between making it and writing its record: empty, nothing lost.
            done.append(f"deleted {staging}, left empty by an interrupted build")
        elif record is None or record.get("target") != target:
            raise foreign_leftover(staging, "an interrupted build's staging directory")
        else:
            drop_staging(staging)
            done.append(f"deleted {staging}, left by an interrupted build")
    removing = removing_of(final)
    if removing.exists() or removing.is_symlink():
        if not finish_removal(removing, final, progress):
            raise foreign_leftover(removing, "an environment being removed")
        done.append(f"finished removing the environment an interrupted run left in {removing}")
    old = old_of(final)
    if old.exists() or old.is_symlink():
        if not is_real_dir(old) or (marker.proof(old, final) is None and any(old.iterdir())):
            raise foreign_leftover(old, "the environment a --force rebuild moved aside")
        if not final.exists() and not final.is_symlink():
            trees.replace(old, final)
            done.append(f"put the previous environment back at {final} (an interrupted --force)")
        else:
            trees.replace(old, removing)
            finish_removal(removing, final, progress)
            done.append(f"deleted the environment a finished --force rebuild replaced ({old})")
    stray = final / STAGING_RECORD
    if stray.is_file() and marker.proof(final):
        trees.unlink(stray)
    return done


def prepare(location) -> None:
    """Make the empty staging directory (with its record); in place, record the build beside the
    target and move an old env (``--force``) aside. Call after :func:`recover`, with the lock held."""
    final = location.prefix
    record = {"tool": "tfgpu-install", "target": location.real, "id": location.id}
    if location.in_place:
        write_record(journal_of(final), record)
        if final.exists():
            trees.replace(final, old_of(final))
        final.parent.mkdir(parents=True, exist_ok=True)
        # The proof that this run made the directory: it makes it (it does not exist now) and puts
        # the journal's random id inside, where the engine (conda, mamba) then builds the env.
        final.mkdir()
        writes.put_text(inplace_token(final, location.id), location.id, root=final)
        return
    location.staging.parent.mkdir(parents=True, exist_ok=True)
    # The directory and its record together: cut between them, it would be a staging directory
    # nothing proves the tool's, which every later create of the target refuses (foreign-leftover).
    with shielded():
        location.staging.mkdir()
        try:
            write_record(location.staging / STAGING_RECORD, record)
        except BaseException:
            trees.remove_dir(location.staging, strict=True)
            raise


def commit(location) -> None:
    """Move the finished env into place; an old one (``--force``) is deleted only afterwards."""
    final, old = location.prefix, old_of(location.prefix)
    with shielded():
        if location.in_place:
            if old.exists():
                trees.replace(old, removing_of(final))
            trees.unlink(journal_of(final))
            trees.unlink(inplace_token(final, location.id))
        else:
            if final.exists() and not any(final.iterdir()):
                trees.remove_dir(final, strict=True)
            if final.exists():
                trees.replace(final, old)
            trees.replace(location.staging, final)
            trees.unlink(final / STAGING_RECORD)
            if old.exists():
                trees.replace(old, removing_of(final))
    if removing_of(final).exists():
        finish_removal(removing_of(final), final)


def committed(location) -> bool:
    """Whether this build's env is in place at its prefix: the move into place (:func:`commit`) is
    done, so a rollback has nothing left to undo (in place: it would delete the finished env)."""
    final = location.prefix
    if location.in_place and (journal_of(final).exists() or journal_of(final).is_symlink()):
        return False
    found = marker.proof(final) if is_real_dir(final) else None
    return found is not None and found.id == location.id


def rollback(location) -> None:
    """Leave nothing behind: the staging directory goes; the final prefix was never touched
    (in place: the half-built prefix goes and the old env, if any, comes back)."""
    with shielded():
        if not location.in_place:
            if is_real_dir(location.staging):
                drop_staging(location.staging)
            return
        built = marker.proof(location.prefix) if is_real_dir(location.prefix) else None
        if is_real_dir(location.prefix) and (built is None or built.id == location.id):
            writes.remove_tree(location.prefix)  # the half-built env of this very run
        if old_of(location.prefix).exists() and not location.prefix.exists():
            trees.replace(old_of(location.prefix), location.prefix)
        trees.unlink(journal_of(location.prefix))


@record
class Removal:
    """What :func:`remove` did: the env's path, and what finishing an interrupted remove (or a
    create's leftovers) said as it went."""

    removed: str
    recovered: list[str]


def remove(final: Path, progress=None) -> Removal:
    """Delete the env at ``final`` if its marker proves tfgpu-install made it there (its Jupyter
    kernels too); returns what was removed and recovered. Re-running after an interrupted remove
    finishes it. An env a ``run`` or ``shell`` holds is ``env-in-use`` (``tfgpu.envs.inuse``);
    ``progress`` is told the files and bytes deleted as it goes."""
    refuse_link(final)
    with TargetLock(final):
        hold = Exclusive(final, hold_of(final))
        try:
            return _remove(final, progress)
        finally:
            hold.release()


def _remove(final: Path, progress) -> Removal:
    """``remove``'s work, under the target lock and the exclusive hold."""
    recovered = recover(final, progress)  # an interrupted remove's rest is counted as it goes too
    if not final.exists():
        if any("removing" in line for line in recovered):
            return Removal(str(final), recovered)
        raise ImpossibleError(
            "no-such-env",
            f"There is no environment at {final}.",
            ["`tfgpu-install list` shows the environments tfgpu-install built."],
        )
    if not final.is_dir() or marker.proof(final) is None:
        raise ImpossibleError(
            "not-a-tfgpu-env",
            f"{final} was not provably built there by tfgpu-install ({marker.why_not(final)}), so it is left alone.",
            ["Delete it yourself if you are sure it is yours to delete."],
        )
    writes.check_no_mounts(final)  # before the rename: a mount point inside stays where it was
    try:
        with shielded():
            trees.replace(final, removing_of(final))
    except OSError as error:
        raise ImpossibleError(
            "target-not-writable",
            f"Cannot remove {final}: {error.strerror} ({final.parent} is not writable); nothing was removed.",
            [f"Make {final.parent} writable, then run the same `remove` again."],
        ) from None
    try:
        finish_removal(removing_of(final), final, progress)
    except OSError as error:
        raise OperationError(
            "remove-failed",
            f"Removing {final} stopped: {error}. What is left is in {removing_of(final)}.",
            ["Run the same `remove` again: it continues."],
        ) from None
    return Removal(str(final), recovered)
