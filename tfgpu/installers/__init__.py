"""Installers: one backend per mode behind one interface (``plan`` pure, ``apply`` does it).

``create_env`` is the whole ``create`` operation: check the target, plan, and either print the
steps (dry run) or build in staging, move into place, and verify; on any failure or Ctrl-C the
staging directory is deleted and the target is as it was.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from tfgpu.errors import ImpossibleError, OperationError
from tfgpu.installers.base import Location, Options, Outcome, Step
from tfgpu.installers.location import MARKER, locate, prefix_for, read_marker, rollback



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
        from tfgpu.installers.conda import make_installer
    elif resolution.mode == "system":
        from tfgpu.installers.system import make_installer
    else:
        from tfgpu.installers.pip import make_installer
    return make_installer(resolution, options)


def create_env(resolution, *, name: str | None, prefix: str | None, options: Options, reporter,
               dry_run: bool = False, run_verify_step: bool = True) -> CreateResult:
    """Build (or, with ``dry_run``, only plan) the env ``resolution`` describes."""
    installer = _installer(resolution, options)
    if not options.force:
        done = installer.unchanged(name, prefix)
        if done is not None:  # e.g. system mode run again over the same files: nothing to do
            return done
    if name and not prefix:
        prefix = installer.prefix_for_name(name)
    location = locate(name, prefix, options.force, in_place=installer.in_place)
    steps = installer.plan(resolution, location, options)
    result = CreateResult(location=location, steps=steps)
    if dry_run:
        return result
    from tfgpu.installers.location import prepare
    from tfgpu.installers.runner import Runner
    from tfgpu.paths import log_dir

    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    runner = Runner(log_dir() / f"create-{location.name}-{stamp}.log")
    result.log_path = runner.log_path
    try:
        prepare(location)
    except OSError as error:
        rollback(location)
        raise ImpossibleError("target-not-writable", f"Cannot create {location.staging}: {error.strerror}.",
                              ["Choose a --prefix in a directory you can write, or use --name."]) from None
    try:
        result.outcome = installer.apply(steps, runner, reporter, resolution=resolution, location=location,
                                         options=options)
    except OSError as error:  # disk full, permissions changed under us: a clear error, nothing left
        rollback(location)
        raise OperationError("install-failed", f"Building {location.prefix} failed: {error}; nothing was left "
                             "behind.", [f"The log is {runner.log_path}.", "Check free disk space "
                                         "(`df -h`) and permissions, then run the same command again."]) from None
    except BaseException:
        rollback(location)
        raise
    if options.jupyter:
        from tfgpu.installers.jupyter import register_kernel

        result.notes.append(register_kernel(location.prefix, location.name, resolution))
    if options.verify and run_verify_step:
        from tfgpu.verify import run_verify

        reporter.note("Checking the GPU inside the new env (imports TensorFlow)…")
        result.verify = run_verify(location.prefix)
    return result


def remove_env(name: str | None, prefix: str | None) -> Path:
    """Delete an env tfgpu-install built (its marker proves it), and its Jupyter kernel."""
    path, _ = prefix_for(name, prefix)
    if not path.exists():
        raise ImpossibleError("no-such-env", f"There is no environment at {path}.",
                              ["`ls` the envs directory, or give the path with --prefix."])
    marker = read_marker(path)
    if marker is None:
        raise ImpossibleError("not-a-tfgpu-env",
                              f"{path} has no {MARKER}: tfgpu-install did not build it, so it is left alone.",
                              ["Delete it yourself if you are sure."])
    kernel = marker.get("jupyter_kernel")
    shutil.rmtree(path)
    if kernel and Path(kernel).is_dir():
        shutil.rmtree(kernel, ignore_errors=True)
    return path
