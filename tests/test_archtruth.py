"""Architecture truth: per release and compute capability (Hopper 9.0 as the control, Blackwell
10.x/12.x), whether kernels and XLA can run, from arch_support.toml; the plan stops on cannot-run
before any download, with ranked ways forward, and --allow-unsupported-gpu goes on with a warning.

Real components: the shipped tables, the real resolver and the real CLI (its ``main``, in the test's
process: tests/conftest.py's ``run_tool``). No GPU
here: the answers are what the wheels' fatbins and the cited reports say, not a run on Blackwell.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from importlib.resources import files
from pathlib import Path

import pytest
from conftest import run_tool

from tfgpu.data import load
from tfgpu.errors import ImpossibleError
from tfgpu.resolver import archtruth, tables
from tfgpu.resolver.core import resolve
from tfgpu.resolver.evaluate import evaluate
from tfgpu.resolver.request import make_request
from tfgpu.resolver.target import make_target

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(str(files("tfgpu.data")))  # the package under test: the checkout, or the installed wheel
ROWS = load("arch_support.toml")["arch"]
TARGET = ["--os", "linux", "--arch", "x86_64", "--driver", "580.65.06", "--no-detect", "--no-project"]


def tfgpu(*argv: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="200", TFGPU_ENVS_DIR="/nonexistent/tfgpu-test-envs")
    return run_tool(*argv, env=env)  # the CLI's main in this process: what it decides, not a start-up


def test_the_table_is_what_the_script_generates_now():
    sys.path.insert(0, str(ROOT / "scripts"))
    import regen_arch_support

    path = DATA / "arch_support.toml"
    expected = regen_arch_support.render(regen_arch_support.existing_fatbin(path), regen_arch_support.arch_rows())
    assert path.read_text("utf-8") == expected, "run python scripts/regen_arch_support.py"


def test_every_row_names_sources_that_exist():
    known = set(load("sources.toml")["sources"])
    for row in ROWS + load("arch_support.toml")["fatbin"]:
        assert row["source"], row
        assert set(row["source"]) <= known, (row["tensorflow"], set(row["source"]) - known)


def test_the_judged_architectures_include_blackwell_and_the_hopper_control():
    assert {"9.0", "10.0", "10.3", "12.0", "12.1"} <= {row["cc"] for row in ROWS}


def _release(version: str) -> tables.Release:
    return next(r for r in tables.releases() if str(r.version) == version)


@pytest.mark.parametrize("row", ROWS, ids=lambda row: f"{row['tensorflow']}@{row['cc']}")
def test_each_rows_answer_is_what_the_resolver_does(row):
    release = _release(row["tensorflow"])
    for allow in (False, True):
        request = make_request(
            os="linux", arch="x86_64", driver="580.65.06", gpu_cc=row["cc"], allow_unsupported_gpu=allow
        )
        ev = evaluate(release, make_target(request, None), "pip")
        blocked = ev.failure is not None and ev.failure.code == "gpu-arch-cannot-run"
        assert blocked == (row["verdict"] == archtruth.CANNOT_RUN and not allow), (row, ev.failure)
        if row["cc"] in ev.truths:
            assert ev.truths[row["cc"]].verdict == row["verdict"]


@pytest.mark.parametrize(
    ("version", "cc", "verdict"),
    [
        ("2.21.0", "9.0", "runs"),  # the control: native SASS, XLA's PTX 8.5 >= sm_90's 7.8
        ("2.13.1", "9.0", "ptx-jit"),  # compute_80 JIT on an H100
        ("2.13.1", "12.0", "ptx-jit"),  # no report either way; its Keras 2 uses XLA only when asked
        ("2.20.0", "12.0", "cannot-run"),  # the driver JIT reported to fail (tensorflow#101746, #99592)
        ("2.21.0", "12.0", "cannot-run"),  # XLA's PTX 8.5 < 8.7 and Keras 3 compiles with XLA unasked
        ("2.21.0", "10.0", "cannot-run"),
        ("2.22.0rc0", "12.0", "cannot-run"),  # tensorflow#111958
        ("2.22.0rc0", "10.0", "cannot-run"),
    ],
)
def test_the_answers_the_issue_asks_about(version, cc, verdict):
    row = next(r for r in ROWS if r["tensorflow"] == version and r["cc"] == cc)
    assert row["verdict"] == verdict, row["why"]


def test_the_fatbin_rows_carry_the_ptx_isa_read_from_the_wheels():
    fatbin = {row["tensorflow"]: row for row in load("arch_support.toml")["fatbin"]}
    assert fatbin["2.13.1"]["ptx_isa"] == "7.8" and fatbin["2.13.1"]["compute_capabilities"][-1] == "compute_80"
    assert fatbin["2.21.0"]["ptx_isa"] == "8.5" and fatbin["2.21.0"]["compute_capabilities"][-1] == "compute_90"
    why = next(r for r in ROWS if r["tensorflow"] == "2.13.1" and r["cc"] == "12.0")["why"]
    assert "compute_80, PTX ISA 7.8" in why


@pytest.mark.parametrize("cc", ["10.0", "12.0"])
@pytest.mark.parametrize("tf", ["2.21", "2.22.0rc0"])
def test_plan_stops_with_the_code_and_ranked_ways_forward(tf, cc):
    done = tfgpu("plan", "--tf", tf, "--gpu-cc", cc, *TARGET, "--json")
    assert done.returncode == 3, done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "gpu-arch-cannot-run"
    assert f"sm_{cc.replace('.', '')}" in error["message"] and "Sources:" in error["message"]
    ways = error["alternatives"]
    assert ways[0].startswith("TF 2.15.1 is the newest release the sources do not say fails")
    assert "nvcr.io/nvidia/tensorflow" in ways[1]
    assert "self-built" in ways[2]
    assert "KERAS_BACKEND=jax" in ways[3]
    assert ways[4].startswith("--allow-unsupported-gpu")


@pytest.mark.parametrize("cc", ["10.0", "12.0"])
def test_plan_for_2_13_says_what_runs_instead_of_stopping(cc):
    done = tfgpu("plan", "--tf", "2.13", "--gpu-cc", cc, *TARGET, "--json")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    codes = [w["code"] for w in plan["warnings"]]
    assert {"gpu-ptx-jit", "blackwell-ptx-jit", "blackwell-xla-ptx"} <= set(codes)
    assert any(f"Compute capability {cc}" in r and ": ptx-jit." in r for r in plan["reasons"])
    (answer,) = plan["architecture"]
    row = next(r for r in ROWS if r["tensorflow"] == "2.13.1" and r["cc"] == cc)
    assert answer == {key: row[key] for key in ("tensorflow", "cc", "kernels", "xla", "verdict", "why", "source")}
    assert set(answer["source"]) <= set(plan["sources"])


def test_allow_unsupported_gpu_proceeds_and_names_the_risk():
    done = tfgpu("plan", "--tf", "2.21", "--gpu-cc", "12.0", "--allow-unsupported-gpu", *TARGET, "--json")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["tensorflow"] == "2.21.0"
    allowed = next(w for w in plan["warnings"] if w["code"] == "gpu-arch-cannot-run-allowed")
    assert "XLA" in allowed["message"] and "verify" in allowed["fix"]


def test_the_human_error_shows_the_ways_forward():
    done = tfgpu("plan", "--tf", "2.22.0rc0", "--gpu-cc", "12.0", *TARGET)
    assert done.returncode == 3
    text = done.stdout + done.stderr
    assert "gpu-arch-cannot-run" in text and "--allow-unsupported-gpu" in text and "Traceback" not in text


def test_latest_for_blackwell_is_the_newest_release_not_said_to_fail():
    resolution = resolve(make_request(os="linux", arch="x86_64", driver="580.65.06", gpu_cc="12.0"))
    assert resolution.tensorflow == "2.15.1"
    assert any(r.tensorflow == "2.21.0" and r.code == "gpu-arch-cannot-run" for r in resolution.rejected)


def test_an_older_gpu_is_not_judged_here():
    with pytest.raises(ImpossibleError) as caught:
        resolve(make_request(tf="2.17", os="linux", arch="x86_64", gpu_cc="3.5"))
    assert caught.value.code == "gpu-too-old"
    assert archtruth.judge(_release("2.21.0"), _release("2.21.0").wheels["linux_x86_64"], "8.6") is None


def test_ptx_toml_ways_forward_cite_sources():
    known = set(load("sources.toml")["sources"])
    table = tomllib.loads((DATA / "ptx.toml").read_text("utf-8"))
    for row in table["way_forward"]:
        assert row["source"] and set(row["source"]) <= known
    assert set(table["keras_xla"]["source"]) <= known


@pytest.mark.parametrize(
    "argv",
    [
        ["create", "--dry-run", "--prefix", "{tmp}/env"],
        ["lock", "--output", "{tmp}/tf.lock", "--platform", "linux-64"],
        ["bundle", "--output", "{tmp}/bundle", "--platform", "linux-64"],
        ["script", "--format", "bash", "--os", "linux", "--arch", "x86_64"],
    ],
    ids=lambda argv: argv[0],
)
def test_every_resolving_command_stops_before_writing_or_downloading(argv, tmp_path):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    common = ["--tf", "2.21", "--gpu-cc", "12.0", "--driver", "580.65.06", "--no-detect", "--no-project", "--json"]
    done = tfgpu(*argv, *common)
    assert done.returncode == 3, done.stdout + done.stderr
    assert json.loads(done.stdout)["error"]["code"] == "gpu-arch-cannot-run"
    assert list(tmp_path.iterdir()) == []


def test_create_dry_run_goes_on_with_allow_unsupported_gpu(tmp_path):
    done = tfgpu(
        "create", "--dry-run", "--prefix", str(tmp_path / "env"), "--tf", "2.21", "--gpu-cc", "12.0",
        "--allow-unsupported-gpu", *TARGET,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "gpu-arch-cannot-run-allowed" in done.stdout + done.stderr


def test_the_fatbins_confirm_what_build_info_lists():
    """Two primary sources of the same fact: build_info.py (tensorflow.toml) and the fatbin headers."""
    fatbin = {row["tensorflow"]: row for row in load("arch_support.toml")["fatbin"]}
    assert len(fatbin) >= 10
    for version, row in fatbin.items():
        wheel = _release(version).wheels["linux_x86_64"]
        assert list(wheel.compute_capabilities) == row["compute_capabilities"], version
        assert row["ptx_isa"] == max(row["ptx_versions"], key=lambda v: tuple(map(int, v.split("."))))
