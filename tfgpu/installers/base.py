"""The backend interface: ``plan()`` is pure and returns typed steps; :func:`apply` carries them out.

A backend (one per mode) reads what it needs from the filesystem first (:meth:`Backend.survey`),
then :meth:`Backend.plan` turns resolution, location, options, source and those facts into
:class:`Step` values without touching anything, so ``--dry-run`` prints exactly what :func:`apply`
does and tests compare lists of steps. Every step carries what it needs (its command, the text it
writes, its payload); :func:`apply` is the one loop that runs them, each through the handler its
:class:`StepKind` names. Handlers shared by every mode live here; a backend adds its own.
"""

from __future__ import annotations

import contextlib
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from enum import Enum
from pathlib import Path

from tfgpu.doors import quoting, untrusted
from tfgpu.engines import pip_progress, uv_progress
from tfgpu.engines.uv import directory_alone, exact_pins, lacking, looks_transient, parse_inventory, run_failure
from tfgpu.envs import jupyter, marker, txn, writes
from tfgpu.envs.location import Location, relocate_venv
from tfgpu.installers.failures import install_failed, stalled
from tfgpu.installers.options import Options  # noqa: F401 - part of the backend interface
from tfgpu.installers.stacks import APART, APART_PINS, refuse_two_stacks
from tfgpu.records import factory, record, replace

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: type checkers treat it alike
if TYPE_CHECKING:
    from typing import Any

    from tfgpu.process.runner import Runner
    from tfgpu.progress import Reporter
    from tfgpu.resolver.model import Resolution


class StepKind(str, Enum):
    """What a step does; each kind has one handler (several kinds may share one). The values are
    the ``kind`` strings ``--dry-run --json`` prints."""

    REQUIREMENTS = "requirements"  # the requirements to resolve -> writes[0]
    LOCKED_REQUIREMENTS = "locked-requirements"  # a lock's hashed body, written as it is
    SYSTEM_FILE = "system-file"  # a profile.d / ld.so.conf.d / shell file
    TOOLKIT_MARKER = "toolkit-marker"  # which files the toolkit was built from
    RUN = "run"  # argv, output streamed
    RESOLVE = "lock"  # uv pip compile: the exact versions, stated
    INVENTORY = "inventory"  # what the env holds -> outcome.installed
    BYTECODE_STORE = "bytecode-store"  # uv compiled: keep the .pyc files in the cache's store
    BYTECODE_REUSE = "bytecode-reuse"  # link the stored .pyc files, compile the rest
    CACHE_DEDUPE = "cache-dedupe"  # a wheel uv unpacked twice (index and --find-links) kept once
    SOLVE = "solve"  # rattler solve of the conda specs
    LOCKED_CONDA = "locked-conda"  # the locked conda records, checked against their sha256
    CONDA_LINK = "conda-install"  # rattler links the records into the prefix
    ACTIVATION = "activation"  # activate scripts, load hook, ptxas (the mode's layout)
    TOOLKIT_ACTIVATION = "toolkit-activation"  # the same, with a runfile toolkit's libraries
    JUPYTER = "jupyter"  # the env's kernel (before the marker, which names it)
    MARKER = "marker"  # tfgpu-env.json: identity and contents
    RELOCATE = "relocate"  # staging path -> final path in scripts
    COMMIT = "commit"  # the env moves into place
    DOWNLOAD = "download"  # a vendor file, verified and cached
    RUNFILE = "runfile"  # NVIDIA's runfile, toolkit only
    UNPACK = "unpack"  # cuDNN into the toolkit
    TOOLKIT_CHECK = "toolkit-check"
    TOOLKIT_COMMIT = "toolkit-commit"
    TOOLKIT_REUSE = "toolkit-reuse"  # a toolkit from the same files is there: said, nothing done
    NOOP = "noop"  # the env is already in place: said, nothing done


WRITES = (StepKind.REQUIREMENTS, StepKind.LOCKED_REQUIREMENTS, StepKind.SYSTEM_FILE, StepKind.TOOLKIT_MARKER)


