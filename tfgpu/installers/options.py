"""How to build (``Options``), checked once: the option combinations argparse cannot express.

The CLI hands the raw flags to :func:`build_options`; every rule about which flag goes with which
mode lives here, next to the installers that read them.
"""

from __future__ import annotations

from tfgpu.engines import uv as uv_engine
from tfgpu.errors import UsageError
from tfgpu.records import record
from tfgpu.resolver.request import MODES, parse_choice

ENGINES = {"uv": "pip", "pip": "pip", "rattler": "conda", "conda": "conda", "mamba": "conda", "micromamba": "conda"}
"""Each ``--engine`` and the mode whose envs it builds (system mode builds its venv like pip mode)."""


@record
class Options:
    """How to build, from the command line."""

    engine: str | None = None
    find_links: str | None = None
    offline: bool = False
    jupyter: bool = False
    force: bool = False
    verify: bool = True
    channels: tuple[str, ...] = ()
    """conda channels (--channel), in priority order; empty means conda-forge."""


def mode_of(mode: str | None) -> str:
    """The ``--mode`` value, checked (default pip)."""
    return parse_choice("--mode", mode, MODES) or "pip"


def check_channels_for(mode: str, channels) -> None:
    """``--channel`` goes with conda mode only."""
    if channels and mode != "conda":
        raise UsageError(
            "conflicting-options",
            f"--channel applies to --mode conda only (got --mode {mode}).",
            ["Add --mode conda, or drop --channel."],
        )


def build_options(
    *,
    mode: str | None,
    engine: str | None = None,
    channels=(),
    find_links: str | None = None,
    offline: bool = False,
    jupyter: bool = False,
    force: bool = False,
    verify: bool = True,
    channel_from: str = "--channel",
) -> Options:
    """``Options`` from the create flags, or the ``UsageError`` (exit 2) for a combination that
    cannot work: an engine of another mode, conda-only flags without conda mode, a missing wheel dir."""
    mode = mode_of(mode)
    if engine is not None:
        if engine not in ENGINES:
            raise UsageError(
                "bad-option-value",
                # cut short, as parse_choice does: the value may be thousands of characters, not a word
                f"--engine {engine[:40]!r}{'...' if len(engine) > 40 else ''} is not one of: {', '.join(ENGINES)}.",
                ["Use --engine uv or pip for --mode pip, rattler/conda/mamba/micromamba for --mode conda."],
            )
        if ENGINES[engine] != mode and mode != "system":
            raise UsageError(
                "conflicting-options",
                f"--engine {engine} drives {ENGINES[engine]} environments, but --mode is {mode}.",
                [f"Use --mode {ENGINES[engine]}, or drop --engine."],
            )
    check_channels_for(mode, channels)
    if channels:  # through the URL door now, named by where they came from (a flag, a project file)
        # Start-up cost: `completion` loads this module but not tfgpu.engines.rattler_engine.
        from tfgpu.engines.rattler_engine import channel_urls

        channel_urls(tuple(channels), channel_from)
    find_links = uv_engine.find_links_source(find_links)
    return Options(
        engine=engine,
        find_links=find_links,
        offline=offline,
        jupyter=jupyter,
        force=force,
        verify=verify,
        channels=tuple(channels or ()),
    )
