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

Layouts: ``nvidia/<component>/lib`` (CUDA 11/12 wheels), ``nvidia/cu13/`` (CUDA 13), conda's
``lib/``, a toolkit's ``lib64/``. The tests check NVIDIA's cuda-pathfinder finds each library where
this module preloads it from; the hook does not use it (not installed in the env; it searches anew,
in its own order, at every start, where the hook loads the paths fixed at set-up, the env's first).
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path

from tfgpu.doors import untrusted
from tfgpu.envs import writes

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
    other_first: tuple[str, ...] = ()
    """In an env with two CUDA stacks: the other stack's library files (site-relative) whose SONAMEs
    TensorFlow's stack ships too, loaded before ``preload`` so that either import order ends with
    the other framework's copies loaded (``tfgpu.doctor.ownership.colliding``; docs/modes.md)."""
    links: tuple[tuple[str, str], ...] = ()
    """(env-relative link, relative target): the names a CUDA library dlopens itself
    (``libnvrtc.so``), provided on that library's RUNPATH (:func:`dlopen_links`)."""

    def to_dict(self) -> dict:
        return {"site_packages": self.site_packages, "lib_dirs": list(self.lib_dirs),
                "preload": list(self.preload), "cuda_data_dir": self.cuda_data_dir, "ptxas": self.ptxas,
                "other_first": list(self.other_first),
                "links": [list(link) for link in self.links]}


def _soname_files(lib_dir: Path, base: str) -> list[str]:
    """The versioned files of ``base`` in ``lib_dir``, best first: ``libcudart.so.12``, then
    ``libcudart.so.12.5.82``; never ``libcudart.so``."""
    names = sorted(p.name for p in lib_dir.glob(f"{base}.so*"))
    exact = [n for n in names if re.fullmatch(rf"{re.escape(base)}\.so\.\d+", n)]
    versioned = sorted((n for n in names if n.startswith(f"{base}.so.") and n not in exact), key=len)
    return exact + versioned


def _soname_file(lib_dir: Path, base: str) -> str | None:
    return next(iter(_soname_files(lib_dir, base)), None)  # libcudart.so.12, not .so.12.5.82 or .so


def dlopen_links(root: Path, lib_dirs: tuple[str, ...], names: tuple[dict, ...]) -> tuple[tuple[str, str], ...]:
    """Links that make the names CUDA libraries ``dlopen`` themselves resolve inside the env.

    cuDNN 8 and cuBLASLt 11 call ``dlopen("libnvrtc.so")``, cuBLASLt 12 ``dlopen("libnvrtc.so.12")``;
    the loader looks on the *caller's* RUNPATH, LD_LIBRARY_PATH and ld.so.cache (man 3 dlopen), and
    the file is in another wheel's directory (a wheel ships only ``libnvrtc.so.11.2``), so the system
    toolkit's copy answered. Preloading does not help a name without a version (the loader matches
    loaded objects by name) nor a call made while the caller itself is loaded. ``names`` are
    sonames.toml's ``[[dlopened]]`` rows (name, provides, caller, runpath); for each caller present
    in one of ``lib_dirs``, the first RUNPATH directory inside the env gets ``name`` as a relative
    link to the env's file: the file of exactly that name for a versioned name, else the env's
    versioned file of that library.
    A file of that name already there that resolves inside the env (a conda ``-dev`` package's, or
    this link from an earlier run) is left as it is; a dangling link, or one out of the env, is replaced."""
    links: dict[str, str] = {}
    top = os.path.realpath(root)

    def own(directory: str, name: str | None) -> bool:
        # The env's own file: one that is a link out of the env (a system toolkit's copy) is not,
        # and a link to it would hand the caller that very copy.
        real = os.path.realpath(root / directory / name) if name else ""
        return bool(name) and real.startswith(top + os.sep) and os.path.isfile(real)

    for row in names:
        callers = [d for d in lib_dirs if (root / d / row["caller"]).is_file()]
        if not callers:
            continue  # a stat before the globs: an overlay's 100,000 rows of absent callers cost no search
        if row["name"].endswith(".so"):
            found = [(d, n) for d in lib_dirs for n in _soname_files(root / d, row["provides"]) if own(d, n)]
        else:  # a versioned name: only that very file will do
            found = [(d, row["name"]) for d in lib_dirs if own(d, row["name"])]
        # A file that is where it is named (conda's libnvrtc.so.12 -> libnvrtc.so.12.5.82 beside it
        # counts) before a link into another directory (the one this function made in cuBLAS's for
        # libnvrtc.so.12): create, where that link is not there yet, and a later repair pick the same
        # file. A soname file that links out of the env is not the env's (own), and gives way to a
        # versioned file beside it that is.
        provider = next((p for p in found if _in_place(root / p[0], p[1])), found[0] if found else None)
        if provider is None:
            continue
        for lib_dir in callers:
            target_dir = _link_dir(root, lib_dir, row)
            if target_dir is None:
                continue
            link = f"{target_dir}/{row['name']}"
            there = os.path.realpath(root / link)
            if f"{provider[0]}/{provider[1]}" == link:
                continue  # the caller's own directory holds the file
            if link not in links and not ((root / link).is_file() and there.startswith(top + os.sep)):
                links[link] = os.path.relpath(f"{provider[0]}/{provider[1]}", target_dir)
    return tuple(sorted(links.items()))


def _link_dir(root: Path, lib_dir: str, row: dict) -> str | None:
    """The first directory of the caller's RUNPATH (the caller in ``lib_dir``) inside the env: where
    :func:`dlopen_links` puts the name (env-relative), or None."""
    top = os.path.realpath(root)
    for entry in row["runpath"]:
        target_dir = os.path.normpath(os.path.join(lib_dir, entry.replace("${ORIGIN}", ".").replace("$ORIGIN", ".")))
        real = os.path.realpath(root / target_dir)
        if target_dir.startswith(("/", "..")) or not (real == top or real.startswith(top + os.sep)):
            continue
        if (root / target_dir).is_dir():
            return target_dir
    return None


def dlopen_left_out(root: Path, lib_dirs: tuple[str, ...], names: tuple[dict, ...]) -> tuple[tuple[str, str], ...]:
    """(env-relative path, where it links) for each file of the env that makes a name a caller of the
    env dlopens load from outside it, and that :func:`dlopen_links` cannot replace because the env
    holds no file of that library of its own: the name itself linked out (``libnvrtc.so`` ->
    /usr/local/cuda/...), or the provider's own file linked out (the wheel's ``libnvrtc.so.12``). Only
    putting the wheel's file back (reinstalling it) closes such an env; a repair says so rather than
    "nothing to do"."""
    top = os.path.realpath(root)
    made = dict(dlopen_links(root, lib_dirs, names))

    def out(relative: str) -> str | None:  # the link read first: one removed meanwhile is no traceback
        try:
            target = os.readlink(root / relative)
        except (OSError, ValueError):
            return None
        return None if os.path.realpath(root / relative).startswith(top + os.sep) else target

    found: dict[str, str] = {}
    for row in names:
        for lib_dir in lib_dirs:
            if not (root / lib_dir / row["caller"]).is_file():
                continue
            target_dir = _link_dir(root, lib_dir, row)
            link = f"{target_dir}/{row['name']}" if target_dir else None
            if link is None or link in made:
                continue
            if row["name"].endswith(".so"):
                providers = [f"{d}/{n}" for d in lib_dirs for n in _soname_files(root / d, row["provides"])]
            else:
                providers = [f"{d}/{row['name']}" for d in lib_dirs]
            for relative in [link, *providers]:
                if (target := out(relative)) is not None:
                    found.setdefault(relative, target)
    return tuple(sorted(found.items()))


def _in_place(directory: Path, name: str) -> bool:
    return os.path.dirname(os.path.realpath(directory / name)) == os.path.realpath(directory)


def _write_links(root: Path, layout: CudaLayout) -> list[Path]:
    written = []
    for link, target in layout.links:
        writes.make_dirs((root / link).parent, root)  # root: a directory swapped for a link out since the plan
        written.append(writes.put_link(root / link, target, root))
    return written


def _merged_toolkits(nvidia: Path) -> list[str]:
    """The merged toolkit trees of an env, newest first: CUDA 13's wheels install every toolkit
    component into one ``nvidia/cu13/`` (``lib/``, ``bin/ptxas``, ``nvvm/libdevice``) instead of
    one directory per component; a later major is expected to do the same (``cu14``)."""
    found = [p.name for p in nvidia.glob("cu[0-9]*") if p.is_dir() and re.fullmatch(r"cu[0-9]{2}", p.name)]
    return sorted(found, key=lambda name: int(name[2:]), reverse=True)


MERGED_FROM_CUDA = 13
"""The first CUDA major whose wheels merge the toolkit into ``nvidia/cu<major>/`` [WHL-CU13-LAYOUT]."""


def wheel_dirs(cuda: str | None, site: str) -> tuple[list[str], str, str]:
    """(library directories, XLA data directory, ptxas) where the CUDA wheels of TensorFlow built
    with ``cuda`` will be, under ``site``: for artefacts written before the env exists (Dockerfile,
    Apptainer, modulefiles), which cannot read the layout as :func:`read_layout` does."""
    major = int((cuda or "0").split(".")[0] or 0)
    if major >= MERGED_FROM_CUDA:
        tree = f"{site}/nvidia/cu{major}"
        return [f"{tree}/lib", f"{site}/nvidia/cudnn/lib", f"{site}/nvidia/nccl/lib"], tree, f"{tree}/bin/ptxas"
    return ([f"{site}/nvidia/{component}/lib" for component, _ in COMPONENTS], f"{site}/nvidia/cuda_nvcc",
            f"{site}/nvidia/cuda_nvcc/bin/ptxas")


def read_layout(root: Path, site_packages: str, dlopened: tuple[dict, ...] = ()) -> CudaLayout:
    """The CUDA layout of the pip-installed ``nvidia-*`` wheels in an env: one ``nvidia/<component>/lib``
    per library (CUDA 11/12 wheels), or the merged ``nvidia/cu13/lib`` (CUDA 13 wheels; cuDNN and
    NCCL keep their own directory), or both side by side. Each library is preloaded once, from the
    first directory that has it, in :data:`COMPONENTS` order."""
    nvidia = root / site_packages / "nvidia"
    merged = _merged_toolkits(nvidia) if nvidia.is_dir() else []
    lib_dirs: list[str] = []
    preload: list[str] = []
    known = {component for component, _ in COMPONENTS}
    for component, bases in COMPONENTS:
        for base in bases:
            for directory in (component, *merged):
                lib_dir = nvidia / directory / "lib"
                name = _soname_file(lib_dir, base) if lib_dir.is_dir() else None
                if name:
                    if f"{site_packages}/nvidia/{directory}/lib" not in lib_dirs:
                        lib_dirs.append(f"{site_packages}/nvidia/{directory}/lib")
                    preload.append(f"nvidia/{directory}/lib/{name}")
                    break
    for extra in sorted(nvidia.glob("*/lib")) if nvidia.is_dir() else []:
        # e.g. cuda_nvcc, nvshmem: on the path, not preloaded. Only plain names: these go into scripts.
        relative = f"{site_packages}/nvidia/{extra.parent.name}/lib"
        if (extra.parent.name not in known and relative not in lib_dirs
                and re.fullmatch(r"[A-Za-z0-9._-]+", extra.parent.name)):
            lib_dirs.append(relative)
    tools = [name for name in ("cuda_nvcc", *merged)]
    data = next((t for t in tools if (nvidia / t / "nvvm" / "libdevice").is_dir()), None)
    ptxas = next((t for t in tools if (nvidia / t / "bin" / "ptxas").is_file()), None)
    return CudaLayout(
        site_packages=site_packages,
        lib_dirs=tuple(lib_dirs),
        preload=tuple(preload),
        cuda_data_dir=f"{site_packages}/nvidia/{data}" if data else None,
        ptxas=f"{site_packages}/nvidia/{ptxas}/bin/ptxas" if ptxas else None,
        links=dlopen_links(root, tuple(lib_dirs), dlopened),
    )


def read_apart_layout(root: Path, site_packages: str, apart: str, dlopened: tuple[dict, ...] = ()) -> CudaLayout:
    """The layout of an env whose TensorFlow CUDA wheels sit apart from site-packages, in ``apart``
    (env-relative, ``lib/tfgpu/cuda12``), because another framework's CUDA stack owns site-packages'
    ``nvidia/`` tree. TensorFlow's libraries are preloaded from there by the load hook (paths relative
    to site-packages); no directory goes on ``LD_LIBRARY_PATH``, which would also hand them to the other
    framework's own loading (its RUNPATH comes after ``LD_LIBRARY_PATH``)."""
    found = read_layout(root, apart, dlopened)
    return CudaLayout(
        site_packages=site_packages,
        lib_dirs=(),
        preload=tuple(os.path.relpath(f"{apart}/{path}", site_packages) for path in found.preload),
        cuda_data_dir=found.cuda_data_dir,
        ptxas=found.ptxas,
        links=found.links,
    )


def _template(name: str) -> str:
    return untrusted.package_text("tfgpu.envs", "templates", name)


def _under(var: str, path: str, escape) -> str:
    """A layout path inside a double-quoted shell string: under ``$var`` (env-relative; ``.`` is the
    env) or absolute; ``escape`` is the shell's (``tfgpu.doors.quoting``), since directory names come from
    the installed packages."""
    if path.startswith("/"):
        return escape(path)
    return f"${var}" if path == "." else f"${var}/{escape(path)}"


# Standalone too (the bash export embeds it): its own escapes, as tfgpu.doors.quoting's, and its own copy
# of tfgpu.doors.controls' characters (a test holds the two equal).
_CONTROLS = (
    r"[\u0000-\u001f\u007f-\u009f\u00ad\u034f\u061c\u115f-\u1160\u17b4-\u17b5\u180b-\u180f\u200b-\u200f\u2028-\u202e"
    r"\u2060-\u206f\u3164\ud800-\udfff\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    r"\U000e0000-\U000e0fff]"
)


