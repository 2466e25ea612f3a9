"""The env-write door holds: no module that writes into an env (repair, activation, the backends)
writes, renames or deletes a path itself; each goes through ``tfgpu.envs.writes`` (or, for the
create/remove transaction's own siblings of the target, ``tfgpu.envs.txn``). And in the whole
package, every unlink, rmdir, rename and link is made by the primitives of ``tfgpu.doors.trees`` (the
env-write door, the cache's prune, clean and dedupe, the transaction, the bundles alike), bar the
modules of :data:`AROUND_THE_DOOR`, each named with its reason.

The check reads the code (AST): a call such as ``path.write_text(...)``, ``os.replace(...)`` or
``shutil.rmtree(...)`` in one of these modules is a write that skips the door's checks (a link
out of the env, a directory where a file goes, a half-written file, a parent's mode changed).
"""

from __future__ import annotations

import ast
from pathlib import Path

import packagesource
import pytest

import tfgpu

PACKAGE = Path(tfgpu.__file__).resolve().parent
WATCHED = [
    *sorted((PACKAGE / "repair").glob("*.py")),
    PACKAGE / "envs" / "activation.py",
    *sorted((PACKAGE / "installers").glob("*.py")),
]
ALLOWED = {PACKAGE / "envs" / "writes.py", PACKAGE / "envs" / "txn.py"}
"""The door itself, and the transaction that moves whole targets into place."""

PATH_METHODS = {"write_text", "write_bytes", "unlink", "rmdir", "symlink_to", "hardlink_to", "rename", "touch", "chmod"}
MODULE_CALLS = {
    ("os", "replace"),
    ("os", "rename"),
    ("os", "renames"),
    ("os", "unlink"),
    ("os", "remove"),
    ("os", "rmdir"),
    ("os", "removedirs"),
    ("os", "symlink"),
    ("os", "link"),
    ("os", "chmod"),
    ("shutil", "rmtree"),
    ("shutil", "move"),
    # a copy reads its source through any link (bytes and mode from outside the env): an
    # env file read for rewriting goes through writes.read_own
    ("shutil", "copy"),
    ("shutil", "copy2"),
    ("shutil", "copyfile"),
    ("shutil", "copytree"),
    ("shutil", "copymode"),
    ("shutil", "copystat"),
}


def _writes_a_file(node: ast.Call) -> bool:
    """``open(path, "w")`` and the like (a mode with w, a, x or +)."""
    name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
    if name != "open":
        return False
    modes = [*node.args[1:2], *(k.value for k in node.keywords if k.arg == "mode")]
    return any(isinstance(m, ast.Constant) and isinstance(m.value, str) and set(m.value) & set("wax+") for m in modes)


def bypasses(path: Path) -> list[str]:
    found = []
    for node in packagesource.nodes(path.read_text(encoding="utf-8")):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        where = f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
        if isinstance(func, ast.Attribute):
            owner = func.value.id if isinstance(func.value, ast.Name) else None
            if (owner, func.attr) in MODULE_CALLS:
                found.append(f"{where} {owner}.{func.attr}")
            elif func.attr in PATH_METHODS and owner not in ("os", "shutil", "writes", "txn"):
                found.append(f"{where} .{func.attr}()")
        if _writes_a_file(node):
            found.append(f"{where} open() for writing")
    return found


def test_the_watched_modules_exist():
    assert all(path.is_file() for path in WATCHED) and len(WATCHED) > 8


def test_nothing_writes_into_an_env_around_the_door():
    found = [line for path in WATCHED if path not in ALLOWED for line in bypasses(path)]
    assert found == [], "write, rename or delete through tfgpu.envs.writes instead:\n" + "\n".join(found)


def test_the_check_sees_each_kind_of_bypass(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import os, shutil\n"
        "def f(p):\n"
        "    p.write_text('x')\n    p.write_bytes(b'')\n    p.unlink()\n    os.replace(p, p)\n"
        "    os.rename(p, p)\n    shutil.rmtree(p)\n    os.unlink(p)\n    open(p, 'w')\n"
        "    shutil.copy2(p, p)\n    'a'.replace('a', 'b')\n    open(p)\n"
    )
    global PACKAGE
    saved, PACKAGE = PACKAGE, tmp_path.parent
    try:
        found = bypasses(sample)
    finally:
        PACKAGE = saved
    assert len(found) == 9, found


# -- one set of calls that change a name, for the whole package ---------------------------------

