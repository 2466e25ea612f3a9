"""pip mode: a venv built by uv (or pip), holding TensorFlow and its CUDA wheels, set up so
TensorFlow finds those wheels however the env's Python is started.

uv is the engine: ``uv venv --relocatable`` (so the env can be built in staging and moved),
``uv pip compile --generate-hashes`` once (the exact versions, stated even where TF's extra gives
ranges), then ``uv pip install`` of exactly that from uv's hard-linking cache, then bytecode
shared between envs (``tfgpu.envs.bytecode``). ``--engine pip`` (or no uv) uses ``python -m venv``
and pip. From a lock or bundle (``Source``), the lock's body is written as it is and installed with
every hash required, from the lock's own index (or the bundle's wheels, offline). A resolution that
holds TensorFlow's CUDA stack and another framework's keeps TensorFlow's CUDA wheels apart, in
``lib/tfgpu/cudaNN`` (``tfgpu.installers.stacks``; docs/modes.md).
"""

from __future__ import annotations

from pathlib import Path

from tfgpu.cache import uv_cache
from tfgpu.cache.dedupe import one_copy
from tfgpu.detect.interpreters import require_python
from tfgpu.doctor import ownership
from tfgpu.doctor.reads import RunReads, unfinished_lines
from tfgpu.doors import untrusted
from tfgpu.doors.paths import cache_root
from tfgpu.doors.requirements import lines, requirement
from tfgpu.engines import uv as uv_engine
from tfgpu.engines.uv import exact_pins
from tfgpu.envs import activation, bytecode, marker, writes
from tfgpu.errors import ImpossibleError
from tfgpu.installers import stacks
from tfgpu.installers.base import (
    Backend,
    Context,
    Location,
    Options,
    Source,
    Step,
    StepKind,
    _run,
    directory_first,
    kernel_steps,
)
from tfgpu.installers.engine import UvEngine
from tfgpu.installers.stacks import APART, refuse_files_owned_twice
from tfgpu.records import replace
from tfgpu.resolver import tables

IPYKERNEL = requirement("ipykernel", what="--jupyter")


