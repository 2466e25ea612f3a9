"""Compile an env's bytecode once per source file, across every env built from uv's cache.

uv hard-links every installed file from its cache, so a second env of the same packages costs
almost nothing, except the ``.pyc`` files compiling writes into each env (~95 MB and ~12 CPU
seconds for TF 2.21). Here each ``.pyc`` is compiled with a fixed ``co_filename`` (its path
relative to site-packages: the import system puts the real path back when it loads the file, so
tracebacks show the real one) and kept in a store in the cache under a key of what determines
its bytes: the interpreter's magic number, the source file's inode (the same hard-linked file in
every env), its mtime and size, and its relative path. A later env hard-links the stored file
instead of compiling again.

The same wheel unpacked twice in uv's cache (from the index and from a ``--find-links``
directory, or again after uv pruned it) gives files of the same bytes with other inodes and
modification times. Each stored file is therefore also kept under a key of the source's bytes;
an env whose files came from the other copy gets the stored bytecode copied with the header's
source mtime and size set to its own file's (the only bytes of a timestamp ``.pyc`` that depend on
the file rather than its content), instead of compiling thousands of files again.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from tfgpu.doors import trees, untrusted
from tfgpu.errors import OperationError
from tfgpu.process.runner import PIPE
from tfgpu.versions import is_canonical_release

FIXED_ROOT = "/tfgpu-env"
WORKER = r"""
import json, py_compile, sys
for source, target, shown in json.load(sys.stdin):
    try:
        py_compile.compile(source, cfile=target, dfile=shown, doraise=True)
    except Exception:
        pass
