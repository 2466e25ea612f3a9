"""Team lockfiles and offline bundles, one folder per format, each with its writing and reading:

* ``pip/``: hashed requirements locks with a PEP 751 ``pylock.toml`` beside each;
* ``conda/``: conda-lock.yml (conda-lock's own format);
* ``bundle/``: offline bundle directories (a lock, its packages, the tool), built and read back.

What every format shares stays here: the platforms a lock can target (``platforms``), what each
``--platform`` resolves to (``targets``), resolving requirements with uv (``resolving``), the
tools a run uses (``tools``), what a lock allows around it (``selectors``) and the ``lock --check``
answer and comparisons (``check``).

This module is the face the command line calls: it takes the inputs, decides by ``--mode`` (or
by the lock file given) which format's folder does the work, and returns that folder's typed
result. It is the one top-level module that imports a format's folder; building a bundle has its
own face, :func:`tfgpu.lock.bundle.build`.
"""

from __future__ import annotations

from pathlib import Path

from tfgpu.doors import untrusted
from tfgpu.errors import ImpossibleError, TfgpuError, UsageError
from tfgpu.installers.options import check_channels_for, mode_of
from tfgpu.records import replace
from tfgpu.resolver import make_request, resolve


def _conda_file(path) -> bool:
    return Path(path).suffix in (".yml", ".yaml")


def write(
    *,
    mode: str | None,
    platforms: list[str],
    selectors,
    allow_cpu: bool = False,
    host=None,
    output: str | None = None,
    channels=(),
    channel_from: str = "--channel",
    reporter=None,
):
    """``tfgpu-install lock``: one hashed lock per platform (pip), or one conda-lock.yml for all
    (conda). ``selectors``: what the user described (``tfgpu.settings.Selectors``: ``tf``, ``python``, ``os``, ``arch``, ``driver``,
    ``gpu_cc``, ``pre``); ``host``: this machine's facts, or None for another machine.

    Returns ``tfgpu.lock.pip.write.PipLocks`` or ``tfgpu.lock.conda.write.Written``: each has
    ``to_dict()`` (the ``--json`` document) and ``notes()`` (what a person is shown)."""
    # Start-up cost: `completion` loads this module but not tfgpu.lock.targets.
    from tfgpu.lock.targets import lock_targets

    mode = mode_of(mode)
    check_channels_for(mode, channels)
    if mode not in ("pip", "conda"):  # before minutes of resolving, as a bundle refuses it
        raise UsageError(
            "mode-not-lockable",
            f"--mode {mode} cannot be locked: system mode installs vendor archives, not packages.",
            ["Use --mode pip (or --mode conda)."],
        )
    targets = lock_targets(platforms, selectors, allow_cpu=allow_cpu, host=host)
    if mode == "conda":
        # Start-up cost: `completion` loads this module but not tfgpu.lock.conda.write.
        from tfgpu.lock.conda.write import write_lock

        return write_lock(targets, output, channels=channels, channel_from=channel_from, reporter=reporter)
    # Start-up cost: `completion` loads this module but not tfgpu.lock.pip.write.
    from tfgpu.lock.pip.write import write_locks

    return write_locks(targets, output, reporter)


def read(path: str | Path):
    """Read and check a lock file of any format: a pip lock, or a conda-lock.yml (``.yml``/``.yaml``)."""
    path = Path(path).expanduser().absolute()
    if _conda_file(path):
        # Start-up cost: `completion` loads this module but not tfgpu.lock.conda.read.
        from tfgpu.lock.conda.read import read as read_conda

        return read_conda(path)
    if not path.is_file():
        raise UsageError(
            "lock-unreadable",
            f"There is no lock file at {path}.",
            ["Give the file `tfgpu-install lock` wrote (e.g. tfgpu-lock.linux-64.txt)."],
        )
    # Start-up cost: `completion` loads this module but not tfgpu.lock.pip.lockfile.
    from tfgpu.lock.pip.lockfile import read as read_pip

    return read_pip(path)


def check_lock(path: str | Path, wanted: dict | None = None, reporter=None):
    """``lock --check FILE``: whether a pip lock or a conda-lock.yml is what its recorded inputs
    resolve to today (a :class:`tfgpu.lock.check.Check`); ``wanted``: selectors it should still
    match (``tf``, ``mode``, ``python``, ``platform``; from the project file or the command line)."""
    # Start-up cost: `completion` loads this module but not tfgpu.lock.check.
    from tfgpu.lock.check import advise, check_wanted

    lock = read(path)  # refuses an edited, truncated or foreign lock first (exit 2/3)
    if _conda_file(lock.path):
        from tfgpu.lock.conda.check import check  # Start-up cost: this lock's format's checker only.
    else:
        from tfgpu.lock.pip.check import check  # Start-up cost: this lock's format's checker only.
    found = check(lock, reporter)
    check_wanted(found, wanted or {})
    found.advice = advise(found, wanted or {})
    return found


