"""The machine an export is for: what the options and the project file say, and nothing of the
machine the export is made on.

``tfgpu-install script`` never probes the host it runs on (a laptop, a login node): its Python,
driver, GPUs and CUDA toolkits are not the target's. What the options and the project file leave
open is assumed, and every assumption is written into the export's header ("Assumed about the
target"), where a reviewer sees it. The one assumption with a choice to make is the Python of pip
and system modes, whose venv the target's own python3.X builds: the release's Python that the most
common server distributions install from their archives (``tfgpu/data/server_pythons.toml``).
"""

from __future__ import annotations

from packaging.version import Version

from tfgpu import records
from tfgpu.resolver import request_for, resolve, tables

ASSUMED = "Assumed: "
"""How a reason that is an assumption about the target starts (``tfgpu.export.bash.header``)."""


def release_pythons(tensorflow: str, platform: str) -> tuple[str, ...]:
    """The Pythons TensorFlow ``tensorflow`` has ``platform`` wheels for, from the data."""
    wanted = Version(tensorflow)
    for release in tables.releases():
        if release.version == wanted and platform in release.wheels:
            return tuple(release.wheels[platform].python)
    return ()


def default_python(pythons) -> tuple[str, list[dict], list[dict]] | None:
    """The Python of ``pythons`` that the most distributions of the table install (ties: the
    newer), with the distributions that do and those that do not; None when none installs any."""
    rows = tables.load_toml("server_pythons.toml")["distribution"]
    counted = [(sum(p in row["pythons"] for row in rows), Version(p), p) for p in pythons]
    counted = [c for c in counted if c[0]]
    if not counted:
        return None
    choice = max(counted)[2]
    return choice, [r for r in rows if choice in r["pythons"]], [r for r in rows if choice not in r["pythons"]]


def _python_assumption(resolution, pythons, chosen) -> str:
    python, have, lack = chosen
    ships = "; ".join(f"{row['name']}: {row['install'].format(python=python)}" for row in have)
    others = ", ".join(
        f"{row['name']} ({', '.join(p for p in row['pythons'] if p in pythons) or 'none'})" for row in lack
    )
    text = (
        f"{ASSUMED}Python {python} (neither --python nor the project file says): of the Pythons TF "
        f"{resolution.tensorflow} has wheels for ({', '.join(pythons)}), the one most common server "
        f"distributions install ({ships})."
    )
    if others:
        text += f" Not packaged there: {others}; export with --python X.Y for those hosts."
    return text + " The script needs python" + python + " with its venv module on the target (or TFGPU_PYTHON)."


def export_resolution(selectors):
    """The resolution an export is made for (``selectors``: options and project file merged), with
    every assumption about the target among its reasons (starting with :data:`ASSUMED`)."""
    resolution = resolve(request_for(selectors), None)
    assumed = []
    if selectors.python is None and resolution.mode in ("pip", "system"):
        pythons = release_pythons(resolution.tensorflow, resolution.platform)
        chosen = default_python(pythons)
        if chosen is not None:
            if chosen[0] != resolution.python:
                resolution = resolve(request_for(records.replace(selectors, python=chosen[0])), None)
            assumed.append(_python_assumption(resolution, pythons, chosen))
    elif selectors.python is None:
        assumed.append(
            f"{ASSUMED}Python {resolution.python} (neither --python nor the project file says): the newest TF "
            f"{resolution.tensorflow} has wheels for; conda installs it into the env, the target needs none."
        )
    if not (selectors.os and selectors.arch):
        assumed.append(f"{ASSUMED}{resolution.os} {resolution.arch} (--os/--arch not given).")
    if not selectors.driver:
        assumed.append(
            f"{ASSUMED}an NVIDIA driver >= {resolution.min_driver} on the target (--driver not given); "
            "the export checks it there and stops if it is older."
        )
    if not selectors.gpu_cc:
        assumed.append(
            f"{ASSUMED}a GPU TF {resolution.tensorflow} has kernels for (--gpu-cc not given): its architecture "
            "is not checked here; the verification at the end runs a matmul on it."
        )
    python_assumed = any(a.startswith(f"{ASSUMED}Python") for a in assumed)
    # the resolver's own sentence about the Python ("as requested") is replaced by the assumption
    reasons = [r for r in resolution.reasons if not (python_assumed and r.startswith(f"Python {resolution.python}:"))]
    return records.replace(resolution, reasons=(*reasons, *assumed))