def _sh_double(text: str) -> str:
    return re.sub(r'([\\"$`])', r"\\\1", re.sub(_CONTROLS + "+", " ", text))


def _fish_double(text: str) -> str:
    return re.sub(r'([\\"$])', r"\\\1", re.sub(_CONTROLS + "+", " ", text))


def shell_layout(layout: CudaLayout, var: str) -> tuple[str, str]:
    """The ``@LAYOUT@`` blocks for sh and fish, paths under ``$var`` (VIRTUAL_ENV, CONDA_PREFIX)."""
    sh_path = lambda path: _under(var, path, _sh_double)  # noqa: E731
    fish_path = lambda path: _under(var, path, _fish_double)  # noqa: E731
    libs = ":".join(sh_path(d) for d in layout.lib_dirs)
    data = sh_path(layout.cuda_data_dir) if layout.cuda_data_dir else ""
    sh = f'_tfgpu_libs="{libs}"\n_tfgpu_cuda_data_dir="{data}"'
    fish_libs = " ".join(f'"{fish_path(d)}"' for d in layout.lib_dirs)
    fish_data = fish_path(layout.cuda_data_dir) if layout.cuda_data_dir else ""
    fish = f"set -g _tfgpu_libs {fish_libs}\nset -g _tfgpu_cuda_data_dir \"{fish_data}\""
    return sh, fish


