"""uv, the PyPI engine: where its binary is, the commands every mode runs with it, and how to read
what it says back (the installed set, the pins it chose, why it failed).

Every command is an argv built here, so pip mode, conda mode's PyPI part, system mode's venv,
locks and bundles say the same things to uv. Every one names its interpreter (``--python`` with a
path, or an exact X.Y for a venv uv may provide), so uv never picks one: left to itself, a new uv
downloads the newest CPython, for which TensorFlow has no wheels. Every one says ``--no-config``:
a ``uv.toml`` or ``pyproject.toml [tool.uv]`` in the working directory or its parents (a cloned
project's), or the user's ``~/.config/uv/uv.toml``, would otherwise name indexes that never pass
the URL door; uv's index variables are held by ``tfgpu.process.runner`` (through the door, or dropped).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import sys
from functools import cache
from pathlib import Path

from tfgpu.doors import untrusted
from tfgpu.doors.controls import character_class
from tfgpu.doors.urls import checked, is_local, parse
from tfgpu.errors import OperationError, UsageError
from tfgpu.process.childenv import INDEX_VARIABLES  # the one list: checked for every child, blanked for a lock's run
from tfgpu.records import record

# The patterns that read uv's output are compiled when first used (functools.cache): a lock starts
# uv right after this module loads, and only a failure reads them.
_PROBLEM_LINES = (
    r"(error|No solution found|not found|Because|hint|Failed|unsatisfiable|"
    r"Could not|ERROR|No matching distribution|Hash mismatch|do not match the hashes)"
)
# A failure to reach the index at all: uv's connection errors. ("Failed to fetch" and "error sending
# request" also head HTTP 404s and hash mismatches, so they are not signs of a missing network.)
_NO_NETWORK = (
    r"(dns error|error resolving DNS|failed to lookup address|Name or service not known|"
    r"Temporary failure in name resolution|Network is unreachable|Connection refused|"
    r"Could not connect|tcp connect error|operation timed out|connection timed out)"
)
# A package that --offline could not find: neither in --find-links nor in uv's cache.
_NOT_OFFLINE = (
    r"(No solution found|there is no version of|not found in the provided package locations|"
    r"network connectivity is disabled|network was disabled|not found in the cache)"
)


# An index that answered a resolve and failed the install a moment later: a server error or a
# connection cut mid-transfer (uv's own retries spent), as a mirror or CDN between two states gives.
_TRANSIENT = (
    r"(status code:? 5\d\d|\b50[0234] (?:Internal|Bad Gateway|Service|Gateway)|connection reset|"
    r"connection closed before|error decoding response body|unexpected EOF|request or response body error)"
)


@cache
def _pattern(source: str) -> re.Pattern[str]:
    """One of the patterns above, compiled (case-insensitive) when first used."""
    return re.compile(source, re.I)


def _canonical(requirement: str) -> str:
    name, _, version = requirement.partition("==")
    return f"{re.sub(r'[-_.]+', '-', name).lower()}=={version}"


def looks_transient(output: str, pins: list[str]) -> tuple[str, list[str]] | None:
    """Why a failed install, right after a resolve against the same index chose ``pins``, looks
    like the index's passing state rather than the build's fault, and the names of the pins it
    stopped serving (for ``--refresh-package``); None when it does not. uv said, say, "there is no
    version of grpcio==1.85.4" for the grpcio==1.85.4 it had just chosen."""
    chosen = {_canonical(pin) for pin in pins}
    gone = [req for req in lacking(output) if "==" in req and _canonical(req) in chosen]
    if gone:
        return f"the index offered {', '.join(gone)} to the resolve and not to the install", [
            req.partition("==")[0] for req in gone
        ]
    if _pattern(_NO_NETWORK).search(output) or _pattern(_TRANSIENT).search(output):
        return "the index answered the resolve and then failed the install", []
    return None


def find_uv() -> str | None:
    """The uv binary shipped by the ``uv`` package, else one on PATH."""
    if sys.prefix != sys.base_prefix and os.name == "posix":
        # In a venv (pipx's, or the user's) the uv package's first place is the venv's bin/, which
        # it finds through sysconfig's install schemes: 11M instructions a lock spends before uv
        # starts. The same first place, looked at directly; anywhere else, the package's whole search.
        beside = os.path.join(sys.prefix, "bin", "uv")
        if os.path.isfile(beside) and os.access(beside, os.X_OK):
            return beside
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        return shutil.which("uv")


