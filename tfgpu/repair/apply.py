"""Carrying out a repair as a transaction, and undoing it exactly.

Before anything changes, the journal (``<env>/etc/tfgpu/repair.json``) records the state of
every file the repair will write (its bytes and mode, or its link target, or that it did not
exist) and the distributions the env holds; as the repair goes it records the packages it added or
changed. ``--undo`` puts every file back byte for byte, uninstalls what was added, reinstalls what
was changed at its old version, and deletes the journal and the directories the repair made.

The env's lock (``tfgpu.envs.txn.TargetLock``) is held throughout. A failure or an interrupt rolls
back at once; a journal still marked ``applying`` (a SIGKILLed repair) is rolled back by the next
``repair`` or ``repair --undo`` before anything else. A repaired env gets no ``tfgpu-env.json``:
the tool never claims to own an env it did not build, so ``remove`` still refuses it.
"""

from __future__ import annotations

import base64
import json
import os
import re
from pathlib import Path

from tfgpu import untrusted
from tfgpu.errors import ImpossibleError
from tfgpu.proc import shielded
from tfgpu.repair.plan import RepairPlan, differing_files, state_of
from tfgpu.repair.survey import JOURNAL, EnvSurvey, conda_packages, distributions

FORMAT = 1
HOOK_CACHES = ("__pycache__/_tfgpu_cuda_hook.*.pyc",)


def _encode(state) -> dict | None:
    if state is None:
        return None
    if state[0] == "link":
        return {"kind": "link", "target": state[1]}
    return {"kind": "file", "data": base64.b64encode(state[1]).decode("ascii"), "mode": state[2]}


def _restore(path: Path, before: dict | None) -> None:
    if path.is_symlink() or path.exists():
        path.unlink()
    if before is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    if before["kind"] == "link":
        path.symlink_to(before["target"])
    else:
        path.write_bytes(base64.b64decode(before["data"]))
        os.chmod(path, before["mode"])


def _write_journal(prefix: Path, journal: dict) -> None:
    path = inside(prefix, str(JOURNAL))
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    partial.write_text(json.dumps(journal, indent=1) + "\n", encoding="utf-8")
    os.replace(partial, path)


def _new_dirs(prefix: Path, paths) -> list[str]:
    """Directories a write to ``paths`` creates (deepest last), env-relative."""
    made = []
    for relative in [str(JOURNAL), *paths]:
        for parent in reversed(Path(relative).parents):
            if str(parent) != "." and not (prefix / parent).exists() and str(parent) not in made:
                made.append(str(parent))
    return made


def apply_repair(plan: RepairPlan, installer, reporter) -> dict:
    """Do ``plan`` (under the env's lock); returns what changed. ``installer`` adds/changes packages
    (``tfgpu.repair.packages``); on any failure everything done so far is undone."""
    survey = plan.survey
    prefix = survey.prefix
    journal = survey.journal or {"tool": "tfgpu-install", "format": FORMAT, "prefix": os.path.realpath(prefix),
                                 "tensorflow": survey.tf_version, "manager": plan.manager, "files": {},
                                 "dirs": [], "added": [], "changed": [], "before": dict(survey.distributions),
                                 "conda_before": dict(survey.conda), "conda_replaced": {}}
    if plan.manager == "conda":
        # A replaced conda package's record, kept before anything changes: undo reinstalls from it.
        for change in plan.change:
            if change.name not in journal["conda_replaced"]:
                record = _conda_meta(prefix, change.name)
                if record is not None:
                    journal["conda_replaced"][change.name] = record
    journal["state"] = "applying"
    planned = set(plan.files)
    # The files are rendered again after the packages are in (the layout follows them); any path the
    # activation set-up can write is recorded now, before anything changes.
    for relative in sorted(planned | _activation_paths(survey, plan.manager)):
        if relative not in journal["files"]:
            journal["files"][relative] = _encode(state_of(inside(prefix, relative)))
    journal["dirs"] = [*journal["dirs"], *(d for d in _new_dirs(prefix, journal["files"]) if d not in journal["dirs"])]
    _write_journal(prefix, journal)
    try:
        before = distributions(survey.site_packages)
        installer.install(plan, reporter)
        after = distributions(survey.site_packages)
        journal["added"] += [{"name": n, "version": v} for n, v in sorted(after.items()) if n not in before]
        journal["changed"] += [{"name": n, "from": before[n], "to": v} for n, v in sorted(after.items())
                               if n in before and before[n] != v]
        if plan.manager == "conda":
            now = conda_packages(prefix)
            journal["conda_added"] = sorted(set(now) - set(journal["conda_before"]))
            journal["added"] += [{"name": n, "version": now[n], "conda": True} for n in journal["conda_added"]
                                 if not any(p["name"] == n for p in journal["added"])]
            journal["changed"] += [{"name": n, "from": journal["conda_before"][n], "to": v, "conda": True}
                                   for n, v in sorted(now.items())
                                   if n in journal["conda_before"] and journal["conda_before"][n] != v]
        _write_journal(prefix, journal)
        written = _write_files(survey, plan.manager, journal)
        journal["state"] = "done"
        _write_journal(prefix, journal)
    except BaseException:
        with shielded():
            undo_journal(prefix, journal, installer, reporter)
        raise
    return {"added": journal["added"], "changed": journal["changed"], "files": written,
            "journal": str(prefix / JOURNAL)}


