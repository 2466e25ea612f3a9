"""Build environment trees for doctor tests: real files, real ELF libraries, no 4 GB download.

An env here is the directory layout pip produces (``lib/python3.X/site-packages`` with
``tensorflow/``, its dist-info and ``nvidia/*/lib``), holding real shared objects compiled with
gcc: ``libtensorflow_framework.so.2`` carries a real RUNPATH, ``libcudart`` and ``libcudnn``
export the real version functions (returning the version asked for), every library has its real
soname. doctor reads and loads these exactly as it does the real ones; only TensorFlow's own
code is absent (doctor never imports it).
"""

from __future__ import annotations

from pathlib import Path

import wheelhouse

from tfgpu.envs import activation

# pip's layout for TF 2.21 [and-cuda] (component dir, soname).
CUDA12 = [
    ("nvjitlink", "libnvJitLink.so.12"),
    ("cuda_runtime", "libcudart.so.12"),
    ("cublas", "libcublasLt.so.12"),
    ("cublas", "libcublas.so.12"),
    ("cusparse", "libcusparse.so.12"),
    ("cusolver", "libcusolver.so.11"),
    ("cufft", "libcufft.so.11"),
    ("curand", "libcurand.so.10"),
    ("cudnn", "libcudnn.so.9"),
]
# RUNPATH of TF 2.21.0's libtensorflow_framework.so.2: no cusolver entry [WHL-RPATH].
RUNPATH_2_21 = ["nccl", "cuda_cupti", "cublas", "cudnn", "cufft", "cusparse", "cuda_runtime", "nvshmem"]
# TF 2.16.1: only cuda_runtime [WHL-RPATH].
RUNPATH_2_16_1 = ["cuda_runtime"]
RUNPATH_FULL = ["cuda_runtime", "cublas", "cudnn", "cufft", "cusolver", "cusparse", "curand", "nvjitlink"]


def compile_library(path: Path, soname: str, source: str = "", runpath: str = "") -> Path:
    symbol = "tfgpu_test_" + "".join(c if c.isalnum() else "_" for c in soname)
    options = ["-shared", "-fPIC", f"-Wl,-soname,{soname}"]
    if runpath:
        options.append(f"-Wl,-rpath,{runpath},--enable-new-dtags")
    return wheelhouse.gcc(path, options, f"int {symbol}(void) {{ return 1; }}\n{source}")


def cuda_source(soname: str, cudart: int, cudnn: int) -> str:
    if soname.startswith("libcudart"):
        return f"int cudaRuntimeGetVersion(int *v) {{ *v = {cudart}; return 0; }}\n"
    if soname.startswith("libcudnn.so"):
        return f"unsigned long cudnnGetVersion(void) {{ return {cudnn}UL; }}\n"
    return ""


def make_env(
    root: Path,
    *,
    tf_version: str = "2.21.0",
    python: str = "3.11",
    cuda: str = "12.5.1",
    cudnn_major: str = "9",
    caps: tuple[str, ...] = ("sm_60", "sm_70", "sm_80", "sm_89", "compute_90"),
    cuda_build: bool = True,
    runpath: list[str] = RUNPATH_2_21,
    libraries=CUDA12,
    cudart_version: int = 12090,
    cudnn_version: int = 92800,
    hook: bool = True,
    ptxas_release: str | None = "12.9.86",
    libdevice: bool = True,
) -> Path:
    """Lay out an env under ``root``; returns ``root``."""
    site = root / "lib" / f"python{python}" / "site-packages"
    tf = site / "tensorflow"
    (tf / "python" / "platform").mkdir(parents=True)
    (tf / "python" / "platform" / "build_info.py").write_text(
        '"""Auto-generated module providing information about the build."""\nimport collections\n\n'
        f"build_info = collections.OrderedDict([('cuda_compute_capabilities', {list(caps)!r}), "
        f"('cuda_version', {cuda!r}), ('cudnn_version', {cudnn_major!r}), ('is_cuda_build', {cuda_build}), "
        "('is_rocm_build', False)])\n"
    )
    dist = site / f"tensorflow-{tf_version}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: tensorflow\nVersion: {tf_version}\n")
    rpath = ":".join(f"$ORIGIN/../nvidia/{c}/lib" for c in runpath)
    compile_library(tf / "libtensorflow_framework.so.2", "libtensorflow_framework.so.2", runpath=rpath)
    for component, soname in libraries:
        compile_library(
            site / "nvidia" / component / "lib" / soname, soname, cuda_source(soname, cudart_version, cudnn_version)
        )
    nvcc = site / "nvidia" / "cuda_nvcc"
    if ptxas_release:
        ptxas = nvcc / "bin" / "ptxas"
        ptxas.parent.mkdir(parents=True)
        major_minor = ".".join(ptxas_release.split(".")[:2])
        ptxas.write_text(
            "#!/bin/sh\necho 'ptxas: NVIDIA (R) Ptx optimizing assembler'\n"
            f"echo 'Cuda compilation tools, release {major_minor}, V{ptxas_release}'\n"
        )
        ptxas.chmod(0o755)
    if libdevice:
        (nvcc / "nvvm" / "libdevice").mkdir(parents=True)
        (nvcc / "nvvm" / "libdevice" / "libdevice.10.bc").write_bytes(b"BC\xc0\xde")
    (root / "bin").mkdir(parents=True, exist_ok=True)
    (root / "bin" / "activate").write_text("# venv activate stand-in\ndeactivate () { :; }\n")
    if hook:
        layout = activation.read_layout(root, f"lib/python{python}/site-packages")
        activation.write_venv_activation(root, layout)
    return root
