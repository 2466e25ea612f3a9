"""Which existing environment a command means: the one answer for verify, doctor, repair, remove,
list, run, activate and shell.

A command names an env with ``--prefix P`` (that path), ``--name N`` (searched, below), or
``--interpreter PATH`` (doctor and repair: the env of that Python); with none of them, verify,
doctor and repair take the *active* env: ``$VIRTUAL_ENV``, then ``$CONDA_PREFIX`` (what ``source
ENV/bin/activate`` and ``conda activate`` set). ``remove`` never defaults: deleting the env a shell
happens to have active is too easy a mistake; nor do ``run``, ``activate`` and ``shell`` (with an
env active, commands already run in it). The result says how it was chosen, so the output can.

``--name N`` is looked up in :func:`search_dirs`, in this order: tfgpu-install's envs directory
(``TFGPU_ENVS_DIR``), then the conda installation's envs directories (``CONDA_ENVS_PATH`` /
``CONDA_ENVS_DIRS`` entries, then the installation's ``envs/``), which is where ``create --mode
conda --name N`` puts an env. ``list`` shows the same directories. A name present in two of them is
``ambiguous-env-name`` (exit 2) naming both: no order silently picks one of two envs to verify,
repair or delete. Present means a directory entry of that name, or what an interrupted ``remove``
left of one (so running ``remove`` again finishes it).

The variables are read through the same doors as the options: ``tfgpu.doors.paths.user_path`` (``bad-path``)
and ``tfgpu.envs.location.normalize`` (``bad-prefix``: a prefix activation scripts cannot carry);
a relative value is ``bad-prefix`` too (``activate`` always sets an absolute one), and a value that
is not a directory (nothing there, a file, a FIFO, a link loop) is ``no-such-env`` (exit 3) naming
the variable. Markers are read by ``tfgpu.envs.marker`` (the untrusted reader). Reads only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from tfgpu.doors.paths import user_path
from tfgpu.envs.location import check_name, check_path_text, envs_dir, normalize
from tfgpu.errors import ImpossibleError, UsageError
from tfgpu.records import record

ChosenBy = Literal["--name", "--prefix", "--interpreter", "VIRTUAL_ENV", "CONDA_PREFIX"]
ACTIVE: tuple[ChosenBy, ...] = ("VIRTUAL_ENV", "CONDA_PREFIX")
"""The variables naming the active env, in the order they are asked."""
DEFAULTS_TO_ACTIVE = ("verify", "doctor", "repair")
"""The purposes for which no location means the active env (``remove`` never defaults)."""
_LOCATION = {
    "verify": "--name N or --prefix P",
    "doctor": "--name N, --prefix P or --interpreter PATH",
    "repair": "--prefix P, --name N or --interpreter PATH",
    "remove": "--name N or --prefix P",
}


@record
class EnvTarget:
    """The env a command works on, and why that one."""

    prefix: Path | None
    """The env's directory; None for ``--interpreter`` (the interpreter itself says its prefix)."""
    chosen_by: ChosenBy
    kind: Literal["venv", "conda", "unknown"] = "unknown"
    """``conda`` for a prefix with ``conda-meta/``, ``venv`` for one with ``pyvenv.cfg``."""
    built_by_tool: bool = False
    """Its marker proves tfgpu-install built it there (``tfgpu.envs.marker.proof``)."""
    interpreter: Path | None = None
    name: str | None = None
    """The ``--name`` given, when that is how it was chosen."""

    @property
    def active(self) -> bool:
        return self.chosen_by in ACTIVE

    @property
    def implicit(self) -> bool:
        """The path is not what the user typed (a name looked up, an active env): worth saying."""
        return self.chosen_by == "--name" or self.active

    def describe(self) -> str:
        """One sentence for stderr: which env, and why that one."""
        if self.chosen_by == "--interpreter":
            return f"Using the environment of {self.interpreter} (--interpreter)."
        if self.active:
            return f"Using the active environment {self.prefix} ({self.chosen_by})."
        return f"Using {self.prefix} ({self.chosen_by} {self.name if self.name else self.prefix})."

    def to_dict(self) -> dict:
        return {
            "prefix": str(self.prefix) if self.prefix else None,
            "chosen_by": self.chosen_by,
            "kind": self.kind,
            "built_by_tool": self.built_by_tool,
            "interpreter": str(self.interpreter) if self.interpreter else None,
        }


def search_dirs() -> list[Path]:
    """Where ``--name`` is looked up and ``list`` looks, in order: the tool's envs directory, then
    the conda installation's (each once)."""
    # Start-up cost: `doctor` loads this module but not tfgpu.envs.conda_envs.
    from tfgpu.envs.conda_envs import conda_envs_dirs

    found: dict[str, Path] = {}
    for directory in (envs_dir(), *conda_envs_dirs()):
        found.setdefault(os.path.realpath(directory), directory)  # one directory, however it is spelled
    return list(found.values())


