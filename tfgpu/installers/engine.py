"""The one install layer: the package engines that put packages into an env and take them out.

``create``'s backends and ``repair`` drive the same objects: :class:`UvEngine` for pip-style envs
(uv, with the package cache ``tfgpu.cache.uv_cache`` chose) and :class:`RattlerEngine` for conda
prefixes (rattler, with the tool's repodata cache and its verified package store). A create's
backend asks its engine for the commands its plan shows (so ``--dry-run`` prints exactly what runs)
and solves and links through it; a repair uses the three verbs of :class:`PackageEngine` on an env
that already exists: what an install will add (journalled before anything changes), the install
with everything the env holds kept as it is, and the undo. The errors these raise are built here,
once (``uv-missing``, the repair's ``install-failed``/``repair-conflict``/``undo-failed``).

The engines' own modules (``tfgpu.engines.uv``, ``tfgpu.engines.rattler_engine``) only build commands
and talk to the executables; which cache, which sources, which pins is decided here.
"""

from __future__ import annotations

import re
import tempfile
from abc import ABC, abstractmethod
from pathlib import Path

from packaging.utils import canonicalize_name
from rattler import PrefixRecord

from tfgpu.cache import uv_cache
from tfgpu.doors import requirements as req
from tfgpu.doors.paths import cache_root
from tfgpu.engines import rattler_engine
from tfgpu.engines import uv as uv_engine
from tfgpu.engines.uv_progress import UvProgress
from tfgpu.envs import writes
from tfgpu.errors import ImpossibleError, OperationError
from tfgpu.installers.failures import whole_output
from tfgpu.records import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

KEEP_AS_IS = (
    "Or keep the env as it is now and set the journal aside: `tfgpu-install repair --undo "
    "--forget-journal --prefix ENV`."
)

_WANTED, _HELD = "A CUDA package the repair adds", "A package the env already holds"


@record
class Wanted:
    """What an install into an existing env asks for: ``requirements`` (pip requirements or conda
    match specs) and, of those, the names the env already holds at another version (``changing``);
    everything else the env holds is kept exactly as it is (``held``: a pip-style env's other
    distributions and their versions, the constraints of uv's install; a conda prefix's engine
    reads its own records)."""

    requirements: tuple[str, ...] = ()
    changing: frozenset[str] = frozenset()
    held: tuple[tuple[str, str], ...] = ()


@record
class Intended:
    """One package an install is about to put in, named before anything changes."""

    name: str
    version: str

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "version": self.version}


def uv_missing(needs: str) -> ImpossibleError:
    """``uv-missing``: ``needs`` (``Repairing``, ``Locking``...) needs uv and none was found."""
    return ImpossibleError(
        "uv-missing",
        f"{needs} needs uv, which is not installed with this tfgpu-install.",
        ["Reinstall tfgpu-install (it depends on the `uv` package), or `pip install uv` into its environment."],
    )


def undo_failed(what: str, detail: str, way_forward: str = "Run the same `repair --undo` again.") -> OperationError:
    """``undo-failed``: taking ``what`` back failed; running the undo again, or setting the journal aside."""
    return OperationError("undo-failed", f"{what} failed:\n{detail}", [way_forward, KEEP_AS_IS])


class PackageEngine(ABC):
    """How packages go into an env that exists and come out again (``tfgpu.repair``'s side of the
    layer; a create's backend uses the same engine's commands, solve and link)."""

    manager = ""
    """``pip`` or ``conda``: the package manager the engine stands for (``engine_for`` picks by it)."""
    cache: Path
    """The engine's package cache: files in the env may be links into it."""

    @abstractmethod
    def intended(self, wanted: Wanted, reporter) -> list[Intended]:
        """What installing ``wanted`` will put in, worked out without changing anything."""

    @abstractmethod
    def install(self, wanted: Wanted, reporter) -> None:
        """Install ``wanted``, leaving every other package the env holds as it is."""

    @abstractmethod
    def undo(self, added: list[str], changed: dict[str, str], reporter) -> None:
        """Take ``added`` out; put each of ``changed`` (name -> what it was before) back."""


