"""What each command's operation hands back, typed: the value a script reads as JSON and a person
reads as text.

Every result has ``to_dict()`` (the JSON document of ``--json``: a contract, held by the tests
that read those documents) and ``exit_code``. ``tfgpu.cli.output.show`` renders a result by its
type, in one place; operations never print and the command line never assembles a document.
"""

from __future__ import annotations

from tfgpu.records import factory, record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from tfgpu.cache import CacheInfo
    from tfgpu.cache.cleaning import Tidied
    from tfgpu.datasource.update import UpdateReport
    from tfgpu.resolver.overlay import DataStatus


@record
class Result:
    """The base: a result succeeds unless it says otherwise."""

    @property
    def exit_code(self) -> int:
        return 0

    def to_dict(self) -> dict:  # pragma: no cover - each result defines its document
        raise NotImplementedError


@record
class Planned(Result):
    """``plan``: the resolution, and what detection found (None with --no-detect)."""

    resolution: Any
    host: Any = None

    def to_dict(self) -> dict:
        return self.resolution.to_dict() | {"host": self.host.to_dict() if self.host else None}


@record
class Matrix(Result):
    """``matrix``: one row per release, and how old the data is."""

    rows: list
    data: DataStatus

    def to_dict(self) -> dict:
        return {"releases": self.rows, "data": self.data.to_dict()}


@record
class DataUpdate(Result):
    """``update-data``: what was fetched and written (``tfgpu.datasource.update``)."""

    report: UpdateReport

    @property
    def summary(self) -> str:
        return self.report.summary

    def to_dict(self) -> dict:
        return self.report.to_dict()


@record
class Created(Result):
    """``create``: the env built (or, with --dry-run, the steps that would build it)."""

    outcome: Any  # tfgpu.ops.CreateResult
    resolution: Any
    host: Any = None
    dry_run: bool = False
    lock: dict = factory(dict)  # with --from-lock/--from-bundle: the lock, its digest, the bundle
    unchecked: dict | None = None  # why the GPU was not checked (``tfgpu.cli.endings``), None when it was
    naming: str = ""  # how run/shell/activate name this env: ``--name N`` or ``--prefix P`` (``tfgpu.envs.which``)

    @property
    def verified(self) -> bool:
        """Whether the GPU check ran here and passed."""
        return bool(self.outcome.verify and self.outcome.verify.get("ok"))

    @property
    def prefix(self) -> str:
        return str(self.outcome.location.prefix)

    def to_dict(self) -> dict:
        if self.dry_run:
            return (
                self.resolution.to_dict()
                | self.lock
                | {"dry_run": True, "prefix": self.prefix, "steps": [step.to_dict() for step in self.outcome.steps]}
                | ({"notes": list(self.outcome.notes)} if self.outcome.notes else {})
            )
        done = self.outcome
        return {
            "prefix": self.prefix,
            "tensorflow": self.resolution.tensorflow,
            "python": self.resolution.python,
            "installed": done.outcome.installed,
            "log": str(done.log_path) if done.log_path else None,
            "notes": done.notes,
            "verify": done.verify,
            "verified": self.verified,
            "not_verified": self.unchecked,
        } | self.lock


@record
class Removed(Result):
    """``remove``: the env deleted, and what an interrupted earlier remove left that was finished."""

    removed: str
    recovered: list
    which_env: dict | None = None  # how --name/--prefix was resolved (``tfgpu.envs.which``)

    def to_dict(self) -> dict:
        return {"removed": self.removed, "recovered": self.recovered} | (
            {"which_env": self.which_env} if self.which_env else {}
        )


@record
class LockChecked(Result):
    """``lock --check``: 0 when the lock is what its recorded inputs resolve to today, else 1."""

    check: Any  # tfgpu.lock.check.Check

    @property
    def exit_code(self) -> int:
        return 0 if self.check.current else 1

    def to_dict(self) -> dict:
        return self.check.to_dict()


