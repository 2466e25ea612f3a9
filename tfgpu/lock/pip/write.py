"""Writing hashed pip locks: the file names, then one lock (and its ``pylock.<platform>.toml``)
per platform.

Output naming (contract): ``lock --platform P -o FILE`` writes FILE; with several platforms each
gets FILE with the platform inserted before the extension (``team.txt`` -> ``team.linux-64.txt``);
without ``-o``, ``tfgpu-lock.<platform>.txt`` in the current directory. The PEP 751 file goes
beside each as ``pylock.<platform>.toml``.
"""

from __future__ import annotations

import os
from pathlib import Path

from tfgpu.doors import untrusted
from tfgpu.doors.controls import shown
from tfgpu.doors.paths import output_dir, write_outputs
from tfgpu.errors import ImpossibleError
from tfgpu.lock.platforms import Platform
from tfgpu.lock.resolving import compile_pins
from tfgpu.lock.tools import tools
from tfgpu.records import record

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: type checkers treat it alike
if TYPE_CHECKING:
    from tfgpu.lock.pip.lockfile import PipHeader
    from tfgpu.resolver.model import Resolution


@record
class Written:
    """One lock written: where, and what it holds."""

    platform: str
    path: Path
    pylock: Path
    header: PipHeader
    pins: dict[str, str]

    def to_dict(self) -> dict:
        return {
            "platform": self.platform,
            "path": str(self.path),
            "pylock": str(self.pylock),
            "tensorflow": self.header.resolution.tensorflow,
            "python": self.header.python,
            "cpu_only": self.header.cpu_only,
            "packages": len(self.pins),
            "sha256": self.header.sha256,
        }

    def note(self) -> str:
        """The line ``lock`` shows for it."""
        kind = "CPU-only" if self.header.cpu_only else f"CUDA {self.header.resolution.cuda}"
        return (
            f"{self.platform}: {self.path} ({len(self.pins)} packages, TF {self.header.resolution.tensorflow}, "
            f"{kind}, Python {self.header.python}); PEP 751: {self.pylock.name}"
        )


@record
class PipLocks:
    """What ``lock --mode pip`` wrote: one lock per platform."""

    locks: tuple[Written, ...]

    def to_dict(self) -> dict:
        """The ``lock --json`` document (contract): ``{"locks": [...]}``."""
        return {"locks": [item.to_dict() for item in self.locks]}

    def notes(self) -> list[str]:
        """What ``lock`` shows a person, one line per lock."""
        return [item.note() for item in self.locks]


def output_paths(output: str | None, platforms: list[Platform], base: Path | None = None) -> dict[str, Path]:
    """Where each platform's lock goes (see the module docstring), relative to ``base`` (default: the
    current directory; ``lock --check`` also looks beside the project file)."""
    base = base or Path.cwd()
    if not output:
        return {p.name: base / f"tfgpu-lock.{p.name}.txt" for p in platforms}
    path = base / Path(output).expanduser()
    if path.is_dir():
        raise ImpossibleError(
            "bad-output",
            f"-o {output} is a directory; give the lock's file name.",
            [f"-o {Path(output) / 'tfgpu-lock.txt'}"],
        )
    if len(platforms) == 1:
        return {platforms[0].name: path}
    return {p.name: path.with_name(f"{path.stem}.{p.name}{path.suffix or '.txt'}") for p in platforms}


_BESIDE = "# Written by tfgpu-install beside "
_PYLOCK = untrusted.Kind("the pylock beside the lock", 64 * 1024 * 1024, None, links=False)


def _refuse_anothers_pylock(lock: Path, pylock: Path, body: str) -> None:
    """``output-not-ours`` when the ``pylock.<platform>.toml`` the lock goes with is there and is not
    this lock's to replace: a file of the user's (uv writes ``pylock`` files too), or the pylock of
    another lock still beside it (``lock -o a.txt`` then ``lock -o b.txt`` in one directory would
    leave a.txt with b's pylock). One written beside this lock, beside one no longer there, or
    holding the very resolution ``body`` (the same lock again under another name), is."""
    try:
        head = untrusted.read_bytes(pylock, _PYLOCK)
    except untrusted.Unreadable:
        if not os.path.lexists(pylock) or os.path.islink(pylock):
            return  # a link is replaced, never followed: what it points at is kept either way
        head = b""  # a FIFO, a directory: not a pylock this tool wrote
    first, _, rest = head.decode("utf-8", "replace").partition("\n")
    suffix = " (the lock it installs from)."
    if first.startswith(_BESIDE) and first.endswith(suffix):
        beside = first[len(_BESIDE) : -len(suffix)]
        if beside == lock.name or "/" in beside or not os.path.lexists(lock.with_name(beside)) or rest == body:
            return
        whose = f"it is the pylock of {shown(beside)}, beside it"
    else:
        whose = "tfgpu-install did not write it"
    raise ImpossibleError(
        "output-not-ours",
        f"The lock {shown(lock)} goes with {shown(pylock)}, which is already there and {whose}; nothing was written.",
        ["Write the lock into another directory with -o DIR/NAME.", f"Or move {shown(pylock)} away first."],
    )


def _while_uv_resolves(reporter, said: str) -> None:
    """What a lock does while uv resolves rather than before uv starts: it says what is being locked
    (a reporter made at its first use, as the CLI's is, loads its renderers then) and loads the lock
    format."""
    # Start-up cost: the lock format is needed only once uv has answered.
    from tfgpu.lock.pip import lockfile  # noqa: F401

    if reporter is not None:
        reporter.note(said)


def write_locks(targets: list[tuple[Platform, Resolution, bool]], output: str | None, reporter=None) -> PipLocks:
    """Lock each ``(platform, resolution, cpu_only)``; returns what was written.

    Every platform is resolved before any file is written, so a failure leaves no partial set.
    """
    runner, uv, cache = tools("lock")
    paths = output_paths(output, [platform for platform, _, _ in targets])
    for path in paths.values():  # before minutes of resolving, not after
        output_dir(path.parent, output or str(path))
    rendered = []
    for platform, resolution, cpu_only in targets:
        said = f"locking TF {resolution.tensorflow} for {platform.name}, Python {resolution.python}"
        body, pylock = compile_pins(
            list(resolution.packages.pip),
            platform,
            resolution.python,
            runner=runner,
            uv=uv,
            cache_dir=cache,
            meanwhile=lambda said=said: _while_uv_resolves(reporter, said),
        )
        # Start-up cost: loaded while uv resolved (_while_uv_resolves), not before uv started.
        from tfgpu.lock.pip import lockfile

        header = lockfile.make_header(resolution, platform, cpu_only=cpu_only)
        path = paths[platform.name]
        rendered.append((platform, path, lockfile.render(header.to_dict(), body, str(path)), pylock))
    files = []
    for platform, path, _, pylock in rendered:
        _refuse_anothers_pylock(path, path.with_name(f"pylock.{platform.name}.toml"), pylock)
    for platform, path, text, pylock in rendered:
        files.append((path, text, 0o644))
        pylock_text = f"# Written by tfgpu-install beside {path.name} (the lock it installs from).\n" + pylock
        files.append((path.with_name(f"pylock.{platform.name}.toml"), pylock_text, 0o644))
    write_outputs(files)  # all or none: a full disk never leaves a lock beside another run's pylock
    written = []
    for platform, path, text, _ in rendered:
        pylock_path = path.with_name(f"pylock.{platform.name}.toml")
        lock = lockfile.read(path, text)
        written.append(Written(platform.name, path, pylock_path, lock.header, lock.pins()))
    return PipLocks(tuple(written))
