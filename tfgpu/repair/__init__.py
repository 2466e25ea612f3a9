"""``tfgpu-install repair``: make the env a user already has find its GPU, in place, reversibly.

It reads what is there (``survey``), resolves that very TensorFlow for this machine (or the
``--driver``/``--gpu-cc`` given), works out the smallest change (``plan``: missing CUDA packages,
wrong versions only with ``--allow-changes``, the activation and load hook), and carries it out as
a transaction with a journal (``apply``) that ``--undo`` reverses byte for byte. It refuses what
it cannot fix: a CPU-only TensorFlow, a driver or GPU too old, an interpreter that is not a venv or
conda prefix.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from tfgpu.doors.quoting import sh
from tfgpu.engines.uv import find_links_source
from tfgpu.envs import txn
from tfgpu.envs.location import refuse_link, safe_label
from tfgpu.envs.which import which_env
from tfgpu.errors import ImpossibleError
from tfgpu.installers.engine import engine_for
from tfgpu.process.runner import Runner
from tfgpu.progress import Reporter
from tfgpu.records import replace
from tfgpu.repair.apply import apply_repair, check_journal, undo_journal
from tfgpu.repair.journal import forget
from tfgpu.repair.plan import manager_of, plan_repair
from tfgpu.repair.records import RepairOutcome, RepairRequest, UndoOutcome
from tfgpu.repair.survey import JOURNAL, read_journal
from tfgpu.repair.survey import survey as read_env
from tfgpu.resolver import make_request, resolve

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tfgpu.installers.engine import PackageEngine


def locate(name: str | None, prefix: str | None, interpreter: str | None, environ=None):
    """The env to repair (``tfgpu.envs.which``: ``--name``/``--prefix``/``--interpreter``, else the
    active env that ``environ`` names); a prefix that is a symbolic link is refused."""
    target = which_env(
        name=name,
        prefix=prefix,
        interpreter=interpreter,
        purpose="repair",
        **({} if environ is None else {"environ": environ}),
    )
    assert target is not None  # which_env answers None only for doctor
    if target.prefix is not None:
        refuse_link(target.prefix)
    return target


def _refuse_cpu_only(survey) -> None:
    if survey.cuda_build:
        return
    raise ImpossibleError(
        "cpu-only-build",
        f"The TensorFlow in {survey.prefix} ({survey.tf_distribution} {survey.tf_version}) is a "
        "CPU-only build: no library set-up can give it a GPU.",
        [
            "On Linux x86_64 (or WSL2), install the CUDA build: `tensorflow[and-cuda]` for 2.14 and newer.",
            "Linux aarch64 and macOS wheels, and native Windows after 2.10, are CPU-only: use Linux x86_64 or WSL2 "
            "(macOS: tensorflow-metal).",
        ],
    )


def _resolve(survey, manager: str, driver: str | None, gpu_cc: str | None, detect: bool, companions=()):
    host = None
    if detect:
        # Looked up at each call: tests stand a fake in for probe().
        from tfgpu.detect import probe

        host = probe()
    # Repair keeps the env's TensorFlow: on a GPU its sources say it cannot run on, that is the
    # plan's warning (gpu-arch-cannot-run-allowed), not a refusal to repair the libraries.
    request = make_request(
        tf=survey.tf_version,
        mode=manager,
        python=survey.python_version,
        driver=driver,
        gpu_cc=gpu_cc,
        allow_unsupported_gpu=True,
        companions=tuple(companions),
    )
    return resolve(request, host)


def _installer(manager: str, survey, resolution, runner, request: RepairRequest) -> PackageEngine:
    """The engine (``tfgpu.installers.engine``, the one create installs through too) for the env's
    package manager, working on that env."""

    return engine_for(
        manager,
        survey.prefix,
        survey.python,
        runner,
        resolution=resolution,
        find_links=request.find_links,
        offline=request.offline,
        channels=request.channels,
        needs="Repairing",
    )


def _root(where: Path | None, interpreter: Path | None) -> Path:
    """The env's directory, to lock before its state is read (``--interpreter``: the interpreter's env)."""
    if where is not None:
        return where
    # Looked up at each call: tests stand a fake in for survey().
    from tfgpu.repair.survey import survey as read_env

    return read_env(None, interpreter).prefix


def repair(request: RepairRequest, *, reporter=None, runner=None, confirm=None) -> RepairOutcome:
    """Repair the env ``request`` names (its ``target``; else ``locate``'s answer for its
    ``name``/``prefix``/``interpreter``); ``repaired`` is False when nothing had to be done.

    ``confirm(plan) -> bool`` is asked before anything changes (the CLI asks on a terminal). The
    env's lock is taken before its state (survey, journal) is read, and held to the end."""
    reporter = reporter or Reporter()
    request = replace(request, find_links=find_links_source(request.find_links))
    target = request.target or locate(request.name, request.prefix, request.interpreter)
    root = _root(target.prefix, target.interpreter)
    if request.dry_run:  # changes nothing: no lock, so it works in an env the user cannot write
        done = _repair_locked(root, target.interpreter, request, reporter, runner, confirm)
    else:
        with _telling_what_is_left(root), txn.TargetLock(root):
            done = _repair_locked(root, target.interpreter, request, reporter, runner, confirm)
    return replace(done, which_env=target)


