"""``tfgpu-install lock --check FILE``: is this lock still what its recorded inputs resolve to?

Three questions, each answered from what the lock itself records (nothing is written):

* **inputs**: this tool, asked for the lock's target again (its TensorFlow, mode, Python and
  platform), would it lock the same requirements? (``inputs_sha256`` of a pip lock, the
  ``content_hash`` of each platform of a conda lock.) A newer tool whose data changed a pin or an
  extra answers no.
* **packages**: re-resolving the recorded inputs against the recorded index or channels, does
  the same set come out, version for version and hash for hash? A new release inside one of
  TensorFlow's ranges, or a re-uploaded file, answers no.
* **wanted**: when a project file (or selectors on the command line) says what the team wants,
  does the lock still match it?

The answer is a :class:`Check`: ``current``, the list of changes, one sentence each, and the
command that takes them (:func:`advise`): the lock's own command again when only the world moved
on, the command that writes the *wanted* lock when the project (or the command line) asks for
another one. ``lock --check`` with no file checks every lock the project file describes
(:class:`ProjectLocks`, put together by ``tfgpu.lock.check_project``).

This module holds what every format shares (the answer, the comparisons, the ``wanted`` question);
each format's folder asks the first two questions of its own file (``pip/check.py``,
``conda/check.py``), and ``tfgpu.lock.check_lock`` picks the one that reads the file given.
"""

from __future__ import annotations

from pathlib import Path

from tfgpu.doors import quoting
from tfgpu.lock.selectors import tf_agrees
from tfgpu.lock.targets import lock_targets
from tfgpu.records import factory, record
from tfgpu.settings import Selectors


@record(frozen=False)
class Check:
    path: Path
    mode: str
    platforms: list[str]
    tensorflow: str
    python: str
    changes: list[dict] = factory(list)
    packages: int = 0
    regenerate: str = ""
    """The command that writes this lock again, for the same target (its header's; not in ``--json``)."""
    advice: str = ""
    """The command that takes the changes (:func:`advise`); empty while current."""

    @property
    def current(self) -> bool:
        return not self.changes

    def add(self, kind: str, text: str, **details) -> None:
        self.changes.append({"kind": kind, "text": text, **details})

    def to_dict(self) -> dict:
        return {
            "lock": str(self.path),
            "mode": self.mode,
            "platforms": self.platforms,
            "tensorflow": self.tensorflow,
            "python": self.python,
            "current": self.current,
            "packages": self.packages,
            "changes": self.changes,
        }


def target_today(
    tensorflow: str,
    mode: str,
    python: str,
    os_name: str,
    platform: str,
    cpu_only: bool,
    tf_source: str | None = None,
    companions: tuple[str, ...] = (),
):
    """The resolution this tool gives the lock's target today (``(platform, resolution, cpu_only)``)."""
    [target] = lock_targets(
        [platform],
        Selectors(tf=tensorflow, mode=mode, python=python, os=os_name, tf_source=tf_source, companions=companions),
        allow_cpu=cpu_only,
        host=None,
    )
    return target


def package_changes(found: Check, platform: str, before: dict, after: dict) -> None:
    """One change per package added, dropped, changed in version or in its files' hashes."""
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name), after.get(name)
        if old is None:
            assert new is not None  # the name is in one of the two
            found.add(
                "package",
                f"{platform}: {name} {new[0]} would be added",
                platform=platform,
                package=name,
                locked=None,
                now=new[0],
            )
        elif new is None:
            found.add(
                "package",
                f"{platform}: {name} {old[0]} would be dropped",
                platform=platform,
                package=name,
                locked=old[0],
                now=None,
            )
        elif old[0] != new[0]:
            found.add(
                "package",
                f"{platform}: {name} {old[0]} -> {new[0]}",
                platform=platform,
                package=name,
                locked=old[0],
                now=new[0],
            )
        elif old[1] != new[1]:
            found.add(
                "package",
                f"{platform}: {name} {old[0]}: its files' sha256 differ now (re-uploaded?)",
                platform=platform,
                package=name,
                locked=old[0],
                now=new[0],
            )


def input_changes(found: Check, old: dict, new: dict) -> None:
    """One change per input the lock was resolved from that this tool would give differently now."""
    for key in sorted(set(old) | set(new)):
        if old.get(key) == new.get(key):
            continue
        if isinstance(old.get(key), list) and isinstance(new.get(key), list):
            added = [item for item in new[key] if item not in old[key]]
            dropped = [item for item in old[key] if item not in new[key]]
            text = "; ".join([*(f"+ {item}" for item in added), *(f"- {item}" for item in dropped)])
        else:
            text = f"{old.get(key)!r} -> {new.get(key)!r}"
        found.add(
            "inputs",
            f"{key} would be locked differently by this tfgpu-install: {text}",
            input=key,
            locked=old.get(key),
            now=new.get(key),
        )


