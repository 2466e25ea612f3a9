"""Installers: one backend per mode behind one interface (``plan`` pure, ``apply`` does it).

``create_env`` is the whole ``create`` operation: check the target, plan, and either print the
steps (dry run) or, holding the target's lock, finish what an interrupted run left, build in
staging, move into place, and verify; on any failure or interrupt the staging directory is
deleted and the target is as it was (``tfgpu.envs.txn``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tfgpu.envs import jupyter, txn
from tfgpu.envs.location import Location, locate, prefix_for, refuse_link, safe_label
from tfgpu.errors import ImpossibleError, OperationError
from tfgpu.backends.base import Options, Outcome, Step


@dataclass
class CreateResult:
    location: Location
    steps: list[Step]
    outcome: Outcome | None = None
    log_path: Path | None = None
    verify: dict | None = None
    notes: list[str] = field(default_factory=list)


def _installer(resolution, options: Options):
    """The backend for the resolution's mode (each module's ``make_installer`` checks its own needs)."""
    if resolution.mode == "conda":
        from tfgpu.backends.conda import make_installer
    elif resolution.mode == "system":
        from tfgpu.backends.system import make_installer
    else:
        from tfgpu.backends.pip import make_installer
    return make_installer(resolution, options)


def create_env(resolution, *, name: str | None, prefix: str | None, options: Options, reporter,
               dry_run: bool = False, run_verify_step: bool = True, runner=None) -> CreateResult:
    """Build (or, with ``dry_run``, only plan) the env ``resolution`` describes."""
    from tfgpu.progress import Reporter

    reporter = reporter or Reporter()
    installer = _installer(resolution, options)
    if not options.force:
        done = installer.unchanged(name, prefix)
        if done is not None:  # e.g. system mode run again over the same files: nothing to do
            return done
    if name and not prefix:
        prefix = installer.prefix_for_name(name)
    if options.jupyter:
        jupyter.check_writable()
    # Every check that can refuse happens here, before anything is created (not even a lock file);
    # they run again under the lock, where the target cannot change under us.
    location = locate(name, prefix, options.force, in_place=installer.in_place)
    steps = installer.plan(resolution, location, options)
    if dry_run:
        return CreateResult(location=location, steps=steps)
    final, display = prefix_for(name, prefix)
    refuse_link(final)
    if runner is None:
        from tfgpu.proc import Runner

        runner = Runner.for_operation(f"create-{safe_label(display)}")
    if runner.note:
        reporter.note(runner.note)
    try:
        lock = txn.TargetLock(final).__enter__()
    except OSError as error:
        raise ImpossibleError("target-not-writable", f"Cannot create {final}: {error.strerror}.",
                              ["Choose a --prefix in a directory you can write, or use --name."]) from None
    try:
        for line in txn.recover(final):
            reporter.note(line)
            runner.log(line)
        location = locate(name, prefix, options.force, in_place=installer.in_place)
        result = CreateResult(location=location, steps=installer.plan(resolution, location, options),
                              log_path=runner.log_path)
        try:
            txn.prepare(location)
        except OSError as error:
            txn.rollback(location)
            raise ImpossibleError("target-not-writable", f"Cannot create {location.staging}: {error.strerror}.",
                                  ["Choose a --prefix in a directory you can write, or use --name."]) from None
        try:
            result.outcome = installer.apply(result.steps, runner, reporter, resolution=resolution,
                                             location=location, options=options)
        except OSError as error:  # disk full, permissions changed under us: a clear error, nothing left
            _undo(location, options)
            raise OperationError("install-failed", f"Building {location.prefix} failed: {error}; nothing was left "
                                 "behind.", [*([f"The log is {runner.log_path}."] if runner.log_path else []),
                                             "Check free disk space (`df -h`) and permissions, then run the "
                                             "same command again."]) from None
        except BaseException:
            _undo(location, options)
            raise
    finally:
        lock.__exit__(None, None, None)
    result.notes.extend(result.outcome.notes if result.outcome else [])
    if options.verify and run_verify_step:
        from tfgpu.verify import run_verify

        reporter.note("Checking the GPU inside the new env (imports TensorFlow)…")
        result.verify = run_verify(location.prefix)
    return result


def _undo(location: Location, options: Options) -> None:
    """Roll back a failed build: the staging directory, and a kernel this build registered."""
    txn.rollback(location)
    if options.jupyter:
        jupyter.unregister(jupyter.kernel_name(location.prompt, location.id), location.id)


def remove_env(name: str | None, prefix: str | None) -> dict:
    """Delete an env tfgpu-install built at that very place (its marker proves it), and its kernels."""
    path, _ = prefix_for(name, prefix)
    if name and not prefix and not path.exists():
        from tfgpu.envs.conda_envs import conda_envs_dir

        conda = conda_envs_dir()
        if conda is not None and (conda / name).exists():  # --mode conda --name puts envs there
            path = conda / name
    return txn.remove(path)
