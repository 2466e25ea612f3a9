"""The tool's own source, for the tests that read it (layering, doors, error codes, quoting): each
module of the package read, parsed and walked once per test process and shared by every such test,
not once per test that scans the package (a parse and a walk of the whole package cost about a
second of CPU each time). The trees are shared: a test reads them and never changes one.

The functions take a source's text, so that a check written over ``nodes(source)`` runs the same
on a module of the package and on a snippet a test writes to show what the check finds."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import tfgpu

PACKAGE = Path(tfgpu.__file__).resolve().parent
"""The package under test: the checkout's, or the installed wheel's when the tests run outside it."""


@functools.cache
def modules() -> tuple[Path, ...]:
    """Every ``.py`` file of the package, sorted."""
    return tuple(sorted(PACKAGE.rglob("*.py")))


@functools.cache
def text(path: Path) -> str:
    """A module of the package (which does not change while the tests run; a file a test writes is
    read with ``read_text`` and its text given to the functions below)."""
    return Path(path).read_text(encoding="utf-8")


@functools.cache
def tree(source: str) -> ast.AST:
    return ast.parse(source)


@functools.cache
def nodes(source: str) -> tuple[ast.AST, ...]:
    """Every node of ``source``'s tree, in ``ast.walk``'s order."""
    return tuple(ast.walk(tree(source)))


@functools.cache
def parents(source: str) -> dict[ast.AST, ast.AST]:
    """Each node of ``source``'s tree -> the node it sits in."""
    return {child: node for node in nodes(source) for child in ast.iter_child_nodes(node)}


def walked(path: Path) -> tuple[ast.AST, ...]:
    """Every node of a module's tree."""
    return nodes(text(path))
