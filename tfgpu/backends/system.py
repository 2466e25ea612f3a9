"""system mode: NVIDIA's CUDA runfile (toolkit only, never the driver) and the cuDNN archive,
then a venv with plain ``tensorflow`` whose activation and load hook put that toolkit first.

Where things go (README, "System mode"):

* ``--prefix P``: everything under P, no root needed: the venv is P itself, the toolkit (with
  cuDNN unpacked into it) is ``P/cuda``; built in P's staging directory and moved into place.
* ``--name N`` (or no location): the toolkit goes to ``/usr/local/cuda-X.Y`` with
  ``/etc/profile.d`` and ``/etc/ld.so.conf.d`` entries and ``ldconfig`` (root only; refused
  otherwise before anything is downloaded), the venv to the envs directory. A toolkit already
  there from the same files (its marker says so) is used as it is.

Downloads are verified and cached (``tfgpu.engines.download``); a re-run with everything in place is a
no-op (``unchanged``).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from tfgpu.errors import ImpossibleError, OperationError
from tfgpu.envs import activation
from tfgpu.backends import system_toolkit as tk
from tfgpu.backends.base import Installer, Location, Options, Outcome, Step
from tfgpu.envs import marker as env_marker
from tfgpu.envs.location import envs_dir, prefix_for


class _Quiet:
    """Passes a delegated pip step's output and notes on, not its own step numbering."""

    def __init__(self, reporter) -> None:
        self.reporter = reporter

    def step(self, *args) -> None:
        pass

    def done(self, *args) -> None:
        pass

    def output(self, line: str) -> None:
        self.reporter.output(line)

    def note(self, message: str) -> None:
        self.reporter.note(message)


