"""``tfgpu-env.json``: what an env is, and the proof that tfgpu-install made it *there*.

A marker proves ownership of a directory only when all of these hold: it is a JSON object no
larger than :data:`MAX_BYTES`, written by this tool (``"tool": "tfgpu-install"``) in a format it
knows (:data:`FORMAT`), with a random 128-bit ``id``, and its ``prefix`` is the real path of the
directory it sits in. A marker copied along with a project directory, hand-written (``{}``), or
from an env that was moved elsewhere proves nothing, so ``remove`` and ``--force`` leave that
directory alone. What the tool made outside the prefix (Jupyter kernels) is recorded by *name*
(``owned.kernels``) and deleted only under the tool's own roots after a second check
(``tfgpu.envs.jupyter``): a path read from a marker is never deleted.
"""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime
from pathlib import Path

from tfgpu import __version__
from tfgpu.doors import secrets, trees, untrusted

NAME = "tfgpu-env.json"
FORMAT = 2
"""Marker format: 2 added ``id``, ``prefix`` (the real path) and ``owned``."""
MAX_BYTES = untrusted.MARKER.limit
_ID = re.compile(r"[0-9a-f]{32}")


_TEXT = (str, type(None))
_FIELDS = {
    "tool": _TEXT,
    "id": _TEXT,
    "prefix": _TEXT,
    "tool_version": _TEXT,
    "created": _TEXT,
    "name": _TEXT,
    "tensorflow": _TEXT,
    "python": _TEXT,
    "cuda": _TEXT,
    "cudnn": _TEXT,
    "min_driver": _TEXT,
    "mode": _TEXT,
    "engine": _TEXT,
    "from_lock": _TEXT,
    "virtual_cuda": _TEXT,
    "tf_source": _TEXT,
    "lock": _TEXT,
    "marker_format": (int, type(None)),
    "owned": (dict, type(None)),
    "cuda_apart": (dict, type(None)),
    "requirements": (list, type(None)),
    "locked": (list, type(None)),
    "find_links": (list, type(None)),
    "channels": (list, type(None)),
    "offline": (bool, type(None)),
    "cpu_only": (bool, type(None)),
}
"""The type of each field the tool writes; a field of another type (a hand-edited or damaged
marker: ``"tensorflow": ["2.21.0"]``) reads as missing, so no reader meets a type it does not expect."""


def read(prefix: Path) -> dict | None:
    """The marker of ``prefix`` as a JSON object, or None (missing, unreadable, huge, not an object);
    fields of the wrong type are left out (see :data:`_FIELDS`)."""
    try:
        value = untrusted.load_json(Path(prefix) / NAME, untrusted.MARKER)
    except untrusted.Unreadable:
        return None
    if not isinstance(value, dict):
        return None
    return {
        key: field
        for key, field in value.items()
        if key not in _FIELDS
        or (isinstance(field, _FIELDS[key]) and not (isinstance(field, bool) and bool not in _FIELDS[key]))
    }


def proof(directory: Path, made_for: Path | str | None = None) -> dict | None:
    """The marker in ``directory`` if it proves tfgpu-install made the env at ``made_for``
    (default: ``directory`` itself; a directory moved aside by the tool names its old place), else None."""
    found = read(directory)
    target = os.path.realpath(made_for if made_for is not None else directory)
    if (
        found is None
        or found.get("tool") != "tfgpu-install"
        or found.get("marker_format") != FORMAT
        or not isinstance(found.get("id"), str)
        or not _ID.fullmatch(found["id"])
        or found.get("prefix") != target
    ):
        return None
    return found


def why_not(directory: Path) -> str:
    """Why ``directory``'s marker proves nothing, in a few words (for error messages)."""
    found = read(directory)
    if found is None:
        return f"it has no readable {NAME}" if not (Path(directory) / NAME).exists() else f"its {NAME} is not valid"
    if found.get("tool") != "tfgpu-install":
        return f"its {NAME} was not written by tfgpu-install"
    if found.get("marker_format") != FORMAT:
        return (
            f"its {NAME} is from an older tfgpu-install that did not record ownership (format "
            f"{found.get('marker_format', 1)})"
        )
    if found.get("prefix") != os.path.realpath(directory):
        return f"its {NAME} was made for {found.get('prefix')!r}, not for this directory (copied or moved?)"
    return f"its {NAME} has no valid id"


def write(root: Path, *, env_id: str, made_for: str, fields: dict, kernels: tuple[str, ...] = ()) -> Path:
    """Write the marker of an env being built in ``root`` (staging) for the real path ``made_for``;
    atomic (a crash leaves the old marker or the new one, never half of one)."""
    document = {
        "tool": "tfgpu-install",
        "marker_format": FORMAT,
        "id": env_id,
        "prefix": made_for,
        "tool_version": __version__,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "owned": {"kernels": list(kernels)},
        **{
            key: value for key, value in fields.items() if key not in ("tool", "marker_format", "id", "prefix", "owned")
        },
    }
    path = Path(root) / NAME
    partial = path.with_name(f".{NAME}.{os.getpid()}.tmp")
    # No credential in a record other tools and people read (a channel's /t/<token>/: tfgpu.doors.secrets).
    partial.write_text(secrets.stripped(json.dumps(document, indent=2)) + "\n", encoding="utf-8")
    trees.replace(partial, path)
    return path


def kernels(found: dict) -> list[str]:
    """The Jupyter kernel names a proven marker says the tool registered for the env."""
    owned = found.get("owned")
    names = owned.get("kernels") if isinstance(owned, dict) else None
    return [name for name in names if isinstance(name, str)] if isinstance(names, list) else []
