"""conda mode: a conda env with the CUDA toolkit and cuDNN TensorFlow was built against, TensorFlow
from PyPI (uv, into the env's own Python), and activation that makes the env's libraries the ones
TensorFlow loads.

Engines: py-rattler by default (embedded, no conda needed; built in staging with the final prefix
patched into files, then moved); ``--engine conda|mamba|micromamba`` drives that executable
instead, at the final path (conda envs cannot be moved), with an old env put back on failure.
From a conda lock or bundle (``Source``), the locked records are read from their channels (or the
bundle's) and checked against the lock before anything is linked, and the locked wheels are
installed with every hash required.
"""

from __future__ import annotations

from pathlib import Path

from tfgpu.doors import untrusted
from tfgpu.doors.paths import cache_root
from tfgpu.doors.quoting import sh
from tfgpu.doors.requirements import lines
from tfgpu.engines import rattler_engine
from tfgpu.engines import uv as uv_engine
from tfgpu.envs import activation, marker, txn, writes
from tfgpu.envs.conda_envs import conda_envs_dir, find_engine, register_env
from tfgpu.errors import ImpossibleError
from tfgpu.installers.base import (
    Backend,
    Context,
    Location,
    Options,
    Source,
    Step,
    StepKind,
    directory_first,
    kernel_steps,
    write_marker,
)
from tfgpu.installers.engine import RattlerEngine, UvEngine
from tfgpu.installers.pip import IPYKERNEL, site_packages
from tfgpu.resolver import tables

EXTERNAL = ("conda", "mamba", "micromamba")
SOLVED = Path("tfgpu") / "conda-records.json"
"""The solved (or locked) conda records, in full; not under conda-meta/, where conda reads every
``*.json`` as an installed package."""


