"""Writing team locks: the file names, the tools a lock run uses, and the pip and conda writers.

Output naming (contract): ``lock --platform P -o FILE`` writes FILE; with several platforms each
gets FILE with the platform inserted before the extension (``team.txt`` -> ``team.linux-64.txt``);
without ``-o``, ``tfgpu-lock.<platform>.txt`` in the current directory. The PEP 751 file goes
beside each as ``pylock.<platform>.toml``.
"""


from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tfgpu.errors import ImpossibleError, OperationError, UsageError
from tfgpu.lock.platforms import Platform
from tfgpu.paths import output_dir, write_output

@dataclass(frozen=True)
class Written:
    """One lock written: where, and what it holds."""

    platform: str
    path: Path
    pylock: Path
    meta: dict
    pins: dict[str, str]

    def to_dict(self) -> dict:
        return {"platform": self.platform, "path": str(self.path), "pylock": str(self.pylock),
                "tensorflow": self.meta["resolution"]["tensorflow"], "python": self.meta["python"],
                "cpu_only": self.meta["cpu_only"], "packages": len(self.pins), "sha256": self.meta["sha256"]}


def output_paths(output: str | None, platforms: list[Platform]) -> dict[str, Path]:
    """Where each platform's lock goes (see the module docstring)."""
    if not output:
        return {p.name: Path(f"tfgpu-lock.{p.name}.txt").absolute() for p in platforms}
    path = Path(output).expanduser().absolute()
    if path.is_dir():
        raise ImpossibleError("bad-output", f"-o {output} is a directory; give the lock's file name.",
                         [f"-o {Path(output) / 'tfgpu-lock.txt'}"])
    if len(platforms) == 1:
        return {platforms[0].name: path}
    return {p.name: path.with_name(f"{path.stem}.{p.name}{path.suffix or '.txt'}") for p in platforms}


def tools(operation: str):
    """(runner, uv binary, uv cache dir) for a lock or bundle operation; the log names ``operation``."""
    from tfgpu.engines.uv import find_uv
    from tfgpu.paths import cache_root
    from tfgpu.proc import Runner

    uv = find_uv()
    if uv is None:
        raise ImpossibleError("uv-missing", "Locking needs uv, which is not installed with this tfgpu-install.",
                             ["`pip install uv` into the environment that runs tfgpu-install."])
    return Runner.for_operation(operation), uv, cache_root() / "uv"


def write_locks(mode: str, targets: list[tuple[Platform, object, bool]], output: str | None,
                reporter=None) -> list[Written]:
    """Lock each ``(platform, resolution, cpu_only)`` in ``mode``; returns what was written.

    Every platform is resolved before any file is written, so a failure leaves no partial set.
    """
    if mode != "pip":  # conda locks: tfgpu.lock.conda_lock.write (one file for every platform)
        raise UsageError("mode-not-lockable", f"--mode {mode} cannot be locked: system mode installs vendor "
                         "archives, not packages.", ["Use --mode pip (or --mode conda)."])
    from tfgpu.lock import pip_lock

    runner, uv, cache = tools("lock")
    paths = output_paths(output, [platform for platform, _, _ in targets])
    for path in paths.values():  # before minutes of resolving, not after
        output_dir(path.parent, output or str(path))
    rendered = []
    for platform, resolution, cpu_only in targets:
        if reporter is not None:
            reporter.note(f"locking TF {resolution.tensorflow} for {platform.name}, Python {resolution.python}")
        body, pylock = pip_lock.compile_pins(list(resolution.packages.pip), platform, resolution.python,
                                             runner=runner, uv=uv, cache_dir=cache)
        meta = pip_lock.make_meta(resolution, platform, cpu_only=cpu_only)
        path = paths[platform.name]
        rendered.append((platform, path, pip_lock.render(meta, body, str(path)), pylock))
    written = []
    for platform, path, text, pylock in rendered:
        write_output(path, text)
        pylock_path = path.with_name(f"pylock.{platform.name}.toml")
        write_output(pylock_path, f"# Written by tfgpu-install beside {path.name} (the lock it installs from).\n"
                     + pylock)
        lock = pip_lock.read(path, text)
        written.append(Written(platform.name, path, pylock_path, lock.meta, lock.pins()))
    return written


def write_conda_lock(targets, output: str | None, *, channels: list[str], reporter=None) -> dict:
    """One conda-lock.yml for every ``(platform, resolution, cpu_only)`` (``tfgpu.lock.conda_lock``)."""
    from tfgpu.lock import conda_lock
    from tfgpu.paths import cache_root

    runner, uv, _ = tools("lock")
    return conda_lock.write(targets, output, channels=channels, runner=runner, uv=uv, cache=cache_root(),
                            reporter=reporter)
