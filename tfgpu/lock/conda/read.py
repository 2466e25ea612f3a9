"""Reading a conda-lock.yml that ``tfgpu-install lock --mode conda`` wrote: conda-lock's own
parser, and an edited, truncated or foreign lock refused before any field is used
(``tfgpu.lock.conda.install`` turns what it holds into what rattler and uv install).
"""

from __future__ import annotations

from pathlib import Path

from conda_lock.lockfile import Lockfile, LockfileV1, lockfile_v1_to_v2

from tfgpu.doors import secrets, untrusted
from tfgpu.doors.controls import shown
from tfgpu.doors.urls import checked, filename, parse
from tfgpu.errors import ImpossibleError, UsageError
from tfgpu.lock.conda.write import DIGEST, FORMAT, model_digest
from tfgpu.lock.recorded import Recorded
from tfgpu.lock.selectors import check_record
from tfgpu.records import record

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: type checkers treat it alike
if TYPE_CHECKING:
    from typing import Any


_RECORD = untrusted.Kind(
    "the conda lock's recorded resolution",
    1024 * 1024,
    lambda m: UsageError("lock-malformed", m, ["Regenerate it with `tfgpu-install lock --mode conda`."]),
)
"""A platform's record in a conda lock that parsed: one that is not a JSON table is malformed input
(exit 2), as a pip lock's header line that does not parse is."""


@record
class CondaLock:
    """A conda-lock.yml read back and checked."""

    path: Path
    lockfile: Any
    """conda_lock's Lockfile (conda-lock ships no type information)."""
    custom: dict

    @property
    def sha256(self) -> str:
        """The lock's checksum over its channels, platforms, resolutions and package entries."""
        return self.custom[DIGEST]

    def resolution(self, platform: str) -> Recorded:
        """What the lock records about ``platform``'s resolution, checked (``platform-not-in-lock``
        when it locks no such platform)."""
        key = f"tfgpu_resolution.{platform}"
        if key not in self.custom:
            raise ImpossibleError(
                "platform-not-in-lock",
                f"{self.path} has no {platform} environment (it locks {', '.join(self.lockfile.metadata.platforms)}).",
                [f"Regenerate it with --platform {platform}."],
            )
        source, kind = str(self.path), _RECORD
        recorded = untrusted.expect(untrusted.parse_json(self.custom[key], kind, source), dict, kind, source, key)
        # Each field's type and form is checked where a pip lock's are (``lock-malformed``, exit 2,
        # for either lock), with the fields only a conda lock's record holds: ``virtual_cuda``
        # (null for a platform solved without __cuda: CPU-only, or Apple silicon's Metal) and its specs.
        return check_record(
            recorded,
            path=self.path,
            mode="conda",
            cpu_only=recorded.get("cpu_only"),
            conda_keys=("virtual_cuda", "conda_specs"),
        )

    def channels(self) -> tuple[str, ...]:
        """The recorded channels, each through the URL door (a bundle's is a local file:// channel)."""
        return tuple(
            checked(str(c.url), f"{self.path}: metadata.channels", allow_file=True)
            for c in self.lockfile.metadata.channels
        )

    def packages(self, platform: str, manager: str) -> list:
        return [p for p in self.lockfile.package if p.platform == platform and p.manager == manager]


