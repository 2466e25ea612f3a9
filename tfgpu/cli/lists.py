"""The text form of ``list`` and ``lock --check``: rows of what is there, each path whole, and the
one command that frees or takes what they name. Part of the CLI layer, beside ``tfgpu.cli.render.results``."""

from __future__ import annotations

from rich.filesize import decimal
from rich.markup import escape

from tfgpu.cli.render.console import table
from tfgpu.cli.render.live import out as _out
from tfgpu.doors.controls import shown


def env_list(envs: list[dict], searched, leftovers=()) -> None:
    """``list``: one row per env, its health, and where it is (the path whole); then what interrupted
    removes left, and the command that frees each."""
    for left in leftovers:
        _out.print(
            f"[yellow]left by {escape(left['what'])}[/]: {escape(shown(left['path']))} "
            f"({left['files']:,} files, {decimal(left['bytes'])}); free it with: {escape(shown(left['command']))}",
            whole=True,
        )
    if not envs:
        _out.print(
            "No environment built by tfgpu-install in " + ", ".join(escape(shown(d)) for d in searched) + ".",
            whole=True,
        )
        return
    rows = table("name", "TF", "CUDA", "mode", "Python", "health", "path", header_style="bold")
    for env in envs:
        health = "[green]ok[/]" if env["healthy"] else f"[red]broken[/]: {escape(shown('; '.join(env['problems'])))}"
        rows.add_row(
            *(escape(shown(env[key] or "-")) for key in ("name", "tensorflow", "cuda", "mode", "python")),
            health,
            escape(shown(env["prefix"])),
        )
    _out.print(rows)


def lock_check(found) -> None:
    """``lock --check``: each lock current, or every change, one line each; each lock the project
    describes that is missing; then the one command that takes the changes."""
    for one in getattr(found, "checks", [found]):
        what = f"{one.mode} lock of TF {one.tensorflow} for {', '.join(one.platforms)}"
        if one.current:
            where = f"{escape(shown(one.path))} ({escape(shown(what))}; {one.packages} packages resolve the same today)"
            _out.print(f"[green]current[/]: {where}", whole=True)
            continue
        _out.print(f"[red]not current[/]: {escape(shown(one.path))} ({escape(shown(what))})", whole=True)
        for change in one.changes:
            _out.print(f"  {escape(change['kind'])}: {escape(shown(change['text']))}", whole=True)
    for platform, path in getattr(found, "missing", ()):
        _out.print(f"[red]missing[/]: {escape(shown(path))} (the {escape(platform)} lock the project describes)")
    if found.advice:
        _out.print(f"  to take these changes, run: {escape(shown(found.advice))}", whole=True)
