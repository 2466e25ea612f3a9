"""``tfgpu-install update-data``: newer TensorFlow releases from PyPI into the user's data overlay."""

from __future__ import annotations

from tfgpu import results
from tfgpu.settings import Settings
from tfgpu.update import update_data


def cmd_update_data(settings: Settings) -> results.Result:
    return results.DataUpdate(update_data(offline=settings.offline, index_url=settings.index))
