"""``lock -o FILE`` writes FILE and ``pylock.<platform>.toml`` beside it; the second is a name the
user did not type, so it is replaced only when it is this lock's own (or that of a lock no longer
there): a pylock file of the user's, or the pylock of another lock in the same directory, is kept
and the run refused (``output-not-ours``) before anything is written. The index is a real local
one (tests/localindex.py); uv resolves for real."""

from __future__ import annotations

import json

from conftest import run_tool

LOCK = ("--tf", "2.21", "--mode", "pip", "--python", "3.11", "--no-detect", "--platform", "linux-64")


def _lock(out, env):
    return run_tool("lock", *LOCK, "-o", str(out), "--json", env=env)


def test_a_users_pylock_beside_the_lock_is_kept(tmp_path, lock_env):
    pylock = tmp_path / "pylock.linux-64.toml"
    pylock.write_text('lock-version = "1.0"\n# mine\n')
    done = _lock(tmp_path / "team.txt", lock_env)
    assert done.returncode == 3 and json.loads(done.stdout)["error"]["code"] == "output-not-ours", done.stdout
    assert pylock.read_text() == 'lock-version = "1.0"\n# mine\n'
    assert not (tmp_path / "team.txt").exists()


def test_a_second_lock_never_takes_the_first_locks_pylock(tmp_path, lock_env):
    """Another lock's pylock is replaced only when it holds the very same resolution; the stand-in
    index has one TensorFlow, so a's pylock is given another resolution's body by hand."""
    assert _lock(tmp_path / "a.txt", lock_env).returncode == 0
    pylock = tmp_path / "pylock.linux-64.toml"
    assert _lock(tmp_path / "same.txt", lock_env).returncode == 0  # the same resolution: shared
    assert _lock(tmp_path / "a.txt", lock_env).returncode == 0
    pylock.write_text(pylock.read_text().replace("2.21.0", "2.20.0"))
    before = pylock.read_bytes()
    done = _lock(tmp_path / "b.txt", lock_env)
    assert done.returncode == 3 and json.loads(done.stdout)["error"]["code"] == "output-not-ours", done.stdout
    assert "a.txt" in json.loads(done.stdout)["error"]["message"]
    assert pylock.read_bytes() == before and not (tmp_path / "b.txt").exists()
    assert _lock(tmp_path / "a.txt", lock_env).returncode == 0  # its own: replaced as before
    pylock.write_text(pylock.read_text().replace("2.21.0", "2.20.0"))
    (tmp_path / "a.txt").unlink()
    assert _lock(tmp_path / "b.txt", lock_env).returncode == 0  # a lock no longer there owns nothing
    assert b"beside b.txt" in pylock.read_bytes()
