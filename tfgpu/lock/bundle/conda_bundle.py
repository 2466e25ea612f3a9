"""Offline conda bundles: a conda-lock.yml, every conda package it locks as a local channel, every
wheel of its PyPI part, tfgpu-install's own wheels, a README and ``install.sh``.

Layout (contract)::

    DIR/bundle.json             manifest: format, mode "conda", every file's sha256 and size
    DIR/conda-lock.yml          the lock (``tfgpu-install lock --mode conda`` for one platform)
    DIR/channel/<subdir>/       every locked conda package, indexed (``repodata.json``): a channel
    DIR/wheels/                 every ``manager: pip`` wheel of the lock
    DIR/tool/                   tfgpu-install's wheel and its dependencies' wheels
    DIR/README.md, DIR/install.sh

``create --from-bundle DIR`` takes the conda records from ``DIR/channel`` (matched by file name,
checked against the lock's sha256) and the wheels from ``DIR/wheels`` with every hash required.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tfgpu import __version__
from tfgpu.doors import secrets, trees, urls
from tfgpu.doors.paths import cache_root, write_output
from tfgpu.engines import rattler_engine
from tfgpu.engines.download import fetch
from tfgpu.errors import OperationError
from tfgpu.lock.bundle.files import digest
from tfgpu.lock.bundle.steps import (
    FORMAT,
    MANIFEST,
    PARTIAL,
    Built,
    Wheel,
    add_tool_and_installer,
    collect,
    start,
)
from tfgpu.lock.conda import read, write
from tfgpu.progress import Combined

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: type checkers treat it alike
if TYPE_CHECKING:
    from typing import Any

    from tfgpu.lock.recorded import Recorded

LOCK = "conda-lock.yml"


def file_name(url: str) -> str:
    """The file name a package URL ends in (percent-decoded)."""
    return urls.filename(url)


def subdir_of(url: str) -> str:
    """The channel subdir (``linux-64``, ``noarch``) a conda package URL sits in."""
    return urls.path_parts(url)[-2]


def copy_package(url: str, sha256: str, dest: Path, reporter=None) -> Path:
    """The conda package of ``url`` in ``dest`` (its subdir), sha256-checked; a ``file://`` URL is
    copied, any other downloaded. A mismatch deletes the copy and raises ``checksum-mismatch``."""
    target = dest / file_name(url)
    if target.is_file() and digest(target) == sha256:
        return target
    dest.mkdir(parents=True, exist_ok=True)
    if not url.startswith("file://"):
        got = fetch(url, dest, sha256=sha256, reporter=reporter)
        trees.unlink(got.with_name(got.name + ".verified"))
        if got != target:
            trees.replace(got, target)
        return target
    part = target.with_name(target.name + ".part")
    shutil.copyfile(urls.local_path(url), part)
    found = digest(part)
    if found != sha256:
        trees.unlink(part)
        raise OperationError(
            "checksum-mismatch",
            f"{target.name} from {url} failed its sha256 check (expected "
            f"{sha256}, got {found}); it was not put into the bundle.",
            [
                (
                    "The channel's package changed after the lock was written: run the same "
                    "`bundle` command again (it solves afresh)."
                ),
                "Or check the channel's copy of the package against its repodata sha256.",
            ],
        )
    trees.replace(part, target)
    return target


def readme(recorded: Recorded, platform: str, conda: int, wheels: int) -> str:
    """The conda bundle's README.md."""
    return f"""# Offline TensorFlow bundle, conda mode (tfgpu-install {__version__})

TensorFlow {recorded.tensorflow} with CUDA {recorded.cuda} and cuDNN {recorded.cudnn} (conda packages)
for {platform}, Python {recorded.python}. The target needs an NVIDIA driver >= {recorded.min_driver},
a Python {recorded.python} to run the tool, and no network or conda installation.

## Install

    ./install.sh /path/to/env            # makes a venv for tfgpu-install from tool/, then:
    tfgpu-install create --from-bundle . --prefix /path/to/env

Every file is checked against `bundle.json` before anything is installed; a missing or damaged
file stops the install (exit 3) with nothing changed. The conda packages come from `channel/`
(each checked against the lock's sha256), the wheels from `wheels/` (every hash required).

## Contents

- `{LOCK}`: the lock (conda-lock's format; `conda-lock install` reads it too, with network).
- `channel/`: the {conda} locked conda packages, indexed as a conda channel.
- `wheels/`: the {wheels} wheels of the lock's PyPI part.
- `tool/`: tfgpu-install and its dependencies.
- `bundle.json`: every file's sha256 and size.
"""