class PipBackend(Backend):
    """Builds a pip-mode env; see the module docstring."""

    mode = "pip"

    def __init__(
        self,
        uv: str | None,
        cache_dir: Path,
        python: str | None,
        pyc_store: Path | None = None,
        packages: UvEngine | None = None,
    ) -> None:
        self.uv = uv
        self.packages = packages or (UvEngine(uv, cache_dir) if uv is not None else None)
        """The engine every uv command of the build comes from (``tfgpu.installers.engine``)."""
        self.cache_dir = cache_dir
        """uv's package cache (``tfgpu.cache.uv_cache``: the user's own, or the tool's)."""
        self.python = python
        """The interpreter to base the venv on; None lets uv provide a managed one."""
        self.pyc_store = pyc_store or cache_dir.parent / "pyc"
        self.own_cache = False
        """``cache_dir`` is the tool's own (not the user's uv cache): the tool may relink files in it."""
        """The bytecode store: always in the tool's own cache, even when uv's cache is the user's."""

    def engine(self, options: Options) -> str:
        return "pip" if options.engine == "pip" or self.uv is None else "uv"

    def survey(self, resolution, location: Location, options: Options) -> dict:
        return {"warm": bytecode.store_has(self.pyc_store, resolution.python, resolution.tensorflow)}

    def plan(
        self,
        resolution,
        location: Location,
        options: Options,
        source: Source,
        facts: dict,
        libraries: str = "and its CUDA libraries",
    ) -> list[Step]:
        """``libraries``: how the install step names what comes with TensorFlow (system mode's CUDA
        comes from its toolkit, not from wheels)."""
        staging = location.staging
        env_python = str(staging / "bin" / "python")
        req_in, req_lock = staging / "tfgpu" / "requirements.in", staging / "tfgpu" / "requirements.txt"
        sources = uv_engine.sources(options.find_links, options.offline, only_find_links=source.kind == "bundle")
        index_env: tuple[tuple[str, str], ...] = ()
        if source.locked:  # install exactly the lock, every file checked against its hash
            count = len(uv_engine.exact_pins(source.requirements))
            steps = [
                Step(
                    StepKind.LOCKED_REQUIREMENTS,
                    f"Write the lock ({count} pinned packages, hashes required)",
                    writes=(str(req_lock),),
                    content=source.requirements,
                )
            ]
            if source.index and not options.offline:
                extra, index_env = uv_engine.locked_index(source.index)
                sources += extra
        else:
            requirements = list(resolution.packages.pip) + ([IPYKERNEL] if options.jupyter else [])
            steps = [
                Step(
                    StepKind.REQUIREMENTS,
                    f"Write the requirements ({len(requirements)})",
                    writes=(str(req_in),),
                    content=lines(requirements),
                )
            ]
        title = f"Install TensorFlow {libraries}".rstrip()
        if self.engine(options) == "uv":
            uv = self.packages
            assert uv is not None  # the engine is uv only where uv was found
            warm = facts.get("warm", False)
            cache = self.cache_dir
            how = "" if self.python else f" (uv provides a managed Python {resolution.python})"
            steps.append(
                Step(
                    StepKind.RUN,
                    f"Create the venv with Python {resolution.python}{how}",
                    uv.venv(staging, self.python or resolution.python, location.prompt, offline=options.offline),
                )
            )
            if not source.locked:
                steps.append(
                    directory_first(
                        StepKind.RESOLVE,
                        "Resolve the exact versions (hashes included)",
                        lambda extra: uv.compile_hashed(req_in, req_lock, env_python, extra),
                        sources,
                        writes=(str(req_lock),),
                    )
                )
            site = f"lib/python{resolution.python}/site-packages"
            steps += [
                directory_first(
                    StepKind.RUN,
                    title + ("" if warm else " (compiling bytecode)"),
                    lambda extra: uv.install_command(
                        env_python, req_lock, extra, hashes=source.locked, compile_bytecode=not warm
                    ),
                    sources,
                    env=index_env,
                ),
                *(
                    (
                        Step(
                            StepKind.CACHE_DEDUPE,
                            "Keep one copy of wheels uv's cache holds twice (--find-links and the index)",
                            writes=(str(cache), str(staging)),
                        ),
                    )
                    if options.find_links and self.own_cache
                    else ()
                ),
                Step(
                    StepKind.BYTECODE_REUSE,
                    "Share bytecode with earlier envs (kept in the cache)",
                    writes=(str(staging / site),),
                )
                if warm
                else Step(
                    StepKind.BYTECODE_STORE,
                    "Keep the bytecode in the cache for later envs",
                    writes=(str(staging / site),),
                ),
                Step(
                    StepKind.INVENTORY,
                    "Record what was installed",
                    uv.inventory(env_python),
                ),
            ]
        else:
            pip_sources = (("--no-index",) if options.offline or source.kind == "bundle" else ()) + (
                ("--find-links", options.find_links) if options.find_links else ()
            )
            if source.locked:  # the lock's own index and no other: pip's variables and config are ignored
                asks_index = source.index and "--no-index" not in pip_sources
                pip_sources = (
                    "--isolated",
                    *pip_sources,
                    *(uv_engine.pip_locked_index(source.index) if asks_index else ()),
                )
            steps += [
                Step(
                    StepKind.RUN,
                    f"Create the venv with Python {resolution.python}",
                    (
                        self.python or f"python{resolution.python}",
                        "-m",
                        "venv",
                        f"--prompt={location.prompt}",
                        str(staging),
                    ),
                ),
                Step(
                    StepKind.RUN,
                    f"{title} with pip",
                    (
                        env_python,
                        "-m",
                        "pip",
                        "install",
                        "--disable-pip-version-check",
                        "-r",
                        str(req_lock if source.locked else req_in),
                        *(("--require-hashes",) if source.locked else ()),
                        *pip_sources,
                    ),
                ),
                Step(
                    StepKind.INVENTORY,
                    "Record what was installed",
                    (env_python, "-m", "pip", "list", "--format", "json", "--disable-pip-version-check"),
                ),
            ]
        steps += [
            Step(
                StepKind.ACTIVATION,
                "Set up the CUDA libraries for every launch path (activate scripts, load hook, ptxas)",
                writes=(str(staging / "etc" / "tfgpu"), str(staging / "bin" / "activate")),
            ),
            *kernel_steps(location, options),
            Step(
                StepKind.MARKER,
                "Record the environment",
                writes=(str(staging / marker.NAME),),
                payload={"mode": "pip", "engine": self.engine(options)},
            ),
            Step(StepKind.RELOCATE, "Point the venv's scripts at their final place"),
            Step(
                StepKind.COMMIT,
                f"Move the finished environment into place at {location.prefix}",
                writes=(str(location.prefix),),
            ),
        ]
        return steps

    def handlers(self) -> dict:
        return {
            StepKind.RESOLVE: self._resolve,
            StepKind.BYTECODE_STORE: self._bytecode,
            StepKind.BYTECODE_REUSE: self._bytecode,
            StepKind.ACTIVATION: _wheel_activation,
            StepKind.CACHE_DEDUPE: _one_copy,
        }

    def _resolve(self, step: Step, context: Context) -> None:
        """``uv pip compile``, then, when the pins hold TensorFlow's CUDA stack and another one (a
        framework built for CUDA 13 next to TensorFlow's CUDA 12), TensorFlow's stack is cut out of
        the lock and installed now into its own directory of the env (``stacks.APART``), so that no
        file is owned by two distributions; the install step then installs the rest as usual."""
        _run(step, context)
        lock = Path(step.writes[0])
        text = untrusted.read_text(lock, untrusted.PIP_LOCK)
        pins = exact_pins(text)
        found = stacks.stacks_of_pins(pins)
        own = int(str(context.resolution.cuda or "0").split(".")[0] or 0)
        if len(found) > 1 and own in found and self.engine(context.options) == "uv":
            uv = self.uv
            assert uv is not None  # the engine is uv only where uv was found
            main, apart = stacks.split_lock(text, own)
            side = lock.parent / stacks.APART_PINS
            writes.put_text(side, apart)
            writes.put_text(lock, main)
            target = context.location.staging / stacks.APART.format(major=own)
            sources = uv_engine.sources(context.options.find_links, context.options.offline)
            python = str(context.location.staging / "bin" / "python")

            def install_apart(extra: tuple[str, ...]) -> tuple[str, ...]:
                assert self.packages is not None  # two stacks are installed only by uv
                argv = self.packages.install_command(python, side, extra, no_deps=True, compile_bytecode=False)
                return (*argv, "--target", str(target))

            others = ", ".join(f"CUDA {m}" for m in found if m != own)
            context.reporter.note(
                f"two CUDA stacks (CUDA {own} for TensorFlow, {others}): TensorFlow's CUDA {own} wheels go to "
                f"{stacks.APART.format(major=own)}, apart from site-packages"
            )
            _run(
                directory_first(StepKind.RUN, f"Install TensorFlow's CUDA {own} wheels apart", install_apart, sources),
                context,
            )
        else:
            stacks.refuse_two_stacks(pins, str(context.location.prefix))
        for pin in exact_pins(untrusted.read_text(lock, untrusted.PIP_LOCK)):
            if pin.startswith(("nvidia-", "tensorflow")):
                context.reporter.note(f"chosen: {pin}")

    def _bytecode(self, step: Step, context: Context) -> None:
        resolution = context.resolution
        compiled, reused = bytecode.compile_site(
            context.runner,
            str(context.location.staging / "bin" / "python"),
            Path(step.writes[0]),
            self.pyc_store,
            already_compiled=step.kind is StepKind.BYTECODE_STORE,
        )
        bytecode.mark_stored(self.pyc_store, resolution.python, resolution.tensorflow)
        context.runner.log(f"bytecode: {compiled} compiled or stored, {reused} reused from the store")
        if reused:
            context.reporter.note(f"bytecode: {reused} files reused from earlier envs, {compiled} compiled")


