"""What each torch/JAX build runs on: the CUDA it was built with, the driver that needs and the GPU
code it carries (companions.toml, read from the wheels by scripts/regen_companion_data.py), and
what ``plan --with`` makes of them on a target's driver and GPU.

The properties are generated from every row of the shipped table, as the suite does for the
TensorFlow rows; the four cases are those a user reported, each pinned first to the facts it rests on.
"""

from __future__ import annotations

import json
import os
import struct
import tomllib
from importlib.resources import files

import pytest
from conftest import run_tool

from tfgpu.datasource import build_facts
from tfgpu.errors import ImpossibleError
from tfgpu.resolver import companion_fit, make_request, resolve
from tfgpu.resolver.companions import rows
from tfgpu.resolver.drivers import driver_key, driver_need
from tfgpu.versions import parse

COMPANIONS = tomllib.loads(files("tfgpu.data").joinpath("companions.toml").read_text("utf-8"))
SOURCES = tomllib.loads(files("tfgpu.data").joinpath("sources.toml").read_text("utf-8"))["sources"]
ROWS = rows()
LINUX = ("--no-detect", "--os", "linux", "--arch", "x86_64")


def row(framework: str, version: str, extra: str = ""):
    return next(r for r in ROWS if (r.framework, r.version, r.extra) == (framework, version, extra))


def below(driver: str) -> str:
    """A driver one step older than ``driver``."""
    major, *rest = driver.split(".")
    return f"{int(major) - 1}.{'.'.join(rest) or '0'}"


def sm_ccs(r) -> list[str]:
    """The compute capabilities the row's cubins name (``sm_86`` -> ``8.6``)."""
    return [f"{int(a[3:]) // 10}.{int(a[3:]) % 10}" for a in r.gpu_archs if a.startswith("sm_")]


@pytest.mark.parametrize("r", ROWS, ids=[f"{r.framework}{r.extra}-{r.version}" for r in ROWS])
def test_every_row_records_its_cuda_build_and_the_driver_cuda_toml_gives_it(r):
    assert r.cuda and r.stack == f"cu{r.cuda.split('.')[0]}"
    need = driver_need(r.cuda, "linux")
    assert r.driver == need.minimum
    # every fact carries its sources: the wheel reads, and the CUDA table's own for the driver
    assert {"PYPI-JSON", "WHL-META", "WHL-BUILD" if r.framework == "torch" else "WHL-FATBIN"} <= set(r.sources)
    assert set(need.source) <= set(r.sources) and set(r.sources) <= set(SOURCES)


@pytest.mark.parametrize("r", ROWS, ids=[f"{r.framework}{r.extra}-{r.version}" for r in ROWS])
def test_a_driver_below_a_rows_floor_refuses_it_and_the_floor_itself_does_not(r):
    assert companion_fit.why_not(r, r.driver, ()) == []
    why = companion_fit.why_not(r, below(r.driver), ())
    assert len(why) == 1 and f">= {r.driver}" in why[0] and f"CUDA {r.cuda}" in why[0]


@pytest.mark.parametrize("r", ROWS, ids=[f"{r.framework}{r.extra}-{r.version}" for r in ROWS])
def test_each_gpu_a_row_carries_code_for_runs_it_and_an_older_one_does_not(r):
    if r.framework == "jax":  # the plugin's fatbins: JAX's rows always state them
        assert r.gpu_archs and r.archs_from.endswith(".so")
    if not r.gpu_archs and not r.gpu_range:  # torch before 2.8 states no list outside libtorch_cuda.so
        assert r.framework == "torch" and companion_fit.unchecked(r, ("8.0",)) == ["8.0"]
        return
    ccs = sm_ccs(r) or list(r.gpu_range)
    for cc in ccs:
        assert companion_fit.why_not(r, None, (cc,)) == [], cc
    lowest = min(ccs, key=lambda c: tuple(map(int, c.split("."))))
    major, minor = map(int, lowest.split("."))
    older = f"{major - 1}.0" if minor == 0 else f"{major}.{minor - 1}"
    if major > 1:
        why = companion_fit.why_not(r, None, (older,))
        assert len(why) == 1 and f"none runs on {older}" in why[0] and r.archs_from in why[0]