def _fill(template: str, block: str) -> str:
    return re.sub(r"^# @LAYOUT@.*$", lambda _: block, template, count=1, flags=re.M)


def _append_hook(script: Path, line: str, root: Path) -> None:
    found = writes.read_own(script, root)  # a link out of the env is refused, never read through
    text = found[0].decode("utf-8", errors="replace") if found else ""
    if BEGIN in text:
        text = text[: text.index(BEGIN)].rstrip("\n") + "\n"
    writes.put_text(script, f"{text}\n{BEGIN}\n{line}\n{END}\n", found[1] if found else None, root)


def _site_relative(path: str, site_packages: str) -> str:
    """``cuda/lib64/x`` (env-relative) -> ``../../../cuda/lib64/x`` (site-relative); absolute stays."""
    return path if path.startswith("/") else os.path.relpath(path, site_packages)


def _preload(lib: Path, ref: str, site_packages: str) -> list[str]:
    """The CUDA libraries found in ``lib`` (named ``ref`` from the env root), in preload order."""
    found = []
    for _, bases in COMPONENTS:
        for base in bases:
            name = _soname_file(lib, base) if lib.is_dir() else None
            if name:
                found.append(_site_relative(f"{ref}/{name}", site_packages))
    return found


def write_load_hook(site_dir: Path, layout: CudaLayout, root: Path | None = None) -> list[Path]:
    """The ``.pth`` + module that preload the libraries when tensorflow is imported."""
    site = layout.site_packages
    ptxas_dir = _site_relative(str(Path(layout.ptxas).parent), site) if layout.ptxas else None
    source = _template("cuda_hook.py")
    source = source.replace("LIBRARIES = []  # type: list[str]  # @LIBRARIES@", f"LIBRARIES = {json.dumps(list(layout.preload))}")
    # Site-relative files of the env only: never a path that leads out of site-packages (the list is
    # read from the env's RECORDs, which tfgpu.doctor.ownership.inside already holds to the env).
    other = [p for p in layout.other_first if not posixpath.isabs(p) and not posixpath.normpath(p).startswith("..")]
    source = source.replace("OTHER_FIRST = []  # type: list[str]  # @OTHER_FIRST@", f"OTHER_FIRST = {json.dumps(other)}")
    data = _site_relative(layout.cuda_data_dir, site) if layout.cuda_data_dir else ""
    source = source.replace('CUDA_DATA_DIR = ""  # @CUDA_DATA_DIR@', f"CUDA_DATA_DIR = {json.dumps(data)}")
    source = source.replace('PTXAS_DIR = ""  # @PTXAS_DIR@', f"PTXAS_DIR = {json.dumps(ptxas_dir or '')}")
    module = site_dir / f"{HOOK_MODULE}.py"
    pth = site_dir / f"{HOOK_MODULE}.pth"
    writes.put_text(module, source, root=root)
    writes.put_text(pth, f"import {HOOK_MODULE}\n", root=root)
    return [module, pth]


