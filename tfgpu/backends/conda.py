"""conda mode: a conda env with the CUDA toolkit and cuDNN TensorFlow was built against, TensorFlow
from PyPI (uv, into the env's own Python), and activation that makes the env's libraries the ones
TensorFlow loads.

Engines: py-rattler by default (embedded, no conda needed; built in staging with the final prefix
patched into files, then moved); ``--engine conda|mamba|micromamba`` drives that executable
instead, at the final path (conda envs cannot be moved), with an old env put back on failure.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from dataclasses import dataclass

from tfgpu.errors import ImpossibleError
from tfgpu.envs import activation
from tfgpu.backends.base import Installer, Location, Options, Outcome, Step
from tfgpu.envs import marker, txn
from tfgpu.envs.location import relocate_venv
from tfgpu.envs.conda_envs import conda_envs_dir, find_engine, register_env
from tfgpu.backends.pip import (
    exact_pins,
    find_uv,
    install_failed,
    kernel_steps,
    parse_inventory,
    register_kernel,
    site_packages,
)

EXTERNAL = ("conda", "mamba", "micromamba")
SOLVED = Path("tfgpu") / "conda-records.json"
"""The solved (or locked) conda records, in full; not under conda-meta/, where conda reads every
``*.json`` as an installed package."""


@dataclass(frozen=True)
class LockedCondaOptions(Options):
    """``create --from-lock conda-lock.yml``: install the lock's packages as they are."""

    lock: object = None
    """The :class:`tfgpu.lock.conda_install.CondaLock` read (and checked) by the caller."""
    platform: str = "linux-64"
    bundle_dir: str | None = None
    """``create --from-bundle``: conda packages from ``bundle_dir/channel``, wheels from ``bundle_dir/wheels``."""


def conda_specs(resolution, tf_source: str) -> tuple[list[str], list[str]]:
    """(conda specs, pip requirements) for the env; ``--tf-source conda-forge`` takes TensorFlow's
    own CUDA build from conda-forge, which brings its CUDA and cuDNN as dependencies."""
    specs, pip = list(resolution.packages.conda), list(resolution.packages.pip)
    if tf_source != "conda-forge":
        return specs, pip
    from tfgpu.resolver import tables

    builds = tables.conda_forge().tensorflow_cuda
    series = ".".join(resolution.tensorflow.split(".")[:2])
    if resolution.tensorflow not in builds and series not in builds:
        newest = max(builds, key=lambda v: tuple(int(p) for p in v.split(".")))
        raise ImpossibleError(
            "no-conda-forge-build", f"conda-forge has no CUDA build of TensorFlow {resolution.tensorflow} "
            f"(its newest is {newest}).",
            [f"--tf {newest} --tf-source conda-forge", "Or drop --tf-source: TensorFlow from PyPI into the conda env."])
    python = next(s for s in specs if s.startswith("python "))
    return [python, f"tensorflow =={resolution.tensorflow} cuda*"], []


def virtual_cuda(resolution) -> str:
    """``__cuda`` for the solve: the target driver's CUDA, else the build's own (never a default)."""
    from tfgpu.resolver.drivers import cuda_for_driver

    if resolution.driver:
        found = cuda_for_driver(resolution.driver, resolution.os)
        if found:
            return found
    return ".".join((resolution.cuda or "").split(".")[:2])


