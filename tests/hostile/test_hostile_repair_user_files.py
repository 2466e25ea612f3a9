"""Files the user puts into an env between a SIGKILLed repair and its ``repair --undo``: in
site-packages (a module, a ``.pth``), in ``bin``, ``include``, inside a package that was there before,
inside a directory the killed install itself had made. The undo takes back what the install wrote
and only that: it deletes a path only where a wheel of that install names it with those bytes (the
wheel's RECORD, in the env or in uv's cache), keeps every other file where it is and says so.

Everything is real (tests/test_repair_interrupts.py: real uv, real wheels, real SIGKILL, uv frozen
at the moment seen); uv gets a cache directory under tmp, never the user's.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
import repairhelpers as rh
from test_repair_interrupts import (  # noqa: F401 (fixtures)
    FAT,
    STATES,
    fat_wheels,
    interrupt_when,
    site,
    tool,
    tool_env,
    tree,
    user_env,
)

pytestmark = pytest.mark.slow


def _plant(user_env: Path) -> dict[Path, bytes]:
    packages = site(user_env)
    mine = {
        packages / "my_module.py": b"print('mine')\n",
        packages / "my_paths.pth": b"/opt/my/lib\n",
        packages / "tensorflow" / "my_notes.txt": b"notes\n",
        user_env / "bin" / "my-tool": b"#!/bin/sh\necho mine\n",
        user_env / "include" / "my_header.h": b"int mine;\n",
    }
    for where in FAT.values():
        if (packages / where).is_dir():  # a directory the killed install made
            mine[packages / where / "MY-FILE.txt"] = b"mine too\n"
    for path, data in mine.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return mine


@pytest.mark.parametrize("state", sorted(STATES))
def test_undo_after_a_sigkill_keeps_every_file_the_user_added_since(user_env, fat_wheels, tool_env, state):
    before = tree(user_env)
    interrupt_when(user_env, fat_wheels, tool_env, STATES[state], signal.SIGKILL)
    assert json.loads((user_env / "etc" / "tfgpu" / "repair.json").read_text())["state"] == "applying"
    mine = _plant(user_env)
    undone = tool(tool_env, "repair", "--undo", "--prefix", str(user_env), "--json")
    assert undone.returncode == 0, undone.stdout + undone.stderr
    for path, data in mine.items():
        assert path.is_file() and path.read_bytes() == data, f"{path} was lost: {undone.stderr}"
        assert path.relative_to(user_env).as_posix() in undone.stdout, undone.stdout
    after = tree(user_env)
    made = {p.relative_to(user_env).as_posix() for p in mine}
    made |= {d.relative_to(user_env).as_posix() for p in mine for d in p.parents if user_env in d.parents}
    # what is left beyond the user's files: the directories holding them, nothing of the install
    extra = {k for k in set(after) - set(before) if k not in made}
    assert extra == set(), sorted(extra)[:20]
    assert {k: v for k, v in after.items() if k in before} == before
    for path in mine:
        path.unlink()
    again = tool(tool_env, "repair", "--prefix", str(user_env), "--no-detect", "--yes", "--no-verify")
    assert again.returncode == 0, again.stdout + again.stderr
    assert rh.freeze(user_env)
