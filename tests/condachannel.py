"""A real local conda channel for tests: conda-forge's package names, real small shared libraries.

The packages are real conda packages (built with conda-package-handling, indexed with rattler's
indexer) that rattler solves and links like any other; they stand in for conda-forge only at the
network boundary (this machine reaches no conda channel). Their libraries are gcc-built ELF
objects with the sonames of the real CUDA libraries, so ``ctypes`` and the dynamic loader treat
them as the real thing. The ``python`` package is a venv-style shell around a real interpreter of
this machine (``pyvenv.cfg`` + ``bin/python``), so uv installs TensorFlow's wheels into the conda
env for real.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import wheelhouse

# CUDA 11 (cudatoolkit) libraries: soname per library, as conda-forge's cudatoolkit 11.8 ships them.
CUDATOOLKIT_11 = {
    "libcudart.so.11.0": "libcudart.so.11.0",
    "libcublas.so.11": "libcublas.so.11",
    "libcublasLt.so.11": "libcublasLt.so.11",
    "libcufft.so.10": "libcufft.so.10",
    "libcurand.so.10": "libcurand.so.10",
    "libcusolver.so.11": "libcusolver.so.11",
    "libcusparse.so.11": "libcusparse.so.11",
    "libnvrtc.so.11.2": "libnvrtc.so.11.2",
    "libcupti.so.11.8": "libcupti.so.11.8",
}
# CUDA 12 split packages: package -> (version pattern, library sonames).
CUDA12_SPLIT = {
    "cuda-cudart": ("{cuda}.101", ["libcudart.so.12"]),
    "libcublas": ("{cuda}.4.1", ["libcublasLt.so.12", "libcublas.so.12"]),
    "libcufft": ("11.0.12.1", ["libcufft.so.11"]),
    "libcurand": ("10.3.4.107", ["libcurand.so.10"]),
    "libcusolver": ("11.5.4.101", ["libcusolver.so.11"]),
    "libcusparse": ("12.2.0.103", ["libcusparse.so.12"]),
    "cuda-nvrtc": ("{cuda}.107", ["libnvrtc.so.12"]),
    "cuda-cupti": ("{cuda}.101", ["libcupti.so.12"]),
    "libnvjitlink": ("{cuda}.101", ["libnvJitLink.so.12"]),
}
CUDNN_SUBLIBS_8 = [
    "libcudnn_ops_infer.so.8",
    "libcudnn_ops_train.so.8",
    "libcudnn_cnn_infer.so.8",
    "libcudnn_cnn_train.so.8",
    "libcudnn_adv_infer.so.8",
    "libcudnn_adv_train.so.8",
]


@dataclass
class Package:
    name: str
    version: str
    build: str = "h0000000_0"
    depends: list[str] = field(default_factory=list)
    constrains: list[str] = field(default_factory=list)
    files: dict[str, bytes | str] = field(default_factory=dict)
    """path -> bytes (a file) or ``"soname:<soname>"`` (a gcc-built library) or ``"link:<target>"``."""
    subdir: str = "linux-64"


def _library_bytes(soname: str, cache: dict[str, bytes]) -> bytes:
    if soname not in cache:
        with tempfile.TemporaryDirectory() as tmp:
            cache[soname] = wheelhouse.shared_library(Path(tmp) / soname, soname).read_bytes()
    return cache[soname]


def build_package(package: Package, subdir_dir: Path, libs: dict[str, bytes]) -> Path:
    """Write one ``.tar.bz2`` conda package into ``subdir_dir``."""
    from conda_package_handling import api

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        paths = []
        for rel, content in sorted(package.files.items()):
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, str) and content.startswith("link:"):
                os.symlink(content.removeprefix("link:"), target)
                paths.append({"_path": rel, "path_type": "softlink"})
                continue
            data = _library_bytes(content.removeprefix("soname:"), libs) if isinstance(content, str) else content
            target.write_bytes(data)
            if rel.startswith("bin/"):
                target.chmod(0o755)
            paths.append(
                {
                    "_path": rel,
                    "path_type": "hardlink",
                    "sha256": hashlib.sha256(data).hexdigest(),
                    "size_in_bytes": len(data),
                }
            )
        info = root / "info"
        info.mkdir()
        index = {
            "name": package.name,
            "version": package.version,
            "build": package.build,
            "build_number": int(package.build.rsplit("_", 1)[-1]),
            "depends": package.depends,
            "constrains": package.constrains,
            "subdir": package.subdir,
            "license": "test",
            "timestamp": 1767225600000,
        }
        if package.subdir == "noarch":
            index["noarch"] = "generic"
        (info / "index.json").write_text(json.dumps(index))
        (info / "paths.json").write_text(json.dumps({"paths": paths, "paths_version": 1}))
        (info / "files").write_text("".join(p["_path"] + "\n" for p in paths))
        members = [p["_path"] for p in paths] + ["info/index.json", "info/paths.json", "info/files"]
        subdir_dir.mkdir(parents=True, exist_ok=True)
        stem = f"{package.name}-{package.version}-{package.build}"
        api.create(str(root), members, f"{stem}.tar.bz2", out_folder=str(subdir_dir.absolute()))
    return subdir_dir / f"{stem}.tar.bz2"


def python_package(version: str, interpreter: str) -> Package:
    """``python X.Y.Z``: a venv-style shell around a real interpreter of this machine."""
    mm = ".".join(version.split(".")[:2])
    home = str(Path(interpreter).parent)
    cfg = f"home = {home}\ninclude-system-site-packages = false\nversion = {version}\n"
    return Package(
        "python",
        version,
        "h0000000_0",
        depends=["__glibc >=2.17"],
        files={
            "pyvenv.cfg": cfg.encode(),
            f"bin/python{mm}": f"link:{interpreter}",
            "bin/python": f"link:python{mm}",
            "bin/python3": f"link:python{mm}",
            f"lib/python{mm}/site-packages/README.conda": b"conda test python\n",
        },
    )


def cuda11_packages(cuda: str = "11.8.0") -> list[Package]:
    mm = ".".join(cuda.split(".")[:2])
    files: dict[str, bytes | str] = {f"lib/{name}": f"soname:{soname}" for name, soname in CUDATOOLKIT_11.items()}
    files["lib/libdevice.10.bc"] = b"BC\xc0\xde libdevice (test)"
    return [
        Package(
            "cudatoolkit",
            cuda,
            "h4ba93d1_13",
            depends=["__glibc >=2.17,<3.0.a0"],
            constrains=["__cuda >=11"],
            files=files,
        ),
        Package(
            "cuda-version", mm, "h0000000_3", constrains=[f"cudatoolkit {mm}|{mm}.*", "__cuda >=11"], subdir="noarch"
        ),
    ]


def cuda12_packages(mm: str) -> list[Package]:
    upper = f"{mm.split('.')[0]}.{int(mm.split('.')[1]) + 1}"
    pin = f"cuda-version >={mm},<{upper}.0a0"
    packages = [
        Package(
            "cuda-version", mm, "h0000000_3", constrains=["__cuda >=12", f"cudatoolkit {mm}|{mm}.*"], subdir="noarch"
        )
    ]
    for name, (pattern, sonames) in CUDA12_SPLIT.items():
        packages.append(
            Package(
                name,
                pattern.format(cuda=mm),
                "h0000000_0",
                depends=[pin],
                files={f"lib/{s}": f"soname:{s}" for s in sonames},
            )
        )
    packages.append(
        Package(
            "cuda-nvcc-tools",
            f"{mm}.107",
            "h0000000_0",
            depends=[pin],
            files={
                "bin/ptxas": b"#!/bin/sh\necho 'ptxas: NVIDIA (R) Ptx optimizing assembler (tfgpu test stand-in)'\n",
                "nvvm/libdevice/libdevice.10.bc": b"BC\xc0\xde libdevice (test)",
            },
        )
    )
    return packages


def cudnn_package(version: str, cuda_mm: str) -> Package:
    major = version.split(".")[0]
    names = [f"libcudnn.so.{major}"] + (CUDNN_SUBLIBS_8 if major == "8" else [])
    if cuda_mm.startswith("11"):
        depends = ["cudatoolkit 11.*"]
    else:
        depends = [
            f"cuda-version >={cuda_mm.split('.')[0]},<{int(cuda_mm.split('.')[0]) + 1}.0a0",
            "libcublas",
            "cuda-nvrtc",
        ]
    build = f"cuda{cuda_mm.replace('.', '')}h0000000_0"
    return Package("cudnn", version, build, depends=depends, files={f"lib/{n}": f"soname:{n}" for n in names})


def tensorflow_package(version: str, cuda_mm: str, python_mm: str) -> Package:
    """A conda-forge-style CUDA build of TensorFlow (``--tf-source conda-forge``)."""
    tag = python_mm.replace(".", "")
    return Package(
        "tensorflow",
        version,
        f"cuda{cuda_mm.replace('.', '')}py{tag}h0000000_200",
        depends=[
            f"python >={python_mm},<{_next(python_mm)}.0a0",
            "__cuda",
            "cudatoolkit >=11.8,<12" if cuda_mm.startswith("11") else "cuda-nvcc-tools",
        ],
        files={f"lib/python{python_mm}/site-packages/tensorflow/__init__.py": f"__version__ = {version!r}\n".encode()},
    )


def _next(mm: str) -> str:
    major, minor = mm.split(".")
    return f"{major}.{int(minor) + 1}"


def build_channel(directory: Path, packages: list[Package]) -> Path:
    """Every package built and indexed (rattler's indexer); returns the channel directory."""
    from rattler.index import index_fs

    libs: dict[str, bytes] = {}
    directory = directory.absolute()
    (directory / "noarch").mkdir(parents=True, exist_ok=True)
    (directory / "linux-64").mkdir(parents=True, exist_ok=True)
    for package in packages:
        build_package(package, directory / package.subdir, libs)
    asyncio.run(index_fs(directory))
    return directory


def default_packages(interpreter: str = sys.executable) -> list[Package]:
    """A channel that solves the TF 2.13 (CUDA 11.8) and 2.16.1 (CUDA 12.3) conda specs."""
    version = ".".join(str(part) for part in sys.version_info[:3])
    python_mm = ".".join(version.split(".")[:2])
    real = os.path.realpath(interpreter)
    packages = [python_package(version, real)]
    packages += cuda11_packages("11.8.0")
    packages += cuda12_packages("12.3")
    packages.append(cudnn_package("8.9.7.29", "11.8"))
    packages.append(
        Package(
            "cudnn",
            "8.9.7.29",
            "cuda120h0000000_0",
            depends=["cuda-version >=12,<13.0a0", "libcublas", "cuda-nvrtc"],
            files={f"lib/{n}": f"soname:{n}" for n in ["libcudnn.so.8", *CUDNN_SUBLIBS_8]},
        )
    )
    packages.append(tensorflow_package("2.13.1", "11.8", python_mm))
    return packages
