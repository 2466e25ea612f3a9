"""``tfgpu-install script --format F [-o PATH] [--from-lock LOCK]``: a provisioning artefact for the
resolution (``tfgpu.export``), or for exactly a lock's pins."""

from __future__ import annotations

from tfgpu import export, lock, results
from tfgpu.cli.commands.plan import with_channels
from tfgpu.errors import UsageError
from tfgpu.export.target import export_resolution
from tfgpu.project import Project
from tfgpu.resolver.coplanned import refuse_two_stacks
from tfgpu.settings import Settings


def cmd_script(settings: Settings) -> results.Result:
    """``script --format F [-o PATH] [--from-lock LOCK]``: a provisioning artefact for the resolution
    (``tfgpu.export``), or for exactly a lock's pins."""
    if settings.format in export.DIRECTORY_FORMATS and not settings.output:
        raise UsageError(
            "missing-output",
            f"The {settings.format} export is a directory of files "
            f"({export.DIRECTORY_FORMATS[settings.format]}): say where with -o DIR.",
            [f"tfgpu-install script --format {settings.format} -o ./tf-{settings.format}"],
        )
    pins = None
    if settings.platforms and not settings.from_lock and Project.key_of("platform") not in settings.project_keys:
        # A project file's platforms are for `lock`; typed here, --platform would be ignored silently.
        raise UsageError(
            "bad-arguments",
            f"script --platform {settings.platforms[0]}: --platform chooses which of a lock's platforms "
            "to export, and no --from-lock was given.",
            [
                "Export a lock: tfgpu-install script --from-lock LOCK --platform PLAT --format ...",
                "Or describe the target machine: --os linux --arch x86_64 (or aarch64).",
            ],
        )
    if settings.from_lock and settings.channels:
        # A lock's conda packages are installed by the URLs it recorded: a channel would change nothing.
        raise UsageError(
            "conflicting-options",
            f"script --channel {settings.channels[0]}: --channel does not go with --from-lock: the export "
            "installs the lock's packages by the URLs it recorded, from no channel.",
            [
                "Drop --channel.",
                "Or lock from the channel you want (tfgpu-install lock --channel URL ...) and export that lock.",
            ],
        )
    if settings.from_lock:  # the lock decides the target and every pin (tfgpu.lock.for_export)
        resolution, pins = lock.for_export(settings.from_lock, settings.selectors, settings.platforms)
    else:
        resolution = with_channels(
            settings, export_resolution(settings.selectors), export=True
        )  # never this machine's facts
    if resolution.two_stacks:
        refuse_two_stacks(resolution, "script")
    assert settings.format is not None  # script's --format is required
    made = export.render(resolution, settings.format, pins=pins)
    if settings.output:
        written = export.write(made, settings.output, force=settings.force)
        return results.Exported(made, resolution, settings.format, settings.output, tuple(written))
    if settings.json:
        return results.Exported(made, resolution, settings.format)
    return results.Text(made.main.content)
