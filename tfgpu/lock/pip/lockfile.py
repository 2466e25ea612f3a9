"""The hashed pip lock's file format: one requirements file per platform that stock pip installs
with ``pip install --require-hashes -r FILE`` (the PEP 751 ``pylock.<platform>.toml`` goes beside it).

The file starts with a header of comments: the resolution in words, how to install and regenerate
it, and one ``# tfgpu-lock: {...}`` line that the tool reads back. That line records the format,
the tool version, the resolution, a sha256 of the inputs, and a sha256 of itself plus everything
below it, so ``create --from-lock`` refuses an edited or truncated file. Resolving the pins is
``tfgpu.lock.resolving``'s; this module renders and reads the file.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path

from tfgpu import __version__
from tfgpu.doors import quoting, untrusted
from tfgpu.doors.controls import shown
from tfgpu.doors.quoting import one_line
from tfgpu.doors.requirements import NAME_LIMIT, problem
from tfgpu.doors.urls import checked
from tfgpu.errors import ImpossibleError, UsageError
from tfgpu.lock.platforms import PLATFORMS, Platform
from tfgpu.lock.recorded import Recorded, planned
from tfgpu.lock.resolving import index_url
from tfgpu.lock.selectors import check_record
from tfgpu.records import record
from tfgpu.versions import version

FORMAT = 1
"""The lock format this tool writes and reads; bumped when the header's meaning changes."""
MARK = "# tfgpu-lock: "
_TOOL_VERSION = re.compile(r"[0-9][0-9A-Za-z.+!_-]{0,63}", re.ASCII)
"""The version of tfgpu-install a header says wrote it, as a version is written (``0.1.0``, ``1.2.0.dev3+g1a2b``)."""
_SHA256 = re.compile(r"[0-9a-f]{64}", re.ASCII)
"""A checksum as the header records it (``inputs_sha256``): 64 lowercase hex digits."""
_RESOLUTION_KEYS = (
    "tensorflow",
    "package",
    "python",
    "mode",
    "os",
    "arch",
    "platform",
    "accelerator",
    "cuda",
    "cuda_build",
    "cudnn",
    "min_driver",
    "toolkit_driver",
    "compute_capabilities",
)


@record
class PipHeader:
    """A pip lock's header record (its ``# tfgpu-lock:`` line): how the lock was made and the
    resolution it records. Made by :func:`make_header` when a lock is written and by :func:`read`
    from a file it has checked; :meth:`to_dict` is the line's form."""

    tool_version: str
    platform: str
    """The lock's platform (``linux-64``)."""
    python_platform: str
    """uv's ``--python-platform`` it was resolved for (``x86_64-manylinux_2_28``)."""
    index: str
    """The index it was resolved against, canonical (what uv is handed)."""
    inputs_sha256: str
    resolution: Recorded
    sha256: str = ""
    """The record's own checksum over it and the body (empty until :func:`render` signs it)."""

    @property
    def python(self) -> str:
        return self.resolution.python

    @property
    def cpu_only(self) -> bool:
        return self.resolution.cpu_only

    def to_dict(self) -> dict:
        """The record as the file holds it (with ``sha256`` once signed)."""
        meta = {
            "format": FORMAT,
            "tool": "tfgpu-install",
            "tool_version": self.tool_version,
            "mode": "pip",
            "platform": self.platform,
            "python_platform": self.python_platform,
            "python": self.python,
            "index": self.index,
            "cpu_only": self.cpu_only,
            "resolution": self.resolution.to_dict(),
            "inputs_sha256": self.inputs_sha256,
        }
        if self.sha256:
            meta["sha256"] = self.sha256
        return meta


@record
class PipLock:
    """A lock read back and checked: its recorded header and the requirements below it."""

    header: PipHeader
    body: str
    path: Path | None = None

    @property
    def resolution(self) -> Recorded:
        return self.header.resolution

    @property
    def sha256(self) -> str:
        return self.header.sha256

    @property
    def meta(self) -> dict:
        """The header as the file holds it, a fresh copy: what a test edits and :func:`render`s again
        to forge a lock (the tool itself reads :attr:`header`)."""
        return self.header.to_dict()

    def pins(self) -> dict[str, str]:
        """``{name: version}`` of every locked distribution."""
        return pins(self.body)


