"""Provisioning artefacts rendered from a resolution: bash, Dockerfile, Ansible, cloud-init, and
for clusters a Slurm job directory (sbatch, modulefiles, Apptainer) and Kubernetes manifests.

``render(resolution, fmt)`` is pure: it returns the files to write (name, content, mode) and
never touches the filesystem; ``write(export, output)`` puts them on disk. Every format builds the
same stack ``tfgpu-install create`` would: the bash script is the engine, and the Ansible playbook
and the cloud-init user-data run that same script (docs/exports-and-clusters.md).
"""

from __future__ import annotations

import os
from pathlib import Path

from tfgpu.errors import ImpossibleError, UsageError
from tfgpu.export.files import Export, ExportFile
from tfgpu.paths import write_output

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
        from tfgpu.export.dockerfile import render_dockerfile

        return Export("dockerfile", (ExportFile("Dockerfile", render_dockerfile(resolution, pins)),))
    if fmt == "ansible":
        from tfgpu.export.ansible import render_ansible

        return Export("ansible", render_ansible(resolution, pins), directory=True)
    if fmt == "cloud-init":
        from tfgpu.export.cloudinit import render_cloud_init

        return Export("cloud-init", (ExportFile("user-data.yaml", render_cloud_init(resolution, pins)),))
    if fmt == "slurm":
        from tfgpu.export.slurm import render_slurm

        return Export("slurm", render_slurm(resolution, pins), directory=True)
    if fmt == "kubernetes":
        from tfgpu.export.kubernetes import render_kubernetes

        return Export("kubernetes", render_kubernetes(resolution, pins), directory=True)
    raise UsageError(
        "bad-option-value",
        f"--format {fmt!r} is not one of: {', '.join(FORMATS)}.",
        [f"Use one of: {', '.join(FORMATS)}."],
    )


def write(export: Export, output: str) -> list[Path]:
    """Write ``export`` to ``output`` (a file, or a directory for multi-file formats)."""
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
    if export.directory:
        _check_tree(target, paths, output)  # before anything is written
    written = []
    try:
        for item, path in zip(export.files, paths, strict=True):
            path.parent.mkdir(parents=True, exist_ok=True)
            written.append(write_output(path, item.content, item.mode))
    except OSError as error:
        raise ImpossibleError(
            "bad-output",
            f"-o {output}: cannot write {path} ({error.strerror or error}).",
            ["Write somewhere you may write, or leave out -o to print to stdout."],
        ) from None
    return written


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