def which_env(
    *,
    name: str | None = None,
    prefix: str | None = None,
    interpreter: str | None = None,
    environ: Mapping[str, str] = os.environ,
    purpose: str = "verify",
) -> EnvTarget | None:
    """The env ``--name``/``--prefix``/``--interpreter`` name or, for verify, doctor and repair,
    the active one. None only for ``purpose="doctor"`` with nothing given and nothing active (doctor
    then checks the machine alone); for the others that is ``missing-location`` (exit 2)."""
    for flag, value in (("--interpreter", interpreter), ("--prefix", prefix), ("--name", name)):
        if value is not None and not value.strip():
            # Empty is never "not given": it would quietly mean the active env or the default name.
            raise UsageError(
                "bad-env-name" if flag == "--name" else "bad-prefix",
                f"{flag} is empty.",
                [f"Give {flag} a value, or leave it out."],
            )
    if interpreter:
        if purpose == "repair":  # repair writes the env's path into activation scripts; doctor only reads
            check_path_text(interpreter, "--interpreter")
        return EnvTarget(prefix=None, chosen_by="--interpreter", interpreter=Path(interpreter).expanduser().absolute())
    if prefix:
        return _target(normalize(prefix), "--prefix")
    if name:
        return _target(_by_name(name), "--name", name)
    if purpose in DEFAULTS_TO_ACTIVE:
        for variable in ACTIVE:
            value = environ.get(variable)
            if value:
                return _target(_active(variable, value), variable)
    if purpose == "doctor":
        return None
    options = _LOCATION.get(purpose, _LOCATION["verify"])
    raise UsageError(
        "missing-location",
        f"Say which environment to {purpose}: {options}"
        + (" (or activate one)." if purpose in DEFAULTS_TO_ACTIVE else "."),
        [
            f"`tfgpu-install {purpose} --name tf2.21`, or `tfgpu-install {purpose} --prefix ./env`."
            + (" With a venv or conda env active, the active one." if purpose in DEFAULTS_TO_ACTIVE else "")
        ],
    )


def _by_name(name: str) -> Path:
    """``--name``'s directory: the one search directory that has it (see the module docstring)."""
    # Start-up cost: `list --names` (completion) loads this module but not tfgpu.envs.txn.
    from tfgpu.envs.txn import removing_of

    check_name(name)
    dirs = search_dirs()
    found = [root / name for root in dirs if os.path.lexists(root / name) or os.path.lexists(removing_of(root / name))]
    if len(found) > 1:
        raise UsageError(
            "ambiguous-env-name",
            f"--name {name} names {len(found)} environments: "
            f"{' and '.join(str(path) for path in found)}; tfgpu-install does not guess between them.",
            [f"Say which with --prefix: --prefix {found[0]}", f"or --prefix {found[1]}"],
        )
    if not found:
        raise ImpossibleError(
            "no-such-env",
            f"There is no environment named {name} in {', '.join(str(root) for root in dirs)}.",
            ["`tfgpu-install list` shows the environments tfgpu-install built; give another env's path with --prefix."],
        )

    check_path_text(str(found[0]), "--name")  # a conda envs directory's path is held to --prefix's rules
    return found[0]


def _active(variable: str, value: str) -> Path:
    """The active env's directory from ``$VIRTUAL_ENV``/``$CONDA_PREFIX``, read as ``--prefix`` is."""

    user_path(value, variable)
    if not os.path.isabs(value):
        raise UsageError(
            "bad-prefix",
            f"{variable} {value!r} is not an absolute path (activate scripts set one), so "
            "which environment is active is not known.",
            [f"Activate the env again (or unset {variable}), or give it with --prefix or --name."],
        )
    path = normalize(value, variable)
    if not _is_dir(path):
        raise ImpossibleError(
            "no-such-env",
            f"{variable} names {path}, which is {_what_is(path)}, not an environment directory.",
            [
                f"Deactivate it (`deactivate`, `conda deactivate`) or unset {variable}, "
                "or give the environment with --prefix or --name."
            ],
        )
    return path


def _target(path: Path, chosen_by: ChosenBy, name: str | None = None) -> EnvTarget:
    # Start-up cost: `list --names` (completion) loads this module but not tfgpu.envs.marker.
    from tfgpu.envs import marker

    kind: Literal["venv", "conda", "unknown"] = "unknown"
    built = False
    try:
        if (path / "conda-meta").is_dir():  # before pyvenv.cfg: a conda prefix may hold one too
            kind = "conda"
        elif (path / "pyvenv.cfg").is_file():
            kind = "venv"
        built = _is_dir(path) and marker.proof(path) is not None
    except OSError:  # a directory this user cannot enter: the command says so when it reads it
        pass
    return EnvTarget(prefix=path, chosen_by=chosen_by, kind=kind, built_by_tool=built, name=name)


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # a link loop, a name too long for this file system
        return False


def _what_is(path: Path) -> str:
    if path.is_symlink() and not path.exists():
        return "a symbolic link that leads nowhere (or in a loop)"
    if not os.path.lexists(path):
        return "nothing (it does not exist)"
    return "a file" if path.is_file() else "not a directory"


def naming(prefix: Path, name: str | None) -> str:
    """How a later command names the env at ``prefix`` (``run``, ``shell``, ``activate``): ``--name N``
    when that finds this very env, else ``--prefix P`` (a name that finds another env, or none, would
    send the user elsewhere)."""
    # Start-up cost: `list --names` (completion) loads this module but not tfgpu.doors.quoting.
    from tfgpu.doors.quoting import sh

    if name:
        try:
            if _by_name(name) == prefix:
                return f"--name {sh(name)}"
        except (UsageError, ImpossibleError):
            pass
    return f"--prefix {sh(str(prefix))}"
