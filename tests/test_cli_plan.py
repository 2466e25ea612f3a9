"""The success paths of the CLI, run as a user runs them: the console module in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess

from conftest import run_tool

CONTRACT_KEYS = {
    "tensorflow",
    "python",
    "cuda",
    "cudnn",
    "min_driver",
    "mode",
    "os",
    "arch",
    "packages",
    "warnings",
    "reasons",
}
TARGET = ["--os", "linux", "--arch", "x86_64", "--no-detect"]


def tfgpu(*argv: str, envs_dir: str = "/nonexistent/tfgpu-test-envs") -> subprocess.CompletedProcess:
    # An envs dir of its own: a dry run's default --name must not meet the user's real envs.
    env = dict(os.environ, COLUMNS="200", TFGPU_ENVS_DIR=envs_dir)
    return run_tool(*argv, env=env)  # the CLI's main in this process (tests/conftest.py)


def test_plan_json_is_one_document_with_the_contract_keys():
    done = tfgpu("plan", "--tf", "2.13", "--mode", "conda", "--json", *TARGET)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert CONTRACT_KEYS <= set(plan)
    assert (plan["tensorflow"], plan["cuda"], plan["cudnn"]) == ("2.13.1", "11.8", "8.6")
    assert plan["host"] is None  # --no-detect


def test_plan_json_reports_detection_when_it_ran():
    done = tfgpu("plan", "--tf", "2.13", "--json")
    assert done.returncode == 0, done.stderr
    host = json.loads(done.stdout)["host"]
    assert {"os", "arch", "driver", "gpus", "toolkits"} <= set(host)


def test_bare_form_dry_run_prints_the_plan_and_changes_nothing(tmp_path):
    done = tfgpu("--tf", "2.13", "--mode", "conda", "--dry-run", "--prefix", str(tmp_path / "env"), *TARGET)
    assert done.returncode == 0, done.stderr
    assert "cudatoolkit 11.8.*" in done.stdout
    assert "nothing was changed" in done.stdout
    assert not (tmp_path / "env").exists()


def test_bare_form_dry_run_json():
    done = tfgpu("--tf", "2.21", "--mode", "pip", "--dry-run", "--json", *TARGET)
    document = json.loads(done.stdout)
    assert document["dry_run"] is True and document["tensorflow"] == "2.21.0"


def test_human_plan_shows_requirements_verbatim():
    """Regression: rich markup once swallowed the '[and-cuda]' of a requirement."""
    done = tfgpu("plan", "--tf", "2.21", "--mode", "pip", *TARGET)
    assert done.returncode == 0, done.stderr
    assert "tensorflow[and-cuda]==2.21.0" in done.stdout
    assert "runpath-missing-cusolver" in done.stdout


def test_rejected_releases_are_explained():
    done = tfgpu("plan", "--driver", "470.82.01", "--json", *TARGET)
    plan = json.loads(done.stdout)
    assert plan["tensorflow"] == "2.14.1"
    reasons = {r["tensorflow"]: r["code"] for r in plan["rejected"]}
    assert reasons["2.21.0"] == "driver-too-old"


def test_matrix_lists_every_series_and_every_release_with_all():
    document = json.loads(tfgpu("matrix", "--json").stdout)
    per_series = document["releases"]
    everything = json.loads(tfgpu("matrix", "--all", "--json").stdout)["releases"]
    assert len(per_series) == 23 and len(everything) > len(per_series)
    assert [r["tensorflow"] for r in per_series if r["prerelease"]] == ["2.22.0rc0"]
    assert document["data"]["shipped_generated"] and document["data"]["newest"] == "2.22.0rc0"
    row = next(r for r in per_series if r["tensorflow"] == "2.10.1")
    assert "windows_x86_64" in row["gpu_platforms"] and row["min_driver_windows"] == "452.39"
    human = tfgpu("matrix")
    assert human.returncode == 0 and "release data was generated on" in human.stderr


def test_pre_lets_latest_choose_a_pre_release_and_plan_json_says_so():
    plain = json.loads(tfgpu("plan", "--tf", "latest", "--json", *TARGET).stdout)
    pre = json.loads(tfgpu("plan", "--tf", "latest", "--pre", "--json", *TARGET).stdout)
    assert (plain["tensorflow"], plain["prerelease"]) == ("2.21.0", False)
    assert (pre["tensorflow"], pre["prerelease"], pre["python"]) == ("2.22.0rc0", True, "3.14")
    assert "prerelease" in {w["code"] for w in pre["warnings"]}
    exact = json.loads(tfgpu("plan", "--tf", "2.22.0rc0", "--json", *TARGET).stdout)
    assert exact["tensorflow"] == "2.22.0rc0"  # an exact pre-release needs no --pre
    assert "--pre" in tfgpu("plan", "--help").stdout


def test_the_extras_requirements_are_called_pins_or_ranges_as_the_wheel_gives_them():
    """2.21's and-cuda extra gives ranges (the plan warns so): the note does not call them pins;
    2.17's pins exactly."""
    ranges = tfgpu("plan", "--tf", "2.21", "--mode", "pip", *TARGET)
    assert ranges.returncode == 0, ranges.stderr
    assert "gives ranges, not pins" in ranges.stdout
    assert "packages.cuda_extra lists its 12 requirements, all version ranges)" in ranges.stdout
    assert " pins)" not in ranges.stdout
    pinned = tfgpu("plan", "--tf", "2.17", "--mode", "pip", *TARGET)
    assert "packages.cuda_extra lists its 12 requirements, all exact pins)" in pinned.stdout
    from tfgpu.resolver.packages import _counted

    assert _counted(["==12.5.82", "<10.0,>=9.10.2.21", ">=3.2.5"]) == "3 requirements: 1 exact pin, 2 version ranges"
