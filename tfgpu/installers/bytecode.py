"""Compile an env's bytecode so identical files can be shared between envs.

uv hard-links every installed file from its cache, so a second env of the same packages costs
almost nothing, except the ``.pyc`` files that compiling writes into each env (~95 MB for TF
2.21). A ``.pyc`` embeds its source's absolute path, so two envs' copies differ by that path
alone. Compiling with a fixed ``-d`` prefix makes them byte-identical (the import system puts
the real path back when it loads them: ``importlib`` fixes ``co_filename``, so tracebacks show
the real file), and identical files are then hard-linked to one copy in the cache.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

FIXED_ROOT = "/tfgpu-env"
"""The path compiled into every ``co_filename`` (replaced by the real one on import)."""


def compile_argv(python: str, site: Path, site_relative: str) -> tuple[str, ...]:
    """``compileall`` of site-packages, in parallel, with the fixed prefix."""
    return (python, "-m", "compileall", "-q", "-j", "0", "-d", f"{FIXED_ROOT}/{site_relative}", str(site))


def share_identical(site: Path, store: Path) -> tuple[int, int]:
    """Hard-link each ``.pyc`` under ``site`` to one content-addressed copy in ``store``.

    Returns (files now shared, bytes saved). Any file that cannot be linked (another
    filesystem, permissions) just stays a copy of its own.
    """
    shared = saved = 0
    for pyc in site.rglob("*.pyc"):
        try:
            data = pyc.read_bytes()
            digest = hashlib.sha256(data).hexdigest()
            kept = store / digest[:2] / digest
            if kept.exists():
                if os.path.samefile(kept, pyc):
                    continue
                temporary = pyc.with_name(pyc.name + ".tfgpu-link")
                os.link(kept, temporary)
                os.replace(temporary, pyc)
                shared += 1
                saved += len(data)
            else:
                kept.parent.mkdir(parents=True, exist_ok=True)
                os.link(pyc, kept)
        except OSError:
            continue
    return shared, saved