def test_bare_with_considers_only_releases_the_target_runs_and_says_why_not_the_newer():
    torch = [r for r in ROWS if r.framework == "torch"]
    for r in [r for r in torch if r.gpu_archs or r.gpu_range][:6]:
        cc = (sm_ccs(r) or list(r.gpu_range))[0]
        resolution = resolve(
            make_request(tf="2.20", companions=("torch",), os="linux", arch="x86_64", driver=r.driver, gpu_cc=cc)
        )
        chosen = row("torch", resolution.coplan.companions[0].version)
        assert not companion_fit.why_not(chosen, r.driver, (cc,))
        # of the newer releases than the newest that runs (none of which runs here), the newest are named
        runs = next(n for n in torch if not companion_fit.why_not(n, r.driver, (cc,)))
        assert parse(chosen.version) <= parse(runs.version)
        for skipped in [n for n in torch if parse(n.version) > parse(runs.version)][:3]:
            assert any(f"Not {skipped.label}: " in reason for reason in resolution.coplan.reasons)


def test_min_driver_is_the_highest_any_stack_needs():
    torch = row("torch", "2.15.0")
    resolution = resolve(make_request(tf="2.21", companions=("torch==2.15.0",), os="linux", arch="x86_64"))
    tf_alone = resolve(make_request(tf="2.21", os="linux", arch="x86_64"))
    assert driver_key(torch.driver) > driver_key(tf_alone.min_driver)
    assert resolution.min_driver == torch.driver
    assert any(f"min_driver {torch.driver}" in reason for reason in resolution.reasons)
    assert set(torch.sources) <= set(resolution.sources)


def plan_json(*argv: str) -> tuple[int, dict]:
    env = {**os.environ, "COLUMNS": "200", "TFGPU_PROJECT_FILE": "none"}
    done = run_tool("plan", *argv, "--json", *LINUX, env=env)  # the CLI's main in this process
    return done.returncode, json.loads(done.stdout)


def test_torch_2_15_on_a_575_driver_is_refused_naming_the_r580_floor_and_a_torch_that_runs():
    torch = row("torch", "2.15.0")
    assert (torch.cuda, torch.driver) == ("13.2", driver_need("13.2", "linux").minimum)
    assert torch.driver.startswith("580.")
    code, out = plan_json("--tf", "2.21", "--with", "torch==2.15.0", "--driver", "575.57.08")
    assert code == 3 and out["error"]["code"] == "companion-cannot-run"
    assert f">= {torch.driver}" in out["error"]["message"] and "575.57.08" in out["error"]["message"]
    ways = out["error"]["alternatives"]
    assert any("the newest torch that runs on this target" in w for w in ways)
    assert any("Upgrade the NVIDIA driver" in w and "R580" in w for w in ways)


def test_bare_torch_on_pascal_passes_over_the_builds_without_pascal_code():
    assert not companion_fit.why_not(row("torch", "2.10.0"), None, ("7.0",))
    assert companion_fit.why_not(row("torch", "2.10.0"), None, ("6.1",))  # 7.0 to 12.0: no Pascal
    code, out = plan_json("--tf", "2.20", "--with", "torch", "--gpu-cc", "6.1")
    assert code == 0
    chosen = out["coplan"]["companions"][0]
    assert not companion_fit.why_not(row("torch", chosen["version"]), None, ("6.1",))
    assert any(r.startswith("Not torch 2.10.0") or "other newer torch" in r for r in out["coplan"]["reasons"])
    assert any(r.startswith("Not torch 2.15.0") and "none runs on 6.1" in r for r in out["coplan"]["reasons"])
    # a build whose wheel states no list is not passed as checked
    if not chosen["gpu_archs"]:
        assert "companion-gpu-unchecked" in {w["code"] for w in out["warnings"]}


def test_torch_2_15_on_a_v100_is_refused_its_builds_start_at_7_5():
    torch = row("torch", "2.15.0")
    assert torch.gpu_archs[0] == "sm_75" and "PYTORCH_RELEASES_CODE_CC" in torch.archs_from
    code, out = plan_json("--tf", "2.21", "--with", "torch==2.15.0", "--gpu-cc", "7.0")
    assert code == 3 and out["error"]["code"] == "companion-cannot-run"
    assert "none runs on 7.0" in out["error"]["message"]


