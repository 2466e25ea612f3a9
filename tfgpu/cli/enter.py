"""``tfgpu-install run``, ``activate`` and ``shell``: entering an env (``tfgpu.envs.enter`` does the work).

Kept apart from ``commands`` because these hand the user's terminal to another program: ``run``
and ``shell`` start it attached (its exit status becomes the tool's, ``results.Ran``), ``activate``
prints the lines a shell evaluates. An env is always named (as for ``remove``): with one active,
commands already run in it, and a default would hide, in a script or a cron job, which env ran.
"""

from __future__ import annotations

from tfgpu import results
from tfgpu.cli.options import SHELLS
from tfgpu.cli.output import note
from tfgpu.doors import quoting
from tfgpu.doors.quoting import sh
from tfgpu.envs import enter, shell_entry
from tfgpu.envs.inuse import using
from tfgpu.envs.txn import hold_of
from tfgpu.envs.which import which_env
from tfgpu.errors import CommandNotFoundError, OperationError, UsageError
from tfgpu.process.runner import Runner
from tfgpu.settings import Settings


def _enter(settings: Settings):
    """The env ``run``, ``activate`` and ``shell`` mean: always named (the parser requires it), and
    said nowhere on success (the output is the command's, or the lines to evaluate)."""
    target = which_env(name=settings.name, prefix=settings.prefix, environ={}, purpose=settings.command)
    enter.check_env(target)
    return target


def _where(settings: Settings) -> str:
    """The env as the user named it, for a command line in a message."""

    return f"--name {sh(settings.name)}" if settings.name else f"--prefix {sh(settings.prefix)}"


def _attached(
    argv: tuple[str, ...], target, where: str, environ: dict | None = None, command: str = "run"
) -> results.Result:
    """``argv`` run on this terminal with the env activated (``tfgpu.envs.enter``; ``environ``: the
    environment to give it instead, when the program activates the env itself)."""

    if environ is None:
        environ = enter.activated_environment(target)
    found = enter.find_command(argv[0], environ)
    if found is None:
        if "/" in argv[0]:
            raise CommandNotFoundError(
                "command-not-found",
                f"There is no program at {argv[0]!r} (nothing there, or not executable).",
                ["Check the path; a name without a '/' is looked up on the activated env's PATH."],
            )
        raise CommandNotFoundError(
            "command-not-found",
            f"{argv[0]!r} is not a command in {target.prefix}, nor anywhere on the activated env's PATH.",
            [
                "Install the package that provides it into the env, or give the program's path "
                f"(`tfgpu-install run {where} -- /path/to/{quoting.one_line(argv[0])}`).",
            ],
        )

    try:
        # Held while the program runs: a `remove` of this env refuses meanwhile (env-in-use).
        with using(target.prefix, hold_of(target.prefix), command):
            status = Runner().attached([found, *argv[1:]], env=environ)
    except OSError as error:
        raise OperationError(
            "command-not-started",
            f"{found} could not be started: {error.strerror or error}.",
            ["Check that it is a program for this machine (a script needs a #! line)."],
        ) from None
    return results.Ran(argv, status)


def cmd_run(settings: Settings) -> results.Result:
    """``run -- CMD [ARGS]``: CMD in the env as its activation would run it; its exit code is ours."""
    if not settings.command_argv:
        raise UsageError(
            "no-command-to-run",
            "tfgpu-install run: say which command to run, after --.",
            [f"`tfgpu-install run {_where(settings)} -- python train.py`"],
        )
    return _attached(settings.command_argv, _enter(settings), _where(settings))


def _shell_name(settings: Settings) -> str:
    """--shell, else the shell $SHELL names."""
    if settings.shell:
        return settings.shell
    name = settings.user_shell.rsplit("/", 1)[-1]
    if name not in SHELLS:
        raise UsageError(
            "unknown-shell",
            f"$SHELL is {settings.user_shell!r}, not one of {', '.join(SHELLS)}, so which lines to print is not known.",
            ["Say which with --shell bash, --shell zsh or --shell fish."],
        )
    return name


def cmd_activate(settings: Settings) -> results.Result:
    """``activate``: the lines that activate the env in the user's shell, for eval (fish: source)."""
    shell = _shell_name(settings)
    target = _enter(settings)
    return results.Text(enter.activation_lines(target, shell))


def cmd_shell(settings: Settings) -> results.Result:
    """``shell``: the user's $SHELL started inside the env; leaving it is ``exit`` (in bash, zsh and
    fish in a venv, ``deactivate`` works as after ``source bin/activate``: ``tfgpu.envs.shell_entry``)."""
    program = settings.user_shell or "/bin/sh"
    target = _enter(settings)
    also = "; `deactivate` leaves the env and stays in the shell" if shell_entry.deactivates(target, program) else ""
    note(f"A new {program.rsplit('/', 1)[-1]} in {target.prefix}; `exit` leaves it{also}.")
    with shell_entry.entered(target, program) as (argv, environ):
        return _attached(argv, target, _where(settings), environ, command="shell")