def check_project(*, mode: str | None, platforms: list[str], output: str | None, wanted: dict, reporter=None):
    """``lock --check`` with no file: every lock ``tfgpu-install lock`` writes for the project's mode
    and platforms (and ``-o``), looked for where ``lock`` would write it (here), else beside the
    project file (``wanted["project"]``); each checked. A lock that is missing makes the answer
    not current; none at all is a usage error (exit 2): nothing was checked."""
    # Start-up cost: `completion` loads this module but not tfgpu.lock.check.
    # Import cycle: tfgpu.lock.platforms imports this module.
    from tfgpu.lock.check import ProjectLocks, new_lock_command

    project = Path(wanted["project"])
    mode = mode_of(mode)
    if mode not in ("pip", "conda"):
        raise UsageError(
            "mode-not-lockable",
            f"{project} asks for --mode {mode}, which is not locked: system mode installs vendor archives.",
            ["Check a pip or conda lock: tfgpu-install lock --check FILE."],
        )
    if mode == "pip" and not platforms:
        raise UsageError(
            "bad-arguments",
            f"{project} lists no platforms, so which pip locks it describes is unknown.",
            [f'List them in {project.name} (platforms = ["linux-64"]), or give one: --platform linux-64.'],
        )

    bases = [Path.cwd(), *([project.parent] if project.parent != Path.cwd() else [])]
    places = [_lock_paths(mode, platforms, output, base) for base in bases]
    paths = next((found for found in places if any(path.is_file() for path in found.values())), None)
    if paths is None:
        from tfgpu.doors.controls import shown  # paths from the file system: a newline in one forges no line

        looked = ", ".join(shown(path) for found in places for path in found.values())
        raise UsageError(
            "lock-unreadable",
            f"No lock the project file {shown(project)} describes is there yet (looked for {looked}).",
            [
                f"Write it: {new_lock_command(wanted)} (it reads the project file).",
                "Or check one lock: tfgpu-install lock --check FILE.",
            ],
        )
    checks, missing = [], []
    for platform, path in paths.items():
        if not path.is_file():
            missing.append((platform, path))
            continue
        checks.append(check_lock(path, wanted, reporter))
    result = ProjectLocks(project, checks, missing)
    if not result.current:
        # One command writes every lock the project describes, whichever of them moved on, where they are.
        from tfgpu.doors import quoting

        there = bases[places.index(paths)]
        move = f"cd {quoting.sh(there)} && " if there != Path.cwd() else ""
        result.advice = move + new_lock_command(wanted)
    return result


def _lock_paths(mode: str, platforms: list[str], output: str | None, base: Path) -> dict[str, Path]:
    """{platform label: path} of the locks ``lock`` writes in ``base`` for ``mode`` (conda: one
    file for every platform)."""
    if mode == "conda":
        # Start-up cost: `completion` loads this module but not tfgpu.lock.conda.write.
        from tfgpu.lock.conda.write import output_path

        return {",".join(platforms) or "every platform": output_path(output, base)}
    # Start-up cost: `completion` loads this module but not tfgpu.lock.pip.write.
    from tfgpu.lock.pip.write import output_paths
    from tfgpu.lock.platforms import parse_platform

    return output_paths(output, [parse_platform(name) for name in platforms], base)


NOTHING_INSTALLED = "Nothing was installed."
"""What a refused ``create --from-lock``/``--from-bundle`` adds to its error. The readers and checks
below are shared with ``lock --check``, which installs nothing and so must not say it; the
sentence is added here, where an install was asked for and refused."""


def prepare(selectors, options, *, from_lock: str | None = None, from_bundle: str | None = None, reporter=None):
    """(resolution, options, source, lock) for ``create --from-lock FILE``/``--from-bundle DIR``,
    after every check: the lock decides what is built (selectors given alongside must agree with
    it), and ``source`` carries what installers install (they never read lock files themselves).
    Nothing is installed before it returns, so every refusal it raises says so."""
    try:
        return _prepare(selectors, options, from_lock=from_lock, from_bundle=from_bundle, reporter=reporter)
    except TfgpuError as error:
        if NOTHING_INSTALLED.lower() not in error.message.lower():
            error.message = f"{error.message.rstrip()} {NOTHING_INSTALLED}"
            error.args = (error.message,)
        raise


