"""Attack on the uv cache dedupe (tfgpu/cache/dedupe.py, ``writes.put_hardlink``), the shell entry
(tfgpu/envs/shell_entry.py) and pip's progress reader (tfgpu/engines/pip_progress.py).

What must hold: the dedupe links a file only where both copies are proved the same and only
inside the tool's uv cache and the env it is given, never through a link out of the cache, never a
file swapped in after the check, and an interrupted dedupe leaves nothing uv would install; the
shell a user enters reads their own start-up files; pip's progress reader never crashes or hangs
on what pip (or anything on its terminal) prints.
"""

from __future__ import annotations

import base64
import hashlib
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hangguard import hang_guard

from tfgpu.cache import dedupe

BODY = b"print('the same module in both copies')\n" * 64


def _hash(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _copy(archive: Path, name: str, files: dict[str, bytes], record: bytes | None = None) -> Path:
    """One unpacked wheel under ``archive`` (``pkg-1.0.dist-info/RECORD`` listing ``files``)."""
    copy = archive / name
    for relative, data in files.items():
        (copy / relative).parent.mkdir(parents=True, exist_ok=True)
        (copy / relative).write_bytes(data)
    if record is None:
        lines = [f"{relative},sha256={_hash(data)},{len(data)}" for relative, data in files.items()]
        record = ("\n".join([*lines, "pkg-1.0.dist-info/RECORD,,"]) + "\n").encode()
    (copy / "pkg-1.0.dist-info").mkdir(parents=True, exist_ok=True)
    (copy / "pkg-1.0.dist-info" / "RECORD").write_bytes(record)
    return copy


def _older(path: Path) -> None:
    """``path`` becomes the first copy (the one kept): the older one."""
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))


def _cache(tmp_path: Path) -> tuple[Path, Path]:
    cache = tmp_path / "uv"
    archive = cache / "archive-v0"
    archive.mkdir(parents=True)
    return cache, archive


def _inode(path: Path) -> tuple[int, int]:
    info = os.lstat(path)
    return info.st_dev, info.st_ino


# -- 1. a directory of the second copy is a link out of the cache -------------------------------
# _same checked only the last component of each listed path (lstat), so pkg/mod.py through a
# `pkg -> /elsewhere` link was "a plain file of the right size and hash", and _relink replaced
# the file out there with a hard link into the cache (and left its temporary beside it).


def test_a_directory_link_in_the_second_copy_never_carries_a_link_out_of_the_cache(tmp_path):
    """The second copy's ``pkg`` is a symbolic link to a user's directory holding a file with the
    very bytes RECORD lists: the user's file must stay the file it was (same inode), nothing new
    may appear beside it."""
    cache, archive = _cache(tmp_path)
    mine = tmp_path / "home" / "project"
    mine.mkdir(parents=True)
    (mine / "mod.py").write_bytes(BODY)
    before = _inode(mine / "mod.py")
    first = _copy(archive, "AAAA", {"pkg/mod.py": BODY})
    second = _copy(archive, "BBBB", {"other/x.txt": b""}, record=(first / "pkg-1.0.dist-info" / "RECORD").read_bytes())
    (second / "pkg").symlink_to(mine, target_is_directory=True)
    _older(first)
    dedupe.one_copy(cache)
    assert _inode(mine / "mod.py") == before, "the user's file outside the cache was replaced by a link"
    assert sorted(p.name for p in mine.iterdir()) == ["mod.py"]


def test_a_directory_link_in_the_first_copy_never_brings_a_foreign_file_into_an_env(tmp_path):
    """The first (kept) copy's ``pkg`` links out of the cache to a user's file with the listed
    bytes: neither the second copy nor the env may become another name of that foreign file."""
    cache, archive = _cache(tmp_path)
    mine = tmp_path / "home" / "project"
    mine.mkdir(parents=True)
    (mine / "mod.py").write_bytes(BODY)
    second = _copy(archive, "BBBB", {"pkg/mod.py": BODY})
    first = archive / "AAAA"
    (first / "pkg-1.0.dist-info").mkdir(parents=True)
    (first / "pkg-1.0.dist-info" / "RECORD").write_bytes((second / "pkg-1.0.dist-info" / "RECORD").read_bytes())
    (first / "pkg").symlink_to(mine, target_is_directory=True)
    _older(first)
    env = tmp_path / "env"
    (env / "site").mkdir(parents=True)
    os.link(second / "pkg" / "mod.py", env / "site" / "mod.py")
    dedupe.one_copy(cache, env)
    foreign = _inode(mine / "mod.py")
    assert _inode(second / "pkg" / "mod.py") != foreign
    assert _inode(env / "site" / "mod.py") != foreign
    assert os.lstat(mine / "mod.py").st_nlink == 1


