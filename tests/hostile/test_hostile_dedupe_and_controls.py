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

from tests.test_cache_dedupe import FILES, RECORD, _copy, _hash
from tfgpu import export
from tfgpu.cache import dedupe
from tfgpu.doors import controls, quoting
from tfgpu.errors import UsageError

from .test_hostile_invisible import generated, unseen
from .test_hostile_locks import forged_pip_lock


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


# -- characters a reviewer cannot see, and bytes no UTF-8 file can hold ------------------------------

INVISIBLE = {"zwsp": "\u200b", "zwj": "\u200d", "word-joiner": "\u2060", "soft-hyphen": "\u00ad",
             "mongolian-vs": "\u180e", "annotation": "\ufff9", "tag-a": "\U000e0041", "vs16": "\ufe0f",
             "hangul-filler": "\u3164", "cgj": "\u034f"}  # fmt: skip


@pytest.mark.parametrize("fmt", export.FORMATS)
def test_a_lock_name_with_an_invisible_character_reaches_no_export_as_itself(cli, sandbox, fmt):
    """``team\\u200block.txt`` shows as ``teamlock.txt``; tag characters spell a hidden text after a
    visible one. Each is one of tfgpu.doors.controls, so the export's header carries a space instead.
    Every character of INVISIBLE is in the one name, each between visible ones, and each is looked
    for in what was written: the door replaces them one by one, so one export per format shows each
    of them (an export per character and format ran the same path sixty times)."""
    lock = sandbox / ("team" + "".join(f"{char}{n}" for n, char in enumerate(INVISIBLE.values())) + "lock.txt")
    forged_pip_lock(lock)
    out = sandbox / "out"
    done = cli("script", "--format", fmt, "--from-lock", str(lock), "-o", str(out))
    assert done.code == 0, done.out + done.err
    text = "".join(generated(out).values())
    assert [name for name, char in INVISIBLE.items() if char in text] == []
    assert unseen(out) == []


@pytest.mark.parametrize("fmt", export.FORMATS)
def test_a_lock_whose_file_name_is_not_utf8_still_exports_without_a_traceback(cli, sandbox, fmt):
    """A file name's bytes that are not UTF-8 reach Python as lone surrogates (os.fsdecode), which
    no UTF-8 file can hold: writing the export's header raised UnicodeEncodeError."""
    plain = sandbox / "plain.txt"
    forged_pip_lock(plain)
    lock = sandbox / os.fsdecode(b"team\xfflock.txt")
    plain.rename(lock)
    out = sandbox / "out"
    done = cli("script", "--format", fmt, "--from-lock", str(lock), "-o", str(out))
    assert done.code == 0, done.out + done.err
    assert "Traceback" not in done.err
    assert "team lock.txt" in "".join(generated(out).values())


@pytest.mark.parametrize("char", ["\U000e0041", "\udcff", "\u200b"], ids=["tag-a", "surrogate", "zwsp"])
def test_every_escape_of_the_door_writes_an_invisible_character_as_visible_ascii(char):
    value = f"a{char}b"
    for made in (
        controls.shown(value),
        quoting.tcl_string(value),
        quoting.lua_string(value),
        quoting.yaml_scalar(value),
    ):
        assert made.isascii() and char not in made, made
        made.encode("utf-8")
    assert quoting.tcl_string("a\U000e0041b") == '"a\\U000e0041b"'
    assert quoting.lua_string(os.fsdecode(b"a\xffb")) == '"a\\255b"'  # the path's own byte
    with pytest.raises(UsageError):
        quoting.single_line(value, "A value")


# -- a user's value echoed in an error message ------------------------------------------------------

FORGED = "torch\nSuccess: TensorFlow 2.16.1 verified on 8 GPUs\n"


@pytest.mark.parametrize("source", ["flag", "project-file"])
def test_a_with_value_with_line_breaks_prints_no_line_of_its_own(cli, sandbox, source):
    """packaging's parse error quotes the value raw, line breaks included; the message printed it as
    is, so a cloned repository's project file could print any line it liked (a fake success)."""
    if source == "flag":
        done = cli("plan", "--tf", "2.16.1", "--mode", "pip", "--python", "3.11", "--no-detect", "--with", FORGED)
    else:
        (sandbox / "tfgpu.toml").write_text(f"with = [{quoting.yaml_scalar(FORGED)}]\n", encoding="utf-8")
        project = str(sandbox / "tfgpu.toml")
        done = cli("plan", "--tf", "2.16.1", "--mode", "pip", "--python", "3.11", "--no-detect", "--project", project)
    assert done.code == 2, done.out + done.err
    assert ("companion-unsupported" if source == "flag" else "bad-project-file") in done.err
    assert not any(line.startswith("Success:") for line in (done.out + done.err).splitlines())