class SystemInstaller(Installer):
    """Builds a system-mode env; see the module docstring."""

    mode = "system"

    def __init__(self, resolution, pip, items, downloads: Path) -> None:
        self.resolution = resolution
        self.pip = pip
        """The PipInstaller that builds the venv half."""
        self.items = {item.kind: item for item in items}
        self.downloads = downloads

    def place(self, location: Location, options: Options) -> tk.ToolkitPlace:
        """A ``--name`` env (in the envs directory) uses the system toolkit; a ``--prefix`` one its own."""
        system = location.prefix == envs_dir() / location.name
        return tk.place_toolkit(self.resolution.cuda, location, system, list(self.items.values()), options.force)

    def plan(self, resolution, location: Location, options: Options) -> list[Step]:
        place = self.place(location, options)
        runfile, cudnn = self.items["runfile"], self.items["cudnn"]
        steps: list[Step] = []
        if place.reuse:
            steps.append(Step("toolkit-reuse", f"Use the CUDA {runfile.version} toolkit already at {place.final} "
                                               "(installed by tfgpu-install from the same files)"))
        else:
            for item in (runfile, cudnn):
                check = f"sha256 {item.sha256}" if item.sha256 else f"md5 {item.md5} (NVIDIA's md5sum.txt)"
                steps.append(Step("download", f"Download {item.filename} (resumable; cached)",
                                  writes=(str(self.downloads / item.filename),),
                                  content=f"from {item.url}\nverified against {check}"))
            steps += [
                Step("runfile", f"Install the CUDA {runfile.version} toolkit only (no driver) with NVIDIA's runfile",
                     tk.runfile_argv(self.downloads / runfile.filename, place), writes=(str(place.staging),)),
                Step("unpack", f"Unpack cuDNN {cudnn.version} into the toolkit (include/, lib64/)",
                     writes=(str(place.staging / "include"), str(place.staging / "lib64"))),
                Step("toolkit-check", "Check the toolkit: libcudart, libcudnn, ptxas, libdevice"),
                Step("toolkit-marker", "Record which files the toolkit was built from",
                     writes=(str(place.staging / tk.TOOLKIT_MARKER),),
                     content=json.dumps(tk.toolkit_record(list(self.items.values()), place.final), indent=2)),
            ]
            if not place.system:
                steps.append(Step("system-file", "Write a file that puts the toolkit (nvcc, CUDA_HOME) in a shell",
                                  writes=(str(location.staging / "etc" / "tfgpu" / "cuda-toolkit.sh"),),
                                  content=tk.user_profile(place.final)))
            if place.system:
                profile = tk.ETC / "profile.d" / f"tfgpu-cuda-{resolution.cuda}.sh"
                ld_conf = tk.ETC / "ld.so.conf.d" / f"tfgpu-cuda-{resolution.cuda}.conf"
                steps += [
                    Step("toolkit-commit", f"Move the toolkit into place at {place.final}", writes=(str(place.final),)),
                    Step("system-file", "Put the toolkit on PATH for login shells", writes=(str(profile),),
                         content=tk.profile_script(place.final)),
                    Step("system-file", "Tell the dynamic loader about the toolkit's libraries", writes=(str(ld_conf),),
                         content=tk.ld_conf(place.final)),
                    Step("run", "Refresh the dynamic loader's cache", tk.LDCONFIG),
                ]
        for step in self.pip.plan(resolution, location, options):
            if step.kind == "activation":
                step = Step("toolkit-activation", f"Put the toolkit's CUDA libraries first for every launch path "
                            f"(activate scripts, load hook, ptxas) from {place.ref}", writes=step.writes)
            elif step.kind == "marker":
                step = Step("system-marker", step.title, writes=step.writes)
            elif "and its CUDA libraries" in step.title:  # the CUDA libraries come from the toolkit here
                step = Step(step.kind, step.title.replace(" and its CUDA libraries", ""), step.argv, step.writes,
                            step.content)
            steps.append(step)
        return steps

    def apply(self, steps, runner, reporter, *, resolution, location: Location, options: Options) -> Outcome:
        """Carry out ``steps``; on any failure the toolkit's staging goes too (the caller rolls back the env)."""
        from tfgpu.engines.download import fetch

        import contextlib

        from tfgpu.envs import txn

        outcome = Outcome(prefix=location.prefix, python=location.prefix / "bin" / "python")
        place = self.place(location, options)
        total = len(steps)
        # A system toolkit is a target of its own: its lock is held while it is built and committed.
        lock = txn.TargetLock(place.final) if place.system and not place.reuse else contextlib.nullcontext()
        with lock:
            self._apply(steps, runner, reporter, resolution, location, options, outcome, place, total, fetch)
        return outcome

    def _apply(self, steps, runner, reporter, resolution, location, options, outcome, place, total, fetch) -> None:
        try:
            for index, step in enumerate(steps, 1):
                reporter.step(index, total, step.title)
                started = time.monotonic()
                if step.kind == "download":
                    item = next(i for i in self.items.values() if i.filename == Path(step.writes[0]).name)
                    if options.offline:
                        self._check_offline(item)
                    fetch(item.url, self.downloads, sha256=item.sha256, md5=item.md5, size=item.size,
                          reporter=reporter)
                elif step.kind == "runfile":
                    self._run_runfile(step, place, runner, reporter)
                elif step.kind == "unpack":
                    count = tk.unpack_cudnn(self.downloads / self.items["cudnn"].filename, place.staging)
                    runner.log(f"cuDNN: {count} entries unpacked into {place.staging}")
                elif step.kind == "toolkit-check":
                    tk.check_toolkit(place.staging, int(self.items["cudnn"].version.split(".")[0]))
                elif step.kind in ("toolkit-marker", "system-file"):
                    path = Path(step.writes[0])
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(step.content + ("" if step.content.endswith("\n") else "\n"), encoding="utf-8")
                elif step.kind == "toolkit-commit":
                    tk.commit_toolkit(place)
                elif step.kind == "toolkit-activation":
                    site = self.pip_site(location, resolution)
                    layout = activation.read_toolkit_layout(place.current, place.ref, site)
                    activation.write_venv_activation(location.staging, layout)
                    outcome.notes.append(f"CUDA from {place.final}: {len(layout.preload)} libraries preloaded "
                                         "by the load hook")
                elif step.kind == "jupyter":
                    from tfgpu.backends.pip import register_kernel

                    outcome.kernels.append(register_kernel(location, resolution))
                elif step.kind == "system-marker":
                    self._write_marker(location, resolution, options, outcome, place)
                elif step.kind != "toolkit-reuse":
                    done = self.pip.apply([step], runner, _Quiet(reporter), resolution=resolution,
                                          location=location, options=options)
                    if step.kind == "inventory":
                        outcome.installed = done.installed
                reporter.done(index, total, step.title, time.monotonic() - started)
        except BaseException:
            tk.clean(place)
            raise

    @staticmethod
    def pip_site(location: Location, resolution) -> str:
        from tfgpu.backends.pip import site_packages

        return site_packages(location.staging, resolution.python)

    def _run_runfile(self, step: Step, place: tk.ToolkitPlace, runner, reporter) -> None:
        tk.prepare_staging(place)
        place.tmpdir.mkdir(parents=True, exist_ok=True)
        try:
            done = runner.run(step.argv, on_line=reporter.output)
        finally:
            shutil.rmtree(place.tmpdir, ignore_errors=True)
        if done.returncode != 0:
            raise OperationError(
                "runfile-failed", f"NVIDIA's CUDA {self.items['runfile'].version} runfile exited {done.returncode}; "
                f"nothing was installed.\n{done.tail()}",
                [f"The whole output is in {runner.log_path}; the runfile's own log is /var/log/cuda-installer.log "
                 "(root) or /tmp/cuda-installer.log.",
                 f"It unpacks several GB into {place.tmpdir}: check free space there (`df -h`)."])

    def _check_offline(self, item) -> None:
        """--offline: a file already in the download cache (verified before use), or a mirror on this
        machine (a loopback URL); never NVIDIA's servers."""
        from urllib.parse import urlsplit

        from tfgpu.engines.download import LOOPBACK

        if (self.downloads / item.filename).is_file() or urlsplit(item.url).hostname in LOOPBACK:
            return
        raise OperationError(
            "offline-download-missing", f"--offline: {item.filename} is not in {self.downloads} and would have "
            f"to be downloaded from {item.url}; nothing was installed.",
            [f"Copy {item.filename} into {self.downloads} (it is checked against its checksum before use).",
             "Or run without --offline."])

    def _write_marker(self, location, resolution, options, outcome, place) -> None:
        from tfgpu.backends.pip import write_marker

        write_marker(location, resolution, options, outcome, self.pip.engine(options), mode="system",
                     toolkit=str(place.final), toolkit_files=tk.expected_marker(list(self.items.values())),
                     downloads=[item._asdict() for item in self.items.values()])

    def unchanged(self, name: str | None, prefix: str | None):
        """A ``CreateResult`` with nothing to do when the env is already built from the same files
        (its marker and its toolkit's marker agree with this plan); None otherwise."""
        from tfgpu.ops import CreateResult

        path, display = prefix_for(name, prefix)
        marker = env_marker.proof(path) if path.is_dir() and not path.is_symlink() else None
        expected = tk.expected_marker(list(self.items.values()))
        if (marker is None or marker.get("mode") != "system" or marker.get("tensorflow") != self.resolution.tensorflow
                or marker.get("python") != self.resolution.python or marker.get("toolkit_files") != expected
                or not (path / "bin" / "python").exists()):
            return None
        toolkit = Path(marker.get("toolkit", ""))
        if not toolkit.is_absolute() or tk.read_toolkit_marker(toolkit) != expected:
            return None
        location = Location(prefix=path, staging=path, name=display, existing=True)
        note = (f"Already in place: {path} and the CUDA toolkit in {toolkit} were built from the same files; "
                "nothing to do.")
        outcome = Outcome(prefix=path, python=path / "bin" / "python", installed=marker.get("installed", {}),
                          notes=[note])
        return CreateResult(location=location, steps=[Step("noop", note)], outcome=outcome)