"""


def interpreter_tag(runner, python: str) -> tuple[str, str]:
    """(cache_tag, magic) of an interpreter: ``("cpython-312", "cb0d0d0a")``."""
    done = runner.capture(
        [
            python,
            "-I",
            "-c",
            "import sys, importlib.util, json; "
            "print(json.dumps([sys.implementation.cache_tag, importlib.util.MAGIC_NUMBER.hex()]))",
        ]
    )
    try:
        tag, magic = untrusted.parse_json(done.output, untrusted.CHILD_OUTPUT, python)
    except (untrusted.Unreadable, ValueError, TypeError):
        raise OperationError(
            "install-failed",
            f"The env's Python ({python}) did not start: {done.stderr.strip()[-300:]}",
            ["Run it by hand to see why; the environment was not kept."],
        ) from None
    return tag, magic


def _key(source: Path, relative: str, magic: str) -> str:
    stat = source.stat()
    raw = f"{magic}:{stat.st_dev}:{stat.st_ino}:{stat.st_mtime_ns}:{stat.st_size}:{relative}"
    return hashlib.sha256(raw.encode()).hexdigest()


def _content_key(source: Path, relative: str, magic: str) -> str:
    digest = hashlib.sha256(f"{magic}:{relative}:".encode())
    try:
        digest.update(untrusted.read_bytes(source, untrusted.ENV_FILE))
    except untrusted.Unreadable as error:
        raise OSError(str(error)) from None  # a file that cannot be read is compiled, not shared
    return "c" + digest.hexdigest()


def _slot(store: Path, key: str) -> Path:
    return store / key[:2] / key


def _keep(pyc: Path, store: Path, *keys: str) -> bool:
    """Link ``pyc`` into the store under each key it is not yet under; whether one was added."""
    added = False
    for key in keys:
        kept = _slot(store, key)
        if kept.exists():
            continue
        try:
            kept.parent.mkdir(parents=True, exist_ok=True)
            trees.hard_link(pyc, kept)
            added = True
        except OSError:
            continue
    return added


def _retimed(stored: Path, source: Path, target: Path) -> bool:
    """Write ``stored`` (a timestamp ``.pyc`` of a file with ``source``'s bytes) to ``target``
    with ``source``'s mtime and size in its header (PEP 552: flags 0, then mtime, then size)."""
    try:
        data = bytearray(untrusted.read_bytes(stored, untrusted.CACHE))
        info = source.stat()
        if len(data) < 16 or data[4:8] != b"\0\0\0\0":
            return False
        data[8:12] = (int(info.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
        data[12:16] = (info.st_size & 0xFFFFFFFF).to_bytes(4, "little")
        temporary = target.with_name(target.name + ".tfgpu-copy")
        temporary.write_bytes(data)
        trees.replace(temporary, target)
        return True
    except (OSError, untrusted.Unreadable):
        return False


def _link(source: Path, target: Path) -> bool:
    try:
        temporary = target.with_name(target.name + ".tfgpu-link")
        trees.hard_link(source, temporary)
        trees.replace(temporary, target)
        return True
    except OSError:
        return False


def _marker(store: Path, python_version: str, release: str) -> Path | None:
    """The marker file of a (Python, TensorFlow release) pair, or None when either is not a plain
    version: the release comes from a resolution (perhaps a lock's record), and it is part of a
    file name here, so ``2.21.0/../..`` must never name a path outside the store."""
    if not (re.fullmatch(r"\d\.\d{1,2}", python_version or "") and is_canonical_release(release)):
        return None
    return store / "envs" / f"py{python_version}-tensorflow-{release}"


def store_has(store: Path, python_version: str, release: str) -> bool:
    """Whether an env with this TensorFlow release and Python already filled the store."""
    marker = _marker(store, python_version, release)
    return marker is not None and marker.exists()


def mark_stored(store: Path, python_version: str, release: str) -> None:
    """Record that this pair filled the store (nothing for a release that is not a plain version)."""
    marker = _marker(store, python_version, release)
    if marker is None:
        return
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()


def _sources(site: Path):
    """Every ``.py`` under ``site`` (links among them, never followed into a directory), found
    without recursion: ``Path.rglob`` recurses once per level, and a package may hold a chain of
    thousands of nested directories (``RecursionError`` in the middle of a ``create``)."""
    for directory, _directories, others, _links in trees.walk(site):
        yield from (directory / name for name in others if name.endswith(".py"))


def compile_site(
    runner, python: str, site: Path, store: Path, workers: int | None = None, already_compiled: bool = False
) -> tuple[int, int]:
    """Bytecode for every ``.py`` under ``site``; returns (compiled now, reused from the store).

    ``already_compiled``: uv compiled the env (a cold install, where uv's parallel compiler is
    the fastest way); its files are only added to the store. Their ``co_filename`` names this
    env's staging path, which importlib replaces with the real path on load, like the fixed one.
    """
    tag, magic = interpreter_tag(runner, python)
    if already_compiled:
        stored = 0
        for source in _sources(site):
            pyc = source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc"
            relative = source.relative_to(site).as_posix()
            try:
                if pyc.exists() and _keep(
                    pyc, store, _key(source, relative, magic), _content_key(source, relative, magic)
                ):
                    stored += 1
            except OSError:
                continue
        return stored, 0
    todo, reused, keys = [], 0, {}
    for source in _sources(site):
        relative = source.relative_to(site).as_posix()
        target = source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc"
        try:
            key = _key(source, relative, magic)
            target.parent.mkdir(exist_ok=True)
            if _slot(store, key).exists() and _link(_slot(store, key), target):
                reused += 1
                continue
            same = _content_key(source, relative, magic)
        except OSError:
            continue
        if _slot(store, same).exists() and _retimed(_slot(store, same), source, target):
            _keep(target, store, key)  # a later env from this copy of the wheel links it
            reused += 1
            continue
        keys[str(target)] = (key, same)
        todo.append((str(source), str(target), f"{FIXED_ROOT}/{relative}"))
    workers = max(1, workers or os.cpu_count() or 1)
    chunks = [todo[i::workers] for i in range(workers) if todo[i::workers]]
    children = []
    try:
        for _ in chunks:  # each one started is in the list, so an interrupt stops every one
            children.append(runner.start([python, "-I", "-c", WORKER], stdin=PIPE, text=True))
        for child, chunk in zip(children, chunks, strict=False):
            child.stdin.write(json.dumps(chunk))
            child.stdin.close()
        for child in children:
            child.wait()
    except BaseException:
        for child in children:
            child.kill()
        for child in children:
            child.wait()  # none still writing into the env when the rollback deletes it
        raise
    compiled = 0
    for written, (key, same) in keys.items():
        if Path(written).exists():
            compiled += 1
            _keep(Path(written), store, key, same)
    return compiled, reused
