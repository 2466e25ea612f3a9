"""``doctor``'s findings and a TensorFlow log's matches as text: part of the CLI layer, shown
through ``tfgpu.cli.render.results``. Evidence appears once per run, and a long line (a RUNPATH of some 2,000
characters) is shortened on a terminal; piped, and in ``--json``, every line is whole."""

from __future__ import annotations

from rich.markup import escape

from tfgpu.cli.render.live import out as _out  # stdout through the stream that ends a live display first
from tfgpu.doors.controls import shown

_STYLE = {
    "fail": "[red]✗ fail[/]",
    "warn": "[yellow]! warn[/]",
    "ok": "[green]✓ ok[/]  ",
    "skip": "[dim]- skip[/]",
    "info": "[dim]i info[/]",
}


def doctor(report) -> None:
    """Findings grouped by severity: failures first, each with its evidence and fix."""
    env = report.target.get("env")
    if env:
        tf = f"TF {env['tensorflow']}" if env.get("tensorflow") else "no TensorFlow"
        python = f"Python {env['python_version']}" if env.get("python_version") else "Python unknown"
        _out.print(
            f"[bold]doctor[/] {escape(shown(env['root']))} ({escape(shown(tf))}, {escape(shown(python))})", whole=True
        )
    # Each evidence line once: several findings can share one (every library that is not found
    # names the same RUNPATH, of some 2,000 characters for TensorFlow's own library). A fix shared
    # by several findings is printed whole once and then named by the finding that showed it.
    seen: set[str] = set()
    fixes: dict[str, str] = {}
    for status in ("fail", "warn", "ok", "skip"):
        for finding in (f for f in report.findings if f.status == status):
            _out.print(f"{_STYLE[status]} [bold]{escape(finding.id)}[/]: {escape(finding.title)}")
            if status in ("fail", "warn"):
                for line in finding.evidence:
                    if line and line not in seen:
                        seen.add(line)
                        _out.print(f"      [dim]{escape(shown(line if _out.plain else shortened(line)))}[/]")
                if finding.fix in fixes:
                    _out.print(f"      [cyan]fix:[/] the same as {escape(fixes[finding.fix])}'s (above)")
                elif finding.fix:
                    fixes[finding.fix] = finding.id
                    _out.print(f"      [cyan]fix:[/] {escape(finding.fix)}")
    summary = report.summary()
    _out.print(f"{summary['fail']} failing, {summary['warn']} warnings, {summary['ok']} ok, {summary['skip']} skipped")


LONG_LIST = 200
"""A directory list (``RUNPATH: a:b:...``) longer than this is shortened on a terminal."""
LONG_TEXT = 1000
"""Other evidence longer than this is cut on a terminal: a sentence or two stays whole."""


def shortened(line: str) -> str:
    """A long evidence line as a terminal shows it (piped, and in ``--json``, it is whole): a list
    of directories as its count and first two, other text cut at a word; each says where it is whole."""
    label, colon, value = line.partition(": ")
    parts = value.split(":") if colon and " " not in value else []
    if len(line) > LONG_LIST and len(parts) > 2:
        return (
            f"{label}: {len(parts)} directories: {parts[0]}, {parts[1]} and {len(parts) - 2} more (`--json` lists them)"
        )
    if len(line) <= LONG_TEXT:
        return line
    cut = line[:LONG_TEXT].rsplit(" ", 1)[0]
    return f"{cut} [{len(line) - len(cut)} more characters: `--json` has the whole line]"


def log_matches(matches) -> None:
    if not matches:
        _out.print("[green]No known failure signature in this log.[/]")
        return
    for match in matches:
        _out.print(
            f"{_STYLE.get(match.severity, match.severity)} [bold]{escape(match.id)}[/]: {escape(match.title)} "
            f"[dim](line {match.line_number}, {match.count}x)[/]"
        )
        _out.print(f"      [dim]{escape(shown(match.line.strip()[:200]))}[/]")
        _out.print(f"      cause: {escape(match.cause)}")
        _out.print(f"      [cyan]fix:[/] {escape(match.fix)}")