def check_driver(resolution) -> None:
    """The tool never installs a driver: a missing or too old one stops system mode first."""
    from tfgpu.resolver.drivers import driver_at_least

    need = resolution.min_driver
    if not resolution.driver:
        raise ImpossibleError(
            "driver-missing", f"No NVIDIA driver was found; TF {resolution.tensorflow} (CUDA {resolution.cuda}) needs "
            f"driver >= {need}, and tfgpu-install never installs drivers.",
            [f"Install NVIDIA driver {need} or newer (your distribution's packages or nvidia.com), then run again.",
             "Planning for another machine? Give its driver: --driver VER."])
    if need and not driver_at_least(resolution.driver, need):
        raise ImpossibleError(
            "driver-too-old", f"TF {resolution.tensorflow} (CUDA {resolution.cuda}) needs NVIDIA driver >= {need}; "
            f"the driver is {resolution.driver}. tfgpu-install never installs drivers.",
            [f"Upgrade the NVIDIA driver to {need} or newer, then run again."])


def make_installer(resolution, options) -> SystemInstaller:
    """system mode for ``resolution``: the driver is checked, the downloads must be verifiable."""
    from tfgpu.engines import nvidia as vendor
    from tfgpu.backends.pip import make_installer as pip_installer
    from tfgpu.paths import cache_root

    check_driver(resolution)
    items = vendor.artifacts(resolution)
    problem = vendor.unverifiable(items)
    if problem is not None:
        raise problem
    return SystemInstaller(resolution, pip_installer(resolution, options), items, cache_root() / "downloads")