# -- 2. a file changed between the check and the link -------------------------------------------


def test_a_first_copy_file_swapped_after_its_hash_is_never_linked_into_the_env(tmp_path, monkeypatch):
    """The kept copy's file is replaced (renamed over, same size, other bytes) right after the
    dedupe hashed it, as a concurrent writer would: the env must keep the bytes RECORD lists."""
    cache, archive = _cache(tmp_path)
    first = _copy(archive, "AAAA", {"pkg/mod.py": BODY})
    second = _copy(archive, "BBBB", {"pkg/mod.py": BODY})
    _older(first)
    env = tmp_path / "env"
    env.mkdir()
    os.link(second / "pkg" / "mod.py", env / "mod.py")
    real = dedupe._digest
    evil = b"import os; os.system('touch PWNED')#"
    evil += b"#" * (len(BODY) - len(evil))
    kept = _inode(first / "pkg" / "mod.py")

    def swapping(directory, name, info):
        digest = real(directory, name, info)
        if (info.st_dev, info.st_ino) == kept and not (tmp_path / "swapped").exists():
            (tmp_path / "swapped").write_bytes(evil)
            os.replace(tmp_path / "swapped", first / "pkg" / "mod.py")
        return digest

    monkeypatch.setattr(dedupe, "_digest", swapping)
    dedupe.one_copy(cache, env)
    assert (env / "mod.py").read_bytes() == BODY, "a file swapped in after the check was linked into the env"
    assert (second / "pkg" / "mod.py").read_bytes() == BODY


def test_a_file_swapped_for_a_fifo_after_the_check_leaves_the_copy_and_no_traceback(tmp_path, monkeypatch):
    """The second copy's file becomes a FIFO between the dedupe's ``lstat`` and its read (uv or a
    user at work in the cache): the dedupe must neither hang nor raise; that copy stays as it is."""
    cache, archive = _cache(tmp_path)
    first = _copy(archive, "AAAA", {"pkg/mod.py": BODY})
    second = _copy(archive, "BBBB", {"pkg/mod.py": BODY})
    _older(first)
    real = dedupe._plain
    target = second / "pkg" / "mod.py"

    def swapping(directory, name, size):
        info = real(directory, name, size)
        opened = os.fstat(directory)
        if (opened.st_dev, opened.st_ino) == _inode(target.parent) and name == target.name and not target.is_fifo():
            target.unlink()
            os.mkfifo(target)
        return info

    monkeypatch.setattr(dedupe, "_plain", swapping)
    done = dedupe.one_copy(cache)
    assert done.files == 0
    assert target.is_fifo()


def test_a_copy_removed_while_the_dedupe_runs_is_skipped_not_a_traceback(tmp_path, monkeypatch):
    """A copy found by the walk is gone when its age is read (``uv cache prune`` in another
    terminal): the dedupe goes on with what is left, no ``FileNotFoundError``."""
    cache, archive = _cache(tmp_path)
    first = _copy(archive, "AAAA", {"pkg/mod.py": BODY})
    _copy(archive, "BBBB", {"pkg/mod.py": BODY})
    _older(first)
    real = dedupe.untrusted.read_bytes

    def vanishing(path, kind):
        data = real(path, kind)
        if "BBBB" in str(path) and (archive / "BBBB").exists():
            import shutil

            shutil.rmtree(archive / "BBBB")
        return data

    monkeypatch.setattr(dedupe.untrusted, "read_bytes", vanishing)
    assert dedupe.one_copy(cache).files == 0


# -- 3. a RECORD that lists one big file again and again ----------------------------------------


def test_a_record_listing_one_file_thousands_of_times_is_hashed_once(tmp_path, monkeypatch):
    """A RECORD (well under the 64 MiB cap) that lists one 4 MB file 4000 times: 32 GB of hashing
    before the fix; each copy of the file is hashed once (counted), and the file is linked once."""
    cache, archive = _cache(tmp_path)
    big = os.urandom(4 << 20)
    line = f"pkg/big.bin,sha256={_hash(big)},{len(big)}\n".encode()
    record = line * 4000 + b"pkg-1.0.dist-info/RECORD,,\n"
    first = _copy(archive, "AAAA", {"pkg/big.bin": big}, record=record)
    _copy(archive, "BBBB", {"pkg/big.bin": big}, record=record)
    _older(first)
    hashed = []
    real_digest = dedupe._digest

    def counting(directory, name, info):
        hashed.append(name)
        return real_digest(directory, name, info)

    monkeypatch.setattr(dedupe, "_digest", counting)
    done = dedupe.one_copy(cache)
    assert hashed.count("big.bin") == 2, hashed  # once in each copy, not once per row
    assert done.files == 2  # big.bin and RECORD


