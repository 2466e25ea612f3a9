"""What an env and the caches cost on disk, and how much of the env is the cache's bytes.

    python scripts/measure_disk.py --prefix ENV [--cache DIR ...]
    python scripts/measure_disk.py --create -- --tf 2.21 --mode pip --name tf2.21 --no-verify

``--create``: build the env first with ``tfgpu-install create`` and the arguments after ``--``
(timed), then measure it. ``--cache`` defaults to the tool's cache root and the uv cache installs
use (``tfgpu.cache.uv_cache``: the user's own where it is reused). Sizes are disk usage (allocated
blocks, as ``du``), each inode counted once:

- env: every file under the env;
- shared with the caches: the env's files that are hard links to a file in a cache (uv's unpacked
  wheels, the bytecode store): they cost nothing more than the cache already does;
- the env's own: the rest (bytecode compiled into it, the venv's scripts, the activation files);
- caches: each cache, and what env and caches take together.
"""

from __future__ import annotations

import argparse
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def inodes(root: Path) -> dict[tuple[int, int], int]:
    """{(device, inode): bytes on disk} of the regular files under ``root``, links not followed."""
    found: dict[tuple[int, int], int] = {}
    for directory, _, names in os.walk(root, followlinks=False):
        for name in names:
            try:
                info = os.lstat(os.path.join(directory, name))
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode):
                found[(info.st_dev, info.st_ino)] = info.st_blocks * 512
    return found


def gb(count: int) -> str:
    return f"{count / 1e9:.2f} GB" if count >= 1e9 else f"{count / 1e6:.1f} MB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prefix", type=Path, help="the env to measure")
    parser.add_argument("--cache", type=Path, action="append", help="a cache directory (repeatable)")
    parser.add_argument("--create", action="store_true", help="build the env first (arguments after --)")
    parser.add_argument("create_args", nargs="*")
    args = parser.parse_args()
    from tfgpu.cache import uv_cache
    from tfgpu.doors.paths import cache_root
    from tfgpu.envs.location import envs_dir

    prefix = args.prefix
    if args.create:
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "tfgpu", "create", *args.create_args, "--json"], text=True, stdout=subprocess.PIPE
        )
        print(f"create: exit {done.returncode} in {time.monotonic() - started:.0f} s")
        if done.returncode != 0:
            print(done.stdout)
            return 1
        import json

        prefix = Path(json.loads(done.stdout)["prefix"])
    if prefix is None:
        parser.error("give --prefix ENV or --create -- ARGS")
    chosen = uv_cache()
    caches = args.cache or sorted({cache_root(), chosen.path}, key=str)
    print(f"env {prefix}; envs directory {envs_dir()}; uv cache {chosen.path} ({chosen.why})")
    env = inodes(prefix)
    every: dict[tuple[int, int], int] = {}
    for cache in caches:
        found = inodes(cache)
        print(f"cache {cache}: {gb(sum(found.values()))} in {len(found):,} files")
        every.update(found)
    shared = sum(size for key, size in env.items() if key in every)
    own = sum(env.values()) - shared
    print(f"env: {gb(sum(env.values()))} in {len(env):,} files")
    print(f"  shared with the caches through hard links: {gb(shared)}")
    print(f"  the env's own bytes (bytecode, scripts, activation): {gb(own)}")
    print(f"caches: {gb(sum(every.values()))}; env and caches together: {gb(sum(every.values()) + own)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
