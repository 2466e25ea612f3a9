"""``tfgpu-install matrix``: every release the data knows, and what each needs."""

from __future__ import annotations

from tfgpu import results
from tfgpu.resolver.matrix import matrix
from tfgpu.resolver.overlay import data_status
from tfgpu.settings import Settings


def cmd_matrix(settings: Settings) -> results.Result:
    return results.Matrix(matrix(all_releases=settings.all_releases), data_status())