# -- 4. SIGKILL in the middle of the dedupe ------------------------------------------------------
# _relink made its hard link beside the cache's file (`.mod.py.<pid>.tfgpu-tmp` inside uv's
# unpacked wheel) and renamed it over: a kill between the two left that name in the copy, and uv
# links every file of an unpacked wheel into each env it installs it into.


def test_sigkill_between_link_and_rename_leaves_nothing_in_the_unpacked_wheel(tmp_path):
    """The dedupe is killed (SIGKILL) right before it renames its new link into place: no file may
    be left inside either unpacked copy that RECORD does not list (uv would install it), and a
    second run finishes the dedupe."""
    cache, archive = _cache(tmp_path)
    first = _copy(archive, "AAAA", {"pkg/mod.py": BODY, "pkg/b.py": BODY + b"#"})
    second = _copy(archive, "BBBB", {"pkg/mod.py": BODY, "pkg/b.py": BODY + b"#"})
    _older(first)
    script = textwrap.dedent(
        f"""
        import os, signal, sys
        from pathlib import Path
        from tfgpu.cache import dedupe
        os.replace = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
        dedupe.one_copy(Path({str(cache)!r}))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr
    for copy in (first, second):
        names = sorted(str(p.relative_to(copy)) for p in copy.rglob("*") if not p.is_dir())
        assert names == ["pkg-1.0.dist-info/RECORD", "pkg/b.py", "pkg/mod.py"], names
    assert dedupe.one_copy(cache).files == 3
    assert _inode(first / "pkg" / "mod.py") == _inode(second / "pkg" / "mod.py")
    leftovers = [p for p in cache.rglob("*") if p.name.endswith(".tfgpu-tmp")]
    assert leftovers == []


# -- 5. the happy path still holds ---------------------------------------------------------------


def test_two_honest_copies_and_the_env_end_up_one_inode(tmp_path):
    """Control: two copies the same, an env linked to the second: all three names one inode."""
    cache, archive = _cache(tmp_path)
    first = _copy(archive, "AAAA", {"pkg/mod.py": BODY})
    second = _copy(archive, "BBBB", {"pkg/mod.py": BODY})
    _older(first)
    env = tmp_path / "env"
    env.mkdir()
    os.link(second / "pkg" / "mod.py", env / "mod.py")
    done = dedupe.one_copy(cache, env)
    assert done.files == 2
    assert _inode(env / "mod.py") == _inode(first / "pkg" / "mod.py") == _inode(second / "pkg" / "mod.py")
    assert [p for p in cache.rglob("*") if p.name.endswith(".tfgpu-tmp")] == []


# -- 6. pip's progress reader against garbled output ---------------------------------------------


class _Reporter:
    def __init__(self):
        self.events = []

    def transfer(self, label, done, total):
        self.events.append((label, done, total))


@pytest.mark.parametrize(
    "line",
    [
        "   ━━━━━━━━━━━━━━━━━━━━ 1.0/2.0 ZB 1 MB/s",  # a unit the pattern takes and the table lacks
        "   ━━━━━━━━━━━━━━━━━━━━ 1.0/2.0 YB 1 MB/s",
        "   ━━━━━━━━━━━━━━━━━━━━ 1/" + "9" * 400 + " MB",  # float() of it is inf: int(inf) raises
        "Progress 1 of " + "9" * 5000,  # int() of over 4300 digits raises ValueError
    ],
)
def test_pip_progress_never_crashes_on_a_garbled_bar(line):
    """pip's terminal shows a bar with a unit rich never draws, or a number too large for a float
    or for ``int``: the reader must ignore it, never raise."""
    from tfgpu.engines.pip_progress import PipProgress

    reporter = _Reporter()
    progress = PipProgress(reporter)
    progress.feed("Downloading https://example.invalid/x-1.0-py3-none-any.whl (3 MB)\n")
    progress.feed(line + "\r")
    progress.finish()
    for _, done, total in reporter.events:
        assert 0 <= done <= total < 10**40


def test_pip_progress_reads_a_long_run_of_digits_in_linear_time():
    """A line of 600,000 digits (what a runaway child could print on pip's terminal) after a
    download starts: the bar pattern must not backtrack over it quadratically (minutes at 60,000
    digits, hours at this size: a hang the guard catches)."""
    from tfgpu.engines.pip_progress import PipProgress

    progress = PipProgress(_Reporter())
    progress.feed("Downloading https://example.invalid/x-1.0-py3-none-any.whl (3 MB)\n")
    with hang_guard("pip's progress reader on 600,000 digits"):
        progress.feed("━━━ " + "1" * 600_000 + "\n")


def test_pip_progress_label_carries_no_terminal_escapes():
    """A download URL whose file name percent-encodes ESC and BEL (``%1b]0;title%07``): the label the
    terminal bar shows must hold no control character."""
    from tfgpu.engines.pip_progress import label_of

    label = label_of("https://example.invalid/%1b%5d0%3bowned%07%1b%5b2J-x.whl")
    assert not any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in label), repr(label)


# -- 7. the shell entry: a .zshenv that moves ZDOTDIR --------------------------------------------


@pytest.mark.skipif(not Path("/usr/bin/zsh").exists() and not os.environ.get("ZSH"), reason="zsh")
def test_zsh_entry_reads_the_zshrc_where_the_users_zshenv_moved_zdotdir(tmp_path):
    """A common zsh set-up: ``~/.zshenv`` sets ``ZDOTDIR=$XDG_CONFIG_HOME/zsh`` and the real
    ``.zshrc`` lives there. The shell ``tfgpu-install shell`` starts must run that ``.zshrc`` and
    end with the ZDOTDIR the user's ``.zshenv`` chose, as a plain ``zsh -i`` would."""
    import shutil

    from tfgpu.envs import shell_entry

    zsh = shutil.which("zsh")
    if zsh is None:
        pytest.skip("zsh")
    home = tmp_path / "home with space"
    config = home / ".config" / "zsh"
    config.mkdir(parents=True)
    (home / ".zshenv").write_text('ZDOTDIR="$HOME/.config/zsh"\n')
    (config / ".zshrc").write_text("USER_ZSHRC_RAN=yes\n")
    prefix = tmp_path / "env"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "activate").write_text("deactivate() { :; }\nACTIVATED=yes\n")

    class Target:
        kind = "venv"

    Target.prefix = prefix
    env = {"HOME": str(home), "PATH": os.environ["PATH"], "TERM": "dumb"}
    old = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        with shell_entry.entered(Target, zsh) as (argv, environ):
            done = subprocess.run(
                argv,
                input=b'print -r -- "R=$USER_ZSHRC_RAN A=$ACTIVATED Z=$ZDOTDIR"; exit\n',
                capture_output=True,
                env=environ,
                timeout=60,
            )
    finally:
        os.environ.clear()
        os.environ.update(old)
    out = done.stdout.decode("utf-8", "replace")
    assert f"R=yes A=yes Z={config}" in out, (out, done.stderr)


