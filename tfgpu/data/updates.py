"""The user's release overlay: rows ``tfgpu-install update-data`` fetched from PyPI.

It lives in the user data dir (``tfgpu.doors.paths.data_dir()``), in the same format as the shipped
``tensorflow.toml`` and checked against the same schema; ``resolver.tables.releases()`` adds its
rows for versions the shipped data lacks, so newer shipped data supersedes it. Reading it is
reading a table: nothing here fetches (``tfgpu.datasource.update`` does, on request).
"""

from __future__ import annotations

import os

from tfgpu.data import derived, parse
from tfgpu.doors import untrusted
from tfgpu.doors.paths import data_dir_text
from tfgpu.errors import OperationError, UsageError

UPDATES_FILE = "tensorflow-updates.toml"
COMPANION_UPDATES_FILE = "companions-updates.toml"
"""The torch/JAX rows ``update-data`` fetched, in ``companions.toml``'s format."""


@derived
def updates() -> dict:
    """The overlay, parsed and checked against tensorflow.toml's schema (it was fetched from the
    network, so it is held to the same rules as a shipped table); {} when there is none."""

    return load(os.path.join(data_dir_text(), UPDATES_FILE))


@derived
def companion_updates() -> dict:
    """The torch/JAX overlay, parsed and checked against companions.toml's schema; {} when none."""

    return load_companions(os.path.join(data_dir_text(), COMPANION_UPDATES_FILE))


def load_companions(path) -> dict:
    return load(path, "companions.toml")


def load(path, table: str = "tensorflow.toml") -> dict:
    """The overlay at ``path``, parsed and checked ({} when there is none): what :func:`updates`
    reads, and what ``update-data`` checks a new overlay with before it renames it into place."""
    if not os.path.lexists(path):
        return {}
    raw = untrusted.read_bytes(path, untrusted.OVERLAY)
    try:
        return parse(table, raw, str(path))
    except UsageError as error:
        raise OperationError(
            "data-overlay-corrupt",
            f"The release data fetched by update-data cannot be used: {error.message}",
            [
                "Run `tfgpu-install update-data` again, or delete the file "
                "to use only the data shipped with tfgpu-install."
            ],
        ) from None


def update_rows() -> list[dict]:
    """The overlay's ``[[release]]`` rows."""
    return list(updates().get("release", []))
