"""The user's release overlay: rows ``tfgpu-install update-data`` fetched from PyPI.

It lives in the user data dir (``tfgpu.paths.data_dir()``), in the same format as the shipped
``tensorflow.toml``; ``tables.releases()`` adds its rows for versions the shipped data lacks, so
newer shipped data supersedes it. Reading it is reading a table: nothing here fetches.
"""

from __future__ import annotations

from tfgpu.data import derived

UPDATES_FILE = "tensorflow-updates.toml"


@derived
def updates() -> dict:
    """The overlay, parsed and checked against tensorflow.toml's schema (it was fetched from the
    network, so it is held to the same rules as a shipped table); {} when there is none."""
    from tfgpu.data import MAX_TABLE_BYTES, parse
    from tfgpu.errors import OperationError, UsageError
    from tfgpu.paths import data_dir

    path = data_dir() / UPDATES_FILE
    try:
        if path.stat().st_size > MAX_TABLE_BYTES:
            raise OperationError("data-overlay-corrupt", f"{path} is larger than {MAX_TABLE_BYTES >> 20} MiB.",
                                 ["Delete it, then run `tfgpu-install update-data` again."])
        raw = path.read_bytes()
    except OSError:
        return {}
    try:
        return parse("tensorflow.toml", raw, str(path))
    except UsageError as error:
        raise OperationError("data-overlay-corrupt", f"The release data fetched by update-data cannot be used: "
                             f"{error.message}", ["Run `tfgpu-install update-data` again, or delete the file "
                                                  "to use only the data shipped with tfgpu-install."]) from None


def update_rows() -> list[dict]:
    """The overlay's ``[[release]]`` rows."""
    return list(updates().get("release", []))


def merged(shipped: list) -> list:
    """``shipped`` releases plus the overlay's for versions ``shipped`` lacks; a pre-release that a final
    release of its series (at or above its base version) has superseded is dropped."""
    from packaging.version import Version

    from tfgpu.resolver.tables import release_from_row

    known = {r.version for r in shipped}
    everything = shipped + [r for r in (release_from_row(row, "update") for row in update_rows())
                            if r.version not in known]
    finals = [r.version for r in everything if not r.version.is_prerelease]

    def superseded(v) -> bool:
        return any(f.release[:2] == v.release[:2] and f >= Version(v.base_version) for f in finals)

    return [r for r in everything if not r.version.is_prerelease or not superseded(r.version)]


def data_status() -> dict:
    """How current the release data is: the shipped table's date, and the overlay's."""
    from tfgpu.resolver import tables

    shipped = tables.load_toml("tensorflow.toml")
    overlay = updates()
    everything = tables.releases()
    return {
        "shipped_generated": shipped.get("generated", ""),
        "updated": overlay.get("fetched", ""),
        "updated_from": overlay.get("index", ""),
        "update_releases": [str(r.version) for r in everything if r.origin == "update"],
        "newest": str(everything[0].version) if everything else "",
        "newest_final": next((str(r.version) for r in everything if not r.version.is_prerelease), ""),
    }


def describe_age(status: dict) -> str:
    """One sentence: how old the data is and where newer releases come from."""
    text = f"tfgpu-install's release data was generated on {status['shipped_generated'] or 'an unknown date'}"
    if status["updated"]:
        text += f" and updated from PyPI on {status['updated']}"
    return text + f" (newest release known: {status['newest'] or '-'})"
