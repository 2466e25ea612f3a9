"""The text form of ``cache info``, ``cache prune`` and ``cache clean``. Part of the CLI layer
(with ``tfgpu.cli.render.results``): only ``tfgpu.cli`` imports it."""

from __future__ import annotations

from rich.markup import escape

from tfgpu.cli.render.console import Stream, table
from tfgpu.doors.controls import shown

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tfgpu.cache import CacheInfo
    from tfgpu.cache.cleaning import Tidied

_out = Stream()


def size(count: int | None) -> str:
    """Bytes as people read them: ``6.2 GB``, ``312 MB``, ``0 B`` (powers of 1000, as ``du --si``)."""
    if count is None:
        return "?"
    value = float(count)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{count} B"  # pragma: no cover - the loop always returns


def info(document: CacheInfo) -> None:
    """``cache info``: one row per kind, then which uv cache installs use and why."""
    rows = table("kind", "size", "linked", "clean frees", "prune frees", "path", header_style="bold")
    for kind in document.kinds:
        rows.add_row(
            escape(kind.what or kind.kind),
            size(kind.usage.bytes),
            size(kind.usage.linked),
            size(kind.clean_frees),
            "uv decides" if kind.prune_frees is None else size(kind.prune_frees),
            escape(shown(str(kind.path))),
        )
    _out.print(rows)
    uv = document.uv_cache
    _out.print(f"Installs use the uv cache {escape(shown(str(uv.path)))}: {escape(shown(uv.why))}.", whole=True)
    _out.print(
        f"Total {size(document.bytes)}; `cache clean` would free {size(document.clean_frees)} "
        f"and `cache prune` at least {size(document.prune_frees)} (what is 'linked' from elsewhere, an env's "
        "hard link, stays on disk while that link does).",
        whole=True,
    )
    for kind in document.kinds:
        twice = kind.twice if kind.kind == "uv" else {}
        if twice:
            names = ", ".join(shown(name) for name in sorted(twice)[:5]) + (
                f" and {len(twice) - 5} more" if len(twice) > 5 else ""
            )
            _out.print(
                f"{escape(shown(str(kind.path)))} holds {len(twice)} wheels unpacked twice, {size(sum(twice.values()))} "
                f"more than once ({escape(names)}): uv keeps the index's and each --find-links directory's apart; "
                f"`uv cache clean --cache-dir {escape(shown(str(kind.path)))} NAME` drops a package's copies.",
                whole=True,
            )
        if kind.note:
            _out.print(
                f"{escape(kind.kind)} at {escape(shown(str(kind.path)))}: {escape(shown(kind.note))}.", whole=True
            )


def tidied(document: Tidied) -> None:
    """``cache prune`` / ``cache clean``: what each kind gave back."""
    would = "would free" if document.dry_run else "freed"
    for kind in document.kinds:
        said = f" ({escape(shown(kind.said))})" if kind.said else ""  # uv's words, paths
        label = f"{kind.kind} (your own uv cache)" if kind.shared else kind.kind  # two uv rows apart
        _out.print(f"{escape(label)}: {would} {size(kind.freed)}{said}", whole=True)
    total = f"{'Would free' if document.dry_run else 'Freed'} {size(document.freed_bytes)}"
    _out.print(f"{total} in all by `cache {document.action}`.", whole=True)
