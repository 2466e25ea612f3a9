"""Carrying out a repair as a transaction, and undoing exactly what it did.

Before anything changes, the journal (``<env>/etc/tfgpu/repair.json``, ``tfgpu.repair.journal``)
records the state of every file the repair will write (its bytes and mode, or its link target, or
that it did not exist), the distributions the env holds, and the packages the engine is about to
install (``intended``: a dry run of the very same install). As the repair goes it records what it
added (with each distribution's RECORD digest) and changed, and the digest of every file it
writes, before writing it.

``--undo`` takes back only what the repair did and only while it is as the repair left it: a
package the repair added is removed only at the version (and RECORD) it came in with, a file is
restored only while it holds what the repair wrote; anything changed since, and any package the
user installed afterwards (even into a repair that was SIGKILLed half way), is left alone and
reported. Every write and delete goes through the env-write door (``tfgpu.envs.writes``), and
the env is checked for directories that link out of it before an engine touches it.

The env's lock (``tfgpu.envs.txn.TargetLock``) is held throughout by the caller. A failure or an
interrupt rolls back at once; a journal still marked ``applying`` is rolled back by the next
``repair`` or ``repair --undo`` before anything else. A repaired env gets no ``tfgpu-env.json``.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import re
import stat
import tempfile
from pathlib import Path

from tfgpu.doors import untrusted
from tfgpu.envs import writes
from tfgpu.envs.writes import inside
from tfgpu.installers.engine import PackageEngine, Wanted
from tfgpu.installers.stacks import owned_twice, refuse_files_owned_twice
from tfgpu.process.runner import shielded
from tfgpu.repair import listing
from tfgpu.repair.journal import FORMAT, check_journal, write_journal
from tfgpu.repair.plan import RepairPlan, _prefix_record, differing_files, render_activation, state_of
from tfgpu.repair.records import AddedPackage, Applied, ChangedPackage, TakenBack
from tfgpu.repair.survey import JOURNAL, EnvSurvey, canonical, conda_packages, distributions

__all__ = ["FORMAT", "apply_repair", "check_journal", "inside", "undo_journal"]

HOOK_CACHES = ("__pycache__/_tfgpu_cuda_hook.*.pyc",)
RECORD_LIMIT = 64 << 20


def _encode(state) -> dict | None:
    if state is None:
        return None
    if state[0] == "link":
        return {"kind": "link", "target": state[1]}
    return {"kind": "file", "data": base64.b64encode(state[1]).decode("ascii"), "mode": state[2]}


def _decode(before: dict | None):
    if before is None:
        return None
    if before["kind"] == "link":
        return ("link", before["target"])
    return ("file", base64.b64decode(before["data"]), before["mode"])


def digest(state) -> str:
    """One digest for a file state (absent, a link and its target, or bytes and mode)."""
    if state is None:
        return hashlib.sha256(b"absent").hexdigest()
    if state[0] == "link":
        return hashlib.sha256(b"link\0" + os.fsencode(state[1])).hexdigest()
    return hashlib.sha256(b"file\0" + oct(state[2]).encode() + b"\0" + state[1]).hexdigest()


def _file_digest(path: Path) -> str | None:
    try:
        info = path.lstat()
        if not stat.S_ISREG(info.st_mode) or info.st_size > RECORD_LIMIT:
            return None
        return hashlib.sha256(untrusted.read_bytes(path, untrusted.ENV_FILE)).hexdigest()
    except (OSError, untrusted.Unreadable):
        return None


def installed(site: Path | None) -> dict[str, dict]:
    """``{name: {"version", "record"}}``: each distribution with the digest of its RECORD."""
    found: dict[str, dict] = {}
    if site is None:
        return found
    for dist_info in sorted(site.glob("*.dist-info")):
        text = untrusted.text_or_none(dist_info / "METADATA", untrusted.ENV_FILE, errors="replace")
        if text is None:
            continue
        name, version = re.search(r"^Name:\s*(\S+)", text, re.M), re.search(r"^Version:\s*(\S+)", text, re.M)
        if name and version:
            found[canonical(name.group(1))] = {
                "version": version.group(1),
                "record": _file_digest(dist_info / "RECORD"),
            }
    return found


def _half_gone(site: Path | None, name: str, version: str) -> bool:
    """The distribution ``name`` ``version`` in ``site`` lacks a file its RECORD names."""
    for dist_info in sorted(site.glob("*.dist-info")) if site is not None else ():
        stem, _, there = dist_info.name.removesuffix(".dist-info").partition("-")
        if canonical(stem) != name or there != version:
            continue
        text = untrusted.text_or_none(dist_info / "RECORD", untrusted.ENV_FILE, errors="replace")
        rows = csv.reader(io.StringIO(text or ""))
        return text is None or any(row and row[0] and not os.path.lexists(dist_info.parent / row[0]) for row in rows)
    return False


def _new_dirs(prefix: Path, paths) -> list[str]:
    """Directories a write to ``paths`` creates (deepest last), env-relative."""
    made = []
    for relative in [str(JOURNAL), *paths]:
        for parent in reversed(Path(relative).parents):
            if str(parent) != "." and not (prefix / parent).exists() and str(parent) not in made:
                made.append(str(parent))
    return made


def wanted(plan: RepairPlan) -> Wanted:
    """What the engine is asked to install for ``plan``: its packages, with every other
    distribution the env holds kept at its version."""
    site = plan.survey.site_packages if plan.manager != "conda" else None
    return Wanted(
        requirements=tuple(p.wanted for p in [*plan.add, *plan.change]),
        changing=frozenset(p.name for p in plan.change),
        held=tuple(sorted(distributions(site).items())) if site is not None else (),
    )


def apply_repair(plan: RepairPlan, installer: PackageEngine, reporter) -> Applied:
    """Do ``plan`` (under the env's lock); returns what changed. ``installer`` adds/changes packages
    (``tfgpu.installers.engine``); on any failure everything done so far is undone."""
    survey = plan.survey
    prefix = survey.prefix
    writes.check_tree(prefix)  # before the journal, before any engine: a directory linking out stops it here
    journal = survey.journal or {
        "tool": "tfgpu-install",
        "format": FORMAT,
        "prefix": os.path.realpath(prefix),
        "tensorflow": survey.tf_version,
        "manager": plan.manager,
        "files": {},
        "dirs": [],
        "added": [],
        "changed": [],
        "before": dict(survey.distributions),
        "conda_before": dict(survey.conda),
        "conda_replaced": {},
        "intended": [],
        "written": {},
    }
    if plan.manager == "conda":
        # A replaced conda package's record, kept before anything changes: undo reinstalls from it.
        for change in plan.change:
            if change.name not in journal["conda_replaced"]:
                record = _conda_meta(prefix, change.name)
                if record is not None:
                    journal["conda_replaced"][change.name] = record
    journal["state"] = "applying"
    if plan.manager != "conda":
        # Before uv runs: what its areas hold, so a rollback takes out every path it wrote, however
        # far it got (a half .dist-info, a .tmp RECORD, an empty lib directory), not only whole packages.
        journal["listing"] = listing.take(prefix, survey.site_packages)
    planned = set(plan.files)
    # The files are rendered again after the packages are in (the layout follows them); any path the
    # activation set-up can write is recorded now, before anything changes.
    for relative in sorted(planned | _activation_paths(survey, plan.manager)):
        if relative not in journal["files"]:
            journal["files"][relative] = _encode(state_of(inside(prefix, relative)))
    site_cache = f"{survey.site_relative}/__pycache__"
    extra_dirs = [site_cache] if not (prefix / site_cache).exists() else []  # the load hook's bytecode lands there
    journal["dirs"] = [
        *journal["dirs"],
        *(d for d in [*_new_dirs(prefix, journal["files"]), *extra_dirs] if d not in journal["dirs"]),
    ]
    try:
        write_journal(prefix, journal)  # inside: a full disk here still takes back the directories it made
        before = installed(survey.site_packages)
        journal.setdefault("intended", [])
        request = wanted(plan)
        intended = [p.to_dict() for p in installer.intended(request, reporter)]
        journal["intended"] += [p for p in intended if p not in journal["intended"]]
        write_journal(prefix, journal)
        twice = owned_twice(survey.site_packages) if survey.site_packages else frozenset()
        dirs_before = _nvidia_dirs(prefix, survey.site_packages)
        installer.install(request, reporter)
        if survey.site_packages:  # a CUDA wheel installed over another stack's file: rolled back below
            refuse_files_owned_twice(survey.site_packages, str(prefix), twice)
        after = installed(survey.site_packages)
        # The journal keeps every repair since the env was first repaired (undo goes back before the
        # first); the report says what this one did.
        added_now = [{"name": n, **v} for n, v in sorted(after.items()) if n not in before]
        changed_now = [
            {"name": n, "from": before[n]["version"], "to": v["version"]}
            for n, v in sorted(after.items())
            if n in before and before[n]["version"] != v["version"]
        ]
        journal.setdefault("added", [])
        journal["added"] += added_now
        journal["changed"] += changed_now
        if plan.manager == "conda":
            now = conda_packages(prefix)
            journal["conda_added"] = sorted(set(now) - set(journal["conda_before"]))
            journal["added"] += [
                {"name": n, "version": now[n], "conda": True}
                for n in journal["conda_added"]
                if not any(p["name"] == n for p in journal["added"])
            ]
            journal["changed"] += [
                {"name": n, "from": journal["conda_before"][n], "to": v, "conda": True}
                for n, v in sorted(now.items())
                if n in journal["conda_before"] and journal["conda_before"][n] != v
            ]
            earlier = dict(survey.conda)  # before this repair
            added_now += [
                {"name": n, "version": now[n], "conda": True}
                for n in sorted(set(now) - set(earlier))
                if not any(p["name"] == n for p in added_now)
            ]
            changed_now += [
                {"name": n, "from": earlier[n], "to": v, "conda": True}
                for n, v in sorted(now.items())
                if n in earlier and earlier[n] != v
            ]
        write_journal(prefix, journal)
        written = _write_files(survey, plan.manager, journal, dirs_before)
        journal["state"] = "done"
        write_journal(prefix, journal)
    except BaseException as error:
        with shielded():
            undone = undo_journal(prefix, journal, installer, reporter)
        if isinstance(error, KeyboardInterrupt):  # the CLI says this instead of a general line
            error.__dict__["outcome"] = rolled_back(prefix, undone)
        raise
    return Applied(
        added=tuple(AddedPackage.of(row) for row in added_now),
        changed=tuple(ChangedPackage.of(row) for row in changed_now),
        files=tuple(written),
        journal=str(prefix / JOURNAL),
    )


def rolled_back(prefix: Path, undone: TakenBack) -> str:
    """What an interrupted repair's rollback left, in a sentence: the env as it was, or what is not."""
    left = undone.left
    if not left:
        return f"the repair was rolled back; {prefix} is as it was before it"
    shown = "; ".join(left[:5]) + (f"; and {len(left) - 5} more" if len(left) > 5 else "")
    return (
        f"the repair was rolled back, but not all of {prefix} is as it was before it: {shown}. "
        "Those were changed by something else than this repair, or could not be put back"
    )


def _activation_paths(survey: EnvSurvey, manager: str) -> set[str]:
    with tempfile.TemporaryDirectory(prefix="tfgpu-repair-") as tmp:
        return set(render_activation(survey, manager, Path(tmp)))


def _nvidia_dirs(prefix: Path, site: Path | None) -> set[str] | None:
    """The directories of the env's ``nvidia/`` tree (env-relative), before the packages go in."""
    if site is None or not (site / "nvidia").is_dir():
        return set() if site is not None else None
    found = {os.path.relpath(site / "nvidia", prefix)}
    for directory, names, _ in os.walk(site / "nvidia"):
        found.update(os.path.relpath(os.path.join(directory, name), prefix) for name in names)
    return found


def _made_by_install(prefix: Path, site: Path | None, paths, dirs_before: set[str] | None) -> list[str]:
    """The directories holding ``paths`` that the package install made (cuBLAS 12's ``nvidia/cublas/lib``,
    where the link for ``libnvrtc.so.12`` goes): the repair's to take out again, since the link it
    wrote there keeps them from going when undo uninstalls the package."""
    if dirs_before is None or site is None:
        return []
    nvidia = os.path.relpath(site / "nvidia", prefix)
    made = []
    for relative in paths:
        for parent in reversed(Path(relative).parents):
            name = str(parent)
            if (name == nvidia or name.startswith(nvidia + "/")) and name not in dirs_before and name not in made:
                made.append(name)
    return made


def _write_files(survey: EnvSurvey, manager: str, journal: dict, dirs_before: set[str] | None = None) -> list[str]:
    """Render the activation against the env as it is now (packages in) and write what differs;
    a path the first rendering did not name (``bin/ptxas`` once nvcc is in) is journalled first,
    and every file's new digest is journalled before it is written."""
    # Looked up at each call: tests stand a fake in for survey().
    from tfgpu.repair.survey import survey as read_again

    prefix = survey.prefix
    fresh = read_again(prefix)
    changed = differing_files(fresh, manager)
    for relative in changed:
        if relative not in journal["files"]:
            journal["files"][relative] = _encode(state_of(inside(prefix, relative)))
    journal["dirs"] += [d for d in _new_dirs(prefix, changed) if d not in journal["dirs"]]
    made = _made_by_install(prefix, survey.site_packages, changed, dirs_before)
    journal["dirs"] += [d for d in made if d not in journal["dirs"]]
    journal.setdefault("written", {}).update({relative: digest(state) for relative, state in changed.items()})
    write_journal(prefix, journal)
    for relative, state in sorted(changed.items()):
        writes.put_state(inside(prefix, relative), state, root=prefix)
    return sorted(changed)


def _conda_meta(prefix: Path, name: str) -> str | None:
    record = _prefix_record(prefix, name)
    if record is None:
        return None
    path = prefix / "conda-meta" / f"{name}-{record.version}-{record.build}.json"
    return untrusted.text_or_none(path, untrusted.ENV_FILE)


def _package_changes(prefix: Path, journal: dict) -> tuple[list[str], dict, list[str]]:
    """(added, changed, left): the packages to take out and to put back, and what is left alone
    because it is not as the repair left it (or the repair did not install it)."""
    done = journal.get("state") == "done"
    intended = {(p.get("name"), p.get("version")) for p in journal.get("intended", [])}
    intended_names = {name for name, _ in intended}
    left: list[str] = []
    if journal.get("manager") == "conda":
        before = journal.get("conda_before", {})
        held = conda_packages(prefix)
        if done:
            versions = {p["name"]: p.get("version") for p in journal.get("added", []) if p.get("conda")}
            candidates = {n: versions.get(n) for n in journal.get("conda_added", [])}
        else:
            candidates = {n: None for n in sorted(set(held) - set(before))}
        added = []
        for name, version in sorted(candidates.items()):
            ours = version is not None or (name, held.get(name)) in intended
            if name in held and ours and (version is None or held[name] == version):
                added.append(name)
            elif name in held:
                left.append(f"{name} {held[name]} (not as the repair left it, or not the repair's)")
        replaced = {n: t for n, t in journal.get("conda_replaced", {}).items() if held.get(n) != before.get(n)}
        return added, replaced, left
    site = next(iter(sorted(prefix.glob("lib/python3*/site-packages"))), None)
    now = installed(site)
    before = journal.get("before", {})
    broken: set[str] = set()
    if done:
        candidates = {p["name"]: p for p in journal.get("added", []) if not p.get("conda")}
        changes = {p["name"]: (p["from"], p.get("to")) for p in journal.get("changed", []) if not p.get("conda")}
    else:
        candidates = {n: None for n in sorted(set(now) - set(before))}
        changes = {n: (v, None) for n, v in before.items() if n not in now or now[n]["version"] != v}
        # A kill while uv takes the old version out leaves its .dist-info naming it, its files half
        # gone: the version alone would call it untouched, and nothing would put it back.
        broken = {n for n in intended_names & set(before) if n not in changes and _half_gone(site, n, before[n])}
        changes |= {n: (before[n], None) for n in broken}
    added = []
    for name, entry in candidates.items():
        here = now.get(name)
        if here is None:
            continue
        if entry is not None:
            ours = here["version"] == entry.get("version") and entry.get("record") == here["record"]
        else:
            ours = (name, here["version"]) in intended
        if ours:
            added.append(name)
        else:
            left.append(f"{name} {here['version']} (installed or changed after the repair, not by it)")
    changed = {}
    for name, (old, to) in sorted(changes.items()):
        here = now.get(name, {}).get("version")
        ours = (here == to) if to is not None else name in intended_names
        if ours and (here != old or name in broken):
            changed[name] = old
        elif here != old:
            left.append(f"{name} {here or '(absent)'} (changed after the repair, not by it; it had {old})")
    return added, changed, left


def undo_journal(prefix: Path, journal: dict, installer: PackageEngine, reporter) -> TakenBack:
    """Put back what the repair did and nothing else: packages first, then files, then directories.

    A repair that did not finish (state ``applying``) is swept against the listing it took before
    uv ran (``tfgpu.repair.listing``): whatever uv had written of its packages goes, whole or half."""
    writes.check_tree(prefix)  # uninstalling through a link out of the env would delete elsewhere
    added, changed, left = _package_changes(prefix, journal)
    site = next(iter(sorted(prefix.glob("lib/python3*/site-packages"))), None)
    listed = journal.get("listing") if journal.get("manager", "pip") != "conda" else None
    interrupted = journal.get("state") != "done" and listed is not None
    ours: set[str] = set()
    if interrupted and listed is not None:
        ours = _this_install(prefix, site, journal, listed, added)
        added = [name for name in added if name not in ours]  # the sweep takes these, half or whole
    installer.undo(added, changed, reporter)
    written = journal.get("written", {})  # check_journal: every journal acted on holds it
    for relative, before in sorted(journal.get("files", {}).items()):
        path = inside(prefix, relative)
        original, now = _decode(before), state_of(path)
        if now == original:
            continue
        if written.get(relative) == digest(now):
            writes.put_state(path, original, root=prefix)
        else:
            left.append(f"{relative} (changed since the repair wrote it)")
    for pattern in HOOK_CACHES:
        for cached in site.glob(pattern) if site is not None else ():
            writes.delete(cached, root=prefix)
    swept: list[str] = []
    if interrupted and listed is not None:
        names = ours | ({p.get("name") for p in journal.get("intended", [])} - set(journal.get("before", {})))
        wanted = {
            (canonical(str(p.get("name"))), str(p.get("version")))
            for p in journal.get("intended", [])
            if isinstance(p, dict)
        }
        result = listing.sweep(
            prefix,
            site,
            listed,
            names,
            set(journal.get("files", {})),
            cache=installer.cache,
            wanted=wanted,
        )
        swept = list(result.removed)
        if swept:
            reporter.note(f"took out {len(swept)} paths the interrupted install had written")
        left += [f"{relative} (there before the repair, gone now)" for relative in result.missing]
        left += [
            f"{relative} (appeared since the repair began; no package it installed holds it: kept)"
            for relative in result.spared
        ]
    elif listed is not None:
        swept = listing.empty_dirs(prefix, site, listed)
    writes.delete(inside(prefix, str(JOURNAL)), root=prefix)
    for directory in sorted(journal.get("dirs", []), key=lambda d: d.count("/"), reverse=True):
        writes.remove_empty_dir(inside(prefix, directory))
    for line in left:
        reporter.note(f"left as it is: {line}")
    return TakenBack(
        removed=tuple(sorted({*added, *ours})),
        restored=tuple(sorted(changed)),
        files=tuple(sorted(journal.get("files", {}))),
        swept=tuple(swept),
        left=tuple(left),
    )


def _this_install(prefix: Path, site: Path | None, journal: dict, listed: dict, added: list[str]) -> set[str]:
    """The packages the interrupted install itself wrote (a ``.dist-info`` that was not in the
    listing, named as one it intended or added, at a version the env did not hold before)."""
    if site is None:
        return set()
    before = journal.get("before", {})
    wanted = {p.get("name") for p in journal.get("intended", [])} | set(added)
    prefix_listed = listed.get("paths", {})
    ours = set()
    for dist_info in site.glob("*.dist-info"):
        relative = os.path.relpath(dist_info, prefix)
        stem = dist_info.name.removesuffix(".dist-info")
        name, _, version = stem.partition("-")
        name = canonical(name)
        if relative not in prefix_listed and name in wanted and before.get(name) != version:
            ours.add(name)
    return ours
