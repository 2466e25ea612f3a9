"""The command line's argparse parsers, built from the grammar (``tfgpu.cli.grammar``: every command
and the options it takes, ``tfgpu.cli.options``). They answer ``--help``, ``--version``, completion,
the docs and every mistake; a run whose line ``tfgpu.cli.grammar.quick`` reads never imports them.

A test walks this parser and fails on any option without help. The parsed namespace never leaves
``tfgpu.cli``: ``tfgpu.cli.inputs`` turns it into the one frozen ``tfgpu.settings.Settings``.
"""

from __future__ import annotations

import argparse
import os
import sys

from tfgpu import __version__
from tfgpu.cli.examples import epilog
from tfgpu.cli.grammar import COMMANDS, GRAMMAR, INTERPRETER_COMMANDS, with_default_command
from tfgpu.errors import UsageError

__all__ = ["COMMANDS", "GRAMMAR", "INTERPRETER_COMMANDS", "with_default_command"]
"""The grammar itself is ``tfgpu.cli.grammar``'s (read without argparse); these are here for its readers."""


def _columns() -> int:
    """``shutil.get_terminal_size().columns``, without importing ``shutil`` (and the compression
    modules it loads) on every run: ``COLUMNS``, else the terminal of standard output, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            stdout = sys.__stdout__  # None without one: 80
            columns = (os.get_terminal_size(stdout.fileno()).columns or 80) if stdout is not None else 80
        except (AttributeError, ValueError, OSError):
            columns = 80
    return columns


class Formatter(argparse.RawDescriptionHelpFormatter):
    """argparse's formatter, as wide as argparse makes it (the terminal's width less 2); a
    description or epilog (a command's examples) is shown as written, one example a line."""

    def __init__(self, prog, indent_increment=2, max_help_position=24, width=None):
        super().__init__(prog, indent_increment, max_help_position, _columns() - 2 if width is None else width)


class Parser(argparse.ArgumentParser):
    """argparse that raises a UsageError (exit 2, JSON-renderable) instead of exiting. Options are
    spelled whole: an abbreviation (``--js``) would be accepted by argparse but not seen by the
    front door's early check for ``--json``, so a failure would come back as text."""

    commands: argparse._SubParsersAction[Parser]
    """The top level's: each command's own parser (set by :func:`build_parser`)."""
    command: str | None = None
    """A command's parser made alone (:func:`command_parser`): the command's name."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", Formatter)
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args=None, namespace=None):  # noqa: D102 - kept for error()
        self.argv = list(args) if args is not None else []
        return super().parse_known_args(args, namespace)

    def _get_values(self, action, arg_strings):  # noqa: D102 - argparse hook
        # `--tf=--`: an option's value that is `--` itself. Python before 3.13 drops that `--` as
        # if it ended the options, leaving a list where every reader of the option expects text
        # (a traceback from `--format=--`, `--name=--`, ...); 3.13 keeps it, and so does the quick
        # reading (tfgpu.cli.grammar.quick), so argparse reads it as 3.13 does on every Python.
        if action.option_strings and action.nargs in (None, "?") and arg_strings == ["--"]:
            value = self._get_value(action, "--")
            self._check_value(action, value)
            return value
        return super()._get_values(action, arg_strings)

    def parse_args(self, args=None, namespace=None):  # noqa: D102 - unknown words get their own answer
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            self.unrecognized(extras)
        return parsed

    def unrecognized(self, words: list[str]):
        """Words no parser took (argparse gathers them here, at the top, from the command's parser):
        the option each looks like, and the help of the command that was parsed, which lists its
        options (the top-level help lists only the commands)."""
        # Start-up cost: `plan --json --no-detect` loads this module but not tfgpu.cli.typos, tfgpu.cli.render.console.
        from tfgpu.cli import typos

        argv = getattr(self, "argv", [])
        commands = getattr(self, "commands", None)
        command = self.command or (argv[0] if argv and commands is not None and argv[0] in commands.choices else None)
        if command in INTERPRETER_COMMANDS and any(
            word == "--python" or word.startswith("--python=") for word in words
        ):
            # The one option whose meaning changed: say where the old spelling went.
            raise UsageError(
                "bad-arguments",
                f"tfgpu-install {command}: --python is a Python version elsewhere; give "
                "an interpreter with --interpreter PATH.",
                [f"`tfgpu-install {command} --interpreter ./env/bin/python`"],
            )
        owner = self if command is None or commands is None else commands.choices[command]  # self: made alone
        others = {}
        if command is not None:
            # The other commands, to say which of them takes an option given to the wrong one.
            whole = build_parser().commands.choices
            others = {name: parser for name, parser in whole.items() if name != command}
        answers = typos.unknown_options(words, owner, others)
        # A word's line break would print a line of its own, so the words are shown escaped (and cut short).
        raise UsageError(
            "bad-arguments",
            " ".join([f"{owner.prog}: unrecognized arguments: {typos.echoed(' '.join(words), 400)}.", *answers]),
            [f"Run `{owner.prog} --help` for the options of {command}." if command else HELP_LINE],
        )

    def _print_message(self, message: str, file=None) -> None:  # argparse's one writer (--help, --version)
        # argparse drops a write that fails: a --help to a full disk or to a reader that left would
        # end as a silent success. Raised, it ends as every other write that fails (tfgpu.cli.main).
        if message:
            (file or sys.stderr).write(message)
            (file or sys.stderr).flush()

    def error(self, message: str):  # noqa: D102 - argparse hook
        # Start-up cost: `plan --json --no-detect` loads this module but not tfgpu.cli.typos, tfgpu.cli.render.console.
        from tfgpu.cli import typos
        from tfgpu.doors.controls import shown

        # argparse quotes some words (repr) and joins others raw: a word's line break would print
        # a line of its own, so the whole message is shown escaped.
        near = typos.invalid_choice(message, self)
        raise UsageError(
            "bad-arguments",
            " ".join([f"{self.prog}: {shown(message)}.", *([near] if near else [])]),
            [f"Run `{self.prog} --help` for the accepted options."],
        )


HELP_LINE = "Run `tfgpu-install --help` for the commands and the options they share."


def build_parser() -> Parser:
    """The whole grammar: the top level and every command's parser (``--help``, ``--version``,
    completion, the docs, the answer to a word no parser took, the tests that walk it)."""
    parser = Parser(
        prog="tfgpu-install",
        description="Get TensorFlow running on NVIDIA GPUs. The bare form is `create`: "
        "tfgpu-install --tf 2.13 --mode conda",
        epilog=epilog(None),
    )
    parser.add_argument(
        "--version", action="version", version=f"tfgpu-install {__version__}", help="print the version and exit"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    parser.commands = sub  # each command's own parser, for the answer to a word none of them took
    for name in COMMANDS:
        help_text, fill = GRAMMAR[name]
        fill(sub.add_parser(name, help=help_text, description=help_text, epilog=epilog(name)))
    return parser


def command_parser(command: str) -> Parser:
    """``command``'s parser alone, the one :func:`build_parser` makes for it (the same prog, help and
    options: a test holds them equal), which a run parses the words after the command with. The top
    level (its usage text, the sub-parser action and the other commands) is half of what building
    a command's parser costs, and a run that names its command never reads it."""
    help_text, fill = GRAMMAR[command]
    parser = Parser(prog=f"tfgpu-install {command}", description=help_text, epilog=epilog(command))
    parser.command = command
    fill(parser)
    return parser


def parse(argv: list[str]) -> argparse.Namespace:
    """``argv`` (its command first, as :func:`with_default_command` leaves it) parsed: by the command's
    own parser where a command is named, else (``--help``, ``--version``) by the whole grammar."""
    if argv and argv[0] in COMMANDS:
        return command_parser(argv[0]).parse_args(argv[1:], argparse.Namespace(command=argv[0]))
    return build_parser().parse_args(argv)
