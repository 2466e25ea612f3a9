"""Shared fixtures: an isolated tool environment and a local wheelhouse."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import wheelhouse


@pytest.fixture(scope="session")
def local_wheels(tmp_path_factory) -> Path:
    """A find-links directory standing in for PyPI (see tests/wheelhouse.py)."""
    if not wheelhouse.have_compiler():
        pytest.skip("gcc is needed to build the test shared libraries")
    return wheelhouse.tensorflow_wheelhouse(tmp_path_factory.mktemp("wheels"))


@pytest.fixture(scope="session")
def uv_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("uv-cache")


@pytest.fixture
def tool_env(tmp_path, uv_cache) -> dict[str, str]:
    """Environment for running tfgpu-install: its own cache, logs, envs dir and Jupyter dir."""
    env = dict(os.environ)
    env.update(TFGPU_CACHE_DIR=str(uv_cache), TFGPU_LOG_DIR=str(tmp_path / "logs"),
               TFGPU_ENVS_DIR=str(tmp_path / "envs"), JUPYTER_DATA_DIR=str(tmp_path / "jupyter"),
               COLUMNS="160")
    return env


@pytest.fixture(scope="session")
def index_url(local_wheels, tmp_path_factory):
    """A real PEP 503 index on 127.0.0.1 serving the local wheelhouse (tests/localindex.py)."""
    import localindex

    root = localindex.build_index(local_wheels, tmp_path_factory.mktemp("index"))
    with localindex.Server(root) as url:
        yield url


@pytest.fixture
def lock_env(tool_env, index_url) -> dict[str, str]:
    """tool_env resolving locks against the local index, bundles without the tool's own wheels."""
    return {**tool_env, "TFGPU_INDEX_URL": index_url, "TFGPU_BUNDLE_TOOL": "0"}


def run_tool(*argv: str, env: dict[str, str] | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tfgpu", *argv], capture_output=True, text=True,
                          env=env, timeout=timeout)


def shells() -> list[str]:
    return [shell for shell in ("bash", "zsh", "fish") if shutil.which(shell)]
