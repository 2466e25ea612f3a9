"""The lines ``verify`` prints for the libraries a framework's process used (markup, not printed
here): each operation run for a library and its outcome, then the copy of each library the loader
gave the process by SONAME, its version, wheel and stack (``tfgpu.verify.origins``)."""

from __future__ import annotations

from rich.markup import escape

from tfgpu.verify.origins import key_uses


def step_lines(step: dict) -> list[str]:
    """Under a ``verify --with`` step; in a two-stack env, TensorFlow's own libraries it did not
    compute with."""
    lines = []
    for op in step.get("ops") or []:
        sign = "[dim]–[/]" if op.get("skipped") else ("[green]✓[/]" if op.get("ok") else "[red]✗[/]")
        said = op.get("note") or op.get("error") or ""
        lines.append(
            f"        {sign} {escape(str(op.get('op')))} ({escape(str(op.get('library')))})"
            + (f": {escape(str(said))}" if said else "")
        )
    for name, use in key_uses(step.get("uses") or {}):
        copies = len(use.get("copies") or [])
        lines.append(
            f"        [dim]{escape(name)} {escape(str(use.get('version') or '?'))} ← {escape(str(use.get('path')))} "
            f"({escape(str(use.get('package') or 'wheel unknown'))}; {escape(str(use.get('stack', '')))}"
            + (f"; {copies} copies mapped" if copies > 1 else "")
            + ")[/]"
        )
    if step.get("other_stack"):
        lines.append(
            "        [yellow]TensorFlow computed with the other CUDA stack's copy of "
            f"{escape(', '.join(step['other_stack']))}[/] (its own copies are not what the loader gives it)"
        )
    return lines


def uses_lines(report: dict) -> list[str]:
    """Under ``verify``: what TensorFlow's lookups by SONAME got, not merely the files mapped (a
    report from before ``uses`` existed: the files mapped, first of each name)."""
    uses = report.get("uses")
    if not isinstance(uses, dict):
        return [
            f"    [dim]{escape(name)} ← {escape(path)}[/]" for name, path in sorted(report.get("libraries", {}).items())
        ]
    lines = []
    for name, use in sorted(uses.items()):
        if not isinstance(use, dict):
            continue
        copies = len(use.get("copies") or [])
        lines.append(
            f"    [dim]{escape(name)} {escape(str(use.get('version') or ''))} ← {escape(str(use.get('path')))}"
            + (f" ({escape(str(use['package']))})" if use.get("package") else "")
            + (f", {copies} copies mapped" if copies > 1 else "")
            + "[/]"
        )
    return lines
