"""The operations that change environments: ``create`` and ``remove``.

``create`` is: pick the backend for the resolution's mode, locate the target, survey what the
plan depends on, plan (pure), and either return the steps (dry run) or, holding the target's lock,
finish what an interrupted run left, build in staging, move into place and verify. On any failure
or interrupt the staging directory is deleted and the target is as it was (``tfgpu.envs.txn``).
The runner and reporter are injected, so tests drive the whole operation in-process.
"""

from __future__ import annotations

from pathlib import Path

from rich.filesize import decimal

from tfgpu.doors.quoting import sh
from tfgpu.envs import jupyter, txn
from tfgpu.envs.location import Location, locate, prefix_for, refuse_link, safe_label
from tfgpu.envs.which import which_env
from tfgpu.errors import ImpossibleError, OperationError
from tfgpu.installers.base import Backend, Context, Options, Outcome, Source, Step, StepKind, apply
from tfgpu.process.interrupts import leave
from tfgpu.process.runner import Runner
from tfgpu.progress import Reporter
from tfgpu.records import factory, record
from tfgpu.results import Removed
from tfgpu.verify import run_verify


@record(frozen=False)
class CreateResult:
    location: Location
    steps: list[Step]
    outcome: Outcome | None = None
    log_path: Path | None = None
    verify: dict | None = None
    notes: list[str] = factory(list)


def backend_for(resolution, options: Options, source: Source, dry_run: bool = False) -> Backend:
    """The backend for the resolution's mode (each module's ``make_backend`` checks its own needs;
    system mode's driver check becomes a note in a dry run)."""
    if resolution.mode == "conda":
        # Start-up cost: brings rattler; conda mode only.
        from tfgpu.installers.conda import make_backend as conda_backend

        return conda_backend(resolution, options, source)
    if resolution.mode == "system":
        # Start-up cost: the mode's backend only.
        from tfgpu.installers.system import make_backend as system_backend

        return system_backend(resolution, options, dry_run=dry_run)
    # Start-up cost: the mode's backend only.
    from tfgpu.installers.pip import make_backend as pip_backend

    return pip_backend(resolution, options)


def create(
    resolution,
    *,
    name: str | None,
    prefix: str | None,
    options: Options,
    source: Source = Source(),  # noqa: B008 - frozen: one shared default is safe
    reporter: Reporter | None = None,
    runner=None,
    dry_run: bool = False,
    backend: Backend | None = None,
    verify=None,
) -> CreateResult:
    """Build (or, with ``dry_run``, only plan) the env ``resolution`` describes.

    ``runner`` (a ``tfgpu.process.runner.Runner``) and ``backend`` default to the real ones; ``verify`` is
    the GPU check run at the end (``tfgpu.verify.run_verify``) unless ``options.verify`` is off."""
    reporter = reporter or Reporter()
    backend = backend or backend_for(resolution, options, source, dry_run)
    if not options.force:
        done = backend.unchanged(name, prefix)
        if done is not None:  # e.g. system mode run again over the same files: nothing to do
            return CreateResult(
                location=Location(prefix=done.prefix, staging=done.prefix, name=done.prefix.name, existing=True),
                steps=[Step(StepKind.NOOP, done.notes[0])],
                outcome=done,
                notes=list(done.notes),
            )
    if name and not prefix:
        prefix = backend.prefix_for_name(name)
    if options.jupyter:
        jupyter.check_writable()
    # Every check that can refuse happens here, before anything is created (not even a lock file);
    # they run again under the lock, where the target cannot change under us.
    planned = locate(name, prefix, options.force, in_place=backend.in_place)
    facts = backend.survey(resolution, planned, options)
    steps = backend.plan(resolution, planned, options, source, facts)
    if dry_run:
        return CreateResult(location=planned, steps=steps, notes=list(backend.dry_run_notes))
    final, display = prefix_for(name, prefix)
    refuse_link(final)
    if runner is None:
        runner = Runner.for_operation(f"create-{safe_label(display)}")
    if runner.note:
        reporter.note(runner.note)
    if backend.cache_note:
        runner.log(backend.cache_note)
    try:
        lock = txn.TargetLock(final).__enter__()
    except OSError as error:
        raise _not_writable(final, error) from None
    location: Location | None = None
    checking = False
    try:
        try:
            for line in txn.recover(final):
                reporter.note(line)
                runner.log(line)
            location = locate(name, prefix, options.force, in_place=backend.in_place)
            facts = backend.survey(resolution, location, options)
            result = CreateResult(
                location=location,
                steps=backend.plan(resolution, location, options, source, facts),
                log_path=runner.log_path,
            )
            try:
                txn.prepare(location)
            except OSError as error:
                txn.rollback(location)
                raise _not_writable(location.staging, error) from None
            except BaseException:  # a signal as it returns: "nothing was left half-built" must be true
                txn.rollback(location)
                raise
            try:
                context = Context(
                    resolution=resolution,
                    location=location,
                    options=options,
                    source=source,
                    runner=runner,
                    reporter=reporter,
                    facts=facts,
                    outcome=Outcome(prefix=location.prefix, python=location.prefix / "bin" / "python"),
                )
                result.outcome = apply(backend, result.steps, context)
            except OSError as error:  # disk full, permissions changed under us: a clear error, nothing left
                _undo(location, options)
                raise OperationError(
                    "install-failed",
                    f"Building {location.prefix} failed: {error}; nothing was left behind.",
                    [
                        *([f"The log is {runner.log_path}."] if runner.log_path else []),
                        "Check free disk space (`df -h`) and permissions, then run the same command again.",
                    ],
                ) from None
            except BaseException as error:
                if isinstance(error, KeyboardInterrupt) and txn.committed(location):
                    raise  # every step was done and the env is in place: it is kept, and said so below
                _undo(location, options)
                runner.record_failure(error)
                raise
        finally:
            lock.__exit__(None, None, None)
        result.notes.extend(result.outcome.notes)
        if options.verify:
            if verify is None:
                verify = run_verify
            reporter.note("Checking the GPU inside the new env (imports TensorFlow).")
            checking = True
            result.verify = verify(location.prefix, runner=runner)  # its output goes into this create's log
    except KeyboardInterrupt as stop:
        # A signal once the env is in place (as the move into place ends, when the signal held over
        # it is delivered, or during the check): a finished build is no reason to throw away, and
        # "nothing was left half-built" would be false. Said to be complete and unchecked.
        if location is not None and txn.committed(location):
            check = "its GPU check did not finish" if checking else "it was not checked"
            leave(
                stop,
                f"the env at {location.prefix} is complete (every step was done) but {check}. Check it "
                f"with `tfgpu-install verify --prefix {location.prefix}`, or delete it with "
                f"`tfgpu-install remove --prefix {location.prefix}`.",
            )
        raise
    return result


