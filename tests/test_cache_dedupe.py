"""The cache dedupe (``tfgpu.cache.dedupe``) against a cache that changes under it: a file or a
directory swapped between the check of a copy and the link that replaces its files, a second
dedupe of the same cache in another process, and a dedupe killed half-way.

What must hold: a name is replaced only by the very inode that was hashed, only inside a directory
of the cache reached without following a link; nothing outside the cache is linked, replaced or
deleted; two dedupes of one cache never step on each other; and nothing a killed run leaves is
inside an unpacked wheel (uv links every file of one into each env it installs it into).

Several tests swap a file or a directory at the boundary between the check and the link by
wrapping ``os.link``, ``os.replace``, ``fcntl.flock`` or ``dedupe._listed`` for one call: a test
seam that makes a window of microseconds (another process of the same user, a concurrent tfgpu
run, ``uv`` at work in its cache) happen every time.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tfgpu.cache import dedupe

BODY = b"print('the same module in every copy')\n" * 64
EVIL = (b"import os; os.system('touch PWNED')#" + b"#" * len(BODY))[: len(BODY)]
FILES = {"pkg/mod.py": BODY, "pkg/sub/data.bin": b"\x00\x01" * 300, "top.py": b"x = 1\n"}
LISTED = sorted([*FILES, "pkg-1.0.dist-info/RECORD"])


def _hash(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


RECORD = (
    "\n".join([*(f"{p},sha256={_hash(d)},{len(d)}" for p, d in FILES.items()), "pkg-1.0.dist-info/RECORD,,"]) + "\n"
).encode()


def _copy(
    cache: Path, name: str, files: dict[str, bytes] = FILES, record: bytes = RECORD, age: int | None = None
) -> Path:
    """One unpacked wheel ``archive-v0/<name>`` in ``cache`` as uv leaves it; ``age``: its mtime in
    seconds (the oldest copy is the one kept)."""
    copy = cache / "archive-v0" / name
    for relative, data in {**files, "pkg-1.0.dist-info/RECORD": record}.items():
        (copy / relative).parent.mkdir(parents=True, exist_ok=True)
        (copy / relative).write_bytes(data)
    if age is not None:
        os.utime(copy, (age, age))
    return copy


def _env(tmp_path: Path, name: str, copy: Path) -> Path:
    """An env whose files are hard links to ``copy``'s, as uv installs them."""
    env = tmp_path / name
    for relative in FILES:
        (env / "site" / relative).parent.mkdir(parents=True, exist_ok=True)
        os.link(copy / relative, env / "site" / relative)
    return env


def _inode(path: Path) -> tuple[int, int]:
    info = os.lstat(path)
    return info.st_dev, info.st_ino


def _names(directory: Path) -> list[str]:
    """Every file or link under ``directory`` (directories left out), never through a link."""
    found = []
    for parent, dirs, files in os.walk(directory):
        found += [str((Path(parent) / name).relative_to(directory)) for name in files]
        found += [
            str((Path(parent) / name).relative_to(directory)) for name in dirs if (Path(parent) / name).is_symlink()
        ]
    return sorted(found)


def _home(tmp_path: Path, files: dict[str, bytes]) -> tuple[Path, dict[str, tuple[int, int]]]:
    """A user's directory outside the cache holding ``files``, and each file's inode."""
    home = tmp_path / "home" / "project"
    for relative, data in files.items():
        (home / relative).parent.mkdir(parents=True, exist_ok=True)
        (home / relative).write_bytes(data)
    return home, {relative: _inode(home / relative) for relative in files}


def _swap_for_link(directory: Path, target: Path) -> None:
    """``directory`` moved aside (still inside the cache) and a symbolic link to ``target`` put
    in its place, as another process could at any moment."""
    os.rename(directory, directory.with_name(directory.name + ".aside"))
    directory.symlink_to(target, target_is_directory=True)


def _once(monkeypatch, owner, name: str, before=None, after=None) -> list:
    """``owner.name`` wrapped for its first call: ``before(*args)`` runs before the real call,
    ``after(*args)`` after it. Returns the list of every call's arguments."""
    real, calls = getattr(owner, name), []

    def wrapper(*args, **kwargs):
        calls.append(args)
        if len(calls) == 1 and before is not None:
            before(*args)
        result = real(*args, **kwargs)
        if len(calls) == 1 and after is not None:
            after(*args)
        return result

    monkeypatch.setattr(owner, name, wrapper)
    return calls


