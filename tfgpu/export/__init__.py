"""Provisioning artefacts rendered from a resolution: bash, Dockerfile, Ansible, cloud-init, and
for clusters a Slurm job directory (sbatch, modulefiles, Apptainer) and Kubernetes manifests.

``render(resolution, fmt)`` is pure: it returns the files to write (name, content, mode) and
never touches the filesystem; ``write(export, output)`` puts them on disk. Every format builds the
same stack ``tfgpu-install create`` would: the bash script is the engine, and the Ansible playbook
and the cloud-init user-data run that same script (docs/exports-and-clusters.md).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import stat
import time
from pathlib import Path

from tfgpu.doors import untrusted
from tfgpu.doors.paths import write_outputs
from tfgpu.errors import ImpossibleError, OperationError, UsageError
from tfgpu.export.files import Export, ExportFile

__all__ = ["DIRECTORY_FORMATS", "FORMATS", "Export", "ExportFile", "render", "write"]

FORMATS = ("bash", "dockerfile", "ansible", "cloud-init", "slurm", "kubernetes")
DIRECTORY_FORMATS = {
    "ansible": "playbook.yml, inventory.example.ini, README.md, files/",
    "slurm": "tfgpu-job.sbatch, install-tf.sh, tfgpu/, modulefiles/, tfgpu-env.def, README.md",
    "kubernetes": "tfgpu-job.yaml, Dockerfile, README.md",
}
"""Formats whose export is a tree of files (``-o`` names a directory), with what it holds."""


def render(resolution, fmt: str, pins=None) -> Export:
    """The files of format ``fmt`` for ``resolution``; raises ImpossibleError where it cannot be done.
    ``pins``: a lock's (``tfgpu.lock.for_export``), which the export installs exactly (``tfgpu.export.pins``)."""
    if fmt == "bash":
        # Import cycle: tfgpu.export.bash imports this module.
        from tfgpu.export.bash import render_bash

        return Export(
            "bash",
            (
                ExportFile(
                    f"install-tf{resolution.tensorflow}-{resolution.mode}.sh", render_bash(resolution, pins), 0o755
                ),
            ),
        )
    if fmt == "dockerfile":
        # Import cycle: tfgpu.export.dockerfile imports this module.
        from tfgpu.export.dockerfile import render_dockerfile

        return Export("dockerfile", (ExportFile("Dockerfile", render_dockerfile(resolution, pins)),))
    if fmt == "ansible":
        # Import cycle: tfgpu.export.ansible imports this module.
        from tfgpu.export.ansible import render_ansible

        return Export("ansible", render_ansible(resolution, pins), directory=True)
    if fmt == "cloud-init":
        # Import cycle: tfgpu.export.cloudinit imports this module.
        from tfgpu.export.cloudinit import render_cloud_init

        return Export("cloud-init", (ExportFile("user-data.yaml", render_cloud_init(resolution, pins)),))
    if fmt == "slurm":
        # Import cycle: tfgpu.export.slurm imports this module.
        from tfgpu.export.slurm import render_slurm

        return Export("slurm", render_slurm(resolution, pins), directory=True)
    if fmt == "kubernetes":
        # Import cycle: tfgpu.export.kubernetes imports this module.
        from tfgpu.export.kubernetes import render_kubernetes

        return Export("kubernetes", render_kubernetes(resolution, pins), directory=True)
    raise UsageError(
        "bad-option-value",
        # cut short, as parse_choice does: the value may be thousands of characters, not a word
        f"--format {fmt[:40]!r}{'...' if len(fmt) > 40 else ''} is not one of: {', '.join(FORMATS)}.",
        [f"Use one of: {', '.join(FORMATS)}."],
    )


MANIFEST = ".tfgpu-export.json"
"""What a directory export leaves beside its files: each file's sha256 as written, so that a later
export into the same directory knows its own earlier files from the user's."""
_EXISTING = untrusted.Kind("a file already in -o DIR", 64 * 1024 * 1024, None, links=False)


