"""``tfgpu-install matrix`` and ``update-data``: the data tables, shown and brought up to date."""

from __future__ import annotations

from tfgpu import results
from tfgpu.resolver.matrix import matrix
from tfgpu.resolver.overlay import data_status
from tfgpu.settings import Settings
from tfgpu.update import update_data


def cmd_matrix(settings: Settings) -> results.Result:
    return results.Matrix(matrix(all_releases=settings.all_releases), data_status())


def cmd_update_data(settings: Settings) -> results.Result:
    return results.DataUpdate(update_data(offline=settings.offline, index_url=settings.index))