@record
class Step:
    """One thing an install does, with everything it needs to do it."""

    kind: StepKind
    title: str
    """One line for a person."""
    argv: tuple[str, ...] = ()
    """The command it runs, if any (never a shell string)."""
    writes: tuple[str, ...] = ()
    """Files or directories it creates."""
    content: str = ""
    """What a write step writes (a lock's body included: ``--dry-run`` shows it)."""
    env: tuple[tuple[str, str], ...] = ()
    """Environment variables the command needs (e.g. ``CONDA_OVERRIDE_CUDA``)."""
    payload: Any = None
    """What the handler needs beyond the above (a download's artifact, the marker's fields)."""
    fallback: tuple[str, ...] = ()
    """The command run instead when ``argv`` finds a package missing (offline: the wheel directory
    alone first, then with uv's cache; :func:`directory_first`)."""

    def describe(self) -> str:
        lines = [self.title]
        prefix = " ".join(f"{k}={quoting.sh(v)}" for k, v in self.env) + (" " if self.env else "")
        if self.argv:
            lines.append("  $ " + prefix + quoting.sh_join(self.argv))
        if self.fallback:
            lines.append(
                "  if the --find-links directory lacks a package: $ " + prefix + quoting.sh_join(self.fallback)
            )
        lines.extend(f"  writes {path}" for path in self.writes)
        lines.extend(f"    | {line}" for line in self.content.splitlines())
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {
            "kind": self.kind.value,
            "title": self.title,
            "argv": list(self.argv),
            "writes": list(self.writes),
            "content": self.content,
            "env": dict(self.env),
            **({"fallback": list(self.fallback)} if self.fallback else {}),
        }


class LockedPackage(tuple):
    """One locked conda package: ``(name, version, url, sha256)``."""

    __slots__ = ()

    def __new__(cls, name: str, version: str, url: str, sha256: str):
        return super().__new__(cls, (name, version, url, sha256))

    name = property(lambda self: self[0])
    version = property(lambda self: self[1])
    url = property(lambda self: self[2])
    sha256 = property(lambda self: self[3])


@record
class Source:
    """Where the packages come from: a fresh resolution, a lock, or a bundle (``tfgpu.lock`` reads
    and checks those and hands the result over as this; installers never read lock files)."""

    kind: str = "resolve"
    """``resolve``, ``lock`` or ``bundle``."""
    requirements: str = ""
    """The locked PyPI part: a hashed requirements body installed as it is."""
    index: str = ""
    """The index the lock was resolved against (installs ask it and no other)."""
    conda: tuple[LockedPackage, ...] = ()
    """The locked conda packages (conda locks)."""
    channels: tuple[str, ...] = ()
    """The channels the conda lock names."""
    bundle: Path | None = None
    """A verified bundle directory: conda packages from its ``channel/``, wheels from its ``wheels/``."""
    label: str = ""
    """What the marker records (``<lock path> sha256:<digest>``)."""
    lock_path: str = ""

    @property
    def locked(self) -> bool:
        return self.kind != "resolve"


@record(frozen=False)
class Outcome:
    """What an install produced."""

    prefix: Path
    python: Path
    installed: dict[str, str] = factory(dict)
    """Every distribution in the env and its exact version."""
    notes: list[str] = factory(list)
    activate: str = ""
    """How a person activates the env (empty: ``source <prefix>/bin/activate``)."""
    kernels: list[str] = factory(list)
    """Jupyter kernels registered for the env (names under the kernels directory)."""


@record(frozen=False)
class Context:
    """Everything a step handler may use, built once per build."""

    resolution: Resolution
    location: Location
    options: Options
    source: Source
    runner: Runner
    reporter: Reporter
    outcome: Outcome
    facts: dict = factory(dict)
    """What :meth:`Backend.survey` read, and what earlier steps leave for later ones (solved records)."""


Handler = Callable[[Step, Context], None]


class Backend(ABC):
    """One install mode."""

    mode: str
    in_place = False
    """Whether envs are built at their final path (see ``Location.in_place``)."""
    cache_note = ""
    """Which uv cache the mode's uv commands use, and why (written into the operation's log)."""
    dry_run_notes: list[str] = []  # noqa: RUF012 - replaced per instance, never mutated
    """What a dry run shows above its steps that a real run would refuse on (system mode on a host
    without the driver its toolkit needs)."""

    def unchanged(self, name: str | None, prefix: str | None) -> Outcome | None:
        """The outcome when the env is already exactly in place (re-running is then a no-op), else
        None. Modes that cannot tell return None and ``env-exists`` applies."""
        return None

    def prefix_for_name(self, name: str) -> str | None:
        """Where ``--name`` puts an env, when this mode has its own place (None: the tool's envs dir)."""
        return None

    def survey(self, resolution, location: Location, options: Options) -> dict:
        """What the plan depends on that only the filesystem knows (a bytecode store, a toolkit
        already installed); read here so that :meth:`plan` stays pure."""
        return {}

    @abstractmethod
    def plan(self, resolution, location: Location, options: Options, source: Source, facts: dict) -> list[Step]:
        """The steps that build ``resolution`` at ``location``; touches nothing."""

    def handlers(self) -> dict[StepKind, Handler]:
        """This mode's handlers, on top of :data:`COMMON`."""
        return {}

    def finish(self, context: Context) -> None:  # noqa: B027 - an optional hook: most modes have nothing to finish
        """After the last step, or after a failure (``context.outcome`` then partial): clean up what
        a mode keeps outside the env (system mode's toolkit staging)."""

    def hold(self, context: Context):
        """A context manager held around the steps (system mode locks its toolkit)."""
        return contextlib.nullcontext()


