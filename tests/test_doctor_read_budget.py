"""Every read of a library's ELF structure is bounded by bytes, per file and per run: a crafted
library (tests/craftedelf.py: a real gcc-built library whose symbol table holds a million exported
symbols, names spread 64 KiB apart over a 1 GiB sparse string table, and 4,000 DT_NEEDED spread the
same way) costs doctor, repair --dry-run and the load hook's planning a few pages, and each says the
file was not fully read instead of taking it silently for no library.

The envs are real venvs filled by real uv from local wheels (tests/repairhelpers.py), the crafted
one built once for the module (doctor, repair --dry-run and the planning only read it); the
commands run in this process (``run_tool``: the reads are the subject, not the process) under a
guard that only catches a hang (the unbounded reader took over 30 s a read of this file).
"""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from pathlib import Path

import pytest
import repairhelpers as rh
import wheelhouse
from conftest import run_tool
from craftedelf import crafted_library
from hangguard import hang_guard
from test_two_stacks import CURAND12, CURAND13, site_of, stack_wheels

from tfgpu.doctor import elf, ownership
from tfgpu.doctor.reads import RunReads

HANG = 60
"""Seconds a command may take before it counts as hung (it takes a few on a loaded machine)."""
FRAMEWORK = ownership.FRAMEWORK_LIBRARY


def run(*argv: str, env: dict[str, str]):
    """The tool in this process, failing the test should it hang."""
    with hang_guard(" ".join(argv[:1]), HANG):
        return run_tool(*argv, env=env)


@pytest.fixture(scope="module")
def crafted_env(tmp_path_factory, repair_wheels, uv_cache) -> Path:
    """The env of ``uv pip install tensorflow nvidia-curand-cu12 nvidia-curand`` (two CUDA stacks)
    whose CUDA 13 cuRAND and TensorFlow's framework library are crafted; its wheels lie next to it
    in ``wheels``. Shared by the module's tests, which only read it."""
    if not wheelhouse.have_compiler():
        pytest.skip("gcc is needed to build the test shared libraries")
    tmp_path = tmp_path_factory.mktemp("crafted")
    wheels = tmp_path / "wheels"
    shutil.copytree(repair_wheels, wheels)
    stack_wheels(wheels)
    prefix = rh.user_venv(
        tmp_path / "env",
        wheels,
        "tensorflow==2.21.0",
        f"{CURAND12[0]}=={CURAND12[1]}",
        f"{CURAND13[0]}=={CURAND13[1]}",
        env={**os.environ, "UV_CACHE_DIR": str(uv_cache)},
    )
    site = site_of(prefix)
    crafted_library(site / CURAND13[2], "libcurand.so.10", sparse_to=1 << 30)
    crafted_library(site / FRAMEWORK, "libtensorflow_framework.so.2", needed=0, sparse_to=1 << 30)
    return prefix


def test_doctor_on_an_env_holding_crafted_libraries_finishes_and_names_them(crafted_env, tool_env):
    done = run("doctor", "--prefix", str(crafted_env), "--json", env=tool_env)
    report = json.loads(done.stdout)
    [finding] = [f for f in report["findings"] if f["id"] == "env.library-reads"]
    assert finding["status"] == "warn" and "not fully read" in finding["title"]
    [line] = finding["evidence"]  # the framework library's dynamic section is small: read whole
    assert line.startswith(str(Path(site_of(crafted_env).relative_to(crafted_env)) / CURAND13[2]) + ": not fully read")
    assert "dynamic section" in line and f"{elf.DYNAMIC_BUDGET:,} bytes" in line
    assert "readelf" in finding["fix"]
    text = run("doctor", "--prefix", str(crafted_env), env=tool_env)
    assert "env.library-reads" in text.stdout and "Traceback" not in text.stdout + text.stderr


def test_repair_dry_run_on_an_env_holding_crafted_libraries_finishes_and_says_so(crafted_env, tool_env):
    wheels = crafted_env.parent / "wheels"
    argv = (
        "repair",
        "--prefix",
        str(crafted_env),
        "--find-links",
        str(wheels),
        "--no-detect",
        "--offline",
        "--dry-run",
    )
    done = run(*argv, "--json", env=tool_env)
    assert done.returncode == 0, done.stderr
    unread = json.loads(done.stdout)["plan"]["not_fully_read"]
    site = str(Path(site_of(crafted_env).relative_to(crafted_env)))
    assert [line.split(": ")[0] for line in unread] == [f"{site}/{CURAND13[2]}", f"{site}/{FRAMEWORK}"]
    assert "symbol table" in unread[1]
    shown = run(*argv, env=tool_env)
    assert shown.returncode == 0 and "not fully read" in shown.stderr and "Traceback" not in shown.stderr


def test_the_load_hooks_planning_reads_a_crafted_framework_library_within_the_budget(crafted_env):
    """What create and repair ask of a two-stack env (ownership.other_stack_first)."""
    reads = RunReads()
    site = site_of(crafted_env)
    assert ownership.other_stack_first(site, reads) == ()  # the crafted cuRAND is no SONAME the hook can load
    assert set(reads.unfinished) == {str(site / CURAND13[2]), str(site / FRAMEWORK)}
    # The crafted framework library's symbols are read (a real one has 723,305: they may not be
    # refused for their number alone), its names stop at the file's share.
    assert reads.library_budget.spent <= elf.FILE_BUDGET + 2 * elf.DYNAMIC_BUDGET + 64 * 1024


