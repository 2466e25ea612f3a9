"""Versions with more digits than Python converts to an int (``packaging`` raises a plain
ValueError for them): a clear error with the input's own code, never a traceback.
"""

from __future__ import annotations

from importlib.resources import files

import pytest

HUGE = "1" * 5000


@pytest.mark.parametrize("tf", [f"2.{HUGE}", HUGE, f">=2.{HUGE}"], ids=["release", "major", "range"])
def test_a_tf_version_with_thousands_of_digits_is_bad_tf_spec(cli, sandbox, tf):
    done = cli("plan", "--tf", tf, "--no-detect", "--json")
    assert (done.code, done.error) == (2, "bad-tf-spec"), done.out


def test_a_project_files_tf_with_thousands_of_digits_is_bad_project_file(cli, sandbox):
    (sandbox / "tfgpu.toml").write_text(f'tf = "2.{HUGE}"\n')
    done = cli("plan", "--no-detect", "--json", env={"TFGPU_PROJECT_FILE": ""})
    assert (done.code, done.error) == (2, "bad-project-file"), done.out


def test_an_overlay_version_with_thousands_of_digits_is_bad_data(cli, sandbox):
    overlay = sandbox.parent / "overlay"
    overlay.mkdir()
    text = files("tfgpu.data").joinpath("tensorflow.toml").read_text("utf-8")
    (overlay / "tensorflow.toml").write_text(text.replace('version = "2.15.0"', f'version = "2.15.{HUGE}"', 1))
    done = cli("plan", "--tf", "2.15", "--no-detect", "--json", env={"TFGPU_DATA_DIR": str(overlay)})
    assert (done.code, done.error) == (2, "bad-data") and "tensorflow.toml" in done.out, done.out
