"""Offline bundles: a directory holding a lock (pip or conda), every package it names and
tfgpu-install's own wheels, installed on a machine without network by ``./install.sh PREFIX``.

``steps`` holds the steps every bundle shares and the typed result, ``pip_bundle`` and
``conda_bundle`` build each kind, ``files`` writes the README, ``install.sh`` and the tool's
wheel, ``read`` checks a bundle against its manifest for ``create --from-bundle``. A bundle holds
a lock, so this folder uses ``tfgpu.lock.pip`` and ``tfgpu.lock.conda``; they never use it.

:func:`build` is the face the command line calls (``tfgpu-install bundle``).
"""

from __future__ import annotations

from pathlib import Path

from tfgpu.errors import UsageError
from tfgpu.installers.options import check_channels_for, mode_of
from tfgpu.lock.targets import lock_targets


def build(
    *,
    mode: str | None,
    platforms: list[str],
    selectors,
    host=None,
    output: str | Path,
    channels=(),
    channel_from: str = "--channel",
    reporter=None,
):
    """``tfgpu-install bundle``: the bundle of one platform, pip or conda, in ``output``; returns a
    :class:`tfgpu.lock.bundle.steps.Built` (``to_dict()`` is the ``--json`` document).
    ``selectors`` and ``host`` as for :func:`tfgpu.lock.write`."""
    if len(set(platforms)) != 1:
        raise UsageError(
            "conflicting-options",
            "A bundle is for one platform; several --platform were given.",
            ["Build one bundle per platform, each with its own -o DIR."],
        )
    mode = mode_of(mode)
    if mode not in ("pip", "conda"):
        raise UsageError(
            "mode-not-bundlable",
            f"--mode {mode} cannot be bundled: system mode installs vendor archives, not packages.",
            ["Use --mode pip or --mode conda."],
        )
    check_channels_for(mode, channels)
    [(platform, resolution, _)] = lock_targets(platforms, selectors, allow_cpu=False, host=host)
    # Import cycle: tfgpu.lock.bundle.steps imports this module.
    from tfgpu.lock.bundle.steps import one_writer

    with one_writer():  # -o DIR locked from when it is prepared until the bundle is whole
        if mode == "conda":
            # Import cycle: tfgpu.lock.bundle.conda_bundle imports this module.
            from tfgpu.lock.bundle import conda_bundle

            return conda_bundle.build(
                resolution, platform, Path(output), channels=channels, channel_from=channel_from, reporter=reporter
            )
        # Import cycle: tfgpu.lock.bundle.pip_bundle imports this module.
        from tfgpu.lock.bundle import pip_bundle

        return pip_bundle.build(resolution, platform, Path(output), reporter=reporter)