class CondaBackend(Backend):
    """Builds a conda-mode env; see the module docstring."""

    mode = "conda"

    def __init__(self, engine: str, exe: str | None, uv: str | UvEngine, cache: Path) -> None:
        self.engine = engine
        self.exe = exe
        self.cache = cache
        self.pypi = uv if isinstance(uv, UvEngine) else UvEngine(uv, cache / "uv")
        """uv, for TensorFlow's PyPI part (with ``tfgpu.cache.uv_cache``'s cache, or the tool's own)."""
        self.uv = self.pypi.uv
        self.conda = RattlerEngine(cache)
        """rattler, with the tool's repodata cache and verified package store (``tfgpu.installers.engine``)."""
        self.in_place = engine in EXTERNAL

    def prefix_for_name(self, name: str) -> str | None:
        envs = conda_envs_dir()
        return str(envs / name) if envs else None

    def plan(self, resolution, location: Location, options: Options, source: Source, facts: dict) -> list[Step]:
        root = location.staging
        python = str(root / "bin" / "python")
        uv = self.pypi
        if source.locked:
            steps = self._locked_packages(root, source)
            pip_text = source.requirements
            sources: tuple[str, ...] = (
                ("--find-links", str(source.bundle / "wheels"), "--offline", "--no-index")
                if source.bundle
                else (("--offline",) if options.offline else ())
            )
            if pip_text:
                lock_file = root / "tfgpu" / "requirements.txt"
                steps += [
                    Step(
                        StepKind.REQUIREMENTS,
                        f"Write the lock's {pip_text.count(chr(10))} wheels with their sha256",
                        writes=(str(lock_file),),
                        content=pip_text,
                    ),
                    directory_first(
                        StepKind.RUN,
                        "Install the locked wheels (every hash required, no resolution)",
                        lambda extra: uv.install_command(python, lock_file, extra, hashes=True, no_deps=True),
                        sources,
                    ),
                ]
        else:
            specs, pip = rattler_engine.conda_specs(resolution)
            pip += [IPYKERNEL] if options.jupyter else []
            steps = self._solved_packages(resolution, root, specs, options)
            sources = uv_engine.sources(options.find_links, options.offline)
            if pip:
                req_in, req_lock = root / "tfgpu" / "requirements.in", root / "tfgpu" / "requirements.txt"
                steps += [
                    Step(
                        StepKind.REQUIREMENTS,
                        f"Write the PyPI requirements ({len(pip)})",
                        writes=(str(req_in),),
                        content=lines(pip),
                    ),
                    directory_first(
                        StepKind.RESOLVE,
                        "Resolve TensorFlow's PyPI dependencies for the env's Python (hashes included)",
                        lambda extra: uv.compile_hashed(req_in, req_lock, python, extra),
                        sources,
                        writes=(str(req_lock),),
                    ),
                    directory_first(
                        StepKind.RUN,
                        "Install TensorFlow from PyPI into the env's Python (uv)",
                        lambda extra: uv.install_command(python, req_lock, extra),
                        sources,
                    ),
                ]
        steps += [
            Step(StepKind.INVENTORY, "Record what was installed", uv.inventory(python)),
            Step(
                StepKind.ACTIVATION,
                "Write activate.d/deactivate.d scripts and the load hook",
                writes=(str(root / "etc" / "conda" / "activate.d"), str(root / "etc" / "conda" / "deactivate.d")),
            ),
            *kernel_steps(location, options),
            Step(
                StepKind.MARKER,
                "Record the environment",
                writes=(str(root / marker.NAME),),
                payload={
                    "mode": "conda",
                    "engine": self.engine,
                    "virtual_cuda": rattler_engine.virtual_cuda(resolution),
                    "channels": list(options.channels),
                    "tf_source": resolution.tensorflow_source,
                    "lock": source.lock_path or None,
                },
            ),
        ]
        if not self.in_place:
            steps.append(Step(StepKind.RELOCATE, "Point the scripts uv wrote at the env's final place"))
        steps.append(
            Step(
                StepKind.COMMIT,
                f"Move the finished environment into place at {location.prefix}"
                if not self.in_place
                else f"Keep the environment at {location.prefix}",
                writes=(str(location.prefix),),
            )
        )
        return steps

    def _solved_packages(self, resolution, root: Path, specs: list[str], options: Options) -> list[Step]:
        channels = rattler_engine.channel_urls(options.channels)
        cuda = rattler_engine.virtual_cuda(resolution)
        if self.engine == "rattler":
            return [
                Step(
                    StepKind.SOLVE,
                    f"Solve {len(specs)} conda specs with rattler (__cuda={cuda}) from {', '.join(channels)}",
                    writes=(str(root / SOLVED),),
                    content="\n".join(specs),
                    payload={"channels": channels, "cuda": cuda},
                ),
                Step(
                    StepKind.CONDA_LINK,
                    "Link the conda packages into the env (hard links from the package cache)",
                    writes=(str(root),),
                ),
            ]
        argv = [
            self.exe or self.engine,
            "create",
            "-y",
            "-p",
            str(root),
            "--override-channels",
            *(("--offline",) if options.offline else ()),
        ]
        for channel in channels:
            argv += ["-c", channel]
        env = () if resolution.driver else (("CONDA_OVERRIDE_CUDA", cuda),)
        return [Step(StepKind.RUN, f"Create the env with {self.engine}", tuple(argv + specs), env=env)]

    def _locked_packages(self, root: Path, source: Source) -> list[Step]:
        where = "the bundle's channel" if source.bundle else "their channels"
        return [
            Step(
                StepKind.LOCKED_CONDA,
                f"Read the {len(source.conda)} locked conda packages from {where} and check their sha256",
                writes=(str(root / SOLVED),),
                content="\n".join(f"{p.name}=={p.version} sha256:{p.sha256}" for p in source.conda),
            ),
            Step(
                StepKind.CONDA_LINK,
                "Link the conda packages into the env (hard links from the package cache)",
                writes=(str(root),),
            ),
        ]

    def handlers(self) -> dict:
        return {
            StepKind.SOLVE: self._solve,
            StepKind.LOCKED_CONDA: self._locked,
            StepKind.CONDA_LINK: self._link,
            StepKind.ACTIVATION: _conda_activation,
            StepKind.MARKER: _conda_marker,
            StepKind.COMMIT: _commit_and_register,
        }

    def _solve(self, step: Step, context: Context) -> None:
        records = self.conda.solve(
            step.content.splitlines(),
            step.payload["channels"],
            cuda=step.payload["cuda"],
            offline=context.options.offline,
            runner=context.runner,
        )
        context.runner.log("solved: " + ", ".join(f"{r.name.normalized}={r.version}={r.build}" for r in records))
        context.facts["records"] = records

    def _locked(self, step: Step, context: Context) -> None:
        source = context.source
        context.facts["records"] = self.conda.locked(
            source.conda,
            list(source.channels),
            offline=context.options.offline,
            local_channel=(source.bundle / "channel").as_uri() if source.bundle else None,
            runner=context.runner,
        )

    def _link(self, step: Step, context: Context) -> None:
        location, records = context.location, context.facts["records"]
        self.conda.link(
            records,
            location.staging,
            location.prefix,
            reporter=context.reporter,
            offline=context.options.offline,
            runner=context.runner,
        )
        rattler_engine.write_records(records, location.staging / SOLVED)
        writes.delete(location.staging / "CACHEDIR.TAG")  # rattler's; backup tools skip tagged dirs


