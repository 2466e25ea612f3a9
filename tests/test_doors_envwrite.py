"""The env-write door holds: no module that writes into an env (repair, activation, the backends)
writes, renames or deletes a path itself; each goes through ``tfgpu.envs.writes`` (or, for the
create/remove transaction's own siblings of the target, ``tfgpu.envs.txn``).

The check reads the code (AST): a call such as ``path.write_text(...)``, ``os.replace(...)`` or
``shutil.rmtree(...)`` in one of these modules is a write that skips the door's checks (a link
out of the env, a directory where a file goes, a half-written file, a parent's mode changed).
"""

from __future__ import annotations

import ast
from pathlib import Path

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
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
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