class CondaInstaller(Installer):
    """Builds a conda-mode env; see the module docstring."""

    mode = "conda"

    def __init__(self, engine: str, exe: str | None, uv: str, cache: Path) -> None:
        self.engine = engine
        self.exe = exe
        self.uv = uv
        self.cache = cache
        self.in_place = engine in EXTERNAL

    def prefix_for_name(self, name: str) -> str | None:
        envs = conda_envs_dir()
        return str(envs / name) if envs else None

    def plan(self, resolution, location: Location, options: Options) -> list[Step]:
        from tfgpu.engines.rattler import channel_urls

        if getattr(options, "lock", None) is not None:
            return self._locked_plan(options.lock, options, location)
        root = location.staging
        specs, pip = conda_specs(resolution, options.tf_source)
        pip += ["ipykernel"] if options.jupyter else []
        channels = channel_urls(options.channels)
        cuda = virtual_cuda(resolution)
        records = root / SOLVED
        if self.engine == "rattler":
            steps = [
                Step("solve", f"Solve {len(specs)} conda specs with rattler (__cuda={cuda}) from {', '.join(channels)}",
                     writes=(str(records),), content="\n".join(specs)),
                Step("conda-install", "Link the conda packages into the env (hard links from the package cache)",
                     writes=(str(root),)),
            ]
        else:
            argv = [self.exe or self.engine, "create", "-y", "-p", str(root), "--override-channels",
                    *(("--offline",) if options.offline else ())]
            for channel in channels:
                argv += ["-c", channel]
            env = () if resolution.driver else (("CONDA_OVERRIDE_CUDA", cuda),)
            steps = [Step("run", f"Create the env with {self.engine}", tuple(argv + specs), env=env)]
        python = str(root / "bin" / "python")
        cache = ("--cache-dir", str(self.cache / "uv"))
        sources = (("--find-links", options.find_links) if options.find_links else ()) + (
            ("--offline", "--no-index") if options.offline else ())
        if pip:
            req_in, req_lock = root / "tfgpu" / "requirements.in", root / "tfgpu" / "requirements.txt"
            steps += [
                Step("requirements", f"Write the PyPI requirements ({len(pip)})", writes=(str(req_in),),
                     content="\n".join(pip) + "\n"),
                Step("lock", "Resolve TensorFlow's PyPI dependencies for the env's Python (hashes included)",
                     (self.uv, "pip", "compile", str(req_in), "-o", str(req_lock), "--python", python,
                      "--generate-hashes", "--no-header", "--quiet", *cache, *sources), writes=(str(req_lock),)),
                Step("run", "Install TensorFlow from PyPI into the env's Python (uv)",
                     (self.uv, "pip", "install", "--python", python, "-r", str(req_lock), "--compile-bytecode",
                      *cache, *sources)),
            ]
        steps += [
            Step("inventory", "Record what was installed",
                 (self.uv, "pip", "list", "--python", python, "--format", "json", *cache, "--offline")),
            Step("activation", "Write activate.d/deactivate.d scripts and the load hook",
                 writes=(str(root / "etc" / "conda" / "activate.d"), str(root / "etc" / "conda" / "deactivate.d"))),
            *kernel_steps(location, options),
            Step("marker", "Record the environment", writes=(str(root / marker.NAME),)),
        ]
        if not self.in_place:
            steps.append(Step("relocate", "Point the scripts uv wrote at the env's final place"))
        steps.append(Step("commit", f"Move the finished environment into place at {location.prefix}"
                          if not self.in_place else f"Keep the environment at {location.prefix}",
                          writes=(str(location.prefix),)))
        return steps

    def _locked_plan(self, lock, options, location: Location) -> list[Step]:
        """Install exactly a conda-lock.yml: its conda records, then its wheels with hashes."""
        from tfgpu.lock.conda_install import pip_requirements

        root = location.staging
        python = str(root / "bin" / "python")
        cache = ("--cache-dir", str(self.cache / "uv"))
        conda = lock.packages(options.platform, "conda")
        bundle = options.bundle_dir
        pip = pip_requirements(lock, options.platform, pinned=bundle is not None)
        sources = ("--find-links", str(Path(bundle) / "wheels"), "--offline", "--no-index") if bundle else (
            ("--offline",) if options.offline else ())
        where = "the bundle's channel" if bundle else "their channels"
        steps = [Step("locked-conda", f"Read the {len(conda)} locked conda packages from {where} and check "
                      "their sha256", writes=(str(root / SOLVED),)),
                 Step("conda-install", "Link the conda packages into the env (hard links from the package cache)",
                      writes=(str(root),))]
        if pip:
            lock_file = root / "tfgpu" / "requirements.txt"
            steps += [Step("requirements", f"Write the lock's {pip.count(chr(10))} wheels with their sha256",
                           writes=(str(lock_file),), content=pip),
                      Step("run", "Install the locked wheels (every hash required, no resolution)",
                           (self.uv, "pip", "install", "--python", python, "-r", str(lock_file), "--require-hashes",
                            "--no-deps", "--compile-bytecode", *cache, *sources))]
        return steps + [
            Step("inventory", "Record what was installed",
                 (self.uv, "pip", "list", "--python", python, "--format", "json", *cache, "--offline")),
            Step("activation", "Write activate.d/deactivate.d scripts and the load hook",
                 writes=(str(root / "etc" / "conda" / "activate.d"), str(root / "etc" / "conda" / "deactivate.d"))),
            *kernel_steps(location, options),
            Step("marker", "Record the environment", writes=(str(root / marker.NAME),)),
            Step("relocate", "Point the scripts uv wrote at the env's final place"),
            Step("commit", f"Move the finished environment into place at {location.prefix}",
                 writes=(str(location.prefix),)),
        ]

    def apply(self, steps, runner, reporter, *, resolution, location: Location, options: Options) -> Outcome:
        """Carry out ``steps``; the caller rolls back on any exception."""
        from tfgpu.engines import rattler as rattler_engine

        outcome = Outcome(prefix=location.prefix, python=location.prefix / "bin" / "python",
                          activate=f"conda activate {location.prefix}")
        records: list = []
        for index, step in enumerate(steps, 1):
            reporter.step(index, len(steps), step.title)
            started = time.monotonic()
            if step.kind == "solve":
                channels = rattler_engine.channel_urls(options.channels)
                records = rattler_engine.solve(step.content.splitlines(), channels, platform="linux-64",
                                               cuda=virtual_cuda(resolution),
                                               glibc=None, repodata_cache=self.cache / "conda" / "repodata",
                                               offline=options.offline)
                runner.log("solved: " + ", ".join(f"{r.name.normalized}={r.version}={r.build}" for r in records))
            elif step.kind == "locked-conda":
                from tfgpu.lock.conda_install import locked_records

                bundle = options.bundle_dir
                records = locked_records(options.lock, options.platform, self.cache / "conda" / "repodata",
                                         options.offline,
                                         channel_override=(Path(bundle) / "channel").as_uri() if bundle else None)
            elif step.kind == "conda-install":
                rattler_engine.install(records, location.staging, location.prefix,
                                       package_cache=self.cache / "conda" / "verified-pkgs", reporter=reporter,
                                       offline=options.offline)
                rattler_engine.write_records(records, location.staging / SOLVED)
                (location.staging / "CACHEDIR.TAG").unlink(missing_ok=True)  # rattler's; backup tools skip tagged dirs
            elif step.kind == "requirements":
                path = Path(step.writes[0])
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(step.content, encoding="utf-8")
            elif step.argv:
                done = runner.run(step.argv, env=dict(step.env), on_line=reporter.output if step.kind == "run" else None)
                if done.returncode != 0:
                    raise install_failed(step, done, runner.log_path, options)
                if step.kind == "inventory":
                    outcome.installed = parse_inventory(done.output)
            elif step.kind == "activation":
                site = site_packages(location.staging, resolution.python)
                layout = activation.read_conda_layout(location.staging, site)
                activation.write_conda_activation(location.staging, layout, windows=resolution.os == "windows")
                outcome.notes.append(f"{len(layout.preload)} CUDA libraries from the env's lib/ preloaded by the "
                                     "load hook")
            elif step.kind == "jupyter":
                outcome.kernels.append(register_kernel(location, resolution))
                outcome.notes.append(f"Jupyter kernel '{outcome.kernels[-1]}' registered")
            elif step.kind == "marker":
                self._write_marker(location, resolution, options, outcome)
            elif step.kind == "relocate":
                relocate_venv(location.staging, location.prefix)  # uv's entry points; conda's files are patched
            elif step.kind == "commit":
                txn.commit(location)
                register_env(location.prefix)
            reporter.done(index, len(steps), step.title, time.monotonic() - started)
        return outcome

    def _write_marker(self, location: Location, resolution, options: Options, outcome: Outcome) -> None:
        root = location.staging
        solved = root / SOLVED
        conda = json.loads(solved.read_text(encoding="utf-8")) if solved.exists() else [
            json.loads(p.read_text(encoding="utf-8")) for p in sorted((root / "conda-meta").glob("*.json"))]
        lock = root / "tfgpu" / "requirements.txt"
        marker.write(root, env_id=location.id, made_for=location.real, kernels=tuple(outcome.kernels), fields={
            "mode": "conda", "engine": self.engine, "name": location.name,
            "tensorflow": resolution.tensorflow, "python": resolution.python, "cuda": resolution.cuda,
            "cudnn": resolution.cudnn, "min_driver": resolution.min_driver, "virtual_cuda": virtual_cuda(resolution),
            "channels": list(options.channels), "tf_source": options.tf_source,
            "lock": str(options.lock.path) if getattr(options, "lock", None) is not None else None,
            "conda": [f"{p['name']}={p['version']}={p['build']}" for p in conda if isinstance(p, dict) and "name" in p],
            "requirements": list(resolution.packages.pip),
            "locked": exact_pins(lock.read_text(encoding="utf-8")) if lock.exists() else [],
            "installed": outcome.installed, "offline": options.offline,
        })

