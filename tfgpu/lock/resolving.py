"""Resolving requirements for a target platform with uv: what every lock and bundle is made of.

uv resolves against the public index only (``--no-config``, an explicit ``--default-index``, the
``UV_*`` index variables blanked), for the target's Python and platform, so a laptop can lock for
a GPU server. A pip lock takes the hashed requirements body and the PEP 751 ``pylock.toml``; a
conda lock's PyPI part and a bundle's wheels take the ``pylock.toml``. Format-neutral: no lock
file is read or written here.
"""

from __future__ import annotations

import os
import re
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tfgpu.doors import secrets, untrusted
from tfgpu.doors.requirements import lines
from tfgpu.engines.uv import INDEX_VARIABLES, compile_for_target, preflown_index
from tfgpu.errors import ImpossibleError, OperationError, UsageError
from tfgpu.lock.platforms import Platform

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: type checkers treat it alike
if TYPE_CHECKING:
    from typing import Any

DEFAULT_INDEX = "https://pypi.org/simple"
_LOCAL = re.compile(r"file:|(?<![\w.-])/(?:opt|tmp|home|root|work|var)/|127\.0\.0\.1|localhost")


def index_url() -> str:
    """The index locks resolve against: PyPI, or ``TFGPU_INDEX_URL`` (a mirror, or a test's server),
    through the URL door. A credential in it (``/t/<token>/``, ``?token=``) is refused
    (``secret-in-url``) before anything resolves: a lock records its index, and uv reads the
    credential from ``~/.netrc`` (or a keyring) itself."""

    named = os.environ.get("TFGPU_INDEX_URL")
    if named and secrets.forms(named):
        raise UsageError(
            "secret-in-url",
            f"TFGPU_INDEX_URL ({secrets.masked(named)[:300]}) carries a credential, and a lock records the "
            "index it was resolved against; nothing was resolved.",
            [
                "Set TFGPU_INDEX_URL to the index's URL without the credential and put the credential in "
                "~/.netrc (machine HOST login USER password TOKEN), which uv reads itself.",
            ],
        )
    return preflown_index(named, "TFGPU_INDEX_URL") if named else DEFAULT_INDEX


def compile_pins(
    requirements: list[str],
    platform: Platform,
    python: str,
    *,
    runner,
    uv: str,
    cache_dir: Path,
    only_binary: bool = False,
    index: str | None = None,
    refresh: bool = False,
    with_pylock: bool = True,
) -> tuple[str, str]:
    """Resolve ``requirements`` for ``platform``/``python``: (requirements body with hashes, pylock.toml).
    ``index``: the index to resolve against (default :func:`index_url`); ``refresh``: no cached answers;
    ``with_pylock``: also the PEP 751 file (else "" for it)."""
    index = index or index_url()
    with tempfile.TemporaryDirectory(prefix="tfgpu-lock-") as tmp:
        req_in = Path(tmp) / "requirements.in"
        req_in.write_text(lines(requirements), encoding="utf-8")
        common: dict[str, Any] = {
            "python_version": python,
            "python_platform": platform.uv,
            "index": index,
            "cache": cache_dir,
            "only_binary": only_binary,
            "refresh": refresh,
        }
        jobs = {"txt": compile_for_target(uv, req_in, Path(tmp) / "requirements.txt", **common)}
        if with_pylock:
            jobs["toml"] = compile_for_target(uv, req_in, Path(tmp) / "pylock.toml", pylock=True, **common)
        env = {name: "" for name in INDEX_VARIABLES}
        with ThreadPoolExecutor(2) as pool:
            done = dict(zip(jobs, pool.map(lambda argv: runner.run(argv, env=env), jobs.values()), strict=True))
        for result in done.values():
            if result.returncode != 0:
                raise _compile_failed(result, requirements, platform, python, runner.log_path)
        body = untrusted.read_text(Path(tmp) / "requirements.txt", untrusted.PIP_LOCK).replace(
            str(req_in), "requirements.in"
        )
        pylock = untrusted.read_text(Path(tmp) / "pylock.toml", untrusted.PIP_LOCK) if with_pylock else ""
    if index == DEFAULT_INDEX:
        for text in (body, pylock):
            if local := _LOCAL.search(text):
                raise OperationError(
                    "lock-has-local-paths",
                    f"The lock would record a machine-local location ({local.group(0)!r}); it was not written.",
                    [f"The whole uv output is in {runner.log_path}; please report this."],
                )
    return body, pylock


def compile_pylock(
    requirements: list[str], platform: Platform, python: str, *, runner, uv: str, cache_dir: Path
) -> str:
    """Only the PEP 751 ``pylock.toml`` (wheel URLs and hashes) of ``requirements``: what a conda
    lock's pip entries need (one uv run instead of two)."""
    index = index_url()
    with tempfile.TemporaryDirectory(prefix="tfgpu-lock-") as tmp:
        req_in = Path(tmp) / "requirements.in"
        req_in.write_text(lines(requirements), encoding="utf-8")
        argv = compile_for_target(
            uv,
            req_in,
            Path(tmp) / "pylock.toml",
            python_version=python,
            python_platform=platform.uv,
            index=index,
            cache=cache_dir,
            pylock=True,
            only_binary=True,
        )
        result = runner.run(argv, env={name: "" for name in INDEX_VARIABLES})
        if result.returncode != 0:
            raise _compile_failed(result, requirements, platform, python, runner.log_path)
        pylock = untrusted.read_text(Path(tmp) / "pylock.toml", untrusted.PIP_LOCK)
    if index == DEFAULT_INDEX and (local := _LOCAL.search(pylock)):
        raise OperationError(
            "lock-has-local-paths",
            f"The lock would record a machine-local location ({local.group(0)!r}); it was not written.",
            [f"The whole uv output is in {runner.log_path}; please report this."],
        )
    return pylock


def _compile_failed(result, requirements, platform: Platform, python: str, log_path: Path):
    lines = [line.strip() for line in result.output.splitlines() if line.strip()][:10]
    detail = "\n".join(lines)
    if "No solution found" in result.output or "not satisfiable" in result.output:
        return ImpossibleError(
            "lock-unsatisfiable",
            f"{', '.join(requirements)} has no wheels that install on {platform.name} with Python {python}:\n{detail}",
            [
                "Choose another --python or --tf that has wheels for this platform.",
                f"The whole uv output is in {log_path}.",
            ],
        )
    return OperationError(
        "lock-failed",
        f"uv could not resolve the lock for {platform.name}:\n{detail}",
        [
            "Locking needs to reach the package index (https://pypi.org/simple).",
            f"The whole uv output is in {log_path}.",
        ],
    )
