"""Benchmark: the pip lock of TF 2.21 with a warm uv cache, and one offline bundle build.

    python scripts/bench_lock.py [--runs 5] [--bundle] [--reuse DIR] [--keep DIR]

Needs PyPI. The lock is timed as the whole command (``python -m tfgpu lock --tf 2.21 --mode pip
--python 3.12 --platform linux-64``, a new process each run, after one warm-up run); target
<= 2 s. ``--bundle`` then builds the TF 2.21 linux-64 Python 3.12 bundle once, under /tmp, prints
its time, file count and size, and deletes it (``--keep DIR`` builds it in DIR and keeps it).
``--reuse DIR`` hard-links matching wheels from a local wheel directory instead of downloading
them (every one is still checked against the lock's sha256); without it the first bundle
downloads about 3 GB.
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

SELECTORS = ["--tf", "2.21", "--mode", "pip", "--python", "3.12", "--platform", "linux-64", "--no-detect"]


def tool(*argv: str, env: dict) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "tfgpu", *argv], capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"`tfgpu-install {' '.join(argv)}` failed ({done.returncode}):\n{done.stdout}{done.stderr[-3000:]}")
    return seconds, done


def bench_lock(runs: int, env: dict) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-lock-") as tmp:
        out = str(Path(tmp) / "tf221.txt")
        tool("lock", *SELECTORS, "-o", out, env=env)  # warm uv's cache
        times = [tool("lock", *SELECTORS, "-o", out, env=env)[0] for _ in range(runs)]
        pins = sum(1 for line in Path(out).read_text().splitlines() if "==" in line and not line.startswith("#"))
    print(
        f"pip lock, TF 2.21 linux-64 py3.12, warm cache ({pins} pins): median {statistics.median(times):.2f} s, "
        f"min {min(times):.2f} s, max {max(times):.2f} s over {runs} runs (target <= 2 s)"
    )


def bench_bundle(env: dict, keep: str | None, reuse: str | None) -> None:
    if reuse:
        env = {**env, "TFGPU_WHEEL_DIRS": str(Path(reuse).absolute())}
    parent = None if keep else tempfile.mkdtemp(prefix="bench-bundle-", dir="/tmp")
    out = Path(keep) if keep else Path(parent) / "bundle"
    try:
        seconds, done = tool("bundle", *SELECTORS, "-o", str(out), "--json", env=env)
        summary = json.loads(done.stdout)
        how = f"reusing wheels from {reuse}" if reuse else "downloading"
        print(
            f"bundle, TF 2.21 linux-64 py3.12 ({how}): {seconds:.1f} s, {summary['files']} files "
            f"({summary['wheels']} wheels + {summary['tool_wheels']} tool wheels), {summary['mb']} MB"
            + (f", kept in {out}" if keep else ", deleted")
        )
    finally:
        if parent:
            shutil.rmtree(parent, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--bundle", action="store_true", help="also build the bundle once")
    parser.add_argument("--reuse", metavar="DIR", help="local wheel directory to reuse (TFGPU_WHEEL_DIRS)")
    parser.add_argument("--keep", metavar="DIR", help="build the bundle in DIR and keep it")
    args = parser.parse_args()
    env = dict(os.environ)
    env.pop("TFGPU_INDEX_URL", None)
    bench_lock(args.runs, env)
    if args.bundle or args.keep:
        bench_bundle(env, args.keep, args.reuse)
    return 0


if __name__ == "__main__":
    sys.exit(main())
