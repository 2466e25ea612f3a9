"""The conda engine's process (``tfgpu.engines.rattler_child``) is started for every solve, query
and install: it loads rattler and what it shares with the tool (``tfgpu.engines.rattler_wire``),
never the face that starts it (``tfgpu.engines.rattler_engine``) with its channel checks, HTTP transport,
resolver and process machinery, which cost each start a tenth of a second of CPU for nothing.
A fresh interpreter, as the engine's process is."""

from __future__ import annotations

import json
import subprocess
import sys

MACHINERY = (
    "tfgpu.engines.rattler_engine",
    "tfgpu.engines.channels",
    "tfgpu.datasource",
    "tfgpu.resolver",
    "tfgpu.process",
)


def test_the_engine_process_loads_none_of_the_tools_machinery():
    code = "import json, sys, tfgpu.engines.rattler_child; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout)
    assert "rattler" in loaded and "tfgpu.engines.rattler_wire" in loaded
    assert [name for name in loaded if name == MACHINERY[0] or name.startswith(MACHINERY[1:])] == []
