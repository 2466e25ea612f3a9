"""Measure what the test command costs: wall time, the outcome line, and the disk it leaves behind.

    python scripts/measure_test_run.py                      # the README's test command's pytest run, cold
    python scripts/measure_test_run.py --warm               # keep TFGPU_TEST_CACHE as it is
    python scripts/measure_test_run.py -- -m "not network and not slow"   # the fast tier

Cold means an empty ``TFGPU_TEST_CACHE`` (a fresh directory under ``--work``, so the user's own
cache is neither used nor deleted) and a fresh pytest base temporary directory. Afterwards it
prints the run's time, pytest's summary line, and ``du`` of the test cache (by subdirectory) and
of pytest's temporary directories: the figures docs/maintainers/tests.md quotes. It needs the test
extra installed (``pip install -e '.[test]'``); the network tests need PyPI.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def disk(path: Path) -> int:
    """Bytes under ``path`` as ``du`` counts them (each hard-linked file once)."""
    if not path.exists():
        return 0
    done = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True, check=False)
    return int(done.stdout.split()[0]) if done.stdout else 0


def human(size: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.1f} {unit}" if unit != "B" else f"{size} B"
        size /= 1000
    return f"{size:.1f} GB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warm", action="store_true", help="use TFGPU_TEST_CACHE as it is (default: a new, empty one)")
    parser.add_argument(
        "--work", type=Path, help="where the cold cache and pytest's directories go (default: a new temp dir)"
    )
    parser.add_argument(
        "pytest_args", nargs="*", help="arguments for pytest after `--` (default: none, the whole suite)"
    )
    args = parser.parse_args(argv)

    work = args.work or Path(tempfile.mkdtemp(prefix="tfgpu-test-run-"))
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if not args.warm:
        env["TFGPU_TEST_CACHE"] = str(work / "test-cache")
    cache = Path(env.get("TFGPU_TEST_CACHE") or Path.home() / ".cache" / "tfgpu-install-tests")
    basetemp_root = work / "pytest-tmp"
    env["TMPDIR"] = str(basetemp_root)  # pytest's own pytest-of-$USER directories land here
    basetemp_root.mkdir(exist_ok=True)

    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args.pytest_args]
    print("+", " ".join(command), f"(TFGPU_TEST_CACHE={cache}, TMPDIR={basetemp_root})", flush=True)
    started = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    summary = next((line for line in reversed(done.stdout.splitlines()) if " in " in line), "(no summary)")

    print(f"exit status: {done.returncode}")
    print(f"summary: {summary.strip('= ')}")
    print(f"wall time: {int(seconds // 60)} min {seconds % 60:.0f} s")
    print(f"TFGPU_TEST_CACHE {cache}: {human(disk(cache))}")
    if cache.is_dir():
        for part in sorted(cache.iterdir()):
            print(f"  {part.name}/: {human(disk(part))}")
    print(f"pytest's temporary directories ({basetemp_root}): {human(disk(basetemp_root))}")
    if args.work is None and not args.warm:
        shutil.rmtree(work, ignore_errors=True)
        print(f"(removed {work})")
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
