"""Where TensorFlow comes from in conda mode is the resolver's decision (``tfgpu.resolver.tfsource``):
PyPI unless the user asks for conda-forge's CUDA build, refused with ``no-conda-forge-build`` where
conda-forge has none, and the same answer for plan, lock, script and create.

Expected versions are read from tfgpu/data (conda_forge.toml), not typed by hand, so a newer
feedstock row moves the tests with it.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from conftest import run_tool

from tfgpu.errors import ImpossibleError, UsageError
from tfgpu.resolver import make_request, resolve, tables
from tfgpu.resolver.tfsource import conda_forge_cuda, newest_conda_forge

LINUX = {"os": "linux", "arch": "x86_64", "driver": "535.104.05"}
NEWEST = newest_conda_forge()
"""The newest TensorFlow conda-forge has a CUDA build of, as conda_forge.toml says."""


def conda(**given):
    return resolve(make_request(mode="conda", **{**LINUX, **given}))


def test_conda_mode_takes_tensorflow_from_pypi_by_default_and_says_why():
    resolution = conda(tf="2.13")
    assert resolution.tensorflow_source == "pypi"
    assert resolution.to_dict()["tensorflow_source"] == "pypi"
    assert any(r.startswith("TensorFlow from PyPI into the conda env (the default)") for r in resolution.reasons)
    assert [str(p) for p in resolution.packages.pip] == ["tensorflow==2.13.1"]


def test_other_modes_say_pypi_and_give_no_conda_source_reason():
    resolution = resolve(make_request(tf="2.13", mode="pip", **LINUX))
    assert resolution.tensorflow_source == "pypi"
    assert not any("--tf-source" in r for r in resolution.reasons)


def test_asking_for_conda_forge_puts_its_cuda_build_in_the_packages():
    resolution = conda(tf="2.13", tf_source="conda-forge")
    assert resolution.tensorflow_source == "conda-forge"
    assert [str(s) for s in resolution.packages.conda] == [f"python {resolution.python}.*", "tensorflow ==2.13.1 cuda*"]
    assert resolution.packages.pip == ()
    assert resolution.modes["conda"].packages == resolution.packages  # plan's per-mode view agrees
    assert any("TensorFlow from conda-forge (as asked" in r for r in resolution.reasons)
    assert any(", ".join(conda_forge_cuda("2.13.1")) in r for r in resolution.reasons)


def test_asking_for_pypi_is_said_as_asked():
    resolution = conda(tf="2.13", tf_source="pypi")
    assert resolution.tensorflow_source == "pypi"
    assert any("into the conda env (--tf-source pypi)" in r for r in resolution.reasons)


def test_latest_from_conda_forge_is_its_newest_and_the_newer_releases_are_rejected_with_the_reason():
    resolution = conda(tf_source="conda-forge")
    assert resolution.tensorflow.startswith(NEWEST)
    newer = [r for r in resolution.rejected if r.code == "no-conda-forge-build"]
    assert newer and all(NEWEST in r.message for r in newer)
    assert all(conda_forge_cuda(r.tensorflow) is None for r in newer)


def test_a_release_conda_forge_lacks_is_refused_naming_its_newest():
    lacking = next(
        str(r.version)
        for r in tables.releases()
        if not r.version.is_prerelease and conda_forge_cuda(str(r.version)) is None and r.version.release[:2] >= (2, 20)
    )
    with pytest.raises(ImpossibleError) as caught:
        conda(tf=lacking, tf_source="conda-forge")
    assert caught.value.code == "no-conda-forge-build"
    assert NEWEST in str(caught.value) and f"--tf {NEWEST} --tf-source conda-forge" in caught.value.alternatives


def test_conda_forge_has_no_cuda_build_for_native_windows():
    with pytest.raises(ImpossibleError) as caught:
        resolve(make_request(tf="2.10", mode="conda", os="windows", arch="x86_64", tf_source="conda-forge"))
    assert caught.value.code == "no-conda-forge-build" and "windows_x86_64" in str(caught.value)


def test_tf_source_outside_conda_mode_and_an_unknown_source_are_usage_errors():
    with pytest.raises(UsageError) as caught:
        make_request(tf="2.13", mode="pip", tf_source="conda-forge")
    assert caught.value.code == "conflicting-options"
    with pytest.raises(UsageError) as caught:
        make_request(tf="2.13", mode="conda", tf_source="anaconda")
    assert caught.value.code == "bad-option-value"


def test_the_engine_only_translates_the_decision():
    from tfgpu.engines.rattler_engine import conda_specs

    for source in ("pypi", "conda-forge"):
        resolution = conda(tf="2.13", tf_source=source)
        assert conda_specs(resolution) == (list(resolution.packages.conda), list(resolution.packages.pip))


def tool(*argv: str) -> subprocess.CompletedProcess:
    """The command line in this process (``run_tool``): the decision is the subject, not a process."""
    env = dict(os.environ, COLUMNS="200", TFGPU_ENVS_DIR="/nonexistent/tfgpu-test-envs")
    return run_tool(*argv, "--no-detect", "--os", "linux", "--arch", "x86_64", env=env)


def test_plan_shows_the_source_in_text_and_json():
    done = tool("plan", "--tf", "2.16", "--mode", "conda", "--tf-source", "conda-forge", "--json")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["tensorflow_source"] == "conda-forge" and plan["packages"]["pip"] == []
    text = tool("plan", "--tf", "2.16", "--mode", "conda").stdout
    assert "conda (TensorFlow from PyPI)" in text and "TensorFlow from PyPI into the conda env" in text


def test_script_follows_the_same_decision():
    done = tool("script", "--format", "bash", "--tf", "2.16", "--mode", "conda", "--tf-source", "conda-forge")
    assert done.returncode == 0, done.stderr
    assert "CONDA_SPECS=('python 3.12.*' 'tensorflow ==2.16.2 cuda*')" in done.stdout
    assert "PIP_REQUIREMENTS=()" in done.stdout
    refused = tool("script", "--format", "bash", "--tf", "2.16", "--tf-source", "conda-forge", "--json")
    assert refused.returncode == 2 and json.loads(refused.stdout)["error"]["code"] == "conflicting-options"
