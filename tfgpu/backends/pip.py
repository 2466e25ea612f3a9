"""pip mode: a venv built by uv (or pip), holding TensorFlow and its CUDA wheels, set up so
TensorFlow finds those wheels however the env's Python is started.

uv is the engine: ``uv venv --relocatable`` (so the env can be built in staging and moved),
``uv pip compile --generate-hashes`` once (the exact versions, stated even where TF's extra gives
ranges), then ``uv pip install`` of exactly that from uv's hard-linking cache, then bytecode
compiled so that identical files are shared between envs (``bytecode.py``).
``--engine pip`` (or no uv) uses ``python -m venv`` and pip.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from tfgpu.envs import jupyter, marker, txn
from tfgpu.envs.location import relocate_venv
from tfgpu.errors import ImpossibleError, OperationError
from tfgpu.envs import activation, bytecode
from tfgpu.backends.base import Installer, Location, Options, Outcome, Step

MARKER = marker.NAME
# Index settings that would send a locked install somewhere other than the lock's own index.
UV_INDEX_VARIABLES = ("UV_INDEX", "UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_DEFAULT_INDEX", "UV_FIND_LINKS")

_PROBLEM_LINES = re.compile(r"(error|No solution found|not found|Because|hint|Failed|unsatisfiable|"
                            r"Could not|ERROR|No matching distribution|Hash mismatch|do not match the hashes)", re.I)
_NO_NETWORK = re.compile(r"(dns error|Failed to fetch|error sending request|Could not connect|"
                         r"Network is unreachable|Temporary failure in name resolution|"
                         r"failed to lookup address|Connection refused|offline)", re.I)


def find_uv() -> str | None:
    """The uv binary shipped by the ``uv`` package, else one on PATH."""
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        return shutil.which("uv")


@dataclass(frozen=True)
class LockedOptions(Options):
    """Options for ``create --from-lock``/``--from-bundle``: pip mode installs ``locked`` (a hashed
    requirements body) as it is, with ``--require-hashes``, instead of resolving."""

    locked: str = ""
    lock_source: str = ""
    """Where the lock came from and its sha256, recorded in the env's marker."""
    lock_index: str = ""
    """The index the lock was resolved against: the install asks that index and no other."""


