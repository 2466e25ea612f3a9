"""``tfgpu-install cache info|prune|clean``: the tool's cache by kind, or what pruning or cleaning freed."""

from __future__ import annotations

from tfgpu import results
from tfgpu.cache import operate
from tfgpu.settings import Settings


def cmd_cache(settings: Settings) -> results.Result:
    """``cache info|prune|clean``: the tool's cache by kind, or what pruning or cleaning freed."""
    return results.CacheReport(operate(settings.cache_action or "info", dry_run=settings.dry_run))
