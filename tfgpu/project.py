"""A project's target, carried in its repository: ``tfgpu.toml``, or ``[tool.tfgpu]`` in ``pyproject.toml``.

The file is looked for in the current directory, then in each parent; the nearest directory that
has one wins (a directory with both is ambiguous and refused). A file found that way must belong to
this user or root, and the walk ends at a directory anyone may write to without the sticky bit
(:func:`_not_ours`): another user's file is not used, and the command says so. ``TFGPU_PROJECT_FILE`` names a file
to use instead, or ``none`` for no project file; ``--project FILE`` and ``--no-project`` do the same
for one command. ``plan``, ``create``, ``lock``, ``bundle`` and ``script`` read it; any flag given
on the command line overrides the file's value.

Keys (all optional)::

    tf = ">=2.20,<2.22"        # --tf: a version, a series, latest, or a PEP 440 range (a string)
    mode = "pip"               # --mode: pip, conda or system
    python = "3.12"            # --python (a string: 3.10 as a TOML number is 3.1)
    os = "linux"               # --os / --arch: the target, when it is not the machine running the tool
    arch = "x86_64"
    driver = "535.104.05"      # --driver: the oldest NVIDIA driver the team's machines run
    gpu-cc = "8.0"             # --gpu-cc: the oldest GPU architecture they have
    pre = false                # --pre
    with = ["jax[cuda12]"]     # --with: torch or jax planned in the same env (PEP 508 specs)
    platforms = ["linux-64"]   # lock / bundle --platform
    channels = ["conda-forge"] # --channel (conda mode)
    insecure-hosts = ["127.0.0.1"]  # --insecure-host: hosts plain HTTP may reach (a local mirror)

Every value is checked by the same parser as its flag; a bad one is ``bad-project-file`` (exit 2)
naming the file and the key.
"""

from __future__ import annotations

import os
import re

from tfgpu.doors import untrusted
from tfgpu.doors.paths import user_path
from tfgpu.errors import UsageError
from tfgpu.records import factory, record
from tfgpu.resolver import request

FILE = "tfgpu.toml"
ENVIRONMENT = "TFGPU_PROJECT_FILE"
KEYS = {  # key in the file -> (the argparse destination of its flag, the TOML type it must have)
    "tf": ("tf", str),
    "mode": ("mode", str),
    "python": ("python", str),
    "os": ("os", str),
    "arch": ("arch", str),
    "driver": ("driver", str),
    "gpu-cc": ("gpu_cc", str),
    "pre": ("pre", bool),
    "with": ("companions", list),
    "platforms": ("platform", list),
    "channels": ("channel", list),
    "insecure-hosts": ("insecure_hosts", list),
}


@record
class Project:
    """A project file that applies: where it is, and its values by flag destination."""

    path: str
    values: dict = factory(dict)

    def supplied(self, given: dict) -> dict:
        """The values this file supplies to a command whose parsed options are ``given`` (by flag
        destination): only for options the command has and the command line left unset."""
        taken = {}
        for dest, _ in KEYS.values():
            value = self.values.get(dest)
            if value is None or dest not in given or given[dest] not in (None, False, []):
                continue
            if dest == "channel" and (given.get("mode") or self.values.get("mode")) != "conda":
                continue  # the command line chose another mode: the project's conda channels do not apply
            taken[dest] = value
        return taken

    @staticmethod
    def key_of(dest: str) -> str:
        """The file's key for a flag destination (``gpu_cc`` -> ``gpu-cc``)."""
        return next(key for key, (where, _) in KEYS.items() if where == dest)

    def describe(self) -> str:
        shown = ", ".join(f"{key} {_show(self.values[dest])}" for key, (dest, _) in KEYS.items() if dest in self.values)
        return f"{self.path} ({shown or 'no settings'})"


def _show(value) -> str:
    return ",".join(value) if isinstance(value, list) else str(value).lower() if isinstance(value, bool) else value