NAME_CHANGES = {
    ("os", "unlink"),
    ("os", "remove"),
    ("os", "rename"),
    ("os", "renames"),
    ("os", "replace"),
    ("os", "rmdir"),
    ("os", "removedirs"),
    ("os", "link"),
    ("os", "symlink"),
    ("shutil", "rmtree"),
    ("shutil", "move"),
}
PATH_NAME_CHANGES = {"unlink", "rmdir", "rename", "symlink_to", "hardlink_to"}
NOT_PATHS = {"os", "shutil", "trees", "writes", "dataclasses", "records", "str", "bytes"}
"""Names whose ``.replace``/``.rename`` is not a path's (the door's own, a record's copy, a string's)."""

NAME_DOOR = "doors/trees.py"
"""The primitives themselves: every unlink, rmdir, rename and link, relative to an open directory."""

AROUND_THE_DOOR = {
    "export/templates/activate_env.py": "a script written into the user's env that runs without tfgpu installed",
}
"""Modules that still change names themselves, each with the reason it may."""


def name_changes(source: str) -> list[str]:
    """Each call in ``source`` that deletes, renames or links a name without ``tfgpu.doors.trees``."""
    found = []
    for node in packagesource.nodes(source):
        if isinstance(node, ast.ImportFrom) and node.module in ("os", "shutil"):
            for alias in node.names:
                if (node.module, alias.name) in NAME_CHANGES:
                    found.append(f"line {node.lineno}: from {node.module} import {alias.name}")
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        func, where = node.func, f"line {node.lineno}"
        owner = func.value.id if isinstance(func.value, ast.Name) else None
        if (owner, func.attr) in NAME_CHANGES:
            found.append(f"{where}: {owner}.{func.attr}")
        elif owner in NOT_PATHS or isinstance(func.value, ast.Constant):
            continue
        elif func.attr in PATH_NAME_CHANGES:
            found.append(f"{where}: .{func.attr}()")
        elif func.attr == "replace" and len(node.args) == 1 and not node.keywords:
            found.append(f"{where}: .replace()")  # str.replace takes two arguments, Path.replace one
    return found


def test_names_change_only_through_the_primitives():
    """Outside ``tfgpu.doors.trees`` (and the modules in :data:`AROUND_THE_DOOR`), nothing deletes,
    renames or links a name itself: the primitives never follow a link at the name they change, and
    work relative to an open directory where the caller holds one."""
    offenders = {}
    for path in packagesource.modules():
        relative = path.relative_to(PACKAGE).as_posix()
        if relative == NAME_DOOR or relative in AROUND_THE_DOOR:
            continue
        found = name_changes(packagesource.text(path))
        if found:
            offenders[relative] = found
    assert offenders == {}


def test_each_module_let_around_the_door_still_changes_names():
    """An entry in :data:`AROUND_THE_DOOR` that no longer needs it goes, so the list stays true."""
    for relative in AROUND_THE_DOOR:
        assert name_changes(packagesource.text(PACKAGE / relative)), relative


@pytest.mark.parametrize(
    "source",
    [
        "import os\nos.unlink(p)",
        "import os\nos.remove(p)",
        "import os\nos.rename(a, b)",
        "import os\nos.replace(a, b, src_dir_fd=d)",
        "import os\nos.rmdir(p)",
        "import os\nos.link(a, b)",
        "import os\nos.symlink(a, b)",
        "import shutil\nshutil.rmtree(p)",
        "import shutil\nshutil.move(a, b)",
        "from os import unlink",
        "path.unlink(missing_ok=True)",
        "(out / 'x').unlink()",
        "path.rmdir()",
        "path.rename(other)",
        "path.replace(other)",
        "alias.symlink_to(prefix, target_is_directory=True)",
        "path.hardlink_to(other)",
    ],
)
def test_the_name_check_sees_each_way_around(source):
    assert name_changes(source)


@pytest.mark.parametrize(
    "source",
    [
        "from tfgpu import trees\ntrees.unlink(p, at=fd)",
        "from tfgpu.envs import writes\nwrites.delete(p)",
        "text.replace('a', 'b')",
        "'x'.replace(a, b)",
        "import dataclasses\ndataclasses.replace(obj, x=1)",
        "from tfgpu import records\nrecords.replace(obj, x=1)",
        "data.replace(b'\\0', b'\\n')",
    ],
)
def test_the_name_check_lets_the_door_and_strings_through(source):
    assert name_changes(source) == []