class PipInstaller(Installer):
    """Builds a pip-mode env; see the module docstring."""

    mode = "pip"

    def __init__(self, uv: str | None, cache_dir: Path, python: str | None) -> None:
        self.uv = uv
        self.cache_dir = cache_dir
        self.python = python
        """The interpreter to base the venv on; None lets uv provide a managed one."""
        self.pyc_store = cache_dir.parent / "pyc"

    def engine(self, options: Options) -> str:
        return "pip" if options.engine == "pip" or self.uv is None else "uv"

    def plan(self, resolution, location: Location, options: Options) -> list[Step]:
        staging = location.staging
        env_python = str(staging / "bin" / "python")
        requirements = list(resolution.packages.pip) + (["ipykernel"] if options.jupyter else [])
        req_in, req_lock = staging / "tfgpu" / "requirements.in", staging / "tfgpu" / "requirements.txt"
        sources = self._sources(options)
        site_rel = f"lib/python{resolution.python}/site-packages"
        warm = bytecode.store_has(self.pyc_store, resolution.python, resolution.tensorflow)
        locked = getattr(options, "locked", "")
        if locked:  # create --from-lock: install exactly the lock, every file checked against its hash
            steps = [Step("locked-requirements", f"Write the lock ({len(exact_pins(locked))} pinned packages, "
                          "hashes required)", writes=(str(req_lock),))]
        else:
            steps = [Step("requirements", f"Write the requirements ({len(requirements)})", writes=(str(req_in),),
                          content="\n".join(requirements) + "\n")]
        hashes = ("--require-hashes",) if locked else ()
        index_env: tuple[tuple[str, str], ...] = ()
        if locked and getattr(options, "lock_index", "") and not options.offline:
            sources += ("--default-index", options.lock_index, "--no-config")
            index_env = tuple((name, "") for name in UV_INDEX_VARIABLES)
        if self.engine(options) == "uv":
            base = self.python or resolution.python
            how = "" if self.python else f" (uv provides a managed Python {resolution.python})"
            cache = ("--cache-dir", str(self.cache_dir))
            steps += [
                Step("run", f"Create the venv with Python {resolution.python}{how}",
                     (self.uv, "venv", str(staging), "--python", base, "--relocatable", f"--prompt={location.prompt}",
                      *(("--offline",) if options.offline else ()), "--allow-existing", *cache)),
            ]
            if not locked:
                steps.append(Step("lock", "Resolve the exact versions (hashes included)",
                                  (self.uv, "pip", "compile", str(req_in), "-o", str(req_lock), "--python",
                                   env_python, "--generate-hashes", "--no-header", "--quiet", *cache, *sources),
                                  writes=(str(req_lock),)))
            steps += [
                Step("run", "Install TensorFlow and its CUDA libraries" + ("" if warm else " (compiling bytecode)"),
                     (self.uv, "pip", "install", "--python", env_python, "-r", str(req_lock), *hashes, *cache,
                      *sources, *(() if warm else ("--compile-bytecode",))), env=index_env),
                Step("bytecode-reuse" if warm else "bytecode-store",
                     "Share bytecode with earlier envs (kept in the cache)" if warm else
                     "Keep the bytecode in the cache for later envs", writes=(str(staging / site_rel),)),
                Step("inventory", "Record what was installed",
                     (self.uv, "pip", "list", "--python", env_python, "--format", "json", *cache, "--offline")),
            ]
        else:
            pip_sources = (("--no-index",) if options.offline else ()) + (
                ("--find-links", options.find_links) if options.find_links else ())
            steps += [
                Step("run", f"Create the venv with Python {resolution.python}",
                     (self.python or f"python{resolution.python}", "-m", "venv", f"--prompt={location.prompt}",
                      str(staging))),
                Step("run", "Install TensorFlow and its CUDA libraries with pip",
                     (env_python, "-m", "pip", "install", "--disable-pip-version-check", "-r",
                      str(req_lock if locked else req_in), *hashes, *pip_sources)),
                Step("inventory", "Record what was installed",
                     (env_python, "-m", "pip", "list", "--format", "json", "--disable-pip-version-check")),
            ]
        steps += [
            Step("activation", "Set up the CUDA libraries for every launch path (activate scripts, load hook, "
                 "ptxas)", writes=(str(staging / "etc" / "tfgpu"), str(staging / "bin" / "activate"))),
            *kernel_steps(location, options),
            Step("marker", "Record the environment", writes=(str(staging / MARKER),)),
            Step("relocate", "Point the venv's scripts at their final place"),
            Step("commit", f"Move the finished environment into place at {location.prefix}",
                 writes=(str(location.prefix),)),
        ]
        return steps

    def _sources(self, options: Options) -> tuple[str, ...]:
        sources: tuple[str, ...] = ()
        if options.find_links:
            sources += ("--find-links", options.find_links)
        if options.offline:
            sources += ("--offline", "--no-index")
        return sources

    def apply(self, steps, runner, reporter, *, resolution, location: Location, options: Options) -> Outcome:
        """Carry out ``steps`` in staging; the caller commits or rolls back."""
        outcome = Outcome(prefix=location.prefix, python=location.prefix / "bin" / "python")
        total = len(steps)
        for index, step in enumerate(steps, 1):
            reporter.step(index, total, step.title)
            started = time.monotonic()
            if step.kind == "locked-requirements":
                path = Path(step.writes[0])
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(options.locked, encoding="utf-8")
            elif step.kind == "requirements":
                path = Path(step.writes[0])
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(step.content, encoding="utf-8")
            elif step.kind in ("run", "lock", "inventory"):
                done = runner.run(step.argv, env=dict(step.env), on_line=reporter.output if step.kind == "run" else None)
                if done.returncode != 0:
                    raise install_failed(step, done, runner.log_path, options)
                if step.kind == "lock":
                    for pin in exact_pins(Path(step.writes[0]).read_text(encoding="utf-8")):
                        if pin.startswith(("nvidia-", "tensorflow")):
                            reporter.note(f"chosen: {pin}")
                if step.kind == "inventory":
                    outcome.installed = parse_inventory(done.output)
            elif step.kind in ("bytecode-store", "bytecode-reuse"):
                compiled, reused = bytecode.compile_site(str(location.staging / "bin" / "python"),
                                                         Path(step.writes[0]), self.pyc_store,
                                                         already_compiled=step.kind == "bytecode-store")
                bytecode.mark_stored(self.pyc_store, resolution.python, resolution.tensorflow)
                runner.log(f"bytecode: {compiled} compiled or stored, {reused} reused from the store")
                if reused:
                    reporter.note(f"bytecode: {reused} files reused from earlier envs, {compiled} compiled")
            elif step.kind == "activation":
                site = site_packages(location.staging, resolution.python)
                layout = activation.read_layout(location.staging, site)
                activation.write_venv_activation(location.staging, layout)
                outcome.notes.append(f"{len(layout.preload)} CUDA libraries preloaded by the load hook")
            elif step.kind == "jupyter":
                outcome.kernels.append(register_kernel(location, resolution))
                outcome.notes.append(f"Jupyter kernel '{outcome.kernels[-1]}' registered in {jupyter.kernels_dir()}")
            elif step.kind == "marker":
                write_marker(location, resolution, options, outcome, self.engine(options))
            elif step.kind == "relocate":
                relocate_venv(location.staging, location.prefix)
            elif step.kind == "commit":
                txn.commit(location)
            reporter.done(index, total, step.title, time.monotonic() - started)
        return outcome


