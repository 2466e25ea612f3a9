"""``tfgpu-install plan``: the resolution for the target, and the resolving that other commands share.

This is the command whose start-up is counted (``scripts/bench_plan.py``): its imports are what a
plan uses. What only some plans need is imported where it is needed, each saying what it costs.
"""

from __future__ import annotations

from tfgpu import records, results
from tfgpu.resolver import request_for
from tfgpu.resolver import resolve as resolve_request
from tfgpu.resolver.target import names_another_machine
from tfgpu.settings import Settings


def host_of(settings: Settings, artefact: bool = False):
    """This machine's facts, or None: with --no-detect, and for an artefact whose command line
    describes another machine (``tfgpu.resolver.target.names_another_machine``)."""
    if not settings.detect:
        return None
    if artefact and names_another_machine(settings.selectors):
        return None
    # Measured cost: the detection package is a tenth of a plan's imports, which --no-detect spares.
    from tfgpu.detect import probe

    return probe(given=settings.selectors.given())


def resolve(settings: Settings, artefact: bool = False):
    host = host_of(settings, artefact)
    resolution = resolve_request(request_for(settings.selectors), host)
    if resolution.two_stacks:
        # Measured cost: co-planning's tables and rules (tfgpu.resolver.companions), for two stacks only.
        from tfgpu.resolver.coplanned import refuse_two_stacks

        refuse_two_stacks(resolution, settings.command)
    return resolution, host


def with_channels(settings: Settings, resolution, export: bool = False):
    """``resolution`` with the channels of ``--channel`` or the project file (conda mode), read as
    ``create`` reads them, or for an export as the target's engine will (no local channel). None
    named: the resolution's default (conda-forge), and nothing imported (a plan reads no URL)."""
    if not settings.channels:
        return resolution
    # Measured cost: the URL door and the engines' channel rules, for a plan that names a channel only.
    from tfgpu.engines.channels import planned
    from tfgpu.installers.options import check_channels_for

    check_channels_for(resolution.mode, settings.channels)
    return records.replace(resolution, channels=planned(settings.channels, settings.channels_from, export=export))


def cmd_plan(settings: Settings) -> results.Result:
    resolution, host = resolve(settings)
    return results.Planned(with_channels(settings, resolution), host)