class UvEngine(PackageEngine):
    """uv and the package cache it fills; with ``python`` and ``runner`` it works on that env."""

    manager = "pip"

    def __init__(
        self,
        uv: str,
        cache: Path,
        *,
        why: str = "",
        shared: bool = True,
        python: Path | None = None,
        runner=None,
        find_links: str | None = None,
        offline: bool = False,
    ) -> None:
        self.uv, self.cache = uv, cache
        self.cache_note = f"uv cache: {cache} ({why})" if why else ""
        """Which uv cache the commands use, and why (written into the operation's log)."""
        self.own_cache = not shared
        """``cache`` is the tool's own, not the user's: the tool may relink files in it."""
        self.python, self.runner, self.offline = python, runner, offline
        self.sources = uv_engine.sources(find_links, offline)

    @classmethod
    def found(cls, needs: str, **env) -> UvEngine:
        """The uv on this machine with the cache ``tfgpu.cache.uv_cache`` chooses; ``uv-missing``
        (naming what ``needs`` it) when there is none. ``env``: the env it works on (repair)."""
        uv = uv_engine.find_uv()
        if uv is None:
            raise uv_missing(needs)

        chosen = uv_cache(uv)
        return cls(uv, chosen.path, why=chosen.why, shared=chosen.shared, **env)

    # --- the commands a create's plan shows ---------------------------------------------------

    def venv(self, target: Path, python: str, prompt: str, *, offline: bool) -> tuple[str, ...]:
        return uv_engine.venv(self.uv, target, python, prompt, offline=offline, cache=self.cache)

    def compile_hashed(self, requirements: Path, lock: Path, python: str, extra: tuple[str, ...]) -> tuple[str, ...]:
        return uv_engine.compile_hashed(self.uv, requirements, lock, python, cache=self.cache, extra=extra)

    def install_command(self, python: str, requirements: Path, extra: tuple[str, ...], **flags) -> tuple[str, ...]:
        """``uv pip install -r requirements`` into ``python``'s env (``flags``: ``tfgpu.engines.uv.install``'s)."""
        return uv_engine.install(self.uv, python, requirements, cache=self.cache, extra=extra, **flags)

    def inventory(self, python: str) -> tuple[str, ...]:
        return uv_engine.inventory(self.uv, python, cache=self.cache)

    # --- an env that exists ------------------------------------------------------------------

    def _install(self, command: Callable[[tuple[str, ...]], tuple[str, ...]], **streams):
        """Run the uv install ``command(sources)`` from each of ``tfgpu.engines.uv.tries`` in turn
        (offline, the wheel directory alone first: ``directory_alone`` says why) until one works or
        fails for another reason than a missing package; the last result."""
        for sources in uv_engine.tries(self.sources):
            argv = command(sources)
            done = self.runner.run(argv, **streams)
            if done.returncode == 0 or not uv_engine.run_failure(argv, done).not_found:
                break
        return done

    def _add(self, wanted: Wanted, dry_run: bool = False, on_line=None, screen=None):
        pinned = {n: v for n, v in wanted.held if n not in wanted.changing}
        with tempfile.TemporaryDirectory(prefix="tfgpu-repair-") as tmp:
            requirements = writes.scratch_text(
                Path(tmp), "requirements.in", req.lines(req.canonical(w, what=_WANTED) for w in wanted.requirements)
            )
            constraints = writes.scratch_text(
                Path(tmp),
                "constraints.txt",
                req.lines(req.requirement(n, f"=={v}", what=_HELD) for n, v in sorted(pinned.items())),
            )
            return self._install(
                lambda sources: (
                    *self.install_command(
                        str(self.python), requirements, sources, constraints=constraints, compile_bytecode=False
                    ),
                    *(("--dry-run",) if dry_run else ()),
                ),
                on_line=on_line,
                **({"screen": screen} if screen is not None else {}),
            )

    def intended(self, wanted: Wanted, reporter) -> list[Intended]:
        """From uv's dry run of the very same command: recorded before anything changes, so an undo
        after a SIGKILL takes out only these."""
        if not wanted.requirements:
            return []

        reporter.note("working out exactly what the install adds")
        done = self._add(wanted, dry_run=True)
        found = [
            Intended(canonicalize_name(m.group(1)), m.group(2))
            for m in re.finditer(r"^\s*\+\s*([A-Za-z0-9._-]+)==(\S+)\s*$", done.output, re.M)
        ]
        return found if done.returncode == 0 else []

    def install(self, wanted: Wanted, reporter) -> None:

        if not wanted.requirements:
            return
        reporter.note(f"installing {', '.join(wanted.requirements)} (everything else pinned as it is)")
        watch = UvProgress(reporter)  # the CUDA wheels' download: uv's bytes, on the tool's bar
        done = self._add(wanted, on_line=reporter.output, screen=watch.feed)
        if done.returncode == 0:
            watch.finish()
            return
        raise self._add_failed(done)

    def _add_failed(self, done) -> OperationError | ImpossibleError:
        missing = uv_engine.lacking(done.output) if self.offline else []
        if missing:  # uv's "No solution found" here means a wheel it may not fetch, not a conflict
            return OperationError(
                "install-failed",
                f"Adding the CUDA packages needs {', '.join(missing)}, which neither the --find-links "
                "directory nor uv's cache holds (uv names the first it cannot find: there may be more); "
                "nothing was changed.",
                [
                    "Add the wheels to the --find-links directory (`pip download` them on a connected machine, "
                    "for this Python and platform), or run once with network.",
                    *whole_output(self.runner.log_path),
                ],
            )
        conflict = "No solution found" in done.output or "unsatisfiable" in done.output
        return (ImpossibleError if conflict else OperationError)(
            "repair-conflict" if conflict else "install-failed",
            "The CUDA packages could not be added without changing what the env already holds; nothing was "
            f"changed.\n{done.tail()}"
            if conflict
            else f"Adding the CUDA packages failed; nothing was changed.\n{done.tail()}",
            [
                "`tfgpu-install repair --dry-run` lists what would change; --allow-changes lets it change them.",
                *whole_output(self.runner.log_path),
            ],
        )

    def undo(self, added: list[str], changed: dict[str, str], reporter) -> None:
        if added:
            reporter.note(f"removing {', '.join(added)}")
            done = self.runner.run(uv_engine.uninstall(self.uv, str(self.python), added))
            if done.returncode != 0:
                raise undo_failed(f"Removing {', '.join(added)}", done.tail())
        back = [f"{name}=={version}" for name, version in sorted(changed.items())]
        if not back:
            return
        reporter.note(f"putting back {', '.join(back)}")
        with tempfile.TemporaryDirectory(prefix="tfgpu-repair-") as tmp:
            pins = writes.scratch_text(
                Path(tmp), "requirements.txt", req.lines(req.canonical(pin, what=_HELD) for pin in back)
            )
            # reinstalled, not audited: a version a killed repair left half taken out is still
            # the version uv sees, and only a reinstall puts its files back
            reinstall = tuple(a for name in sorted(changed) for a in ("--reinstall-package", name))
            done = self._install(
                lambda sources: self.install_command(
                    str(self.python), pins, (*sources, *reinstall), no_deps=True, compile_bytecode=False
                )
            )
        if done.returncode != 0:
            raise undo_failed(
                f"Putting back {', '.join(back)}",
                done.tail(),
                "Those versions come from uv's cache or the index: run `repair --undo` again "
                "with network (or --find-links DIR holding them).",
            )


