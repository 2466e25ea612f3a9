"""`tfgpu-install update-data`: new release rows from PyPI into the user's overlay, and what plan,
matrix and the unknown-version error make of them.

The "shipped" data here is tfgpu's own tensorflow.toml without its 2.22.0rc0 row (through the
TFGPU_DATA_DIR overlay), so 2.22.0rc0 is the release published since; the index is the recorded
one of tests/pypifixture.py, or, in the `network` test, the real PyPI.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tomllib
from importlib.resources import files
from pathlib import Path

import pytest
import recordedpypi
from conftest import run_tool

SHIPPED = files("tfgpu.data").joinpath("tensorflow.toml").read_text("utf-8")
TARGET = ["--os", "linux", "--arch", "x86_64", "--no-detect"]


def without(text: str, version: str) -> str:
    """tensorflow.toml text without one [[release]] block."""
    blocks = re.split(r"(?m)^(?=\[\[release\]\]$)", text)
    return "".join(b for b in blocks if f'version = "{version}"\n' not in b)


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    """A tool environment whose shipped data lacks 2.22.0rc0, with its own data and cache dirs."""
    old = tmp_path / "shipped"
    old.mkdir()
    (old / "tensorflow.toml").write_text(without(SHIPPED, "2.22.0rc0"), "utf-8")
    return dict(
        os.environ,
        TFGPU_DATA_DIR=str(old),
        TFGPU_USER_DATA_DIR=str(tmp_path / "data"),
        TFGPU_CACHE_DIR=str(tmp_path / "cache"),
        COLUMNS="200",
    )


def tfgpu(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess:
    """The tool in this process (``run_tool``): these tests are about what it plans and writes."""
    return run_tool(*argv, env=env)


@pytest.fixture(scope="module")
def index_url():
    with recordedpypi.serve() as url:
        yield url


def test_a_release_the_data_lacks_says_how_old_the_data_is_and_how_to_update(env):
    done = tfgpu(env, "plan", "--tf", "2.22.0rc0", "--json", *TARGET)
    error = json.loads(done.stdout)["error"]
    assert done.returncode == 3 and error["code"] == "unknown-tf-version"
    assert any("release data was generated on" in a and "tfgpu-install update-data" in a for a in error["alternatives"])


def test_update_data_fetches_the_new_release_and_plan_then_resolves_it(env, index_url):
    done = tfgpu(env, "update-data", "--index", index_url, "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["new_releases"] == ["2.22.0rc0"] and report["skipped"] == []
    overlay = Path(report["overlay"])
    assert overlay.parent == Path(env["TFGPU_USER_DATA_DIR"]) and overlay.is_file()
    rows = tomllib.loads(overlay.read_text("utf-8"))
    assert rows["index"] == index_url and [r["version"] for r in rows["release"]] == ["2.22.0rc0"]
    linux = rows["release"][0]["wheels"]["linux_x86_64"]
    assert (linux["cuda"], linux["cudnn_compiled"]) == ("12.5.1", "9.10.0")
    # no fatbin streaming here: the SASS/PTX kinds are those of a release with the same targets, and say so
    assert linux["compute_capabilities"] == ["sm_60", "sm_70", "sm_80", "sm_89", "compute_90"]
    assert linux["unverified"] == ["compute_capabilities"]

    plan = json.loads(tfgpu(env, "plan", "--tf", "2.22.0rc0", "--json", *TARGET).stdout)
    assert (plan["tensorflow"], plan["prerelease"], plan["python"], plan["cuda"], plan["cudnn"]) == (
        "2.22.0rc0",
        True,
        "3.14",
        "12.5",
        "9.10",
    )
    assert "nvidia-nvshmem-cu12>=3.2.5" in plan["packages"]["cuda_extra"]
    assert {"prerelease", "unverified-data"} <= {w["code"] for w in plan["warnings"]}
    assert any("update-data" in r for r in plan["reasons"])
    assert json.loads(tfgpu(env, "plan", "--json", *TARGET).stdout)["tensorflow"] == "2.21.0"  # no --pre

    matrix = json.loads(tfgpu(env, "matrix", "--json").stdout)
    assert matrix["data"]["updated"] == report["fetched"] and matrix["data"]["update_releases"] == ["2.22.0rc0"]
    assert next(r for r in matrix["releases"] if r["tensorflow"] == "2.22.0rc0")["data"] == "update"

    again = tfgpu(env, "update-data", "--offline", "--json")  # the same answer from the cache, no network
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["new_releases"] == ["2.22.0rc0"] and json.loads(again.stdout)["requests"] == 0


def test_offline_without_a_cache_never_fetches_and_says_so(env):
    done = tfgpu(env, "update-data", "--offline", "--json")
    error = json.loads(done.stdout)["error"]
    assert done.returncode == 1 and error["code"] == "offline-no-cache"
    assert not Path(env["TFGPU_USER_DATA_DIR"], "tensorflow-updates.toml").exists()


def test_an_index_that_is_neither_https_nor_loopback_is_refused(env):
    done = tfgpu(env, "update-data", "--index", "http://pypi.example.org/pypi", "--json")
    assert done.returncode == 2 and json.loads(done.stdout)["error"]["code"] == "insecure-url"


@pytest.mark.slow
def test_an_unreachable_index_is_a_clear_error(env):
    done = tfgpu(env, "update-data", "--index", "http://127.0.0.1:9/pypi", "--json")
    error = json.loads(done.stdout)["error"]
    assert done.returncode == 1 and error["code"] == "update-failed" and error["alternatives"]


def test_newer_shipped_data_supersedes_the_overlay(tmp_path):
    """An overlay row for a version the shipped data lists is ignored: the shipped row wins."""
    data = tmp_path / "data"
    data.mkdir()
    fake = SHIPPED.split("[[release]]", 2)[1].replace('cudnn_compiled = "9.10.0"', 'cudnn_compiled = "9.99.0"')
    (data / "tensorflow-updates.toml").write_text('fetched = "2026-12-31"\n\n[[release]]' + fake, "utf-8")
    env = dict(os.environ, TFGPU_USER_DATA_DIR=str(data), TFGPU_CACHE_DIR=str(tmp_path / "cache"))
    plan = json.loads(tfgpu(env, "plan", "--tf", "2.22.0rc0", "--json", *TARGET).stdout)
    assert plan["cudnn"] == "9.10"
    assert not any("update-data" in r for r in plan["reasons"])


def test_a_corrupt_overlay_is_a_clear_error(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "tensorflow-updates.toml").write_text("[[release]\nversion = ", "utf-8")
    env = dict(os.environ, TFGPU_USER_DATA_DIR=str(data), TFGPU_CACHE_DIR=str(tmp_path / "cache"))
    done = tfgpu(env, "plan", "--tf", "2.21", "--json", *TARGET)
    assert done.returncode == 1 and json.loads(done.stdout)["error"]["code"] == "data-overlay-corrupt"


def test_validate_refuses_rows_the_resolver_could_not_use():
    from tfgpu.datasource.releases import PlatformRecord, ReleaseRecord
    from tfgpu.datasource.update import validate

    def record(**wheel) -> ReleaseRecord:
        linux = PlatformRecord(**{"python": ["3.14"], "platform_tag": "manylinux_2_27_x86_64", **wheel})
        return ReleaseRecord("2.23.0", "2027-01-01", ">=3.10", "tensorflow", "", {}, [], {}, {"linux_x86_64": linux})

    assert validate(record(cuda_build=True, cuda="12.8.1", cudnn="9")) == ""
    assert "unrecorded" in validate(record(cuda_build=True, cuda="", cudnn=""))
    assert "no CPython wheels" in validate(record(python=[]))


@pytest.mark.network
def test_update_data_picks_up_2_22_0rc0_from_pypi(env):
    done = tfgpu(env, "update-data", "--json")
    assert done.returncode == 0, done.stderr + done.stdout
    report = json.loads(done.stdout)
    if "2.22.0" in report["new_releases"]:
        pytest.skip("2.22.0 is out: its release candidate is superseded and no longer a row")
    assert "2.22.0rc0" in report["new_releases"] and report["requests"] > 0
    assert report["bytes"] < 40_000_000  # metadata, headers and central directories: never a wheel
    plan = json.loads(tfgpu(env, "plan", "--tf", "2.22.0rc0", "--json", *TARGET).stdout)
    assert (plan["tensorflow"], plan["cuda_build"], plan["cudnn"]) == ("2.22.0rc0", "12.5.1", "9.10")
    assert "3.14" in json.loads(tfgpu(env, "matrix", "--all", "--json").stdout)["releases"][0]["python"]
