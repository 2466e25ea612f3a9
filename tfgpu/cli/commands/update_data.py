"""``tfgpu-install update-data``: newer TensorFlow releases from PyPI into the user's data overlay."""

from __future__ import annotations

from tfgpu import results
from tfgpu.datasource.update import update_data
from tfgpu.settings import Settings


def cmd_update_data(settings: Settings) -> results.Result:
    return results.DataUpdate(update_data(offline=settings.offline, index_url=settings.index))