def _one_copy(step: Step, context: Context) -> None:
    """uv keeps a ``--find-links`` directory's wheels apart from the index's, each unpacked: the
    second copy becomes links to the first, the new env's files too (``tfgpu.cache.dedupe``)."""
    done = one_copy(Path(step.writes[0]), Path(step.writes[1]))
    context.runner.log(f"cache: {done.files} files of wheels unpacked twice relinked, {done.bytes} bytes")
    if done.files:
        context.reporter.note(f"{done.bytes / 1e6:.1f} MB of wheels uv had unpacked twice now kept once")


def _wheel_activation(step: Step, context: Context) -> None:
    staging = context.location.staging
    site = site_packages(staging, context.resolution.python)

    refuse_files_owned_twice(staging / site, str(context.location.prefix))
    own = int(str(context.resolution.cuda or "0").split(".")[0] or 0)
    reads = RunReads()  # one budget for every library the hook's planning reads
    apart = APART.format(major=own)
    if (staging / apart).is_dir():  # two stacks: TensorFlow's CUDA wheels were installed apart (_resolve)
        layout = activation.read_apart_layout(staging, site, apart, tables.dlopened_names())
        # The other stack's libraries in site-packages dlopen names too (its cuDNN 9 asks for
        # "libnvrtc.so"), and TensorFlow uses some of them (the hook loads them first): provided
        # inside the env as well, or the system toolkit's copy answers (seen on an H200).
        theirs = activation.read_layout(staging, site, tables.dlopened_names()).links
        layout = replace(layout, links=tuple(sorted(set(layout.links) | set(theirs))))
        other = ownership.colliding_apart(staging / site, staging / apart, own, reads)
        context.outcome.notes.append(f"TensorFlow's CUDA {own} wheels are in {apart}, apart from the other stack")
    else:
        layout = activation.read_layout(staging, site, tables.dlopened_names())
        other = ownership.other_stack_first(staging / site, reads)
    for line in unfinished_lines(reads, staging):  # the hook may miss what such a library would have added
        context.outcome.notes.append(f"for the load hook's order, {line}")
    layout = replace(layout, other_first=other)
    activation.write_venv_activation(staging, layout)
    context.outcome.notes.append(f"{len(layout.preload)} CUDA libraries preloaded by the load hook")
    if layout.other_first:
        context.outcome.notes.append(
            f"two CUDA stacks: the load hook loads {len(layout.other_first)} of the other stack's libraries first"
        )


def site_packages(root: Path, python: str) -> str:
    """``lib/python3.12/site-packages`` (the path every venv of that Python uses on Linux)."""
    found = sorted(root.glob("lib/python3*/site-packages"))
    return str(found[0].relative_to(root)) if found else f"lib/python{python}/site-packages"


def make_backend(resolution, options) -> PipBackend:
    """pip mode for ``resolution``: uv (or pip with ``--engine pip``) and the Python it needs."""
    if resolution.accelerator != "cuda" or resolution.os not in ("linux", "wsl2"):
        raise ImpossibleError(
            "mode-unsupported-here",
            f"pip mode builds Linux environments; this plan is for {resolution.os}.",
            ["Run tfgpu-install on the target machine itself."],
        )

    uv = None if options.engine == "pip" else uv_engine.find_uv()
    python = require_python(resolution.python, can_download=uv is not None and not options.offline)
    cache = uv_cache(uv)
    packages = UvEngine(uv, cache.path, why=cache.why, shared=cache.shared) if uv is not None else None
    backend = PipBackend(uv, cache.path, python, cache_root() / "pyc", packages)
    backend.cache_note = f"uv cache: {cache.path} ({cache.why})"
    backend.own_cache = not cache.shared
    return backend