def write_venv_activation(root: Path, layout: CudaLayout) -> list[Path]:
    """Everything a venv needs: shell hooks, the load hook, ptxas on PATH."""
    etc = root / "etc" / "tfgpu"
    writes.make_dirs(etc, root)
    sh, fish = shell_layout(layout, "VIRTUAL_ENV")
    written = [etc / "activate.sh", etc / "activate.fish", etc / "layout.json"]
    writes.put_text(written[0], _fill(_template("activate.sh"), sh), root=root)
    writes.put_text(written[1], _fill(_template("activate.fish"), fish), root=root)
    writes.put_text(written[2], json.dumps(layout.to_dict(), indent=2) + "\n", root=root)
    _append_hook(root / "bin" / "activate", '. "$VIRTUAL_ENV/etc/tfgpu/activate.sh"', root)
    if (root / "bin" / "activate.fish").exists():
        _append_hook(root / "bin" / "activate.fish", 'source "$VIRTUAL_ENV/etc/tfgpu/activate.fish"', root)
    written += [root / "bin" / "activate", root / "bin" / "activate.fish"]
    if layout.ptxas:
        link = root / "bin" / "ptxas"
        writes.put_link(link, Path("..") / layout.ptxas, root)  # an absolute ptxas replaces the "..": an absolute link
        written.append(link)
    written += _write_links(root, layout)
    written += write_load_hook(root / layout.site_packages, layout, root)
    return written


