"""Build small, real wheels and shared libraries for tests that must not download 4 GB.

They stand in for PyPI's TensorFlow and nvidia-* wheels at the package-index boundary only: the
wheels are real zip files that uv installs, the libraries are real ELF objects (built with gcc,
with the real sonames) that the dynamic loader maps. The real wheels are exercised by the tests
marked ``network`` (tests/test_pip_e2e.py).
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

# (distribution, version, {path in wheel: soname or None}) for a TF 2.21-shaped and-cuda set.
CUDA_WHEELS = [
    ("nvidia-nvjitlink-cu12", "12.9.86", {"nvidia/nvjitlink/lib/libnvJitLink.so.12": "libnvJitLink.so.12"}),
    ("nvidia-cuda-runtime-cu12", "12.9.79", {"nvidia/cuda_runtime/lib/libcudart.so.12": "libcudart.so.12"}),
    (
        "nvidia-cublas-cu12",
        "12.9.3.13",
        {
            "nvidia/cublas/lib/libcublasLt.so.12": "libcublasLt.so.12",
            "nvidia/cublas/lib/libcublas.so.12": "libcublas.so.12",
        },
    ),
    ("nvidia-cusolver-cu12", "11.7.5.82", {"nvidia/cusolver/lib/libcusolver.so.11": "libcusolver.so.11"}),
    ("nvidia-cudnn-cu12", "9.28.0.42", {"nvidia/cudnn/lib/libcudnn.so.9": "libcudnn.so.9"}),
]
NVCC = ("nvidia-cuda-nvcc-cu12", "12.9.86")


def have_compiler() -> bool:
    return shutil.which("gcc") is not None


_COMPILED: dict[tuple[tuple[str, ...], str, tuple[str, ...]], bytes] = {}


def gcc(path: Path, options: list[str], source: str, libraries: tuple[str, ...] = ()) -> Path:
    """``gcc <options> -o path -x c - <libraries>`` on ``source``: a real gcc-built library. The same
    command and source give the same library, so gcc runs once for each in a test process and later
    calls write a copy of its bytes to ``path`` (a new file, as the linker makes one): the suite
    builds thousands of stand-in libraries from a few dozen sources, at about 30 ms of CPU a gcc.
    Neither ``options`` nor ``libraries`` may name a file whose contents the build reads (a version
    script, a library of the test's own): such builds run gcc themselves."""
    key = (tuple(options), source, tuple(libraries))
    path.parent.mkdir(parents=True, exist_ok=True)
    if key not in _COMPILED:
        kept = _kept_build(key)
        if kept.is_file():
            _COMPILED[key] = kept.read_bytes()
        else:
            argv = ["gcc", *options, "-o", str(path), "-x", "c", "-", *libraries]
            subprocess.run(argv, input=source, text=True, check=True)
            _COMPILED[key] = path.read_bytes()
            partial = kept.with_name(f"{kept.name}.{os.getpid()}.part")
            partial.write_bytes(_COMPILED[key])
            os.replace(partial, kept)  # whole or absent: test processes build side by side
            return path
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o777)  # the linker's mode, less the umask
    with os.fdopen(fd, "wb") as out:
        out.write(_COMPILED[key])
    return path


def _kept_build(key: tuple) -> Path:
    """Where a build of ``key`` is kept between runs, in the suite's own cache (TFGPU_TEST_CACHE): the
    same command and source from the same gcc and linker give the same library, and the fast tier's
    130 gcc runs were 4-7 CPU-seconds of it. The key names the toolchain by each program's path, size
    and time, so an upgraded compiler or linker builds afresh."""
    # Not at the top: conftest imports this module.
    from conftest import suite_cache

    tools = []
    for program in ("gcc", "ld"):
        found = shutil.which(program)
        facts = os.stat(os.path.realpath(found)) if found else None
        tools.append((os.path.realpath(found), facts.st_size, facts.st_mtime_ns) if found and facts else None)
    digest = hashlib.sha256(repr((tools, key)).encode()).hexdigest()
    return suite_cache("gcc") / f"{digest}.so"


