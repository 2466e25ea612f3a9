"""Envs a user arrives with, made the way users make them (plain ``uv venv`` + ``uv pip install``,
rattler for a conda prefix), from real local wheels and a real local conda channel.

The TensorFlow wheels here are stand-ins at the package-index boundary: real wheels holding a
``build_info.py`` as TensorFlow's do (a CUDA build or a CPU-only one), and for every CUDA wheel the
resolution names a real wheel, with real gcc-built libraries where tests/wheelhouse.py has them.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import wheelhouse
from packaging.requirements import Requirement

BUILD_INFO = (
    "build_info = {{'is_cuda_build': {cuda}, 'cuda_version': '12.5.1', 'cudnn_version': '9', "
    "'cuda_compute_capabilities': ['sm_60', 'sm_70', 'sm_80', 'sm_89', 'compute_90']}}\n"
)
OLD_CUDNN = "9.1.0.70"
"""A cuDNN older than TensorFlow 2.21's floor (its extra asks >=9.3.0.75)."""


def tensorflow_wheel(directory: Path, version: str, cuda: bool) -> Path:
    files = {
        "tensorflow/__init__.py": f"__version__ = {version!r}\n".encode(),
        "tensorflow/python/platform/build_info.py": BUILD_INFO.format(cuda=cuda).encode(),
    }
    return wheelhouse.wheel(directory, "tensorflow", version, files)


def cuda_wheelhouse(directory: Path, resolution) -> Path:
    """Every CUDA wheel ``resolution`` asks for, at a version its range accepts, plus an old cuDNN."""
    from tfgpu.repair.plan import cuda_requirements
    from tfgpu.repair.survey import canonical

    known = {dist: (version, members) for dist, version, members in [*wheelhouse.CUDA_WHEELS]}
    libs = directory / ".libs"
    made = set()
    for text in cuda_requirements(resolution):
        requirement = Requirement(text)
        name = canonical(requirement.name)
        if name in made:
            continue
        made.add(name)
        if name == wheelhouse.NVCC[0]:
            ptxas = "nvidia/cuda_nvcc/bin/ptxas"
            wheelhouse.wheel(
                directory,
                *wheelhouse.NVCC,
                {
                    ptxas: b"#!/bin/sh\necho 'ptxas: NVIDIA (R) Ptx optimizing assembler (tfgpu test stand-in)'\n",
                    "nvidia/cuda_nvcc/nvvm/libdevice/libdevice.10.bc": b"BC\xc0\xde",
                },
                executables=(ptxas,),
            )
            continue
        version, members = known.get(name, (None, {}))
        if version is None:
            version = next(s.version for s in requirement.specifier if s.operator in (">=", "=="))
        assert requirement.specifier.contains(version), (name, version)
        files = {path: wheelhouse.shared_library(libs / path, soname).read_bytes() for path, soname in members.items()}
        files = files or {f"nvidia/{name.removeprefix('nvidia-').removesuffix('-cu12')}/README": b"stand-in\n"}
        wheelhouse.wheel(directory, name, version, files)
    wheelhouse.wheel(
        directory,
        "nvidia-cudnn-cu12",
        OLD_CUDNN,
        {
            "nvidia/cudnn/lib/libcudnn.so.9": wheelhouse.shared_library(
                libs / "old" / "libcudnn.so.9", "libcudnn.so.9"
            ).read_bytes()
        },
    )
    return directory


def uv() -> str:
    from tfgpu.engines.uv import find_uv

    return find_uv()


def user_venv(prefix: Path, wheels: Path, *requirements: str, env: dict | None = None) -> Path:
    """``uv venv`` + ``uv pip install`` from ``wheels``: an env tfgpu-install did not build."""
    run = dict(env or os.environ)
    subprocess.run([uv(), "venv", "--quiet", "--python", sys.executable, str(prefix)], check=True, env=run)
    subprocess.run(
        [
            uv(),
            "pip",
            "install",
            "--quiet",
            "--python",
            str(prefix / "bin" / "python"),
            "--no-index",
            "--find-links",
            str(wheels),
            *requirements,
        ],
        check=True,
        env=run,
    )
    return prefix


def freeze(prefix: Path) -> str:
    done = subprocess.run(
        [uv(), "pip", "freeze", "--python", str(prefix / "bin" / "python")], capture_output=True, text=True, check=True
    )
    return done.stdout


def snapshot(prefix: Path) -> dict[str, str]:
    """Every path in the env with its kind and content (bytes' digest, link target, mode).

    One file is uv's and not the package's: ``*.dist-info/uv_cache.json`` records which entry of
    which uv cache an install came from (the wheel's time there), and RECORD lists its hash. A
    package put back by ``repair --undo`` comes through the tool's uv cache, which may have met the
    same wheel earlier from another directory: that file (and its RECORD line) is left out, every
    byte of the package itself is compared (docs/repair.md says so)."""
    found = {}
    for root, dirs, files in os.walk(prefix):
        for name in [*dirs, *files]:
            path = Path(root) / name
            relative = path.relative_to(prefix).as_posix()
            if path.is_symlink():
                found[relative] = f"link {os.readlink(path)}"
            elif path.is_dir():
                found[relative] = "dir"
            elif name == "uv_cache.json" and path.parent.name.endswith(".dist-info"):
                continue
            else:
                data = path.read_bytes()
                if name == "RECORD" and path.parent.name.endswith(".dist-info"):
                    data = b"".join(line for line in data.splitlines(keepends=True) if b"/uv_cache.json," not in line)
                digest = hashlib.sha256(data).hexdigest()
                found[relative] = f"file {oct(path.stat().st_mode & 0o777)} {digest}"
    return found
