"""The data tables (``tfgpu/data/*.toml``): loaded, validated, cached. The resolver reads them
through :func:`load` and never writes anything itself.

Sources, later ones replacing earlier ones of the same file name: the shipped tables, then a
``TFGPU_DATA_DIR`` overlay (a site mirror of NVIDIA's downloads with its own checksums; tests
that serve fake archives). Every table is checked against ``schema.py`` when it is parsed; an
overlay that is not a directory, names no shipped table, is not UTF-8, is not TOML or breaks its
schema is ``bad-data`` (exit 2) naming the file.

Parsing takes ~100 ms, which would dominate ``plan``; like Python's own bytecode cache, the parsed
(and validated) form is kept in the user cache dir under a BLAKE2b digest of every overlay table's
bytes and of each shipped table's size, times and inode (as Python keys its bytecode), and the
cache file carries a digest of its own content: a cache that is damaged, truncated, swapped or not
the tables is parsed afresh. It is read only where no one but this user can write it (the file and
its directory: :func:`_read_cache`), and then used as written — the trust Python gives its
``__pycache__``; anywhere else it is ignored and the tables are parsed each time.
The full validation of the shipped tables runs when they are parsed, and in the tests over every
shipped table (they are part of the release); the user's ``update-data`` overlay
(``tfgpu.data.updates``) is untrusted and validated in full each time it is read.
"""

from __future__ import annotations

import marshal
import os
import sys
from functools import cache

from tfgpu.doors import untrusted
from tfgpu.doors.paths import cache_root_text, tag_cache, user_path
from tfgpu.errors import UsageError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: type checkers treat it alike
if TYPE_CHECKING:
    from pathlib import Path

MAX_TABLE_BYTES = untrusted.DATA_TABLE.limit
# Raised when what parsing checks changes: a cache written without a check is then parsed afresh.
_MAGIC = b"TFGPU-TABLES-6\n"
_APART = {"arch_support.toml": ("fatbin",)}
"""Top-level keys the cache also keeps on their own, beside their whole table, for a command that
reads only them: a plan reads arch_support.toml's ten ``[[fatbin]]`` rows (3 kB) and not its
``[[arch]]`` answers (190 kB, 5.4M instructions and 700 kB of memory to decode)."""


def _digest(data: bytes | memoryview = b""):
    """A 32-byte BLAKE2b hash object. ``_blake2`` is what ``hashlib`` serves it from; importing it
    alone spares every command that reads a table ``hashlib``'s OpenSSL set-up: 11.0M instructions
    against 0.3M (callgrind; a bare ``python -c pass`` is 39M), a twentieth of ``plan``."""
    try:
        from _blake2 import blake2b
    except ImportError:  # an interpreter built without it
        from hashlib import blake2b
    return blake2b(data, digest_size=32)


def load(name: str) -> dict:
    """One table, parsed and validated (``tensorflow.toml``)."""
    tables = _tables()
    table = tables[name]
    if isinstance(table, bytes):  # from the cache, each table kept apart: a command decodes what it reads
        table = tables[name] = _decode(tables, name)
    return table


def _decode(tables: dict, key: str) -> dict:
    """The cached entry ``key`` decoded. The cache's digest covers the outer form only; an inner entry
    that does not decode to a dict (bytes that lie about their lengths, a cut copied whole and
    re-summed) makes the whole cache a miss: every table is parsed afresh, into ``tables`` itself,
    and the cache rewritten. Its types beyond that are not walked (the trust in :func:`_read_cache`)."""
    try:
        value = marshal.loads(tables[key])
    except (ValueError, EOFError, TypeError):
        value = None
    if isinstance(value, dict):
        return value
    tables.clear()
    tables.update(_parse_all())
    return tables[key.partition(":")[0]]


def load_part(name: str, key: str, default=None):
    """``load(name).get(key, default)``, decoding only that key where the cache keeps it apart
    (:data:`_APART`) and the whole table has not been decoded already."""
    tables = _tables()
    part = tables.get(f"{name}:{key}")
    if isinstance(part, bytes) and isinstance(tables[name], bytes):
        return _decode(tables, f"{name}:{key}").get(key, default)
    return load(name).get(key, default)


_DERIVED: list = []


def derived(function):
    """``functools.cache`` for records built from the tables, forgotten with them by :func:`clear`."""
    cached = cache(function)
    _DERIVED.append(cached)
    return cached


def clear() -> None:
    """Forget the parsed tables and everything derived from them (the next :func:`load` reads the
    sources again): for callers that change ``TFGPU_DATA_DIR`` in-process."""
    _tables.cache_clear()
    for function in _DERIVED:
        function.cache_clear()