def write(export: Export, output: str, force: bool = False) -> list[Path]:
    """Write ``export`` to ``output`` (a file, or a directory for multi-file formats). In a
    directory, a file the export would replace must be one an earlier export wrote and nobody has
    changed since (its :data:`MANIFEST`), or hold exactly the new bytes; any other is the user's,
    and nothing is written (``output-not-ours``) unless ``force``."""
    target = Path(output).expanduser()
    if export.directory:
        if target.exists() and not target.is_dir():
            raise ImpossibleError(
                "bad-output",
                f"-o {output}: the {export.format} export is a directory of files, and that path is a file.",
                ["Give a directory path (it is created if missing)."],
            )
        parent = target.parent
    else:
        if target.is_dir():
            raise ImpossibleError(
                "bad-output",
                f"-o {output} is a directory; the {export.format} export is one file.",
                [f"Give a file path, e.g. -o {target / export.main.name}."],
            )
        parent = target.parent
    if not parent.is_dir():
        raise ImpossibleError(
            "bad-output",
            f"-o {output}: the directory {parent} does not exist.",
            [f"Create it first (mkdir -p {parent}), or write somewhere else."],
        )
    if not os.access(parent, os.W_OK):
        raise ImpossibleError(
            "bad-output",
            f"-o {output}: the directory {parent} is not writable.",
            ["Write somewhere you may write, or leave out -o to print to stdout."],
        )
    paths = [target / item.name if export.directory else target for item in export.files]
    if not export.directory:
        return _write(export, target, paths, output, force)
    try:
        target.mkdir(exist_ok=True)
    except OSError as error:
        raise ImpossibleError(
            "bad-output",
            f"-o {output}: cannot create {target} ({error.strerror or error}).",
            ["Write somewhere you may write, or leave out -o to print to stdout."],
        ) from None
    with _one_at_a_time(target, output):
        return _write(export, target, paths, output, force)


WAIT_SECONDS = 60.0
"""How long an export waits for another one writing into the same -o DIR (each takes well under a second)."""


@contextlib.contextmanager
def _one_at_a_time(target: Path, output: str):
    """Hold ``target`` (``flock`` on the directory itself: nothing is added to it) while its files
    are checked and written: two exports into one directory at once would otherwise each read the
    record before the other wrote it, and the last record would leave the other's files out (a
    later export then calls them not its own)."""
    try:
        fd = untrusted.open_directory(os.path.join(target, "."), _HELD)
    except untrusted.Unreadable as error:
        raise ImpossibleError("bad-output", f"-o {output}: {error.reason}", ["Give a new directory with -o."]) from None
    try:
        end = time.monotonic() + WAIT_SECONDS
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= end:
                    raise OperationError(
                        "output-busy",
                        f"Another tfgpu-install script kept writing into {output} for "
                        f"{WAIT_SECONDS:.0f} seconds; nothing was written.",
                        ["Wait for it to finish, then run the same command again, or give another -o."],
                    ) from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)


_HELD = untrusted.Kind("the -o directory", 0, None)


def _write(export: Export, target: Path, paths: list[Path], output: str, force: bool) -> list[Path]:
    """Check (a directory export) and write ``export``'s files at ``paths``."""
    earlier: dict[str, tuple[str, ...]] = {}
    present: dict[str, str] = {}
    if export.directory:
        _check_tree(target, paths, output)  # before anything is written
        earlier, present = _check_ours(target, export, paths, output, force)
    try:
        for path in paths if not export.directory else [target / MANIFEST]:  # below -o: made by write_outputs
            path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ImpossibleError(
            "bad-output",
            f"-o {output}: cannot write {path} ({error.strerror or error}).",
            ["Write somewhere you may write, or leave out -o to print to stdout."],
        ) from None
    files = [(path, item.content, item.mode) for item, path in zip(export.files, paths, strict=True)]
    if export.directory:
        files.append((target / MANIFEST, _record(export, earlier), 0o644))
        if present:
            # The record goes first, naming what is there now as well: a run killed between two
            # renames leaves each file old or new, and the next export knows both for its own.
            write_outputs([(target / MANIFEST, _record(export, earlier, present), 0o644)], below=target)
    # All or none: a full disk half-way leaves every earlier file as it was; below -o DIR each
    # directory is opened without following a link, so one swapped for a link since the checks
    # above never carries a file out of it.
    write_outputs(files, below=target if export.directory else None)
    return paths