def site_packages(root: Path, python: str) -> str:
    """``lib/python3.12/site-packages`` (the path every venv of that Python uses on Linux)."""
    found = sorted(root.glob("lib/python3*/site-packages"))
    return str(found[0].relative_to(root)) if found else f"lib/python{python}/site-packages"


def parse_inventory(output: str) -> dict[str, str]:
    """``{name: version}`` from ``uv pip list``/``pip list --format json`` (whose first line may be
    uv's "Using Python ... environment at" note)."""
    for line in reversed(output.splitlines()):
        if line.startswith("["):
            return {row["name"]: row["version"] for row in json.loads(line)}
    raise OperationError("install-failed", "Could not read the list of installed packages:\n" + output[-500:],
                         ["Run the same command by hand; the log has the whole output."])


def exact_pins(lock_text: str) -> list[str]:
    """``name==version`` lines of a compiled requirements file."""
    return [line.split()[0].rstrip("\\") for line in lock_text.splitlines()
            if re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[^\]]*\])?==", line)]


def kernel_steps(location: Location, options: Options) -> list[Step]:
    """The ``--jupyter`` step, before the marker (which records the kernel's name)."""
    if not options.jupyter:
        return []
    name = jupyter.kernel_name(location.prompt, location.id)
    return [Step("jupyter", f"Register the Jupyter kernel {name}", writes=(str(jupyter.kernels_dir() / name),))]


def register_kernel(location: Location, resolution) -> str:
    return jupyter.register(location.staging, location.prefix, location.prompt, location.id, resolution.tensorflow)


def write_marker(location: Location, resolution, options: Options, outcome: Outcome, engine: str,
                 **extra) -> None:
    """The env's marker (``tfgpu.envs.marker``): identity, then what the env holds and how it was built."""
    lock = location.staging / "tfgpu" / "requirements.txt"
    marker.write(location.staging, env_id=location.id, made_for=location.real, kernels=tuple(outcome.kernels),
                 fields={
                     "mode": "pip", "engine": engine, "name": location.name,
                     "tensorflow": resolution.tensorflow, "python": resolution.python, "cuda": resolution.cuda,
                     "cudnn": resolution.cudnn, "min_driver": resolution.min_driver,
                     "requirements": list(resolution.packages.pip),
                     "locked": exact_pins(lock.read_text(encoding="utf-8")) if lock.exists() else [],
                     "installed": outcome.installed, "find_links": options.find_links, "offline": options.offline,
                     **({"from_lock": options.lock_source} if getattr(options, "lock_source", "") else {}),
                     **extra,
                 })


def install_failed(step: Step, done, log_path: Path, options: Options) -> OperationError:
    """One line of what went wrong, the tool's own explanation, and what to do."""
    problem = [line.strip() for line in done.output.splitlines() if _PROBLEM_LINES.search(line)][:8]
    alternatives = []
    if _NO_NETWORK.search(done.output) and not options.offline:
        alternatives.append("No network? Build from a local wheel directory: --find-links DIR --offline.")
    if options.offline:
        alternatives.append("--offline uses only the --find-links directory and uv's cache: add the missing "
                            "wheels there (`pip download` them on a connected machine).")
    alternatives.append(f"The whole output is in {log_path}.")
    detail = "\n".join(problem) if problem else done.tail()
    return OperationError(
        "install-failed",
        f"{step.title} failed (`{Path(step.argv[0]).name} {' '.join(step.argv[1:3])}` exited {done.returncode}); "
        f"nothing was installed.\n{detail}",
        alternatives,
    )


def make_installer(resolution, options) -> PipInstaller:
    """pip mode for ``resolution``: uv (or pip with ``--engine pip``) and the Python it needs."""
    if resolution.accelerator != "cuda" or resolution.os not in ("linux", "wsl2"):
        raise ImpossibleError("mode-unsupported-here",
                              f"pip mode builds Linux environments; this plan is for {resolution.os}.",
                              ["Run tfgpu-install on the target machine itself."])
    from tfgpu.detect.interpreters import require_python
    from tfgpu.paths import cache_root

    uv = None if options.engine == "pip" else find_uv()
    python = require_python(resolution.python, can_download=uv is not None and not options.offline)
    return PipInstaller(uv, cache_root() / "uv", python)
