"""Where tfgpu-install keeps its own files (platformdirs; each overridable for tests and CI)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """Caches: parsed tables, uv's package cache. ``TFGPU_CACHE_DIR`` overrides."""
    override = os.environ.get("TFGPU_CACHE_DIR")
    if override:
        return Path(override)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("tfgpu-install"))


def log_dir() -> Path:
    """One log file per operation, with every command and its whole output."""
    override = os.environ.get("TFGPU_LOG_DIR")
    if override:
        return Path(override)
    from platformdirs import user_log_dir

    return Path(user_log_dir("tfgpu-install"))
