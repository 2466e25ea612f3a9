"""Entering an env: the lines a shell evaluates to activate it, and the environment a command run in it gets.

What activation sets is not known here. It is whatever the env's own activation does, taken from
the one place that says it:

* a venv: its ``bin/activate`` (``bin/activate.fish`` for fish), which sets ``VIRTUAL_ENV`` and
  ``PATH`` and, in an env the tool set up, sources ``etc/tfgpu/activate.sh``
  (``tfgpu.envs.activation``: the CUDA libraries first on ``LD_LIBRARY_PATH``, ``XLA_FLAGS``);
* a conda prefix: the activation rattler (the engine conda-mode envs are built with) writes for
  it, as pixi and ``conda activate`` do: ``PATH``, ``CONDA_PREFIX``, ``CONDA_SHLVL`` and every
  ``etc/conda/activate.d`` script, the tool's ``tfgpu-cuda`` among them.

``activate`` prints those lines for the user's shell. ``run`` and ``shell`` need the variables
themselves: :func:`activated_environment` runs the same lines in bash (through ``tfgpu.process.runner``) and
reads the environment they leave, so a command started by the tool sees what it would see in a
shell where the user had activated the env, no more and no less.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from rattler import shell as rattler_shell

from tfgpu.doors import quoting, trees
from tfgpu.errors import ImpossibleError, OperationError
from tfgpu.process.runner import Runner

SHELLS = ("bash", "zsh", "fish")
# What bash itself changes in the environment it runs in (not activation): put back as it was. A
# non-interactive bash drops the prompts (PS1, PS2), so activation's prompt would replace the user's.
_BASH_OWN = ("_", "SHLVL", "PWD", "OLDPWD", "PS1", "PS2")
# Files a non-interactive bash would source before the activation: not part of it, kept out.
_BASH_STARTUP = ("BASH_ENV", "ENV")
# A word rattler's activation script can carry: it writes the prefix's path unquoted.
_PLAIN_WORD = re.compile(r"[A-Za-z0-9/._+@%=,:~-]+")


def _not_activatable(prefix: Path, why: str, more: tuple[str, ...] = ()) -> ImpossibleError:
    return ImpossibleError(
        "not-activatable",
        f"{prefix} cannot be activated: {why}.",
        [*more, f"Run its programs by their path ({prefix}/bin/python), or rebuild it with tfgpu-install."],
    )


def check_env(target) -> None:
    """The env ``target`` (``tfgpu.envs.which.EnvTarget``) is there and of a kind that has an
    activation: ``no-such-env`` (exit 3) or ``not-activatable`` (exit 3) otherwise."""
    prefix = target.prefix
    if not prefix.is_dir():
        raise ImpossibleError(
            "no-such-env",
            f"There is no environment at {prefix}.",
            ["`tfgpu-install list` shows the environments tfgpu-install built; or create it first."],
        )
    if target.kind == "unknown":
        raise _not_activatable(prefix, "it has neither pyvenv.cfg (a venv) nor conda-meta/ (a conda env)")


def activation_lines(target, shell: str) -> str:
    """The lines that activate ``target`` in ``shell`` (bash, zsh or fish): the env's own activation."""
    check_env(target)
    prefix = target.prefix
    if target.kind == "venv":
        script = prefix / "bin" / ("activate.fish" if shell == "fish" else "activate")
        if not script.is_file():
            raise _not_activatable(prefix, f"it is a venv without {script.relative_to(prefix)}")
        if shell == "fish":
            return f'source "{quoting.fish_double(script)}"\n'
        return f". {quoting.sh(script)}\n"
    if _PLAIN_WORD.fullmatch(str(prefix)):
        return _requoted(_rattler_activation(prefix, shell), shell, prefix)
    # rattler writes the prefix into its lines as it is, quoted or escaped differently from line to
    # line, so a path with spaces or quotes cannot be read back from them. It is given a link to the
    # prefix whose path is a plain word instead, and the link's path is put back as the prefix in
    # every value read (then quoted for the shell like any other value).

    with tempfile.TemporaryDirectory(prefix="tfgpu-activate-") as folder:
        alias = Path(folder) / "env"
        trees.symlink(prefix, alias)
        if not _PLAIN_WORD.fullmatch(str(alias)):
            raise _not_activatable(
                prefix,
                "conda activation (rattler's) writes the path unquoted, and this one has spaces or other "
                "characters a shell would split (and the temporary directory, to go around it, has too)",
                (f"With conda installed: `conda activate {quoting.sh(prefix)}`.",),
            )
        return _requoted(_rattler_activation(alias, shell), shell, prefix, alias=str(alias))