def apply(backend: Backend, steps: list[Step], context: Context) -> Outcome:
    """Carry out ``steps`` in staging, each with the handler its kind names. The caller rolls back
    on any exception (the staging directory goes; the target was never touched)."""
    handlers = {**COMMON, **backend.handlers()}
    total = len(steps)
    with backend.hold(context):
        try:
            for index, step in enumerate(steps, 1):
                context.reporter.step(index, total, step.title)
                started = time.monotonic()
                handlers[step.kind](step, context)
                context.reporter.done(index, total, step.title, time.monotonic() - started)
        except BaseException:
            backend.finish(context)
            raise
    backend.finish(context)
    return context.outcome


# --- handlers every mode shares ----------------------------------------------------------------


def _write(step: Step, context: Context) -> None:
    writes.put_text(
        Path(step.writes[0]), step.content + ("" if not step.content or step.content.endswith("\n") else "\n")
    )


def _attempt(step: Step, context: Context):
    """One run of ``step.argv``, its output streamed (a ``RUN`` step's); the result, failed or not."""
    # uv's and pip's downloads: on a pseudo-terminal, so that they draw their bytes for the tool's bars.
    watch: uv_progress.UvProgress | pip_progress.PipProgress | None = None
    if step.kind == StepKind.RUN and uv_progress.draws_progress(step.argv):
        watch = uv_progress.UvProgress(context.reporter)
    elif step.kind == StepKind.RUN and pip_progress.draws_progress(step.argv):
        watch = pip_progress.PipProgress(context.reporter)
    screen: dict[str, Any] = {"screen": watch.feed} if watch is not None else {}
    done = context.runner.run(
        step.argv,
        env=dict(step.env),
        on_line=context.reporter.output if step.kind == StepKind.RUN else None,
        **screen,
    )
    if done.returncode == 0 and watch is not None:
        watch.finish()
    return done


def _run(step: Step, context: Context):
    """Run ``step``'s command; with a ``fallback`` (:func:`directory_first`), run that instead when
    the command finds a package missing. A failure raises ``install-failed``."""

    done = _attempt(step, context)
    if done.stalled:
        raise stalled(step, done, context.runner.log_path)
    if done.returncode != 0 and step.fallback and run_failure(step.argv, done).not_found:
        missing = ", ".join(lacking(done.output)) or "a package"
        context.reporter.note(f"the --find-links directory lacks {missing}: again with what uv's cache holds as well")
        again = replace(step, argv=step.fallback, fallback=())
        second = _attempt(again, context)
        if second.returncode != 0:
            raise install_failed(again, second, context.runner.log_path, context.options, context.location, done)
        return second
    if done.returncode != 0 and (transient := _transient(step, done, context)) is not None:
        why, names = transient
        context.reporter.note(f"{why}: once more")
        step = replace(step, argv=(*step.argv, *(f"--refresh-package={name}" for name in names)))
        done = _attempt(step, context)
        if done.returncode != 0:
            raise install_failed(step, done, context.runner.log_path, context.options, context.location, why=why)
    if done.returncode != 0:
        raise install_failed(step, done, context.runner.log_path, context.options, context.location)
    if step.kind == StepKind.RESOLVE:
        context.facts["resolved"] = Path(step.writes[0])  # its pins: what a later install may not find
    return done


def _transient(step: Step, done, context: Context) -> tuple[str, list[str]] | None:
    """Why a uv install that failed after this build's resolve looks like the index's passing state
    (``tfgpu.engines.uv.looks_transient``), to try once more; offline, no index changes its answer."""
    lock = context.facts.get("resolved")
    if lock is None or context.options.offline or step.kind != StepKind.RUN or "install" not in step.argv[1:3]:
        return None
    return looks_transient(done.output, exact_pins(untrusted.read_text(lock, untrusted.PIP_LOCK)))