# -- 8. more of the cache: hard links out, a FIFO RECORD, a cache with nothing twice --------------


def test_a_second_copy_file_hard_linked_to_a_users_file_leaves_that_file_alone(tmp_path):
    """A file of the second copy is another name of a user's file (a hard link, same bytes): the
    dedupe may replace the cache's name, never the user's file (its inode and bytes stay)."""
    cache, archive = _cache(tmp_path)
    first = _copy(archive, "AAAA", {"pkg/mod.py": BODY})
    second = _copy(archive, "BBBB", {"pkg/mod.py": BODY})
    _older(first)
    mine = tmp_path / "home" / "mod.py"
    mine.parent.mkdir()
    os.unlink(second / "pkg" / "mod.py")
    mine.write_bytes(BODY)
    os.link(mine, second / "pkg" / "mod.py")
    before = _inode(mine)
    env = tmp_path / "env"
    env.mkdir()
    dedupe.one_copy(cache, env)
    assert _inode(mine) == before and mine.read_bytes() == BODY
    assert _inode(second / "pkg" / "mod.py") == _inode(first / "pkg" / "mod.py")


def test_a_cache_with_nothing_twice_gets_no_scratch_directory(tmp_path):
    """Every pip build with --find-links runs the dedupe: a uv cache (or a link to one elsewhere)
    with no wheel unpacked twice is left exactly as it was."""
    cache, archive = _cache(tmp_path)
    _copy(archive, "AAAA", {"pkg/mod.py": BODY})
    before = sorted(str(p) for p in cache.rglob("*"))
    assert dedupe.one_copy(cache).files == 0
    assert sorted(str(p) for p in cache.rglob("*")) == before


