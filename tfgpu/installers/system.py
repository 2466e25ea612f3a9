"""system mode (issue #6): not built yet."""

from __future__ import annotations

from tfgpu.errors import OperationError


def make_installer(resolution, options):
    raise OperationError(
        "not-implemented",
        f"--mode system is not built yet (issue #6); nothing was done.",
        ["--mode pip builds a working env today; `tfgpu-install plan` shows what the other modes will install."])
