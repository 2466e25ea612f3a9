"""An env's ``tfgpu-env.json`` whose text fields are far longer than the tool writes them (a
hand-edited or damaged marker: a 60,000-character ``tensorflow``, ``python`` or ``mode``). Each
read as it stood: ``list`` printed a table 240 KB wide (the field in its column and again in the
health column), ``list --json`` 60 KB per field. Such a field reads as missing, as a field of the
wrong type does, so every command's answer stays its usual size; the env is still listed and
``remove`` still removes only it.

A real env built by the real command line from the local wheel directory (tests/builtenvs.py),
its marker edited; the real command line in this process."""

from __future__ import annotations

import json

import builtenvs
import pytest
from conftest import run_tool, tool_environ


@pytest.fixture(scope="module")
def built(local_wheels, uv_cache, tmp_path_factory):
    envs = tmp_path_factory.mktemp("envs")
    prefix = builtenvs.create_named("long", local_wheels, uv_cache, envs, tmp_path_factory.mktemp("logs"))
    return prefix, tool_environ(tmp_path_factory.mktemp("base"), uv_cache, TFGPU_ENVS_DIR=str(envs))


@pytest.mark.parametrize("field", ["tensorflow", "python", "mode", "cuda", "name", "created"])
def test_a_marker_text_field_far_longer_than_the_tool_writes_reads_as_missing(built, field):
    prefix, env = built
    marker = prefix / "tfgpu-env.json"
    kept = marker.read_text()
    try:
        marker.write_text(json.dumps(json.loads(kept) | {field: "A" * 60_000}))
        shown = run_tool("list", env=env)
        assert shown.returncode == 0, shown.stderr
        assert "long" in shown.stdout and len(shown.stdout + shown.stderr) < 2_000
        document = run_tool("list", "--json", env=env)
        assert document.returncode == 0, document.stderr
        [entry] = json.loads(document.stdout)["envs"]
        assert entry["prefix"] == str(prefix) and len(document.stdout) < 4_000
        doctor = run_tool("doctor", "--name", "long", "--json", env=env)
        assert "A" * 200 not in doctor.stdout + doctor.stderr
        json.loads(doctor.stdout)
    finally:
        marker.write_text(kept)


@pytest.mark.parametrize("prefix", [["/elsewhere"], 5, None, {"path": "/elsewhere"}], ids=repr)
def test_a_marker_whose_prefix_is_not_a_path_is_said_to_record_none(built, prefix):
    """``--force`` and ``remove`` said the env "was made for None" when the marker's prefix was a
    list, a number or null: it records no path, and says so; the env is left alone."""
    path, env = built
    marker = path / "tfgpu-env.json"
    kept = marker.read_text()
    try:
        marker.write_text(json.dumps(json.loads(kept) | {"prefix": prefix}))
        done = run_tool("remove", "--name", "long", env=env)
        assert done.returncode == 3, done.stderr
        assert "records no path it was made for" in done.stderr and "None" not in done.stderr
        assert marker.exists()
    finally:
        marker.write_text(kept)
