"""The one reader for files the tool did not just write itself: markers, journals, staging records,
locks, ``bundle.json``, project files, ``pyproject.toml``, data overlays, caches, upstream answers.

Any may be hostile or damaged: a FIFO (reading blocks forever), a device (``/dev/zero`` never ends),
a link to a multi-GB file, 200,000 levels of nesting (the parsers recurse), YAML aliases that expand
to 10^9 nodes, bytes that are not UTF-8, the wrong types. This is the only module that opens such a
file or parses JSON, TOML or YAML, and it makes each case one documented error of the file's *kind*:

- a file is opened without blocking and must be a regular file (``fstat`` after ``open``, so a
  name swapped between a check and the open cannot slip through); links are refused for the kinds
  that live inside an env or the tool's own state; a directory worked in through its descriptor
  (:func:`open_directory`, then ``at=``) is opened here too, never through a link;
- at most ``limit`` bytes are read, even when the file grows while it is read;
- text is strict UTF-8; parsed documents are at most ``depth`` levels deep; YAML with an anchor or
  an alias is refused before it is composed.

``tests/test_layering.py`` fails when a module outside this one calls a parser or reads a file;
callers check the *shape* of what comes back (types, keys) with :func:`expect`."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterable

from tfgpu.doors.controls import shown
from tfgpu.doors.owner import only_mine
from tfgpu.errors import ImpossibleError, OperationError, TfgpuError, UsageError
from tfgpu.records import record

TYPE_CHECKING = False
if TYPE_CHECKING:  # the paths callers give may be Paths; this door reads them as os.PathLike
    from pathlib import Path
    from typing import Any

KiB, MiB = 1024, 1024 * 1024


class Unreadable(Exception):
    """The file or text cannot be used; ``reason`` says why in words. Raised only for kinds whose
    callers treat a bad file as absent (caches, staging records, markers); every other kind turns
    it into its own :class:`TfgpuError`."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@record
class Kind:
    """One kind of untrusted file: how big and how deep it may be, and what a bad one means."""

    what: str
    """How messages name it ("bundle.json", "the pip lock")."""
    limit: int
    """The most bytes read."""
    error: Callable[[str], TfgpuError] | None = None
    """Builds the kind's documented error from a sentence; None: raise :class:`Unreadable`."""
    depth: int = 32
    """The deepest nesting of a parsed document."""
    links: bool = True
    """Whether the path may be a symbolic link (the user's own files may; state inside an env may not)."""
    streams: bool = False
    """Whether a FIFO or device may be read too, in blocking mode, up to the cap: a log handed over as
    ``<(cmd)``, ``/dev/stdin`` or ``/dev/null``, like standard input. Never for a kind read whole."""


def _advice(*ways: str) -> list[str]:
    return list(ways)


