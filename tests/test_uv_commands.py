"""uv is never left to choose an interpreter: a new uv downloads the newest CPython by default,
for which TensorFlow has no wheels. Every uv command the tool runs names one (``--python`` with a
path, or the plan's exact X.Y for a venv uv provides), and every uv command is built in
``tfgpu/engines/uv.py``."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import packagesource
import pytest
from conftest import run_tool

from tfgpu.engines import uv as engine

CACHE = Path("/cache")


def named_interpreter(argv) -> str:
    argv = list(argv)
    assert "--python" in argv, argv
    value = argv[argv.index("--python") + 1]
    assert value and not value.startswith("-") and (value.startswith("/") or re.fullmatch(r"3\.\d+", value)), argv
    return value


def test_every_command_the_engine_builds_names_its_interpreter(tmp_path):
    for argv in (
        engine.venv("uv", tmp_path, "3.12", "env", offline=True, cache=CACHE),
        engine.compile_hashed("uv", tmp_path / "in", tmp_path / "out", "/env/bin/python", cache=CACHE),
        engine.install("uv", "/env/bin/python", tmp_path / "r.txt", cache=CACHE),
        engine.inventory("uv", "/env/bin/python", cache=CACHE),
        engine.compile_for_target(
            "uv",
            tmp_path / "in",
            tmp_path / "out",
            python_version="3.12",
            python_platform="x86_64-manylinux_2_28",
            index="https://x/simple",
            cache=CACHE,
        ),
        engine.build_wheel("uv", tmp_path, tmp_path, index="https://x/simple", cache=CACHE),
    ):
        named_interpreter(argv)
    lock = engine.compile_for_target(
        "uv",
        tmp_path / "in",
        tmp_path / "out",
        python_version="3.12",
        python_platform="x86_64-manylinux_2_28",
        index="https://x/simple",
        cache=CACHE,
    )
    assert "--no-python-downloads" in lock and lock[lock.index("--python-version") + 1] == "3.12"


def test_no_uv_command_is_put_together_anywhere_else():
    root = packagesource.PACKAGE
    offenders = []
    for path in packagesource.modules():
        if path.name == "uv.py" and path.parent.name == "engines":
            continue
        for node in packagesource.walked(path):
            if isinstance(node, (ast.List, ast.Tuple)) and len(node.elts) >= 2:
                first, second = node.elts[0], node.elts[1]
                named_uv = (isinstance(first, ast.Name) and first.id == "uv") or (
                    isinstance(first, ast.Attribute) and first.attr == "uv"
                )
                if named_uv and isinstance(second, ast.Constant) and second.value in ("pip", "venv", "build"):
                    offenders.append(f"{path.relative_to(root)}:{node.lineno}")
    assert offenders == []


@pytest.mark.parametrize("mode", ["pip", "conda", "system"])
def test_every_uv_step_of_every_mode_names_its_interpreter(tmp_path, mode):
    extra = ("--driver", "580.65.06") if mode == "system" else ()
    done = run_tool(
        "--tf",
        "2.21" if mode != "conda" else "2.16",
        "--mode",
        mode,
        "--prefix",
        str(tmp_path / "env"),
        "--dry-run",
        "--json",
        "--no-detect",
        "--os",
        "linux",
        "--arch",
        "x86_64",
        *extra,
    )
    assert done.returncode == 0, done.stderr
    uv_steps = [
        step["argv"] for step in json.loads(done.stdout)["steps"] if step["argv"] and Path(step["argv"][0]).name == "uv"
    ]
    assert uv_steps
    for argv in uv_steps:
        named_interpreter(argv)


def test_the_bundle_installer_names_its_interpreter():
    from tfgpu.lock.bundle.files import install_script

    text = install_script("3.12", "1.0", "2.21.0", "linux-64")
    calls = [line for line in text.splitlines() if re.search(r'"\$uv_dir/uv" (venv|pip)', line)]
    assert len(calls) == 2 and all("--python" in line for line in calls)
    assert "--no-python-downloads" in calls[0]


def test_offline_a_wheel_directory_is_asked_alone_first_and_only_then_with_uvs_cache():
    """Only offline with a directory is there a second way to try: online the index answers, with
    --offline alone the cache is the only source, and a bundle's directory is already alone."""
    assert engine.directory_alone(engine.sources("/w", True)) == ("--find-links", "/w", "--offline", "--no-index")
    assert engine.directory_alone(engine.sources("/w", False)) is None
    assert engine.directory_alone(engine.sources(None, True)) is None
    assert engine.directory_alone(engine.sources("/w", True, only_find_links=True)) is None


def test_what_the_directory_lacks_is_read_from_uvs_words():
    """uv's offline failures as it words them (uv 0.13): missing from the directory, from the cache,
    a version the index lists but offline cannot fetch, a version nowhere."""
    output = (
        "error: No solution found when resolving dependencies\n"
        "  cause: Because nvidia-cusolver-cu12 was not found in the provided package locations and all versions "
        "of tensorflow[and-cuda] depend on nvidia-cusolver-cu12>=11.7.5.82, we can conclude that ...\n"
        "  cause: Because cryptography>=45.0.1 needs to be downloaded from a registry and google-auth==2.40.3 "
        "depends on cryptography>=45.0.1, we can conclude that google-auth==2.40.3 cannot be used.\n"
        "  cause: Because third was not found in the cache and app depends on third, ...\n"
        "  cause: Because there is no version of tensorflow==2.99 and you require tensorflow==2.99, ...\n"
        "  cause: Because third was not found in the cache and ...\n"
    )
    assert engine.lacking(output) == ["nvidia-cusolver-cu12", "cryptography>=45.0.1", "third", "tensorflow==2.99"]
    assert engine.lacking("error: Failed to fetch: `https://pypi.org/simple/x/`\n  cause: dns error") == []


@pytest.mark.parametrize("mode", ["pip", "conda", "system"])
def test_offline_every_uv_step_that_chooses_files_reads_the_wheel_directory_alone_first(tmp_path, mode):
    """Every mode's resolve and install, offline with a wheel directory: ``--no-index`` first, and the
    same command with uv's cache as the fallback (tfgpu.installers.base.directory_first)."""
    extra = ("--driver", "580.65.06") if mode == "system" else ()
    done = run_tool(
        *("--tf", "2.21" if mode != "conda" else "2.16", "--mode", mode, "--prefix", str(tmp_path / "env")),
        *("--find-links", str(tmp_path), "--offline", "--dry-run", "--json", "--no-detect", "--os", "linux"),
        *extra,
    )
    assert done.returncode == 0, done.stderr
    choosing = [
        step
        for step in json.loads(done.stdout)["steps"]
        if step["argv"][1:3] in (["pip", "compile"], ["pip", "install"]) and Path(step["argv"][0]).name == "uv"
    ]
    assert [step["argv"][2] for step in choosing] == ["compile", "install"]
    for step in choosing:
        assert step["argv"] == [*step["fallback"], "--no-index"], step
