"""Benchmark: the pip lock of TF 2.21 with a warm uv cache, against `uv pip compile --generate-hashes`
of the same requirement in the same run; and one offline bundle build.

    python scripts/bench_lock.py [--runs 7] [--tf 2.21] [--python 3.12] [--index URL] [--cache DIR]
                                 [--bundle] [--reuse DIR] [--keep DIR]

Needs PyPI (``--index URL``: another index, such as the tests' local one, which needs no network). The lock is timed as the whole command (``tfgpu-install lock --tf 2.21 --mode pip
--python 3.12 --platform linux-64 --no-detect``, the console script beside this interpreter, else
``python -m tfgpu``; a new process each run); the anchor is the uv
command the lock's requirements body comes from, run by hand: ``uv pip compile --generate-hashes``
of the requirements the lock records, for the same Python, platform and index, from the same uv
cache. The tool's modules are compiled to bytecode first, as an installed tool's are. One untimed run of each warms the cache; then they alternate (a busy minute of this shared
machine weighs on both alike), and the median and best of ``--runs`` are printed with their ratio
(target <= 1.2x). The tool's uv cache is its own under a temporary directory (``--cache DIR`` to
keep one between runs), so the user's caches are neither used nor changed.

A third command alternates with the two: the lock's floor, a Python process of the same interpreter
that does nothing but run the lock's three uv commands as the lock runs them (the index's run, and
the cache's two ``--offline`` ones beside it: see ``tfgpu.lock.resolving``). Its ratio to uv is what
this design costs before the tool does any work of its own; the lock's ratio less the floor's is
the tool's own Python: its imports and plan before uv starts, its work beside uv, its writes after.

``--bundle`` then builds the TF 2.21 linux-64 Python 3.12 bundle once, under /tmp, prints its time,
file count and size, and deletes it (``--keep DIR`` builds it in DIR and keeps it). ``--reuse DIR``
hard-links matching wheels from a local wheel directory instead of downloading them (every one is
still checked against the lock's sha256); without it the first bundle downloads about 3 GB.
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

TARGET_RATIO = 1.2


def selectors(tf: str, python: str = "3.12") -> list[str]:
    return ["--tf", tf, "--mode", "pip", "--python", python, "--platform", "linux-64", "--no-detect"]


def tool_argv() -> list[str]:
    """The installed console script beside this interpreter, as a user runs it (and as
    ``bench_plan.py`` and ``bench_doctor.py`` time it), else ``python -m tfgpu``."""
    script = Path(sys.executable).with_name("tfgpu-install")
    if script.is_file():
        return [str(script)]
    found = shutil.which("tfgpu-install")
    return [found] if found else [sys.executable, "-m", "tfgpu"]


def tool(*argv: str, env: dict) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    done = subprocess.run([*tool_argv(), *argv], capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"`tfgpu-install {' '.join(argv)}` failed ({done.returncode}):\n{done.stdout}{done.stderr[-3000:]}")
    return seconds, done


def uv_by_hand(meta: dict, requirements_in: Path, output: Path, cache: Path) -> list[str]:
    """``uv pip compile --generate-hashes`` of what the lock records, as the lock runs it for its body."""
    from tfgpu.engines.uv import find_uv

    return [
        find_uv() or sys.exit("uv is not installed beside tfgpu-install"),
        "pip",
        "compile",
        str(requirements_in),
        "--python",
        sys.executable,
        "--python-version",
        meta["python"],
        "--python-platform",
        meta["python_platform"],
        "--no-python-downloads",
        "--default-index",
        meta["index"],
        "--no-config",
        "--no-header",
        "--quiet",
        "--cache-dir",
        str(cache),
        "--generate-hashes",
        "-o",
        str(output),
    ]


FLOOR = """import subprocess
index, cached, pylock = {argvs!r}
child = subprocess.Popen(index, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
for argv in (cached, pylock):
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
raise SystemExit(child.wait())
"""
"""The floor's whole program: the lock's three uv runs in its order (``tfgpu.lock.resolving.compile_pins``),
nothing else (no ``-I``: the venv's ``site`` loads, as it does for the tool)."""


def floor_program(argv: list[str], pylock_argv: list[str], where: Path) -> list[str]:
    """``python -c FLOOR``: the index's run of ``argv``, and the cache's ``--offline`` requirements and
    pylock runs into ``where`` beside it."""
    out = argv.index("-o")
    cached = [*argv[:out], "--offline", "-o", str(where / "requirements.txt")]
    pylock_out = pylock_argv.index("-o")
    pylock = [*pylock_argv[:pylock_out], "--offline", "-o", str(where / "pylock.toml")]
    return [sys.executable, "-c", FLOOR.format(argvs=(argv, cached, pylock))]


def run_uv(argv: list[str], env: dict) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"`{' '.join(argv)}` failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return time.perf_counter() - started


def compiled(env: dict) -> None:
    """The tool as pip installs it: every module's bytecode beside it. A checkout run under
    ``PYTHONDONTWRITEBYTECODE=1`` (as CI and this machine's shells set it) has none, and each timed
    run would compile all its modules again (about 0.15 s here): the compiler timed, not the lock."""
    where = subprocess.run(
        [sys.executable, "-c", "import tfgpu, os; print(os.path.dirname(tfgpu.__file__))"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout.strip()
    subprocess.run([sys.executable, "-m", "compileall", "-q", where], capture_output=True, env=env, check=True)


def bench_lock(runs: int, tf: str, python: str, env: dict, cache: Path) -> None:
    from tfgpu.process.childenv import INDEX_VARIABLES

    compiled(env)
    with tempfile.TemporaryDirectory(prefix="bench-lock-") as tmp:
        out = Path(tmp) / "tf.txt"
        tool("lock", *selectors(tf, python), "-o", str(out), env=env)  # warms uv's cache
        record = next(line for line in out.read_text().splitlines() if line.startswith("# tfgpu-lock: "))
        meta = json.loads(record.removeprefix("# tfgpu-lock: "))
        requirements_in = Path(tmp) / "requirements.in"
        requirements_in.write_text("".join(f"{r}\n" for r in meta["resolution"]["requirements"]))
        argv = uv_by_hand(meta, requirements_in, Path(tmp) / "by-hand.txt", cache / "uv")
        # The lock also writes the PEP 751 file beside it: by hand, a second uv command after the first.
        pylock_argv = [
            *argv[: argv.index("--generate-hashes")],
            "--format",
            "pylock.toml",
            "-o",
            str(Path(tmp) / "pylock.toml"),
        ]
        uv_env = {**env, **{name: "" for name in INDEX_VARIABLES}}  # as the lock runs uv: no index but --default-index
        (Path(tmp) / "floor").mkdir()
        floor = floor_program(argv, pylock_argv, Path(tmp) / "floor")
        run_uv(argv, uv_env)
        run_uv(pylock_argv, uv_env)
        run_uv(floor, uv_env)
        locks, uvs, boths, floors = [], [], [], []
        for _ in range(runs):
            uvs.append(run_uv(argv, uv_env))
            boths.append(uvs[-1] + run_uv(pylock_argv, uv_env))
            floors.append(run_uv(floor, uv_env))
            locks.append(tool("lock", *selectors(tf, python), "-o", str(out), env=env)[0])
        pins = sum(1 for line in out.read_text().splitlines() if "==" in line and not line.startswith("#"))
        same = _pins(out.read_text()) == _pins((Path(tmp) / "by-hand.txt").read_text())
    median, best = statistics.median(locks), min(locks)
    ratio, best_ratio = median / statistics.median(uvs), best / min(uvs)
    print(
        f"pip lock of TF {meta['resolution']['tensorflow']}, linux-64, Python {meta['python']}, warm uv cache "
        f"({pins} pins; {'the same pins' if same else 'OTHER pins'} as uv by hand), {runs} runs each, alternating"
    )
    print(
        f"{'uv pip compile --generate-hashes (by hand)':44} median {statistics.median(uvs):6.2f} s   best {min(uvs):6.2f} s"
    )
    print(
        f"{'  then uv pip compile --format pylock.toml':44} median {statistics.median(boths):6.2f} s   "
        f"best {min(boths):6.2f} s   (both files by hand)"
    )
    floor_label = "the floor: only the lock's three uv runs"
    print(
        f"{floor_label:44} median {statistics.median(floors):6.2f} s   "
        f"best {min(floors):6.2f} s   (from Python; ratio to uv {statistics.median(floors) / statistics.median(uvs):.2f}x"
        f" / {min(floors) / min(uvs):.2f}x)"
    )
    print(f"{'tfgpu-install lock --mode pip':44} median {median:6.2f} s   best {best:6.2f} s")
    print(
        f"{'ratio (lock / uv)':44} median {ratio:6.2f}x   best {best_ratio:6.2f}x   "
        f"(target <= {TARGET_RATIO}x: {'met' if best_ratio <= TARGET_RATIO else 'NOT met'})"
    )
    print(
        f"{'ratio (lock / both files by hand)':44} median {median / statistics.median(boths):6.2f}x   "
        f"best {best / min(boths):6.2f}x"
    )


def _pins(text: str) -> list[str]:
    return sorted(line.split(" ")[0] for line in text.splitlines() if "==" in line and not line.startswith("#"))


def bench_bundle(env: dict, keep: str | None, reuse: str | None, tf: str) -> None:
    if reuse:
        env = {**env, "TFGPU_WHEEL_DIRS": str(Path(reuse).absolute())}
    parent = None if keep else tempfile.mkdtemp(prefix="bench-bundle-", dir="/tmp")
    out = Path(keep) if keep else Path(parent) / "bundle"
    try:
        seconds, done = tool("bundle", *selectors(tf), "-o", str(out), "--json", env=env)
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
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--tf", default="2.21", help="the TensorFlow release to lock (default 2.21)")
    parser.add_argument("--python", default="3.12", help="the Python to lock for (default 3.12)")
    parser.add_argument(
        "--index", metavar="URL", help="an index to lock against instead of PyPI (a local one: offline)"
    )
    parser.add_argument("--bundle", action="store_true", help="also build the bundle once")
    parser.add_argument("--reuse", metavar="DIR", help="local wheel directory to reuse (TFGPU_WHEEL_DIRS)")
    parser.add_argument("--keep", metavar="DIR", help="build the bundle in DIR and keep it")
    parser.add_argument(
        "--cache", metavar="DIR", help="the tool's cache directory to use and keep (default: a new one)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-lock-cache-") as scratch:
        cache = Path(args.cache).absolute() if args.cache else Path(scratch)
        env = dict(os.environ, TFGPU_CACHE_DIR=str(cache), TFGPU_UV_CACHE="own", TFGPU_LOG_DIR=str(cache / "logs"))
        env.pop("TFGPU_INDEX_URL", None)
        if args.index:
            env["TFGPU_INDEX_URL"] = args.index
        bench_lock(args.runs, args.tf, args.python, env, cache)
        if args.bundle or args.keep:
            bench_bundle(env, args.keep, args.reuse, args.tf)
    return 0


if __name__ == "__main__":
    sys.exit(main())