@record
class Exported(Result):
    """``script``: the provisioning artefact, written to ``output`` or meant for stdout."""

    export: Any  # tfgpu.export.Export
    resolution: Any
    format: str
    output: str | None = None
    written: tuple = ()

    def to_dict(self) -> dict:
        document = self.export.to_dict()
        if self.output:
            return document | {"output": self.output, "written": [str(path) for path in self.written]}
        document["files"] = [
            entry | {"content": item.content} for entry, item in zip(document["files"], self.export.files, strict=True)
        ]
        return document


@record
class LogMatches(Result):
    """``doctor --log``: the known failures a TensorFlow log shows."""

    log: str
    matches: list
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return not any(match.severity == "fail" for match in self.matches)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def to_dict(self) -> dict:
        return {
            "log": self.log,
            "matches": [match.to_dict() for match in self.matches],
            "ok": self.ok,
            "truncated": self.truncated,
        }


@record
class Doctored(Result):
    """``doctor``: the findings about this machine and, when one was named or active, an env."""

    report: Any  # tfgpu.doctor.Report
    which_env: dict | None = None  # the env examined and how it was chosen (``tfgpu.envs.which``)

    @property
    def exit_code(self) -> int:
        return 1 if self.report.failed else 0

    def to_dict(self) -> dict:
        return self.report.to_dict() | ({"which_env": self.which_env} if self.which_env else {})


@record
class Verified(Result):
    """``verify``: the report the env's own Python wrote (a JSON protocol between the tool and the
    env, so a document here as well); ``multiworker`` for ``--workers N``, ``frameworks`` for
    ``--with torch|jax``."""

    report: dict
    multiworker: bool = False
    frameworks: bool = False  # ``--with torch|jax``: each import order's steps
    which_env: dict | None = None  # the env verified and how it was chosen (``tfgpu.envs.which``)
    failing: bool = False  # shown before the error that says why: the reason is not repeated here

    @property
    def ok(self) -> bool:
        return bool(self.report.get("ok"))

    def to_dict(self) -> dict:
        return self.report | ({"which_env": self.which_env} if self.which_env else {})


@record
class EnvList(Result):
    """``list``: the envs the tool built, and the directories searched."""

    envs: list
    searched: list
    leftovers: list | tuple = ()
    """What interrupted removes left (``tfgpu.envs.listing.leftovers``): where, its size, the command that frees it."""

    def to_dict(self) -> dict:
        return {
            "envs": self.envs,
            "searched": [str(directory) for directory in self.searched],
            "leftovers": list(self.leftovers),
        }


@record
class Repaired(Result):
    """``repair`` (``undone``: ``repair --undo``): what changed (``tfgpu.repair.records``:
    a ``RepairOutcome``, or an ``UndoOutcome``)."""

    summary: Any
    undone: bool = False

    @property
    def exit_code(self) -> int:
        # A library that still loads from outside the env is no success (doctor's libs.closed fails on it).
        return 1 if not self.undone and self.summary.leaves_open else 0

    def to_dict(self) -> dict:
        return self.summary.to_dict()


@record
class Written(Result):
    """``lock`` and ``bundle``: what was written, and the line that says so."""

    document: dict
    lines: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return self.document


@record
class Text(Result):
    """Text meant for stdout as it is: a completion script, a script with no -o."""

    text: str
    document: dict | None = None

    def to_dict(self) -> dict:
        return self.document or {"text": self.text}


@record
class CacheReport(Result):
    """``cache info|prune|clean``: the cache by kind (info), or what was freed (prune, clean)."""

    document: CacheInfo | Tidied

    def to_dict(self) -> dict:
        return self.document.to_dict()


@record
class Ran(Result):
    """``run`` and ``shell``: a command ran in an env on the user's terminal; its exit status is the
    tool's (a death by signal N: 128 + N). The command's output was its own: nothing to show."""

    argv: tuple[str, ...]
    status: int

    @property
    def exit_code(self) -> int:
        return self.status

    def to_dict(self) -> dict:
        return {"argv": list(self.argv), "exit_code": self.status}
