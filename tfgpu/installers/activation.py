"""Make an env's own CUDA libraries the ones TensorFlow loads, whatever starts its Python.

One layout (which library directories, which libraries to preload in which order, where XLA's
libdevice and ptxas are) is read from the installed env, then written three ways:

* shell activation: ``bin/activate`` (bash, zsh) and ``bin/activate.fish`` source a file that puts
  the env's ``nvidia/*/lib`` first on ``LD_LIBRARY_PATH``, sets ``XLA_FLAGS`` and restores both
  exactly on ``deactivate``;
* a load hook (``.pth`` + module in site-packages) that preloads the libraries when ``tensorflow``
  is imported, for IDEs, cron, systemd, Jupyter and ``subprocess`` starts;
* ``ptxas`` linked into ``bin/`` so an activated shell finds it on PATH.

Every path is written relative to the env, so the env can be built in staging and moved.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

# Preload order: each library after the ones it links against [ENGINES-H200] (nvJitLink before
# cuSPARSE/cuSOLVER, cuBLASLt before cuBLAS, cuDNN 8's sub-libraries before libcudnn).
COMPONENTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("nvjitlink", ("libnvJitLink",)),
    ("cuda_runtime", ("libcudart",)),
    ("cublas", ("libcublasLt", "libcublas")),
    ("cusparse", ("libcusparse",)),
    ("cusolver", ("libcusolver",)),
    ("cufft", ("libcufft",)),
    ("curand", ("libcurand",)),
    ("cuda_nvrtc", ("libnvrtc",)),
    ("cudnn", ("libcudnn_ops_infer", "libcudnn_ops_train", "libcudnn_cnn_infer", "libcudnn_cnn_train",
               "libcudnn_adv_infer", "libcudnn_adv_train", "libcudnn")),
    ("nccl", ("libnccl",)),
    ("cuda_cupti", ("libcupti",)),
)
HOOK_MODULE = "_tfgpu_cuda_hook"
BEGIN, END = "# >>> tfgpu-install >>>", "# <<< tfgpu-install <<<"


@dataclass(frozen=True)
class CudaLayout:
    """Where an env's CUDA pieces are, relative to the env root (``site_packages`` too)."""

    site_packages: str
    lib_dirs: tuple[str, ...]
    preload: tuple[str, ...]
    """Library files relative to site-packages, in load order."""
    cuda_data_dir: str | None
    """The directory holding ``nvvm/libdevice`` (XLA's ``--xla_gpu_cuda_data_dir``)."""
    ptxas: str | None

    def to_dict(self) -> dict:
        return {"site_packages": self.site_packages, "lib_dirs": list(self.lib_dirs),
                "preload": list(self.preload), "cuda_data_dir": self.cuda_data_dir, "ptxas": self.ptxas}


def _soname_file(lib_dir: Path, base: str) -> str | None:
    """``libcudart.so.12`` rather than ``libcudart.so.12.5.82`` or ``libcudart.so``."""
    names = sorted(p.name for p in lib_dir.glob(f"{base}.so*"))
    exact = [n for n in names if re.fullmatch(rf"{re.escape(base)}\.so\.\d+", n)]
    versioned = [n for n in names if n.startswith(f"{base}.so.")]
    return (exact or sorted(versioned, key=len) or [None])[0]


def read_layout(root: Path, site_packages: str) -> CudaLayout:
    """The CUDA layout of the pip-installed ``nvidia-*`` wheels in an env."""
    nvidia = root / site_packages / "nvidia"
    lib_dirs: list[str] = []
    preload: list[str] = []
    known = {component for component, _ in COMPONENTS}
    for component, bases in COMPONENTS:
        lib_dir = nvidia / component / "lib"
        if not lib_dir.is_dir():
            continue
        lib_dirs.append(f"{site_packages}/nvidia/{component}/lib")
        for base in bases:
            name = _soname_file(lib_dir, base)
            if name:
                preload.append(f"nvidia/{component}/lib/{name}")
    for extra in sorted(nvidia.glob("*/lib")) if nvidia.is_dir() else []:
        if extra.parent.name not in known:  # e.g. cuda_nvcc, nvshmem: on the path, not preloaded
            lib_dirs.append(f"{site_packages}/nvidia/{extra.parent.name}/lib")
    nvcc = nvidia / "cuda_nvcc"
    return CudaLayout(
        site_packages=site_packages,
        lib_dirs=tuple(lib_dirs),
        preload=tuple(preload),
        cuda_data_dir=f"{site_packages}/nvidia/cuda_nvcc" if (nvcc / "nvvm" / "libdevice").is_dir() else None,
        ptxas=f"{site_packages}/nvidia/cuda_nvcc/bin/ptxas" if (nvcc / "bin" / "ptxas").is_file() else None,
    )