def find(start: str | None = None) -> str | None:
    """The project file for ``start`` (default: the current directory), or None."""
    named = os.environ.get(ENVIRONMENT)
    if named:
        if named.lower() == "none":
            return None
        return absolute(user_path(named, ENVIRONMENT))
    here = os.path.abspath(start or os.getcwd())
    refused.clear()
    while True:
        own = os.path.join(here, FILE)
        pyproject = os.path.join(here, "pyproject.toml")
        problem = _not_ours(here, (own, pyproject))
        if problem:
            refused.append(f"{problem}: it is not used (pass --project FILE to use a file anyway).")
            return None
        shared = os.path.isfile(pyproject) and _declares_tool_table(pyproject)
        if os.path.isfile(pyproject) and not shared:
            refused.extend(_near_misses(pyproject))
        if os.path.isfile(own) and shared:
            raise UsageError(
                "bad-project-file",
                f"{here} has both {FILE} and a [tool.tfgpu] table in "
                "pyproject.toml: tfgpu-install does not guess which one is meant.",
                [f"Keep one of the two (delete {own}, or the [tool.tfgpu] table)."],
            )
        if os.path.isfile(own):
            return own
        if shared:
            return pyproject
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def absolute(path: str) -> str:
    """``path`` (a ``--project`` or ``TFGPU_PROJECT_FILE`` value) with ``~`` expanded, made absolute
    as ``pathlib`` writes it (``Path(path).expanduser().absolute()``), the form messages name it by."""
    # Start-up cost: pathlib (see tfgpu.doors.paths._as_path), for a file named by the user only;
    # the walk from the current directory reads its paths as text.
    from pathlib import Path

    return str(Path(path).expanduser().absolute())


refused: list[str] = []
"""Why the last :func:`find` used no file it saw (another user's file, an unsafe directory), one
sentence each, for the command line to show as a note (stderr, also under --json)."""


def _not_ours(directory: str, candidates: tuple[str, ...]) -> str | None:
    """Why the walk must not take a project file from ``directory``, or None. Like git's
    ``safe.directory``: in a shared directory (``/tmp``, a scratch volume) another user could plant
    one that picks the mode, channels and insecure hosts of this user's next ``create``. A file (and
    the link to it, if it is one) must be owned by this user or root; a directory anyone may write
    to without the sticky bit (anyone could swap the file) ends the walk there."""
    if not hasattr(os, "geteuid"):
        return None
    trusted = {os.geteuid(), 0}
    try:
        mode = os.stat(directory).st_mode
    except OSError:
        return None
    if mode & 0o002 and not mode & 0o1000:
        found = [path for path in candidates if os.path.isfile(path)]
        return f"{found[0]} is in {directory}, which anyone may write to" if found else None
    for path in candidates:
        try:
            owners = {os.lstat(path).st_uid, os.stat(path).st_uid}
        except OSError:
            continue
        if not owners <= trusted:
            return f"{path} belongs to another user (uid {max(owners - trusted)})"
    return None


def _declares_tool_table(pyproject: str) -> bool:
    text = untrusted.read_text(pyproject, untrusted.PROJECT, errors="replace")
    if "tfgpu" not in text:
        return False
    try:
        tool = untrusted.parse_toml(text, untrusted.PROJECT, str(pyproject)).get("tool", {})
    except UsageError:
        if "[tool.tfgpu" in text:  # ours, and broken: say so rather than ignore the team's settings
            raise
        return False
    return isinstance(tool, dict) and "tfgpu" in tool


def _near(name: str) -> bool:
    """A [tool.X] table that is meant for this tool but is not [tool.tfgpu]: the command's name
    (tfgpu-install), its other spellings (tfgpu_install, tf-gpu, TFGPU)."""
    return name != "tfgpu" and re.sub(r"[-_. ]", "", name.lower()).startswith("tfgpu")


def _near_misses(pyproject: str) -> list[str]:
    """One note per [tool.X] table of ``pyproject`` that looks meant for tfgpu-install and is not
    read: settings that silently do not apply are worse than an error the user can fix."""
    text = untrusted.read_text(pyproject, untrusted.PROJECT, errors="replace")
    if "tfgpu" not in re.sub(r"[-_. ]", "", text.lower()):
        return []
    try:
        tool = untrusted.parse_toml(text, untrusted.PROJECT, str(pyproject)).get("tool", {})
    except UsageError:
        return []  # not this tool's file to judge: a broken pyproject.toml is its build tool's business
    if not isinstance(tool, dict):
        return []
    # Start-up cost: `plan --json --no-detect` loads this module but not tfgpu.doors.urls.
    from tfgpu.doors.urls import shown

    return [
        f"{shown(str(pyproject))} has [tool.{shown(name)}]: the table tfgpu-install reads is [tool.tfgpu], "
        "so none of its settings apply (rename the table to use them)."
        for name in tool
        if isinstance(name, str) and _near(name)
    ]