def _conda_activation(step: Step, context: Context) -> None:
    staging = context.location.staging
    layout = activation.read_conda_layout(
        staging, site_packages(staging, context.resolution.python), tables.dlopened_names()
    )
    activation.write_conda_activation(staging, layout, windows=context.resolution.os == "windows")
    context.outcome.notes.append(f"{len(layout.preload)} CUDA libraries from the env's lib/ preloaded by the load hook")


def _conda_marker(step: Step, context: Context) -> None:
    root = context.location.staging
    solved = root / SOLVED
    conda = (
        untrusted.json_or_none(solved, untrusted.ENV_FILE)
        if solved.exists()
        else [untrusted.json_or_none(p, untrusted.ENV_FILE) for p in sorted((root / "conda-meta").glob("*.json"))]
    )
    conda = conda if isinstance(conda, list) else []
    listed = [f"{p['name']}={p['version']}={p['build']}" for p in conda if isinstance(p, dict) and "name" in p]
    write_marker(context, {**step.payload, "conda": listed})


def _commit_and_register(step: Step, context: Context) -> None:
    txn.commit(context.location)
    register_env(context.location.prefix)
    context.outcome.activate = f"conda activate {sh(str(context.location.prefix))}"


def make_backend(resolution, options: Options, source: Source | None = None) -> CondaBackend:
    """conda mode for ``resolution`` with the chosen engine."""
    if resolution.accelerator != "cuda" or resolution.os not in ("linux", "wsl2"):
        raise ImpossibleError(
            "mode-unsupported-here",
            f"tfgpu-install builds conda envs for Linux and WSL2; this plan is for {resolution.os}.",
            [
                "Run tfgpu-install on the target machine itself, or export a script: "
                "`tfgpu-install script --format bash --mode conda`."
            ],
        )

    rattler_engine.check_channels(rattler_engine.channel_urls(options.channels))
    engine = options.engine or "rattler"
    if source is not None and source.locked and engine != "rattler":
        raise ImpossibleError(
            "engine-cannot-install-lock",
            f"--engine {engine} cannot install a tfgpu conda lock with its hashes checked first.",
            ["Drop --engine (the embedded engine installs it), or `conda-lock install` the file."],
        )
    exe = None
    if engine in EXTERNAL:
        exe = find_engine(engine)
        if exe is None:
            raise ImpossibleError(
                "engine-not-found",
                f"--engine {engine}: no `{engine}` executable on PATH.",
                [
                    "Drop --engine: the embedded engine (rattler) needs no conda installation.",
                    f"Or install {engine}, or put it on PATH.",
                ],
            )
    backend = CondaBackend(engine, exe, UvEngine.found("Installing TensorFlow into a conda env"), cache_root())
    backend.cache_note = backend.pypi.cache_note
    return backend