def _activation_paths(survey: EnvSurvey, manager: str) -> set[str]:
    import tempfile

    from tfgpu.repair.plan import render_activation

    with tempfile.TemporaryDirectory(prefix="tfgpu-repair-") as tmp:
        return set(render_activation(survey, manager, Path(tmp)))


def _write_files(survey: EnvSurvey, manager: str, journal: dict) -> list[str]:
    """Render the activation against the env as it is now (packages in) and write what differs;
    a path the first rendering did not name (``bin/ptxas`` once nvcc is in) is journalled first."""
    from tfgpu.repair.survey import survey as read_again

    fresh = read_again(survey.prefix)
    changed = differing_files(fresh, manager)
    new = [relative for relative in changed if relative not in journal["files"]]
    if new:
        for relative in new:
            journal["files"][relative] = _encode(state_of(inside(survey.prefix, relative)))
        journal["dirs"] += [d for d in _new_dirs(survey.prefix, new) if d not in journal["dirs"]]
        _write_journal(survey.prefix, journal)
    for relative, state in sorted(changed.items()):
        path = inside(survey.prefix, relative)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink() or path.exists():
            path.unlink()
        if state[0] == "link":
            path.symlink_to(state[1])
        else:
            path.write_bytes(state[1])
            os.chmod(path, state[2])
    return sorted(changed)


def _conda_meta(prefix: Path, name: str) -> str | None:
    from tfgpu.repair.plan import _prefix_record

    record = _prefix_record(prefix, name)
    if record is None:
        return None
    path = prefix / "conda-meta" / f"{name}-{record.version}-{record.build}.json"
    return untrusted.text_or_none(path, untrusted.ENV_FILE)


def _package_changes(prefix: Path, journal: dict) -> tuple[list[str], dict]:
    """(added, changed) packages to undo. A finished repair recorded them; an interrupted one is
    measured against what the env held before it started (anything since then is the repair's)."""
    if journal.get("manager") == "conda":
        before = journal.get("conda_before", {})
        now = conda_packages(prefix)
        if journal.get("state") == "done":
            added = list(journal.get("conda_added", []))
        else:
            added = sorted(set(now) - set(before))
        replaced = journal.get("conda_replaced", {})
        return added, {n: t for n, t in replaced.items() if now.get(n) != before.get(n)}
    site = next(iter(sorted(prefix.glob("lib/python3*/site-packages"))), None)
    now = distributions(site) if site is not None else {}
    before = journal.get("before", {})
    if journal.get("state") == "done":
        return ([p["name"] for p in journal.get("added", [])],
                {p["name"]: p["from"] for p in journal.get("changed", [])})
    return (sorted(set(now) - set(before)),
            {n: v for n, v in before.items() if n in now and now[n] != v or n not in now})


def undo_journal(prefix: Path, journal: dict, installer, reporter) -> dict:
    """Put the env back as the journal found it: packages first, then files, then directories."""
    added, changed = _package_changes(prefix, journal)
    installer.undo(added, changed, reporter)
    for relative, before in sorted(journal.get("files", {}).items()):
        _restore(inside(prefix, relative), before)
    site = next(iter(sorted(prefix.glob("lib/python3*/site-packages"))), None)
    for pattern in HOOK_CACHES if site is not None else ():
        for cached in site.glob(pattern):
            cached.unlink(missing_ok=True)
    (prefix / JOURNAL).unlink(missing_ok=True)
    for directory in sorted(journal.get("dirs", []), key=lambda d: d.count("/"), reverse=True):
        path = inside(prefix, directory)
        if path.is_dir() and not path.is_symlink() and not any(path.iterdir()):
            path.rmdir()
    return {"removed": added, "restored": sorted(changed), "files": sorted(journal.get("files", {}))}


