"""conda mode (issue #4): not built yet."""

from __future__ import annotations

from tfgpu.errors import OperationError


def make_installer(resolution, options):
    raise OperationError(
        "not-implemented",
        f"--mode conda is not built yet (issue #4); nothing was done.",
        ["--mode pip builds a working env today; `tfgpu-install plan` shows what the other modes will install."])
