"""Credentials spelled where a plain reading of a URL misses them: a token path whose separators are
backslashes (WHATWG parsers read ``http://host\\t\\<token>\\chan`` as ``/t/<token>/chan``), a
credential key after a second ``?`` (``?a=1?token=<t>``), and ``user:password@`` after a slash with
no scheme the URL pattern knows (``http ://u:p@host``, quoted whole by the message refusing it).
The door also stays linear on a URL of thousands of ``/t/<x>`` pairs (a hand-written lock's), which
each check of a written file and each redaction of a message runs over. Nothing here fetches: the
loopback port is never connected to.
"""

from __future__ import annotations

import sys

import pytest

from tfgpu.doors import secrets

from .test_hostile_secrets import _everything  # the same sandbox-wide search for the secret

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
SECRET = "SECRETPW42"
INSECURE = {"TFGPU_INSECURE_HOSTS": "127.0.0.1"}

SPELLINGS = [
    f"http://127.0.0.1:9\\t\\{SECRET}\\chan",
    f"http://127.0.0.1:9/t\\{SECRET}/chan",
    f"http://127.0.0.1:9/chan?a=1?token={SECRET}",
    f"http://127.0.0.1:9/chan#state=1?access_token={SECRET}",
]
NO_SCHEME = [
    f"http ://u:{SECRET}@127.0.0.1:9/chan",
    f"h\tttp://u:{SECRET}@127.0.0.1:9/chan",
]


@pytest.mark.parametrize("url", SPELLINGS)
def test_the_door_finds_the_credential_in_an_odd_spelling(url):
    assert secrets.forms(url)
    assert secrets.found_in(f"x {url} y")
    for shown in (secrets.masked(url), secrets.strip(url), secrets.stripped(url), secrets.redact(f"({url})")):
        assert SECRET not in shown


@pytest.mark.parametrize("url", SPELLINGS)
def test_a_json_document_holding_an_odd_spelled_credential_is_masked(url):
    """A ``--json`` document is redacted as written, each backslash doubled by its escaping."""
    import json

    document = json.dumps({"message": f"refused: {url}"})
    assert secrets.found_in(document)
    assert SECRET not in secrets.redact(document)


def test_stripping_a_backslashed_token_keeps_the_rest_as_written():
    stripped_url = secrets.strip("http://h\\t\\TOKEN99\\chan\\x")  # noqa: B005 (the door's strip)
    assert stripped_url == "http://h\\chan\\x"
    assert secrets.masked("http://h/t\\TOKEN99/t/TOKEN98/c") == "http://h/t\\***/t/***/c"


@pytest.mark.parametrize("url", SPELLINGS + NO_SCHEME)
@pytest.mark.parametrize("json", [False, True])
def test_plan_never_prints_an_odd_spelled_credential(cli, sandbox, url, json):
    done = cli(
        "plan", "--tf", "2.13", "--mode", "conda", "--python", PY, "--no-detect", "--channel", url,
        *(["--json"] if json else []), env=INSECURE,
    )  # fmt: skip
    assert done.code in (0, 2), done.out + done.err
    assert SECRET not in _everything(sandbox, done)


@pytest.mark.parametrize("json", [False, True])
def test_an_unknown_option_echoing_a_backslashed_token_never_shows_it(cli, sandbox, json):
    """``plan`` takes no --find-links: the refusal quotes the argument, in a ``--json`` document too."""
    done = cli(
        "plan", "--tf", "2.13", "--mode", "pip", "--python", PY, "--no-detect",
        "--find-links", SPELLINGS[0], *(["--json"] if json else []),
    )  # fmt: skip
    assert done.code == 2, done.out + done.err
    assert SECRET not in _everything(sandbox, done)


ESCAPED = [
    f"http://u:{SECRET}\u00e9@127.0.0.1:9/wh",
    f'http://u:{SECRET}"x@127.0.0.1:9/wh',
    f"http://u:{SECRET}\tx@127.0.0.1:9/wh",
    f"http://u:SEC\\{SECRET}@127.0.0.1:9/wh",
]
"""Passwords holding a character that output escapes: ``--json`` writes ``\\u00e9``, ``\\"`` and
``\\t``, and a refusal shows a tab as ``\\t``; a backslash is the password's to Python's urllib."""


@pytest.mark.parametrize("url", ESCAPED, ids=["non-ascii", "quote", "tab", "backslash"])
@pytest.mark.parametrize("json", [False, True])
def test_a_password_shown_escaped_is_never_printed(cli, sandbox, url, json):
    done = cli(
        "plan", "--tf", "2.13", "--mode", "pip", "--python", PY, "--no-detect",
        "--find-links", url, *(["--json"] if json else []),
    )  # fmt: skip
    assert done.code == 2, done.out + done.err
    assert SECRET not in _everything(sandbox, done)


def test_a_url_of_many_token_segments_is_read_in_linear_time():
    """A hang guard, not a timing: the old walk copied the rest of the path at every token, so
    400 kB of ``/t/<x>`` took minutes; this one takes well under a second."""
    import signal

    url = "http://h" + "/t/x" * 100_000
    text = f"url: {url}\n"

    def hung(*_):
        raise TimeoutError("the secrets door went quadratic on a path of token segments")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(30)
    try:
        assert secrets.found_in(text)
        assert "/t/x" not in secrets.stripped(text)
        assert secrets.redact(text).count("***") == 100_000
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
