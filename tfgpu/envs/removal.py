"""Deleting an env's files with a count of what went: ``remove`` of a 29,000-file env takes tens of
seconds, and a person (or a log) is told how far it is, in files and bytes.

The tree is surveyed once (links and files by ``lstat``, never followed), then deleted in parts: a
directory holding at most :data:`PART` files goes whole (``tfgpu.envs.writes.remove_tree``, the
env-write door, with the env's directory as the owner it may make writable), a larger one is
entered; after each part the count is reported.

Neither the survey nor the deletion recurses: a chain of thousands of nested directories, which
any package can hold, would otherwise end a ``remove`` in ``RecursionError`` with the env half
gone. The survey walks through ``tfgpu.doors.trees.walk`` (one directory open at a time, no path
too long to reach), and a directory whose path nears the system's limit is deleted whole, never
entered by its path.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from tfgpu.doors import trees
from tfgpu.envs import writes
from tfgpu.records import factory, record

PART = 500
"""Files in a directory deleted in one go (between two reports)."""
DEPTH_ENTERED = 64
"""Levels below the env beyond which a directory is deleted whole, never entered: real envs nest a
dozen levels, and entering each level of a chain thousands deep costs a path lookup per level."""
PATH_ENTERED = 2048
"""Bytes of path beyond which a directory is deleted whole (through descriptors), never entered."""

Progress = Callable[[int, int, int, int], None]
"""``(files done, files in all, bytes done, bytes in all)``."""


@record(frozen=False)
class _Node:
    path: Path
    directory: bool
    files: int = 0
    size: int = 0
    children: list[_Node] = factory(list)


def _size(path: Path) -> int:
    try:
        return os.lstat(path).st_size
    except OSError:  # gone, or a path past the system's limit: counted as a file of no size
        return 0


def _survey(root: Path) -> _Node:
    """``root``'s tree of nodes with each directory's files and bytes in all, without recursion:
    the walk lists top down, so each directory's totals are summed after its children's."""
    top = _Node(root, True)
    pending = {root: top}
    order = []
    for path, directories, others, _links in trees.walk(root):
        node = pending.pop(path, None)
        if node is None:
            continue
        order.append(node)
        node.children.extend(_Node(path / name, False, files=1, size=_size(path / name)) for name in others)
        for name in directories:
            child = _Node(path / name, True)
            node.children.append(child)
            pending[child.path] = child
    for node in reversed(order):
        node.files = sum(child.files for child in node.children)
        node.size = sum(child.size for child in node.children)
    return top


def _enterable(path: Path, top: Path) -> bool:
    return len(path.parts) - len(top.parts) <= DEPTH_ENTERED and len(os.fsencode(path)) < PATH_ENTERED


def survey(directory: Path, keep: str | None = None) -> tuple[list[_Node], int, int]:
    """The entries of ``directory`` but ``keep``, and their files and bytes in all."""
    top = _survey(directory)
    parts = [child for child in top.children if child.path.name != keep]
    return parts, sum(p.files for p in parts), sum(p.size for p in parts)


def delete_counted(directory: Path, keep: str | None, progress: Progress | None) -> None:
    """Delete everything inside ``directory`` but ``keep`` (as ``tfgpu.envs.txn.delete_contents``),
    calling ``progress`` after each part. Another file system mounted inside stops it first."""
    writes.check_no_mounts(directory)
    parts, files, size = survey(directory, keep)
    done = [0, 0]

    # (node, emptied): an entered directory comes back once its children are gone, to go itself.
    stack = [(part, False) for part in reversed(parts)]
    while stack:
        node, emptied = stack.pop()
        if emptied:
            writes.remove_tree(node.path, owner=directory)  # empty now
            continue
        if node.directory and node.files > PART and node.children and _enterable(node.path, directory):
            stack.append((node, True))
            stack.extend((child, False) for child in reversed(node.children))
            continue
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
