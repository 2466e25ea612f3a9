"""Words the parser did not know, answered with the ones it does: "did you mean".

Only an error path imports this module (difflib is not loaded on a run that parses), and every
suggestion is taken from the parser itself (its commands, a command's own option strings, an
option's choices), so a renamed or added option is suggested without a list kept here.
"""

from __future__ import annotations

import difflib
import re

from tfgpu.doors.controls import shown

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

_SHOWN = 80
"""The most characters of one word (or of the words given) an answer echoes: the words are the
user's, but may come from a script or a paste, and a 100,000-character word is not a line."""

_ANSWERS = 5
"""The most unknown words answered one by one."""

_CUTOFF = 0.7
"""difflib's ratio a suggestion needs, compared without the leading dashes (``--`` would make any
two long options look alike): ``mod``/``mode`` 0.86, ``verfy``/``verify`` 0.91, and not
``instal``/``list`` (0.6)."""


def echoed(text: str, limit: int = _SHOWN) -> str:
    """``text`` (words of the command line) as an answer shows them: controls escaped (a line break
    or an escape sequence in a word would print a line or paint the terminal of its own), at most
    ``limit`` characters, with how much was cut said in words."""
    text = shown(text)
    return text if len(text) <= limit else f"{text[:limit]} ({len(text):,} characters; the first {limit} shown)"


def closest(word: str, known) -> str | None:
    """The one known word nearest ``word``, or None when none is near enough."""
    bare = {option.lstrip("-"): option for option in known}
    found = difflib.get_close_matches(word.lstrip("-"), list(bare), n=1, cutoff=_CUTOFF)
    return bare[found[0]] if found else None


def option_strings(parser: argparse.ArgumentParser) -> list[str]:
    """The options ``parser`` takes, ``--help`` and ``-h`` left out (no one misspells them into a question)."""
    return [
        string
        for action in parser._actions  # argparse's list of its arguments; it has no public one
        for string in action.option_strings
        if string not in ("-h", "--help")
    ]


def unknown_options(words: list[str], parser: argparse.ArgumentParser, others: dict) -> list[str]:
    """One sentence per unknown word of ``words`` that can be answered: the option of ``parser``
    it looks like, or the commands that take it as written (``others``: command name → parser)."""
    taken = option_strings(parser)
    names = []
    for word in words:
        if not word.startswith("-") or word in ("-", "--"):
            continue  # a value of the unknown option, or a stray positional word
        name = word.split("=", 1)[0]
        # A known option here was given a value it does not take (a flag given "=x"): no misspelling.
        # Each other word is answered once, however often it was given.
        if name not in taken and name not in names:
            names.append(name)
    answers = []
    for name in names:
        near = closest(name, taken)
        if near is not None:
            # Two misspellings answered at once name the word each answer is for.
            answers.append(f"Did you mean {near}?" if len(names) == 1 else f"{echoed(name)}: did you mean {near}?")
            continue
        owners = [command for command, other in others.items() if name in option_strings(other)]
        if owners:
            answers.append(f"{echoed(name)} is an option of {', '.join(owners)}.")
    if len(answers) > _ANSWERS:  # thousands of unknown words are not thousands of sentences
        return [*answers[:_ANSWERS], f"({len(answers) - _ANSWERS:,} more unknown options not answered.)"]
    return answers


_INVALID_CHOICE = re.compile(r"invalid choice: (?P<value>.+?) \(choose from")


def invalid_choice(message: str, parser: argparse.ArgumentParser) -> str | None:
    """For argparse's "invalid choice: 'prnue' (choose from ...)", the choice meant, as a sentence."""
    match = _INVALID_CHOICE.search(message)
    if match is None:
        return None
    value = match["value"].strip("'\"")
    choices = [str(choice) for action in parser._actions if action.choices for choice in action.choices]
    near = closest(value, choices)
    return None if near is None else f"Did you mean {near}?"
