"""``cache clean`` and ``cache prune`` never delete a file of a place the user keeps that is reached
inside the cache under another name.

A bind mount makes the home directory, the working directory or the data overlay a directory of
the cache at a path no comparison of paths (``realpath`` included) relates to the real one; the
files there hold no env mark. The guard knows each place by its directory's identity (device,
inode) as well as by its path. The mounts are real (``mount --bind``), so these cases run only
where the test may mount (root in a container that allows it), and are skipped elsewhere.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tfgpu.doors.paths import tag_cache


def _bind(source: Path, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(["mount", "--bind", str(source), str(target)], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        pytest.skip("mount is not available here")
    if done.returncode != 0:
        pytest.skip("this test may not bind-mount here")


@pytest.fixture
def bind(request):
    """``bind(source, target)``: a bind mount undone when the test ends."""
    made: list[Path] = []

    def make(source: Path, target: Path) -> None:
        _bind(source, target)
        made.append(target)

    yield make
    for target in reversed(made):
        subprocess.run(["umount", str(target)], capture_output=True, timeout=30)


@pytest.mark.parametrize("verb", ["clean", "prune"])
@pytest.mark.parametrize("place", ["home", "cwd", "overlay"])
def test_a_place_bind_mounted_inside_a_kind_is_refused_and_keeps_its_files(cli, sandbox, bind, verb, place):
    cache = sandbox / "cache"
    tag_cache(cache)
    stale = cache / "pyc" / "stale.pyc"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"x" * 100)
    kept = sandbox / place
    kept.mkdir()
    (kept / "notes.txt").write_text("mine\n")
    env = {"TFGPU_UV_CACHE": "own", "HOME": str(sandbox / "home")}
    (sandbox / "home").mkdir(exist_ok=True)
    if place == "overlay":
        env["TFGPU_DATA_DIR"] = str(kept)
    elif place == "cwd":
        import os

        os.chdir(kept)
    bind(kept, cache / "pyc" / "alias")
    done = cli("cache", verb, "--json", env=env)
    assert done.code == 3 and done.error == "cache-overlap", done.out
    message = json.loads(done.out)["error"]["message"]
    assert "nothing was removed" in message and "alias" in message
    assert (kept / "notes.txt").read_text() == "mine\n"
    assert stale.exists()  # refused before any kind was touched


@pytest.mark.parametrize("verb", ["clean", "prune"])
def test_a_log_directory_inside_a_kind_is_refused_and_keeps_the_logs(cli, sandbox, verb):
    """TFGPU_LOG_DIR under a kind: each operation's log (a failed create's whole output) stays."""
    cache = sandbox / "cache"
    tag_cache(cache)
    logs = cache / "pyc" / "logs"
    logs.mkdir(parents=True)
    (logs / "create-20261201-120000-1.log").write_text("the whole output of a failed create\n")
    done = cli("cache", verb, "--json", env={"TFGPU_UV_CACHE": "own", "TFGPU_LOG_DIR": str(logs)})
    assert done.code == 3 and done.error == "cache-overlap", done.out
    assert "the log directory" in json.loads(done.out)["error"]["message"]
    assert (logs / "create-20261201-120000-1.log").read_text() == "the whole output of a failed create\n"
