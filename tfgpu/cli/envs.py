"""``tfgpu-install remove`` and ``list``: deleting an env the tool built, and showing those there are
with what interrupted removes left."""

from __future__ import annotations

from tfgpu import results
from tfgpu.cli.output import render
from tfgpu.settings import Settings


def cmd_remove(settings: Settings) -> results.Result:
    from tfgpu.ops import remove

    reporter = render().ConsoleReporter()  # stderr: the files and bytes deleted, also under --json
    try:
        return remove(settings.name, settings.prefix, reporter)
    finally:
        reporter.close()


def cmd_list(settings: Settings) -> results.Result:
    """``list``: the envs tfgpu-install built (their markers prove it), with a cheap health check."""
    from tfgpu.envs.listing import list_envs
    from tfgpu.envs.which import search_dirs

    dirs = search_dirs()
    if settings.names:  # for completion: fast, names only, nothing read inside an env
        from tfgpu.envs.listing import env_names

        names = env_names(dirs)
        return results.Text("".join(f"{name}\n" for name in names), {"names": names})
    from tfgpu.envs.listing import leftovers

    return results.EnvList(list_envs(dirs), dirs, leftovers(dirs))