def test_jax_cuda13_on_pascal_is_refused_and_jax_cuda12_named_instead():
    plugin = row("jax", "0.12.0.1", "cuda13")
    assert "sm_60" not in plugin.gpu_archs and "sm_61" not in plugin.gpu_archs
    assert "sm_60" in row("jax", "0.12.0.1", "cuda12").gpu_archs
    code, out = plan_json("--tf", "2.21", "--with", "jax[cuda13]", "--gpu-cc", "6.1")
    assert code == 3 and out["error"]["code"] == "companion-cannot-run"
    assert "none runs on 6.1" in out["error"]["message"]
    assert any("jax[cuda12]" in w for w in out["error"]["alternatives"])
    # without the extra, JAX's CUDA 12 plugin is taken on that GPU
    resolution = resolve(make_request(tf="2.21", companions=("jax",), os="linux", arch="x86_64", gpu_cc="6.1"))
    assert resolution.coplan.companions[0].extra == "cuda12"


def test_a_version_that_cannot_run_is_refused_in_process_with_its_code():
    with pytest.raises(ImpossibleError) as caught:
        resolve(make_request(tf="2.21", companions=("torch==2.15.0",), os="linux", arch="x86_64", gpu_cc="6.1"))
    assert caught.value.code == "companion-cannot-run"


# --- reading the facts from the wheels' members (tfgpu.datasource.build_facts) ---


def test_torch_build_facts_are_read_as_literals_never_run():
    init = (
        "import os\nos.system('touch PWNED')\n"
        'PYTORCH_RELEASES_CODE_CC: dict = {"13.2": {"x86_64": {75, 120}, "aarch64": {80}}}\n'
        "def f():\n    CUDA_ARCHES_SUPPORTED = {'12.8': {'min': 70, 'max': 120}}\n"
    )
    assert build_facts.torch_cuda("cuda: Optional[str] = '13.2'\n") == "13.2"
    assert build_facts.torch_cuda("cuda = None\n") == ""
    assert build_facts.torch_archs(init, "13.2") == (["sm_75", "sm_120"], [], "PYTORCH_RELEASES_CODE_CC")
    assert build_facts.torch_archs(init, "12.8") == ([], ["7.0", "12.0"], "CUDA_ARCHES_SUPPORTED")
    assert build_facts.torch_archs(init, "12.6") == ([], [], "")
    assert build_facts.torch_archs('PYTORCH_RELEASES_CODE_CC = {"13.0": {75, 110}}', "13.0")[0] == ["sm_75", "sm_110"]
    for hostile in ["def (:", "PYTORCH_RELEASES_CODE_CC = __import__('os')", "(" * 200_000, "x = 1\0"]:
        assert build_facts.torch_archs(hostile, "13.2") == ([], [], "")


def fatbin(*entries: tuple[int, int]) -> bytes:
    body = b""
    for kind, sm in entries:
        payload = b"\0" * 16
        # kind, version, header size, payload size, then (at 16) two fields, (at 28) the SM
        header = struct.pack("<HHIQIII", kind, 1, 64, len(payload), 0, len(payload), 0)
        header += struct.pack("<I", sm) + b"\0" * (64 - 32)
        body += header + payload
    return b"junk" + struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body + b"tail"


def test_fatbin_entries_give_cubin_and_ptx_targets_and_broken_ones_end_the_scan():
    assert build_facts.fatbin_archs(fatbin((2, 75), (2, 120), (1, 120))) == ["sm_75", "compute_120", "sm_120"]
    assert build_facts.fatbin_archs(b"") == [] and build_facts.fatbin_archs(b"\x50\xed\x55\xba") == []
    cut = fatbin((2, 75), (2, 80))[:-60]  # into the second entry's header
    assert build_facts.fatbin_archs(cut) == ["sm_75"]
    looping = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, 1 << 40) + struct.pack("<HHIQ", 2, 1, 0, 0) + b"\0" * 24
    assert build_facts.fatbin_archs(looping) == []


def test_inside_wsl2_a_companion_needs_the_windows_driver_cuda_toml_gives_its_cuda():
    torch = row("torch", "2.15.0")
    need = driver_need(torch.cuda, "wsl2")
    assert companion_fit.for_os(torch, "linux") == torch
    assert companion_fit.for_os(torch, "wsl2").driver == (need.minimum if need else "")


def test_no_data_source_runs_what_it_reads():
    """Wheel members that are Python (torch's version.py, cuda/__init__.py, TF's build_info.py) are
    parsed with ast and only their literals read: nothing under tfgpu/datasource executes code."""
    import ast
    from pathlib import Path

    import tfgpu.datasource

    for path in Path(tfgpu.datasource.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in {"exec", "eval", "compile", "__import__"}, (path.name, node.lineno)
