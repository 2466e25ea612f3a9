"""What ``script --from-lock LOCK`` takes from a lock: the pins an export installs, nothing else.

``tfgpu.lock.for_export`` reads the lock through the same readers as ``create --from-lock`` and
``lock --check`` (which refuse an edited, truncated or hostile file) and fills a :class:`Locked`;
``tfgpu.export.pins`` renders it into each format. The export never reads the lock file itself.

The platform: a pip lock holds one; a conda lock may hold several, and then ``--platform`` chooses
(:func:`choose_platform` refuses with the choices when it does not).
"""

from __future__ import annotations

import hashlib
import re

from tfgpu.doors.urls import parse
from tfgpu.errors import ImpossibleError, UsageError
from tfgpu.records import record

_SHA256 = re.compile(r"[0-9a-f]{64}")
_URL = re.compile(r"[A-Za-z0-9._~:/+%@=-]{1,2000}")
"""What a package URL may hold: no shell, YAML or Dockerfile metacharacter reaches a script."""
_CONDA_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,200}")


@record
class CondaPin:
    """One conda package of a lock: what is downloaded from where, and the sha256 it must have."""

    name: str
    version: str
    url: str
    sha256: str

    @property
    def filename(self) -> str:
        return self.url.rsplit("/", 1)[-1]


@record
class Locked:
    """The pins of one platform of a lock, as an export installs them.

    ``requirements``: a hashed requirements file (pip's ``--require-hashes`` accepts every line);
    for a conda lock, its PyPI part (``name @ URL --hash=sha256:...``). ``conda``: the conda
    packages, each by URL and sha256 (empty for a pip lock)."""

    kind: str
    name: str
    """The lock file's name (never its directory: the export is the same bytes in any checkout)."""
    file_sha256: str
    """sha256 of the lock file's bytes, what ``sha256sum LOCK`` prints."""
    platform: str
    requirements: str
    conda: tuple[CondaPin, ...] = ()

    def count(self) -> int:
        """How many distributions and packages the export installs."""
        pins = sum(1 for line in self.requirements.splitlines() if line and not line[0].isspace() and line[0] != "#")
        return pins + len(self.conda)


def file_sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def choose_platform(path, platforms: list[str], wanted: tuple[str, ...]) -> str:
    """The lock's platform the export is for: the only one, or the one ``--platform`` names."""
    if len(wanted) > 1:
        raise UsageError(
            "bad-arguments",
            f"An export is for one platform; --platform was given {len(wanted)} times ({', '.join(wanted)}).",
            [f"Export once per platform: --platform {wanted[0]}, then --platform {wanted[1]}."],
        )
    if wanted:
        if wanted[0] not in platforms:
            raise ImpossibleError(
                "platform-not-in-lock",
                f"{path} has no {wanted[0]} environment (it locks {', '.join(platforms)}).",
                [f"--platform {name}" for name in platforms]
                + [f"Or write a lock for it: tfgpu-install lock --platform {wanted[0]} ..."],
            )
        return wanted[0]
    if len(platforms) == 1:
        return platforms[0]
    raise UsageError(
        "lock-platform-ambiguous",
        f"{path} locks {len(platforms)} platforms ({', '.join(platforms)}); an export installs one.",
        [f"Say which: --platform {name}" for name in platforms],
    )


def check_hashed(path, requirements: str) -> None:
    """Every pin of ``requirements`` is followed by its ``--hash`` lines (what uv writes): the exports
    say every file is checked against its sha256, and pip's ``--require-hashes`` on the target would
    otherwise refuse the whole install there, after the export was reviewed and shipped."""
    lines = requirements.splitlines()
    for number, line in enumerate(lines):
        text = line.strip()
        if not text or text.startswith(("#", "--hash=")) or " --hash=sha256:" in text:
            continue  # a comment, a hash line, or a pin with its hash on its line (a conda lock's PyPI part)
        following = lines[number + 1].strip() if number + 1 < len(lines) else ""
        if not (line.endswith(" \\") and following.startswith("--hash=sha256:")):
            raise UsageError(
                "lock-has-options",
                f"{path}: the pin {text[:120]!r} has no --hash line: an export installs every file "
                "checked against the lock's sha256 (pip --require-hashes), so the lock cannot be exported.",
                ["Regenerate the lock with `tfgpu-install lock` (which writes every pin's hashes)."],
            )


def conda_pins(path, packages) -> tuple[CondaPin, ...]:
    """A conda lock's packages, each refused unless it is a name, a version, an https URL to a package
    file (a target cannot reach this machine's file:// channel) and a 64-hex sha256: these become lines of
    a shell script and of an @EXPLICIT list, so nothing else may get through."""

    pins = []
    for p in packages:
        name, version, sha256 = str(p.name), str(p.version), str(getattr(p.hash, "sha256", None) or "")
        raw = str(p.url)
        url = parse(raw, f"{path}: {name[:60]}'s url")  # bad-url / insecure-url first
        if (
            not _CONDA_NAME.fullmatch(name)
            or not _CONDA_NAME.fullmatch(version)
            or not _SHA256.fullmatch(sha256)
            or not url.path.endswith((".conda", ".tar.bz2"))
            or not _URL.fullmatch(raw)
        ):
            raise UsageError(
                "lock-has-options",
                f"{path}: the conda entry {name[:60]!r} is not a package pinned by name, version, "
                f"HTTPS URL to a .conda/.tar.bz2 file and a sha256 of 64 hex digits.",
                ["Regenerate the lock with `tfgpu-install lock --mode conda`."],
            )
        pins.append(CondaPin(name, version, url.text, sha256))
    names = [pin.filename for pin in pins]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:  # each is downloaded to its file name: the second would replace the first, checked or not
        raise UsageError(
            "lock-has-options",
            f"{path}: {len(twice)} package file name(s) appear under two URLs ({', '.join(twice)[:200]}); an "
            "export downloads each package to its file name, so one would replace the other.",
            ["Regenerate the lock with `tfgpu-install lock --mode conda`."],
        )
    return tuple(pins)
