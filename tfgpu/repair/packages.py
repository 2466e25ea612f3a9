"""Adding the CUDA packages a repair needs, and taking them out again, without moving anything the
user installed: pip-style envs through uv with every installed distribution pinned as a
constraint; conda prefixes through rattler, solved with the installed packages pinned and linked
with them left untouched.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from rattler import PrefixRecord

from tfgpu import requirements as req
from tfgpu.engines import rattler
from tfgpu.engines import uv as uv_engine
from tfgpu.engines.uv_progress import UvProgress
from tfgpu.envs import writes
from tfgpu.errors import ImpossibleError, OperationError
from tfgpu.repair.survey import canonical, distributions

KEEP_AS_IS = (
    "Or keep the env as it is now and set the journal aside: `tfgpu-install repair --undo "
    "--forget-journal --prefix ENV`."
)

_WANTED, _HELD = "A CUDA package the repair adds", "A package the env already holds"


class PipPackages:
    """CUDA wheels into (and out of) an env's site-packages with uv."""

    def __init__(
        self, uv: str, python: Path, site: Path, runner, cache: Path, *, find_links: str | None, offline: bool
    ) -> None:
        self.uv, self.python, self.site, self.runner, self.cache = uv, python, site, runner, cache
        self.sources = uv_engine.sources(find_links, offline)
        self.offline = offline

    def _install(self, command, **streams):
        """Run the uv install ``command(sources)`` from each of ``uv_engine.tries`` in turn (offline, the
        wheel directory alone first: ``uv_engine.directory_alone`` says why) until one works or fails
        for another reason than a missing package; the last result."""
        for sources in uv_engine.tries(self.sources):
            argv = command(sources)
            done = self.runner.run(argv, **streams)
            if done.returncode == 0 or not uv_engine.run_failure(argv, done).not_found:
                break
        return done

    def _run_install(self, plan, dry_run: bool = False, on_line=None, screen=None):
        wanted = [*plan.add, *plan.change]
        changing = {p.name for p in plan.change}
        pinned = {n: v for n, v in distributions(self.site).items() if n not in changing}
        with tempfile.TemporaryDirectory(prefix="tfgpu-repair-") as tmp:
            requirements = writes.scratch_text(
                Path(tmp), "requirements.in", req.lines(req.canonical(p.wanted, what=_WANTED) for p in wanted)
            )
            constraints = writes.scratch_text(
                Path(tmp),
                "constraints.txt",
                req.lines(req.requirement(n, f"=={v}", what=_HELD) for n, v in sorted(pinned.items())),
            )
            return self._install(
                lambda sources: (
                    *uv_engine.install(
                        self.uv,
                        str(self.python),
                        requirements,
                        cache=self.cache,
                        extra=sources,
                        constraints=constraints,
                        compile_bytecode=False,
                    ),
                    *(("--dry-run",) if dry_run else ()),
                ),
                on_line=on_line,
                **({"screen": screen} if screen is not None else {}),
            )

    def intended(self, plan, reporter) -> list[dict]:
        """What the install will put in (name, version), from uv's dry run of the very same command:
        recorded before anything changes, so an undo after a SIGKILL takes out only these."""
        if not [*plan.add, *plan.change]:
            return []
        reporter.note("working out exactly what the install adds")
        done = self._run_install(plan, dry_run=True)
        found = [
            {"name": canonical(m.group(1)), "version": m.group(2)}
            for m in re.finditer(r"^\s*\+\s*([A-Za-z0-9._-]+)==(\S+)\s*$", done.output, re.M)
        ]
        return found if done.returncode == 0 else []

    def install(self, plan, reporter) -> None:
        wanted = [*plan.add, *plan.change]
        if not wanted:
            return
        reporter.note(f"installing {', '.join(p.wanted for p in wanted)} (everything else pinned as it is)")
        watch = UvProgress(reporter)  # the CUDA wheels' download: uv's bytes, on the tool's bar
        done = self._run_install(plan, on_line=reporter.output, screen=watch.feed)
        if done.returncode == 0:
            watch.finish()
        if done.returncode != 0:
            missing = uv_engine.lacking(done.output) if self.offline else []
            if missing:  # uv's "No solution found" here means a wheel it may not fetch, not a conflict
                raise OperationError(
                    "install-failed",
                    f"Adding the CUDA packages needs {', '.join(missing)}, which neither the --find-links "
                    "directory nor uv's cache holds (uv names the first it cannot find: there may be more); "
                    "nothing was changed.",
                    [
                        "Add the wheels to the --find-links directory (`pip download` them on a connected machine, "
                        "for this Python and platform), or run once with network.",
                        *([f"The whole output is in {self.runner.log_path}."] if self.runner.log_path else []),
                    ],
                )
            conflict = "No solution found" in done.output or "unsatisfiable" in done.output
            raise (ImpossibleError if conflict else OperationError)(
                "repair-conflict" if conflict else "install-failed",
                "The CUDA packages could not be added without changing what the env already holds; nothing was "
                f"changed.\n{done.tail()}"
                if conflict
                else f"Adding the CUDA packages failed; nothing was changed.\n{done.tail()}",
                [
                    "`tfgpu-install repair --dry-run` lists what would change; --allow-changes lets it change them.",
                    *([f"The whole output is in {self.runner.log_path}."] if self.runner.log_path else []),
                ],
            )

    def undo(self, added: list[str], changed: dict[str, str], reporter) -> None:
        """Uninstall ``added``; put each of ``changed`` (name -> version before) back."""
        if added:
            reporter.note(f"removing {', '.join(added)}")
            done = self.runner.run(uv_engine.uninstall(self.uv, str(self.python), added))
            if done.returncode != 0:
                raise OperationError(
                    "undo-failed",
                    f"Removing {', '.join(added)} failed:\n{done.tail()}",
                    ["Run the same `repair --undo` again.", KEEP_AS_IS],
                )
        back = [f"{name}=={version}" for name, version in sorted(changed.items())]
        if back:
            reporter.note(f"putting back {', '.join(back)}")
            with tempfile.TemporaryDirectory(prefix="tfgpu-repair-") as tmp:
                pins = writes.scratch_text(
                    Path(tmp), "requirements.txt", req.lines(req.canonical(pin, what=_HELD) for pin in back)
                )
                # reinstalled, not audited: a version a killed repair left half taken out is still
                # the version uv sees, and only a reinstall puts its files back
                reinstall = tuple(a for name in sorted(changed) for a in ("--reinstall-package", name))
                done = self._install(
                    lambda sources: uv_engine.install(
                        self.uv,
                        str(self.python),
                        pins,
                        cache=self.cache,
                        extra=(*sources, *reinstall),
                        no_deps=True,
                        compile_bytecode=False,
                    )
                )
            if done.returncode != 0:
                raise OperationError(
                    "undo-failed",
                    f"Putting back {', '.join(back)} failed:\n{done.tail()}",
                    [
                        "Those versions come from uv's cache or the index: run `repair --undo` again "
                        "with network (or --find-links DIR holding them).",
                        KEEP_AS_IS,
                    ],
                )