def test_cache_info_with_a_fifo_record_and_a_linked_dist_info_neither_hangs_nor_follows(cli, sandbox, tmp_path):
    """``cache info`` reads every unpacked wheel's RECORD (unpacked_twice): one is a FIFO, another
    copy's dist-info is a link to a user's directory. It must answer (no hang, no traceback) and
    count nothing through the link."""
    uv = sandbox / "cache" / "uv" / "archive-v0"
    uv.mkdir(parents=True)
    first = _copy(uv, "AAAA", {"pkg/mod.py": BODY})
    second = _copy(uv, "BBBB", {"pkg/mod.py": BODY})
    os.unlink(second / "pkg-1.0.dist-info" / "RECORD")
    os.mkfifo(second / "pkg-1.0.dist-info" / "RECORD")
    third = uv / "CCCC"
    third.mkdir()
    (third / "pkg-1.0.dist-info").symlink_to(first / "pkg-1.0.dist-info", target_is_directory=True)
    done = cli("cache", "info", "--json")
    assert done.code == 0, done.out
    import json

    kinds = [k for k in json.loads(done.out)["kinds"] if k.get("kind") == "uv"]
    assert kinds and all(k["unpacked_twice"] == {} for k in kinds), done.out


def test_a_kept_file_swapped_after_the_cache_relink_is_never_linked_into_the_env(tmp_path, monkeypatch):
    """The kept copy's file is replaced (other bytes, same size) after the cache's names were
    relinked and before the env's are: the env must keep the bytes RECORD lists."""
    cache, archive = _cache(tmp_path)
    first = _copy(archive, "AAAA", {"pkg/mod.py": BODY})
    second = _copy(archive, "BBBB", {"pkg/mod.py": BODY})
    _older(first)
    env = tmp_path / "env"
    env.mkdir()
    os.link(second / "pkg" / "mod.py", env / "mod.py")
    real = dedupe._env_relinked

    def swapping(*args):
        (tmp_path / "swapped").write_bytes(b"#" * len(BODY))
        os.replace(tmp_path / "swapped", first / "pkg" / "mod.py")
        return real(*args)

    monkeypatch.setattr(dedupe, "_env_relinked", swapping)
    dedupe.one_copy(cache, env)
    assert (env / "mod.py").read_bytes() == BODY


def test_pip_progress_survives_binary_ansi_and_lines_without_end():
    """What pip's terminal may carry: random bytes (NUL, lone ESC, C1 controls, invalid UTF-8 read
    with replacement), half escape sequences, megabytes with no newline, bars with odd numbers:
    never an exception, every reported ``done`` within ``0..total``, and an end (under a hang guard)."""
    import random

    from tfgpu.engines.pip_progress import PipProgress

    rng = random.Random(20261202)
    reporter = _Reporter()
    progress = PipProgress(reporter)
    pieces = [
        "Downloading https://example.invalid/x-1.0-py3-none-any.whl (3 MB)\n",
        "\x1b[2K\x1b[1G   ━━━━━━━━ 1.5/3.1 MB 2 MB/s eta 0:00:01\r",
        "\x1b]0;" + "x" * 70_000,
        "━━━ 0.0/0.0 MB\r━━━ 9/1 kB\r━━━ 1e9/2 MB\r",
        "Progress 5 of 4\nProgress -1 of 3\nProgress 1 of 0\n",
        "\x00\x9b31m\x1b[\x1b\x1b\x1b",
        "1" * 200_000,
        "Downloading \n",
        "Downloading " + "%" * 50_000 + "\n",
    ]
    with hang_guard("pip's progress reader on 300 hostile pieces"):
        for _ in range(300):
            if rng.random() < 0.5:
                progress.feed(rng.choice(pieces))
            else:
                chunk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 4000)))
                progress.feed(chunk.decode("utf-8", "replace"))
        progress.finish()
    for _, done, total in reporter.events:
        assert 0 <= done <= total


