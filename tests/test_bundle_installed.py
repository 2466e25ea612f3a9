"""``bundle`` from any install of the tool: ``pip install <checkout>`` (not editable) into a fresh
venv, then that venv's ``tfgpu-install bundle``, then the bundle's ``install.sh`` (whose tool env is
byte-compiled), then ``bundle`` again from that tool env — the bundle's own install.

Marked ``network`` (pip fetches the build backend and the tool's dependencies from PyPI; the
dependency wheels are kept under TFGPU_TEST_CACHE) and ``slow`` (about a minute warm).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import localindex
import pytest
from conftest import suite_cache

pytestmark = [pytest.mark.network, pytest.mark.slow]
CHECKOUT = Path(__file__).resolve().parents[1]
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
TARGET = ("--tf", "2.21", "--mode", "pip", "--python", PYTHON, "--no-detect", "--platform", "linux-64")


def run(argv, env=None, timeout=900) -> subprocess.CompletedProcess:
    """Run outside the checkout (a Python started in it would import the source tree)."""
    done = subprocess.run([str(a) for a in argv], capture_output=True, text=True, env=env, timeout=timeout, cwd="/")
    assert done.returncode == 0, (argv, done.stdout[-3000:], done.stderr[-3000:])
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv with ``pip install <checkout>``: site-packages, no link back to the source tree."""
    venv = tmp_path_factory.mktemp("installed") / "venv"
    run([sys.executable, "-m", "venv", venv])
    run([venv / "bin" / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check", CHECKOUT])
    where = run([venv / "bin" / "python", "-c", "import tfgpu; print(tfgpu.__file__)"]).stdout.strip()
    assert "/site-packages/tfgpu/" in where and str(CHECKOUT) not in where
    return venv


@pytest.fixture(scope="module")
def index(installed, local_wheels, tmp_path_factory):
    """A local index: the stand-in TensorFlow wheels and wheels of the tool's own dependencies (from
    PyPI for the bundle's platform and Python, cached)."""
    deps = suite_cache("bundle-tool-deps", f"py{PYTHON}")
    requires = run(
        [
            installed / "bin" / "python",
            "-c",
            "from importlib.metadata import requires; "
            "print('\\n'.join(r for r in requires('tfgpu-install') if 'extra ==' not in r))",
        ]
    ).stdout.split("\n")
    run(
        [
            installed / "bin" / "python",
            "-m",
            "pip",
            "download",
            "--quiet",
            "--disable-pip-version-check",
            "--only-binary=:all:",
            "--python-version",
            PYTHON,
            "--implementation",
            "cp",
            "--platform",
            "manylinux_2_28_x86_64",
            "--platform",
            "manylinux_2_17_x86_64",
            "--platform",
            "manylinux2014_x86_64",
            "--platform",
            "linux_x86_64",
            "--platform",
            "any",
            "-d",
            deps,
            *[r for r in requires if r.strip()],
        ]
    )
    wheels = tmp_path_factory.mktemp("bundle-index-wheels")
    for source in (*local_wheels.glob("*.whl"), *deps.glob("*.whl")):
        (wheels / source.name).write_bytes(source.read_bytes())
    root = localindex.build_index(wheels, tmp_path_factory.mktemp("bundle-index"))
    with localindex.Server(root) as url:
        yield url


def test_a_pip_installed_tool_bundles_itself_and_its_bundle_installs(installed, index, tmp_path):
    env = dict(
        os.environ,
        TFGPU_INDEX_URL=index,
        TFGPU_CACHE_DIR=str(tmp_path / "cache"),
        TFGPU_LOG_DIR=str(tmp_path / "logs"),
        TFGPU_BUNDLE_TOOL="1",
    )
    out = tmp_path / "bundle"
    done = run([installed / "bin" / "tfgpu-install", "bundle", *TARGET, "-o", out, "--json"], env=env)
    summary = json.loads(done.stdout)
    assert summary["tool_wheels"] > 10
    [own] = list((out / "tool").glob("tfgpu_install-*.whl"))
    manifest = json.loads((out / "bundle.json").read_text())
    assert f"tool/{own.name}" in manifest["files"]

    # The bundle installs offline: its own uv makes the tool env (byte-compiled) from tool/ alone.
    tool_env = tmp_path / "tool-env"
    offline = env | {
        "TFGPU_PYTHON": sys.executable,
        "TFGPU_TOOL_ENV": str(tool_env),
        "UV_OFFLINE": "1",
        "TFGPU_INDEX_URL": "http://127.0.0.1:9/simple",
        "UV_INDEX_URL": "http://127.0.0.1:9/simple",
    }
    run([out / "install.sh", tmp_path / "env", "--no-verify"], env=offline)
    assert (tmp_path / "env" / "tfgpu-env.json").is_file()
    site = next(tool_env.glob("lib/python3*/site-packages"))
    sources = list((site / "tfgpu").rglob("*.py"))
    compiled = {p.name.split(".")[0] for p in (site / "tfgpu").rglob("__pycache__/*.pyc")}
    assert sources and {p.stem for p in sources} <= compiled, "the tool env is not byte-compiled"

    # The bundle's own install of the tool can bundle again (its wheel rebuilt from its files).
    again = tmp_path / "again"
    run([tool_env / "bin" / "tfgpu-install", "bundle", *TARGET, "-o", again, "--json"], env=env)
    [rebuilt] = list((again / "tool").glob("tfgpu_install-*.whl"))
    assert rebuilt.name == own.name
