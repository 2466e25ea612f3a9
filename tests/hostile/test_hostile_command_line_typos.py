"""The answer to unknown options ("did you mean") echoes the words it answers: each is shown as the
list of unknown words is, controls escaped and cut short. A word holding an escape sequence or a
carriage return printed it raw in the suggestion (``--mo\\rde: did you mean --mode?`` drew a line of
its own; in ``--json`` the message held the raw ESC its reader prints), a 100,000-character word
was echoed whole, and 3,000 unknown options were 3,000 sentences. The real command line, in this
process."""

from __future__ import annotations

import json

import pytest

from .conftest import no_traceback

RAW = ("\x1b", "\x07", "\r", "\x9b")


@pytest.mark.parametrize("want_json", [False, True], ids=["text", "json"])
@pytest.mark.parametrize(
    "words",
    [
        ("--pytho\x1bn=3.11", "--mod\x07"),
        ("--pytho\x1b]0;title\x07n", "3.11", "--mo\rde", "pip"),
        ("--mod\x9b", "--pythn"),
        ("--mod\n", "--pythn=3.11"),
    ],
    ids=["esc-bel", "osc-cr", "csi", "line-break"],
)
def test_the_suggestion_shows_an_unknown_word_escaped(cli, words, want_json):
    done = no_traceback(cli, "plan", *(("--json",) if want_json else ()), *words)
    assert done.code == 2 and "bad-arguments" in done.out + done.err, done.out + done.err
    message = json.loads(done.out)["error"]["message"] if want_json else done.err
    assert "did you mean" in message
    assert not any(raw in message for raw in RAW), repr(message)
    # the message is one line: error: CODE, the message, the way forward (text); one string (json)
    assert len(message.strip().splitlines()) == (1 if want_json else 3), message


THOUSANDS = {
    # 3,000 different unknown options: the answers past the first few are counted, not written.
    "text": [f"--pythn{index}=1" for index in range(3000)],
    # One unknown option 5,000 times: answered once.
    "json": ["--pythn"] * 5000,
}


@pytest.mark.parametrize("want_json", [False, True], ids=["text", "json"])
def test_a_huge_unknown_word_or_thousands_of_them_make_a_short_answer(cli, want_json):
    """Each format answers a huge word (alone, and with a value beside a second typo) and one of
    the thousands-of-words cases (``THOUSANDS``). The answer to thousands of words is cut short
    before either format writes it (``tfgpu.cli.typos``), so each of those cases runs once, not
    in both formats: argparse's reading of thousands of options takes time quadratic in their
    number (most of a CPU-second for each case in each format)."""
    for words in (
        ["--" + "a" * 100_000],
        ["--pyth" + "o" * 50_000 + "n=3.11", "--mod=pip"],
        THOUSANDS["json" if want_json else "text"],
    ):
        done = no_traceback(cli, "plan", *(("--json",) if want_json else ()), *words)
        assert done.code == 2 and "bad-arguments" in done.out + done.err, (done.out + done.err)[:500]
        assert len(done.out + done.err) < 3_000, (done.out + done.err)[:500]
        if want_json:
            json.loads(done.out)


def test_a_plain_typo_is_still_answered_in_full(cli):
    done = no_traceback(cli, "plan", "--pythn=3.11", "--mod", "pip")
    assert done.code == 2
    assert "unrecognized arguments: --pythn=3.11 --mod pip." in done.err
    assert "--pythn: did you mean --python? --mod: did you mean --mode?" in done.err


@pytest.mark.parametrize("option", ["--mode", "--os", "--arch"])
def test_a_huge_value_of_a_fixed_choice_makes_a_short_answer(cli, option):
    """``--mode`` given 100,000 characters echoed them all back (``bad-option-value``)."""
    done = no_traceback(cli, "plan", "--json", "--no-detect", option, "p\x1b" * 50_000)
    assert done.code == 2, (done.out + done.err)[:500]
    message = json.loads(done.out)["error"]["message"]
    assert len(message) < 500 and "\x1b" not in message, message[:500]


def test_a_huge_engine_makes_a_short_answer(cli):
    """``--engine`` is checked after parsing (not by argparse's choices): the same short answer as ``--mode``."""
    argv = ("create", "--tf", "2.21", "--mode", "pip", "--dry-run", "--no-detect", "--engine")
    done = no_traceback(cli, *argv, "q\x1b" * 50_000, "--json")
    assert done.code == 2, (done.out + done.err)[:500]
    message = json.loads(done.out)["error"]["message"]
    assert len(message) < 500 and "\x1b" not in message and "--engine" in message, message[:500]
