"""Where each library a framework's process used came from, said in words a user can act on.

``frameworks_env.py`` reports, per step, the copy of each CUDA library the process's loader gives
by SONAME (``uses``: path, version, wheel). This side names the stack each path belongs to
(TensorFlow's CUDA set kept apart in ``lib/tfgpu/cuda<N>``, the env's site-packages, or outside the
env) and, in an env with two CUDA stacks, which of TensorFlow's own libraries it did NOT compute
with: the other stack's copy was loaded first (the load hook does so on purpose, docs/modes.md) and
answered TensorFlow's lookups.
"""

from __future__ import annotations

from pathlib import Path

KEY_LIBRARIES = ("libcudnn", "libnccl", "libcurand", "libcusparse", "libcublas", "libcudart", "libcufft")
"""The families a report names one by one (the rest stay in ``--json``)."""


def stack_of(prefix: Path, path: str | None) -> str:
    """``TensorFlow's CUDA 12 set``, ``site-packages``, ``the env`` or ``outside the env``."""
    if not path:
        return "not loaded by name"
    try:
        relative = Path(path).resolve().relative_to(prefix.resolve())
    except ValueError:
        return "outside the env"
    parts = relative.parts
    if len(parts) > 2 and parts[:2] == ("lib", "tfgpu") and parts[2].startswith("cuda"):
        return f"TensorFlow's CUDA {parts[2][4:]} set"
    if "site-packages" in parts:
        return "site-packages"
    return "the env"


def tensorflow_own(prefix: Path) -> dict[str, str]:
    """soname -> TensorFlow's own file of it in a CUDA set kept apart (empty: one stack)."""
    own: dict[str, str] = {}
    for library in sorted(prefix.glob("lib/tfgpu/cuda[0-9]*/nvidia/*/lib/*.so*")):
        own.setdefault(library.name, str(library))
    return own


def annotate(prefix: Path, report: dict) -> dict:
    """Each step's ``uses`` gets its ``stack``; a TensorFlow step in a two-stack env gets
    ``other_stack``: the libraries TensorFlow has its own copy of but computed with the other's."""
    own = tensorflow_own(prefix)
    for entry in report.get("orders", []):
        for step in entry.get("steps", []):
            uses = step.get("uses")
            if not isinstance(uses, dict):
                continue
            for _name, use in uses.items():
                if isinstance(use, dict):
                    use["stack"] = stack_of(prefix, use.get("path"))
            if step.get("framework") == "tensorflow" and own:
                step["other_stack"] = sorted(
                    name
                    for name, use in uses.items()
                    if isinstance(use, dict) and name in own and not use["stack"].startswith("TensorFlow's")
                )
    report["two_stacks"] = bool(own)
    return report


def key_uses(uses: dict) -> list[tuple[str, dict]]:
    """The named families' entries, in a stable order."""
    return sorted(
        ((name, use) for name, use in uses.items() if isinstance(use, dict) and name.startswith(KEY_LIBRARIES)),
        key=lambda item: item[0],
    )
