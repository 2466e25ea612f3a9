"""How a result reaches the user, by its type: one JSON document with ``--json``, else text.

:func:`show` is the one place a result (``tfgpu.results``) becomes output. ``tfgpu.cli.render.results`` draws
the text (rich is imported only when something is shown to a person); the JSON document is the
result's own ``to_dict()``.
"""

from __future__ import annotations

import sys

from tfgpu import results
from tfgpu.doors.secrets import redact, redacted_json
from tfgpu.settings import Settings

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: type checkers treat it alike
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def render():
    # Start-up cost: `plan --json --no-detect` loads this module but not tfgpu.cli.render.results.
    from tfgpu.cli.render import results as module

    return module


def _lists():
    # Start-up cost: `plan --json --no-detect` loads this module but not tfgpu.cli.lists.
    from tfgpu.cli import lists

    return lists


def note(message: str) -> None:
    """A line for the person at the terminal, on stderr (so also under --json)."""
    render().note(message)


def show(settings: Settings, result: results.Result) -> int:
    """Show ``result`` and return its exit code."""
    if settings.json:
        sys.stdout.write(redacted_json(result.to_dict()) + "\n")
    else:
        _TEXT[type(result)](result)
    return result.exit_code


def text(result: results.Result) -> None:
    """The text form of ``result`` whatever ``--json`` says (a failure shows it before its error)."""
    _TEXT[type(result)](result)


def _plan(result: results.Planned) -> None:
    render().plan(result.resolution, result.host)


def _matrix(result: results.Matrix) -> None:
    # Start-up cost: `plan --json --no-detect` loads this module but not tfgpu.resolver.overlay.
    from tfgpu.resolver.overlay import describe_age

    render().matrix(result.rows)
    render().note(describe_age(result.data) + "; `tfgpu-install update-data` fetches newer releases.")


def _created(result: results.Created) -> None:
    if result.dry_run:
        render().dry_run(result.resolution, result.host, result.outcome)
    else:
        render().created(result.outcome, result.resolution, result.unchecked, result.naming)


def _exported(result: results.Exported) -> None:
    written = ", ".join(str(path) for path in result.written)
    render().note(
        f"Wrote {written} ({result.format}, TensorFlow {result.resolution.tensorflow}, {result.resolution.mode} mode)."
    )


def _log_matches(result: results.LogMatches) -> None:
    # Start-up cost: `plan --json --no-detect` loads this module but not tfgpu.doctor.logs.
    from tfgpu.doctor.logs import LOG_LIMIT

    if result.truncated:
        render().note(f"Only the first {LOG_LIMIT >> 20} MiB of {result.log} were read.")
    render().log_matches(result.matches)


def _verified(result: results.Verified) -> None:
    if result.multiworker:
        render().multiworker(result.report, reason=not result.failing)
    elif result.frameworks:
        render().frameworks(result.report)
    else:
        render().verify(result.report, reason=not result.failing)


def _written(result: results.Written) -> None:
    for line in result.lines:
        render().note(line)


def _text(result: results.Text) -> None:
    sys.stdout.write(redact(result.text))


def _cache(document) -> None:
    # Start-up cost: `plan --json --no-detect` loads this module but not tfgpu.cli.render.cache.
    from tfgpu.cli.render import cache as render_cache

    if document.action == "info":
        render_cache.info(document)
    else:
        render_cache.tidied(document)


_TEXT: dict[type, Callable[[Any], object]] = {
    results.Planned: _plan,
    results.Matrix: _matrix,
    results.DataUpdate: lambda result: render().note(result.summary),
    results.Created: _created,
    results.Removed: lambda result: render().removed(result.removed, result.recovered),
    results.LockChecked: lambda result: _lists().lock_check(result.check),
    results.Exported: _exported,
    results.LogMatches: _log_matches,
    results.Doctored: lambda result: render().doctor(result.report),
    results.Verified: _verified,
    results.EnvList: lambda result: _lists().env_list(result.envs, result.searched, result.leftovers),
    results.Repaired: lambda result: (render().repair_undone if result.undone else render().repaired)(result.to_dict()),
    results.Written: _written,
    results.Text: _text,
    results.CacheReport: lambda result: _cache(result.document),
    results.Ran: lambda result: None,  # the command's own output was all there was to show
}
"""Each result type's text form; a test checks every type in ``tfgpu.results`` has one."""