def pins(body: str) -> dict[str, str]:
    """``{name: version}`` of the ``name==version`` lines of a compiled requirements file."""
    found = re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s\\;]+)", body, re.MULTILINE)
    return {name.lower().replace("_", "-"): version for name, version in found}


def make_header(resolution, platform: Platform, *, cpu_only: bool, index: str | None = None) -> PipHeader:
    """The header record of a lock, without its ``sha256`` (added by :func:`render`); with --with,
    its companions, which `lock --check` and the regenerate command plan again."""
    requirements = list(resolution.packages.pip)
    index = index or index_url()
    return PipHeader(
        tool_version=__version__,
        platform=platform.name,
        python_platform=platform.uv,
        index=index,
        inputs_sha256=inputs_digest(lock_inputs(requirements, resolution.python, platform.uv, index)),
        resolution=planned(resolution, cpu_only=cpu_only, requirements=requirements),
    )


def lock_inputs(requirements: Sequence[str], python: str, python_platform: str, index: str) -> dict:
    """What a pip lock is resolved from (``inputs_sha256`` digests it): the same inputs, the same lock."""
    return {
        "format": FORMAT,
        "mode": "pip",
        "requirements": list(requirements),
        "python": python,
        "python_platform": python_platform,
        "index": index,
    }


def inputs_digest(inputs: dict) -> str:
    return _sha256(_canonical(inputs))


def regenerate_command(header: PipHeader, output: str) -> str:
    """The exact command that writes this lock again (``--no-detect``: the host plays no part)."""
    return _regenerate(header.to_dict(), output)


def _regenerate(meta: dict, output: str) -> str:
    """:func:`regenerate_command` from the header's file form: the one :func:`render` writes, or
    that of a lock :func:`read` refuses (KeyError, TypeError where it lacks what the command needs)."""
    argv = [
        "tfgpu-install",
        "lock",
        "--tf",
        meta["resolution"]["tensorflow"],
        "--mode",
        "pip",
        "--python",
        meta["python"],
        "--os",
        meta["resolution"]["os"],
        "--platform",
        meta["platform"],
        "--no-detect",
        *(part for spec in meta["resolution"].get("companions", ()) for part in ("--with", spec)),
        *(("--allow-cpu",) if meta["cpu_only"] else ()),
        "-o",
        output,
    ]
    return quoting.sh_join(argv)


def render(meta: dict, body: str, output: str) -> str:
    """The whole lock file: the header (human lines, then the record line) and the body. ``meta``:
    the header's file form (:meth:`PipHeader.to_dict`), written as given and signed here."""
    record = dict(meta)
    record["sha256"] = _digest(meta, body)
    r = meta["resolution"]
    what = (
        f"CPU only: {meta['platform']} has no TensorFlow GPU build (locked with --allow-cpu)"
        if meta["cpu_only"]
        else f"CUDA {r['cuda']}, cuDNN {r['cudnn']}, NVIDIA driver >= {r['min_driver']}"
    )
    # The file's name, never its directory: the same inputs in two checkouts give the same bytes. It
    # is comment text (tfgpu.doors.quoting): a line break in it would end the comment (a stray line is a
    # requirement to pip), a bidirectional control would show the reviewer another line.
    name = one_line(Path(output).name) or "lock"
    lines = [
        f"# tfgpu-install {__version__} pip lock (format {FORMAT}). Generated: do not edit; "
        "`tfgpu-install create --from-lock` refuses an edited file.",
        f"# TensorFlow {r['tensorflow']} for {meta['platform']} ({meta['python_platform']}), Python {meta['python']}: "
        f"{what}.",
        f"# Install:    tfgpu-install create --from-lock {name} --prefix ENV",
        f"#   or plain: pip install --require-hashes -r {name}   (then the CUDA library paths are yours to set)",
        f"# Regenerate: {_regenerate(meta, name)}",
        MARK + _canonical(record),
    ]
    return "\n".join(lines) + "\n" + body


