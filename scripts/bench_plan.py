#!/usr/bin/env python3
"""Measure `tfgpu-install plan --json` against a bare interpreter start (target: <= 4x `python -c pass`).

Runs the installed console script as a user would (else ``python -m tfgpu``), next to the
interpreter's own start-up (`python -c pass`) in the same run, so the ratio holds on a busy machine
where milliseconds do not: each case runs ``--runs`` times, interleaved, and the figure is the best
(the least disturbed) run, with the median beside it. A user's Python writes and reuses bytecode,
so the children run without PYTHONDONTWRITEBYTECODE (a shell or CI that exports it would otherwise
time a recompile of every module on every start), after a warm-up that compiles it and writes the
parsed-table cache. Every case runs in a fresh empty temporary directory (its working directory),
so no project file (a repository's ``pyproject.toml`` or ``tfgpu.toml``) is parsed into the figure.

``--versions`` also times what the tables' version reading costs a plan: importing
``tfgpu.versions`` and reading the versions and ranges one plan reads, against ``packaging``'s
``Version``/``SpecifierSet`` doing the same.

    python scripts/bench_plan.py [--runs 21] [--versions]
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

TARGET_RATIO = 4.0
PLAN = ["plan", "--tf", "2.21", "--json", "--os", "linux", "--driver", "580.65", "--gpu-cc", "9.0"]


def once(argv: list[str], env: dict[str, str], cwd: str) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=cwd)
    took = (time.perf_counter() - start) * 1000
    if done.returncode != 0:
        raise SystemExit(f"{argv} exited {done.returncode}: {done.stderr.decode(errors='replace')[-500:]}")
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--versions", action="store_true", help="also time the version reading of one plan")
    args = parser.parse_args()
    tool = shutil.which("tfgpu-install")
    command = [tool] if tool else [sys.executable, "-m", "tfgpu"]
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    cases = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "plan --tf 2.21 --json (given)": [*command, *PLAN],
        "plan --json (latest, detect)": [*command, "plan", "--json"],
        "plan --tf 2.13 --mode conda": [*command, "plan", "--tf", "2.13", "--mode", "conda", "--json"],
        "plan (rich, 2.13 conda)": [*command, "plan", "--tf", "2.13", "--mode", "conda"],
        "matrix --json": [*command, "matrix", "--json"],
    }
    with tempfile.TemporaryDirectory(prefix="tfgpu-bench-") as empty:
        code = _report(cases, args.runs, env, empty)
        if args.versions:
            _versions(command, args.runs, env, empty)
    return code


def _report(cases: dict[str, list[str]], runs: int, env: dict[str, str], cwd: str) -> int:
    for argv in cases.values():  # warm the page cache, write the bytecode and the parsed-table cache
        once(argv, env, cwd)
    samples: dict[str, list[float]] = {label: [] for label in cases}
    for _ in range(runs):  # interleaved: a busy second slows every case alike
        for label, argv in cases.items():
            samples[label].append(once(argv, env, cwd))
    bare_best, bare_median = min(samples["python -c pass"]), statistics.median(samples["python -c pass"])
    print(f"{'command':32} {'best ms':>8} {'median':>8}   {'best/bare':>9} {'median/bare':>11}   (n={runs})")
    for label, taken in samples.items():
        best, median = min(taken), statistics.median(taken)
        print(f"{label:32} {best:8.1f} {median:8.1f}   {best / bare_best:8.2f}x {median / bare_median:10.2f}x")
    ratio = min(samples["plan --tf 2.21 --json (given)"]) / bare_best
    print(
        f"\nplan --json: {ratio:.2f}x a bare interpreter start, best of {runs} "
        f"(target <= {TARGET_RATIO:.0f}x): {'OK' if ratio <= TARGET_RATIO else 'OVER'}"
    )
    return 0 if ratio <= TARGET_RATIO else 1


_READ = """
import contextlib, io, json, sys
import tfgpu.versions as versions
seen = {"parse": [], "range": [], "contains": []}
parse, init, contains = versions.parse, versions.Range.__init__, versions.Range.contains
def counted_parse(text):
    seen["parse"].append(text)
    return parse(text)
def counted_init(self, text=""):
    seen["range"].append(text)
    init(self, text)
def counted_contains(self, item, prereleases=None):
    seen["contains"].append((self._text, str(item), prereleases))
    return contains(self, item, prereleases)
versions.parse, versions.Range.__init__, versions.Range.contains = counted_parse, counted_init, counted_contains
from tfgpu.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    main(sys.argv[1:])
print(json.dumps(seen))
"""

_OURS = """
import json, sys, time
seen = json.loads(sys.stdin.read())
start = time.perf_counter()
from tfgpu.versions import Range, parse
[parse(text) for text in seen["parse"]]
[Range(text) for text in seen["range"]]
[Range(spec).contains(parse(item), prereleases=pre) for spec, item, pre in seen["contains"]]
print((time.perf_counter() - start) * 1000)
"""

_PACKAGING = """
import json, sys, time
seen = json.loads(sys.stdin.read())
start = time.perf_counter()
from packaging.specifiers import SpecifierSet
from packaging.version import Version
[Version(text) for text in seen["parse"]]
[SpecifierSet(text) for text in seen["range"]]
[SpecifierSet(spec).contains(Version(item), prereleases=pre) for spec, item, pre in seen["contains"]]
print((time.perf_counter() - start) * 1000)
"""


def _versions(command: list[str], runs: int, env: dict[str, str], cwd: str) -> None:
    """What one plan's version reading costs, each way, in a fresh interpreter that has already
    imported what a plan imports before it (``re``, ``enum``, ``json``, ``pathlib``, ``argparse``)."""
    done = subprocess.run(
        [sys.executable, "-c", _READ, *PLAN], capture_output=True, text=True, env=env, cwd=cwd, check=True
    )
    seen = done.stdout.strip().splitlines()[-1]
    counts = {key: len(value) for key, value in __import__("json").loads(seen).items()}
    warm = "import argparse, enum, json, pathlib, re\n"
    results = {}
    for label, code in (("tfgpu.versions", _OURS), ("packaging", _PACKAGING)):
        taken = [
            float(
                subprocess.run(
                    [sys.executable, "-c", warm + code], input=seen, capture_output=True, text=True, env=env, cwd=cwd
                ).stdout
            )
            for _ in range(runs)
        ]
        results[label] = (min(taken), statistics.median(taken))
    print(
        f"\nversion reading of one plan ({counts['parse']} versions, {counts['range']} ranges, "
        f"{counts['contains']} tests), import included:"
    )
    for label, (best, median) in results.items():
        print(f"  {label:16} best {best:6.2f} ms  median {median:6.2f} ms")


if __name__ == "__main__":
    raise SystemExit(main())
