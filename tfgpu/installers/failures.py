"""What a failed command of a build means to the person who ran it: the ``install-failed`` and
``download-failed`` errors, with the ways forward this build's options make true (a local wheel
directory, ``--offline``, a second try). Kept apart from ``tfgpu.installers.base``, which runs the
steps: this module only reads what a failed run said and words it."""

from __future__ import annotations

from pathlib import Path

from tfgpu.engines.uv import lacking, run_failure
from tfgpu.errors import OperationError
from tfgpu.installers.options import Options


def whole_output(log_path: Path | None) -> list[str]:
    """The way forward every failed command of a build or a repair names: its log, when one is kept."""
    return [f"The whole output is in {log_path}."] if log_path else []


def install_failed(step, done, log_path: Path | None, options: Options, location=None, alone=None, why=""):
    """What a failed command of a build (``step``: a ``tfgpu.installers.base.Step``) means: the ``install-failed`` error, from the engine's facts
    (``tfgpu.engines.uv.run_failure``) and what this build's options make the way forward: a missing
    network points at a local wheel directory, a package ``--offline`` could not find at where to put it.
    ``alone``: the failed run of the same command from the wheel directory alone (:func:`directory_first`),
    which names what the directory lacks (the run with uv's cache may name a package the directory has,
    shadowed by the index's cached answer). ``why``: it failed twice as an index between states does."""
    facts = run_failure(step.argv, done, location)
    alternatives = []
    if why:
        alternatives.append(
            f"This looks transient ({why}, on a second try as well: an index or its mirror between two "
            "states). The same command again in a few minutes may succeed."
        )
    if facts.unreachable and not options.offline:
        alternatives.append(
            "No network? Build from a local wheel directory (--find-links DIR --offline), or with "
            "--offline alone from what uv's cache already holds."
        )
    missing = lacking(alone.output) if alone is not None else []
    if options.offline and facts.not_found and options.find_links:
        what = ", ".join(missing) if missing else "the missing wheels"
        alternatives.append(
            f"--offline installs only from the --find-links directory ({options.find_links}) and what uv's "
            f"cache already holds: add {what} to that directory (`pip download` on a connected machine, "
            "for this Python and platform), or run once with network so the cache has them."
        )
    elif options.offline and facts.not_found:
        alternatives.append(
            "--offline installs only from what uv's cache already holds: put the "
            "missing wheels in a directory (`pip download` them on a connected machine) and pass "
            "--find-links DIR, or run once with network so the cache has them."
        )
    alternatives += whole_output(log_path)
    message = f"{step.title} failed (`{facts.command}` exited {facts.returncode}); nothing was installed.\n"
    if alone is not None:
        lacks = (
            f"lacks {', '.join(missing)} (uv stops at the first it cannot find: there may be more)"
            if missing
            else "does not satisfy the requirements"
        )
        message += (
            f"The --find-links directory ({options.find_links}) alone {lacks}, and with what uv's cache holds "
            f"it fails as well. From the directory alone, uv said:\n"
            f"{run_failure(step.argv, alone, location).detail}\nWith uv's cache:\n"
        )
    return OperationError("install-failed", message + facts.detail, alternatives)


def stalled(step, done, log_path):
    """``download-failed`` for a step whose downloads the tool stopped below their floor."""
    return OperationError(
        "download-failed",
        f"{step.title} was stopped: {done.stalled}; nothing was installed.",
        [
            "The index or the network is too slow to finish: check the connection, or the mirror named by "
            "UV_DEFAULT_INDEX/--find-links, then run the same command again.",
            *whole_output(log_path),
        ],
    )