def find_links_source(value: str | None) -> str | None:
    """A ``--find-links`` value checked, as uv will be given it: a local directory (made absolute,
    so the staging directory's cwd does not change its meaning) or a URL through the door, in
    canonical form. An index page over plain HTTP can be swapped along with the wheels it lists
    (``tfgpu.doors.urls``)."""
    if not value:
        return None
    if not is_local(value) or "\\" in value:
        # Start-up cost: `completion` loads this module but not tfgpu.datasource.transport.
        from tfgpu.datasource.transport import preflight

        value = checked(value, "--find-links")
        preflight(value, "the --find-links page's redirect target")
        return value
    if not Path(value).is_dir():
        raise UsageError(
            "bad-find-links",
            f"--find-links {value!r} is not a directory.",
            ["Give a directory of wheels, e.g. one filled by `pip download -d DIR ...`."],
        )
    _no_streams(value)
    return str(Path(value).absolute())


DISTRIBUTIONS = (".whl", ".tar.gz", ".zip", ".tgz", ".tar.bz2", ".tar.xz", ".tar.zst")
"""Names uv reads in a ``--find-links`` directory as wheels and source distributions."""


def _no_streams(directory: str) -> None:
    """``bad-find-links`` when a file of ``directory`` named as a distribution is a FIFO, device or
    socket (or links to one): uv opens the wheel it picks with a blocking read, so a FIFO named
    ``six-1.16.0-py3-none-any.whl`` hangs the build forever and ``/dev/zero`` never ends."""
    try:
        entries = [entry.path for entry in os.scandir(directory) if entry.name.lower().endswith(DISTRIBUTIONS)]
    except OSError:
        return  # unreadable: uv says so itself, without blocking
    for path in entries:
        try:
            mode = os.stat(path).st_mode
        except OSError:
            continue  # dangling or unreadable: uv reports it, it cannot block on it
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise UsageError(
                "bad-find-links",
                f"--find-links {directory!r} holds {os.path.basename(path)!r}, which is not a regular file "
                "(a FIFO, device or socket): uv would block reading it as a wheel.",
                ["Remove it from the directory, or give a directory that holds wheel files only."],
            )


def sources(find_links: str | None, offline: bool, *, only_find_links: bool = False) -> tuple[str, ...]:
    """Where packages may come from: a wheel directory, the index, uv's cache.

    ``offline``: uv's ``--offline`` (no network access at all), which still reads the index's
    answers and the wheels uv's cache already holds, so a release installed once installs again
    with no network. ``only_find_links`` (a bundle): ``--no-index`` as well, so nothing but the
    wheel directory is used (``--no-index`` alone would also ignore the cached index)."""
    found: tuple[str, ...] = ()
    if find_links:
        found += ("--find-links", find_links)
    if offline:
        found += ("--offline",)
    if only_find_links:
        found += ("--no-index",)
    return found


def directory_alone(sources: tuple[str, ...]) -> tuple[str, ...] | None:
    """``sources`` (:func:`sources`'s) that read the ``--find-links`` directory alone (``--no-index``
    added), when they are offline with a directory and do not already; else None.

    Offline, uv's cache still answers for the index with the pages earlier runs fetched, without
    the files those pages list. Where the index offers a wheel of a version that ranks higher for
    the interpreter than the directory's wheel of the same version (a newer manylinux tag, a cpXY
    tag over py3), uv takes the index's file, cannot fetch it offline, and gives up on the version:
    the directory's own wheel is never tried (``--index-strategy`` orders indexes, not find-links).
    A resolve from the directory alone first means a complete directory always installs; the
    cache is asked only for what the directory lacks (:func:`lacking`)."""
    if "--offline" in sources and "--find-links" in sources and "--no-index" not in sources:
        return (*sources, "--no-index")
    return None


