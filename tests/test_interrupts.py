"""Ctrl-C at several points of a create leaves no env and no staging directory.

The wheels come from a real local HTTP server (127.0.0.1) that answers slowly, so the install is
still running when SIGINT arrives; SIGINT goes to the whole process group, as a terminal's
Ctrl-C does.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytestmark = pytest.mark.slow  # a real slow server and real signals: seconds per case

WHEEL_DELAY_S = 2.0


class SlowWheels(SimpleHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        if self.path.endswith(".whl"):
            time.sleep(WHEEL_DELAY_S)
        super().do_GET()

    def log_message(self, *args):
        pass


@pytest.fixture
def slow_index(local_wheels):
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(SlowWheels, directory=str(local_wheels)))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


@pytest.mark.parametrize(
    "marker,must_interrupt",
    [
        ("Create the venv", False),
        ("Resolve the exact", True),
        ("Install TensorFlow", False),
        ("Compile bytecode", False),
        ("Set up the CUDA", False),
    ],
)
def test_sigint_leaves_nothing_half_built(tmp_path, tool_env, slow_index, marker, must_interrupt):
    prefix = tmp_path / "env"
    # The local server is also the (empty) default index, so nothing can come from PyPI.
    env = {**tool_env, "UV_DEFAULT_INDEX": slow_index + "simple/", "TFGPU_CACHE_DIR": str(tmp_path / "cold-cache")}
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tfgpu",
            "create",
            "--tf",
            "2.21",
            "--mode",
            "pip",
            "--python",
            "3.11",
            "--prefix",
            str(prefix),
            "--find-links",
            slow_index,
            "--no-verify",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    seen = []
    for line in child.stderr:
        seen.append(line)
        if line.startswith("[") and marker in line:
            os.killpg(child.pid, signal.SIGINT)
            break
    rest = child.communicate(timeout=120)[1]
    if must_interrupt or child.returncode != 0:
        assert child.returncode == 130, "".join(seen) + rest
        assert "nothing was left half-built" in rest
        assert not prefix.exists()
    else:  # SIGINT came after the last step that could be interrupted: a complete env
        assert (prefix / "tfgpu-env.json").exists()
    assert [p.name for p in tmp_path.iterdir() if "tfgpu-staging" in p.name or "tfgpu-old" in p.name] == []
