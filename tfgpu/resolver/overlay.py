"""How current the release data is: the shipped table's date, the update overlay's, the newest
release known (for ``matrix`` and for ``unknown-tf-version`` messages). Pure: it reads tables."""

from __future__ import annotations

from tfgpu.data.updates import updates
from tfgpu.records import as_dict, factory, record
from tfgpu.resolver import tables


@record
class DataStatus:
    """How current the release data is (``matrix --json``'s ``data``: its keys are a contract)."""

    shipped_generated: str = ""
    updated: str = ""
    updated_from: str = ""
    update_releases: list[str] = factory(list)
    newest: str = ""
    newest_final: str = ""

    def to_dict(self) -> dict:
        return as_dict(self)


def data_status() -> DataStatus:
    """How current the release data is: the shipped table's date, and the overlay's."""
    shipped = tables.load_toml("tensorflow.toml")
    overlay = updates()
    everything = tables.releases()
    return DataStatus(
        shipped_generated=shipped.get("generated", ""),
        updated=overlay.get("fetched", ""),
        updated_from=overlay.get("index", ""),
        update_releases=[str(r.version) for r in everything if r.origin == "update"],
        newest=str(everything[0].version) if everything else "",
        newest_final=next((str(r.version) for r in everything if not r.version.is_prerelease), ""),
    )


def describe_age(status: DataStatus) -> str:
    """One sentence: how old the data is and where newer releases come from."""
    text = f"tfgpu-install's release data was generated on {status.shipped_generated or 'an unknown date'}"
    if status.updated:
        text += f" and updated from PyPI on {status.updated}"
    return text + f" (newest release known: {status.newest or '-'})"