def tries(sources: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    """The sources to try in order: the wheel directory alone first where :func:`directory_alone`
    applies, then ``sources``; the next is tried only when the one before found a package missing."""
    alone = directory_alone(sources)
    return (alone, sources) if alone is not None else (sources,)


# A requirement as uv names it. uv's output carries text from the wheels' own METADATA (a name in a
# Requires-Dist may be any length, a version anything): a match starts only where a name does, each
# part has a length cap, and no part holds a control character (tfgpu.doors.controls), so a 40,000-character
# name costs no quadratic search (it took 36 s) and no escape sequence reaches the message.
@cache
def _lacking() -> re.Pattern[str]:
    """The pattern :func:`lacking` reads with, built when first used: the control set it leaves out
    is tfgpu.doors.controls' whole set, which a lock that never fails never builds."""
    control = character_class()[1:-1]
    req = (
        rf"(?<![A-Za-z0-9._-])[A-Za-z0-9][A-Za-z0-9._-]{{0,200}}(?:\[[^\]{control}]{{0,200}}\])?"
        rf"(?:(?:==|>=|<=|~=|!=|<|>)[^\s,{control}]{{1,100}})?"
    )
    return re.compile(
        rf"there is no version of (?P<version>{req})|(?P<req>{req}) (?:was not found in the provided package "
        r"locations|was not found in the cache|needs to be downloaded from a registry)"
    )


def lacking(output: str) -> list[str]:
    """The requirements uv's offline failure says it found neither in ``--find-links`` nor in its
    cache (``third``, ``dep==2.0``, ``cryptography>=45.0.1``), in the order it names them. uv stops
    at the first conflict, so this may be fewer than are missing."""
    found: list[str] = []
    for match in _lacking().finditer(output):
        requirement = match.group("version") or match.group("req")
        if requirement not in found:
            found.append(requirement)
    return found


def venv(uv: str, target: Path, python: str, prompt: str, *, offline: bool, cache: Path) -> tuple[str, ...]:
    """A relocatable venv (built in staging, moved into place); the prompt is the tool's own label,
    passed as ``--prompt=…`` so that no value can read as an option."""
    return (
        uv,
        "venv",
        str(target),
        "--no-config",
        "--python",
        python,
        "--relocatable",
        f"--prompt={prompt}",
        *(("--offline",) if offline else ()),
        "--allow-existing",
        "--cache-dir",
        str(cache),
    )


def compile_hashed(
    uv: str, requirements_in: Path, out: Path, python: str, *, cache: Path, extra: tuple[str, ...] = ()
) -> tuple[str, ...]:
    """The exact versions of ``requirements_in`` for ``python``, every hash included."""
    return (
        uv,
        "pip",
        "compile",
        str(requirements_in),
        "-o",
        str(out),
        "--no-config",
        "--python",
        python,
        "--generate-hashes",
        "--no-header",
        "--quiet",
        "--cache-dir",
        str(cache),
        *extra,
    )


def install(
    uv: str,
    python: str,
    requirements: Path,
    *,
    cache: Path,
    extra: tuple[str, ...] = (),
    hashes: bool = False,
    no_deps: bool = False,
    compile_bytecode: bool = True,
    constraints: Path | None = None,
) -> tuple[str, ...]:
    """Install exactly ``requirements`` into ``python``'s environment (``constraints``: a file of
    pins the solution must keep, as ``repair`` holds everything an env already has)."""
    return (
        uv,
        "pip",
        "install",
        "--no-config",
        "--python",
        python,
        "-r",
        str(requirements),
        *(("-c", str(constraints)) if constraints is not None else ()),
        *(("--require-hashes",) if hashes else ()),
        *(("--no-deps",) if no_deps else ()),
        *(("--compile-bytecode",) if compile_bytecode else ()),
        "--cache-dir",
        str(cache),
        *extra,
    )


def uninstall(uv: str, python: str, names: list[str]) -> tuple[str, ...]:
    """Remove the distributions ``names`` from ``python``'s environment."""
    return (uv, "pip", "uninstall", "--no-config", "--python", python, *names)


def compile_for_target(
    uv: str,
    requirements_in: Path,
    output: Path,
    *,
    python_version: str,
    python_platform: str,
    index: str,
    cache: Path,
    pylock: bool = False,
    only_binary: bool = False,
    interpreter: str | None = None,
    refresh: bool = False,
    offline: bool = False,
) -> tuple[str, ...]:
    """A lock for another machine: ``requirements_in`` resolved for ``python_version`` on
    ``python_platform`` against ``index`` only (no uv config), with hashes, or as a PEP 751
    ``pylock.toml``. The interpreter that runs the resolution is this tool's own (never downloaded).
    ``refresh``: ask the index again instead of trusting uv's cached answers (``lock --check``);
    ``offline``: only uv's cached answers (what a run just before this one fetched)."""
    return (
        uv,
        "pip",
        "compile",
        str(requirements_in),
        "--python",
        interpreter or sys.executable,
        "--python-version",
        python_version,
        "--python-platform",
        python_platform,
        "--no-python-downloads",
        "--default-index",
        checked(index, "the index"),
        "--no-config",
        "--no-header",
        "--quiet",
        "--cache-dir",
        str(cache),
        *(("--only-binary", ":all:") if only_binary else ()),
        *(("--refresh",) if refresh else ()),
        *(("--offline",) if offline else ()),
        *(("--format", "pylock.toml") if pylock else ("--generate-hashes",)),
        "-o",
        str(output),
    )


def build_wheel(
    uv: str, source: Path, out_dir: Path, *, index: str, cache: Path, interpreter: str | None = None
) -> tuple[str, ...]:
    """A wheel of the project at ``source``, built with this tool's own interpreter."""
    return (
        uv,
        "build",
        "--wheel",
        "--out-dir",
        str(out_dir),
        str(source),
        "--python",
        interpreter or sys.executable,
        "--no-config",
        "--no-python-downloads",
        "--default-index",
        checked(index, "the index"),
        "--cache-dir",
        str(cache),
        "--quiet",
    )


def inventory(uv: str, python: str, *, cache: Path) -> tuple[str, ...]:
    return (
        uv,
        "pip",
        "list",
        "--no-config",
        "--python",
        python,
        "--format",
        "json",
        "--cache-dir",
        str(cache),
        "--offline",
    )


def locked_index(index: str) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """(argv, env) that make an install use ``index`` and no other (``--from-lock``)."""
    blanked = tuple((name, "") for name in INDEX_VARIABLES)
    return ("--default-index", preflown_index(index, "the lock's index")), blanked


def preflown_index(index: str, what: str) -> str:
    """``index`` through the URL door, and asked once before an engine follows its redirects
    (``tfgpu.datasource.transport.preflight``)."""
    # Start-up cost: `completion` loads this module but not tfgpu.datasource.transport.
    from tfgpu.datasource.transport import preflight

    index = checked(index, what)
    preflight(index.rstrip("/") + "/", f"{what}'s redirect target")
    return index


def pip_locked_index(index: str) -> tuple[str, ...]:
    """pip's options that make a locked install ask ``index`` only (with ``--isolated``, which
    ignores pip's variables and config files); a plain-HTTP index passed the URL door, so its host
    was named, and pip is told to trust it."""
    parsed = parse(preflown_index(index, "the lock's index"), "the lock's index")
    return ("--index-url", parsed.text, *(("--trusted-host", parsed.host) if parsed.scheme == "http" else ()))


def parse_inventory(output: str) -> dict[str, str]:
    """``{name: version}`` from ``uv pip list``/``pip list --format json`` (whose first line may be
    uv's "Using Python ... environment at" note)."""
    for line in reversed(output.splitlines()):
        if line.startswith("["):
            try:
                return {
                    row["name"]: row["version"]
                    for row in untrusted.parse_json(line, untrusted.CHILD_OUTPUT, "the package list")
                }
            except (untrusted.Unreadable, KeyError, TypeError):
                break
    raise OperationError(
        "install-failed",
        "Could not read the list of installed packages:\n" + output[-500:],
        ["Run the same command by hand; the log has the whole output."],
    )


def exact_pins(lock_text: str) -> list[str]:
    """``name==version`` lines of a compiled requirements file."""
    return [
        line.split()[0].rstrip("\\")
        for line in lock_text.splitlines()
        if re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[^\]]*\])?==", line)
    ]


