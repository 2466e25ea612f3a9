"""The tool's own bytecode, compiled once, for tests that start the tool as a process of its own.

Where the process is the point (a signal, two runs at once, a console script, what a child
inherits) a test runs ``python -m tfgpu``, and each such start imports the tool's modules. Where
``PYTHONDONTWRITEBYTECODE`` is set (this project's test machines set it) Python never keeps what it
compiles, so every start compiled each module again from source: about 0.2 s of CPU per start, more
than some of those tests' own work. Compiled once into the package's ``__pycache__`` (which Python
reads whatever that variable says; git ignores it), every later start reads them. ``compileall``
skips a module whose bytecode is current, so after the first session this costs a look at each
file. A package that cannot be written (an installed wheel, already compiled) is left as it is.
"""

from __future__ import annotations

import compileall
from pathlib import Path

import tfgpu

_done: list[bool] = []


def compile_once() -> None:
    """Compile the tool's modules where Python looks for their bytecode (once per test process)."""
    if not _done:
        compileall.compile_dir(Path(tfgpu.__file__).parent, quiet=2)
        _done.append(True)