def load(path: str | None = None, *, explicit: bool = False) -> Project | None:
    """Read and check the project file at ``path`` (default: :func:`find`'s); None when there is none."""
    path = path or find()
    if path is None:
        return None
    document = untrusted.load_toml(path, untrusted.PROJECT)
    if os.path.basename(path) == "pyproject.toml":
        tool = untrusted.expect(document.get("tool", {}), dict, untrusted.PROJECT, str(path), "[tool]")
        table = tool.get("tfgpu")
        prefix = "tool.tfgpu."
        if table is None:
            if explicit:
                raise UsageError(
                    "bad-project-file",
                    f"{path} has no [tool.tfgpu] table.",
                    [*_near_misses(path), "Add one, or give a tfgpu.toml with --project."],
                )
            return None
    else:
        table, prefix = document, ""
    if not isinstance(table, dict):
        raise _bad(path, prefix.rstrip(".") or "tfgpu", "is not a table")
    return Project(path=path, values=_checked(path, prefix, table))


def _cut(value) -> str:
    """A value for a message: whole when short; a file can hold a megabyte in one key."""
    shown = repr(value)
    return shown if len(shown) <= 80 else f"{shown[:80]} ({len(shown):,} characters; the first 80 shown)"


def _bad(path: str, key: str, problem: str, ways: list[str] | None = None) -> UsageError:
    return UsageError(
        "bad-project-file",
        f"{path}: {key} {problem}.",
        ways or [f"Keys: {', '.join(KEYS)} (see `tfgpu-install --help` for what each flag takes)."],
    )


def _checked(path: str, prefix: str, table: dict) -> dict:
    # Start-up cost: `plan --json --no-detect` loads this module but not tfgpu.lock.platforms, tfgpu.doors.urls.
    from tfgpu.doors.urls import host_name, parse
    from tfgpu.lock.platforms import parse_platform

    parsers = {
        "tf": request.parse_tf_spec,
        "python": request.parse_python,
        "driver": request.parse_driver,
        "gpu-cc": request.parse_compute_capability,
        "arch": request.parse_arch,
        "mode": lambda v: request.parse_choice("--mode", v, request.MODES),
        "os": lambda v: request.parse_choice("--os", v, request.OSES),
        "platforms": lambda v: [parse_platform(item).name for item in v],
        "with": lambda v: (request.parse_with(v), list(v))[1],
        "insecure-hosts": lambda v: [host_name(item, "insecure-hosts") for item in v],
        "channels": lambda v: [
            parse(item, f"{path}: channels", allow_file=True, transport=False).text if "://" in item else item
            for item in v
        ],
    }
    values = {}
    for key, value in table.items():
        if key not in KEYS:
            raise _bad(path, prefix + key, "is not a setting tfgpu-install knows")
        dest, kind = KEYS[key]
        if isinstance(value, float) and kind is str:
            raise _bad(
                path,
                prefix + key,
                f"= {value!r} is a TOML number; write it as a string",
                [f'{key} = "{value}" (as a number, 3.10 reads as 3.1)'],
            )
        if not isinstance(value, kind) or (isinstance(value, list) and not all(isinstance(v, str) for v in value)):
            expected = {str: "a string", bool: "true or false", list: "a list of strings"}[kind]
            raise _bad(path, prefix + key, f"= {_cut(value)} is not {expected}")
        try:
            values[dest] = parsers[key](value) if key in parsers else value
        except UsageError as error:
            if error.code == "bad-url" and key == "channels":  # the URL door's own code for a URL
                raise
            message = error.message if len(error.message) <= 300 else f"{error.message[:300]} (cut)"
            raise _bad(path, prefix + key, f"= {_cut(value)}: {message}", error.alternatives) from None
    if values.get("channel") and values.get("mode") not in (None, "conda"):
        raise _bad(path, prefix + "channels", f"is for conda mode, and the file says mode = {values['mode']!r}")
    return values
