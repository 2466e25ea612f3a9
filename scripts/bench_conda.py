"""Benchmark: conda mode's solve + install of the TF 2.13 spec from a warm local channel.

    python scripts/bench_conda.py [--runs 7]

Builds the test channel of tests/condachannel.py (conda-forge's names, real packages with small
ELF libraries; conda-forge itself is not reachable from the build machine), warms rattler's
repodata and package caches with one run, then times the solve and the hard-link install into a
fresh prefix, and the whole ``tfgpu-install create --mode conda`` (solve, link, uv install of
TensorFlow's wheel, activation, move) for the same spec. Target: solve + install <= 1 s. Then
``tfgpu-install lock --mode conda`` of the same plan (target <= 1 s).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Files per package, of the order of conda-forge's (python ~4,500, cudatoolkit ~200, cudnn ~30): linking
# cost grows with the number of files, not their size (they are hard links).
PADDING = {"python": 4500, "cudatoolkit": 200, "cudnn": 30}
sys.path.insert(0, str(ROOT / "tests"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    import condachannel
    import wheelhouse

    from tfgpu.engines import rattler_engine as rattler_engine
    from tfgpu.resolver import make_request, resolve

    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        packages = condachannel.default_packages()
        for package in packages:  # file counts of the order of the real packages (approximate)
            for i in range(PADDING.get(package.name, 0)):
                package.files[f"share/{package.name}/pad/{i // 100}/f{i}.txt"] = f"{package.name} {i}\n".encode()
        channel = condachannel.build_channel(work / "channel", packages)
        wheels = work / "wheels"
        wheelhouse.wheel(wheels, "tensorflow", "2.13.1", {"tensorflow/__init__.py": b"__version__ = '2.13.1'\n"})
        resolution = resolve(
            make_request(tf="2.13", mode="conda", python=py, os="linux", arch="x86_64", driver="535.104.05"), None
        )
        specs = list(resolution.packages.conda)
        urls = rattler_engine.channel_urls((str(channel),))
        cache = work / "cache"

        def solve_and_install(prefix: Path) -> tuple[float, float]:
            start = time.perf_counter()
            records = rattler_engine.solve(
                specs,
                urls,
                platform="linux-64",
                cuda="12.2",
                this_host=False,
                repodata_cache=cache / "repodata",
                offline=False,
            )
            solved = time.perf_counter()
            rattler_engine.install(records, prefix, prefix, package_cache=cache / "pkgs", reporter=None, offline=False)
            return solved - start, time.perf_counter() - solved

        solve_and_install(work / "warm")
        timings = [solve_and_install(work / f"env{i}") for i in range(args.runs)]
        env = dict(os.environ, TFGPU_CACHE_DIR=str(cache), TFGPU_LOG_DIR=str(work / "logs"))
        whole = []
        for i in range(args.runs):
            start = time.perf_counter()
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "tfgpu",
                    "--tf",
                    "2.13",
                    "--mode",
                    "conda",
                    "--python",
                    py,
                    "--prefix",
                    str(work / f"full{i}"),
                    "--channel",
                    str(channel),
                    "--driver",
                    "535.104.05",
                    "--find-links",
                    str(wheels),
                    "--offline",
                    "--no-verify",
                ],
                env=env,
                check=True,
                capture_output=True,
            )
            whole.append(time.perf_counter() - start)
        locks = lock_timings(work, channel, wheels, env, py, args.runs)
    solve = statistics.median(t[0] for t in timings)
    install = statistics.median(t[1] for t in timings)
    print(f"spec: {' | '.join(specs)}  (packages padded to {PADDING} files)")
    print(f"solve (warm repodata):         {solve * 1000:7.1f} ms median of {args.runs}")
    print(f"install (warm package cache):  {install * 1000:7.1f} ms")
    print(
        f"solve + install:               {(solve + install) * 1000:7.1f} ms  (target <= 1000 ms: "
        f"{'met' if solve + install <= 1 else 'NOT met'})"
    )
    print(
        f"whole `create --mode conda`:   {statistics.median(whole) * 1000:7.1f} ms (incl. uv, activation, move, "
        "process start)"
    )
    print(
        f"`lock --mode conda` (rattler solve + uv lock of the PyPI part, conda-lock.yml written): "
        f"{statistics.median(locks) * 1000:.0f} ms median (target <= 1000 ms: "
        f"{'met' if statistics.median(locks) <= 1 else 'NOT met'})"
    )
    return 0


def lock_timings(work: Path, channel: Path, wheels: Path, env: dict, py: str, runs: int) -> list[float]:
    """The whole `tfgpu-install lock --mode conda` for TF 2.13, linux-64, against the local channel and a
    local PEP 503 index (tests/localindex.py) standing in for PyPI; warm caches (one run first)."""
    import localindex

    root = localindex.build_index(wheels, work / "index")
    found = []
    with localindex.Server(root) as url:
        argv = [
            sys.executable,
            "-m",
            "tfgpu",
            "lock",
            "--tf",
            "2.13",
            "--mode",
            "conda",
            "--python",
            py,
            "--no-detect",
            "--platform",
            "linux-64",
            "--channel",
            str(channel),
            # The local index is plain HTTP on loopback: the URL door reaches it only when named.
            "--insecure-host",
            "127.0.0.1",
            "-o",
            str(work / "conda-lock.yml"),
        ]
        for i in range(runs + 1):
            start = time.perf_counter()
            done = subprocess.run(argv, env=dict(env, TFGPU_INDEX_URL=url), capture_output=True, text=True)
            if done.returncode:
                raise SystemExit(f"`{' '.join(argv[2:])}` failed ({done.returncode}):\n{done.stderr}")
            if i:
                found.append(time.perf_counter() - start)
    return found


if __name__ == "__main__":
    sys.exit(main())
