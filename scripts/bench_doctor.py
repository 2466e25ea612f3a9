#!/usr/bin/env python3
"""Time `tfgpu-install doctor --prefix ENV` (target <= 1 s) against what a user would run to
find out the same thing: importing TensorFlow and listing GPUs in that env.

    python scripts/bench_doctor.py --prefix ENV [--runs 5]
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
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        samples.append(time.perf_counter() - start)
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    tool = shutil.which("tfgpu-install") or sys.exit("tfgpu-install is not on PATH")
    python = f"{args.prefix}/bin/python"
    timed([tool, "doctor", "--prefix", args.prefix, "--json"], 1)  # page cache, bytecode
    doctor = statistics.median(timed([tool, "doctor", "--prefix", args.prefix, "--json"], args.runs))
    tf = statistics.median(
        timed([python, "-c", "import tensorflow as tf; tf.config.list_physical_devices('GPU')"], args.runs)
    )
    print(f"{'doctor --prefix ENV':42} {doctor:6.2f} s  (target <= 1 s) {'OK' if doctor <= 1 else 'OVER'}")
    print(f"{'import tensorflow + list_physical_devices':42} {tf:6.2f} s")
    print(f"{'ratio':42} {doctor / tf:6.2f}x")
    return 0 if doctor <= 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
