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
from tfgpu.errors import UsageError
from tfgpu.quoting import sh
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
    where = {"target": target}
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
            done = repair.undo(
                **where,
                find_links=settings.find_links,
                offline=settings.offline,
                forget_journal=settings.forget_journal,
                reporter=reporter,
            )
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
        summary = repair.repair(
            **where,
            driver=settings.selectors.driver,
            gpu_cc=settings.selectors.gpu_cc,
            companions=settings.selectors.companions,
            allow_changes=settings.allow_changes,
            dry_run=settings.dry_run,
            find_links=settings.find_links,
            offline=settings.offline,
            channels=settings.channels,
            detect=settings.detect,
            reporter=reporter,
            confirm=confirm,
        )
    finally:
        if reporter is not None:
            reporter.close()
    if summary.get("repaired"):
        return _repaired(settings, summary)
    return results.Repaired(summary)


def _repaired(settings: Settings, summary: dict) -> results.Result:
    """A repair that changed the env (kept whatever its GPU check finds), checked and ended as a
    create is (``tfgpu.cli.endings``): exit 0 without a driver here, 1 when one is here and fails."""
    prefix = summary["prefix"]
    summary["undo"] = f"tfgpu-install repair --prefix {sh(str(prefix))} --undo"
    if settings.verify:
        if not settings.json:
            note("Checking the GPU (imports TensorFlow)…")
        summary["verify"] = run_verify(Path(prefix))
    found = endings.unchecked(settings, summary.get("verify"), prefix)
    summary["verified"] = bool(summary.get("verify", {}).get("ok"))
    summary["not_verified"] = found
    kept = f"The repair is kept (undo it with `{summary['undo']}`)."
    if found is not None and found["code"] == "no-driver-here" and settings.require_gpu:
        error = endings.gpu_required(found, prefix, "Repaired", summary)
        error.alternatives.insert(0, kept)
        raise error
    if found is None and not summary["verified"]:
        if not settings.json:
            render().repaired(summary, failing=True)
        error = failure(summary["verify"], details=summary)
        error.alternatives.insert(0, kept)
        raise error
    return results.Repaired(summary)