def build(resolution, platform, out: Path, *, channels=(), channel_from: str = "--channel", reporter=None) -> Built:
    """Write the conda bundle for ``resolution`` on ``platform`` into ``out``; returns its summary.
    ``channels``: the ``--channel`` values (conda-forge when none), from ``channel_from``."""

    channels = write.channel_list(channels, channel_from)
    runner, uv, _, say = start(resolution, platform, out, reporter)
    out = out.absolute()
    written = write.write(
        [(platform, resolution, False)],
        str(out / LOCK),
        channels=channels,
        runner=runner,
        uv=uv,
        cache=cache_root(),
        reporter=reporter,
    )
    lock = read.read(out / LOCK)
    conda = lock.packages(platform.name, "conda")
    say(f"copying {len(conda)} conda packages into {out / 'channel'}")
    # One transfer for all the packages; the lock records no sizes, so only the bytes so far are known.
    combined = Combined(reporter, f"{len(conda)} conda packages", None) if reporter is not None else None
    for package in conda:
        # The lock records no credential; the channel as given this run has it (tfgpu.doors.secrets).
        url = secrets.with_credential(str(package.url), channels)
        copied = copy_package(url, package.hash.sha256, out / "channel" / subdir_of(package.url), combined)
        if combined is not None:
            combined.next_file(copied.stat().st_size)
    keep = {(subdir_of(p.url), file_name(p.url)) for p in conda}
    for stale in (out / "channel").glob("*/*"):  # a bundle built before from another lock
        if (
            stale.is_file()
            and stale.name.endswith((".conda", ".tar.bz2"))
            and (stale.parent.name, stale.name) not in keep
        ):
            trees.unlink(stale)
    for subdir in ("noarch", platform.name):
        (out / "channel" / subdir).mkdir(parents=True, exist_ok=True)
    rattler_engine.index_channel(out / "channel", runner)
    wheels = [Wheel(file_name(p.url), p.url, p.hash.sha256, 0) for p in lock.packages(platform.name, "pip")]
    say(f"collecting {len(wheels)} wheels into {out / 'wheels'}")
    collect(wheels, out / "wheels", reporter)
    recorded = lock.resolution(platform.name)
    tool_files = add_tool_and_installer(
        out, resolution, platform, readme(recorded, platform.name, len(conda), len(wheels)), say, reporter
    )
    names = [
        LOCK,
        "README.md",
        "install.sh",
        *(f"wheels/{w.filename}" for w in wheels),
        *(f"tool/{n}" for n in tool_files),
        *sorted(p.relative_to(out).as_posix() for p in (out / "channel").rglob("*") if p.is_file()),
    ]
    files: dict[str, dict[str, Any]] = {
        name: {"sha256": digest(out / name), "size": (out / name).stat().st_size} for name in names
    }
    manifest = {
        "format": FORMAT,
        "mode": "conda",
        "tool": "tfgpu-install",
        "tool_version": __version__,
        "platform": platform.name,
        "python": resolution.python,
        "tensorflow": resolution.tensorflow,
        "channels": [secrets.strip(c) for c in channels],
        "lock": LOCK,
        "lock_sha256": written.sha256,
        "files": files,
    }
    write_output(out / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    trees.unlink(out / PARTIAL)
    total = sum(item["size"] for item in files.values()) + (out / MANIFEST).stat().st_size
    built = Built(
        str(out),
        "conda",
        platform.name,
        resolution.tensorflow,
        resolution.python,
        len(files) + 1,
        len(wheels),
        len(tool_files),
        total,
        conda_packages=len(conda),
    )
    say(f"bundle {out}: {built.files} files, {built.mb} MB")
    return built