# The kinds, one table: each cap is far above what the tool itself ever writes of that kind.
MARKER = Kind("the env's marker", 64 * KiB, None, links=False)
STAGING_RECORD = Kind("the staging record", 64 * KiB, None, links=False)
CACHE = Kind("a cache entry", 64 * MiB, None, depth=64, links=False)
JOURNAL = Kind("the repair journal", 256 * MiB, None, depth=16, links=False)
PIP_LOCK = Kind(
    "the pip lock",
    32 * MiB,
    lambda m: UsageError("lock-unreadable", m, _advice("Give the file `tfgpu-install lock` wrote.")),
)
LOCK_RECORD = Kind("a lock's record line", 1 * MiB, None)
"""The JSON header line of a pip lock: one that does not parse means the file is not one of ours."""
PIP_LOCK_SHAPE = Kind(
    "the pip lock",
    32 * MiB,
    lambda m: UsageError("lock-malformed", m, _advice("Regenerate the lock with `tfgpu-install lock`.")),
)
CONDA_LOCK = Kind(
    "the conda lock",
    64 * MiB,
    lambda m: ImpossibleError("lock-corrupt", m, _advice("Regenerate it with `tfgpu-install lock --mode conda`.")),
)
BUNDLE = Kind("bundle.json", 16 * MiB, None)
"""A bundle's manifest: the caller says ``bundle-incomplete`` (an interrupted ``bundle`` leaves none)."""
PROJECT = Kind(
    "the project file",
    1 * MiB,
    lambda m: UsageError("bad-project-file", m, _advice("Fix the file, or pass --no-project to ignore it.")),
)
OVERLAY = Kind(
    "the release data fetched by update-data",
    16 * MiB,
    lambda m: OperationError(
        "data-overlay-corrupt", m, _advice("Delete it, then run `tfgpu-install update-data` again.")
    ),
)
DATA_TABLE = Kind(
    "a data table",
    16 * MiB,
    lambda m: UsageError(
        "bad-data", m, _advice("Fix that file (or remove it from the TFGPU_DATA_DIR overlay to use the shipped table).")
    ),
    depth=64,
)
UPSTREAM = Kind(
    "an answer from the index",
    64 * MiB,
    lambda m: OperationError("update-failed", m, _advice("Try again later; the data the tool ships is still used.")),
    depth=64,
)
LOG = Kind(
    "the log",
    32 * MiB,
    lambda m: UsageError(
        "bad-log-file",
        m,
        _advice(
            "Give a file with TensorFlow's output, or - to read it from stdin "
            "(`python train.py 2>&1 | tfgpu-install doctor --log -`)."
        ),
    ),
    streams=True,
)
"""Read as a head (:func:`read_head`): a longer log is cut at the cap, as a pipe on stdin is."""
ENV_FILE = Kind("a file of the env", 64 * MiB, None, depth=64)
"""Files an env holds that the tool reads for facts (``build_info.py``, ``conda-meta`` records,
``METADATA``, activation scripts): a bad one is a fact to report, not a crash."""
PACKAGE_DATA = Kind(
    "the tool's own data", 64 * MiB, lambda m: UsageError("bad-data", m, _advice("Reinstall tfgpu-install.")), depth=64
)
LIBRARY = Kind("a shared library", 4 * 1024 * MiB, None)
"""An ELF file of an env read whole for its dynamic section (CUDA libraries run to hundreds of MB)."""
ARTIFACT = Kind("a downloaded or bundled file", 1 << 50, None)
"""Wheels, conda packages and archives, read in blocks for their checksum or unpacked."""
CHILD_OUTPUT = Kind("the answer of a child process", 64 * MiB, None, depth=64)
"""JSON the tool's own child processes print (probes run in the target env): a bad answer means the
probe did not run as expected, which each caller reports in its own words."""
CHANNEL_INDEX = Kind(
    "a local channel's index",
    4 * 1024 * MiB,
    lambda m: UsageError(
        "bad-channel", m, _advice("Give a channel directory whose <subdir>/repodata.json files are regular files.")
    ),
)
"""A ``repodata.json`` of a ``--channel DIR`` or ``file://`` channel, read by the conda engine's child
process: checked here (:func:`check_file`) before the child is handed the channel, so a FIFO or a
device there cannot block it."""
SYSTEM_FILE = Kind("a system file", 4 * MiB, None)
"""``/proc`` and ``/etc`` facts read by detection: absence or damage is a fact, never a failure."""


def _fail(kind: Kind, source: str, reason: str) -> TfgpuError | Unreadable:
    message = f"Cannot use {kind.what} ({shown(source)}): {shown(reason)}."  # one line: no forged advice
    return kind.error(message) if kind.error else Unreadable(message)


def _open(path: os.PathLike | str, kind: Kind, directory: int | None = None) -> tuple[int, os.stat_result]:
    """A descriptor of ``path`` (a name in the open ``directory``, if given) opened without blocking
    (a FIFO blocks the open itself) and its ``fstat``, if a regular file (or what ``streams`` allows)."""
    source = str(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    if not kind.links:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, dir_fd=directory)
    except ValueError:
        # A NUL in the name (a RECORD row may hold one): ValueError, not OSError, from os.open.
        raise _fail(kind, source, "its name holds a NUL character") from None
    except OSError as error:
        if not kind.links and _is_link(path, directory):
            raise _fail(kind, source, "it is a symbolic link") from None
        raise _fail(kind, source, error.strerror or str(error)) from None
    try:
        info = os.fstat(fd)
    except OSError as error:
        os.close(fd)
        raise _fail(kind, source, error.strerror or str(error)) from None
    if kind.streams and (stat.S_ISFIFO(info.st_mode) or stat.S_ISCHR(info.st_mode)):
        os.set_blocking(fd, True)  # opened without blocking; a FIFO nobody writes to then reads as empty
    elif not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise _fail(kind, source, "it is not a regular file (a directory, FIFO, device or socket)")
    return fd, info


