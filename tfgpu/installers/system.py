"""system mode: NVIDIA's CUDA runfile (toolkit only, never the driver) and the cuDNN archive,
then a venv with plain ``tensorflow`` whose activation and load hook put that toolkit first.

Where things go (docs/modes.md, "System mode"):

* ``--prefix P``: everything under P, no root needed: the venv is P itself, the toolkit (with
  cuDNN unpacked into it) is ``P/cuda``; built in P's staging directory and moved into place.
* ``--name N`` (or no location): the toolkit goes to ``/usr/local/cuda-X.Y`` with
  ``/etc/profile.d`` and ``/etc/ld.so.conf.d`` entries and ``ldconfig`` (root only; refused
  otherwise before anything is downloaded), the venv to the envs directory. A toolkit already
  there from the same files (its marker says so) is used as it is.

The venv half is pip mode's plan, taken step by step by kind: its activation step uses this
mode's layout (the toolkit's libraries) and its marker records the toolkit. Downloads are verified
and cached (``tfgpu.engines.download``); a re-run with everything in place is a no-op (``unchanged``).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from tfgpu.doors.paths import cache_root
from tfgpu.doors.urls import parse
from tfgpu.engines import nvidia
from tfgpu.engines.download import fetch
from tfgpu.envs import activation, txn, writes
from tfgpu.envs import marker as env_marker
from tfgpu.envs.location import envs_dir, prefix_for
from tfgpu.errors import ImpossibleError, OperationError
from tfgpu.installers import system_toolkit as tk
from tfgpu.installers.base import Backend, Context, Location, Options, Outcome, Source, Step, StepKind
from tfgpu.installers.pip import PipBackend, site_packages
from tfgpu.installers.pip import make_backend as pip_backend
from tfgpu.resolver.drivers import driver_at_least


class SystemBackend(Backend):
    """Builds a system-mode env; see the module docstring."""

    mode = "system"

    def __init__(self, resolution, pip: PipBackend, items, downloads: Path) -> None:
        self.resolution = resolution
        self.pip = pip
        """The pip backend that plans and builds the venv half."""
        self.items = {item.kind: item for item in items}
        self.downloads = downloads

    def survey(self, resolution, location: Location, options: Options) -> dict:
        """Where the toolkit goes (and whether one from the same files is already there): a
        ``--name`` env (in the envs directory) uses the system toolkit, a ``--prefix`` one its own."""
        system = location.prefix == envs_dir() / location.name
        place = tk.place_toolkit(resolution.cuda, location, system, list(self.items.values()), options.force)
        return {**self.pip.survey(resolution, location, options), "place": place}

    def plan(self, resolution, location: Location, options: Options, source: Source, facts: dict) -> list[Step]:
        place = facts["place"]
        runfile, cudnn = self.items["runfile"], self.items["cudnn"]
        steps: list[Step] = []
        if place.reuse:
            steps.append(
                Step(
                    StepKind.TOOLKIT_REUSE,
                    f"Use the CUDA {runfile.version} toolkit already at {place.final} "
                    "(installed by tfgpu-install from the same files)",
                )
            )
        else:
            for item in (runfile, cudnn):
                check = f"sha256 {item.sha256}" if item.sha256 else f"md5 {item.md5} (NVIDIA's md5sum.txt)"
                steps.append(
                    Step(
                        StepKind.DOWNLOAD,
                        f"Download {item.filename} (resumable; cached)",
                        writes=(str(self.downloads / item.filename),),
                        content=f"from {item.url}\nverified against {check}",
                        payload=item,
                    )
                )
            steps += [
                Step(
                    StepKind.RUNFILE,
                    f"Install the CUDA {runfile.version} toolkit only (no driver) with NVIDIA's runfile",
                    nvidia.runfile_argv(self.downloads / runfile.filename, place),
                    writes=(str(place.staging),),
                ),
                Step(
                    StepKind.UNPACK,
                    f"Unpack cuDNN {cudnn.version} into the toolkit (include/, lib64/)",
                    writes=(str(place.staging / "include"), str(place.staging / "lib64")),
                ),
                Step(StepKind.TOOLKIT_CHECK, "Check the toolkit: libcudart, libcudnn, ptxas, libdevice"),
                Step(
                    StepKind.TOOLKIT_MARKER,
                    "Record which files the toolkit was built from",
                    writes=(str(place.staging / tk.TOOLKIT_MARKER),),
                    content=json.dumps(tk.toolkit_record(list(self.items.values()), place.final), indent=2),
                ),
            ]
            if place.system:
                profile = tk.ETC / "profile.d" / f"tfgpu-cuda-{resolution.cuda}.sh"
                ld_conf = tk.ETC / "ld.so.conf.d" / f"tfgpu-cuda-{resolution.cuda}.conf"
                steps += [
                    Step(
                        StepKind.TOOLKIT_COMMIT,
                        f"Move the toolkit into place at {place.final}",
                        writes=(str(place.final),),
                    ),
                    Step(
                        StepKind.SYSTEM_FILE,
                        "Put the toolkit on PATH for login shells",
                        writes=(str(profile),),
                        content=tk.profile_script(place.final),
                    ),
                    Step(
                        StepKind.SYSTEM_FILE,
                        "Tell the dynamic loader about the toolkit's libraries",
                        writes=(str(ld_conf),),
                        content=tk.ld_conf(place.final),
                    ),
                    Step(StepKind.RUN, "Refresh the dynamic loader's cache", tk.LDCONFIG),
                ]
            else:
                steps.append(
                    Step(
                        StepKind.SYSTEM_FILE,
                        "Write a file that puts the toolkit (nvcc, CUDA_HOME) in a shell",
                        writes=(str(location.staging / "etc" / "tfgpu" / "cuda-toolkit.sh"),),
                        content=tk.user_profile(place.final),
                    )
                )
        for step in self.pip.plan(resolution, location, options, source, facts, libraries=""):
            if step.kind is StepKind.ACTIVATION:
                step = Step(
                    StepKind.TOOLKIT_ACTIVATION,
                    "Put the toolkit's CUDA libraries first for every launch path "
                    f"(activate scripts, load hook, ptxas) from {place.ref}",
                    writes=step.writes,
                )
            elif step.kind is StepKind.MARKER:
                step = Step(
                    StepKind.MARKER,
                    step.title,
                    writes=step.writes,
                    payload={
                        **step.payload,
                        "mode": "system",
                        "toolkit": str(place.final),
                        "toolkit_files": tk.expected_marker(list(self.items.values())),
                        "downloads": [item._asdict() for item in self.items.values()],
                    },
                )
            steps.append(step)
        return steps

    def handlers(self) -> dict:
        return {
            **self.pip.handlers(),
            StepKind.DOWNLOAD: self._download,
            StepKind.RUNFILE: self._runfile,
            StepKind.UNPACK: self._unpack,
            StepKind.TOOLKIT_CHECK: self._check,
            StepKind.TOOLKIT_COMMIT: lambda step, context: tk.commit_toolkit(context.facts["place"]),
            StepKind.TOOLKIT_ACTIVATION: _toolkit_activation,
        }

    def hold(self, context: Context):
        """A system toolkit is a target of its own: its lock is held while it is built and committed."""
        place = context.facts["place"]
        return txn.TargetLock(place.final) if place.system and not place.reuse else contextlib.nullcontext()

    def finish(self, context: Context) -> None:
        tk.clean(context.facts["place"])

    def _download(self, step: Step, context: Context) -> None:
        item = step.payload
        if context.options.offline:
            self._check_offline(item)
        fetch(item.url, self.downloads, sha256=item.sha256, md5=item.md5, size=item.size, reporter=context.reporter)

    def _runfile(self, step: Step, context: Context) -> None:
        place, runner = context.facts["place"], context.runner
        tk.prepare_staging(place)
        place.tmpdir.mkdir(parents=True, exist_ok=True)
        try:
            done = runner.run(step.argv, on_line=context.reporter.output)
        finally:
            writes.discard_tree(place.tmpdir)
        if done.returncode != 0:
            raise OperationError(
                "runfile-failed",
                f"NVIDIA's CUDA {self.items['runfile'].version} runfile exited {done.returncode}; "
                f"nothing was installed.\n{done.tail()}",
                [
                    f"The whole output is in {runner.log_path}; the runfile's own log is /var/log/cuda-installer.log "
                    "(root) or /tmp/cuda-installer.log.",
                    f"It unpacks several GB into {place.tmpdir}: check free space there (`df -h`).",
                ],
            )

    def _unpack(self, step: Step, context: Context) -> None:
        place = context.facts["place"]
        count = nvidia.unpack_cudnn(self.downloads / self.items["cudnn"].filename, place.staging)
        context.runner.log(f"cuDNN: {count} entries unpacked into {place.staging}")

    def _check(self, step: Step, context: Context) -> None:
        nvidia.check_toolkit(context.facts["place"].staging, int(self.items["cudnn"].version.split(".")[0]))

    def _check_offline(self, item) -> None:
        """--offline: a file already in the download cache (verified before use), or a mirror on this
        machine (a loopback URL); never NVIDIA's servers."""

        if (self.downloads / item.filename).is_file() or parse(item.url, "the download's URL").loopback:
            return
        raise OperationError(
            "offline-download-missing",
            f"--offline: {item.filename} is not in {self.downloads} and would have "
            f"to be downloaded from {item.url}; nothing was installed.",
            [
                f"Copy {item.filename} into {self.downloads} (it is checked against its checksum before use).",
                "Or run without --offline.",
            ],
        )

    def unchanged(self, name: str | None, prefix: str | None) -> Outcome | None:
        """The outcome when the env is already built from the same files (its marker and its
        toolkit's marker agree with this plan); None otherwise."""
        path, _ = prefix_for(name, prefix)
        found = env_marker.proof(path) if path.is_dir() and not path.is_symlink() else None
        expected = tk.expected_marker(list(self.items.values()))
        if (
            found is None
            or found.mode != "system"
            or found.tensorflow != self.resolution.tensorflow
            or found.python != self.resolution.python
            or found.toolkit_files != expected
            or not (path / "bin" / "python").exists()
        ):
            return None
        toolkit = Path(found.toolkit or "")
        if not toolkit.is_absolute() or tk.read_toolkit_marker(toolkit) != expected:
            return None
        note = (
            f"Already in place: {path} and the CUDA toolkit in {toolkit} were built from the same files; nothing to do."
        )
        return Outcome(prefix=path, python=path / "bin" / "python", installed=found.installed or {}, notes=[note])


