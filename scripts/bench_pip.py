#!/usr/bin/env python3
"""Benchmark pip mode against what a user would otherwise run, side by side in one run.

    python scripts/bench_pip.py [--tf 2.21] [--python 3.12] [--skip-pip] [--work DIR] [--find-links DIR] [--check]

Measures, each from a cold cache of its own:
  tool cold   `tfgpu-install create --mode pip --no-verify`
  uv cold     `uv venv` + `uv pip install --compile-bytecode` of the same requirements
  pip cold    `python -m venv` + `pip install --isolated` of the same requirements (fresh pip cache;
              --isolated so that, like uv, it reads PyPI only: this build machine's pip config adds
              local indexes that hold some of the CUDA wheels)
then a second env from the now-warm caches:
  tool warm   the same create again, into another prefix
  uv warm     the same uv commands again, into another venv
and the disk the second tool env adds (files hard-linked from uv's cache count once).
Targets (docs/maintainers/performance.md): tool cold <= 1.15x uv cold and <= 0.3x pip cold; tool warm <= 1.3x uv warm,
adding < 100 MB. Needs network (PyPI) and ~20 GB of disk; takes a few minutes. ``--find-links DIR``:
every side installs from that wheel directory only, offline (the tests' stand-in wheels: seconds, and
the script's every step checked without PyPI). Exits 0 whatever the ratios (``--check``: 1 when a
target is not met).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(argv: list[str], env: dict | None = None) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"failed: {' '.join(argv)}\n{done.stderr[-2000:]}")
    return time.perf_counter() - start


def disk_bytes(*paths: Path) -> int:
    """Bytes on disk under ``paths``, each hard-linked inode counted once (as `du` does)."""
    done = subprocess.run(["du", "-s", "--block-size=1", *map(str, paths)], capture_output=True, text=True, check=True)
    return sum(int(line.split()[0]) for line in done.stdout.splitlines())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1].strip())
    parser.add_argument("--tf", default="2.21")
    parser.add_argument("--python", default="3.12")
    parser.add_argument("--skip-pip", action="store_true", help="skip plain pip (slow: minutes)")
    parser.add_argument("--work", help="scratch directory (default: a temporary one, deleted after)")
    parser.add_argument("--find-links", metavar="DIR", help="install from this wheel directory only, offline")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is not met")
    args = parser.parse_args()
    links = str(Path(args.find_links).absolute()) if args.find_links else None
    tool_links = ["--find-links", links, "--offline"] if links else []
    uv_links = ["--find-links", links, "--no-index", "--offline"] if links else []
    pip_links = ["--find-links", links, "--no-index"] if links else []

    tool = shutil.which("tfgpu-install") or sys.exit("tfgpu-install is not on PATH: pip install -e . first")
    from tfgpu.detect.interpreters import find_python
    from tfgpu.engines.uv import find_uv

    uv = find_uv() or sys.exit("uv not found")
    python = find_python(args.python) or sys.exit(f"Python {args.python} not found")
    work = Path(args.work or tempfile.mkdtemp(prefix="tfgpu-bench-"))
    work.mkdir(parents=True, exist_ok=True)

    plan = json.loads(
        subprocess.run(
            [tool, "plan", "--tf", args.tf, "--mode", "pip", "--python", args.python, "--json"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    requirements = plan["packages"]["pip"]
    print(f"TF {plan['tensorflow']}, Python {args.python}: {' '.join(requirements)}\n")

    tool_env = dict(os.environ, TFGPU_CACHE_DIR=str(work / "tool-cache"), TFGPU_LOG_DIR=str(work / "logs"))
    uv_env = dict(os.environ, UV_CACHE_DIR=str(work / "uv-cache"))
    create = [tool, "create", "--tf", args.tf, "--mode", "pip", "--python", args.python, "--no-verify", *tool_links]

    def by_hand(venv: Path) -> float:
        return timed([uv, "venv", str(venv), "--python", python], uv_env) + timed(
            [
                uv,
                "pip",
                "install",
                "--python",
                str(venv / "bin" / "python"),
                "--compile-bytecode",
                *uv_links,
                *requirements,
            ],
            uv_env,
        )

    results: dict[str, float] = {}
    results["tool cold"] = timed([*create, "--prefix", str(work / "tool1")], tool_env)
    results["uv cold"] = by_hand(work / "uv1")
    if not args.skip_pip:
        pip_env = dict(os.environ, PIP_CACHE_DIR=str(work / "pip-cache"))
        cert = ["--cert", os.environ["PIP_CERT"]] if os.environ.get("PIP_CERT") else []
        results["pip cold"] = timed([python, "-m", "venv", str(work / "pip1")], pip_env) + timed(
            [
                str(work / "pip1" / "bin" / "pip"),
                "install",
                "--isolated",
                *cert,
                "--cache-dir",
                str(work / "pip-cache"),
                "--disable-pip-version-check",
                *pip_links,
                *requirements,
            ],
            pip_env,
        )
    before = disk_bytes(work / "tool-cache", work / "tool1")
    results["tool warm"] = timed([*create, "--prefix", str(work / "tool2")], tool_env)
    added = disk_bytes(work / "tool-cache", work / "tool1", work / "tool2") - before
    results["uv warm"] = by_hand(work / "uv2")

    for label, seconds in results.items():
        print(f"{label:10} {seconds:7.1f} s")
    checks = [
        ("tool cold / uv cold", results["tool cold"] / results["uv cold"], 1.15),
        ("tool warm / uv warm", results["tool warm"] / results["uv warm"], 1.3),
    ]
    if "pip cold" in results:
        checks.insert(1, ("tool cold / pip cold", results["tool cold"] / results["pip cold"], 0.3))
    print()
    failed = False
    for label, ratio, limit in checks:
        verdict = "OK" if ratio <= limit else "OVER"
        failed |= ratio > limit
        print(f"{label:22} {ratio:5.2f}x  (target <= {limit}x) {verdict}")
    print(f"{'disk added by env 2':22} {added / 1e6:5.0f} MB (target < 100 MB) {'OK' if added < 100e6 else 'OVER'}")
    failed |= added >= 100e6
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed and args.check else 0


if __name__ == "__main__":
    raise SystemExit(main())
