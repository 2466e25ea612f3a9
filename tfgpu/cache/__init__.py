"""The tool's caches, seen and cleaned: which uv package cache an install uses (:mod:`.uvdir`),
what each kind of cache holds and what cleaning it would free (:mod:`.survey`), and pruning or
cleaning it without reaching outside it (:mod:`.cleaning`).

Everything the tool caches lives under ``tfgpu.doors.paths.cache_root()`` except uv's package cache,
which by default is the user's own (so wheels the user already has are not downloaded again, and
uv's hard links reach every env from one copy)."""

from __future__ import annotations

import os
from pathlib import Path

from tfgpu.cache.uvdir import UvCache, uv_cache, uv_cache_dir
from tfgpu.doors.paths import cache_root, data_dir, log_dir
from tfgpu.engines.uv import find_uv
from tfgpu.envs.conda_envs import conda_envs_dirs
from tfgpu.envs.location import envs_dir
from tfgpu.errors import TfgpuError
from tfgpu.process.runner import Runner
from tfgpu.records import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tfgpu.cache.cleaning import Tidied
    from tfgpu.cache.survey import Kind

__all__ = ["CacheInfo", "UvCache", "operate", "uv_cache", "uv_cache_dir"]


@record
class CacheInfo:
    """``cache info``: the cache root, each kind of cache in it, and the uv cache installs use."""

    root: str
    uv_cache: UvCache
    kinds: list[Kind]
    action: str = "info"

    @property
    def bytes(self) -> int:
        return sum(kind.usage.bytes for kind in self.kinds)

    @property
    def clean_frees(self) -> int:
        return sum(kind.clean_frees for kind in self.kinds)

    @property
    def prune_frees(self) -> int:
        return sum(kind.prune_frees or 0 for kind in self.kinds)

    def to_dict(self) -> dict:
        uv = self.uv_cache
        return {
            "action": self.action,
            "root": self.root,
            "uv_cache": {"path": str(uv.path), "shared": uv.shared, "why": uv.why},
            "kinds": [kind.to_dict() for kind in self.kinds],
            "bytes": self.bytes,
            "clean_frees": self.clean_frees,
            "prune_frees": self.prune_frees,
        }


def operate(action: str, *, dry_run: bool = False) -> CacheInfo | Tidied:
    """``cache info`` (sizes by kind, what clean and prune would free, which uv cache installs use),
    or ``cache prune`` / ``cache clean`` (what was freed; ``dry_run``: what would be)."""
    # Looked up at each call: tests stand a fake in for survey().
    from tfgpu.cache.survey import survey

    root, uv = cache_root(), find_uv()
    chosen = uv_cache(uv)
    if action == "info":
        return CacheInfo(str(root), chosen, survey(root, chosen))
    # Import cycle: tfgpu.cache.cleaning imports this module.
    from tfgpu.cache.cleaning import tidy

    runner = Runner.for_operation(f"cache-{action}")
    runner.log(f"uv cache: {chosen.path} ({chosen.why})")

    try:
        conda_envs = conda_envs_dirs()
    except TfgpuError:
        conda_envs = []  # a malformed CONDA_ENVS_PATH names no directory; the markers inside still count
    places = _places(conda_envs)
    return tidy(root, envs_dir(), chosen, prune=action == "prune", dry_run=dry_run, uv=uv, runner=runner, places=places)


def _places(conda_envs):
    """What no kind of cache may hold or lie in, besides the envs directory (``tfgpu.cache.guard``):
    conda's envs directories, the data directories, the working directory (a project) and home."""
    # Import cycle: tfgpu.cache.guard imports this module.
    from tfgpu.cache.guard import DATA_APART, ENVS_APART, LOGS_APART, Place

    places = [Place("the data directory", data_dir(), owns_below=True, way=DATA_APART)]
    overlay = os.environ.get("TFGPU_DATA_DIR", "").strip()
    if overlay:
        overlay_path = Path(os.path.abspath(os.path.expanduser(overlay)))
        places.append(Place("the data directory TFGPU_DATA_DIR", overlay_path, owns_below=True, way=DATA_APART))
    places += [Place("a conda envs directory", path, owns_below=True, way=ENVS_APART) for path in conda_envs]
    # The logs are each operation's record (a failed create's whole output): not the cache's to delete.
    places.append(Place("the log directory", log_dir(), way=LOGS_APART))
    try:
        places.append(Place("the working directory", Path(os.getcwd())))
    except OSError:
        pass  # deleted under this process: nothing a clean could reach
    home = os.path.expanduser("~")
    if os.path.isabs(home):
        places.append(Place("your home directory", Path(home)))
    return places