def _toolkit_activation(step: Step, context: Context) -> None:
    place, staging = context.facts["place"], context.location.staging
    layout = activation.read_toolkit_layout(place.current, place.ref, site_packages(staging, context.resolution.python))
    activation.write_venv_activation(staging, layout)
    context.outcome.notes.append(f"CUDA from {place.final}: {len(layout.preload)} libraries preloaded by the load hook")


def driver_problem(resolution) -> ImpossibleError | None:
    """Why this machine's driver cannot run the toolkit (missing, or older than the CUDA needs),
    or None. The tool never installs a driver, so a build stops on it before anything happens."""
    need = resolution.min_driver
    if not resolution.driver:
        return ImpossibleError(
            "driver-missing",
            f"No NVIDIA driver was found; TF {resolution.tensorflow} (CUDA {resolution.cuda}) needs "
            f"driver >= {need}, and tfgpu-install never installs drivers.",
            [
                f"Install NVIDIA driver {need} or newer (your distribution's packages or nvidia.com), then run again.",
                "Planning for another machine? Give its driver: --driver VER.",
            ],
        )
    if need and not driver_at_least(resolution.driver, need):
        return ImpossibleError(
            "driver-too-old",
            f"TF {resolution.tensorflow} (CUDA {resolution.cuda}) needs NVIDIA driver >= {need}; "
            f"the driver is {resolution.driver}. tfgpu-install never installs drivers.",
            [f"Upgrade the NVIDIA driver to {need} or newer, then run again."],
        )
    return None


