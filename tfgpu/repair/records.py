"""What a repair is asked and what it hands back, typed.

The command line builds one :class:`RepairRequest` from its inputs; ``tfgpu.repair.repair`` and
``tfgpu.repair.undo`` take it and return a :class:`RepairOutcome` or an :class:`UndoOutcome`,
built from :class:`Applied` (what ``apply_repair`` did) and :class:`TakenBack` (what
``undo_journal`` put back). Each outcome's ``to_dict()`` is the ``repair --json`` document, a
contract: the keys, their order and when each is there are held by the tests that read it.
The journal (``tfgpu.repair.journal``) stays the JSON file it is: its rows become records here.
"""

from __future__ import annotations

from tfgpu.records import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


@record
class RepairRequest:
    """One ``repair`` (or ``repair --undo``) as asked: the env (``target``, else ``name``/``prefix``/
    ``interpreter`` as ``tfgpu.repair.locate`` reads them), the target machine (``driver``, ``gpu_cc``,
    ``detect``), what may change, and where packages come from."""

    target: Any = None
    """A ``tfgpu.envs.which.EnvTarget`` already located (the command line locates it first)."""
    name: str | None = None
    prefix: str | None = None
    interpreter: str | None = None
    driver: str | None = None
    gpu_cc: str | None = None
    companions: tuple[str, ...] = ()
    allow_changes: bool = False
    dry_run: bool = False
    find_links: str | None = None
    offline: bool = False
    channels: tuple[str, ...] = ()
    detect: bool = True
    forget_journal: bool = False
    """``--undo``: set aside a journal the tool cannot apply, changing nothing else."""


@record
class AddedPackage:
    """A package a repair added: pip's with its RECORD digest (what undo checks it by), conda's marked."""

    name: str
    version: str
    record: str | None = None
    conda: bool = False

    @classmethod
    def of(cls, row: dict) -> AddedPackage:
        """From a journal row."""
        return cls(row["name"], row["version"], row.get("record"), bool(row.get("conda")))

    def to_dict(self) -> dict:
        if self.conda:
            return {"name": self.name, "version": self.version, "conda": True}
        return {"name": self.name, "version": self.version, "record": self.record}


@record
class ChangedPackage:
    """A package a repair moved from one version to another."""

    name: str
    before: str
    after: str | None
    conda: bool = False

    @classmethod
    def of(cls, row: dict) -> ChangedPackage:
        """From a journal row."""
        return cls(row["name"], row["from"], row.get("to"), bool(row.get("conda")))

    def to_dict(self) -> dict:
        return {"name": self.name, "from": self.before, "to": self.after, **({"conda": True} if self.conda else {})}


@record
class Applied:
    """What one repair did: the packages it added and changed, the files it wrote, its journal."""

    added: tuple[AddedPackage, ...]
    changed: tuple[ChangedPackage, ...]
    files: tuple[str, ...]
    journal: str

    def to_dict(self) -> dict:
        return {
            "added": [p.to_dict() for p in self.added],
            "changed": [p.to_dict() for p in self.changed],
            "files": list(self.files),
            "journal": self.journal,
        }


@record
class TakenBack:
    """What an undo (or a rollback) put back: packages taken out and restored, files put back, paths
    an interrupted install left that were swept, and what was left alone (and why)."""

    removed: tuple[str, ...] = ()
    restored: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    swept: tuple[str, ...] = ()
    left: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {
            "removed": list(self.removed),
            "restored": list(self.restored),
            "files": list(self.files),
            "swept": list(self.swept),
            "left": list(self.left),
        }


@record
class Checked:
    """What the command line adds once a repair changed the env: how to undo it, and its GPU check
    (``verify``: the check's report, None when it did not run)."""

    undo: str
    verified: bool
    not_verified: dict | None
    verify: dict | None = None


@record
class RepairOutcome:
    """``repair``: the env as read, the plan, and what happened (``applied`` when it changed the env)."""

    survey: Any  # tfgpu.repair.survey.EnvSurvey
    plan: Any  # tfgpu.repair.plan.RepairPlan
    dry_run: bool
    repaired: bool = False
    declined: bool = False
    applied: Applied | None = None
    log: str | None = None
    which_env: Any = None  # tfgpu.envs.which.EnvTarget
    checked: Checked | None = None

    @property
    def prefix(self) -> str:
        return str(self.survey.prefix)

    @property
    def leaves_open(self) -> bool:
        """A library still loads from outside the env (doctor's libs.closed fails on it)."""
        return bool(self.plan.left_open) and not self.dry_run

    def head(self) -> dict:
        """The document's first keys: the env and the plan (also the details of ``repair-needs-changes``)."""
        return {
            "prefix": self.prefix,
            "tensorflow": self.survey.tf_version,
            "env": self.survey.to_dict(),
            "plan": self.plan.to_dict(),
            "dry_run": self.dry_run,
        }

    def to_dict(self) -> dict:
        document = self.head() | {"repaired": self.repaired}
        if self.declined:
            document["declined"] = True
        else:
            document["nothing_to_do"] = self.plan.nothing_to_do if not self.repaired else False
        if self.applied is not None:
            document |= self.applied.to_dict() | {"log": self.log}
        if self.which_env is not None:
            document["which_env"] = self.which_env.to_dict()
        if self.checked is not None:
            checked = self.checked
            document["undo"] = checked.undo
            if checked.verify is not None:
                document["verify"] = checked.verify
            document |= {"verified": checked.verified, "not_verified": checked.not_verified}
        return document


@record
class UndoOutcome:
    """``repair --undo``: what was put back, or (``--forget-journal``) where the journal was set aside."""

    prefix: str
    undone: bool
    taken_back: TakenBack | None = None
    journal_set_aside: str | None = None

    def to_dict(self) -> dict:
        document: dict = {"prefix": self.prefix, "undone": self.undone}
        if self.journal_set_aside is not None:
            document["journal_set_aside"] = self.journal_set_aside
        if self.taken_back is not None:
            document |= self.taken_back.to_dict()
        return document
