#!/usr/bin/env python3
"""Measure `tfgpu-install plan --json` wall time (target: median <= 100 ms over >= 10 runs).

Runs the installed console script as a user would, with host detection on, next to the
interpreter's own start-up (`python -c pass`) and `pip --version` for scale. A user's Python
writes and reuses bytecode, so the children run without PYTHONDONTWRITEBYTECODE (a shell or CI
that exports it would otherwise time a recompile of every module on every start), after a warm-up
that compiles it. Every case runs in a fresh empty temporary directory (its working directory),
so no project file (a repository's ``pyproject.toml`` or ``tfgpu.toml``) is found and parsed into
the figure, wherever the script is started from.

    python scripts/bench_plan.py [--runs 21]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

TARGET_MS = 100


def timed(argv: list[str], runs: int, env: dict[str, str], cwd: str) -> list[float]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
        samples.append((time.perf_counter() - start) * 1000)
        if done.returncode not in (0,):
            raise SystemExit(f"{argv} exited {done.returncode}")
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    tool = shutil.which("tfgpu-install") or sys.exit("tfgpu-install is not on PATH: pip install -e . first")
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    cases = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "pip --version": [sys.executable, "-m", "pip", "--version"],
        "plan --json (2.13 conda)": [tool, "plan", "--tf", "2.13", "--mode", "conda", "--json"],
        "plan --json (latest pip)": [tool, "plan", "--json"],
        "plan (rich, 2.13 conda)": [tool, "plan", "--tf", "2.13", "--mode", "conda"],
        "matrix --json": [tool, "matrix", "--json"],
    }
    with tempfile.TemporaryDirectory(prefix="tfgpu-bench-") as empty:
        return _report(cases, args.runs, env, empty)


def _report(cases: dict[str, list[str]], runs: int, env: dict[str, str], cwd: str) -> int:
    for argv in cases.values():  # warm the page cache, write the bytecode and the parsed-table cache
        timed(argv, 1, env, cwd)
    print(f"{'command':28} {'median ms':>10} {'min ms':>8} {'max ms':>8}   (n={runs})")
    results = {}
    for label, argv in cases.items():
        samples = timed(argv, runs, env, cwd)
        results[label] = statistics.median(samples)
        print(f"{label:28} {results[label]:10.1f} {min(samples):8.1f} {max(samples):8.1f}")
    plans = {label: ms for label, ms in results.items() if label.startswith("plan --json")}
    worst = max(plans.values())
    for label, ms in plans.items():
        print(
            f"\n{label}: median {ms:.0f} ms (target <= {TARGET_MS} ms): {'OK' if ms <= TARGET_MS else 'OVER'}; "
            f"{ms / results['python -c pass']:.1f}x bare interpreter start, "
            f"{ms / results['pip --version']:.2f}x `pip --version`",
            end="",
        )
    print()
    return 0 if worst <= TARGET_MS else 1


if __name__ == "__main__":
    raise SystemExit(main())
