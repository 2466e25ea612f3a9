"""The calls that change a name (``tfgpu.doors.trees``): what each promises on its own, on real files in
``tmp_path``. The env-write door, the cache's clean and dedupe, the transaction and the bundles all
change names through them (``tests/test_doors_envwrite.py`` holds that), so a promise broken here is
broken in every one of them."""

from __future__ import annotations

import errno
import os
import stat

import pytest

from tfgpu.doors import trees


@pytest.fixture
def opened(tmp_path):
    """``tmp_path`` open as a directory, for the ``at`` of each call."""
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    yield fd
    os.close(fd)


def _identity(path) -> tuple:
    return trees.file_identity(os.lstat(path))


def test_unlink_deletes_a_link_never_what_it_points_to(tmp_path, opened):
    (tmp_path / "kept").write_text("the user's\n")
    (tmp_path / "link").symlink_to(tmp_path / "kept")
    assert trees.unlink("link", at=opened) is True
    assert (tmp_path / "kept").read_text() == "the user's\n" and not (tmp_path / "link").is_symlink()
    assert trees.unlink("link", at=opened) is False  # absent is no error


def test_unlink_of_a_directory_raises_only_when_strict(tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(OSError):
        trees.unlink(tmp_path / "d")
    assert trees.unlink(tmp_path / "d", strict=False) is False and (tmp_path / "d").is_dir()


def test_remove_dir_removes_only_an_empty_directory(tmp_path, opened):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "f").write_text("x")
    (tmp_path / "empty").mkdir()
    assert trees.remove_dir("full", at=opened) is False and (tmp_path / "full" / "f").exists()
    assert trees.remove_dir("empty", at=opened) is True and not (tmp_path / "empty").exists()
    with pytest.raises(OSError):
        trees.remove_dir(tmp_path / "full", strict=True)


def test_hard_link_of_a_link_links_the_link(tmp_path):
    (tmp_path / "secret").write_text("not to be linked\n")
    (tmp_path / "link").symlink_to(tmp_path / "secret")
    trees.hard_link(tmp_path / "link", tmp_path / "copy")
    assert (tmp_path / "copy").is_symlink() and os.lstat(tmp_path / "secret").st_nlink == 1


@pytest.mark.parametrize("taken", ["file", "directory", "link"])
@pytest.mark.parametrize("kernel", ["renameat2", "without renameat2"])
def test_rename_noreplace_never_replaces_what_is_there(tmp_path, opened, monkeypatch, taken, kernel):
    """Whatever is at the new name (a file, a directory, a link) stays, on a kernel with
    ``renameat2`` and on one without (the fallback: a file hard-linked, a directory checked)."""
    if kernel == "without renameat2":
        import ctypes

        monkeypatch.setattr(ctypes, "CDLL", lambda *a, **k: object())  # a libc without renameat2
    for source in ("file", "dir"):
        (tmp_path / "src-file").write_text("moved\n")
        (tmp_path / "src-dir").mkdir(exist_ok=True)
        target = tmp_path / f"to-{source}"
        if taken == "file":
            target.write_text("kept\n")
        elif taken == "directory":
            target.mkdir()
        else:
            target.symlink_to(tmp_path / "nowhere")
        with pytest.raises(OSError) as refused:
            trees.rename_noreplace(f"src-{source}", target.name, at=opened, target_at=opened)
        assert refused.value.errno == errno.EEXIST
        assert (tmp_path / f"src-{source}").exists()
        assert target.is_symlink() if taken == "link" else target.exists()


@pytest.mark.parametrize("kernel", ["renameat2", "without renameat2"])
def test_rename_noreplace_moves_to_a_free_name(tmp_path, monkeypatch, kernel):
    if kernel == "without renameat2":
        import ctypes

        monkeypatch.setattr(ctypes, "CDLL", lambda *a, **k: object())
    (tmp_path / "f").write_text("moved\n")
    (tmp_path / "d").mkdir()
    trees.rename_noreplace(tmp_path / "f", tmp_path / "g")
    trees.rename_noreplace(tmp_path / "d", tmp_path / "e")
    assert (tmp_path / "g").read_text() == "moved\n" and not (tmp_path / "f").exists()
    assert (tmp_path / "e").is_dir() and not (tmp_path / "d").exists()


