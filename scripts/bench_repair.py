#!/usr/bin/env python3
"""Benchmark `repair` against what a user would otherwise do with an env that has no GPU.

    python scripts/bench_repair.py [--tf 2.21.0] [--python 3.12] [--runs 3] [--work DIR] [--cache DIR] [--find-links DIR]

The env is the one users arrive with: `uv venv` + `uv pip install tensorflow==X` (no CUDA wheels).
Every side runs from the same warm uv cache (one cold install fills it first, untimed), median
of ``--runs``:
  repair        `tfgpu-install repair --yes --no-verify` of a fresh copy of that env
  undo          `tfgpu-install repair --undo` of it
  uv by hand    `uv pip install 'tensorflow[and-cuda]==X'` into a fresh copy (what a user types;
                it adds the wheels but not the load hook or activation an unactivated start needs)
  rebuild       `tfgpu-install create` of a whole new env of the same release
and what repair touched: packages added, files written, the disk it added (the wheels' files are
hard-linked from uv's cache, so only what is not already there counts).
Target (docs/maintainers/performance.md): warm repair of a TF 2.21 env <= 10 s. Needs network (PyPI) the first time;
``--find-links DIR``: every side installs from that wheel directory only, offline (the tests' stand-in
wheels: seconds, and every step of the script checked without PyPI).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(argv: list[str], env: dict) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"failed: {' '.join(argv)}\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return time.perf_counter() - start, done.stdout


def disk_bytes(*paths: Path) -> int:
    """Bytes on disk under ``paths``, each hard-linked inode counted once (as `du` does)."""
    done = subprocess.run(
        ["du", "-s", "-c", "--block-size=1", *map(str, paths)], capture_output=True, text=True, check=True
    )
    return int(done.stdout.splitlines()[-1].split()[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1].strip())
    parser.add_argument("--tf", default="2.21.0")
    parser.add_argument("--python", default="3.12")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--work", help="scratch directory (default: a temporary one, deleted after)")
    parser.add_argument("--cache", help="an existing tfgpu-install cache to start from (default: one under --work)")
    parser.add_argument("--find-links", metavar="DIR", help="install from this wheel directory only, offline")
    args = parser.parse_args()
    links = str(Path(args.find_links).absolute()) if args.find_links else None
    tool_links = ["--find-links", links, "--offline"] if links else []
    uv_links = ["--find-links", links, "--no-index", "--offline"] if links else []

    tool = shutil.which("tfgpu-install") or sys.exit("tfgpu-install is not on PATH: pip install -e . first")
    from tfgpu.detect.interpreters import find_python
    from tfgpu.engines.uv import find_uv

    uv = find_uv() or sys.exit("uv not found")
    python = find_python(args.python) or sys.exit(f"no Python {args.python} here")
    work = Path(args.work or tempfile.mkdtemp(prefix="tfgpu-bench-repair-"))
    work.mkdir(parents=True, exist_ok=True)
    cache = Path(args.cache) if args.cache else work / "cache"
    env = {
        **os.environ,
        "TFGPU_CACHE_DIR": str(cache),
        "UV_CACHE_DIR": str(cache / "uv"),
        "TFGPU_LOG_DIR": str(work / "logs"),
        "TFGPU_ENVS_DIR": str(work / "envs"),
    }

    def user_env(name: str) -> Path:
        prefix = work / name
        subprocess.run([uv, "venv", "--quiet", "--python", python, str(prefix)], check=True, env=env)
        subprocess.run(
            [
                uv,
                "pip",
                "install",
                "--quiet",
                "--python",
                str(prefix / "bin" / "python"),
                *uv_links,
                f"tensorflow=={args.tf}",
            ],
            check=True,
            env=env,
        )
        return prefix

    print(f"filling the cache (TF {args.tf}, Python {args.python}; untimed)…", file=sys.stderr)
    warm = user_env("warm-up")
    timed([tool, "repair", "--prefix", str(warm), "--yes", "--no-verify", "--no-detect", *tool_links], env)
    timed(
        [
            uv,
            "pip",
            "install",
            "--quiet",
            "--python",
            str(warm / "bin" / "python"),
            *uv_links,
            f"tensorflow[and-cuda]=={args.tf}",
        ],
        env,
    )

    results: dict[str, list[float]] = {"repair": [], "undo": [], "uv by hand": [], "rebuild": []}
    touched = {}
    for run in range(args.runs):
        prefix = user_env(f"repair-{run}")
        size = disk_bytes(cache, prefix)  # what the env adds beyond uv's cache, whose files it hard-links
        seconds, out = timed(
            [tool, "repair", "--prefix", str(prefix), "--yes", "--no-verify", "--no-detect", "--json", *tool_links], env
        )
        results["repair"].append(seconds)
        summary = json.loads(out)
        touched = {
            "packages added": len(summary["added"]),
            "packages changed": len(summary["changed"]),
            "files written": len(summary["files"]),
            "MB added": (disk_bytes(cache, prefix) - size) / 1e6,
        }
        results["undo"].append(timed([tool, "repair", "--undo", "--prefix", str(prefix)], env)[0])
        by_hand = user_env(f"by-hand-{run}")
        results["uv by hand"].append(
            timed(
                [
                    uv,
                    "pip",
                    "install",
                    "--quiet",
                    "--python",
                    str(by_hand / "bin" / "python"),
                    *uv_links,
                    f"tensorflow[and-cuda]=={args.tf}",
                ],
                env,
            )[0]
        )
        results["rebuild"].append(
            timed(
                [
                    tool,
                    "create",
                    "--tf",
                    args.tf,
                    "--mode",
                    "pip",
                    "--python",
                    args.python,
                    "--prefix",
                    str(work / f"rebuilt-{run}"),
                    "--no-verify",
                    "--no-detect",
                    *tool_links,
                ],
                env,
            )[0]
        )
    median = {name: statistics.median(times) for name, times in results.items()}
    print(f"TF {args.tf}, Python {args.python}, warm cache, median of {args.runs}:")
    for name, seconds in median.items():
        print(f"  {name:<12} {seconds:6.2f} s")
    print(
        f"  repair / uv by hand: {median['repair'] / median['uv by hand']:.2f}x; "
        f"repair / rebuild: {median['repair'] / median['rebuild']:.2f}x"
    )
    print("  " + "; ".join(f"{k}: {v:.0f}" if isinstance(v, float) else f"{k}: {v}" for k, v in touched.items()))
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
