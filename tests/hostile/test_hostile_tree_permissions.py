"""Deleting a tree with a directory its owner may not list (``tfgpu.doors.trees.empty`` with
``writable``, as ``remove`` and ``create --force`` delete an env): the directory is made listable
before it is entered, and that change of mode must reach the very directory that was listed. Here
the name is swapped for a link to a directory outside the tree between the failed open and the
change of mode (the race is made certain by the stand-in for the open at the module's boundary,
since root, which runs this suite in CI containers, opens a mode-000 directory anyway)."""

from __future__ import annotations

import errno
import os
import stat

from tfgpu.doors import trees


def test_a_locked_directory_swapped_for_a_link_leaves_the_linked_directory_as_it_was(tmp_path, monkeypatch):
    tree, outside = tmp_path / "env", tmp_path / "theirs"
    (tree / "locked").mkdir(parents=True)
    (tree / "locked" / "file").write_text("x")
    outside.mkdir()
    (outside / "precious").write_text("keep")
    os.chmod(outside, 0o555)
    os.chmod(tree / "locked", 0o000)
    real = trees._open_directory
    swapped = []

    def open_directory(name, at=None):
        if str(name) == "locked" and not swapped:
            swapped.append(True)
            os.chmod(tree / "locked", 0o700)  # a racer replaces the locked directory by a link
            os.rename(tree / "locked", tmp_path / "moved-away")
            os.symlink(outside, tree / "locked")
            raise PermissionError(errno.EACCES, "Permission denied", str(name))
        return real(name, at)

    monkeypatch.setattr(trees, "_open_directory", open_directory)
    try:
        trees.empty(tree, lambda directory, name, info, path: trees.unlink(name, at=directory), writable=True)
        assert swapped and stat.S_IMODE(outside.stat().st_mode) == 0o555
        assert (outside / "precious").read_text() == "keep"
    finally:
        os.chmod(outside, 0o755)
