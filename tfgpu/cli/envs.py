"""``tfgpu-install remove`` and ``list``: deleting an env the tool built, and showing those there are
with what interrupted removes left."""

from __future__ import annotations

from tfgpu import results
from tfgpu.cli.output import render
from tfgpu.envs.listing import env_names, leftovers, list_envs
from tfgpu.envs.which import search_dirs
from tfgpu.settings import Settings


def cmd_remove(settings: Settings) -> results.Result:
    # Start-up cost: `list --names` (completion) loads this module but not tfgpu.ops.
    from tfgpu.ops import remove

    reporter = render().ConsoleReporter()  # stderr: the files and bytes deleted, also under --json
    try:
        return remove(settings.name, settings.prefix, reporter)
    finally:
        reporter.close()


def cmd_list(settings: Settings) -> results.Result:
    """``list``: the envs tfgpu-install built (their markers prove it), with a cheap health check."""
    dirs = search_dirs()
    if settings.names:  # for completion: fast, names only, nothing read inside an env
        names = env_names(dirs)
        return results.Text("".join(f"{name}\n" for name in names), {"names": names})

    return results.EnvList(list_envs(dirs), dirs, leftovers(dirs))