def check_wanted(found: Check, wanted: dict) -> None:
    """Changes where the project (or the command line) now asks for something the lock is not."""
    sources = wanted.get("sources", {})  # a flag given beside a project file is the command line's

    def said(key: str) -> str:
        return sources.get(key, wanted.get("source", "the command line"))

    if wanted.get("tf") and not tf_agrees(wanted["tf"], found.tensorflow):
        found.add("wanted", f"{said('tf')} asks for --tf {wanted['tf']}; the lock has TensorFlow {found.tensorflow}")
    if wanted.get("mode") and wanted["mode"] != found.mode:
        found.add("wanted", f"{said('mode')} asks for --mode {wanted['mode']}; this is a {found.mode} lock")
    if wanted.get("python") and wanted["python"] != found.python:
        found.add(
            "wanted", f"{said('python')} asks for --python {wanted['python']}; the lock is for Python {found.python}"
        )
    if found.mode == "pip" and wanted.get("platform"):
        # A pip lock holds one platform: it is wanted while the project still lists that platform.
        if found.platforms[0] not in wanted["platform"]:
            found.add(
                "wanted",
                f"{said('platform')} asks for platforms {', '.join(wanted['platform'])}; the lock is for {found.platforms[0]}",
            )
    elif wanted.get("platform") and sorted(set(wanted["platform"])) != sorted(set(found.platforms)):
        found.add(
            "wanted",
            f"{said('platform')} asks for platforms {', '.join(wanted['platform'])}; the lock has {', '.join(found.platforms)}",
        )


def advise(found: Check, wanted: dict) -> str:
    """The command that takes ``found``'s changes: while the lock is still the wanted target, its
    own command again (a new release inside a range, new data); once the project or the command
    line asks for another target, the command that writes *that* lock (the old lock's own command
    would write the old target again)."""
    if found.current:
        return ""
    if not any(change["kind"] == "wanted" for change in found.changes) and found.regenerate:
        return found.regenerate
    return new_lock_command(wanted, found)


def new_lock_command(wanted: dict, found: Check | None = None) -> str:
    """``tfgpu-install lock`` for what ``wanted`` asks: from the project file (which supplies every
    value the command line did not: ``wanted["flags"]``), else with the values given on the command
    line and, where none was given, the lock's own; ``-o`` names the lock's file unless ``lock``
    would write that name anyway."""
    argv = ["tfgpu-install", "lock", *wanted.get("flags", ())]
    if found is not None and not wanted.get("project"):
        argv += ["--tf", wanted.get("tf") or found.tensorflow, "--mode", wanted.get("mode") or found.mode]
        argv += ["--python", wanted.get("python") or found.python]
        for platform in wanted.get("platform") or found.platforms:
            argv += ["--platform", platform]
        argv.append("--no-detect")  # as the lock's own command: the machine that runs it plays no part
    output = wanted.get("output") or (_output_of(found, wanted) if found is not None else None)
    return quoting.sh_join([*argv, *(("-o", output) if output else ())])


def _output_of(found: Check, wanted: dict) -> str | None:
    """The ``-o`` that writes ``found``'s file again for ``wanted``, or None for ``lock``'s own name
    (or another mode's lock, which has a name of its own)."""
    if (wanted.get("mode") or found.mode) != found.mode:
        return None
    here = Path.cwd()
    path = found.path
    if found.mode == "conda":
        if path == here / "conda-lock.yml":
            return None
    else:
        platform = found.platforms[0]
        if path == here / f"tfgpu-lock.{platform}.txt":
            return None
        platforms = wanted.get("platform") or found.platforms
        suffix = f".{platform}{path.suffix}"
        if len(platforms) > 1 and path.name.endswith(suffix):  # ``lock`` inserts the platform itself
            path = path.with_name(path.name[: -len(suffix)] + path.suffix)
    try:
        return str(path.relative_to(here))
    except ValueError:
        return str(path)


@record(frozen=False)
class ProjectLocks:
    """``lock --check`` with no file: every lock the project file describes, checked."""

    project: Path
    checks: list[Check]
    missing: list[tuple[str, Path]]
    """(platform, path) of each lock the project describes that is not there (conda: its platforms, joined by commas)."""
    advice: str = ""

    @property
    def current(self) -> bool:
        return not self.missing and all(check.current for check in self.checks)

    def to_dict(self) -> dict:
        return {
            "project": str(self.project),
            "current": self.current,
            "locks": [check.to_dict() for check in self.checks],
            "missing": [{"platform": platform, "lock": str(path)} for platform, path in self.missing],
        }