def _template(name: str) -> str:
    return files("tfgpu.installers").joinpath("templates", name).read_text(encoding="utf-8")


def _sh_word(text: str) -> str:
    return re.sub(r'([\\"$`])', r"\\\1", text)


def shell_layout(layout: CudaLayout, var: str) -> tuple[str, str]:
    """The ``@LAYOUT@`` blocks for sh and fish, paths under ``$var`` (VIRTUAL_ENV, CONDA_PREFIX)."""
    libs = ":".join(f"${var}/{_sh_word(d)}" for d in layout.lib_dirs)
    data = f"${var}/{_sh_word(layout.cuda_data_dir)}" if layout.cuda_data_dir else ""
    sh = f'_tfgpu_libs="{libs}"\n_tfgpu_cuda_data_dir="{data}"'
    fish_libs = " ".join(f'"${var}/{_sh_word(d)}"' for d in layout.lib_dirs)
    fish = f"set -g _tfgpu_libs {fish_libs}\nset -g _tfgpu_cuda_data_dir \"{data}\""
    return sh, fish


def _fill(template: str, block: str) -> str:
    return re.sub(r"^# @LAYOUT@.*$", lambda _: block, template, count=1, flags=re.M)


def _append_hook(script: Path, line: str) -> None:
    text = script.read_text(encoding="utf-8") if script.exists() else ""
    if BEGIN in text:
        text = text[: text.index(BEGIN)].rstrip("\n") + "\n"
    script.write_text(f"{text}\n{BEGIN}\n{line}\n{END}\n", encoding="utf-8")


def write_load_hook(site_dir: Path, layout: CudaLayout) -> list[Path]:
    """The ``.pth`` + module that preload the libraries when tensorflow is imported."""
    ptxas_dir = None
    if layout.ptxas:
        ptxas_dir = str(Path(layout.ptxas).parent.relative_to(layout.site_packages))
    source = _template("cuda_hook.py")
    source = source.replace("LIBRARIES = []  # @LIBRARIES@", f"LIBRARIES = {json.dumps(list(layout.preload))}")
    data = str(Path(layout.cuda_data_dir).relative_to(layout.site_packages)) if layout.cuda_data_dir else ""
    source = source.replace('CUDA_DATA_DIR = ""  # @CUDA_DATA_DIR@', f"CUDA_DATA_DIR = {json.dumps(data)}")
    source = source.replace('PTXAS_DIR = ""  # @PTXAS_DIR@', f"PTXAS_DIR = {json.dumps(ptxas_dir or '')}")
    module = site_dir / f"{HOOK_MODULE}.py"
    pth = site_dir / f"{HOOK_MODULE}.pth"
    module.write_text(source, encoding="utf-8")
    pth.write_text(f"import {HOOK_MODULE}\n", encoding="utf-8")
    return [module, pth]


def write_venv_activation(root: Path, layout: CudaLayout) -> list[Path]:
    """Everything a venv needs: shell hooks, the load hook, ptxas on PATH."""
    etc = root / "etc" / "tfgpu"
    etc.mkdir(parents=True, exist_ok=True)
    sh, fish = shell_layout(layout, "VIRTUAL_ENV")
    written = [etc / "activate.sh", etc / "activate.fish", etc / "layout.json"]
    written[0].write_text(_fill(_template("activate.sh"), sh), encoding="utf-8")
    written[1].write_text(_fill(_template("activate.fish"), fish), encoding="utf-8")
    written[2].write_text(json.dumps(layout.to_dict(), indent=2) + "\n", encoding="utf-8")
    _append_hook(root / "bin" / "activate", '. "$VIRTUAL_ENV/etc/tfgpu/activate.sh"')
    if (root / "bin" / "activate.fish").exists():
        _append_hook(root / "bin" / "activate.fish", 'source "$VIRTUAL_ENV/etc/tfgpu/activate.fish"')
    written += [root / "bin" / "activate", root / "bin" / "activate.fish"]
    if layout.ptxas:
        link = root / "bin" / "ptxas"
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(Path("..") / layout.ptxas)
        written.append(link)
    written += write_load_hook(root / layout.site_packages, layout)
    return written