def _is_link(path: os.PathLike | str, directory: int | None) -> bool:
    try:
        return stat.S_ISLNK(os.stat(path, dir_fd=directory, follow_symlinks=False).st_mode)
    except OSError:
        return False


def open_directory(path: Path | str, kind: Kind, *, at: int | None = None, path_only: bool = False) -> int:
    """A descriptor (the caller closes it) of the directory ``path`` (a name in the open directory
    ``at``), never reached through a link, for work relative to it (``dir_fd``): a directory swapped
    for a link once open changes nothing done through it. ``path_only``: ``O_PATH`` (lists nothing)."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | (getattr(os, "O_PATH", 0) if path_only else 0)
    try:
        return os.open(path, flags, dir_fd=at)
    except OSError as error:
        if _is_link(path, at):
            raise _fail(kind, str(path), "it is a symbolic link") from None
        raise _fail(kind, str(path), error.strerror or str(error)) from None


def _read_upto(read: Callable[[int], bytes], size: int) -> bytes:
    """At most ``size`` bytes from ``read`` (a file that grows while it is read is cut there)."""
    chunks, total = [], 0
    while total < size:
        chunk = read(min(1 * MiB, size - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def read_bytes(path: Path | str, kind: Kind, *, at: int | None = None) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``kind.limit`` bytes; ``at``: an
    open directory (:func:`open_directory`) that ``path`` is a name in."""
    fd, info = _open(path, kind, at)
    return _read_whole(fd, info, kind, str(path))


def _read_whole(fd: int, info: os.stat_result, kind: Kind, source: str) -> bytes:
    """Every byte of the open file ``fd`` (``info``: its fstat), at most ``kind.limit``; closes ``fd``."""
    try:
        if info.st_size > kind.limit:
            raise _fail(kind, source, f"it holds {info.st_size:,} bytes, more than the {kind.limit:,} allowed")
        data = _read_upto(lambda n: os.read(fd, n), kind.limit + 1)
        if len(data) > kind.limit:
            raise _fail(kind, source, f"it grew past the {kind.limit:,} bytes allowed while it was read")
        return data
    except OSError as error:
        raise _fail(kind, source, error.strerror or str(error)) from None
    finally:
        os.close(fd)


def read_own(path: Path | str, kind: Kind) -> bytes:
    """The bytes of ``path`` (as :func:`read_bytes`) only if no one but this user could have written
    them: the file and the directory holding it (that very directory, opened once, so nothing is
    swapped in between) are owned by the effective user and writable by neither group nor others —
    OpenSSH's rule for a private key, and what Python assumes of its ``__pycache__``. For the tool's
    own caches: what passes was written by this user's runs (a forger would already be this user),
    what does not is :class:`Unreadable` and the cache is rebuilt instead of read."""
    if kind.error is not None or not hasattr(os, "geteuid"):
        raise ValueError("read_own is for the tool's own caches (kinds read as absent when bad), on POSIX")
    source, parent = str(path), os.path.dirname(os.fspath(path)) or "."
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        directory = os.open(parent, flags)
    except OSError as error:
        raise _fail(kind, source, f"its directory: {error.strerror or error}") from None
    try:
        if not only_mine(os.fstat(directory)):
            raise _fail(kind, source, "its directory is not this user's alone (owner, or group/other write)")
        fd, info = _open(os.path.basename(os.fspath(path)), kind, directory)
    finally:
        os.close(directory)
    if not only_mine(info):
        os.close(fd)
        raise _fail(kind, source, "it is not this user's alone (owner, or group/other write)")
    return _read_whole(fd, info, kind, source)


def check_file(path: Path | str, kind: Kind) -> None:
    """Nothing if ``path`` is a regular file of at most ``kind.limit`` bytes, for a file another
    program reads (the conda engine's child reads a channel's index): the kind's error otherwise."""
    fd, info = _open(path, kind)
    os.close(fd)
    if info.st_size > kind.limit:
        raise _fail(kind, str(path), f"it holds {info.st_size:,} bytes, more than the {kind.limit:,} allowed")


