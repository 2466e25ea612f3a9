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

from tfgpu.cache import uv_cache
from tfgpu.engines import rattler
from tfgpu.engines import uv as uv_engine
from tfgpu.engines.uv import find_uv
from tfgpu.envs import txn
from tfgpu.envs.location import refuse_link, safe_label
from tfgpu.envs.which import which_env
from tfgpu.errors import ImpossibleError
from tfgpu.paths import cache_root
from tfgpu.proc import Runner
from tfgpu.progress import Reporter
from tfgpu.quoting import sh
from tfgpu.resolver import make_request, resolve


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


def _installer(plan_or_journal_manager: str, survey, resolution, runner, *, find_links, offline, channels):
    if plan_or_journal_manager == "conda":
        # Import cycle: tfgpu.repair.packages imports this module.
        from tfgpu.repair.packages import CondaPackages

        cuda = rattler.virtual_cuda(resolution) if resolution is not None else ""
        return CondaPackages(survey.prefix, rattler.channel_urls(tuple(channels)), cuda, cache_root(), offline=offline)
    # Import cycle: tfgpu.repair.packages imports this module.
    from tfgpu.repair.packages import PipPackages

    uv = find_uv()
    if uv is None:
        raise ImpossibleError(
            "uv-missing",
            "Repairing needs uv, which is not installed with this tfgpu-install.",
            ["Reinstall tfgpu-install (it depends on the `uv` package)."],
        )

    chosen = uv_cache(uv)
    runner.log(f"uv cache: {chosen.path} ({chosen.why})")
    return PipPackages(
        uv, survey.python, survey.site_packages, runner, chosen.path, find_links=find_links, offline=offline
    )


def _root(where: Path | None, interpreter: Path | None) -> Path:
    """The env's directory, to lock before its state is read (``--interpreter``: the interpreter's env)."""
    if where is not None:
        return where
    # Looked up at each call: tests stand a fake in for survey().
    from tfgpu.repair.survey import survey as read_env

    return read_env(None, interpreter).prefix


def repair(
    *,
    target=None,
    name: str | None = None,
    prefix: str | None = None,
    interpreter: str | None = None,
    driver: str | None = None,
    gpu_cc: str | None = None,
    companions: tuple[str, ...] = (),
    allow_changes: bool = False,
    dry_run: bool = False,
    find_links: str | None = None,
    offline: bool = False,
    channels=(),
    detect: bool = True,
    reporter=None,
    runner=None,
    confirm=None,
) -> dict:
    """Repair the env ``target`` (a ``tfgpu.envs.which.EnvTarget``; else ``locate``'s answer for
    ``name``/``prefix``/``interpreter``); returns a summary (``repaired`` False when nothing had to
    be done).

    ``confirm(plan) -> bool`` is asked before anything changes (the CLI asks on a terminal). The
    env's lock is taken before its state (survey, journal) is read, and held to the end."""
    reporter = reporter or Reporter()
    find_links = uv_engine.find_links_source(find_links)
    target = target or locate(name, prefix, interpreter)
    interpreter = target.interpreter
    root = _root(target.prefix, interpreter)
    if dry_run:  # changes nothing: no lock, so it works in an env the user cannot write
        return _repair_locked(
            root,
            interpreter,
            driver,
            gpu_cc,
            allow_changes,
            True,
            find_links,
            offline,
            channels,
            detect,
            reporter,
            runner,
            confirm,
            companions=companions,
        ) | {"which_env": target.to_dict()}
    with _telling_what_is_left(root), txn.TargetLock(root):
        return _repair_locked(
            root,
            interpreter,
            driver,
            gpu_cc,
            allow_changes,
            False,
            find_links,
            offline,
            channels,
            detect,
            reporter,
            runner,
            confirm,
            companions=companions,
        ) | {"which_env": target.to_dict()}