class CondaPackages:
    """conda CUDA packages into (and out of) a conda prefix with rattler."""

    def __init__(self, prefix: Path, channels: list[str], cuda: str, cache: Path, *, offline: bool) -> None:
        self.prefix, self.channels, self.cuda, self.cache, self.offline = prefix, channels, cuda, cache, offline

    def _installed(self) -> list:
        return [PrefixRecord.from_path(path) for path in sorted((self.prefix / "conda-meta").glob("*.json"))]

    def intended(self, plan, reporter) -> list[dict]:
        """What linking will put in (name, version): the solve, done once, before anything changes."""
        self._new = self._solve(plan) if [*plan.add, *plan.change] else []
        return [{"name": r.name.normalized, "version": str(r.version)} for r in self._new]

    def install(self, plan, reporter) -> None:
        new = getattr(self, "_new", None)
        if new is None:
            new = self._solve(plan)
        if not new:
            return
        have = {r.name.normalized for r in self._installed()}
        changing = {p.name for p in plan.change}
        reporter.note(f"linking {', '.join(f'{r.name.normalized}={r.version}' for r in new)} into the env")
        rattler.install(
            new,
            self.prefix,
            self.prefix,
            package_cache=self.cache / "conda" / "verified-pkgs",
            reporter=reporter,
            offline=self.offline,
            keep=have - changing,
        )

    def _solve(self, plan) -> list:
        wanted = [*plan.add, *plan.change]
        if not wanted:
            return []
        changing = {p.name for p in plan.change}
        installed = self._installed()
        pinned = [r for r in installed if r.name.normalized not in changing]
        # Every installed package is asked for too, pinned: a solve for the new ones alone could pull
        # a CUDA 11 cudnn (and cudatoolkit) into a CUDA 12 env, since only packages in the solution
        # bring their constraints (cuda-version's) to bear.
        specs = [p.wanted for p in wanted] + [r.name.normalized for r in pinned]
        records = rattler.solve(
            specs,
            self.channels,
            platform="linux-64",
            cuda=self.cuda,
            this_host=True,
            repodata_cache=self.cache / "conda" / "repodata",
            offline=self.offline,
            pinned=pinned,
        )
        have = {r.name.normalized for r in installed}
        return [r for r in records if r.name.normalized not in have or r.name.normalized in changing]

    def undo(self, added: list[str], replaced: dict[str, str], reporter) -> None:
        """Unlink ``added``; reinstall each of ``replaced`` (name -> its conda-meta record before)."""
        if not (added or replaced):
            return
        with tempfile.TemporaryDirectory(prefix="tfgpu-repair-") as tmp:
            before = []
            for name, text in sorted(replaced.items()):
                path = writes.scratch_text(Path(tmp), f"{name}.json", text)
                before.append(PrefixRecord.from_path(path))
        keep = [r for r in self._installed() if r.name.normalized not in added and r.name.normalized not in replaced]
        reporter.note(f"unlinking {', '.join(added)}" if added else "putting back the replaced packages")
        # A replaced package is fetched again by the URL and sha256 its record names.
        rattler.install(
            before,
            self.prefix,
            self.prefix,
            reporter=reporter,
            package_cache=self.cache / "conda" / "verified-pkgs",
            offline=self.offline and not before,
            keep={r.name.normalized for r in keep},
        )
