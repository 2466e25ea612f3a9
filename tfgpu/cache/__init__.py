"""The tool's caches, seen and cleaned: which uv package cache an install uses (:mod:`.uvdir`),
what each kind of cache holds and what cleaning it would free (:mod:`.survey`), and pruning or
cleaning it without reaching outside it (:mod:`.cleaning`).

Everything the tool caches lives under ``tfgpu.paths.cache_root()`` except uv's package cache,
which by default is the user's own (so wheels the user already has are not downloaded again, and
uv's hard links reach every env from one copy)."""

from __future__ import annotations

from tfgpu.cache.uvdir import UvCache, uv_cache, uv_cache_dir

__all__ = ["UvCache", "uv_cache", "uv_cache_dir"]