def read(path: Path, text: str | None = None) -> PipLock:
    """Read and check a lock: its record line, format and sha256; raises with a way forward."""
    if text is None:
        text = untrusted.read_text(path, untrusted.PIP_LOCK)
    _, sep, body = text.partition("\n" + MARK)
    if not sep and text.startswith(MARK):
        sep, body = MARK, text[len(MARK) :]
    record_line, _, body = body.partition("\n")
    try:
        meta = untrusted.parse_json(record_line, untrusted.LOCK_RECORD, str(path)) if sep else None
    except untrusted.Unreadable:
        meta = None
    if not isinstance(meta, dict) or meta.get("tool") != "tfgpu-install":
        raise UsageError(
            "lock-malformed",
            f"{path} is not a tfgpu-install lock: it has no readable "
            f"`{MARK.strip()}` header line (edited or cut short?).",
            [
                "Write a lock with `tfgpu-install lock ... --mode pip --platform linux-64 -o FILE`.",
                "A plain requirements file installs with `tfgpu-install create --tf ... --mode pip`.",
            ],
        )
    if meta.get("format") != FORMAT or meta.get("mode") != "pip":
        # The header's own words, from a format this version may not know: each shown on one line and
        # cut short, so a lock never prints lines of its choosing (or megabytes) into the answer.
        said = {key: shown(str(meta.get(key, "?"))[:40]) for key in ("tool_version", "format", "mode")}
        again = "Or regenerate it with `tfgpu-install lock`."
        try:
            command = _regenerate(meta, str(path))
        except (KeyError, TypeError):
            command = ""
        # The command is made of the header's fields, which this version has not checked: only a
        # short one-line command is offered (a field's line break would print a line of its own).
        if command and shown(command) == command and len(command) <= 1_000:
            again = "Or regenerate it with this version: " + command
        raise ImpossibleError(
            "lock-format-unsupported",
            f"{path} was written by tfgpu-install {said['tool_version']} in lock format "
            f"{said['format']} ({said['mode']} mode); this tfgpu-install {__version__} reads pip "
            f"locks of format {FORMAT}.",
            [f"Install tfgpu-install {said['tool_version']} to use this lock as it is.", again],
        )
    recorded = _check_shape(meta, path)
    signed = meta.pop("sha256", None)
    actual = _digest(meta, body)
    if signed != actual:
        raise UsageError(
            "lock-modified",
            f"{path} was changed after tfgpu-install wrote it (edited or truncated): its recorded sha256 is "
            f"{signed}, its content hashes to {actual}.",
            [
                "Restore the file from version control, or regenerate it: " + _regenerate(meta, str(path)),
                "Pins are changed by regenerating the lock, never by editing it.",
            ],
        )
    check_body(body, path)
    header = PipHeader(
        tool_version=meta["tool_version"],
        platform=meta["platform"],
        python_platform=meta["python_platform"],
        index=check_index(meta["index"], path),  # canonical: what uv is handed
        inputs_sha256=meta["inputs_sha256"],
        resolution=recorded,
        sha256=actual,
    )
    return PipLock(header=header, body=body, path=path)


def _check_shape(meta: dict, path) -> Recorded:
    """The record's fields are of the types this version writes (a record with the right checksum
    may still hold a list where a string goes: anyone can recompute the checksum); its resolution,
    parsed by ``check_record``."""
    kind, source = untrusted.PIP_LOCK_SHAPE, str(path)
    for key in ("platform", "python_platform", "python", "index", "inputs_sha256", "tool_version"):
        untrusted.expect(meta.get(key), str, kind, source, f"the record's {key!r}")
    untrusted.expect(meta.get("cpu_only"), bool, kind, source, "the record's 'cpu_only'")
    untrusted.expect(meta.get("format"), int, kind, source, "the record's 'format'")  # `true == 1` passed
    if not _SHA256.fullmatch(meta["inputs_sha256"]):
        raise UsageError(
            "lock-malformed",
            f"{path}: the record's inputs_sha256 {shown(meta['inputs_sha256'][:40])!r} is not a sha256.",
            ["Regenerate the lock with `tfgpu-install lock`; a lock's record is never edited by hand."],
        )
    if not _TOOL_VERSION.fullmatch(meta["tool_version"]):
        # What a lock install says it came from (`tfgpu-install X`): a version, never lines of text.
        raise UsageError(
            "lock-malformed",
            f"{path}: the record's tool_version {shown(meta['tool_version'][:40])!r} is not a version.",
            ["Regenerate the lock with `tfgpu-install lock`; a lock's record is never edited by hand."],
        )
    if meta["platform"] not in PLATFORMS:
        untrusted.expect(None, str, kind, source, f"the record's platform {meta['platform']!r}")
    recorded = untrusted.expect(meta.get("resolution"), dict, kind, source, "the record's 'resolution'")
    for key in _RESOLUTION_KEYS:
        if key not in recorded:
            untrusted.expect(None, str, kind, source, f"the resolution's {key!r}")
        if key != "compute_capabilities":
            untrusted.expect(recorded[key], (str, int, float, type(None)), kind, source, f"the resolution's {key!r}")
    for key in ("compute_capabilities", "requirements", "companions"):
        default: list | None = [] if key == "companions" else None  # only locks made with --with record companions
        for item in untrusted.expect(recorded.get(key, default), list, kind, source, f"the resolution's {key!r}"):
            untrusted.expect(item, str, kind, source, f"an item of the resolution's {key!r}")

    found = check_record(recorded, path=path, mode="pip", cpu_only=meta["cpu_only"])
    if meta["python"] != found.python or meta["python_platform"] not in {p.uv for p in PLATFORMS.values()}:
        raise UsageError(
            "lock-malformed",
            f"{path}: the record's python {meta['python'][:40]!r} and python_platform "
            f"{meta['python_platform'][:40]!r} are not its resolution's Python and a known platform.",
            ["Regenerate the lock with `tfgpu-install lock`."],
        )
    return found


