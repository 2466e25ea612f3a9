"""Measure the "Share bytecode with earlier envs" step (``tfgpu.envs.bytecode.compile_site``).

    python scripts/measure_bytecode.py --first DIR --second DIR [--python PY]

``--first`` and ``--second`` are two unpacked copies of the same package's files, as uv leaves
them in its cache when a wheel was unpacked twice (once from the index, once from a
``--find-links`` directory): the same bytes, other inodes and modification times. For example, two
``archive-v0/*/`` directories of TensorFlow 2.21 in a uv cache (the cp311 and cp312 wheels hold the
same ``.py`` files). Each is hard-linked into a scratch directory (the cache itself is only read), then:

1. env A from ``--first``: every file compiled and kept in a fresh store (what the first env of a
   release does);
2. env B from ``--first`` again: the store's files linked (a later env from the same cache entry);
3. env C from ``--second``: a later env whose files came from the other cache entry, the case that
   compiled every file again.

Prints the files compiled, reused and the seconds of each, and removes the scratch directory.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tfgpu.envs import bytecode  # noqa: E402 - after the checkout is on the path
from tfgpu.process.runner import Runner  # noqa: E402


def env_from(tree: Path, into: Path) -> Path:
    """A site-packages of hard links to ``tree``'s files (directories are new: ``__pycache__``
    is written into the copy, never into the cache)."""
    subprocess.run(["cp", "-al", str(tree), str(into)], check=True)
    return into


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--first", type=Path, required=True)
    parser.add_argument("--second", type=Path, required=True)
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="measure-bytecode-"))
    try:
        store, runner = scratch / "pyc", Runner()
        sources = sum(1 for _ in args.first.rglob("*.py"))
        print(f"{sources:,} .py files in {args.first}")
        for label, tree in (
            ("A (first env, empty store)", args.first),
            ("B (same cache entry)", args.first),
            ("C (other cache entry, same bytes)", args.second),
        ):
            site = env_from(tree, scratch / label.split()[0])
            started = time.monotonic()
            compiled, reused = bytecode.compile_site(runner, args.python, site, store)
            seconds = time.monotonic() - started
            print(f"env {label}: {compiled:,} compiled, {reused:,} reused, {seconds:.1f} s")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