def make_installer(resolution, options: Options) -> CondaInstaller:
    """conda mode for ``resolution`` with the chosen engine."""
    if resolution.accelerator != "cuda" or resolution.os not in ("linux", "wsl2"):
        raise ImpossibleError("mode-unsupported-here",
                              f"tfgpu-install builds conda envs for Linux and WSL2; this plan is for {resolution.os}.",
                              ["Run tfgpu-install on the target machine itself, or export a script: "
                               "`tfgpu-install script --format bash --mode conda`."])
    from tfgpu.engines.rattler import channel_urls, check_channels
    from tfgpu.paths import cache_root

    check_channels(channel_urls(options.channels))
    engine = options.engine or "rattler"
    if getattr(options, "lock", None) is not None and engine != "rattler":
        raise ImpossibleError("engine-cannot-install-lock", f"--engine {engine} cannot install a tfgpu conda lock "
                              "with its hashes checked first.",
                              ["Drop --engine (the embedded engine installs it), or `conda-lock install` the file."])
    exe = None
    if engine in EXTERNAL:
        exe = find_engine(engine)
        if exe is None:
            raise ImpossibleError("engine-not-found", f"--engine {engine}: no `{engine}` executable on PATH.",
                                  ["Drop --engine: the embedded engine (rattler) needs no conda installation.",
                                   f"Or install {engine}, or put it on PATH."])
    uv = find_uv()
    if uv is None:
        raise ImpossibleError("uv-missing", "uv is needed to install TensorFlow into the conda env, and none was found.",
                              ["Reinstall tfgpu-install (it depends on the `uv` package)."])
    return CondaInstaller(engine, exe, uv, cache_root())