@record
class RunFailure:  # a record, not a NamedTuple: a lock starts uv without importing typing
    """What a failed command says, as facts: which command, its exit status, the lines that name
    the problem (else the output's tail), and two readings of uv's output. What they mean for the
    user (what to do) is the mode installer's to say (``tfgpu.installers.failures.install_failed``)."""

    command: str
    """The program and its first two arguments (``uv pip install``)."""
    returncode: int
    detail: str
    unreachable: bool
    """The index could not be reached at all (a connection error, not an HTTP 404 or a bad hash)."""
    not_found: bool
    """A package was found neither where uv looked nor in its cache."""


def run_failure(argv, done, location=None) -> RunFailure:
    """The facts of ``done``, a failed run of ``argv``. ``location`` (the build's): its staging
    directory is gone when this is shown, so the text names the env instead."""
    output = done.output
    if location is not None and location.staging != location.prefix:
        output = output.replace(str(location.staging), str(location.prefix))
    lines = [line for line in output.splitlines() if not line.startswith("Using Python ")]
    problem = [line.strip() for line in lines if _pattern(_PROBLEM_LINES).search(line)][:8]
    return RunFailure(
        command=f"{Path(argv[0]).name} {' '.join(argv[1:3])}",
        returncode=done.returncode,
        detail="\n".join(problem) if problem else "\n".join(lines[-12:]),
        unreachable=bool(_pattern(_NO_NETWORK).search(output)),
        not_found=bool(_pattern(_NOT_OFFLINE).search(output)),
    )
