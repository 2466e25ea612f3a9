"""uv's downloads have a floor on progress: against an index that trickles one byte every quarter of
a second (which never trips uv's own timeout for a silent connection), a create ends with a clear
``download-failed`` instead of running for ever, and leaves nothing behind.

Real uv, a real loopback index (tests/localindex.py) that trickles every page and file."""

from __future__ import annotations

import localindex
import pytest
from conftest import run_process

pytestmark = pytest.mark.slow  # waits out a (shortened) stall window


@pytest.fixture
def trickling_index(local_wheels, tmp_path):
    root = localindex.build_index(local_wheels, tmp_path / "index")
    with localindex.Server(root, drip=0.25, piece=1) as url:
        yield url


def test_a_create_against_a_trickling_index_stops_with_a_clear_error(tmp_path, tool_env, trickling_index):
    env = {**tool_env, "UV_DEFAULT_INDEX": trickling_index, "TFGPU_STALL_SECONDS": "8"}
    env["TFGPU_CACHE_DIR"] = str(tmp_path / "cold-cache")  # nothing cached: every page comes trickling
    prefix = tmp_path / "env"
    argv = ["create", "--tf", "2.21", "--mode", "pip", "--python", "3.11", "--prefix", str(prefix), "--no-verify"]
    done = run_process(*argv, env=env, timeout=180)  # the hang guard: uv alone would still be waiting
    assert done.returncode == 1, done.stderr
    assert "download-failed" in done.stderr, done.stderr
    assert "stalled" in done.stderr and "less than 32 KiB/s" in done.stderr
    assert "Traceback" not in done.stderr
    assert not prefix.exists()
    assert [p.name for p in tmp_path.iterdir() if "tfgpu-staging" in p.name] == []
