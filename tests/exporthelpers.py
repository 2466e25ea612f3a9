"""Shared helpers for the tests of ``tfgpu.export`` (tests/test_export_*.py)."""

from __future__ import annotations

import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest

from tfgpu import export
from tfgpu.resolver import make_request, resolve, tables

# CUDA 11 (2.13: explicit cu11 pins) and CUDA 12 releases (2.16.1: the RUNPATH quirk; 2.21: newest).
VERSIONS = ("2.13", "2.16.1", "2.21")
MODES = ("pip", "conda", "system")


def resolution(tf: str, mode: str, python: str | None = None):
    """A Linux x86_64 plan with no host detection (what `script --no-detect --os linux` uses)."""
    return resolve(make_request(tf=tf, mode=mode, python=python, os="linux", arch="x86_64"), None)


def render(tf: str, mode: str, fmt: str, python: str | None = None) -> export.Export:
    return export.render(resolution(tf, mode, python), fmt)


def need(binary: str) -> str:
    path = shutil.which(binary)
    if path is None:
        pytest.skip(f"{binary} is not installed")
    return path


def shellcheck(script: str, tmp_path: Path, name: str = "script.sh") -> subprocess.CompletedProcess:
    """shellcheck at its default severity (style included): the tests expect no output at all."""
    path = tmp_path / name
    path.write_text(script)
    return subprocess.run([need("shellcheck"), "--shell=bash", str(path)], capture_output=True, text=True)


def clear_tables() -> None:
    """The tables are cached per process; tests that point TFGPU_DATA_DIR at the fake server clear them."""
    tables.clear_caches()


@contextmanager
def fake_nvidia(tmp_path: Path, monkeypatch, faults=None):
    """The fake NVIDIA server of tests/fakenvidia.py (CUDA 11.8.0, cuDNN 8.6.0.163), with the data
    tables pointed at it (``TFGPU_DATA_DIR``) for the body; everything undone afterwards."""
    from fakenvidia import serve_fake_nvidia

    fake = serve_fake_nvidia(tmp_path, cuda="11.8.0", cudnn="8.6.0.163", **({"faults": faults} if faults else {}))
    monkeypatch.setenv("TFGPU_DATA_DIR", str(fake.overlay_dir))
    monkeypatch.setenv("TFGPU_CACHE_DIR", str(tmp_path / "cache"))
    clear_tables()
    try:
        yield fake
    finally:
        monkeypatch.delenv("TFGPU_DATA_DIR", raising=False)
        clear_tables()
        fake.close()


def tensorflow_wheel_dir(tmp_path: Path, version: str = "2.13.1") -> Path:
    """A find-links directory with a stand-in ``tensorflow`` wheel of ``version``."""
    import wheelhouse

    return wheelhouse.wheel(
        tmp_path / "wheels", "tensorflow", version, {"tensorflow/__init__.py": f"__version__ = {version!r}\n".encode()}
    ).parent