def _rattler_activation(prefix: Path, shell: str) -> str:
    """rattler's activation script of the conda env at ``prefix`` for ``shell``, as it writes it."""
    # As `conda activate` computes it: the env's bin/ in front of the shell's PATH (this process's:
    # the shell that evaluates the lines started the tool), an active conda env's own taken out.
    variables = rattler_shell.ActivationVariables(
        Path(os.environ["CONDA_PREFIX"]) if os.environ.get("CONDA_PREFIX") else None,
        os.environ.get("PATH", os.defpath).split(os.pathsep),
        rattler_shell.PathModificationBehavior.Replace,
    )
    return rattler_shell.activate(prefix, variables, getattr(rattler_shell.Shell, shell)).script


# The lines rattler writes: a variable set, or a script sourced, one a line. Its values are data
# (the user's PATH, an env_vars.d value, an activate.d file name) and rattler puts them between
# double quotes unescaped, where a shell still expands `$(...)` and backticks: each line is read
# back in this strict form and written again quoted as a word for that shell.
_SET = {
    "bash": re.compile(r"export ([A-Za-z_][A-Za-z0-9_]*)=(.*)"),
    "zsh": re.compile(r"export ([A-Za-z_][A-Za-z0-9_]*)=(.*)"),
    "fish": re.compile(r"set -gx ([A-Za-z_][A-Za-z0-9_]*) (.*)"),
}
_SOURCE = re.compile(r"(?:\.|source) (.*)")


def _unquoted(text: str) -> str:
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] == '"' else text


def _requoted(script: str, shell: str, prefix: Path, alias: str | None = None) -> str:
    """rattler's activation ``script`` for ``shell``, every value and path quoted for it (``alias``,
    a link to ``prefix`` rattler was given instead: the prefix put back); a line of another form (a
    value that held a newline) is ``not-activatable``."""

    def word(value: str) -> str:
        if alias is not None:
            value = value.replace(alias, str(prefix))
        return quoting.fish_word(value) if shell == "fish" else quoting.sh(value)

    lines = []
    for line in script.splitlines():
        if not line.strip():
            continue
        found = _SET[shell].fullmatch(line)
        if found:
            name, value = found[1], _unquoted(found[2])
            lines.append(f"set -gx {name} {word(value)}" if shell == "fish" else f"export {name}={word(value)}")
            continue
        found = _SOURCE.fullmatch(line)
        if found:
            lines.append(f"source {word(_unquoted(found[1]))}" if shell == "fish" else f". {word(_unquoted(found[1]))}")
            continue
        raise _not_activatable(
            prefix,
            f"its conda activation holds a line this tool cannot quote safely ({quoting.one_line(line)[:80]!r})",
            (f"With conda installed: `conda activate {quoting.sh(prefix)}`.",),
        )
    return "".join(f"{line}\n" for line in lines)


def activated_environment(target, runner=None) -> dict[str, str]:
    """This process's environment after the env's activation, as bash leaves it."""

    environ = dict(os.environ)
    lines = activation_lines(target, "bash")
    # Activation's own output (a banner) goes to stderr, of which only the end is kept (an activation
    # that prints gigabytes costs no memory); stdout carries the environment only. The environment is
    # read as bytes kept as they are (surrogateescape): a variable that is not UTF-8 passes unchanged.
    program = 'exec 2> >(tail -c 4096 >&2); eval "$1" >&2 || exit; exec env -0'
    done = (runner or Runner()).capture(
        ["bash", "--noprofile", "--norc", "-c", program, "tfgpu-activate", lines],
        env={**environ, **dict.fromkeys(_BASH_STARTUP, "")},  # empty: no file is sourced
        clean=False,
        errors="surrogateescape",
    )
    if done.returncode != 0 or not done.output:
        raise OperationError(
            "activation-failed",
            f"Activating {target.prefix} in bash failed (exit {done.returncode}): "
            f"{quoting.one_line(done.stderr)[-300:] or 'no message'}.",
            [
                f"Try it by hand: `bash -c {quoting.sh(lines.strip())}`; `tfgpu-install doctor --prefix {target.prefix}`."
            ],
        )
    found = dict(item.split("=", 1) for item in done.output.split("\0") if "=" in item)
    for name in (*_BASH_OWN, *_BASH_STARTUP):
        found.pop(name, None)
        if name in environ:
            found[name] = environ[name]
    return found


def find_command(command: str, environ: Mapping[str, str]) -> str | None:
    """``command`` as the activated shell would find it on its ``PATH`` (a path is taken as given)."""
    return shutil.which(command, path=environ.get("PATH", os.defpath))
