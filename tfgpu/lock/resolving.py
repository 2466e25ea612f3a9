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
_LOCAL_WORDS = ("file:", "/opt/", "/tmp/", "/home/", "/root/", "/work/", "/var/", "127.0.0.1", "localhost")
"""What every match of :data:`_LOCAL` holds. A pattern with no fixed start is tried at every place of
a lock's 100 kB (3 ms of the time after uv answers); these words are looked for directly."""


def _local_location(text: str) -> re.Match | None:
    """The first machine-local location in ``text`` (:data:`_LOCAL`), or None."""
    return _LOCAL.search(text) if any(word in text for word in _LOCAL_WORDS) else None


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
    meanwhile=None,
) -> tuple[str, str]:
    """Resolve ``requirements`` for ``platform``/``python``: (requirements body with hashes, pylock.toml).
    ``index``: the index to resolve against (default :func:`index_url`); ``refresh``: no cached answers;
    ``with_pylock``: also the PEP 751 file (else "" for it); ``meanwhile``: the caller's work that
    needs no pins, done while uv resolves (``tfgpu.process.runner.Runner.run``)."""
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
        }
        env = {name: "" for name in INDEX_VARIABLES}
        cached: list[tuple[str, str] | None] = []

        said: list[bool] = []

        def callers_work() -> None:
            said.append(True)
            if meanwhile is not None:
                meanwhile()

        def while_the_index_answers() -> None:
            # uv's cache is asked first, and the caller's work is done while it answers: all three are
            # done before the index's answer comes, and none waits for another.
            if with_pylock and not refresh:
                cached.append(_from_the_cache(uv, req_in, Path(tmp) / "cached", common, runner, env, callers_work))
            if not said:  # no cache run, or one that could not start
                callers_work()

        result = runner.run(
            compile_for_target(uv, req_in, Path(tmp) / "requirements.txt", refresh=refresh, **common),
            env=env,
            meanwhile=while_the_index_answers,
        )
        if result.returncode != 0:
            raise _compile_failed(result, requirements, platform, python, runner.log_path)
        fresh = untrusted.read_text(Path(tmp) / "requirements.txt", untrusted.PIP_LOCK)
        body = fresh.replace(str(req_in), "requirements.in")
        pylock = ""
        if with_pylock and cached and cached[0] is not None and cached[0][0] == fresh:
            pylock = cached[0][1]  # the cache held the index's answer for every pinned version
        elif with_pylock:
            if cached and cached[0] is not None:
                runner.log("uv's cache was behind the index: the pylock.toml is resolved after the index's answer.")
            output = Path(tmp) / "pylock.toml"
            pylock = _pylock_of(
                body,
                compile_for_target(uv, req_in, output, pylock=True, offline=True, **common),
                compile_for_target(uv, req_in, output, pylock=True, **common),
                output,
                runner,
                env,
                lambda failed: _compile_failed(failed, requirements, platform, python, runner.log_path),
            )
    if index == DEFAULT_INDEX:
        for text in (body, pylock):
            if local := _local_location(text):
                raise OperationError(
                    "lock-has-local-paths",
                    f"The lock would record a machine-local location ({local.group(0)!r}); it was not written.",
                    [f"The whole uv output is in {runner.log_path}; please report this."],
                )
    return body, pylock


def _from_the_cache(
    uv: str, req_in: Path, where: Path, common: dict, runner, env: dict, meanwhile=None
) -> tuple[str, str] | None:
    """(hashed requirements, pylock.toml) resolved by uv from its cache alone (``--offline``), in
    that order, while the index is asked for the same requirements: a lock asked again costs one
    round of requests and no uv run after it. None where the cache cannot answer (a first lock).
    ``meanwhile``: work done while the first of them runs (``tfgpu.process.runner.Runner.run``).

    The pylock is kept only where these requirements are byte for byte what the index answered
    (:func:`compile_pins`): the same versions and the hash of every file of each, so the file lists
    the pylock was made from are the index's. The index's run only ever replaces cached answers by
    fresher ones, and the pylock is resolved after these requirements: an answer they read fresh,
    it reads fresh too."""
    where.mkdir()
    requirements, pylock = where / "requirements.txt", where / "pylock.toml"
    for argv, alongside in (
        (compile_for_target(uv, req_in, requirements, offline=True, **common), meanwhile),
        (compile_for_target(uv, req_in, pylock, pylock=True, offline=True, **common), None),
    ):
        if runner.run(argv, env=env, meanwhile=alongside).returncode:
            runner.log("uv's cache cannot answer alone (above): the pylock.toml is resolved after the index's answer.")
            return None
    try:
        return (
            untrusted.read_text(requirements, untrusted.PIP_LOCK),
            untrusted.read_text(pylock, untrusted.PIP_LOCK),
        )
    except untrusted.Unreadable:
        return None


def _pylock_of(body: str, offline: tuple, online: tuple, output: Path, runner, env: dict, failure) -> str:
    """The PEP 751 file of the same resolution as ``body``, where the cache could not answer while
    the index was asked (:func:`_from_the_cache`): resolved by uv (``offline``) from the index
    answers the requirements' run has just put in its cache: no second round of requests,
    which made a lock 1.5x uv's own time when both ran side by side on a busy machine. Asked of the
    index again (``online``) where the cache cannot answer or answers other versions (another uv
    run changed it meanwhile); ``failure(result)``: the error to raise when that fails too. The two
    files of one lock always pin the same versions (``lock-failed`` when they cannot)."""
    pins = _body_pins(body)
    result = runner.run(offline, env=env)
    if result.returncode == 0:
        pylock = untrusted.read_text(output, untrusted.PIP_LOCK)
        if _pylock_pins(pylock) == pins:
            return pylock
    result = runner.run(online, env=env)
    if result.returncode != 0:
        raise failure(result)
    pylock = untrusted.read_text(output, untrusted.PIP_LOCK)
    if _pylock_pins(pylock) != pins:
        raise OperationError(
            "lock-failed",
            "uv resolved the requirements and the pylock.toml to different versions (the index changed "
            "between the two answers?); nothing was written.",
            ["Lock again.", f"The whole uv output is in {runner.log_path}."],
        )
    return pylock


_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s\\;]+)", re.MULTILINE)


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _body_pins(body: str) -> dict[str, str]:
    """``{name: version}`` of a hashed requirements body's ``name==version`` lines."""
    return {_normal(name): version for name, version in _PIN.findall(body)}


def _pylock_pins(pylock: str) -> dict[str, str] | None:
    """``{name: version}`` of a ``pylock.toml``'s packages, read through the door; None where it is
    no such file."""
    try:
        packages = untrusted.parse_toml(pylock, untrusted.PIP_LOCK, "uv's pylock.toml").get("packages", [])
        return {_normal(p["name"]): str(p["version"]) for p in packages}
    except (untrusted.Unreadable, AttributeError, KeyError, TypeError):
        return None


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
    if index == DEFAULT_INDEX and (local := _local_location(pylock)):
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
