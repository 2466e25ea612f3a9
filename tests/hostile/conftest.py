"""The hostile-input suite: what the tool reads from a user, a lock, a bundle, a mirror, a data
overlay, a marker or the environment, made hostile, truncated, huge, a symlink, concurrent or
interrupted. Every case asserts the same four things: nothing outside what the tool built
changed (a snapshot of the sandbox before and after), no injected command ran (no ``PWNED``
file), the documented exit code, and no traceback.

``cli`` runs the tool in-process (fast; an unexpected exception fails the test, which is the
"no traceback" check); ``tool`` runs it as a child process where a separate process is the
point (signals, raw argv bytes, locales).
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def error(self) -> str:
        """The error code of a ``--json`` failure, else ""."""
        import json

        try:
            return json.loads(self.out)["error"]["code"]
        except (ValueError, KeyError, TypeError):
            return ""


def snapshot(root: Path) -> dict[str, tuple]:
    """Every path under ``root`` with its type, size, mode, mtime and link target."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            info = path.lstat()
            link = os.readlink(path) if stat.S_ISLNK(info.st_mode) else None
            found[str(path.relative_to(root))] = (
                stat.S_IFMT(info.st_mode),
                info.st_size,
                info.st_mode,
                info.st_mtime_ns,
                link,
            )
    return found


def changed(before: dict, after: dict, allowed: tuple[str, ...] = ()) -> list[str]:
    """Paths that appeared, disappeared or changed, outside the ``allowed`` prefixes."""
    keys = set(before) | set(after)
    return sorted(k for k in keys if before.get(k) != after.get(k) and not k.startswith(allowed))


@pytest.fixture
def sandbox(tmp_path, monkeypatch) -> Path:
    """A directory for the case, with the tool's own dirs (cache, logs, envs, Jupyter) inside it
    and the working directory set to it, so ``PWNED`` would land here."""
    root = tmp_path / "sandbox"
    root.mkdir()
    for key, sub in (
        ("TFGPU_CACHE_DIR", "cache"),
        ("TFGPU_LOG_DIR", "logs"),
        ("TFGPU_ENVS_DIR", "envs"),
        ("JUPYTER_DATA_DIR", "jupyter"),
    ):
        monkeypatch.setenv(key, str(root / sub))
    monkeypatch.delenv("TFGPU_DATA_DIR", raising=False)
    monkeypatch.setenv("COLUMNS", "160")
    monkeypatch.chdir(root)
    yield root
    assert not list(root.rglob("PWNED")), "an injected command ran"


@pytest.fixture
def cli(sandbox, monkeypatch, capsys):
    """``cli(*argv, env={...})`` runs tfgpu-install in this process; returns a :class:`Result`."""
    import signal

    from tfgpu import cli as tfgpu_cli
    from tfgpu.resolver import tables

    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}

    def run(*argv: str, env: dict[str, str] | None = None) -> Result:
        for key, value in (env or {}).items():
            monkeypatch.setenv(key, value)
        tables.clear_caches()
        capsys.readouterr()
        try:
            code = tfgpu_cli.main(list(argv))
        finally:
            for key in env or {}:
                monkeypatch.delenv(key, raising=False)
            tables.clear_caches()
            for signum, handler in handlers.items():
                signal.signal(signum, handler)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


@pytest.fixture
def tool(sandbox):
    """``tool(*argv, env={...})`` runs ``python -m tfgpu`` as a child process."""

    def run(*argv, env: dict[str, str] | None = None, timeout: float = 300) -> Result:
        done = subprocess.run(
            [sys.executable, "-m", "tfgpu", *argv],
            capture_output=True,
            cwd=sandbox,
            env={**os.environ, **(env or {})},
            timeout=timeout,
        )
        out, err = done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace")
        assert "Traceback" not in err, err
        return Result(done.returncode, out, err)

    return run


@pytest.fixture
def build(cli, local_wheels, sandbox, monkeypatch, uv_cache):
    """``build(prefix, *extra)`` makes a real pip-mode env from the local wheelhouse (uv, offline)."""
    monkeypatch.setenv("TFGPU_CACHE_DIR", str(uv_cache))

    def make(prefix: Path | str, *extra: str) -> Result:
        done = cli(
            "create",
            "--tf",
            "2.21",
            "--mode",
            "pip",
            "--python",
            f"{sys.version_info[0]}.{sys.version_info[1]}",
            "--prefix",
            str(prefix),
            "--find-links",
            str(local_wheels),
            "--offline",
            "--no-verify",
            "--json",
            *extra,
        )
        return done

    return make


def no_traceback(cli, *argv, env=None) -> Result:
    """``cli(*argv)``, failing the test when an exception escapes the tool (the traceback docs/output.md
    promises never to print) rather than letting pytest report it as an error of the test."""
    try:
        return cli(*argv, env=env)
    except SystemExit:
        raise
    except BaseException as error:  # noqa: BLE001 - the point of the helper
        pytest.fail(f"traceback: {type(error).__name__}: {str(error)[:200]}")