def read(path: Path) -> CondaLock:
    """Parse with conda-lock's own parser; refuse another tool's or another format's lock, and any
    edit to the package entries (their sha256 is in the metadata)."""
    if not (path.exists() or path.is_symlink()):
        raise UsageError(
            "lock-unreadable",
            f"There is no lock file at {path}.",
            ["Give the conda-lock.yml `tfgpu-install lock --mode conda` wrote."],
        )
    # Read through the door (bounded, no aliases), then validated with conda-lock's own models, as
    # conda-lock's parse_conda_lock_file does after its own unbounded read.
    content = untrusted.expect(untrusted.load_yaml(path, untrusted.CONDA_LOCK), dict, untrusted.CONDA_LOCK, str(path))
    try:
        lockfile = _validated(content, path)
    except Exception as error:  # pydantic errors: a truncated or hand-broken file
        raise ImpossibleError(
            "lock-corrupt",
            f"{path} is not a readable conda-lock file: {str(error)[:400]}",
            ["Regenerate it with `tfgpu-install lock --mode conda`."],
        ) from None
    custom = lockfile.metadata.custom_metadata or {}
    if custom.get("tfgpu_format") != FORMAT:
        # The lock's own words, from a format this version may not know: shown on one line and cut
        # short, as a pip lock's are, so a lock never prints lines of its choosing into the answer.
        found = shown(str(custom.get("tfgpu_format") or "")[:40]) or "none: another tool"
        raise ImpossibleError(
            "lock-format-unsupported",
            f"{path} was not written by this tfgpu-install (format {found}, this tool reads format {FORMAT}).",
            [
                "Regenerate it with this version: `tfgpu-install lock --mode conda ...`.",
                "A lock written by conda-lock itself installs with `conda-lock install`.",
            ],
        )
    if model_digest(lockfile) != custom.get(DIGEST):
        raise UsageError(
            "lock-modified",
            f"{path} was edited after it was written: its channels, platforms or "
            "package entries do not match the checksum recorded in it.",
            ["Regenerate the lock (`tfgpu-install lock --mode conda`) instead of editing it."],
        )
    check_urls(lockfile, path)
    return CondaLock(path=path, lockfile=lockfile, custom=custom)


def check_urls(lockfile, path: Path) -> None:
    """Refuse a lock whose URLs would carry a credential on (``secret-in-lock``: whatever is made
    from it, an export, a bundle, a check's output, would hold it too), or whose conda package
    lies outside every recorded channel (``lock-url-outside-channel``): the checksum binds the
    entries, not where they point, and a re-signed lock could install from any server. A conda
    package URL is a recorded channel's URL (same scheme, host and port), then ``/<subdir>/`` of
    the package's platform or ``noarch``, then the file name; ``file://`` bundles' channels too."""

    channels = [str(c.url) for c in lockfile.metadata.channels]
    for url in [*channels, *(str(p.url) for p in lockfile.package)]:
        if secrets.forms(url):
            raise UsageError(
                "secret-in-lock",
                f"{path} holds a credential in a URL ({secrets.masked(url)[:300]}); whatever is made from "
                "it would carry the credential on, so nothing was done with it.",
                [
                    "Regenerate the lock with `tfgpu-install lock --mode conda`: it records the channel without "
                    f"the credential, and {secrets.WHERE_FROM}.",
                ],
            )
    where = f"{path}: metadata.channels"
    roots = [parse(url, where, allow_file=True).text.rstrip("/") + "/" for url in channels]
    for package in lockfile.package:
        if package.manager != "conda":
            continue
        url = parse(str(package.url), f"{path}: {str(package.name)[:60]}'s url", allow_file=True).text
        subdirs = (str(package.platform), "noarch")
        if not any(
            url.startswith(root)
            and url[len(root) :].count("/") == 1
            and url[len(root) :].split("/")[0] in subdirs
            and _plain_file_name(url)
            for root in roots
        ):
            raise UsageError(
                "lock-url-outside-channel",
                f"{path}: the conda package {str(package.name)[:60]} points at {url[:300]}, which is not in "
                f"any channel the lock records ({', '.join(r.rstrip('/') for r in roots)[:600]}); a lock "
                "installs only from its own channels, so nothing was done with it.",
                ["Regenerate the lock (`tfgpu-install lock --mode conda`) instead of editing it."],
            )


def _plain_file_name(url: str) -> bool:
    """``url``'s file name is one file name as a server reads it, percent-decoded: ``..%2F..%2Fother%2Fx``,
    ``%2e%2e`` or ``x%5C..`` reach another directory of the host on servers that decode before
    they resolve the path (Python's http.server, many proxies), which the text comparison above
    cannot see."""

    decoded = filename(url)
    return bool(decoded) and decoded not in (".", "..") and not any(mark in decoded for mark in "/\\")


def _validated(content: dict, path: Path):
    version = content.pop("version", None)
    if version == 1:
        lockfile = lockfile_v1_to_v2(LockfileV1.model_validate(content))
    elif version == 2:
        lockfile = Lockfile.model_validate(content)
    else:
        raise ValueError(f"it has {'no' if version is None else 'an unknown'} lockfile version")
    lockfile.toposort_inplace()
    return lockfile