def shared_library(path: Path, soname: str) -> Path:
    """A real, loadable ELF shared object with ``soname``."""
    symbol = "tfgpu_test_" + "".join(c if c.isalnum() else "_" for c in soname)
    return gcc(path, ["-shared", "-fPIC", f"-Wl,-soname,{soname}"], f"int {symbol}(void) {{ return 1; }}\n")


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def wheel(
    directory: Path,
    dist: str,
    version: str,
    files: dict[str, bytes],
    requires: list[str] = (),
    extras: list[str] = (),
    executables: tuple[str, ...] = (),
    tag: str = "py3-none-any",
) -> Path:
    """Write ``<dist>-<version>-<tag>.whl`` holding ``files``; returns its path."""
    stem = dist.replace("-", "_")
    info = f"{stem}-{version}.dist-info"
    metadata = ["Metadata-Version: 2.1", f"Name: {dist}", f"Version: {version}"]
    metadata += [f"Provides-Extra: {extra}" for extra in extras]
    metadata += [f"Requires-Dist: {req}" for req in requires]
    contents = dict(files)
    contents[f"{info}/METADATA"] = ("\n".join(metadata) + "\n").encode()
    contents[f"{info}/WHEEL"] = (
        f"Wheel-Version: 1.0\nGenerator: tfgpu-tests\nRoot-Is-Purelib: true\nTag: {tag}\n".encode()
    )
    record = [_record_line(name, data) for name, data in contents.items()] + [f"{info}/RECORD,,"]
    contents[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"{stem}-{version}-{tag}.whl"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in contents.items():
            entry = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            entry.external_attr = (0o755 if name in executables else 0o644) << 16
            # Large members (random filler) are stored: deflating random bytes gains nothing and costs time.
            archive.writestr(entry, data, zipfile.ZIP_STORED if len(data) > 1 << 20 else zipfile.ZIP_DEFLATED)
    return target


NO_GPU_TENSORFLOW = '''"""A CUDA build of TensorFlow on a machine without a driver, as verify sees it: it imports, says
it was built with CUDA and lists no GPU (verify then finds the reason itself)."""
__version__ = {version!r}


class config:
    @staticmethod
    def list_physical_devices(kind=None):
        return []

    class experimental:
        @staticmethod
        def set_memory_growth(device, enable):
            raise ValueError("no such device")


class sysconfig:
    @staticmethod
    def get_build_info():
        return {{"is_cuda_build": True, "cuda_version": "12.5.1", "cudnn_version": "9"}}
'''
"""``tensorflow/__init__.py`` of :func:`tensorflow_wheelhouse` with ``no_gpu=True``."""


def tensorflow_wheelhouse(
    directory: Path, version: str = "2.21.0", no_gpu: bool = False, filler: dict[str, int] | None = None
) -> Path:
    """A find-links directory that satisfies ``tensorflow[and-cuda]==<version>`` and the nvcc floor;
    ``no_gpu``: its TensorFlow imports and lists no GPU (:data:`NO_GPU_TENSORFLOW`), else it is a bare
    package with a version. ``filler``: distribution -> bytes of random data added to its wheel, so
    that its download takes time (the tests of what a terminal shows while wheels arrive)."""
    filler = filler or {}

    def padded(dist: str, files: dict[str, bytes]) -> dict[str, bytes]:
        if dist in filler:
            files = {**files, f"{dist.replace('-', '_')}_filler/filler.bin": os.urandom(filler[dist])}
        return files

    libs = directory / ".libs"
    requires = [f"{dist}>={ver}; extra == 'and-cuda'" for dist, ver, _ in CUDA_WHEELS]
    requires.append(f"{NVCC[0]}>=12.5.82; extra == 'and-cuda'")
    init = NO_GPU_TENSORFLOW.format(version=version) if no_gpu else f"__version__ = {version!r}\n"
    tensorflow = padded("tensorflow", {"tensorflow/__init__.py": init.encode()})
    wheel(directory, "tensorflow", version, tensorflow, requires, extras=["and-cuda"])
    for dist, ver, members in CUDA_WHEELS:
        files = {}
        for name, soname in members.items():
            files[name] = shared_library(libs / name, soname).read_bytes()
        wheel(directory, dist, ver, padded(dist, files))
    ptxas = "nvidia/cuda_nvcc/bin/ptxas"
    wheel(
        directory,
        *NVCC,
        padded(
            NVCC[0],
            {
                ptxas: b"#!/bin/sh\necho 'ptxas: NVIDIA (R) Ptx optimizing assembler (tfgpu test stand-in)'\n",
                "nvidia/cuda_nvcc/nvvm/libdevice/libdevice.10.bc": b"BC\xc0\xde",
            },
        ),
        executables=(ptxas,),
    )
    shutil.rmtree(libs)
    return directory


def fake_libcuda(directory: Path, cuda: int) -> Path:
    """A ``libcuda.so.1`` whose ``cuDriverGetVersion`` says ``cuda`` (11020: CUDA 11.2)."""
    directory.mkdir(parents=True, exist_ok=True)
    source = (
        f"int cuDriverGetVersion(int *version) {{ *version = {cuda}; return 0; }}\n"
        "int cuInit(unsigned int flags) { return 0; }\n"
    )
    gcc(directory / "libcuda.so.1", ["-shared", "-fPIC", "-Wl,-soname,libcuda.so.1"], source)
    return directory
