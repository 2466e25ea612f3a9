"""Files the user puts into an env between a SIGKILLed repair and its ``repair --undo``: in
site-packages (a module, a ``.pth``), in ``bin``, ``include``, inside a package that was there before,
inside a directory the killed install itself had made. The undo takes back what the install wrote
and only that: it deletes a path only where a wheel of that install names it with those bytes (the
wheel's RECORD, in the env or in uv's cache), keeps every other file where it is and says so.

Everything is real (tests/test_repair_interrupts.py: real uv, real wheels, real SIGKILL, uv frozen
at the moment seen); uv gets a cache directory under tmp, never the user's.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
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


def _plant(user_env: Path) -> dict[Path, bytes]:  # noqa: F811
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


@pytest.mark.slow
@pytest.mark.parametrize("state", sorted(STATES))
def test_undo_after_a_sigkill_keeps_every_file_the_user_added_since(user_env, fat_wheels, tool_env, state):  # noqa: F811
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


def _sha(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _sweep_env(tmp_path: Path, link_mode: str):
    """A plain directory standing in for a venv, a listing, a wheel unpacked in a stand-in of uv's
    cache and half of it put into the env (``link_mode``: linked as uv links, or copied)."""
    from tfgpu.repair import listing

    prefix = tmp_path / "env"
    site = prefix / "lib" / "python3.11" / "site-packages"
    (site / "tensorflow").mkdir(parents=True)
    (site / "tensorflow" / "__init__.py").write_text("x = 1\n")
    (prefix / "bin").mkdir()
    taken = listing.take(prefix, site)
    entry = tmp_path / "uv-cache" / listing.ARCHIVES / "Ab12"
    files = {"nvidia/cudnn/lib/libcudnn.so.9": b"\x7fELF", "nvidia/cudnn/lib/libcudnn_ops.so.9": b"\x7fELF ops"}
    rows = [f"{name},{_sha(data)},{len(data)}" for name, data in files.items()]
    for name, data in files.items():
        (entry / name).parent.mkdir(parents=True, exist_ok=True)
        (entry / name).write_bytes(data)
    (entry / "nvidia_cudnn_cu12-9.28.0.42.dist-info").mkdir()
    (entry / "nvidia_cudnn_cu12-9.28.0.42.dist-info" / "RECORD").write_text("\n".join(rows) + "\n")
    (site / "nvidia" / "cudnn" / "lib").mkdir(parents=True)
    for name in files:
        if link_mode == "hardlink":
            os.link(entry / name, site / name)
        else:
            (site / name).write_bytes(files[name])
    return prefix, site, taken, tmp_path / "uv-cache"


@pytest.mark.parametrize("link_mode", ["hardlink", "copy"])
def test_the_sweep_takes_the_wheels_files_and_keeps_every_file_no_wheel_holds(tmp_path, link_mode):
    from tfgpu.repair import listing

    prefix, site, taken, cache = _sweep_env(tmp_path, link_mode)
    mine = {
        site / "my_module.py": b"print('mine')\n",
        site / "my_paths.pth": b"/opt/my/lib\n",
        site / "tensorflow" / "my_notes.txt": b"notes\n",
        prefix / "bin" / "my-tool": b"#!/bin/sh\n",
        prefix / "include" / "my_header.h": b"int mine;\n",
        site / "nvidia" / "cudnn" / "lib" / "MY-FILE.txt": b"mine too\n",
    }
    for path, data in mine.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    # the user replaced one of the wheel's files with their own bytes: not the install's any more
    replaced = site / "nvidia" / "cudnn" / "lib" / "libcudnn_ops.so.9"
    replaced.unlink()
    replaced.write_bytes(b"my own build\n")
    done = listing.sweep(
        prefix, site, taken, {"nvidia-cudnn-cu12"}, set(), cache=cache, wanted={("nvidia-cudnn-cu12", "9.28.0.42")}
    )
    assert not (site / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9").exists()
    assert replaced.read_bytes() == b"my own build\n"
    for path, data in mine.items():
        assert path.read_bytes() == data
    spared = {(prefix / p) for p in done.spared}
    assert spared == {*mine, replaced}
    assert (cache / listing.ARCHIVES / "Ab12" / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9").exists()


def test_the_sweep_without_uvs_cache_deletes_nothing_it_cannot_prove(tmp_path):
    """uv's cache pruned (or another one) between the kill and the undo: no proof, nothing deleted."""
    from tfgpu.repair import listing

    prefix, site, taken, _cache = _sweep_env(tmp_path, "copy")
    done = listing.sweep(
        prefix,
        site,
        taken,
        {"nvidia-cudnn-cu12"},
        set(),
        cache=tmp_path / "elsewhere",
        wanted={("nvidia-cudnn-cu12", "9.28.0.42")},
    )
    assert (site / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9").exists()
    assert len(done.spared) == 2


def test_a_listing_edited_to_omit_everything_makes_the_sweep_take_no_file_that_was_there(tmp_path):
    """A journal's listing emptied by hand, its time set to 0 (so every inode looks newer than it):
    the env's own files (``bin/python``, a user's module) are still no wheel's, and stay."""
    from tfgpu.repair import listing

    prefix, site, _taken, cache = _sweep_env(tmp_path, "hardlink")
    (site / "my_module.py").write_text("mine\n")
    (prefix / "bin" / "python").symlink_to("/usr/bin/python3")
    forged = {"taken_ns": 0, "paths": {}}
    done = listing.sweep(
        prefix, site, forged, {"nvidia-cudnn-cu12"}, set(), cache=cache, wanted={("nvidia-cudnn-cu12", "9.28.0.42")}
    )
    assert (site / "my_module.py").read_text() == "mine\n"
    assert (prefix / "bin" / "python").is_symlink()
    assert (site / "tensorflow" / "__init__.py").exists()
    assert "lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.9" in done.removed


def test_the_sweep_takes_a_half_copied_temporary_of_uv_and_keeps_one_that_is_not(tmp_path):
    """uv's cache on another file system: uv copies each file through a ``.tmp*`` beside it, and a
    kill leaves that half written (seen on a tmpfs env). It holds the start of a wheel's file and
    goes; a ``.tmp*`` holding anything else is not provably uv's and stays."""
    from tfgpu.repair import listing

    prefix, site, taken, cache = _sweep_env(tmp_path, "copy")
    lib = site / "nvidia" / "cudnn" / "lib"
    # uv had written the wheel's .dist-info too: its RECORD in the env names the same files
    info = site / "nvidia_cudnn_cu12-9.28.0.42.dist-info"
    info.mkdir()
    (info / "RECORD").write_bytes((cache / listing.ARCHIVES / "Ab12" / info.name / "RECORD").read_bytes())
    (lib / ".tmpAbC123").write_bytes(b"\x7fEL")
    (lib / ".tmpXyZ789").write_bytes(b"my own scratch\n")
    done = listing.sweep(
        prefix, site, taken, {"nvidia-cudnn-cu12"}, set(), cache=cache, wanted={("nvidia-cudnn-cu12", "9.28.0.42")}
    )
    assert not (lib / ".tmpAbC123").exists()
    assert (lib / ".tmpXyZ789").read_bytes() == b"my own scratch\n"
    assert done.spared == ("lib/python3.11/site-packages/nvidia/cudnn/lib/.tmpXyZ789",)


def test_a_wheel_file_linked_from_uvs_cache_and_edited_in_place_is_kept(tmp_path):
    """uv links a wheel's file in from its cache (one inode); the user then appends to it in place:
    still the cache's inode, no longer the wheel's bytes. The sweep keeps it."""
    from tfgpu.repair import listing

    prefix, site, taken, cache = _sweep_env(tmp_path, "hardlink")
    edited = site / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9"
    with edited.open("ab") as handle:
        handle.write(b"the user's patch\n")
    done = listing.sweep(
        prefix, site, taken, {"nvidia-cudnn-cu12"}, set(), cache=cache, wanted={("nvidia-cudnn-cu12", "9.28.0.42")}
    )
    assert edited.read_bytes() == b"\x7fELFthe user's patch\n"
    assert "lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.9" in done.spared