def _repair_locked(root, interpreter, request: RepairRequest, reporter, runner, confirm) -> RepairOutcome:

    found = read_env(root, interpreter)
    check_journal(found.prefix, found.journal)
    _refuse_cpu_only(found)
    manager = manager_of(found)
    resolution = _resolve(found, manager, request.driver, request.gpu_cc, request.detect, request.companions)
    if found.journal is not None and found.journal.get("state") == "applying" and not request.dry_run:
        runner = runner or _runner(found)
        reporter.note("an earlier repair was interrupted: undoing it first")
        engine = _installer(found.journal.get("manager", manager), found, resolution, runner, request)
        undo_journal(found.prefix, found.journal, engine, reporter)
        found = read_env(found.prefix)
    plan = plan_repair(found, resolution)
    outcome = RepairOutcome(survey=found, plan=plan, dry_run=request.dry_run)
    if plan.change and not request.allow_changes:
        listed = "; ".join(f"{p.name} {p.installed} -> {p.wanted} ({p.reason})" for p in plan.change)
        raise ImpossibleError(
            "repair-needs-changes",
            f"Repairing {found.prefix} needs packages the env already holds changed: {listed}. Nothing was changed.",
            [
                "Add --allow-changes to change exactly these (`repair --undo` puts them back).",
                f"Or change them yourself, then run `tfgpu-install repair --prefix {sh(str(found.prefix))}`.",
            ],
            details=outcome.head(),
        )
    if request.dry_run or plan.nothing_to_do:
        return outcome
    if confirm is not None and not confirm(plan):
        return replace(outcome, declined=True)
    runner = runner or _runner(found)
    applied = apply_repair(plan, _installer(plan.manager, found, resolution, runner, request), reporter)
    log = str(runner.log_path) if runner.log_path else None
    return replace(outcome, repaired=True, applied=applied, log=log)


def undo(request: RepairRequest, *, reporter=None, runner=None) -> UndoOutcome:
    """Take back what the repair did (only what is still as it left it), under the env's lock.
    ``request.forget_journal``: set aside a journal the tool cannot apply, changing nothing else."""

    reporter = reporter or Reporter()
    request = replace(request, find_links=find_links_source(request.find_links), channels=())
    target = request.target or locate(request.name, request.prefix, request.interpreter)
    root = _root(target.prefix, target.interpreter)
    with _telling_what_is_left(root, undoing=True), txn.TargetLock(root):
        if request.forget_journal:
            if read_journal(root) is None:
                raise _nothing_to_undo(root, f"{root} has no {JOURNAL}; nothing to set aside.")
            return UndoOutcome(str(root), undone=False, journal_set_aside=forget(root))
        found = read_env(root)
        if found.journal is None:
            raise _nothing_to_undo(
                root,
                f"{found.prefix} has no {JOURNAL}: tfgpu-install has not repaired "
                "it (or the repair was already undone).",
            )
        check_journal(found.prefix, found.journal)
        runner = runner or _runner(found)
        engine = _installer(found.journal.get("manager", "pip"), found, None, runner, request)
        done = undo_journal(found.prefix, found.journal, engine, reporter)
    return UndoOutcome(str(found.prefix), undone=True, taken_back=done)


def _nothing_to_undo(root: Path, message: str) -> ImpossibleError:
    return ImpossibleError("nothing-to-undo", message, ["Nothing to do."])


@contextlib.contextmanager
def _telling_what_is_left(root: Path, undoing: bool = False):
    """An interrupt that leaves an unfinished repair's journal behind says so, and what takes it
    back (the CLI prints ``outcome`` instead of its general line)."""
    try:
        yield
    except KeyboardInterrupt as stop:
        if getattr(stop, "outcome", None) is None:
            stop.__dict__["outcome"] = _unfinished(root, undoing) or "the env was not changed"
        raise


def _unfinished(root: Path, undoing: bool) -> str | None:
    # Import cycle: tfgpu.repair.survey imports this module.
    from tfgpu.repair.survey import JOURNAL, read_journal

    try:
        journal = read_journal(root)
    except OSError:
        journal = None
    if journal is None and undoing:
        return f"the repair of {root} had been taken back whole"
    if not isinstance(journal, dict) or journal.get("unreadable"):
        return None
    if undoing:
        return (
            f"the undo stopped part way; {root / JOURNAL} still records the repair, and "
            f"`tfgpu-install repair --undo --prefix {sh(str(root))}` again finishes taking it back"
        )
    if journal.get("state") == "done":
        return None
    return (
        f"a repair of {root} is left unfinished (its journal {root / JOURNAL} says so); "
        f"`tfgpu-install repair --undo --prefix {sh(str(root))}` takes back what it had done"
    )


def _runner(found):

    return Runner.for_operation(f"repair-{safe_label(found.prefix.name)}")
