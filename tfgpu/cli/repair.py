"""``tfgpu-install repair``: the command (``tfgpu.repair`` does the work).

Kept apart from ``commands`` because it is the one command that asks a question: on a
terminal it shows the plan and waits for yes unless ``--yes``; without a terminal (a script, CI) it
proceeds only with ``--yes`` or ``--dry-run``, so nothing changes an env unasked.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tfgpu import repair, results
from tfgpu.cli import endings
from tfgpu.cli.endings import refuse_unverifiable
from tfgpu.cli.output import note, render
from tfgpu.doors.quoting import sh
from tfgpu.errors import UsageError
from tfgpu.records import replace
from tfgpu.repair.records import Checked, RepairOutcome, RepairRequest
from tfgpu.settings import Settings
from tfgpu.verify import failure, run_verify


def _ask(plan) -> bool:
    render().repair_plan(plan.to_dict(), plan.survey.prefix)
    sys.stderr.write("Proceed? [y/N] ")
    sys.stderr.flush()
    try:
        answer = sys.stdin.readline()
    except (OSError, ValueError):
        return False
    return answer.strip().lower() in ("y", "yes")


def cmd_repair(settings: Settings) -> results.Result:
    target = repair.locate(
        settings.name, settings.prefix, settings.interpreter, environ=dict(settings.active_env)
    )  # default: the active env
    if target.implicit and not settings.json:
        note(target.describe())
    request = RepairRequest(
        target=target,
        driver=settings.selectors.driver,
        gpu_cc=settings.selectors.gpu_cc,
        companions=tuple(settings.selectors.companions),
        allow_changes=settings.allow_changes,
        dry_run=settings.dry_run,
        find_links=settings.find_links,
        offline=settings.offline,
        channels=tuple(settings.channels),
        detect=settings.detect,
        forget_journal=settings.forget_journal,
    )
    if settings.undo and settings.dry_run:
        # An undo has no preview: refusing is the honest answer, and nothing is changed.
        raise UsageError(
            "conflicting-options",
            "--dry-run does not go with --undo: an undo puts back exactly "
            "what the first repair recorded, and has no preview; nothing was changed.",
            [
                "`tfgpu-install repair --undo --prefix P` (or --name N) undoes the repair.",
                "`tfgpu-install doctor --prefix P` shows the env as it is now.",
            ],
        )
    if settings.undo:
        reporter = None if settings.json else render().ConsoleReporter()
        try:
            done = repair.undo(request, reporter=reporter)
        finally:
            if reporter is not None:
                reporter.close()
        return results.Repaired(done, undone=True)
    if settings.forget_journal:
        raise UsageError(
            "conflicting-options",
            "--forget-journal goes with --undo.",
            ["`tfgpu-install repair --undo --forget-journal --prefix P`"],
        )

    refuse_unverifiable(settings)
    confirm = None
    if not (settings.dry_run or settings.yes):
        if settings.json or not sys.stdin.isatty():
            raise UsageError(
                "repair-needs-yes",
                "repair changes an existing env, and there is no terminal to ask on (or --json was given).",
                ["Add --yes to go ahead, or --dry-run to see what would change first."],
            )
        confirm = _ask
    reporter = None if (settings.dry_run or settings.json) else render().ConsoleReporter()
    try:
        outcome = repair.repair(request, reporter=reporter, confirm=confirm)
    finally:
        if reporter is not None:
            reporter.close()
    if outcome.repaired:
        return _repaired(settings, outcome)
    return results.Repaired(outcome)


def _repaired(settings: Settings, outcome: RepairOutcome) -> results.Result:
    """A repair that changed the env (kept whatever its GPU check finds), checked and ended as a
    create is (``tfgpu.cli.endings``): exit 0 without a driver here, 1 when one is here and fails."""
    prefix = outcome.prefix
    undo = f"tfgpu-install repair --prefix {sh(str(prefix))} --undo"
    report = None
    if settings.verify:
        if not settings.json:
            note("Checking the GPU (imports TensorFlow)…")
        report = run_verify(Path(prefix))
    found = endings.unchecked(settings, report, prefix)
    verified = bool((report or {}).get("ok"))
    outcome = replace(outcome, checked=Checked(undo, verified, found, report))
    kept = f"The repair is kept (undo it with `{undo}`)."
    if found is not None and found["code"] == "no-driver-here" and settings.require_gpu:
        error = endings.gpu_required(found, prefix, "Repaired", outcome.to_dict())
        error.alternatives.insert(0, kept)
        raise error
    if found is None and not verified:
        if not settings.json:
            render().repaired(outcome.to_dict(), failing=True)
        assert report is not None  # found is None only when the GPU was checked
        error = failure(report, details=outcome.to_dict())
        error.alternatives.insert(0, kept)
        raise error
    return results.Repaired(outcome)
