"""Deleting an env's files with a count of what went: ``remove`` of a 29,000-file env takes tens of
seconds, and a person (or a log) is told how far it is, in files and bytes.

The tree is surveyed once (links and files by ``lstat``, never followed), then deleted in parts: a
directory holding at most :data:`PART` files goes whole (``tfgpu.envs.writes.remove_tree``, the
env-write door, with the env's directory as the owner it may make writable), a larger one is
entered; after each part the count is reported.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from tfgpu.envs import writes
from tfgpu.records import factory, record

PART = 500
"""Files in a directory deleted in one go (between two reports)."""

Progress = Callable[[int, int, int, int], None]
"""``(files done, files in all, bytes done, bytes in all)``."""


@record(frozen=False)
class _Node:
    path: Path
    directory: bool
    files: int = 0
    size: int = 0
    children: list[_Node] = factory(list)


def _survey(path: Path, directory: bool) -> _Node:
    node = _Node(path, directory)
    if not directory:
        try:
            node.size = os.lstat(path).st_size
        except OSError:
            pass
        node.files = 1
        return node
    try:
        with os.scandir(path) as entries:
            found = list(entries)
    except OSError:
        return node
    for entry in found:
        try:
            inner = entry.is_dir(follow_symlinks=False)
        except OSError:
            inner = False
        child = _survey(Path(entry.path), inner)
        node.children.append(child)
        node.files += child.files
        node.size += child.size
    return node


def survey(directory: Path, keep: str | None = None) -> tuple[list[_Node], int, int]:
    """The entries of ``directory`` but ``keep``, and their files and bytes in all."""
    top = _survey(directory, True)
    parts = [child for child in top.children if child.path.name != keep]
    return parts, sum(p.files for p in parts), sum(p.size for p in parts)


def delete_counted(directory: Path, keep: str | None, progress: Progress | None) -> None:
    """Delete everything inside ``directory`` but ``keep`` (as ``tfgpu.envs.txn.delete_contents``),
    calling ``progress`` after each part. Another file system mounted inside stops it first."""
    writes.check_no_mounts(directory)
    parts, files, size = survey(directory, keep)
    done = [0, 0]

    def counted(node: _Node) -> None:
        if node.directory and node.files > PART and node.children:
            for child in node.children:
                counted(child)
            writes.remove_tree(node.path, owner=directory)  # empty now
            return
        try:
            if node.directory:
                writes.remove_tree(node.path, owner=directory)
            else:
                writes.delete(node.path)
        except FileNotFoundError:
            pass
        done[0] += node.files
        done[1] += node.size
        if progress is not None:
            progress(done[0], files, done[1], size)

    for part in parts:
        counted(part)