def shipped_names() -> list[str]:
    return sorted(_shipped_files())


def _shipped_files() -> dict[str, str | None]:
    """{name: path} of the shipped tables; the path is None where the package is not a directory
    on disk (a zip), and the bytes are then read through ``importlib.resources``. Listing the
    directory directly spares every command the import of ``importlib.resources`` (and zipfile)."""
    here = os.path.dirname(__file__)
    if os.path.isdir(here):
        return {entry.name: entry.path for entry in os.scandir(here) if entry.name.endswith(".toml")}
    # Start-up cost: `plan --json --no-detect` loads this module but not importlib.resources.
    from importlib.resources import files

    return {entry.name: None for entry in files("tfgpu.data").iterdir() if entry.name.endswith(".toml")}


def _sources(overlay: dict[str, tuple[bytes, str]] | None = None) -> tuple[dict[str, bytes], dict[str, str]]:
    """Every table's bytes and where they came from: the shipped ones, then the overlay's."""
    sources = {
        name: untrusted.read_bytes(path, untrusted.PACKAGE_DATA)
        if path is not None
        else untrusted.package_bytes("tfgpu.data", name)
        for name, path in _shipped_files().items()
    }
    where = {name: f"tfgpu/data/{name}" for name in sources}
    for name, (raw, path) in (_overlay(set(sources)) if overlay is None else overlay).items():
        sources[name], where[name] = raw, path
    return sources, where


def _cache_file(overlay: dict[str, tuple[bytes, str]], shipped: dict[str, str | None] | None = None) -> str:
    """The cache of these sources: named by the digest of each overlay table's bytes and, for a
    shipped table (part of the installed package, like its code), of its size, modification and
    change times and inode, as Python keys its bytecode cache: reading and hashing every shipped
    table on each run cost more than the rest of reading the cache."""
    key = _digest()
    for name, path in sorted((_shipped_files() if shipped is None else shipped).items()):
        if name in overlay:
            part = b"overlay:" + _digest(overlay[name][0]).digest()
        elif path is None:  # a zipped package: no file to stat
            part = b"bytes:" + _digest(untrusted.package_bytes("tfgpu.data", name)).digest()
        else:
            info = os.stat(path)
            part = f"stat:{info.st_size}:{info.st_mtime_ns}:{info.st_ctime_ns}:{info.st_ino}".encode()
        key.update(name.encode() + b"\0" + part + b"\0")
    return os.path.join(_cache_dir(), f"tables-{key.hexdigest()[:32]}-py{sys.hexversion:x}.bin")


@cache
def _tables() -> dict[str, dict | bytes]:
    shipped = _shipped_files()
    overlay = _overlay(set(shipped))
    found = _read_cache(_cache_file(overlay, shipped), set(shipped))
    if found is not None:
        return found
    return _parse_all(overlay)


def _parse_all(overlay: dict[str, tuple[bytes, str]] | None = None) -> dict[str, dict | bytes]:
    """Every table parsed and validated from its source, and the cache written for the next run."""
    if overlay is None:
        overlay = _overlay(set(_shipped_files()))
    sources, where = _sources(overlay)
    parsed: dict[str, dict | bytes] = {name: parse(name, raw, where[name]) for name, raw in sources.items()}
    _write_cache(_cache_file(overlay), parsed)
    return parsed


def parse(name: str, raw: bytes, where: str) -> dict:
    """One table's bytes, decoded, parsed and checked against its schema (``bad-data`` naming ``where``)."""
    # Start-up cost: `plan --json --no-detect` loads this module but not tfgpu.data.schema.
    from tfgpu.data import schema

    document = untrusted.parse_toml(untrusted.decode(raw, untrusted.DATA_TABLE, where), untrusted.DATA_TABLE, where)
    schema.validate(name, document, where)
    return document


_WAY = "Fix that file (or remove it from the TFGPU_DATA_DIR overlay to use the shipped table)."


def _overlay(shipped: set[str]) -> dict[str, tuple[bytes, str]]:
    """``TFGPU_DATA_DIR``'s tables: {name: (bytes, path)}; each must replace a shipped one."""

    override = os.environ.get("TFGPU_DATA_DIR")
    if not override:
        return {}
    # Start-up cost: pathlib (see tfgpu.doors.paths._as_path) for a TFGPU_DATA_DIR overlay only.
    from pathlib import Path

    directory = Path(user_path(override, "TFGPU_DATA_DIR"))
    if not directory.is_dir():
        raise UsageError(
            "bad-data",
            f"TFGPU_DATA_DIR={override} is not a directory.",
            ["Point it at a directory of tables (cuda.toml, cudnn_archives.toml, ...), or unset it."],
        )
    found = {}
    for path in sorted(directory.glob("*.toml")):
        if path.name not in shipped:
            raise UsageError(
                "bad-data",
                f"{path} replaces no shipped table (they are: {', '.join(sorted(shipped))}).",
                ["Rename it after the table it replaces, or remove it."],
            )
        found[path.name] = (untrusted.read_bytes(path, untrusted.DATA_TABLE), str(path))
    return found


