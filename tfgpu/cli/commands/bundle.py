"""``tfgpu-install bundle``: a lock, its packages and the tool's own wheels in one directory (one platform)."""

from __future__ import annotations

from tfgpu import results
from tfgpu.cli.commands.lock import needs_platforms
from tfgpu.cli.commands.plan import host_of
from tfgpu.cli.output import render
from tfgpu.lock import bundle
from tfgpu.settings import Settings


def cmd_bundle(settings: Settings) -> results.Result:
    """``bundle``: a lock, its packages and the tool's own wheels in one directory (one platform)."""
    needs_platforms(settings)
    reporter = render().ConsoleReporter()
    try:
        assert settings.output is not None  # bundle's -o is required
        built = bundle.build(
            mode=settings.selectors.mode,
            platforms=list(settings.platforms),
            selectors=settings.selectors,
            host=host_of(settings, artefact=True),
            output=settings.output,
            channels=settings.channels,
            channel_from=settings.channels_from,
            reporter=reporter,
        )
    finally:
        reporter.close()
    return results.Written(
        built.to_dict(),
        (
            f"Bundle ready: {built.bundle} ({built.files} files, {built.mb} MB). "
            f"Install it offline with {built.bundle}/install.sh PREFIX",
        ),
    )
