"""Where tfgpu-install keeps its own files (platformdirs; each overridable for tests and CI)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def cache_root() -> Path:
    """Caches: parsed tables, uv's package cache. ``TFGPU_CACHE_DIR`` overrides."""
    override = os.environ.get("TFGPU_CACHE_DIR")
    if override:
        return Path(override)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("tfgpu-install"))


def data_dir() -> Path:
    """The user's own data: release rows fetched by ``tfgpu-install update-data``.
    ``TFGPU_USER_DATA_DIR`` overrides (tests, CI)."""
    override = os.environ.get("TFGPU_USER_DATA_DIR")
    if override:
        return Path(override)
    from platformdirs import user_data_dir

    return Path(user_data_dir("tfgpu-install")) / "data"


def log_dir() -> Path:
    """One log file per operation, with every command and its whole output."""
    override = os.environ.get("TFGPU_LOG_DIR")
    if override:
        return Path(override)
    from platformdirs import user_log_dir

    return Path(user_log_dir("tfgpu-install"))


def output_dir(directory: Path, output: str) -> Path:
    """Create the directory ``-o output`` writes into (and its parents), or say clearly why not."""
    from tfgpu.errors import ImpossibleError

    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ImpossibleError("bad-output", f"-o {output}: cannot create {directory} ({error.strerror}).",
                              ["Write somewhere you may write (a directory of yours, or the current one)."]) from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ImpossibleError("bad-output", f"-o {output}: {directory} is not writable.",
                              ["Write somewhere you may write (a directory of yours, or the current one)."])
    return directory


def write_output(path: Path, content: str | bytes, mode: int = 0o644) -> Path:
    """Write a file the user asked for (``-o``: an export, a lock) in one step.

    The bytes go to a fresh temporary file beside ``path`` (``mkstemp``: created exclusively, so no
    planted name or link is followed), which is then renamed over ``path``. A symbolic link at
    ``path`` is therefore replaced, never written through (a link planted in a checkout cannot
    aim the write at ``~/.bashrc``), and a crash leaves the old file or the new one, not half."""
    data = content.encode("utf-8") if isinstance(content, str) else content
    fd, partial = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(partial, mode)
        os.replace(partial, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)
        raise
    return path
