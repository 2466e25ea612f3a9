"""``tfgpu-install repair``: its options and its command (``tfgpu.repair`` does the work).

Kept apart from ``parser``/``commands`` because it is the one command that asks a question: on a
terminal it shows the plan and waits for yes unless ``--yes``; without a terminal (a script, CI) it
proceeds only with ``--yes`` or ``--dry-run``, so nothing changes an env unasked.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tfgpu.errors import UsageError
from tfgpu.paths import path_option as _path


def add_parser(sub) -> None:
    repair = sub.add_parser("repair", help="make an existing env's TensorFlow find the GPU, in place (undoable)")
    where = repair.add_mutually_exclusive_group()
    where.add_argument("--name", "-n", help="environment name (tfgpu-install's envs directory, then conda's)")
    where.add_argument("--prefix", "-p", help="environment path (a venv or a conda prefix)")
    where.add_argument("--interpreter", metavar="PATH", type=_path("--interpreter"),
                       help="the environment of this Python interpreter")
    repair.add_argument("--undo", action="store_true", help="put the env back exactly as the first repair found it")
    repair.add_argument("--forget-journal", action="store_true",
                        help="with --undo: set aside a repair journal the tool cannot apply (kept, renamed), "
                             "changing nothing else")
    repair.add_argument("--allow-changes", action="store_true",
                        help="let the repair change the versions of CUDA packages the env already holds (listed "
                             "first; --undo puts them back)")
    repair.add_argument("--dry-run", action="store_true", help="show what would change; change nothing")
    repair.add_argument("--yes", "-y", action="store_true", help="do not ask (needed when not on a terminal)")
    repair.add_argument("--driver", metavar="VER", help="NVIDIA driver version to repair for (default: detected)")
    repair.add_argument("--gpu-cc", metavar="X.Y", help="GPU compute capability to repair for (default: detected)")
    repair.add_argument("--no-detect", action="store_true", help="do not look at this machine's driver and GPU")
    repair.add_argument("--find-links", metavar="DIR", type=_path("--find-links"), help="a directory (or URL) of wheels to install from")
    repair.add_argument("--offline", action="store_true", help="use no network: --find-links and the caches only")
    repair.add_argument("--channel", action="append", metavar="URL", type=_path("--channel"),
                        help="conda channel for conda prefixes (repeatable; default conda-forge)")
    repair.add_argument("--no-verify", action="store_true", help="skip the GPU check at the end")
    repair.add_argument("--json", action="store_true", help="print one JSON document on stdout, nothing else there")


def _ask(plan) -> bool:
    from tfgpu.cli.output import render

    render().repair_plan(plan.to_dict(), plan.survey.prefix)
    sys.stderr.write("Proceed? [y/N] ")
    sys.stderr.flush()
    try:
        answer = sys.stdin.readline()
    except (OSError, ValueError):
        return False
    return answer.strip().lower() in ("y", "yes")


def cmd_repair(args: argparse.Namespace) -> int:
    from tfgpu import repair
    from tfgpu.cli.output import emit, render

    target = repair.locate(args.name, args.prefix, args.interpreter)  # default: the active env
    if target.implicit and not args.json:
        render().note(target.describe())
    where = {"target": target}
    if args.undo:
        reporter = None if args.json else render().ConsoleReporter()
        try:
            done = repair.undo(**where, find_links=args.find_links, offline=args.offline,
                               forget_journal=args.forget_journal, reporter=reporter)
        finally:
            if reporter is not None:
                reporter.close()
        emit(args, done, lambda: render().repair_undone(done))
        return 0
    if args.forget_journal:
        raise UsageError("conflicting-options", "--forget-journal goes with --undo.",
                         ["`tfgpu-install repair --undo --forget-journal --prefix P`"])
    confirm = None
    if not (args.dry_run or args.yes):
        if args.json or not sys.stdin.isatty():
            raise UsageError("repair-needs-yes", "repair changes an existing env, and there is no terminal to ask "
                             "on (or --json was given).",
                             ["Add --yes to go ahead, or --dry-run to see what would change first."])
        confirm = _ask
    reporter = None if (args.dry_run or args.json) else render().ConsoleReporter()
    try:
        summary = repair.repair(**where, driver=args.driver, gpu_cc=args.gpu_cc, allow_changes=args.allow_changes,
                                dry_run=args.dry_run, find_links=args.find_links, offline=args.offline,
                                channels=tuple(args.channel or ()), detect=not args.no_detect, reporter=reporter,
                                confirm=confirm)
    finally:
        if reporter is not None:
            reporter.close()
    if summary.get("repaired") and not args.no_verify:
        from tfgpu.verify import failure, run_verify

        if not args.json:
            render().note("Checking the GPU (imports TensorFlow)…")
        summary["verify"] = run_verify(Path(summary["prefix"]))
        if not summary["verify"].get("ok"):
            raise failure(summary["verify"], details=summary)
    emit(args, summary, lambda: render().repaired(summary))
    return 0
