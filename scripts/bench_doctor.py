#!/usr/bin/env python3
"""Time `tfgpu-install doctor --prefix ENV --json` against a bare interpreter start, in one run.

    python scripts/bench_doctor.py --prefix ENV [--runs 9] [--tf-import]

Targets (docs/maintainers/performance.md): doctor on a TF 2.21 env <= 0.5 s and <= 25x
`python -c pass`. Both run as a user would, alternating, each in a fresh empty working directory,
with bytecode kept (``PYTHONDONTWRITEBYTECODE`` unset for the children: a shell or CI that exports it
would time a recompile of every module on every start), after one untimed warm-up of each. The
machine is shared, so the figures are the median and the best of ``--runs``; the ratio is taken of
both, and the CPU time each used (its children's included: doctor's library probe is one) is shown
beside them, steadier than the wall time on a busy machine. ``--tf-import`` also times what a user would run to find out the same thing (importing
TensorFlow in the env and listing its GPUs; seconds a run). Exits 0 whatever the figures are
(``--check``: 1 when a target is not met by the best run).
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
from pathlib import Path

TARGET_SECONDS = 0.5
TARGET_RATIO = 25.0


def timed(argv: list[str], env: dict, cwd: str, cpu: list[float] | None = None) -> float:
    """Wall seconds of one run; its CPU seconds (user + system, its own children included) go to ``cpu``."""
    start = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    _, _, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    child.returncode = 0  # reaped here: Popen must not wait for it again
    if cpu is not None:
        cpu.append(usage.ru_utime + usage.ru_stime)
    return seconds


def tool_argv() -> list[str]:
    """The installed console script beside this interpreter (as a user runs it), else ``-m tfgpu``."""
    script = Path(sys.executable).with_name("tfgpu-install")
    if script.is_file():
        return [str(script)]
    found = shutil.which("tfgpu-install")
    return [found] if found else [sys.executable, "-m", "tfgpu"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefix", required=True, help="the env doctor checks (a TF 2.21 env for the target)")
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--tf-import", action="store_true", help="also time `import tensorflow` + listing GPUs")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is not met")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    doctor_argv = [*tool_argv(), "doctor", "--prefix", args.prefix, "--json"]
    bare_argv = [sys.executable, "-c", "pass"]
    with tempfile.TemporaryDirectory(prefix="bench-doctor-") as cwd:
        timed(doctor_argv, env, cwd)  # page cache, bytecode
        timed(bare_argv, env, cwd)
        doctor, bare, doctor_cpu, bare_cpu = [], [], [], []
        for _ in range(args.runs):  # alternating: a busy minute of the machine weighs on both alike
            bare.append(timed(bare_argv, env, cwd, bare_cpu))
            doctor.append(timed(doctor_argv, env, cwd, doctor_cpu))
        tf = []
        if args.tf_import:
            python = str(Path(args.prefix) / "bin" / "python")
            code = "import tensorflow as tf; tf.config.list_physical_devices('GPU')"
            tf = [timed([python, "-c", code], env, cwd) for _ in range(max(1, min(args.runs, 5)))]
    median, best = statistics.median(doctor), min(doctor)
    ratio, best_ratio = median / statistics.median(bare), best / min(bare)
    met = best <= TARGET_SECONDS and best_ratio <= TARGET_RATIO
    print(f"doctor --prefix {args.prefix}: {args.runs} runs each, alternating with `python -c pass`")
    print(f"{'python -c pass':44} median {statistics.median(bare) * 1000:7.1f} ms   best {min(bare) * 1000:7.1f} ms")
    print(
        f"{'tfgpu-install doctor --prefix ENV --json':44} median {median * 1000:7.1f} ms   best {best * 1000:7.1f} ms"
    )
    print(
        f"{'ratio (doctor / python -c pass)':44} median {ratio:6.1f}x     best {best_ratio:6.1f}x"
        f"   (target <= {TARGET_SECONDS} s and <= {TARGET_RATIO:.0f}x: {'met' if met else 'NOT met'})"
    )
    print(
        f"{'CPU seconds (user + system, children included)':44} doctor {min(doctor_cpu) * 1000:7.1f} ms   "
        f"python -c pass {min(bare_cpu) * 1000:5.1f} ms (best of each)"
    )
    if tf:
        print(
            f"{'import tensorflow + list_physical_devices':44} median {statistics.median(tf):7.2f} s"
            f"    (doctor is {median / statistics.median(tf):.2f}x of it)"
        )
    return 1 if args.check and not met else 0


if __name__ == "__main__":
    raise SystemExit(main())