def _link_in_fixture(tmp_path):
    (tmp_path / "kept").write_text("the bytes checked\n")
    (tmp_path / "other").write_text("the bytes checked\n")
    return _identity(tmp_path / "kept"), _identity(tmp_path / "other")


def test_link_in_makes_the_target_the_checked_file(tmp_path, opened):
    kept, other = _link_in_fixture(tmp_path)
    done = trees.link_in((opened, "kept"), kept, (opened, "partial"), (opened, "other"), target_is=other, also="held")
    assert done is True
    assert _identity(tmp_path / "other")[:2] == kept[:2] == _identity(tmp_path / "held")[:2]
    assert not (tmp_path / "partial").exists()


@pytest.mark.parametrize("changed", ["source", "target"])
def test_link_in_changes_nothing_when_a_name_is_no_longer_the_file_checked(tmp_path, opened, changed):
    """A file renamed over either name since it was checked (same size, other bytes): the target
    keeps its inode, and neither the partial nor the second name is left behind."""
    kept, other = _link_in_fixture(tmp_path)
    (tmp_path / "new").write_text("other bytes, same\n")
    os.replace(tmp_path / "new", tmp_path / ("kept" if changed == "source" else "other"))
    before = _identity(tmp_path / "other")
    done = trees.link_in((opened, "kept"), kept, (opened, "partial"), (opened, "other"), target_is=other, also="held")
    assert done is False and _identity(tmp_path / "other") == before
    assert not (tmp_path / "partial").exists() and not (tmp_path / "held").exists()


def test_link_in_never_links_through_a_link_at_the_source(tmp_path, opened):
    """The source swapped for a link to the very file checked: what the link would reach is the
    checked inode, but a link is never followed, so nothing is linked."""
    kept, other = _link_in_fixture(tmp_path)
    os.rename(tmp_path / "kept", tmp_path / "moved")
    (tmp_path / "kept").symlink_to(tmp_path / "moved")
    assert trees.link_in((opened, "kept"), kept, (opened, "partial"), (opened, "other"), target_is=other) is False
    assert _identity(tmp_path / "other") == other and not os.path.lexists(tmp_path / "partial")


def test_link_in_replaces_a_stale_partial_and_cleans_up_when_the_rename_fails(tmp_path, opened):
    kept, _ = _link_in_fixture(tmp_path)
    (tmp_path / "partial").write_text("left by a run killed between its link and its rename\n")
    (tmp_path / "blocked").mkdir()
    (tmp_path / "blocked" / "x").write_text("a directory's file\n")
    with pytest.raises(OSError):
        trees.link_in((opened, "kept"), kept, (opened, "partial"), (opened, "blocked"), also="held")
    assert not (tmp_path / "partial").exists() and not (tmp_path / "held").exists()
    assert (tmp_path / "blocked" / "x").exists() and os.lstat(tmp_path / "kept").st_nlink == 1


def test_delete_files_deletes_only_chosen_regular_files(tmp_path):
    """Links stay (and what they point to), files not chosen stay, directories left empty go, the
    root stays; the stat of each file deleted comes back."""
    root = tmp_path / "root"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "old.whl").write_bytes(b"x" * 10)
    (root / "a" / "new.whl").write_bytes(b"y" * 20)
    (root / "keep").mkdir()
    (root / "keep" / "outside").symlink_to(tmp_path / "victim")
    (tmp_path / "victim").write_text("the user's\n")
    deleted = trees.delete_files(root, lambda path, info: path.name == "old.whl")
    assert [info.st_size for info in deleted] == [10] and all(stat.S_ISREG(i.st_mode) for i in deleted)
    assert not (root / "a" / "b").exists() and (root / "a" / "new.whl").exists()
    everything = trees.delete_files(root, lambda path, info: True)
    assert [info.st_size for info in everything] == [20]
    assert (root / "keep" / "outside").is_symlink() and (tmp_path / "victim").read_text() == "the user's\n"
    assert root.is_dir() and not (root / "a").exists()


def test_delete_files_refuses_a_root_that_is_a_link(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "f").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(OSError):
        trees.delete_files(tmp_path / "link", lambda path, info: True)
    assert (tmp_path / "real" / "f").exists()
