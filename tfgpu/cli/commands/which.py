"""The env ``doctor`` and ``verify`` mean: the one the user named, else the active one."""

from __future__ import annotations

from tfgpu.cli.output import note
from tfgpu.envs.which import which_env
from tfgpu.settings import Settings


def target_env(settings: Settings, purpose: str):
    """The env the command means (``tfgpu.envs.which``), said on stderr when the user did not type it."""
    target = which_env(
        name=settings.name,
        prefix=settings.prefix,
        interpreter=settings.interpreter,
        environ=dict(settings.active_env),
        purpose=purpose,
    )
    if target is not None and target.implicit and not settings.json:
        note(target.describe())
    return target