def _prepare(selectors, options, *, from_lock, from_bundle, reporter):
    if from_lock and _conda_file(from_lock):
        # Start-up cost: `completion` loads this module but not tfgpu.lock.conda.install.
        from tfgpu.lock.conda.install import prepare as prepare_conda

        return prepare_conda(Path(from_lock).expanduser().absolute(), options, selectors)
    if from_bundle:
        # Start-up cost: `completion` loads this module but not tfgpu.lock.bundle.read.
        from tfgpu.lock.bundle.read import prepare as prepare_bundle

        return prepare_bundle(from_bundle, options, selectors, reporter)
    # Start-up cost: `completion` loads this module but not tfgpu.lock.pip.install.
    from tfgpu.lock.pip.install import prepare as prepare_pip

    return prepare_pip(read(from_lock), options, selectors)


def for_export(path: str | Path, selectors, platforms: tuple[str, ...] = ()):
    """``script --from-lock FILE``: (the resolution the lock recorded, its :class:`Locked` pins for
    one platform). The lock is read by the readers ``create --from-lock`` uses (an edited, truncated
    or hostile lock is refused here, before anything is rendered); selectors given alongside must
    agree with it; ``platforms``: ``--platform``, which chooses among a conda lock's platforms."""
    # Start-up cost: `completion` loads this module but not tfgpu.lock.exported, tfgpu.lock.selectors.
    from tfgpu.lock.exported import Locked, check_hashed, choose_platform, conda_pins, file_sha256
    from tfgpu.lock.selectors import check_selectors

    def digest_of(where: Path) -> str:
        kind = untrusted.CONDA_LOCK if _conda_file(where) else untrusted.PIP_LOCK
        return file_sha256(untrusted.read_bytes(where, kind))

    try:
        before = digest_of(Path(path).expanduser().absolute())
    except TfgpuError:
        before = None  # read() says why, with its own code
    lock = read(path)
    digest = digest_of(lock.path)
    if digest != before:  # rewritten while read: the header's sha256 would not be the pins' file
        raise UsageError(
            "lock-unreadable",
            f"{lock.path} changed while it was being read (another `tfgpu-install lock` writing it?); "
            "nothing was written.",
            ["Export again once whatever writes the lock has finished."],
        )
    if _conda_file(lock.path):
        # Start-up cost: `completion` loads this module but not tfgpu.lock.conda.install.
        from tfgpu.lock.conda.install import pip_requirements

        platform = choose_platform(lock.path, list(lock.lockfile.metadata.platforms), platforms)
        recorded = lock.resolution(platform)
        conda = conda_pins(lock.path, lock.packages(platform, "conda"))
        requirements = pip_requirements(lock, platform)
    else:
        # Start-up cost: `completion` loads this module but not tfgpu.lock.pip.install.
        from tfgpu.lock.pip.install import lock_resolution

        platform = choose_platform(lock.path, [lock.header.platform], platforms)
        recorded = lock.resolution
        conda, requirements = (), lock.body
    check_hashed(lock.path, requirements)
    if recorded.cpu_only:
        raise ImpossibleError(
            "lock-cpu-only",
            f"{lock.path} locks a CPU-only environment for {platform}; the exports build GPU environments.",
            ["Install it with plain pip: pip install --require-hashes -r LOCK (a pip lock), or `conda-lock install`."],
        )
    mode = "conda" if conda or _conda_file(lock.path) else "pip"
    check_selectors(recorded, mode=mode, python=recorded.python, platform=platform, selectors=selectors, path=lock.path)
    if mode == "conda":
        resolution = resolve(
            make_request(
                tf=recorded.tensorflow, mode="conda", python=recorded.python, os=recorded.os, arch=recorded.arch
            ),
            None,
        )
    else:
        resolution = lock_resolution(lock)

    # The lock by its name and checksum only: its directory is this machine's, not the target's.
    said = f"Exactly as pinned in the lock {lock.path.name} (sha256 of the file {digest})."
    reasons = tuple(r for r in resolution.reasons if str(lock.path) not in r)
    notes = tuple(n for n in resolution.packages.notes if str(lock.path) not in n)
    resolution = replace(
        resolution, reasons=(said, *reasons), packages=replace(resolution.packages, notes=(said, *notes))
    )
    # The name is only shown (the sha256 is what identifies the file), on one line without control
    # characters: a script's LOCK_NAME word would carry an escape sequence to the reviewer's terminal.
    from tfgpu.doors.quoting import one_line

    pins = Locked(mode, one_line(lock.path.name) or "lock", digest, platform, requirements, conda)
    return resolution, pins