def open_stream(path: os.PathLike | str, kind: Kind, *, at: int | None = None):
    """A binary file object of ``path`` if it is a regular file, for files read in blocks and never
    held whole (checksums of downloads and bundle files, archives): the kind's size cap does not apply.
    ``at``: an open directory (:func:`open_directory`) that ``path`` is a name in."""
    fd, _info = _open(path, kind, at)
    return os.fdopen(fd, "rb")


def read_at(stream: Any, offset: int, size: int, source: str) -> bytes:
    """At most ``size`` bytes at ``offset`` of a file :func:`open_stream` opened, for a format read where its headers point."""
    chunks, total = [], 0
    try:
        while 0 <= offset <= 1 << 62 and total < size:
            chunks.append(os.pread(stream.fileno(), min(1 * MiB, size - total), offset + total))
            if not chunks[-1]:
                break
            total += len(chunks[-1])
    except OSError as error:
        raise Unreadable(f"Cannot read {source} at byte {offset:,}: {error.strerror or error}.") from None
    return b"".join(chunks)


def read_head(path: Path | str, kind: Kind, size: int) -> bytes:
    """The first ``size`` bytes (at most, and at most the cap and one) of ``path`` if it is a regular
    file (or, for a kind that allows it, a stream), however long it is: a log cut at its cap, the
    start of a script, a ``/proc`` file (whose size reads as 0)."""
    fd, _info = _open(path, kind)
    try:
        return _read_upto(lambda n: os.read(fd, n), min(size, kind.limit + 1))
    except OSError as error:
        raise _fail(kind, str(path), error.strerror or str(error)) from None
    finally:
        os.close(fd)


def read_stream(stream: Any, kind: Kind, size: int, source: str = "standard input") -> bytes:
    """At most ``size`` bytes of an already open binary stream (standard input is not a path: it
    may be a pipe, which is what it is for); a reader that blocks is the user's own choice."""
    try:
        return _read_upto(stream.read, min(size, kind.limit + 1))
    except OSError as error:
        raise _fail(kind, source, error.strerror or str(error)) from None


def read_text(path: Path | str, kind: Kind, *, errors: str = "strict") -> str:
    """The UTF-8 text of ``path`` (see :func:`read_bytes`); ``errors="replace"`` for logs shown as evidence."""
    return decode(read_bytes(path, kind), kind, str(path), errors=errors)


def text_or_none(path: Path | str, kind: Kind, *, errors: str = "strict") -> str | None:
    """:func:`read_text` for kinds whose callers treat a bad or missing file as absent: None then."""
    try:
        return read_text(path, kind, errors=errors)
    except Unreadable:
        return None


def json_or_none(path: Path | str, kind: Kind) -> Any:
    """:func:`load_json` for kinds whose callers treat a bad or missing file as absent: None then."""
    try:
        return load_json(path, kind)
    except Unreadable:
        return None


def package_text(package: str, *parts: str) -> str:
    """The text of a file shipped inside the tool (templates, programs run in the target env)."""
    return decode(package_bytes(package, *parts), PACKAGE_DATA, "/".join((package, *parts)))


def package_bytes(package: str, *parts: str) -> bytes:
    """The bytes of a file shipped inside the tool, through the same checks as any other file."""
    # Start-up cost: `plan --json --no-detect` loads this module but not importlib.resources.
    from importlib.resources import as_file, files

    with as_file(files(package).joinpath(*parts)) as path:
        return read_bytes(path, PACKAGE_DATA)


def decode(data: bytes, kind: Kind, source: str, *, errors: str = "strict") -> str:
    if len(data) > kind.limit:
        raise _fail(kind, source, f"it holds {len(data):,} bytes, more than the {kind.limit:,} allowed")
    try:
        return data.decode("utf-8", errors=errors)
    except UnicodeDecodeError as error:
        raise _fail(kind, source, f"it is not UTF-8 text (byte {error.start})") from None