# -- a directory swapped for a link between the check and the final rename ----------------------


def test_a_directory_swapped_for_a_link_before_the_final_rename_never_carries_it_out(tmp_path, monkeypatch):
    """Test seam: ``os.replace`` wrapped so that right before the dedupe's first rename (every
    file of both copies already checked, the new link made), the second copy's ``pkg`` becomes a
    link to a user's directory holding a ``mod.py`` with the very bytes RECORD lists. The rename
    must land in the directory that was checked, never in the user's: their file keeps its inode."""
    cache = tmp_path / "uv"
    first = _copy(cache, "AAAA", age=1_000_000)
    second = _copy(cache, "BBBB")
    home, inodes = _home(tmp_path, {"mod.py": BODY, "sub/data.bin": FILES["pkg/sub/data.bin"]})
    _once(monkeypatch, os, "replace", before=lambda *a: _swap_for_link(second / "pkg", home))
    dedupe.one_copy(cache)
    assert {relative: _inode(home / relative) for relative in inodes} == inodes, (
        "a user's file became a link into the cache"
    )
    assert _names(home) == ["mod.py", "sub/data.bin"]
    assert all(os.lstat(home / relative).st_nlink == 1 for relative in inodes)
    # What the dedupe did, it did in the cache's own directory (moved aside, still in the cache).
    aside = second / "pkg.aside"
    assert (aside / "mod.py").read_bytes() == BODY and _inode(aside / "mod.py") == _inode(first / "pkg" / "mod.py")


def test_a_copy_swapped_for_a_link_after_the_walk_is_never_written_through(tmp_path, monkeypatch):
    """Test seam: ``dedupe._listed`` (called once the copies are grouped by their RECORD) wrapped to
    replace the second copy itself, ``archive-v0/BBBB``, with a link to a user's directory that
    holds the same files and RECORD. Nothing of the user's may be hashed into a link or replaced."""
    cache = tmp_path / "uv"
    _copy(cache, "AAAA", age=1_000_000)
    second = _copy(cache, "BBBB")
    home, inodes = _home(tmp_path, {**FILES, "pkg-1.0.dist-info/RECORD": RECORD})
    _once(monkeypatch, dedupe, "_listed", before=lambda *a: _swap_for_link(second, home))
    dedupe.one_copy(cache)
    assert {relative: _inode(home / relative) for relative in inodes} == inodes, (
        "a user's file became a link into the cache"
    )
    assert all(os.lstat(home / relative).st_nlink == 1 for relative in inodes)
    assert _names(home) == LISTED


def test_a_scratch_directory_swapped_for_a_link_after_it_is_locked_is_never_swept(tmp_path, monkeypatch):
    """Test seam: ``fcntl.flock`` wrapped so that right after the dedupe locks its scratch directory
    (before it empties it of what a killed run left, and makes its links there), the scratch
    directory becomes a link to a user's directory. Not one of the user's files may be deleted,
    and nothing may be linked into their directory."""
    cache = tmp_path / "uv"
    _copy(cache, "AAAA", age=1_000_000)
    _copy(cache, "BBBB")
    home, inodes = _home(tmp_path, {"notes.txt": b"keep me\n", "1234.0": b"looks like a leftover\n"})
    (cache / dedupe.SCRATCH).mkdir()
    _once(monkeypatch, fcntl, "flock", after=lambda *a: _swap_for_link(cache / dedupe.SCRATCH, home))
    dedupe.one_copy(cache)
    assert _names(home) == ["1234.0", "notes.txt"], "the dedupe deleted or linked in a user's directory"
    assert {relative: _inode(home / relative) for relative in inodes} == inodes


@pytest.mark.parametrize("swapped", ["file", "directory"])
def test_the_kept_file_swapped_between_its_hash_and_its_link_is_never_linked(tmp_path, monkeypatch, swapped):
    """Test seam: ``os.link`` wrapped so that right before the dedupe links the kept copy's file,
    that file is renamed over (same size, other bytes), or its directory made a link to a user's
    directory holding such a file: the inode linked must be the inode hashed, so neither the second
    copy nor the env may hold the new bytes or the user's file."""
    cache = tmp_path / "uv"
    first = _copy(cache, "AAAA", age=1_000_000)
    second = _copy(cache, "BBBB")
    env = _env(tmp_path, "env", second)
    home, inodes = _home(tmp_path, {"mod.py": EVIL})

    def swap(*args):
        if swapped == "directory":
            _swap_for_link(first / "pkg", home)
            return
        (tmp_path / "new").write_bytes(EVIL)
        os.replace(tmp_path / "new", first / "pkg" / "mod.py")

    _once(monkeypatch, os, "link", before=swap)
    dedupe.one_copy(cache, env)
    assert (second / "pkg" / "mod.py").read_bytes() == BODY
    assert (env / "site" / "pkg" / "mod.py").read_bytes() == BODY
    assert _inode(home / "mod.py") == inodes["mod.py"] and os.lstat(home / "mod.py").st_nlink == 1