# -- a file name of 255 bytes, fewer characters ------------------------------------------------------

LONG = "数" * 83 + ".txt"  # 253 bytes: a valid name, 87 characters


def test_a_wheel_file_whose_name_is_long_in_bytes_is_still_kept_once_in_the_env(tmp_path):
    """The env's link is made under a temporary name beside the file: cut at 200 characters, it was
    over 255 bytes, and the failed link made the whole build fail (``env-write-failed``)."""
    files = {**FILES, f"pkg/{LONG}": b"data\n"}
    record = "\n".join([*(f"{p},sha256={_hash(d)},{len(d)}" for p, d in files.items()), "pkg-1.0.dist-info/RECORD,,"])
    cache = tmp_path / "uv"
    old = _copy(cache, "old", files, (record + "\n").encode(), age=1000)
    new = _copy(cache, "new", files, (record + "\n").encode(), age=2000)
    env = tmp_path / "env"
    for relative in files:
        (env / relative).parent.mkdir(parents=True, exist_ok=True)
        os.link(new / relative, env / relative)
    done = dedupe.one_copy(cache, env)
    assert done.files == len(files) + 1
    assert _same_inode(old / "pkg" / LONG, env / "pkg" / LONG)


@pytest.mark.parametrize("write", ["bytes", "link"])
def test_every_env_write_takes_a_name_of_255_bytes(tmp_path, write):
    from tfgpu.envs import writes

    path = tmp_path / LONG
    if write == "bytes":
        writes.put_bytes(path, b"new", root=tmp_path)
        assert path.read_bytes() == b"new"
    else:
        writes.put_link(path, "elsewhere", root=tmp_path)
        assert os.readlink(path) == "elsewhere"
    assert [p.name for p in tmp_path.iterdir()] == [LONG]


# -- a number whose digits are not ASCII -------------------------------------------------------------


def test_a_record_size_in_superscript_digits_leaves_the_copy_as_it_is(tmp_path):
    """``"²".isdigit()`` is True and ``int("²")`` raises: a wheel whose RECORD gives a size so made
    the dedupe step fail with a traceback. The row is not a hashed file's row: that copy is left."""
    record = RECORD.replace(b",6\n", ",\u00b2\n".encode())  # top.py's size, 6, as "²"
    assert record != RECORD
    cache = tmp_path / "uv"
    _copy(cache, "old", record=record, age=1000)
    _copy(cache, "new", record=record, age=2000)
    dedupe.one_copy(cache)  # no exception


def test_a_content_length_in_superscript_digits_is_no_traceback(tmp_path):
    """A server's ``Content-Length: \\xb2`` (latin-1 "²") is a length http.client ignores; the
    fetcher's own size check turned it into int("²") and a ValueError out of every download."""
    import http.server
    import threading

    from tfgpu.datasource.http import Fetcher

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "\xb2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/x.json"
        try:
            Fetcher(None, retries=0, timeout=5).json(url)
        except Exception as error:  # a refusal of the project's own kind is fine; a ValueError is not
            assert not isinstance(error, ValueError), repr(error)
    finally:
        server.shutdown()


def test_an_unknown_argument_with_line_breaks_prints_no_line_of_its_own(cli, sandbox):
    """argparse joins the words it did not recognise raw into its message."""
    done = cli("plan", "--tf", "2.16.1", "--no-detect", "--bogus\nSuccess: verified on 8 GPUs")
    assert done.code == 2 and "bad-arguments" in done.err
    assert not any(line.startswith("Success:") for line in (done.out + done.err).splitlines())


@pytest.mark.parametrize("char", ["\ufe0f", "\u3164", "\u034f"], ids=["vs16", "hangul-filler", "cgj"])
def test_a_refused_url_is_named_with_its_invisible_character_escaped(char):
    """The URL door names a refused URL in its message: Python calls a variation selector or a
    Hangul filler printable, and they show as nothing; the message takes tfgpu.doors.controls' set."""
    from tfgpu.doors import urls

    assert char not in urls.shown(f"https://mirror.example/{char}simple")
    with pytest.raises(UsageError) as refused:
        urls.checked(f"https://mirror.example/{char}simple", "--index-url")
    assert char not in refused.value.message


def test_a_toolkit_version_in_superscript_digits_is_no_traceback(tmp_path):
    """A toolkit's ``version.json`` (``$CUDA_HOME`` names any directory) saying ``¹².4`` was compared
    with the driver's CUDA through int(): a ValueError out of every command that detects."""
    from tfgpu.detect import _toolkit_notes
    from tfgpu.detect.host import DriverInfo, Toolkit

    driver = DriverInfo(version="550.54.14", cuda="12.4", readings=(), agree=True)
    assert _toolkit_notes((Toolkit("\u00b9\u00b2.4.1", str(tmp_path), "version.json"),), driver) == []