# What a lock body may hold: uv's hashed output and nothing else. A checksum proves a lock was not
# edited by accident, not that it is honest (anyone can recompute it), so its *content* is checked:
# an option line (``--index-url``, ``-e``, ``-r``, ``--find-links``...), option text after a marker,
# or a direct URL would make pip or uv fetch from somewhere the lock's reviewer never saw. Each
# requirement line is parsed by the requirement door (markers allowed) and must be one ``==`` pin.
_HASH = re.compile(r"\s+--hash=sha256:[0-9a-f]{64}( \\)?")
# What uv writes for nearly every pin: a name (PEP 508, ASCII) and a version in PEP 440's normal form
# (numbers and dots, then an optional pre-release, post-release and development release; at most 64
# characters, as a version is bounded), nothing else. Such a line is one exact pin, as the full parse
# says too (tests/test_lock_pip_body.py holds the two to the same answer); every other line takes the
# full parse. Two parses of each of a TF lock's 44 pins were half of what a lock did after uv's answer,
# and loading packaging's parser (with its markers, wheel tags, logging and typing) ~20 ms of CPU.
_PLAIN_PIN = re.compile(
    rf"[A-Za-z0-9](?:[A-Za-z0-9._-]{{0,{NAME_LIMIT - 2}}}[A-Za-z0-9])?=="
    r"[0-9]{1,8}(?:\.[0-9]{1,8}){0,4}(?:(?:a|b|rc)[0-9]{1,3})?(?:\.post[0-9]{1,3})?(?:\.dev[0-9]{1,3})?",
    re.ASCII,
)


def _pin_problem(line: str) -> str | None:
    """Why ``line`` is not one ``name==version`` pin (with an optional marker), or None."""

    text = line[:-2] if line.endswith(" \\") else line
    if _PLAIN_PIN.fullmatch(text):
        return None
    why = problem(text, markers=True)
    if why:
        return why
    # Start-up cost: a lock of plain pins (what uv writes for TensorFlow) never loads packaging's parser,
    # with its markers, tags, logging and typing.
    from packaging.requirements import Requirement

    specifiers = list(Requirement(text).specifier)
    if len(specifiers) != 1 or specifiers[0].operator != "==" or version(specifiers[0].version) is None:
        return "it is not one exact `==` pin"
    return None


def check_body(body: str, path) -> None:
    """Every line is a ``name==version`` pin, a ``--hash=sha256:`` continuation or a comment;
    else ``lock-has-options`` (exit 2)."""
    for number, line in enumerate(body.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if _HASH.fullmatch(line) or _pin_problem(line) is None:
            continue
        raise UsageError(
            "lock-has-options",
            f"{path} holds more than pinned requirements: line {number} of its "
            f"requirements is {line.strip()[:120]!r}. A lock carries `name==version` pins with their "
            "hashes only; options and URLs are refused.",
            ["Regenerate the lock with `tfgpu-install lock` (which never writes option lines)."],
        )


def check_index(index: str, path) -> str:
    """The index a lock records passes the URL door (``bad-url``, ``insecure-url``) before anything reads it."""

    return checked(index, f"{path}: the recorded index")


def _canonical(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _digest(meta: dict, body: str) -> str:
    unsigned = {key: value for key, value in meta.items() if key != "sha256"}
    return _sha256(_canonical(unsigned) + "\n" + body)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
