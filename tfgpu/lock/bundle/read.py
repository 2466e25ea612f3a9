"""``create --from-bundle DIR``: the bundle checked file by file against its manifest before
anything is installed (missing or damaged files are exit 3), then the lock inside it prepared
as its format's folder prepares a lock (``pip/install.py``, ``conda/install.py``), with the
bundle's own wheels and channel as the only source.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath

from tfgpu.doors import trees, untrusted
from tfgpu.doors.controls import has_control
from tfgpu.errors import ImpossibleError, UsageError
from tfgpu.lock.bundle.files import digest
from tfgpu.lock.bundle.steps import FORMAT as BUNDLE_FORMAT
from tfgpu.lock.bundle.steps import MANIFEST
from tfgpu.lock.pip import install as pip_install
from tfgpu.lock.pip import lockfile
from tfgpu.records import replace


def _bundle_corrupt(root: Path, what: str) -> ImpossibleError:
    return ImpossibleError(
        "bundle-corrupt",
        f"The bundle {root} cannot be trusted: {what}.",
        ["Copy the bundle again (rsync -a / scp -r), or rebuild it with the same `tfgpu-install bundle` command."],
    )


def bundle_member(root: Path, name) -> Path:
    """``root / name`` for a manifest entry, or ``bundle-corrupt``: entries are relative POSIX paths
    inside the bundle (no absolute path, no ``..``, no link anywhere on the way out)."""
    if not isinstance(name, str) or not name or "\\" in name or has_control(name):
        raise _bundle_corrupt(root, f"its manifest names a file {name!r} that is not a plain relative path")
    parts = PurePosixPath(name).parts
    if PurePosixPath(name).is_absolute() or ".." in parts or "." in parts or not parts:
        raise _bundle_corrupt(root, f"its manifest names {name!r}, which lies outside the bundle")
    path = root.joinpath(*parts)
    walk = root
    for part in parts:
        walk = walk / part
        if walk.is_symlink():
            raise _bundle_corrupt(root, f"{name} is (or passes through) a symbolic link")
    return path


def verify_bundle(directory: str | Path, reporter=None) -> tuple[dict, Path]:
    """Check every file of a bundle against its manifest; returns (manifest, lock path)."""
    root = Path(directory).expanduser().absolute()
    try:
        manifest = untrusted.load_json(root / MANIFEST, untrusted.BUNDLE)
    except untrusted.Unreadable as error:
        raise ImpossibleError(
            "bundle-incomplete",
            f"{root} is not a complete tfgpu-install bundle: its {MANIFEST} "
            "is missing or unreadable (an interrupted `bundle` leaves none). "
            f"{error.reason}",
            ["Run the `tfgpu-install bundle` command again (it resumes) and copy the whole directory."],
        ) from None
    if not isinstance(manifest, dict):
        raise _bundle_corrupt(root, f"its {MANIFEST} is not a JSON object")
    if manifest.get("format") != BUNDLE_FORMAT:
        raise ImpossibleError(
            "bundle-format-unsupported",
            f"{root} was written by tfgpu-install "
            f"{manifest.get('tool_version', '?')} (bundle format {manifest.get('format')!r}); this "
            f"version reads format {BUNDLE_FORMAT}.",
            ["Use the install.sh inside the bundle (it brings its own tfgpu-install)."],
        )
    files = manifest.get("files")
    if not isinstance(files, dict) or not files:
        raise _bundle_corrupt(root, f"its {MANIFEST} has no file list")
    for name, expected in files.items():
        if (
            not isinstance(expected, dict)
            or not isinstance(expected.get("sha256"), str)
            or not re.fullmatch(r"[0-9a-f]{64}", expected["sha256"])
            or not isinstance(expected.get("size"), int)
            or isinstance(expected.get("size"), bool)
            or expected["size"] < 0
        ):
            raise _bundle_corrupt(root, f"its {MANIFEST} entry for {name!r} has no valid sha256 and size")
        bundle_member(root, name)
    lock_name = manifest.get("lock")
    if not isinstance(lock_name, str) or lock_name not in files or "/" in lock_name:
        raise _bundle_corrupt(root, f"its lock ({lock_name!r}) is not a top-level file its manifest checks")
    _refuse_links(root)
    if reporter is not None:
        reporter.note(
            f"checking {len(files)} files of the bundle "
            f"({sum(f['size'] for f in files.values()) / 1e6:.0f} MB) against {MANIFEST}"
        )
    missing, damaged = [], []
    for name, expected in sorted(files.items()):
        path = bundle_member(root, name)
        if not path.is_file():
            missing.append(name)
        elif path.stat().st_size != expected["size"] or digest(path) != expected["sha256"]:
            damaged.append(name)
    if missing or damaged:
        listed = "; ".join([*(f"missing {n}" for n in missing[:5]), *(f"damaged {n}" for n in damaged[:5])])
        raise ImpossibleError(
            "bundle-corrupt",
            f"The bundle {root} is incomplete or damaged ({len(missing)} missing, {len(damaged)} damaged: {listed}).",
            ["Copy the bundle again (rsync -a / scp -r), or rebuild it with the same `tfgpu-install bundle` command."],
        )
    return manifest, bundle_member(root, lock_name)


def _refuse_links(root: Path) -> None:
    """No symbolic link anywhere in the directories installs read from (wheels/, channel/, tool/)."""
    for sub in ("wheels", "channel", "tool"):
        top = root / sub
        if top.is_symlink():
            raise _bundle_corrupt(root, f"{sub}/ is a symbolic link")
        for dirpath, _, _, links in trees.walk(top):  # no recursion on depth
            for entry in links:
                link = os.path.relpath(os.path.join(dirpath, entry), root)
                raise _bundle_corrupt(root, f"{link} is a symbolic link")


def prepare(directory: str, options, selectors, reporter=None):
    """(resolution, options, source, lock) for ``create --from-bundle DIR``, after every check."""
    if options.find_links:
        raise UsageError(
            "conflicting-options",
            "--find-links does not go with --from-bundle: the bundle is the only source.",
            ["Drop --find-links."],
        )
    manifest, lock_path = verify_bundle(directory, reporter)
    if manifest.get("mode") == "conda" or lock_path.suffix in (".yml", ".yaml"):
        return _prepare_conda_bundle(manifest, lock_path, options, selectors, directory)
    lock = lockfile.read(lock_path)
    if lock.sha256 != manifest.get("lock_sha256"):
        raise ImpossibleError(
            "bundle-corrupt",
            f"The lock in {directory} is not the one the bundle was built with.",
            ["Rebuild the bundle."],
        )
    options = replace(options, find_links=str(lock_path.parent / "wheels"), offline=True)  # the top level
    return pip_install.prepare(lock, options, selectors, bundle=lock_path.parent)


def _prepare_conda_bundle(manifest: dict, lock_path: Path, options, selectors, directory: str):
    """A verified conda bundle: its lock installed from its own channel/ and wheels/ (offline)."""
    if options.channels:
        raise UsageError(
            "conflicting-options",
            "--channel does not go with --from-bundle: the bundle's own channel/ is the only source.",
            ["Drop --channel."],
        )
    # Start-up cost: a pip bundle's install loads this module but not conda-lock (some 0.4 CPU-s to import).
    from tfgpu.lock.conda import install as conda_install

    prepared = conda_install.prepare(lock_path, options, selectors, bundle_dir=lock_path.parent)
    if prepared[3].sha256 != manifest.get("lock_sha256"):
        raise ImpossibleError(
            "bundle-corrupt",
            f"The lock in {directory} is not the one the bundle was built with.",
            ["Rebuild the bundle."],
        )
    return prepared
