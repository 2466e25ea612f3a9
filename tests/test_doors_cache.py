"""The doors of deleting: held by reading the code (AST), so a change that goes around them fails.

* ``cache prune|clean`` delete only through ``tfgpu.cache.cleaning._one`` (which removes files or
  runs uv's own clean/prune), reached only from ``tidy`` after ``tfgpu.cache.guard.check`` has
  looked at every kind the command touches for an env and the user's places;
* the modules that delete or walk trees the user can shape (the cache, the env-write door, bundle
  and export directories) use ``tfgpu.doors.trees``, never a walker that recurses once per level
  (``os.walk``, ``os.fwalk``, ``shutil.rmtree``, ``Path.rglob`` before Python 3.12/3.13).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import tfgpu

PACKAGE = Path(tfgpu.__file__).resolve().parent
ITERATIVE_ONLY = [
    *sorted((PACKAGE / "cache").glob("*.py")),
    PACKAGE / "doors/trees.py",
    PACKAGE / "envs" / "writes.py",
    PACKAGE / "envs" / "jupyter.py",
    PACKAGE / "lock" / "bundle" / "steps.py",
    PACKAGE / "lock" / "bundle" / "read.py",
    PACKAGE / "export" / "__init__.py",
]
RECURSIVE = {("os", "walk"), ("os", "fwalk"), ("shutil", "rmtree")}


def recursive_walks(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        owner = node.func.value.id if isinstance(node.func.value, ast.Name) else None
        if (owner, node.func.attr) in RECURSIVE or node.func.attr == "rglob":
            found.append(f"line {node.lineno}: {owner or '…'}.{node.func.attr}")
    return found


@pytest.mark.parametrize("path", ITERATIVE_ONLY, ids=lambda path: path.relative_to(PACKAGE).as_posix())
def test_trees_are_walked_and_deleted_without_recursion(path):
    assert recursive_walks(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(
    "source", ["import os\nos.walk(p)", "import os\nos.fwalk(p)", "import shutil\nshutil.rmtree(p)", "p.rglob('*')"]
)
def test_the_recursion_check_sees_each_walker(source):
    assert recursive_walks(source)


def _calls(function: ast.FunctionDef) -> list[tuple[int, str]]:
    """(line, name) of every call of a plain or dotted name inside ``function``."""
    found = []
    for node in ast.walk(function):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if name:
                found.append((node.lineno, name))
    return sorted(found)


def test_cache_commands_delete_only_after_the_guard_looked():
    tree = ast.parse((PACKAGE / "cache" / "cleaning.py").read_text(encoding="utf-8"))
    functions = {node.name: node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    callers: dict[str, set[str]] = {}
    for name, function in functions.items():
        for _, called in _calls(function):
            callers.setdefault(called, set()).add(name)
    assert callers["remove_files"] == {"_one"} and callers["_uv"] == {"_one"}
    assert callers["_one"] == {"tidy"}
    tidy = _calls(functions["tidy"])
    first_check = min(line for line, name in tidy if name == "check")
    assert all(line > first_check for line, name in tidy if name == "_one")
    for path in (PACKAGE / "cache").glob("*.py"):  # no other module of the cache calls them
        if path.name != "cleaning.py":
            names = {name for node in ast.walk(ast.parse(path.read_text())) for name in _names(node)}
            assert not names & {"remove_files", "_one", "_uv"}, path.name


def _names(node: ast.AST):
    if isinstance(node, ast.Call):
        func = node.func
        yield func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