# -- two dedupes of one cache at once ------------------------------------------------------------


def _dedupe_in_child(cache: str, env: str, ready, go_on, pause: bool, answer) -> None:
    """A dedupe in a real second process. ``pause``: it stops in its first link (holding the cache's
    dedupe lock, its walk done), says so (``ready``), and goes on 1.5 s after ``go_on``."""
    if pause:
        real = os.link

        def pausing(*args, **kwargs):
            os.link = real
            ready.set()
            go_on.wait(120)
            time.sleep(1.5)
            return real(*args, **kwargs)

        os.link = pausing
    else:
        ready.set()
        go_on.wait(120)  # set by the parent: both processes start their dedupe together
    answer.put(dedupe.one_copy(Path(cache), Path(env)).files)


def test_a_second_dedupe_waits_for_the_first_and_keeps_what_came_after_once(tmp_path):
    """Two real processes dedupe one cache. The first holds the dedupe (test seam: it pauses in its
    first link) while a second install unpacks a third copy and starts its own dedupe. The second
    must wait and then dedupe what the first could not see: every copy, and both envs, one inode."""
    context = multiprocessing.get_context("fork")
    cache = tmp_path / "uv"
    first = _copy(cache, "AAAA", age=1_000_000)
    env_a = _env(tmp_path, "a", _copy(cache, "BBBB"))
    inside, go_on, answers = context.Event(), context.Event(), context.Queue()
    one = context.Process(target=_dedupe_in_child, args=(str(cache), str(env_a), inside, go_on, True, answers))
    one.start()
    assert inside.wait(120), "the first dedupe never reached its first link"
    env_b = _env(tmp_path, "b", _copy(cache, "CCCC"))
    started = context.Event()
    two = context.Process(target=_dedupe_in_child, args=(str(cache), str(env_b), started, go_on, False, answers))
    two.start()
    assert started.wait(120)
    go_on.set()  # the second process starts its dedupe; the first goes on 1.5 s later
    one.join(180)
    two.join(180)
    assert (one.exitcode, two.exitcode) == (0, 0)
    assert sorted(answers.get(timeout=5) for _ in range(2)) == [len(LISTED)] * 2
    for relative in FILES:
        kept = _inode(first / relative)
        for copy in ("BBBB", "CCCC"):
            assert _inode(cache / "archive-v0" / copy / relative) == kept, (copy, relative)
        assert _inode(env_a / "site" / relative) == kept and _inode(env_b / "site" / relative) == kept, relative
    assert _names(cache / dedupe.SCRATCH) == [".lock"]


def test_two_dedupes_started_together_leave_one_consistent_cache(tmp_path):
    """Two real processes dedupe one cache at the same moment (three copies of a wheel of many
    files; each env built from its own copy): both finish, every copy ends up one inode per file
    with RECORD's bytes, each env's file is the kept one or still its own copy's (a dedupe relinks
    the env it is given), and nothing either run made is left behind."""
    many = {f"pkg/m{n:03}/f.py": f"n = {n}\n".encode() * 50 for n in range(120)}
    record = (
        "\n".join([*(f"{p},sha256={_hash(d)},{len(d)}" for p, d in many.items()), "pkg-1.0.dist-info/RECORD,,"]) + "\n"
    ).encode()
    context = multiprocessing.get_context("fork")
    cache = tmp_path / "uv"
    first = _copy(cache, "AAAA", many, record, age=1_000_000)
    envs, own = {}, {}
    for name, copy in (("a", "BBBB"), ("b", "CCCC")):
        copy = _copy(cache, copy, many, record)
        envs[name] = tmp_path / name
        for relative in many:
            (envs[name] / relative).parent.mkdir(parents=True, exist_ok=True)
            os.link(copy / relative, envs[name] / relative)
        own[name] = {relative: _inode(copy / relative) for relative in many}
    go, answers = context.Event(), context.Queue()
    ready = [context.Event(), context.Event()]
    runs = [
        context.Process(target=_dedupe_in_child, args=(str(cache), str(envs[name]), event, go, False, answers))
        for name, event in zip("ab", ready, strict=True)
    ]
    for run in runs:
        run.start()
    assert all(event.wait(120) for event in ready)
    go.set()
    for run in runs:
        run.join(300)
    assert [run.exitcode for run in runs] == [0, 0]
    assert sorted(answers.get(timeout=5) for _ in runs)[1] == 2 * (len(many) + 1)  # all by the one that went first
    for relative, data in many.items():
        kept = _inode(first / relative)
        assert all(_inode(cache / "archive-v0" / copy / relative) == kept for copy in ("BBBB", "CCCC")), relative
        for name, env in envs.items():
            assert _inode(env / relative) in (kept, own[name][relative]) and (env / relative).read_bytes() == data
    for copy in ("AAAA", "BBBB", "CCCC"):
        assert _names(cache / "archive-v0" / copy) == sorted([*many, "pkg-1.0.dist-info/RECORD"])
    assert _names(cache / dedupe.SCRATCH) == [".lock"]
    assert [p for env in envs.values() for p in _names(env) if "tfgpu" in p] == []