NAME = re.compile(r"^[A-Za-z0-9_](?:[A-Za-z0-9._-]*[A-Za-z0-9_])?$")
"""A PEP 508 or conda package name (conda-forge's ``_libgcc_mutex`` starts with "_"); never "-": an option."""


def check_journal(prefix: Path, journal: dict | None) -> None:
    """A journal must be this tool's, for this very env, and hold only names and paths (never an
    option, a path outside the env, or a version that is not one) before anything acts on it."""
    if journal is None:
        return
    if journal.get("unreadable"):
        raise ImpossibleError("repair-journal-foreign", f"{prefix / JOURNAL} cannot be read (not a file, damaged, or "
                              "far larger than a journal); nothing was done.",
                              [f"Look at it, and delete it if the env is as you want it: rm {prefix / JOURNAL}"])
    if (journal.get("tool") != "tfgpu-install" or journal.get("format") != FORMAT
            or journal.get("prefix") != os.path.realpath(prefix) or not isinstance(journal.get("files"), dict)):
        raise ImpossibleError("repair-journal-foreign", f"{prefix / JOURNAL} was not written by a repair of this env "
                              "(another tool, another version, or an env copied from elsewhere); nothing was done.",
                              [f"Look at it, and delete it if the env is as you want it: rm {prefix / JOURNAL}"])
    problem = _journal_problem(journal)
    if problem:
        raise ImpossibleError("repair-journal-foreign", f"{prefix / JOURNAL} {problem}; nothing was done.",
                              [f"Look at it, and delete it if the env is as you want it: rm {prefix / JOURNAL}"])


SHAPES = {"files": dict, "dirs": list, "added": list, "changed": list, "before": dict, "conda_before": dict,
          "conda_added": list, "conda_replaced": dict, "manager": str, "state": str}


def _journal_problem(journal: dict) -> str | None:
    for key, kind in SHAPES.items():
        if key in journal and not isinstance(journal[key], kind):
            return f"holds {key!r} of the wrong kind"
    if journal.get("manager", "pip") not in ("pip", "conda"):
        return "names a package manager this tool does not use"
    if not all(isinstance(text, str) for text in journal.get("conda_replaced", {}).values()):
        return "holds a conda record that is not text"
    for relative in [*journal["files"], *journal.get("dirs", [])]:
        if not isinstance(relative, str) or not _relative_ok(relative):
            return f"names {relative!r}, outside the env"
    for state in journal["files"].values():
        if state is not None and not (isinstance(state, dict) and (
                (state.get("kind") == "link" and isinstance(state.get("target"), str)) or
                (state.get("kind") == "file" and isinstance(state.get("data"), str) and
                 isinstance(state.get("mode"), int) and 0 <= state["mode"] <= 0o777))):
            return "holds a file state this tool does not write"
    versions = [*journal.get("before", {}).items(), *journal.get("conda_before", {}).items(),
                *((p.get("name"), p.get("from")) for p in journal.get("changed", []) if isinstance(p, dict)),
                *((p.get("name"), p.get("version")) for p in journal.get("added", []) if isinstance(p, dict))]
    for name, version in versions:
        if not (isinstance(name, str) and NAME.match(name) and isinstance(version, str) and VERSION.match(version)):
            return f"names a package {name!r} {version!r} that is not a package name and version"
    for name in [*journal.get("conda_added", []), *journal.get("conda_replaced", {})]:
        if not (isinstance(name, str) and NAME.match(name)):
            return f"names a package {name!r} that is not a package name"
    return None


VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.+!_-]*$")


def _relative_ok(relative: str) -> bool:
    parts = Path(relative).parts
    return bool(parts) and not relative.startswith("/") and ".." not in parts and "\0" not in relative


def inside(prefix: Path, relative: str) -> Path:
    """``prefix / relative``, refused unless its directory really is inside the env (a directory on
    the way that is a link out of it would carry a write elsewhere)."""
    path = prefix / relative
    real_parent, real_prefix = os.path.realpath(path.parent), os.path.realpath(prefix)
    if not _relative_ok(relative) or os.path.commonpath([real_parent, real_prefix]) != real_prefix:
        raise ImpossibleError("repair-path-outside", f"{path} leads outside {prefix} (through a symbolic link); the "
                              "repair writes only inside the env, so it stopped.",
                              [f"Look at what links out of the env: ls -l {path.parent}"])
    return path
