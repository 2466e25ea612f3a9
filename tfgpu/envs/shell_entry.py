"""``shell``: how the user's shell is started inside an env so that it is as if the user had
activated the env in it, ``deactivate`` included.

A venv's ``deactivate`` is a shell function its ``bin/activate`` defines; a function is not passed
on through the environment, so a shell started with the activated variables alone (what ``run``
gives a command) has none, and ``deactivate`` there is "command not found". So for a venv the
shell activates it itself, after its own start-up files, as if the user had typed the line:

* bash: ``--rcfile`` a file that sources ``~/.bashrc`` and then ``bin/activate``;
* zsh: ``ZDOTDIR`` a directory whose ``.zshenv`` and ``.zshrc`` source the user's (from their
  ``ZDOTDIR``, else ``$HOME``), put ``ZDOTDIR`` back, and then source ``bin/activate``;
* fish: ``--init-command`` (run after fish's config) sourcing ``bin/activate.fish``.

The files live in a private temporary directory for the shell's life. Any other shell, and a conda
prefix (whose activation is rattler's, with no ``deactivate`` to define), gets the activated
environment as ``run`` does (``tfgpu.envs.enter.activated_environment``); leaving it is ``exit``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tfgpu.doors import quoting
from tfgpu.envs.enter import activated_environment

SELF_ACTIVATING = ("bash", "zsh", "fish")
"""The shells that activate a venv themselves (``deactivate`` works in them)."""


def deactivates(target, program: str) -> bool:
    """Whether ``program`` started by :func:`entered` has a working ``deactivate`` (a venv whose
    activation script is there: without one, ``activated_environment`` says ``not-activatable``)."""
    name = Path(program).name
    if target.kind != "venv" or name not in SELF_ACTIVATING:
        return False
    return (target.prefix / "bin" / ("activate.fish" if name == "fish" else "activate")).is_file()


@contextmanager
def entered(target, program: str) -> Iterator[tuple[tuple[str, ...], dict[str, str]]]:
    """``(argv, environment)`` that start ``program`` (the user's shell) in the env ``target``."""
    if not deactivates(target, program):
        yield (program,), activated_environment(target)
        return
    name = Path(program).name
    activate = target.prefix / "bin" / ("activate.fish" if name == "fish" else "activate")
    environ = dict(os.environ)
    if name == "fish":
        yield (program, "--init-command", f"source {quoting.fish_word(str(activate))}"), environ
        return
    with tempfile.TemporaryDirectory(prefix="tfgpu-shell-") as scratch:
        folder = Path(scratch)
        if name == "bash":
            _private(folder / "rc", f"if [ -f ~/.bashrc ]; then . ~/.bashrc; fi\n. {quoting.sh(activate)}\n")
            yield (program, "--rcfile", str(folder / "rc"), "-i"), environ
            return
        # zsh reads .zshenv, then (interactive) .zshrc, from $ZDOTDIR: the user's own are sourced
        # from where zsh would have read them. A user's .zshenv may itself move ZDOTDIR (to
        # $XDG_CONFIG_HOME/zsh, a common set-up): the value it leaves is kept, and is ZDOTDIR again
        # (their .zshrc read from there) before their .zshrc runs.
        user = environ.get("ZDOTDIR")
        back = f"ZDOTDIR={quoting.sh(user)}" if user is not None else "unset ZDOTDIR"
        home = '"${ZDOTDIR:-$HOME}"'
        _private(
            folder / ".zshenv",
            f"{back}\nif [ -f {home}/.zshenv ]; then . {home}/.zshenv; fi\n"
            'if [ -n "${ZDOTDIR+x}" ]; then __tfgpu_zdotdir="$ZDOTDIR"; else unset __tfgpu_zdotdir; fi\n'
            f"ZDOTDIR={quoting.sh(str(folder))}\n",
        )
        _private(
            folder / ".zshrc",
            'if [ -n "${__tfgpu_zdotdir+x}" ]; then ZDOTDIR="$__tfgpu_zdotdir"; else unset ZDOTDIR; fi\n'
            f"unset __tfgpu_zdotdir\nif [ -f {home}/.zshrc ]; then . {home}/.zshrc; fi\n. {quoting.sh(activate)}\n",
        )
        yield (program, "-i"), {**environ, "ZDOTDIR": str(folder)}


def _private(path: Path, text: str) -> None:
    """A start-up file only this user can read, in the private temporary directory."""
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="utf-8") as file:
        file.write(text)
