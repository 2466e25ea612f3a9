"""``bundle -o DIR`` never replaces a file of the user's: a directory that is not empty is written
into only when it is a bundle (an earlier run's, whole or in progress), and a file of the user's
that happens to be named ``bundle.json`` does not make it one. The index is a real local one
(tests/localindex.py) serving the stand-in wheelhouse; uv resolves the lock for real."""

from __future__ import annotations

import json

from conftest import run_tool

LOCK = ("--tf", "2.21", "--mode", "pip", "--python", "3.11", "--no-detect", "--platform", "linux-64")


def test_a_directory_holding_a_users_bundle_json_is_not_taken_for_a_bundle(tmp_path, lock_env):
    out = tmp_path / "project"
    out.mkdir()
    mine = {"README.md": "# my project\n", "install.sh": "echo my own installer\n", "bundle.json": '{"name": "web"}\n'}
    for name, text in mine.items():
        (out / name).write_text(text)
    done = run_tool("bundle", *LOCK, "-o", str(out), "--json", env=lock_env)
    assert done.returncode == 3, done.stdout
    assert json.loads(done.stdout)["error"]["code"] == "target-not-empty"
    assert {path.name: path.read_text() for path in out.iterdir() if not path.name.startswith(".")} == mine


def test_an_earlier_bundle_is_still_written_over(tmp_path, lock_env):
    out = tmp_path / "bundle"
    assert run_tool("bundle", *LOCK, "-o", str(out), "--json", env=lock_env).returncode == 0
    again = run_tool("bundle", *LOCK, "-o", str(out), "--json", env=lock_env)
    assert again.returncode == 0, again.stdout
    assert (out / "bundle.json").is_file()
