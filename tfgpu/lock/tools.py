"""The tools every lock, bundle and ``lock --check`` run uses: a runner whose log names the
operation, uv, and uv's cache. Format-neutral."""

from __future__ import annotations

from tfgpu.cache import uv_cache
from tfgpu.engines.uv import find_uv
from tfgpu.process.runner import Runner


def tools(operation: str):
    """(runner, uv binary, uv cache dir) for a lock or bundle operation; the log names ``operation``."""
    uv = find_uv()
    if uv is None:
        # Start-up cost: a lock starts uv first; tfgpu.installers.engine (rattler with it) is for installing.
        from tfgpu.installers.engine import uv_missing

        raise uv_missing("Locking")
    runner, chosen = Runner.for_operation(operation), uv_cache(uv)
    runner.log(f"uv cache: {chosen.path} ({chosen.why})")
    return runner, uv, chosen.path
