"""sonames.toml's ``[[dlopened]]`` rows mean one thing to every consumer: doctor's probe of the names
CUDA libraries dlopen (``dlopen_callers``) and the links create and repair write (``dlopen_links``)
read them through one function, which keeps one row per caller and name and refuses a table whose
rows for one caller and name disagree.

The tables are real (the shipped sonames.toml plus rows, as a ``TFGPU_DATA_DIR`` overlay); the env is
the directory layout NVIDIA's wheels leave, with real files and the real loader-facing functions.
"""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path

import pytest

from tfgpu.doctor.libraries import dlopen_callers
from tfgpu.envs import activation
from tfgpu.errors import UsageError
from tfgpu.resolver import tables

SITE = "lib/python3.11/site-packages"
LIB_DIRS = tuple(f"{SITE}/nvidia/{component}/lib" for component in ("cudnn", "cublas", "cuda_nvrtc"))
CALLER = "libtest_caller.so.9"
ROW = """
[[dlopened]]
name = "libnvrtc.so"
provides = "libnvrtc"
caller = "{caller}"
runpath = [{runpath}]
wheel = "nvidia-test-cu12==1.0"
found = "nvidia/cudnn/lib/{caller}: the string 'libnvrtc.so'"
source = ["WHL-DLOPEN"]
"""


@pytest.fixture
def overlay(tmp_path, monkeypatch):
    """Write sonames.toml (shipped + the given rows) as the TFGPU_DATA_DIR overlay; tables re-read."""

    def write(*runpaths: str) -> None:
        shipped = files("tfgpu.data").joinpath("sonames.toml").read_text(encoding="utf-8")
        rows = "".join(ROW.format(caller=CALLER, runpath=runpath) for runpath in runpaths)
        directory = tmp_path / "overlay"
        directory.mkdir(exist_ok=True)
        (directory / "sonames.toml").write_text(shipped + rows, encoding="utf-8")
        monkeypatch.setenv("TFGPU_DATA_DIR", str(directory))
        tables.clear_caches()

    monkeypatch.setenv("TFGPU_CACHE_DIR", str(tmp_path / "cache"))
    yield write
    monkeypatch.delenv("TFGPU_DATA_DIR", raising=False)
    tables.clear_caches()


@pytest.fixture
def env(tmp_path) -> Path:
    """cuDNN's directory holding the caller, cuBLAS's, and NVRTC's versioned file (what its wheel ships)."""
    root = tmp_path / "env"
    for directory in LIB_DIRS:
        (root / directory).mkdir(parents=True)
    (root / LIB_DIRS[0] / CALLER).write_bytes(b"\x7fELF caller")
    (root / LIB_DIRS[2] / "libnvrtc.so.12").write_bytes(b"\x7fELF nvrtc")
    return root


def consumers(root: Path) -> tuple[list[str], list[tuple[str, ...]]]:
    """(the links create/repair write for CALLER's name, the RUNPATH doctor's probe searches per caller entry)."""
    rows = tables.dlopened_names()
    links = [link for link, _ in activation.dlopen_links(root, LIB_DIRS, rows) if link.endswith("/libnvrtc.so")]
    probed = [entry.runpath for entry in dlopen_callers(root, root / SITE) if entry.caller.endswith(CALLER)]
    return links, probed


def test_a_duplicated_row_is_one_row_and_both_consumers_act_on_it_alike(overlay, env):
    overlay('"$ORIGIN/../../cublas/lib"', '"$ORIGIN/../../cublas/lib"')
    assert [row["caller"] for row in tables.dlopened_names()].count(CALLER) == 1
    links, probed = consumers(env)
    assert links == [f"{LIB_DIRS[1]}/libnvrtc.so"]
    # doctor probes the very directory the link is written to: the first of the caller's RUNPATH in the env
    assert probed == [(os.path.normpath(env / LIB_DIRS[1]),)]


@pytest.mark.parametrize(
    "runpaths",
    [('"$ORIGIN/../../cublas/lib"', '"$ORIGIN"'), ('"$ORIGIN"', '"$ORIGIN/../../cublas/lib"')],
    ids=["cublas-first", "origin-first"],
)
def test_rows_that_disagree_are_refused_for_both_consumers(overlay, env, runpaths):
    overlay(*runpaths)
    for consumer in (tables.dlopened_names, lambda: dlopen_callers(env, env / SITE)):
        with pytest.raises(UsageError) as refused:
            consumer()
        assert refused.value.code == "bad-data"
        message = str(refused.value)
        assert CALLER in message and "$ORIGIN/../../cublas/lib" in message and "sonames.toml" in message


def test_the_shipped_rows_are_one_per_caller_and_name():
    tables.clear_caches()
    rows = tables.dlopened_names()
    keys = [(row["caller"], row["name"]) for row in rows]
    assert len(keys) == len(set(keys)) and rows
