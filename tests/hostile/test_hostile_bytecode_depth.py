"""Sharing an env's bytecode (``tfgpu.envs.bytecode.compile_site``, run by every pip-mode ``create``)
over a site-packages that holds a chain of thousands of nested directories, as a package may: the
``.py`` files are found without recursion (``Path.rglob`` recurses once per level and ends in
``RecursionError``, a traceback from ``create`` with the env half-built), and the one at the bottom
of the chain is compiled too. The real interpreter compiles; nothing is faked."""

from __future__ import annotations

import os
import sys

from hangguard import hang_guard

from tfgpu.doors import trees
from tfgpu.envs import bytecode
from tfgpu.process.runner import Runner

DEPTH = 1500


def test_bytecode_is_compiled_under_a_deep_chain_of_directories(tmp_path):
    site, store = tmp_path / "site", tmp_path / "store"
    (site / "pkg").mkdir(parents=True)
    (site / "pkg" / "__init__.py").write_text("VALUE = 1\n")
    fd = os.open(site / "pkg", os.O_RDONLY)
    for _ in range(DEPTH):
        os.mkdir("d", dir_fd=fd)
        below = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = below
    with os.fdopen(os.open("deep.py", os.O_CREAT | os.O_WRONLY, dir_fd=fd), "w") as handle:
        handle.write("DEEP = True\n")
    os.close(fd)
    try:
        with hang_guard("compiling a site with a deep chain"):
            compiled, reused = bytecode.compile_site(Runner(), sys.executable, site, store)
        assert (compiled, reused) == (2, 0)
    finally:
        trees.delete(site)  # pytest's own clean-up of tmp_path recurses (shutil.rmtree before 3.13)
