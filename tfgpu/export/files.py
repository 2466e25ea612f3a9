"""What an export produces: files (name, text, permission bits), and whether they form a tree."""

from __future__ import annotations

from tfgpu.records import record


@record
class ExportFile:
    """One generated file: its path relative to the output, its text and its permission bits."""

    name: str
    content: str
    mode: int = 0o644


@record
class Export:
    """What one format produced. ``directory``: the files form a tree (``-o`` names a directory)."""

    format: str
    files: tuple[ExportFile, ...]
    directory: bool = False

    @property
    def main(self) -> ExportFile:
        """The file printed when no ``-o`` is given."""
        return self.files[0]

    def to_dict(self) -> dict:
        """The ``script --json`` document (without the contents of the files)."""
        return {
            "format": self.format,
            "files": [{"name": f.name, "mode": oct(f.mode), "bytes": len(f.content.encode())} for f in self.files],
        }
