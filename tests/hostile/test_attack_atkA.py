"""An outside attacker's findings against the cache dedupe and the control-character set.

The dedupe makes the second unpacked copy of a wheel (and the env just built from it) more names of
the first copy's inode: whoever can write that inode later changes every env that holds it, after
every check, and the link takes that inode's mode. So the kept inode must be this user's alone, and
of the same mode as the file it replaces. The control-character set must hold every character that
makes what a reviewer sees differ from what is there, invisible ones included.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.test_cache_dedupe import _copy
from tfgpu.cache import dedupe


def _private_group() -> bool:
    import grp
    import pwd

    user = pwd.getpwuid(os.geteuid())
    return user.pw_gid == os.getegid() and grp.getgrgid(os.getegid()).gr_name == user.pw_name


def _pair(tmp_path: Path) -> tuple[Path, Path]:
    cache = tmp_path / "uv"
    return _copy(cache, "old", age=1000), _copy(cache, "new", age=2000)


def _same_inode(one: Path, two: Path) -> bool:
    return os.stat(one).st_ino == os.stat(two).st_ino


def test_a_kept_file_others_may_write_is_never_linked_into_the_second_copy(tmp_path):
    old, new = _pair(tmp_path)
    os.chmod(old / "pkg/mod.py", 0o666)
    done = dedupe.one_copy(old.parent.parent)
    assert not _same_inode(old / "pkg/mod.py", new / "pkg/mod.py")
    assert stat.S_IMODE(os.stat(new / "pkg/mod.py").st_mode) == 0o644
    assert done.files == 0


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown to another user needs root")
def test_a_kept_file_another_user_owns_is_never_linked_into_the_second_copy(tmp_path):
    old, new = _pair(tmp_path)
    os.chown(old / "pkg/mod.py", 54321, 54321)
    dedupe.one_copy(old.parent.parent)
    assert not _same_inode(old / "pkg/mod.py", new / "pkg/mod.py")
    assert os.stat(new / "pkg/mod.py").st_uid == os.geteuid()


@pytest.mark.parametrize("kept_mode", [0o600, 0o4755], ids=["loses-x", "gains-setuid"])
def test_a_kept_file_of_another_mode_is_never_linked_into_the_second_copy(tmp_path, kept_mode):
    old, new = _pair(tmp_path)
    os.chmod(new / "pkg/mod.py", 0o755)
    os.chmod(old / "pkg/mod.py", kept_mode)
    dedupe.one_copy(old.parent.parent)
    assert stat.S_IMODE(os.stat(new / "pkg/mod.py").st_mode) == 0o755
    assert not _same_inode(old / "pkg/mod.py", new / "pkg/mod.py")


@pytest.mark.skipif(not _private_group(), reason="the user has no private group here")
def test_files_uv_unpacked_under_umask_002_are_still_kept_once(tmp_path):
    """Group write in the user's own private group (Debian's and Ubuntu's default umask) is not
    another writer: such a cache is still deduplicated."""
    old, new = _pair(tmp_path)
    for copy in (old, new):
        for path in copy.rglob("*"):
            if path.is_file():
                os.chown(path, -1, os.getegid())
                os.chmod(path, 0o664)
    done = dedupe.one_copy(old.parent.parent)
    assert done.files == 4
    assert _same_inode(old / "pkg/mod.py", new / "pkg/mod.py")
