"""The one place a run's inputs are put together: options, project file, environment variables.

:func:`build` turns the parsed command line into the frozen ``tfgpu.settings.Settings`` with the
precedence that module documents; nothing else reads the namespace, merges the project file or
reads the variables that stand in for options.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from tfgpu.errors import UsageError
from tfgpu.records import fields
from tfgpu.settings import Selectors, Settings

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: type checkers treat it alike
if TYPE_CHECKING:
    import argparse
    from types import SimpleNamespace

READS_PROJECT = ("plan", "create", "lock", "bundle", "script")
"""The commands a project file applies to (the ones that resolve a target)."""
INSECURE_HOSTS = "TFGPU_INSECURE_HOSTS"
"""The variable naming more hosts plain HTTP may reach (``tfgpu.doors.urls`` names it in its advice)."""
ACTIVE_ENV = ("VIRTUAL_ENV", "CONDA_PREFIX")
"""The variables that name the active env, in the order they are asked."""

# Namespace destination -> Settings field, where the two differ.
_RENAMED = {"all": "all_releases", "platform": "platforms", "channel": "channels", "insecure_host": "insecure_hosts"}
_NEGATED = {"no_detect": "detect", "no_verify": "verify"}
_LISTS = ("platforms", "channels", "insecure_hosts", "command_argv")


def build(args: argparse.Namespace | SimpleNamespace, environ: Mapping[str, str] = os.environ) -> Settings:
    """The settings of this run: flags, then the project file, then defaults."""
    given = vars(args)
    command = given.get("command") or "create"
    for dest, code in (("name", "bad-env-name"), ("prefix", "bad-prefix")):
        if given.get(dest) is not None and not given[dest].strip():
            # Empty is never "not given": it would quietly mean the default name or the active env.
            raise UsageError(code, f"--{dest} is empty.", [f"Give --{dest} a value, or leave it out."])
    values: dict = {"command": command}
    for dest, value in given.items():
        if dest in ("command", "project", "no_project") or dest in fields(Selectors):
            continue
        if dest in _NEGATED:
            values[_NEGATED[dest]] = not value
            continue
        key = _RENAMED.get(dest, dest)
        if key in fields(Settings):
            values[key] = tuple(value or ()) if key in _LISTS else value
    selectors = {key: given[key] for key in fields(Selectors) if key in given}
    project_hosts: tuple[str, ...] = ()
    if command in READS_PROJECT and not (given.get("from_lock") or given.get("from_bundle")):
        found, notes = _project(given)
        values["notes"] = notes
        if found is not None:
            taken = found.supplied(given)
            for dest, value in taken.items():
                if dest == "channel":
                    values["channels"] = tuple(value)
                    values["channels_from"] = f"{found.path}: channels"  # the URL door's messages name it
                elif dest == "platform":
                    values["platforms"] = tuple(value)
                else:
                    selectors[dest] = value
            values["project_file"] = str(found.path)
            values["project_keys"] = tuple(found.key_of(dest) for dest in taken)
            project_hosts = tuple(found.values.get("insecure_hosts", ()))
            if taken and not given.get("json"):
                from tfgpu.doors.controls import shown  # its path may hold a newline: one line, escaped

                values["notes"] = (
                    *notes,
                    f"Using the project file {shown(found.describe())}; flags on the command line override it.",
                )
    # Checked here, under the variable's name (the URL door's messages otherwise name --insecure-host);
    # the door is imported only when the variable is set: `plan` otherwise needs no URL.
    named: tuple[str, ...] = ()
    if environ.get(INSECURE_HOSTS, "").strip():
        # Start-up cost: `plan --json --no-detect` loads this module but not tfgpu.doors.urls.
        from tfgpu.doors import urls

        named = tuple(
            urls.host_name(host, INSECURE_HOSTS) for host in environ[INSECURE_HOSTS].split(",") if host.strip()
        )
    values["insecure_hosts"] = (*values.get("insecure_hosts", ()), *project_hosts, *named)
    values["active_env"] = tuple((name, environ[name]) for name in ACTIVE_ENV if environ.get(name))
    values["user_shell"] = environ.get("SHELL", "")
    if "companions" in selectors:  # --with is repeatable (a list); the project file's `with` too
        selectors["companions"] = tuple(selectors["companions"] or ())
    return Settings(selectors=Selectors(**selectors), **values)


def _project(given: dict):
    """(the project file that applies or None, the notes on files seen and not used)."""
    if given.get("no_project"):
        return None, ()
    # Start-up cost: `matrix --json` loads this module but not tfgpu.project.
    from tfgpu import project

    explicit = given.get("project")
    found = project.load(project.absolute(explicit) if explicit else None, explicit=bool(explicit))
    return found, tuple(() if explicit else project.refused)


def trust(settings: Settings) -> None:
    """Name the hosts plain HTTP may reach (``tfgpu.doors.urls``) for this run, and only these: nothing
    carries over from an earlier run in the same process."""
    if not settings.insecure_hosts and "tfgpu.doors.urls" not in sys.modules:
        return  # nothing named and nothing to forget: `plan` need not import the URL door
    # Start-up cost: `plan --json --no-detect` loads this module but not tfgpu.doors.urls.
    from tfgpu.doors import urls

    urls.trust(list(settings.insecure_hosts))
