"""``--jupyter``: a kernel for the env whose spec carries the same CUDA environment.

The kernel's Python is the env's, so the load hook already applies; the spec also sets
``LD_LIBRARY_PATH`` and ``XLA_FLAGS`` for anything the kernel starts.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


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


def register_kernel(prefix: Path, name: str, resolution) -> str:
    """Write ``kernels/tfgpu-<name>/kernel.json``; record it in the env's marker; a note."""
    layout = json.loads((prefix / "etc" / "tfgpu" / "layout.json").read_text(encoding="utf-8"))
    env = {}
    if layout["lib_dirs"]:
        env["LD_LIBRARY_PATH"] = ":".join(str(prefix / d) for d in layout["lib_dirs"])
    if layout["cuda_data_dir"]:
        env["XLA_FLAGS"] = f"--xla_gpu_cuda_data_dir={prefix / layout['cuda_data_dir']}"
    kernel_dir = jupyter_data_dir() / "kernels" / f"tfgpu-{name}"
    kernel_dir.mkdir(parents=True, exist_ok=True)
    spec = {
        "argv": [str(prefix / "bin" / "python"), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": f"TensorFlow {resolution.tensorflow} GPU ({name})",
        "language": "python",
        "env": env,
        "metadata": {"tfgpu-install": {"prefix": str(prefix), "tensorflow": resolution.tensorflow}},
    }
    (kernel_dir / "kernel.json").write_text(json.dumps(spec, indent=2) + "\n", encoding="utf-8")
    marker_path = prefix / "tfgpu-env.json"
    marker = json.loads(marker_path.read_text(encoding="utf-8"))
    marker["jupyter_kernel"] = str(kernel_dir)
    marker_path.write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
    return f"Jupyter kernel 'tfgpu-{name}' registered at {kernel_dir}"