class RattlerEngine(PackageEngine):
    """rattler with the tool's repodata cache and verified package store (under ``root``, the tool's
    cache); with ``prefix``/``channels``/``cuda`` it works on that conda prefix."""

    manager = "conda"

    def __init__(
        self,
        root: Path,
        *,
        prefix: Path | None = None,
        channels: Sequence[str] = (),
        cuda: str = "",
        offline: bool = False,
    ) -> None:
        self.cache = root
        self.prefix, self.channels, self.cuda, self.offline = prefix, list(channels), cuda, offline
        self._new: list | None = None

    @property
    def repodata(self) -> Path:
        return self.cache / "conda" / "repodata"

    @property
    def packages(self) -> Path:
        """The package store every link reads from: each archive in it was checked first."""
        return self.cache / "conda" / "verified-pkgs"

    # --- what a create and a repair both use ------------------------------------------------

    def solve(self, specs: list[str], channels: list[str], *, cuda: str | None, offline: bool, **more) -> list:
        """rattler's solve for this machine's linux-64 (``more``: ``pinned``, ``runner``)."""

        return rattler_engine.solve(
            specs,
            channels,
            platform="linux-64",
            cuda=cuda,
            this_host=True,
            repodata_cache=self.repodata,
            offline=offline,
            **more,
        )

    def locked(self, packages, channels: list[str], *, offline: bool, local_channel: str | None, runner) -> list:
        """The locked records, read from their channels and checked against the lock."""

        return rattler_engine.locked_records(
            packages,
            channels,
            platform="linux-64",
            repodata_cache=self.repodata,
            offline=offline,
            local_channel=local_channel,
            runner=runner,
        )

    def link(self, records: list, staging: Path, final: Path, *, reporter, offline: bool, **more) -> None:
        """Link ``records`` into ``staging`` (``final`` embedded in files; ``more``: ``keep``, ``runner``)."""

        rattler_engine.install(
            records, staging, final, package_cache=self.packages, reporter=reporter, offline=offline, **more
        )

    # --- a conda prefix that exists ---------------------------------------------------------

    @property
    def env(self) -> Path:
        """The conda prefix repair works on (the engine was made for it: ``engine_for``)."""
        assert self.prefix is not None, "a rattler engine without a prefix only solves and links for create"
        return self.prefix

    def _installed(self) -> list:

        return [PrefixRecord.from_path(path) for path in sorted((self.env / "conda-meta").glob("*.json"))]

    def _solve(self, wanted: Wanted) -> list:
        if not wanted.requirements:
            return []
        installed = self._installed()
        pinned = [r for r in installed if r.name.normalized not in wanted.changing]
        # Every installed package is asked for too, pinned: a solve for the new ones alone could pull
        # a CUDA 11 cudnn (and cudatoolkit) into a CUDA 12 env, since only packages in the solution
        # bring their constraints (cuda-version's) to bear.
        specs = [*wanted.requirements, *(r.name.normalized for r in pinned)]
        records = self.solve(specs, self.channels, cuda=self.cuda, offline=self.offline, pinned=pinned)
        have = {r.name.normalized for r in installed}
        return [r for r in records if r.name.normalized not in have or r.name.normalized in wanted.changing]

    def intended(self, wanted: Wanted, reporter) -> list[Intended]:
        """The solve, done once, before anything changes."""
        self._new = self._solve(wanted)
        return [Intended(r.name.normalized, str(r.version)) for r in self._new]

    def install(self, wanted: Wanted, reporter) -> None:
        new = self._new if self._new is not None else self._solve(wanted)
        if not new:
            return
        have = {r.name.normalized for r in self._installed()}
        reporter.note(f"linking {', '.join(f'{r.name.normalized}={r.version}' for r in new)} into the env")
        self.link(new, self.env, self.env, reporter=reporter, offline=self.offline, keep=have - wanted.changing)

    def undo(self, added: list[str], changed: dict[str, str], reporter) -> None:
        """``changed``: each replaced package's conda-meta record before the repair; it is fetched
        again by the URL and sha256 that record names."""

        if not (added or changed):
            return
        with tempfile.TemporaryDirectory(prefix="tfgpu-repair-") as tmp:
            before = []
            for name, text in sorted(changed.items()):
                path = writes.scratch_text(Path(tmp), f"{name}.json", text)
                before.append(PrefixRecord.from_path(path))
        keep = [r for r in self._installed() if r.name.normalized not in added and r.name.normalized not in changed]
        reporter.note(f"unlinking {', '.join(added)}" if added else "putting back the replaced packages")
        self.link(
            before,
            self.env,
            self.env,
            reporter=reporter,
            offline=self.offline and not before,
            keep={r.name.normalized for r in keep},
        )


def engine_for(
    manager: str,
    prefix: Path,
    python: Path,
    runner,
    *,
    resolution=None,
    find_links: str | None,
    offline: bool,
    channels: Sequence[str] = (),
    needs: str,
) -> PackageEngine:
    """The engine for an env that exists: rattler for a conda prefix whose CUDA is conda's
    (``manager`` ``conda``; ``resolution`` gives the ``__cuda`` it solves for), else uv with the
    cache ``tfgpu.cache.uv_cache`` chooses (written into ``runner``'s log); ``needs``: what
    ``uv-missing`` says needs uv."""
    if manager == "conda":
        cuda = rattler_engine.virtual_cuda(resolution) if resolution is not None else ""
        urls = rattler_engine.channel_urls(tuple(channels))
        return RattlerEngine(cache_root(), prefix=prefix, channels=urls, cuda=cuda, offline=offline)
    engine = UvEngine.found(needs, python=python, runner=runner, find_links=find_links, offline=offline)
    runner.log(engine.cache_note)
    return engine
