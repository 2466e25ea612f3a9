"""``--jupyter``: a kernel for the env whose spec carries the same CUDA environment.

The kernel's Python is the env's, so the load hook already applies; the spec also sets
``LD_LIBRARY_PATH`` and ``XLA_FLAGS`` for anything the kernel starts. Its directory is
``<jupyter data dir>/kernels/tfgpu-<name>-<id8>``: the env's id in the name keeps two envs with
the same base name apart, and the same id in ``kernel.json`` is checked before a kernel is
deleted, so ``remove`` deletes only the kernel this very env registered.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from pathlib import Path

from tfgpu.doors import trees, untrusted
from tfgpu.errors import ImpossibleError

KERNEL = re.compile(r"tfgpu-[A-Za-z0-9._-]{1,64}-[0-9a-f]{8}")


def jupyter_data_dir() -> Path:
    """Jupyter's per-user data directory (the rule jupyter_core follows)."""
    if os.environ.get("JUPYTER_DATA_DIR"):
        return Path(os.environ["JUPYTER_DATA_DIR"])
    home = Path.home()
    if sys.platform == "darwin":
        return home / "Library" / "Jupyter"
    if os.name == "nt":
        return Path(os.environ.get("APPDATA", home)) / "jupyter"
    return Path(os.environ.get("XDG_DATA_HOME") or home / ".local" / "share") / "jupyter"


def kernels_dir() -> Path:
    return jupyter_data_dir() / "kernels"


def kernel_name(label: str, env_id: str) -> str:
    return f"tfgpu-{label}-{env_id[:8]}"


def check_writable() -> None:
    """Before anything is built: the kernels directory can be created (``jupyter-dir-unusable``)."""
    path = kernels_dir()
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if (path.exists() and not path.is_dir()) or not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        raise ImpossibleError(
            "jupyter-dir-unusable",
            f"--jupyter: the kernels directory {path} cannot be written "
            f"({probe} is {'not a directory' if not probe.is_dir() else 'not writable'}); "
            "nothing was built.",
            ["Point JUPYTER_DATA_DIR at a directory you can write, or drop --jupyter."],
        )


def register(staging: Path, final: Path, label: str, env_id: str, tensorflow: str) -> str:
    """Write ``kernels/tfgpu-<label>-<id8>/kernel.json`` for the env being built in ``staging``
    (paths name its final place); returns the kernel's name."""
    layout = untrusted.load_json(staging / "etc" / "tfgpu" / "layout.json", untrusted.ENV_FILE)
    env = {}
    if layout["lib_dirs"]:
        env["LD_LIBRARY_PATH"] = ":".join(str(final / d) for d in layout["lib_dirs"])
    if layout["cuda_data_dir"]:
        env["XLA_FLAGS"] = f"--xla_gpu_cuda_data_dir={final / layout['cuda_data_dir']}"
    name = kernel_name(label, env_id)
    kernel_dir = kernels_dir() / name
    spec = {
        "argv": [str(final / "bin" / "python"), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": f"TensorFlow {tensorflow} GPU ({label})",
        "language": "python",
        "env": env,
        "metadata": {"tfgpu-install": {"prefix": str(final), "tensorflow": tensorflow, "id": env_id}},
    }
    try:
        if kernel_dir.is_symlink():
            raise OSError(f"{kernel_dir} is a symbolic link")
        kernel_dir.mkdir(parents=True, exist_ok=True)
        (kernel_dir / "kernel.json").write_text(json.dumps(spec, indent=2) + "\n", encoding="utf-8")
    except OSError as error:
        raise ImpossibleError(
            "jupyter-dir-unusable",
            f"--jupyter: cannot write the kernel {kernel_dir}: {error}; nothing was built.",
            ["Point JUPYTER_DATA_DIR at a directory you can write, or drop --jupyter."],
        ) from None
    return name


def unregister(name: str, env_id: str) -> bool:
    """Delete the kernel ``name`` if it is this env's (name pattern, real directory, same id in its
    kernel.json); True when it was deleted. Anything else is left alone."""
    if not KERNEL.fullmatch(name) or not name.endswith(env_id[:8]):
        return False
    root = kernels_dir()
    kernel_dir = root / name
    if kernel_dir.is_symlink() or not kernel_dir.is_dir() or root.is_symlink():
        return False
    try:
        spec = untrusted.load_json(kernel_dir / "kernel.json", untrusted.MARKER)
        owner = spec["metadata"]["tfgpu-install"]["id"]
    except (untrusted.Unreadable, KeyError, TypeError):
        return False
    if owner != env_id:
        return False
    with contextlib.suppress(OSError):
        trees.delete(kernel_dir)  # no recursion on depth, links deleted, never followed
    return True
