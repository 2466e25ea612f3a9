"""The tool's own bytecode, compiled once per run, for the tests that start the tool as a process.

Where the process is the point (a signal, two runs at once, a console script, what a child
inherits) a test runs ``python -m tfgpu``, and each such start imports the tool's modules. Where
``PYTHONDONTWRITEBYTECODE`` is set (this project's test machines set it) Python never keeps what it
compiles, so every start compiled each module again from source: about 0.2 s of CPU per start, more
than some of those tests' own work. Compiled once into the package's ``__pycache__`` (which Python
reads whatever that variable says; git ignores it), every later start reads them. ``compileall``
skips a module whose bytecode is current, so after the first session this costs a look at each
file. A package that cannot be written (an installed wheel, already compiled) is left as it is.
The pytest process itself keeps its own bytecode under a prefix (tests/conftest.py): that prefix is
set aside while compiling here, since the children look beside the sources.
"""

from __future__ import annotations

import compileall
import sys
from pathlib import Path

import tfgpu

_done: list[bool] = []


def compile_once() -> None:
    """Compile the tool's modules where Python looks for their bytecode (once per test process)."""
    if not _done:
        prefix, sys.pycache_prefix = sys.pycache_prefix, None
        try:
            compileall.compile_dir(Path(tfgpu.__file__).parent, quiet=2)
        finally:
            sys.pycache_prefix = prefix
        _done.append(True)