def test_a_real_library_is_read_whole_with_its_exports(tmp_path):
    if not wheelhouse.have_compiler():
        pytest.skip("gcc is needed to build the test shared library")
    path = wheelhouse.shared_library(tmp_path / "libcudnn.so.9", "libcudnn.so.9")
    reads = RunReads()
    assert reads.dynamic(path).soname == "libcudnn.so.9"
    assert "tfgpu_test_libcudnn_so_9" in reads.exports(path)
    assert reads.unfinished == {} and 0 < reads.library_budget.spent < 64 * 1024


def test_the_run_budget_ends_reads_of_every_library_after_it(tmp_path):
    """Many libraries each within its share still stop at the run's: the later ones are named."""
    if not wheelhouse.have_compiler():
        pytest.skip("gcc is needed to build the test shared library")
    paths = [wheelhouse.shared_library(tmp_path / f"lib{i}.so.1", f"lib{i}.so.1") for i in range(3)]
    reads = RunReads(library_budget=elf.Budget(run=2 * 8192 + 100))
    answers = [reads.dynamic(path) for path in paths]
    assert [a.soname if a else None for a in answers][:1] == ["lib0.so.1"] and answers[-1] is None
    assert str(paths[-1]) in reads.unfinished and "one run reads of libraries" in reads.unfinished[str(paths[-1])]


def test_names_spread_through_a_huge_string_table_stop_at_the_files_share(tmp_path):
    """4,096 symbols whose names lie 64 KiB apart in a 1 GiB (sparse) string table: the names are
    read piece by piece, each piece counted, until the file's share is spent; never the table whole."""
    if not wheelhouse.have_compiler():
        pytest.skip("gcc is needed to build the test shared library")
    path = crafted_library(tmp_path / "libx.so.1", "libx.so.1", symbols=4096, needed=0, sparse_to=1 << 30)
    budget = elf.Budget()
    with open(path, "rb") as stream:
        image = elf.Image.of_stream(stream, path.stat().st_size, str(path), budget)
        with pytest.raises(elf.Unfinished, match=f"asks for more than the {elf.FILE_BUDGET:,}"):
            elf.parse_exports(image)
    assert budget.spent <= elf.FILE_BUDGET


@pytest.fixture(scope="module")
def many_symbols(tmp_path_factory) -> Path:
    """A framework library (50 MB) whose symbol table claims more symbols than are read; built once,
    only read by the tests that take it."""
    if not wheelhouse.have_compiler():
        pytest.skip("gcc is needed to build the test shared library")
    path = tmp_path_factory.mktemp("many-symbols") / "lib" / FRAMEWORK
    return crafted_library(path, "libtensorflow_framework.so.2", symbols=elf.SYMBOL_LIMIT + 1, needed=0)


def test_a_symbol_table_claiming_more_symbols_than_are_read_is_refused_before_it_is_read(many_symbols):
    path = many_symbols
    budget = elf.Budget()
    with open(path, "rb") as stream:
        image = elf.Image.of_stream(stream, path.stat().st_size, str(path), budget)
        with pytest.raises(elf.Unfinished, match="symbols, past the"):
            elf.parse_exports(image)
    assert budget.spent < 64 * 1024  # the headers, not the tables


def test_create_of_a_two_stack_env_whose_framework_library_is_crafted_says_it_was_not_fully_read(
    tmp_path, local_wheels, tool_env, many_symbols
):
    """The load hook's planning at create reads TensorFlow's framework library's symbol table (which
    CUDA APIs it re-exports); a crafted one (50 MB, more symbols than are read) is refused by its
    headers, the env is still built, and create's notes name the file."""
    from test_two_stacks import TARGET, tensorflow_also_requiring

    wheels = tensorflow_also_requiring(
        local_wheels, tmp_path / "wheels", "nvidia-nccl-cu12==2.32.3", "nvidia-nccl-cu13==2.32.3"
    )
    stack_wheels(wheels)
    crafted = many_symbols
    (tensorflow,) = wheels.glob("tensorflow-2.21.0-*.whl")
    with zipfile.ZipFile(tensorflow) as wheel:
        requires = [
            line.split(": ", 1)[1]
            for line in wheel.read("tensorflow-2.21.0.dist-info/METADATA").decode().splitlines()
            if line.startswith("Requires-Dist: ")
        ]
        files = {name: wheel.read(name) for name in wheel.namelist() if ".dist-info/" not in name}
    tensorflow.unlink()
    wheelhouse.wheel(wheels, "tensorflow", "2.21.0", {**files, FRAMEWORK: crafted.read_bytes()}, requires, ["and-cuda"])
    prefix = tmp_path / "env"
    argv = ("create", *TARGET, "--prefix", str(prefix), "--find-links", str(wheels), "--offline", "--no-verify")
    done = run(*argv, "--json", env=tool_env)
    assert done.returncode == 0, done.stderr
    site = site_of(prefix).relative_to(prefix)
    [note] = [n for n in json.loads(done.stdout)["notes"] if "not fully read" in n]
    assert note.startswith(f"for the load hook's order, {site}/{FRAMEWORK}: not fully read: its symbol table")
