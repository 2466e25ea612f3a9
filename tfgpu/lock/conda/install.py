"""``create --from-lock conda-lock.yml`` and a conda bundle's lock: the lock read and checked
(``tfgpu.lock.conda.read``), the selectors given with it checked against it, and its entries turned
into what rattler and uv install (a ``Source``) — every sha256 checked before anything is linked.
"""

from __future__ import annotations

import re
from pathlib import Path

from tfgpu.doors.urls import checked, parse
from tfgpu.errors import ImpossibleError, UsageError
from tfgpu.installers.base import LockedPackage, Source
from tfgpu.lock.conda.read import CondaLock, read
from tfgpu.lock.platforms import host_platform
from tfgpu.lock.selectors import check_selectors
from tfgpu.records import replace
from tfgpu.resolver import make_request, resolve
from tfgpu.settings import Selectors


def pip_requirements(lock: CondaLock, platform: str, pinned: bool = False) -> str:
    """The lock's PyPI part as a requirements file uv installs with every hash required; ``pinned``
    writes ``name==version`` instead of the URL (a bundle's wheels are found by --find-links).
    Each entry is checked first: a name, a version, an HTTPS wheel URL and a sha256, nothing else, so
    a crafted lock cannot slip an option line or another source into the file (``lock-has-options``)."""

    lines = []
    for p in lock.packages(platform, "pip"):
        sha256 = getattr(p.hash, "sha256", None) or ""
        wheel = parse(str(p.url), f"{lock.path}: {str(p.name)[:60]}'s url")  # bad-url / insecure-url first
        url = wheel.text
        if (
            not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", str(p.name))
            or not re.fullmatch(r"[A-Za-z0-9.+!_-]+", str(p.version))
            or not re.fullmatch(r"[0-9a-f]{64}", sha256)
            or not wheel.path.endswith(".whl")
            # pip and uv expand ${NAME} in a requirements file: a URL holding one would carry the
            # target's environment (a token, a password) to the lock's server. Plain URL text only.
            or not re.fullmatch(r"[A-Za-z0-9._~:/+%@=#!-]{1,2000}", url)
        ):
            raise UsageError(
                "lock-has-options",
                f"{lock.path}: the pip entry {str(p.name)[:60]!r} is not a wheel "
                "pinned by name, version, HTTPS URL and sha256.",
                ["Regenerate the lock with `tfgpu-install lock --mode conda`."],
            )
        lines.append(f"{f'{p.name}=={p.version}' if pinned else f'{p.name} @ {url}'} --hash=sha256:{sha256}")
    return "".join(f"{line}\n" for line in sorted(lines))


def prepare(path: Path, options, selectors=None, bundle_dir: Path | None = None):
    """(resolution, options, source, lock) for ``create --from-lock conda-lock.yml`` on this machine;
    with ``bundle_dir``, for ``create --from-bundle`` of a conda bundle (offline, from its channel/
    and wheels/)."""
    lock = read(path)
    here = host_platform()
    platform = here.name if here else "linux-64"
    recorded = lock.resolution(platform)
    if recorded.cpu_only:
        raise ImpossibleError(
            "lock-cpu-only",
            f"{path} locks a CPU-only environment for {platform}; tfgpu-install builds GPU environments.",
            ["`conda-lock install` installs it as it is."],
        )
    check_selectors(
        recorded,
        mode="conda",
        python=recorded.python,
        platform=platform,
        selectors=selectors or Selectors(),
        path=path,
    )
    resolution = resolve(
        make_request(tf=recorded.tensorflow, mode="conda", python=recorded.python, os=recorded.os, arch=recorded.arch),
        None,
    )
    if bundle_dir:
        options = replace(options, offline=True)
    conda = tuple(
        LockedPackage(
            p.name, p.version, checked(str(p.url), f"{path}: {p.name}'s url", allow_file=True), p.hash.sha256 or ""
        )
        for p in lock.packages(platform, "conda")
    )
    # The lock fixed where TensorFlow comes from when it was written: a conda package of it means conda-forge's build.
    resolution = replace(
        resolution, tensorflow_source="conda-forge" if any(p.name == "tensorflow" for p in conda) else "pypi"
    )
    source = Source(
        kind="bundle" if bundle_dir else "lock",
        requirements=pip_requirements(lock, platform, pinned=bundle_dir is not None),
        conda=conda,
        channels=lock.channels(),
        bundle=bundle_dir,
        label=f"{path} sha256:{lock.sha256}",
        lock_path=str(path),
    )
    return resolution, options, source, lock
