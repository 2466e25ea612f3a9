"""What a wheel installed from the index and again from a ``--find-links`` directory costs in uv's
cache, before and after the tool keeps one copy (``tfgpu.cache.dedupe.one_copy``, the step a pip
build from ``--find-links`` runs on the tool's own uv cache).

    python scripts/measure_twice.py [--package numpy==2.2.6] [--index https://pypi.org/simple]

Everything is made under a fresh temporary directory (a uv cache, the wheel directory, two venvs)
and removed at the end; the wheel is downloaded once from the index (by uv, into the cache) and
once more into the directory (``uv pip download`` does not exist: ``pip download``). Sizes are disk
usage (allocated blocks, as ``du``), each inode counted once (``scripts/measure_disk.py``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))


def main() -> int:
    from measure_disk import inodes

    from tfgpu.cache.dedupe import one_copy
    from tfgpu.cache.survey import unpacked_twice
    from tfgpu.engines.uv import find_uv

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--package", default="numpy==2.2.6")
    parser.add_argument("--index", default="https://pypi.org/simple")
    args = parser.parse_args()
    uv = find_uv()

    def disk(*roots: Path) -> int:
        found: dict = {}
        for root in roots:
            found.update(inodes(root))
        return sum(found.values())

    with tempfile.TemporaryDirectory(prefix="tfgpu-twice-") as folder:
        tmp = Path(folder)
        cache, wheels = tmp / "uv", tmp / "wheels"

        def install(env: str, *source: str) -> None:
            subprocess.run([uv, "venv", str(tmp / env), "--python", sys.executable, "--no-config", "-q"], check=True)
            python = str(tmp / env / "bin" / "python")
            subprocess.run(
                [
                    uv,
                    "pip",
                    "install",
                    "-q",
                    "--no-config",
                    "--python",
                    python,
                    "--cache-dir",
                    str(cache),
                    *source,
                    args.package,
                ],
                check=True,
            )

        install("from-index", "--default-index", args.index)
        index_only = disk(cache)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--isolated",
                "--disable-pip-version-check",
                "--no-deps",
                "--only-binary",
                ":all:",
                "--index-url",
                args.index,
                "-d",
                str(wheels),
                args.package,
            ],
            check=True,
        )
        install("from-find-links", "--find-links", str(wheels), "--no-index")
        both = disk(cache)
        envs = (cache, tmp / "from-index", tmp / "from-find-links")
        total_before = disk(*envs)
        twice = sum(unpacked_twice(cache).values())
        done = one_copy(cache, tmp / "from-find-links")
        after = disk(cache)
        total_after = disk(*envs)
        mb = 1e6
        print(f"package: {args.package} (wheel {sum(p.stat().st_size for p in wheels.glob('*.whl')) / mb:.1f} MB)")
        print(f"uv cache after the index install:            {index_only / mb:8.1f} MB")
        print(
            f"uv cache after the --find-links install:     {both / mb:8.1f} MB  (unpacked twice: {twice / mb:.1f} MB)"
        )
        print(f"uv cache after one_copy:                     {after / mb:8.1f} MB  ({done.files} files relinked)")
        print(f"cache and both envs, before -> after:        {total_before / mb:8.1f} -> {total_after / mb:.1f} MB")
        print(f"unpacked twice after one_copy:               {sum(unpacked_twice(cache).values()) / mb:8.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