def _not_writable(path: Path, error: OSError) -> ImpossibleError:
    """``target-not-writable``: the env (or its staging directory) cannot be made at ``path``."""
    return ImpossibleError(
        "target-not-writable",
        f"Cannot create {path}: {error.strerror}.",
        ["Choose a --prefix in a directory you can write, or use --name."],
    )


def _undo(location: Location, options: Options) -> None:
    """Roll back a failed build: the staging directory, and a kernel this build registered."""
    txn.rollback(location)
    if options.jupyter:
        jupyter.unregister(jupyter.kernel_name(location.prompt, location.id), location.id)


def remove(name: str | None, prefix: str | None, reporter: Reporter | None = None) -> Removed:
    """Delete an env tfgpu-install built at that very place (its marker proves it), and its kernels.
    ``--name`` is looked up as every command looks it up (``tfgpu.envs.which``); never the active env.
    ``reporter`` is told the files and bytes deleted as it goes. Interrupted, what is left and the
    command that finishes it are said (``tfgpu.process.interrupts.leave``)."""
    target = which_env(name=name, prefix=prefix, purpose="remove")
    assert target is not None and target.prefix is not None  # which_env answers None only for doctor
    final = target.prefix
    again = f"tfgpu-install remove {f'--name {sh(name)}' if name else f'--prefix {sh(str(final))}'}"
    progress = None
    if reporter is not None:
        begun: list[bool] = []

        def progress(files: int, all_files: int, size: int, all_size: int) -> None:
            if not begun:
                reporter.step(1, 1, f"Remove {final}: {all_files:,} files, {decimal(all_size)}")
                begun.append(True)
            reporter.transfer(f"deleting {all_files:,} files", size, all_size or None)

    try:
        done = txn.remove(final, progress)
    except KeyboardInterrupt as stop:
        _left_by_remove(stop, final, again)
        raise
    return Removed(done.removed, done.recovered, target.to_dict())


def _left_by_remove(stop: BaseException, final: Path, again: str) -> None:
    """Say what an interrupted remove left: the env whole, or what is left of it where."""

    removing = txn.removing_of(final)
    if removing.exists():
        leave(
            stop,
            f"{final} was partly removed: what is left of it is in {removing}. `{again}` finishes the removal "
            "(`tfgpu-install list` shows it until then).",
        )
    elif final.exists():
        leave(stop, f"nothing was removed: the env at {final} is whole.")