def depth_of(value: Any, limit: int) -> int:
    """How deep ``value`` nests (iteratively: a deep document cannot exhaust the stack), stopping past ``limit``."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children: Iterable[object]
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        if deepest > limit:
            return deepest
        stack.extend((child, level + 1) for child in children)
    return deepest


def _checked_depth(value: Any, kind: Kind, source: str) -> Any:
    if depth_of(value, kind.depth) > kind.depth:
        raise _fail(kind, source, f"it nests deeper than {kind.depth} levels")
    return value


def parse_json(text: str | bytes, kind: Kind, source: str) -> Any:
    """A JSON document from text the tool was handed (a file, a child's output, an HTTP body)."""
    if isinstance(text, bytes):
        text = decode(text, kind, source)
    elif len(text) > kind.limit:
        raise _fail(kind, source, f"it holds {len(text):,} characters, more than the {kind.limit:,} allowed")
    try:
        value = json.loads(text)
    except RecursionError:
        raise _fail(kind, source, f"it nests deeper than {kind.depth} levels") from None
    except ValueError as error:
        raise _fail(kind, source, f"it is not valid JSON ({error})") from None
    return _checked_depth(value, kind, source)


def load_json(path: Path | str, kind: Kind) -> Any:
    return parse_json(read_text(path, kind), kind, str(path))


def parse_toml(text: str, kind: Kind, source: str) -> dict:
    # Start-up cost: `plan --json --no-detect` loads this module but not tomllib.
    import tomllib

    if len(text) > kind.limit:
        raise _fail(kind, source, f"it holds {len(text):,} characters, more than the {kind.limit:,} allowed")
    try:
        value = tomllib.loads(text)
    except RecursionError:
        raise _fail(kind, source, f"it nests deeper than {kind.depth} levels") from None
    except tomllib.TOMLDecodeError as error:
        raise _fail(kind, source, f"it is not valid TOML ({error})") from None
    except (ValueError, OverflowError) as error:  # an integer past Python's digit limit
        raise _fail(kind, source, f"it holds a value that cannot be read ({str(error)[:120]})") from None
    return _checked_depth(value, kind, source)


def load_toml(path: Path | str, kind: Kind) -> dict:
    return parse_toml(read_text(path, kind), kind, str(path))


def parse_yaml(text: str, kind: Kind, source: str) -> Any:
    """A YAML document, refusing anchors and aliases (a "billion laughs" file expands them into 10^9
    nodes) and nesting past ``kind.depth``, both seen in the event stream before anything is built."""
    # Start-up cost: `plan --json --no-detect` loads this module but not yaml.
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    if len(text) > kind.limit:
        raise _fail(kind, source, f"it holds {len(text):,} characters, more than the {kind.limit:,} allowed")
    try:
        level = 0
        for event in yaml.parse(text, Loader=loader):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                raise _fail(kind, source, "it uses YAML anchors or aliases, which the tool never writes")
            tag = getattr(event, "tag", None)
            if tag not in (None, "!"):
                # An explicit tag (!!int, !!python/..., a local !x) picks a constructor; no lock needs one.
                raise _fail(kind, source, f"it uses the YAML tag {str(tag)[:60]}, which the tool never writes")
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                level += 1
                if level > kind.depth:
                    raise _fail(kind, source, f"it nests deeper than {kind.depth} levels")
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                level -= 1
        return yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader, aliases refused above
    except yaml.YAMLError as error:
        raise _fail(kind, source, f"it is not valid YAML ({str(error).splitlines()[0]})") from None
    except RecursionError:
        raise _fail(kind, source, f"it nests deeper than {kind.depth} levels") from None
    except (ValueError, OverflowError, TypeError) as error:
        # The safe constructors raise these for an implicit scalar they cannot build: a timestamp
        # out of range (2020-99-99), an integer past Python's digit limit.
        raise _fail(kind, source, f"it holds a value that cannot be read ({str(error)[:120]})") from None


def load_yaml(path: Path | str, kind: Kind) -> Any:
    return parse_yaml(read_text(path, kind), kind, str(path))


def expect(value: Any, shape: type | tuple[type, ...], kind: Kind, source: str, where: str = "the document") -> Any:
    """``value`` if it is of ``shape``; else the kind's error naming ``where`` and what was found."""
    if isinstance(value, bool) and bool not in (shape if isinstance(shape, tuple) else (shape,)):
        found = "a boolean"
    elif isinstance(value, shape):
        return value
    else:
        found = {
            dict: "a table",
            list: "a list",
            str: "a string",
            int: "a number",
            float: "a number",
            type(None): "nothing",
        }.get(type(value), type(value).__name__)
    names = shape if isinstance(shape, tuple) else (shape,)
    wanted = " or ".join(
        {dict: "a table", list: "a list", str: "a string", int: "a whole number", float: "a number"}.get(t, t.__name__)
        for t in names
    )
    raise _fail(kind, source, f"{where} is {found}, not {wanted}")
