"""``tfgpu-env.json``: what an env is, and the proof that tfgpu-install made it *there*.

A marker proves ownership of a directory only when all of these hold: it is a JSON object no
larger than :data:`MAX_BYTES`, written by this tool (``"tool": "tfgpu-install"``) in a format it
knows (:data:`FORMAT`), with a random 128-bit ``id``, and its ``prefix`` is the real path of the
directory it sits in. A marker copied along with a project directory, hand-written (``{}``), or
from an env that was moved elsewhere proves nothing, so ``remove`` and ``--force`` leave that
directory alone. What the tool made outside the prefix (Jupyter kernels) is recorded by *name*
(``owned.kernels``) and deleted only under the tool's own roots after a second check
(``tfgpu.envs.jupyter``): a path read from a marker is never deleted.

The file is read in one place, :func:`read`, into a :class:`Marker`: every reader (``proof``,
``list``, ``doctor``, ``remove``, system mode's "already in place") reads its attributes, never
the file's keys.
"""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime
from pathlib import Path

from tfgpu import __version__
from tfgpu.doors import secrets, trees, untrusted
from tfgpu.records import factory, record

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: type checkers treat it alike
if TYPE_CHECKING:
    from typing import Any

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
    "toolkit": _TEXT,
    "marker_format": (int, type(None)),
    "owned": (dict, type(None)),
    "cuda_apart": (dict, type(None)),
    "installed": (dict, type(None)),
    "toolkit_files": (dict, type(None)),
    "requirements": (list, type(None)),
    "locked": (list, type(None)),
    "find_links": (list, type(None)),
    "channels": (list, type(None)),
    "offline": (bool, type(None)),
    "cpu_only": (bool, type(None)),
}
"""The type of each field the tool writes; a field of another type (a hand-edited or damaged
marker: ``"tensorflow": ["2.21.0"]``), or text longer than the tool writes there, reads as
missing, so no reader meets a type it does not expect. Each is an attribute of :class:`Marker`; a
field not named here is kept in its ``extra``."""


@record
class Marker:
    """An env's marker as :func:`read` finds it: each field of :data:`_FIELDS`, None where the file
    has none (or one of another type); a JSON list as a tuple. Made only by :func:`read`; everything
    past it reads attributes, and :meth:`to_dict` gives the file's object back."""

    tool: str | None = None
    id: str | None = None
    prefix: str | None = None
    """The real path the env was made for."""
    tool_version: str | None = None
    created: str | None = None
    name: str | None = None
    tensorflow: str | None = None
    python: str | None = None
    cuda: str | None = None
    cudnn: str | None = None
    min_driver: str | None = None
    mode: str | None = None
    engine: str | None = None
    from_lock: str | None = None
    virtual_cuda: str | None = None
    tf_source: str | None = None
    lock: str | None = None
    toolkit: str | None = None
    """System mode's: the CUDA toolkit's directory."""
    marker_format: int | None = None
    owned: dict | None = None
    """What the tool made outside the prefix (``kernels``: see :attr:`kernels`)."""
    cuda_apart: dict | None = None
    """TensorFlow's CUDA wheels kept apart from another stack (``dir``: see :attr:`apart_dir`)."""
    installed: dict | None = None
    """Distribution name -> version, as the build installed them."""
    toolkit_files: dict | None = None
    """System mode's: which files the toolkit was built from (``tfgpu.installers.system_toolkit``)."""
    requirements: tuple | None = None
    locked: tuple | None = None
    find_links: tuple | None = None
    channels: tuple | None = None
    offline: bool | None = None
    cpu_only: bool | None = None
    extra: dict = factory(dict)
    """The file's fields this version does not read (conda mode's ``conda``, system mode's
    ``downloads``, a newer version's), as the file holds them."""
    present: tuple[str, ...] = ()
    """The fields the file holds (of the right type), in its order: what :meth:`to_dict` writes
    back, and which of the None fields the file holds as ``null``."""
    mistyped: tuple[str, ...] = ()
    """The fields the file holds with another type (or longer) than the tool writes: read as
    missing, and named as they are by :func:`why_not`."""

    def to_dict(self) -> dict:
        """The marker as its file holds it (less fields of the wrong type), in the file's order."""
        document = {}
        for key in self.present:
            value = getattr(self, key) if key in _FIELDS else self.extra[key]
            document[key] = list(value) if isinstance(value, tuple) else value
        return document

    @property
    def kernels(self) -> list[str]:
        """The Jupyter kernel names the marker says the tool registered for the env."""
        names = self.owned.get("kernels") if self.owned is not None else None
        return [name for name in names if isinstance(name, str)] if isinstance(names, list) else []

    @property
    def apart_dir(self) -> str | None:
        """Where the env keeps TensorFlow's CUDA wheels apart, relative to the env (``lib/tfgpu/cuda12``),
        as the marker says it (a hostile file may say anything: the reader checks the form)."""
        where = self.cuda_apart.get("dir") if self.cuda_apart is not None else None
        return where if isinstance(where, str) else None