def dry_run_note(resolution, problem: ImpossibleError) -> str:
    """What a dry run says instead of refusing: the steps are shown (an admin reads them on a login
    node that has no GPU), and which driver they need before they can run."""
    need = resolution.min_driver
    found = "no NVIDIA driver detected here" if problem.code == "driver-missing" else f"driver {resolution.driver} here"
    return (
        f"Driver: {found}; these steps need NVIDIA driver >= {need} (CUDA {resolution.cuda}), which "
        f"tfgpu-install never installs: a real run on this machine stops first with {problem.code}."
    )


def make_backend(resolution, options, *, dry_run: bool = False) -> SystemBackend:
    """system mode for ``resolution``: the driver is checked (a dry run notes what it lacks instead
    of refusing), the downloads must be verifiable."""

    problem = driver_problem(resolution)
    if problem is not None and not dry_run:
        raise problem
    items = nvidia.artifacts(resolution)
    unverifiable = nvidia.unverifiable(items)
    if unverifiable is not None:
        raise unverifiable
    pip = pip_backend(resolution, options)
    backend = SystemBackend(resolution, pip, items, cache_root() / "downloads")
    backend.cache_note = pip.cache_note
    backend.dry_run_notes = [dry_run_note(resolution, problem)] if problem is not None else []
    return backend