# -- a dedupe killed half-way --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "nth"),
    [("link", 1), ("link", 2), ("replace", 1), ("replace", 3)],
    ids=["after-the-first-link", "after-the-held-link", "after-the-first-rename", "after-the-third-rename"],
)
def test_a_dedupe_killed_anywhere_leaves_nothing_uv_would_install(tmp_path, call, nth):
    """A dedupe (with an env to relink) is killed (SIGKILL) right after its ``nth`` ``os.<call>``:
    each unpacked copy must hold only the files RECORD lists (uv links every file of one into each
    env it installs it into), every file its own bytes; the next run finishes the work and empties
    what the killed one left in its scratch directory."""
    cache = tmp_path / "uv"
    first = _copy(cache, "AAAA", age=1_000_000)
    second = _copy(cache, "BBBB")
    env = _env(tmp_path, "env", second)
    script = textwrap.dedent(
        f"""
        import os, signal
        from pathlib import Path
        from tfgpu.cache import dedupe
        real, calls = os.{call}, []
        def killing(*args, **kwargs):
            result = real(*args, **kwargs)
            calls.append(args)
            if len(calls) == {nth}:
                os.kill(os.getpid(), signal.SIGKILL)
            return result
        os.{call} = killing
        dedupe.one_copy(Path({str(cache)!r}), Path({str(env)!r}))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr
    for copy in (first, second):
        assert _names(copy) == LISTED
        assert all((copy / relative).read_bytes() == data for relative, data in FILES.items())
    assert dedupe.one_copy(cache).files >= 1
    assert _names(cache / dedupe.SCRATCH) == [".lock"]
    for relative, data in FILES.items():
        assert _inode(second / relative) == _inode(first / relative) and (second / relative).read_bytes() == data
        assert (env / "site" / relative).read_bytes() == data
    assert [p for p in _names(env) if "tfgpu" in p] == []


# -- the env's link: the door links only the file checked ---------------------------------------


def test_the_env_door_links_only_the_file_it_was_told_and_never_through_a_link(tmp_path):
    """``writes.put_hardlink`` from an open directory: the checked file becomes the env's name; a
    name that is now another file, or a symbolic link to the checked file, leaves the env's file."""
    from tfgpu.doors import untrusted
    from tfgpu.envs import writes

    held = tmp_path / "held"
    held.mkdir()
    (held / "kept").write_bytes(BODY)
    (held / "other").write_bytes(BODY)
    (held / "link").symlink_to(held / "kept")
    env = tmp_path / "env"
    (env / "site").mkdir(parents=True)
    (env / "site" / "mod.py").write_bytes(BODY)
    before = _inode(env / "site" / "mod.py")
    info = os.lstat(held / "kept")
    checked = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
    directory = untrusted.open_directory(held, untrusted.CACHE)
    try:
        for name in ("other", "link"):
            assert writes.put_hardlink(env / "site" / "mod.py", (directory, name), checked, env) is False
            assert _inode(env / "site" / "mod.py") == before
        assert writes.put_hardlink(env / "site" / "mod.py", (directory, "kept"), checked, env) is True
    finally:
        os.close(directory)
    assert _inode(env / "site" / "mod.py") == _inode(held / "kept")
    assert _names(env) == ["site/mod.py"]
