"""The repair journal (``<env>/etc/tfgpu/repair.json``): its shape, the check every run makes
before acting on one, writing it (through the env-write door), and setting aside one the tool
cannot apply.

A journal is data another process may have written: before anything acts on it, it must be this
tool's, for this very env, and hold only names, versions and env-relative paths. One that fails
the check, or cannot be read at all, is never deleted by hand: ``repair --undo --forget-journal``
sets it aside (renamed beside itself, kept for a person to read) under the env's lock.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
from pathlib import Path

from tfgpu.envs import writes
from tfgpu.errors import ImpossibleError
from tfgpu.repair.survey import JOURNAL

FORMAT = 1

NAME = re.compile(r"^[A-Za-z0-9_](?:[A-Za-z0-9._-]*[A-Za-z0-9_])?$")
"""A PEP 508 or conda package name (conda-forge's ``_libgcc_mutex`` starts with "_"); never "-": an option."""
VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.+!_-]*$")
DIGEST = re.compile(r"^[0-9a-f]{64}$")

SHAPES = {
    "files": dict,
    "dirs": list,
    "added": list,
    "changed": list,
    "before": dict,
    "conda_before": dict,
    "conda_added": list,
    "conda_replaced": dict,
    "manager": str,
    "state": str,
    "intended": list,
    "written": dict,
    "listing": dict,
}


def write_journal(prefix: Path, journal: dict) -> None:
    writes.put_text(writes.inside(prefix, str(JOURNAL)), json.dumps(journal, indent=1) + "\n", root=prefix)


def _forward(prefix: Path) -> list[str]:
    return [
        f"If the env is as you want it, set the journal aside: `tfgpu-install repair --undo --forget-journal "
        f"--prefix {prefix}` (it is kept beside, renamed; nothing else changes)."
    ]


def check_journal(prefix: Path, journal: dict | None) -> None:
    """A journal must be this tool's, for this very env, and hold only names and paths (never an
    option, a path outside the env, or a version that is not one) before anything acts on it."""
    if journal is None:
        return
    if journal.get("unreadable"):
        raise _foreign(prefix, "cannot be read (not a file, damaged, or far larger than a journal)")
    if (
        journal.get("tool") != "tfgpu-install"
        or journal.get("format") != FORMAT
        or journal.get("prefix") != os.path.realpath(prefix)
        or not isinstance(journal.get("files"), dict)
    ):
        raise _foreign(
            prefix,
            "was not written by a repair of this env (another tool, another version, or an env copied from elsewhere)",
        )
    problem = _journal_problem(journal)
    if problem:
        raise _foreign(prefix, problem)


def _foreign(prefix: Path, why: str) -> ImpossibleError:
    """``repair-journal-foreign``: the journal ``why`` (it is not one this tool may act on)."""
    return ImpossibleError("repair-journal-foreign", f"{prefix / JOURNAL} {why}; nothing was done.", _forward(prefix))


def forget(prefix: Path) -> str:
    """Set the journal aside (call with the env's lock held); returns where it went."""
    path = writes.inside(prefix, str(JOURNAL))
    # The second is only for a person reading the names; the random part keeps two set aside in one
    # second apart, and the move never replaces (a name taken anyway stops it, losing nothing).
    aside = path.with_name(f"repair.json.forgotten-{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(4)}")
    writes.move(path, aside)
    return str(aside)


def _journal_problem(journal: dict) -> str | None:
    for key, kind in SHAPES.items():
        if key in journal and not isinstance(journal[key], kind):
            return f"holds {key!r} of the wrong kind"
    # Undo restores only the files whose digests the repair wrote down, and takes out only packages
    # it intended or recorded: a journal without those records (none of this format lacks them)
    # would make it act on anything it names.
    missing = [key for key in ("written", "intended", "added", "before") if key not in journal]
    if missing:
        return f"lacks {missing[0]!r}, which every journal of this format holds"
    if journal.get("manager", "pip") not in ("pip", "conda"):
        return "names a package manager this tool does not use"
    if not all(isinstance(text, str) for text in journal.get("conda_replaced", {}).values()):
        return "holds a conda record that is not text"
    for relative in [*journal["files"], *journal.get("dirs", []), *journal.get("written", {})]:
        if not isinstance(relative, str) or not _relative_ok(relative):
            return f"names {relative!r}, outside the env"
    problem = _listing_problem(journal.get("listing"))
    if problem:
        return problem
    if not all(isinstance(d, str) and DIGEST.match(d) for d in journal.get("written", {}).values()):
        return "holds a file digest that is not one"
    for state in journal["files"].values():
        if state is not None and not (
            isinstance(state, dict)
            and (
                (state.get("kind") == "link" and isinstance(state.get("target"), str))
                or (
                    state.get("kind") == "file"
                    and isinstance(state.get("data"), str)
                    and isinstance(state.get("mode"), int)
                    and 0 <= state["mode"] <= 0o777
                )
            )
        ):
            return "holds a file state this tool does not write"
    rows = [*journal.get("changed", []), *journal.get("added", []), *journal.get("intended", [])]
    if not all(isinstance(p, dict) for p in rows):
        return "holds a package entry that is not one"
    if not all(
        p.get("conda") is True or (isinstance(p.get("record"), str) and DIGEST.match(p["record"]))
        for p in journal.get("added", [])
    ):
        return "holds a package the repair added without the digest of its RECORD"
    return _contradiction(journal)


def _listing_problem(listing: dict | None) -> str | None:
    """The listing of uv's areas (``tfgpu.repair.listing``): a time and env-relative paths, nothing else."""
    if listing is None:
        return None
    paths = listing.get("paths")
    if not isinstance(listing.get("taken_ns"), int) or not isinstance(paths, dict):
        return "holds a listing of the env this tool does not write"
    for relative, kind in paths.items():
        if not (isinstance(kind, str) and _relative_ok(relative)):
            return f"lists {relative!r}, outside the env"
    return None


def _contradiction(journal: dict) -> str | None:
    """What a repair's own journal never holds: a package both there before and added by it, a file
    digest for a path whose earlier state it did not record."""
    pip_added = {p.get("name") for p in journal.get("added", []) if not p.get("conda")}
    conda_added = {
        *journal.get("conda_added", []),
        *(p.get("name") for p in journal.get("added", []) if p.get("conda")),
    }
    both = sorted((pip_added & set(journal.get("before", {}))) | (conda_added & set(journal.get("conda_before", {}))))
    if both:
        return f"lists {both[0]!r} both as there before the repair and as added by it"
    unrecorded = sorted(set(journal.get("written", {})) - set(journal["files"]))
    if unrecorded:
        return f"holds a digest for {unrecorded[0]!r} without its state before the repair"
    versions = [
        *journal.get("before", {}).items(),
        *journal.get("conda_before", {}).items(),
        *((p.get("name"), p.get("from")) for p in journal.get("changed", [])),
        *((p.get("name"), p.get("version")) for p in [*journal.get("added", []), *journal.get("intended", [])]),
    ]
    for name, version in versions:
        if not (isinstance(name, str) and NAME.match(name) and isinstance(version, str) and VERSION.match(version)):
            return f"names a package {name!r} {version!r} that is not a package name and version"
    for name in [*journal.get("conda_added", []), *journal.get("conda_replaced", {})]:
        if not (isinstance(name, str) and NAME.match(name)):
            return f"names a package {name!r} that is not a package name"
    return None


def _relative_ok(relative: str) -> bool:
    parts = Path(relative).parts
    return bool(parts) and not relative.startswith("/") and ".." not in parts and "\0" not in relative
