"""``tfgpu-install create`` (the bare form too): an env from a fresh resolution, or exactly what a
lock or bundle pins (``tfgpu.ops.create`` does the work)."""

from __future__ import annotations

from tfgpu import lock, results
from tfgpu.cli.commands.plan import resolve
from tfgpu.cli.endings import created_ending, refuse_unverifiable
from tfgpu.cli.output import render
from tfgpu.envs.location import check_name
from tfgpu.installers.base import Source
from tfgpu.installers.options import build_options
from tfgpu.ops import create
from tfgpu.settings import Settings


def default_name(tensorflow: str) -> str:
    """``2.13.1`` -> ``tf2.13``: one env per series unless told otherwise."""
    major, minor = tensorflow.split(".")[:2]
    return f"tf{major}.{minor}"


def cmd_create(settings: Settings) -> results.Result:
    """``create``: from a fresh resolution, or exactly what a lock or bundle pins."""
    refuse_unverifiable(settings)
    if settings.name is not None:
        check_name(settings.name)
    options = build_options(
        mode=settings.selectors.mode,
        engine=settings.engine,
        channels=settings.channels,
        channel_from=settings.channels_from,
        find_links=settings.find_links,
        offline=settings.offline,
        jupyter=settings.jupyter,
        force=settings.force,
        verify=settings.verify,
    )
    reporter = None if settings.dry_run else render().ConsoleReporter()
    pinned: dict = {}
    host = None
    try:
        if settings.from_lock or settings.from_bundle:
            resolution, options, source, found = lock.prepare(
                settings.selectors,
                options,
                from_lock=settings.from_lock,
                from_bundle=settings.from_bundle,
                reporter=reporter,
            )
            pinned = {"lock": str(found.path), "lock_sha256": found.sha256, "bundle": settings.from_bundle}
        else:
            resolution, host = resolve(settings)
            source = Source()
        name = settings.name or (None if settings.prefix else default_name(resolution.tensorflow))
        outcome = create(
            resolution,
            name=name,
            prefix=settings.prefix,
            options=options,
            source=source,
            reporter=reporter,
            dry_run=settings.dry_run,
        )
    finally:
        if reporter is not None:
            reporter.close()
    if settings.dry_run:
        return results.Created(outcome, resolution, host, dry_run=True, lock=pinned)
    return created_ending(settings, results.Created(outcome, resolution, host, lock=pinned), name)