def directory_first(
    kind: StepKind, title: str, command: Callable[[tuple[str, ...]], tuple[str, ...]], sources, **fields
) -> Step:
    """The step of ``command``, a uv command that chooses files, given ``sources`` (where packages
    come from: ``tfgpu.engines.uv.sources``). Offline with a wheel directory, it reads the directory
    alone, and with uv's cache as well (its ``fallback``) only if the directory lacks a package:
    ``tfgpu.engines.uv.directory_alone`` says why. Every uv resolve and install of a build is made here."""
    alone = directory_alone(sources)
    if alone is None:
        return Step(kind, title, command(sources), **fields)
    return Step(kind, title, command(alone), fallback=command(sources), **fields)


def _resolve(step: Step, context: Context) -> None:
    _run(step, context)
    pins = exact_pins(untrusted.read_text(Path(step.writes[0]), untrusted.PIP_LOCK))
    refuse_two_stacks(pins, str(context.location.prefix))  # before anything is downloaded
    for pin in pins:
        if pin.startswith(("nvidia-", "tensorflow")):
            context.reporter.note(f"chosen: {pin}")


def _inventory(step: Step, context: Context) -> None:
    context.outcome.installed = parse_inventory(_run(step, context).output)


def _jupyter(step: Step, context: Context) -> None:
    location = context.location
    name = jupyter.register(
        location.staging, location.prefix, location.prompt, location.id, context.resolution.tensorflow
    )
    context.outcome.kernels.append(name)
    context.outcome.notes.append(f"Jupyter kernel '{name}' registered in {jupyter.kernels_dir()}")


def _marker(step: Step, context: Context) -> None:
    write_marker(context, step.payload or {})


def write_marker(context: Context, extra: dict) -> None:
    """The env's marker: identity (``tfgpu.envs.marker``), what the env holds, and ``extra`` (the
    mode's own fields: engine, channels, toolkit...)."""
    location, resolution, options = context.location, context.resolution, context.options
    lock = location.staging / "tfgpu" / "requirements.txt"
    fields = {
        "name": location.name,
        "tensorflow": resolution.tensorflow,
        "python": resolution.python,
        "cuda": resolution.cuda,
        "cudnn": resolution.cudnn,
        "min_driver": resolution.min_driver,
        "requirements": list(resolution.packages.pip),
        "locked": exact_pins(untrusted.read_text(lock, untrusted.PIP_LOCK)) if lock.exists() else [],
        "installed": context.outcome.installed,
        "find_links": options.find_links,
        "offline": options.offline,
        **({"from_lock": context.source.label} if context.source.label else {}),
        **_apart(location.staging, resolution),
        **extra,
    }
    marker.write(
        location.staging,
        env_id=location.id,
        made_for=location.real,
        kernels=tuple(context.outcome.kernels),
        fields=fields,
    )


def _apart(staging: Path, resolution) -> dict:
    """The marker's record of TensorFlow's CUDA wheels installed apart from another stack
    (``tfgpu.installers.stacks``): where, and exactly which pins; nothing for a one-stack env."""
    side = staging / "tfgpu" / APART_PINS
    if not side.is_file():
        return {}
    major = int(str(resolution.cuda or "0").split(".")[0] or 0)
    pins = exact_pins(untrusted.read_text(side, untrusted.PIP_LOCK))
    return {"cuda_apart": {"dir": APART.format(major=major), "cuda": major, "locked": pins}}


def _relocate(step: Step, context: Context) -> None:
    relocate_venv(context.location.staging, context.location.prefix)


def _commit(step: Step, context: Context) -> None:
    txn.commit(context.location)


def _note(step: Step, context: Context) -> None:
    context.outcome.notes.append(step.title)


COMMON: dict[StepKind, Handler] = {
    **{kind: _write for kind in WRITES},
    StepKind.RUN: _run,
    StepKind.RESOLVE: _resolve,
    StepKind.INVENTORY: _inventory,
    StepKind.JUPYTER: _jupyter,
    StepKind.MARKER: _marker,
    StepKind.RELOCATE: _relocate,
    StepKind.COMMIT: _commit,
    StepKind.TOOLKIT_REUSE: _note,
    StepKind.NOOP: _note,
}


def kernel_steps(location: Location, options: Options) -> list[Step]:
    """The ``--jupyter`` step, before the marker (which records the kernel's name)."""
    if not options.jupyter:
        return []

    name = jupyter.kernel_name(location.prompt, location.id)
    return [Step(StepKind.JUPYTER, f"Register the Jupyter kernel {name}", writes=(str(jupyter.kernels_dir() / name),))]