def _repair_locked(
    root,
    interpreter,
    driver,
    gpu_cc,
    allow_changes,
    dry_run,
    find_links,
    offline,
    channels,
    detect,
    reporter,
    runner,
    confirm,
    companions=(),
) -> dict:
    # Import cycle: tfgpu.repair.apply imports this module.
    # Import cycle: tfgpu.repair.plan imports this module.
    # Looked up at each call: tests stand a fake in for survey().
    from tfgpu.repair.apply import apply_repair, check_journal, undo_journal
    from tfgpu.repair.plan import manager_of, plan_repair
    from tfgpu.repair.survey import survey as read_env

    found = read_env(root, interpreter)
    check_journal(found.prefix, found.journal)
    _refuse_cpu_only(found)
    manager = manager_of(found)
    resolution = _resolve(found, manager, driver, gpu_cc, detect, companions)
    if found.journal is not None and found.journal.get("state") == "applying" and not dry_run:
        runner = runner or _runner(found)
        reporter.note("an earlier repair was interrupted: undoing it first")
        undo_journal(
            found.prefix,
            found.journal,
            _installer(
                found.journal.get("manager", manager),
                found,
                resolution,
                runner,
                find_links=find_links,
                offline=offline,
                channels=channels,
            ),
            reporter,
        )
        found = read_env(found.prefix)
    plan = plan_repair(found, resolution)
    summary = {
        "prefix": str(found.prefix),
        "tensorflow": found.tf_version,
        "env": found.to_dict(),
        "plan": plan.to_dict(),
        "dry_run": dry_run,
    }
    if plan.change and not allow_changes:
        listed = "; ".join(f"{p.name} {p.installed} -> {p.wanted} ({p.reason})" for p in plan.change)
        raise ImpossibleError(
            "repair-needs-changes",
            f"Repairing {found.prefix} needs packages the env already holds changed: {listed}. Nothing was changed.",
            [
                "Add --allow-changes to change exactly these (`repair --undo` puts them back).",
                f"Or change them yourself, then run `tfgpu-install repair --prefix {sh(str(found.prefix))}`.",
            ],
            details=summary,
        )
    if dry_run or plan.nothing_to_do:
        return summary | {"repaired": False, "nothing_to_do": plan.nothing_to_do}
    if confirm is not None and not confirm(plan):
        return summary | {"repaired": False, "declined": True}
    runner = runner or _runner(found)
    installer = _installer(
        plan.manager, found, resolution, runner, find_links=find_links, offline=offline, channels=channels
    )
    done = apply_repair(plan, installer, reporter)
    return summary | {
        "repaired": True,
        "nothing_to_do": False,
        **done,
        "log": str(runner.log_path) if runner.log_path else None,
    }


def undo(
    *,
    target=None,
    name: str | None = None,
    prefix: str | None = None,
    interpreter: str | None = None,
    find_links: str | None = None,
    offline: bool = False,
    forget_journal: bool = False,
    reporter=None,
    runner=None,
) -> dict:
    """Take back what the repair did (only what is still as it left it), under the env's lock.
    ``forget_journal``: set aside a journal the tool cannot apply, changing nothing else."""
    # Import cycle: tfgpu.repair.apply imports this module.
    # Import cycle: tfgpu.repair.journal imports this module.
    # Import cycle: tfgpu.repair.survey imports this module.
    # Looked up at each call: tests stand a fake in for survey().
    from tfgpu.repair.apply import check_journal, undo_journal
    from tfgpu.repair.journal import forget
    from tfgpu.repair.survey import JOURNAL, read_journal
    from tfgpu.repair.survey import survey as read_env

    reporter = reporter or Reporter()
    find_links = uv_engine.find_links_source(find_links)
    target = target or locate(name, prefix, interpreter)
    root = _root(target.prefix, target.interpreter)
    with _telling_what_is_left(root, undoing=True), txn.TargetLock(root):
        if forget_journal:
            if read_journal(root) is None:
                raise ImpossibleError(
                    "nothing-to-undo", f"{root} has no {JOURNAL}; nothing to set aside.", ["Nothing to do."]
                )
            return {"prefix": str(root), "undone": False, "journal_set_aside": forget(root)}
        found = read_env(root)
        if found.journal is None:
            raise ImpossibleError(
                "nothing-to-undo",
                f"{found.prefix} has no {JOURNAL}: tfgpu-install has not repaired "
                "it (or the repair was already undone).",
                ["Nothing to do."],
            )
        check_journal(found.prefix, found.journal)
        runner = runner or _runner(found)
        installer = _installer(
            found.journal.get("manager", "pip"),
            found,
            None,
            runner,
            find_links=find_links,
            offline=offline,
            channels=(),
        )
        done = undo_journal(found.prefix, found.journal, installer, reporter)
    return {"prefix": str(found.prefix), "undone": True, **done}


@contextlib.contextmanager
def _telling_what_is_left(root: Path, undoing: bool = False):
    """An interrupt that leaves an unfinished repair's journal behind says so, and what takes it
    back (the CLI prints ``outcome`` instead of its general line)."""
    try:
        yield
    except KeyboardInterrupt as stop:
        if getattr(stop, "outcome", None) is None:
            stop.outcome = _unfinished(root, undoing) or "the env was not changed"
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