# --- conda envs: the CUDA libraries live in $CONDA_PREFIX/lib ------------------------------------

CONDA_SCRIPT = "tfgpu-cuda"
"""Name of the activate.d/deactivate.d scripts (``.sh``, ``.fish``, ``.bat``)."""


LIBDEVICE_LINK_DIR = "etc/tfgpu/cuda"


def read_conda_layout(root: Path, site_packages: str, dlopened: tuple[dict, ...] = ()) -> CudaLayout:
    """The CUDA layout of a conda env (cudatoolkit, or the CUDA 12 split packages, and cudnn).

    XLA looks for ``<dir>/nvvm/libdevice/libdevice.10.bc``; the CUDA 12 packages put it there
    under the env root, but ``cudatoolkit`` 11.x ships ``lib/libdevice.10.bc``, the trap TF's own
    2.11-2.13 instructions worked around by copying it. A link under ``etc/tfgpu/cuda`` gives
    XLA the layout it expects without touching the packages' files (:func:`write_conda_activation`
    makes it). Reads only.
    """
    lib = root / "lib"
    preload = _preload(lib, "lib", site_packages)
    data_dir = None
    if (root / "nvvm" / "libdevice").is_dir():
        data_dir = "."
    elif (lib / "libdevice.10.bc").is_file():
        data_dir = LIBDEVICE_LINK_DIR
    return CudaLayout(site_packages=site_packages, lib_dirs=("lib",), preload=tuple(preload),
                      cuda_data_dir=data_dir, ptxas="bin/ptxas" if (root / "bin" / "ptxas").is_file() else None,
                      links=dlopen_links(root, ("lib",), dlopened))


