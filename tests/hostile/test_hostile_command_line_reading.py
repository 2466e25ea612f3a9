"""Odd command lines read both ways: the quick reading (``tfgpu.cli.grammar.quick``) and argparse
(``tfgpu.cli.parser.parse``) give one namespace, or the quick reading leaves the line to argparse.

An option's value that is ``--`` itself (``--tf=--``): Python before 3.13 drops that ``--`` from an
option's value as if it ended the options, so argparse read ``[]`` where the quick reading read
``"--"``, and every reader of the option (``--format``, ``--name``, ``--tf``...) met a list where
text goes: a traceback. The parser reads it as 3.13 does, on every Python.
"""

from __future__ import annotations

import contextlib
import io
import json
import random

import pytest

from .conftest import no_traceback


def _both(argv: list[str]):
    """(the quick reading or None, argparse's namespace as a list of items or the refusal's dict)."""
    from tfgpu.cli.grammar import quick
    from tfgpu.cli.parser import parse
    from tfgpu.errors import UsageError

    try:
        with contextlib.redirect_stdout(io.StringIO()):  # -h and --version print, then exit
            parsed: object = list(vars(parse(argv)).items())
    except UsageError as error:
        parsed = error.to_dict()
    except SystemExit as done:
        parsed = ("exit", done.code)
    return quick(argv), parsed


def _value_options():
    """(command, flag, keywords) for every option that takes a value, of every command that has options only."""
    from tfgpu.cli.grammar import COMMANDS, _options

    for command in COMMANDS:
        options = _options(command)
        if options is None:
            continue
        for flag, (_dest, keywords, _group) in options[1].items():
            if keywords.get("action") != "store_true":
                yield command, flag, keywords


def test_an_option_whose_value_is_a_double_dash_reads_as_that_text_both_ways():
    checked = 0
    for command, flag, _keywords in _value_options():
        if not flag.startswith("--"):
            continue
        argv = [command, f"{flag}=--"]
        quick, parsed = _both(argv)
        if isinstance(parsed, list):
            assert not any(isinstance(value, list) and value == [] for _key, value in parsed), argv
            assert quick is None or list(quick.items()) == parsed, argv
            checked += 1
    assert checked > 20


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["script", "--format=--", "--tf", "2.21", "--no-detect"], "bad-arguments"),
        (["create", "--name=--", "--tf", "2.21", "--dry-run", "--no-detect"], "bad-env-name"),
        (["plan", "--tf=--", "--no-detect", "--bogus"], "bad-arguments"),
        (["plan", "--mode=--", "--no-detect", "-h"], None),
        (["lock", "--platform=--", "--tf", "2.21", "--no-detect"], "bad-platform"),
    ],
)
def test_a_double_dash_value_is_answered_not_a_traceback(cli, argv, code):
    done = no_traceback(cli, *argv, "--json")
    if code is None:  # --help
        assert done.code == 0
    else:
        assert (done.code, done.error) == (2, code), done.out + done.err


_VALUES = ["2.21", "", " ", "a=b", "=", "x y", "a\nb", "\x1b[31m", "-1", "3", "\u0663", "pip", "conda", "bash", "--",
           "-", "--json", "https://u:p@h/x", "~", "\u2010\u2010tf", "\u2212tf", "\udc80", "x" * 300, "@file"]  # fmt: skip


def test_random_command_lines_read_as_argparse_reads_them():
    """A seeded sample of command lines made of each command's own options (and now and then another
    command's, or a stray word), in both spellings with odd values: where the quick reading gives a
    namespace, argparse gives that namespace, key for key and in its order."""
    from tfgpu.cli.grammar import COMMANDS, _options

    rng = random.Random(20)
    strays = ["--js", "--tf-", "-nfoo", "-yn", "--", "-", "\u2010\u2010json", "--version", "-h", "word"]
    read = 0
    for _ in range(1500):
        command = rng.choice(COMMANDS)
        options = _options(command)
        own = sorted(options[1]) if options else ["--json"]
        argv = [command]
        for _ in range(rng.randint(0, 6)):
            if rng.random() < 0.05:
                argv.append(rng.choice(strays))
                continue
            flag = rng.choice(own)
            keywords = options[1][flag][1] if options else {}
            if keywords.get("action") == "store_true":
                argv.append(flag)
                continue
            choices = list(keywords.get("choices") or ())
            value = rng.choice(choices) if choices and rng.random() < 0.6 else rng.choice(_VALUES)
            argv += [flag, value] if rng.random() < 0.5 or not flag.startswith("--") else [f"{flag}={value}"]
        quick, parsed = _both(argv)
        if quick is not None:
            read += 1
            assert list(quick.items()) == parsed, json.dumps(argv)
    assert read > 300
