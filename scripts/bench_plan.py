#!/usr/bin/env python3
"""Measure `tfgpu-install plan --json` wall time (target: median <= 150 ms over >= 10 runs).

Runs the installed console script as a user would, with host detection on, next to the
interpreter's own start-up (`python -c pass`) and `pip --version` for scale.

    python scripts/bench_plan.py [--runs 15]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time


def timed(argv: list[str], runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        samples.append((time.perf_counter() - start) * 1000)
        if done.returncode not in (0,):
            raise SystemExit(f"{argv} exited {done.returncode}")
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    tool = shutil.which("tfgpu-install") or sys.exit("tfgpu-install is not on PATH: pip install -e . first")
    cases = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "pip --version": [sys.executable, "-m", "pip", "--version"],
        "plan --json (2.13 conda)": [tool, "plan", "--tf", "2.13", "--mode", "conda", "--json"],
        "plan --json (latest pip)": [tool, "plan", "--json"],
        "plan (rich, 2.13 conda)": [tool, "plan", "--tf", "2.13", "--mode", "conda"],
        "matrix --json": [tool, "matrix", "--json"],
    }
    timed(cases["plan --json (2.13 conda)"], 2)  # warm the page cache and bytecode
    print(f"{'command':28} {'median ms':>10} {'min ms':>8} {'max ms':>8}   (n={args.runs})")
    results = {}
    for label, argv in cases.items():
        samples = timed(argv, args.runs)
        results[label] = statistics.median(samples)
        print(f"{label:28} {results[label]:10.1f} {min(samples):8.1f} {max(samples):8.1f}")
    target = results["plan --json (2.13 conda)"]
    print(f"\nplan --json median {target:.0f} ms (target <= 150 ms): {'OK' if target <= 150 else 'OVER'}; "
          f"{target / results['python -c pass']:.1f}x bare interpreter start, "
          f"{target / results['pip --version']:.2f}x `pip --version`")
    return 0 if target <= 150 else 1


if __name__ == "__main__":
    raise SystemExit(main())