def _check_tree(target: Path, paths: list[Path], output: str) -> None:
    """Below ``-o DIR`` the export writes real directories and files only: a directory of the tree
    that is a symbolic link (one planted in a checkout, say) would carry the files elsewhere, and a
    file's place taken by a directory cannot be written."""
    for path in paths:
        for place in [*reversed(path.relative_to(target).parents[:-1]), path.relative_to(target)]:
            here = target / place
            if here.is_symlink() and here != path:
                raise ImpossibleError(
                    "bad-output",
                    f"-o {output}: {here} is a symbolic link (to "
                    f"{os.readlink(here)}); the export writes only into real directories "
                    "below -o, so nothing was written.",
                    ["Remove the link, or give a new directory with -o."],
                )
        if path.is_dir() and not path.is_symlink():
            raise ImpossibleError(
                "bad-output",
                f"-o {output}: {path} is a directory where the export writes a file; nothing was written.",
                ["Move it away, or give a new directory with -o."],
            )


def _sha256(data: str | bytes) -> str:
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


def _recorded(target: Path) -> dict[str, tuple[str, ...]]:
    """{file: its sha256s} an earlier export into ``target`` recorded (empty: none, or not readable as
    one): what it wrote, and, while it was writing, what it was replacing."""
    found = untrusted.json_or_none(target / MANIFEST, _EXISTING)
    ours = isinstance(found, dict) and found.get("tool") == "tfgpu-install"
    files = found.get("files") if ours else None
    if not isinstance(files, dict):
        return {}
    replacing = found.get("replacing")
    replacing = replacing if isinstance(replacing, dict) else {}
    recorded: dict[str, tuple[str, ...]] = {}
    for name, digest in files.items():
        if isinstance(name, str) and isinstance(digest, str) and _below(name) and len(digest) == 64:
            before = replacing.get(name)
            recorded[name] = (digest, before) if isinstance(before, str) and len(before) == 64 else (digest,)
    return recorded


def _below(name: str) -> bool:
    """Whether ``name`` is a plain relative path below -o, as the exports name their files."""
    parts = name.split("/")
    return not name.startswith("/") and all(part not in ("", ".", "..") for part in parts)


def _now(path: Path) -> str | None:
    """The sha256 of the regular file at ``path`` (None: not one, a link included, or unreadable)."""
    try:
        return _sha256(untrusted.read_bytes(path, _EXISTING))
    except untrusted.Unreadable:
        return None


def _check_ours(
    target: Path, export: Export, paths: list[Path], output: str, force: bool
) -> tuple[dict[str, tuple[str, ...]], dict[str, str]]:
    """Refuse (``output-not-ours``) before anything is written when the export would replace a file
    in ``target`` that tfgpu-install did not write there (or that was changed since); returns the
    earlier export's record (its entries below ``target``), carried into this one's."""
    # Only a file this export writes is read (and compared with its record): the record is the
    # user's to edit, and a forged one naming thousands of big files, or files outside -o, would
    # otherwise be read whole each time. An entry carried forward unread is harmless: a later
    # export that writes the file compares it with the record first.
    earlier = _recorded(target)
    present: dict[str, str] = {}
    foreign = []
    for item, path in zip(export.files, paths, strict=True):
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            continue
        except OSError:
            foreign.append(path)
            continue
        current = _now(path) if stat.S_ISREG(info.st_mode) else None
        if current is not None:
            present[item.name] = current
        if current is not None and current in (_sha256(item.content), *earlier.get(item.name, ())):
            continue  # the same bytes again, or the earlier export's file as it wrote it
        foreign.append(path)
    if foreign and not force:
        named = ", ".join(str(path.relative_to(target)) for path in foreign[:5])
        more = f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""
        raise ImpossibleError(
            "output-not-ours",
            f"-o {output} holds files the {export.format} export would replace that tfgpu-install did not "
            f"write there (or that were changed since): {named}{more}; nothing was written.",
            [
                "Give a new or empty directory with -o.",
                "Or add --force to replace them (they are lost).",
            ],
        )
    return earlier, present


def _record(export: Export, earlier: dict[str, tuple[str, ...]], replacing: dict[str, str] | None = None) -> str:
    """The export's record of what it writes (and what an earlier one recorded, checked again by the
    export that next writes that file); with ``replacing``, the record written before the files:
    what each of them replaces, too."""
    written = {item.name: _sha256(item.content) for item in export.files}
    files = {name: digests[0] for name, digests in earlier.items()} | written
    before = {name: digests[1] for name, digests in earlier.items() if len(digests) > 1 and name not in written}
    before |= {name: digest for name, digest in (replacing or {}).items() if digest != written.get(name)}
    document = {"tool": "tfgpu-install", "format": export.format, "files": dict(sorted(files.items()))}
    if before:
        document["replacing"] = dict(sorted(before.items()))
    return json.dumps(document, indent=2) + "\n"