def test_after_a_dedupe_the_cache_holds_only_entries_uv_makes(tmp_path):
    """The dedupe's scratch directory at the top of uv's cache: the cache must still read as a uv
    cache (``not_a_uv_cache``: only uv's entries at its top), or a later run would refuse it as the
    user's ``UV_CACHE_DIR``, or ``cache prune`` leave it."""
    from tfgpu.cache.uvdir import UV_TAG, not_a_uv_cache

    cache, archive = _cache(tmp_path)
    (cache / "CACHEDIR.TAG").write_text(UV_TAG + "\n")
    first = _copy(archive, "AAAA", {"pkg/mod.py": BODY})
    _copy(archive, "BBBB", {"pkg/mod.py": BODY})
    _older(first)
    assert dedupe.one_copy(cache).files == 2
    assert not_a_uv_cache(cache) is None, not_a_uv_cache(cache)


def test_real_uv_after_a_sigkilled_dedupe_installs_no_stray_file(tmp_path):
    """Real uv: a wheel from two --find-links directories is unpacked twice; the dedupe is killed
    (SIGKILL) between making a link and renaming it into place; uv then installs that wheel again
    from the cache. The new env must hold only the wheel's files (uv links every file of the
    unpacked copy: a leftover link inside it would land in site-packages, listed in no RECORD)."""
    import wheelhouse

    from tfgpu.engines.uv import find_uv

    uv = find_uv()
    uv_dir = tmp_path / "uv"
    one, two = tmp_path / "one", tmp_path / "two"
    wheelhouse.wheel(
        one, "twinpkg", "1.0", {"twinpkg/__init__.py": b"x = 1\n", "twinpkg/data.bin": os.urandom(1 << 16)}
    )
    two.mkdir()
    (two / next(one.glob("*.whl")).name).write_bytes(next(one.glob("*.whl")).read_bytes())

    def install(env: str, source: Path) -> Path:
        subprocess.run([uv, "venv", str(tmp_path / env), "--python", sys.executable, "--no-config", "-q"], check=True)
        python = str(tmp_path / env / "bin" / "python")
        argv = [uv, "pip", "install", "-q", "--no-config", "--python", python, "--cache-dir", str(uv_dir)]
        subprocess.run([*argv, "--find-links", str(source), "--offline", "twinpkg"], check=True)
        return next((tmp_path / env).rglob("site-packages"))

    install("a", one)
    install("b", two)
    script = textwrap.dedent(
        f"""
        import os, signal
        from pathlib import Path
        from tfgpu.cache import dedupe
        os.replace = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
        dedupe.one_copy(Path({str(uv_dir)!r}))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr
    for env, source in (("c", one), ("d", two)):
        site = install(env, source)
        stray = [p.name for p in site.rglob("*") if "tfgpu" in p.name]
        assert stray == [], stray


def test_a_record_rewritten_after_it_was_read_leaves_both_copies(tmp_path, monkeypatch):
    """The second copy's RECORD is rewritten (same size, other bytes) after the dedupe grouped the
    copies by it: the copies are no longer proved the same, so nothing of them is linked."""
    cache, archive = _cache(tmp_path)
    first = _copy(archive, "AAAA", {"pkg/mod.py": BODY})
    second = _copy(archive, "BBBB", {"pkg/mod.py": BODY})
    _older(first)
    real = dedupe._listed
    record = second / "pkg-1.0.dist-info" / "RECORD"

    def rewriting(text):
        data = record.read_bytes()
        (tmp_path / "new").write_bytes(data.replace(b"pkg/mod.py", b"pkg/MOD.py"))
        os.replace(tmp_path / "new", record)
        return real(text)

    monkeypatch.setattr(dedupe, "_listed", rewriting)
    assert dedupe.one_copy(cache).files == 0
    assert b"pkg/MOD.py" in record.read_bytes()
    assert _inode(first / "pkg" / "mod.py") != _inode(second / "pkg" / "mod.py")


def test_a_scratch_directory_planted_as_a_link_out_is_never_written_through(tmp_path):
    """``.tmp_tfgpu_dedupe`` in uv's cache is a link to a user's directory (holding their files):
    the dedupe must not make its links there nor sweep that directory; it leaves the cache as is."""
    cache, archive = _cache(tmp_path)
    first = _copy(archive, "AAAA", {"pkg/mod.py": BODY})
    _copy(archive, "BBBB", {"pkg/mod.py": BODY})
    _older(first)
    mine = tmp_path / "home" / "work"
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("keep me\n")
    (cache / dedupe.SCRATCH).symlink_to(mine, target_is_directory=True)
    assert dedupe.one_copy(cache).files == 0
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