def parsed_cache_file() -> Path:
    """The parse cache this run's tables would be read from (``cache prune`` keeps it, and removes
    the others: each was written for tables that have since changed)."""
    # Start-up cost: pathlib (see tfgpu.doors.paths._as_path); a command reads the cache as text.
    from pathlib import Path

    return Path(_cache_file(_overlay(set(_shipped_files()))))


def _cache_dir() -> str:
    return os.path.join(cache_root_text(), "data")


def _read_cache(path: str, names: set[str]) -> dict | None:
    """The tables of the cache at ``path`` ({name: the table's own marshal bytes, decoded by
    :func:`load` when a command first reads it}), or None: absent, damaged, or possibly not the tool's.

    Read only from a file and directory no one but this user can write (``untrusted.read_own``):
    marshal is not made for hostile bytes, and what passes is used as the tool wrote it, without a
    walk of every value's type (a third of what `plan` may spend) — whoever could forge it could
    as well edit this user's shell start-up or the tool's own bytecode. A cache elsewhere (a shared
    directory, another owner) is ignored and the tables are parsed afresh. The checksum inside is
    against damage (a cut write, a flipped byte)."""
    try:
        blob = untrusted.read_own(path, untrusted.CACHE)
    except untrusted.Unreadable:
        return None
    head = len(_MAGIC) + 32
    body = memoryview(blob)[head:]  # not a copy: half a megabyte, its pages touched anew on each run
    if len(blob) <= head or not blob.startswith(_MAGIC) or _digest(body).digest() != blob[len(_MAGIC) : head]:
        return None
    try:
        value = marshal.loads(body)
    except (ValueError, EOFError, TypeError):
        return None
    apart = {f"{name}:{key}" for name, keys in _APART.items() if name in names for key in keys}
    if (
        not isinstance(value, dict)
        or set(value) != names | apart
        or not all(isinstance(v, bytes) for v in value.values())
    ):
        return None
    return value


def _write_cache(path: str, parsed: dict) -> None:
    """Written for this user alone (directory 0700, file 0600, whatever the umask), which is what
    :func:`_read_cache` asks of it."""
    # Start-up cost: `plan` loads this module but not tfgpu.doors.trees (only a write needs it).
    from tfgpu.doors import trees

    # Start-up cost: `plan` loads this module but not tfgpu.doors.trees (only a write needs it).

    blobs = {name: marshal.dumps(table) for name, table in parsed.items()}
    for name, keys in _APART.items():
        for key in keys if name in parsed else ():
            # {key: value} (or {} where the table has none): load_part answers its default then
            blobs[f"{name}:{key}"] = marshal.dumps({key: parsed[name][key]} if key in parsed[name] else {})
    payload = marshal.dumps(blobs)
    if os.open not in os.supports_dir_fd:
        return  # no directory to hold open (Windows): the cache is only ever read on POSIX
    parent, name = os.path.split(path)
    try:
        tag_cache(os.path.dirname(parent))  # a cache root made now is tagged as the tool's (cache prune|clean)
        os.makedirs(parent, mode=0o700, exist_ok=True)
        # The directory itself, never through a link (as _read_cache opens it): a link planted there
        # would have the tool close up, and write into, a directory it does not own.
        directory = untrusted.open_directory(parent, untrusted.CACHE)
    except (OSError, untrusted.Unreadable):
        return  # a read-only cache only costs the parse next time
    partial = f".{name}.{os.getpid()}.tmp"
    try:
        info = os.fstat(directory)
        if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
            return  # another's directory: never read as this user's cache, so not written either
        if info.st_mode & 0o077:
            os.fchmod(directory, 0o700)  # made by an earlier version under a umask of 002
        fd = os.open(
            partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600, dir_fd=directory
        )
    except OSError:
        os.close(directory)
        return
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(_MAGIC + _digest(payload).digest() + payload)
        trees.replace(partial, name, at=directory, target_at=directory)
    except OSError:  # a full disk, a directory where the cache goes: no copy left behind on each run
        trees.unlink(partial, at=directory, strict=False)
    finally:
        os.close(directory)