_PATHS = frozenset({"prefix", "toolkit", "from_lock", "lock"})
"""The text fields that hold a path (``from_lock``: the lock's path and its sha256)."""
_TEXT_LIMIT, _PATH_LIMIT = 100, 4_200
"""The longest text field the tool writes: a version, a word, an id, a time (a path: PATH_MAX and
a sha256). A longer one (a hand-edited marker's 60,000-character ``tensorflow``) reads as missing,
so ``list`` does not print a table 240 KB wide."""


def _typed(key: str, field: object) -> bool:
    """Whether ``field`` has the type :data:`_FIELDS` gives ``key`` (a bool is no int here), and text
    no longer than the tool writes there."""
    if isinstance(field, str):
        return str in _FIELDS[key] and len(field) <= (_PATH_LIMIT if key in _PATHS else _TEXT_LIMIT)
    return isinstance(field, _FIELDS[key]) and not (isinstance(field, bool) and bool not in _FIELDS[key])


def read(prefix: Path) -> Marker | None:
    """The marker of ``prefix``, or None (missing, unreadable, huge, not a JSON object); fields of
    the wrong type read as missing (see :data:`_FIELDS`)."""
    try:
        value = untrusted.load_json(Path(prefix) / NAME, untrusted.MARKER)
    except untrusted.Unreadable:
        return None
    if not isinstance(value, dict):
        return None
    kept = {key: field for key, field in value.items() if key not in _FIELDS or _typed(key, field)}
    # Each of _FIELDS has the type its attribute says: checked above, which a type checker cannot see.
    typed: dict[str, Any] = {
        key: tuple(field) if isinstance(field, list) else field for key, field in kept.items() if key in _FIELDS
    }
    return Marker(
        **typed,
        extra={key: field for key, field in kept.items() if key not in _FIELDS},
        present=tuple(kept),
        mistyped=tuple(key for key in value if key not in kept),
    )


def proof(directory: Path, made_for: Path | str | None = None) -> Marker | None:
    """The marker in ``directory`` if it proves tfgpu-install made the env at ``made_for``
    (default: ``directory`` itself; a directory moved aside by the tool names its old place), else None."""
    found = read(directory)
    target = os.path.realpath(made_for if made_for is not None else directory)
    if (
        found is None
        or found.tool != "tfgpu-install"
        or found.marker_format != FORMAT
        or not isinstance(found.id, str)
        or not _ID.fullmatch(found.id)
        or found.prefix != target
    ):
        return None
    return found


def why_not(directory: Path) -> str:
    """Why ``directory``'s marker proves nothing, in a few words (for error messages)."""
    found = read(directory)
    if found is None:
        return f"it has no readable {NAME}" if not (Path(directory) / NAME).exists() else f"its {NAME} is not valid"
    if found.tool != "tfgpu-install":
        return f"its {NAME} was not written by tfgpu-install"
    if found.marker_format != FORMAT:
        if "marker_format" in found.mistyped:  # not a number: no version of the tool wrote it
            return f"its {NAME} holds a marker_format that is not a number (edited by hand?)"
        # A marker without the field is format 1's; one that holds null says so.
        said = found.marker_format if "marker_format" in found.present else 1
        if isinstance(said, int) and said > FORMAT:
            return f"its {NAME} is from a newer tfgpu-install (format {said}; this one reads format {FORMAT})"
        if not isinstance(said, int) or said < 1:  # formats start at 1 (a marker without the field)
            value = json.dumps(said)
            value = (
                value if len(value) <= 24 else f"{value[:20]}... ({len(value)} characters)"
            )  # the file holds up to 64 KiB
            return f"its {NAME} holds marker_format {value}, which no tfgpu-install wrote (edited by hand?)"
        return f"its {NAME} is from an older tfgpu-install that did not record ownership (format {said})"
    if found.prefix is None:  # none there, or one of the wrong type: it names no place, not "None"
        return f"its {NAME} records no path it was made for"
    if found.prefix != os.path.realpath(directory):
        return f"its {NAME} was made for {found.prefix!r}, not for this directory (copied or moved?)"
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