def _sections(template: str) -> tuple[str, str]:
    """A venv template split into its set-up part and its restore function (conda runs them
    from activate.d and deactivate.d; the venv's deactivate wrapper is not used)."""
    setup, rest = template.split("# @RESTORE@", 1)
    restore = rest.split("\n", 1)[1].split("# @VENV@", 1)[0]
    return setup, restore


def _without_header(text: str) -> str:
    lines = text.splitlines(keepends=True)
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    return "".join(lines)


def write_conda_activation(root: Path, layout: CudaLayout, windows: bool = False) -> list[Path]:
    """``etc/conda/activate.d`` and ``deactivate.d`` for sh/bash/zsh, fish (and cmd on Windows),
    plus the load hook; ptxas is already in the env's ``bin``, on PATH when activated."""
    activate, deactivate = root / "etc" / "conda" / "activate.d", root / "etc" / "conda" / "deactivate.d"
    writes.make_dirs(activate, root)
    writes.make_dirs(deactivate, root)
    written: list[Path] = []
    if layout.cuda_data_dir == LIBDEVICE_LINK_DIR:
        link = root / LIBDEVICE_LINK_DIR / "nvvm" / "libdevice" / "libdevice.10.bc"
        writes.put_link(link, Path("..", "..", "..", "..", "..", "lib", "libdevice.10.bc"), root)
        written.append(link)
    sh, fish = shell_layout(layout, "CONDA_PREFIX")
    header = ("# tfgpu-install: this conda env's CUDA libraries first on the loader path and XLA's libdevice;\n"
              "# conda sources this on `conda activate`, and the deactivate.d twin restores both exactly.\n")
    for suffix, template, block, call in (("sh", "activate.sh", sh, "_tfgpu_restore\nunset -f _tfgpu_restore\n"),
                                          ("fish", "activate.fish", fish,
                                           "_tfgpu_restore\nfunctions -e _tfgpu_restore\n")):
        setup, restore = _sections(_template(template))
        body = _fill(_without_header(setup), block)
        shellcheck = "# shellcheck shell=sh\n" if suffix == "sh" else ""
        written.append(activate / f"{CONDA_SCRIPT}.{suffix}")
        writes.put_text(written[-1], header + shellcheck + body, root=root)
        written.append(deactivate / f"{CONDA_SCRIPT}.{suffix}")
        if shellcheck:  # the _TFGPU_OLD_* variables are set by the activate.d twin
            shellcheck = "# shellcheck shell=sh disable=SC2153\n"
        writes.put_text(written[-1], header + shellcheck + restore + call, root=root)
    if windows:
        for folder, name in ((activate, "conda_activate.bat"), (deactivate, "conda_deactivate.bat")):
            written.append(folder / f"{CONDA_SCRIPT}.bat")
            writes.put_text(written[-1], _template(name).replace("\n", "\r\n"), root=root)
    etc = root / "etc" / "tfgpu"
    writes.make_dirs(etc, root)
    writes.put_text(etc / "layout.json", json.dumps(layout.to_dict(), indent=2) + "\n", root=root)
    written.append(etc / "layout.json")
    written += _write_links(root, layout)
    written += write_load_hook(root / layout.site_packages, layout, root)
    return written


# --- system mode: a CUDA toolkit installed by NVIDIA's runfile, outside site-packages ---------

def read_toolkit_layout(toolkit: Path, ref: str, site_packages: str) -> CudaLayout:
    """The layout of a runfile-installed CUDA toolkit with cuDNN unpacked into it (system mode).

    ``toolkit`` is where its files are now (they are looked at); ``ref`` is how the env names it:
    relative to the env root (``cuda``, a user prefix that moves with the env) or absolute
    (``/usr/local/cuda-11.8``). ``lib_dirs``, ``cuda_data_dir`` and ``ptxas`` are env-relative or
    absolute; ``preload`` entries are site-packages-relative or absolute.
    """
    preload = _preload(toolkit / "lib64", f"{ref}/lib64", site_packages)
    return CudaLayout(
        site_packages=site_packages,
        lib_dirs=(f"{ref}/lib64",),
        preload=tuple(preload),
        cuda_data_dir=ref if (toolkit / "nvvm" / "libdevice").is_dir() else None,
        ptxas=f"{ref}/bin/ptxas" if (toolkit / "bin" / "ptxas").is_file() else None,
    )
