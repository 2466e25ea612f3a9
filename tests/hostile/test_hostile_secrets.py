"""Credentials in the spellings a server reads alike but a string match does not: ``/T/<token>/``
and ``/%74/<token>/`` (a server routes on the decoded, case-folded segment), two token segments,
query and fragment keys beyond the well-known ones (``auth``, ``sig``, ``X-Amz-Signature``,
``client_secret``, ``#access_token``), and ``http:/``/``http:\\\\`` URLs that WHATWG parsers read as
``http://``. None of them reaches what is printed (text or ``--json``, errors included), the run's
log, or a file written for ``-o``. Nothing here fetches: ``plan`` and ``script`` only read the
channel's URL, so the loopback URLs are never connected to.
"""

from __future__ import annotations

import sys

import pytest

from tfgpu.doors import secrets
from tfgpu.export import DIRECTORY_FORMATS, FORMATS

from .conftest import changed, snapshot

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
SECRET = "SECRETTOKEN42"
HOST = "http://127.0.0.1:9"
INSECURE = {"TFGPU_INSECURE_HOSTS": "127.0.0.1"}

TOKEN_PATHS = [
    f"{HOST}/T/{SECRET}/chan",
    f"{HOST}/%74/{SECRET}/chan",
    f"{HOST}/%54/{SECRET}/chan",
    f"{HOST}/t/{SECRET}/t/{SECRET}/chan",
]
QUERIES = [
    f"{HOST}/chan?auth={SECRET}",
    f"{HOST}/chan?key={SECRET}",
    f"{HOST}/chan?sig={SECRET}",
    f"{HOST}/chan?X-Amz-Signature={SECRET}",
    f"{HOST}/chan?passwd={SECRET}",
    f"{HOST}/chan?pwd={SECRET}",
    f"{HOST}/chan?id_token={SECRET}",
    f"{HOST}/chan?client_secret={SECRET}",
    f"{HOST}/chan#access_token={SECRET}",
    f"{HOST}/chan#token={SECRET}",
]
SLASHES = [
    f"http:/u:{SECRET}@127.0.0.1:9/chan",
    f"http:\\\\u:{SECRET}@127.0.0.1:9/chan",
]


def _everything(sandbox, done) -> str:
    files = [p for p in sandbox.rglob("*") if p.is_file()]
    return done.out + done.err + "".join(p.read_text(errors="replace") for p in files)


@pytest.mark.parametrize("url", TOKEN_PATHS + QUERIES + SLASHES)
def test_the_door_knows_the_credential_in_every_spelling(url):
    assert secrets.forms(url)
    assert SECRET not in secrets.masked(url) and SECRET not in secrets.strip(url)
    assert SECRET not in secrets.redact(f"from {url} (refused)")


def test_a_harmless_query_stays_readable():
    url = "https://packages.ubuntu.com/search?keywords=python3&searchon=names&exact=1"
    assert secrets.forms(url) == [] and secrets.masked(url) == url


@pytest.mark.parametrize("url", TOKEN_PATHS + QUERIES + SLASHES)
@pytest.mark.parametrize("json", [False, True])
def test_plan_never_prints_the_credential(cli, sandbox, url, json):
    done = cli(
        "plan", "--tf", "2.13", "--mode", "conda", "--python", PY, "--no-detect", "--channel", url,
        *(["--json"] if json else []), env=INSECURE,
    )  # fmt: skip
    assert done.code in (0, 2), done.out + done.err
    assert SECRET not in _everything(sandbox, done)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("url", TOKEN_PATHS)
def test_no_export_holds_an_odd_spelled_token(cli, sandbox, fmt, url):
    out = sandbox / ("out" if fmt in DIRECTORY_FORMATS else "out.file")
    before = snapshot(sandbox)
    done = cli(
        "script", "--format", fmt, "--mode", "conda", "--tf", "2.13", "--python", PY, "--no-detect",
        "--channel", url, "-o", str(out), "--json", env=INSECURE,
    )  # fmt: skip
    assert (done.code, done.error) == (2, "bad-channel"), done.out
    assert not out.exists()
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []
    assert SECRET not in _everything(sandbox, done)


@pytest.mark.parametrize(
    "argv",
    [
        ("--insecure-host", f"u:{SECRET}@127.0.0.1"),
        ("--channel", f"u:{SECRET}@127.0.0.1:9/chan"),
    ],
    ids=["insecure-host", "channel"],
)
@pytest.mark.parametrize("json", [False, True])
def test_a_password_without_a_scheme_is_refused_without_being_shown(cli, sandbox, argv, json):
    done = cli(
        "plan", "--tf", "2.13", "--mode", "conda", "--python", PY, "--no-detect", *argv,
        *(["--json"] if json else []),
    )  # fmt: skip
    assert done.code == 2, done.out + done.err
    assert SECRET not in _everything(sandbox, done)


@pytest.mark.parametrize("mark", ['"', "'", "<", " ", "`"])
@pytest.mark.parametrize("json", [False, True])
def test_a_password_holding_a_quote_or_a_space_is_not_shown(cli, sandbox, mark, json):
    """The URL pattern in text stops at a quote or a space: the userinfo is masked up to its ``@``."""
    half, other = SECRET[:6], SECRET[6:]
    done = cli(
        "plan", "--tf", "2.13", "--mode", "conda", "--python", PY, "--no-detect",
        "--channel", f"http://u:{half}{mark}{other}@127.0.0.1:9/chan", *(["--json"] if json else []),
        env=INSECURE,
    )  # fmt: skip
    assert done.code == 2, done.out + done.err
    shown = _everything(sandbox, done)
    assert half not in shown and other not in shown


def test_update_data_from_an_index_behind_a_token_names_no_cache_file_after_it(cli, sandbox, tmp_path):
    """``update-data --index http://HOST/t/<token>/pypi``: the JSON answers are cached under names
    made from the URL's path, which must not carry the token (ls, backups and `cache` show names).
    A real loopback server answers the JSON API; the wheels it names are absent, so the run fails
    after the answers were cached, which is all this needs."""
    import json as jsonlib
    import threading
    from functools import partial
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    served = tmp_path / "served"
    for project in ("tensorflow", "torch", "jax"):
        (served / "t" / SECRET / "pypi" / project).mkdir(parents=True)
        (served / "t" / SECRET / "pypi" / project / "json").write_text(
            jsonlib.dumps({"info": {"name": project, "version": "0.0.1"}, "releases": {}, "urls": []})
        )

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):  # noqa: D102 - quiet
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(served)))
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        index = f"http://127.0.0.1:{httpd.server_address[1]}/t/{SECRET}/pypi"
        done = cli("update-data", "--index", index, "--json", env=INSECURE)
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert done.code in (0, 1), done.out
    cached = [p for p in (sandbox / "cache").rglob("*") if p.is_file()]
    assert cached, "the JSON answers were cached"
    assert [str(p) for p in cached if SECRET in str(p.relative_to(sandbox))] == []
    assert SECRET not in done.out + done.err


@pytest.mark.parametrize("json", [False, True])
def test_doctor_log_shows_the_users_log_lines_without_their_credentials(cli, sandbox, json):
    """``doctor --log`` quotes the lines it matched; a pip or TensorFlow log line may hold a URL with
    a credential, or a query pair a space cut off its URL (``… /simple ?access_token=<t>``)."""
    log = sandbox / "train.log"
    log.write_text(
        "Could not load dynamic library 'libcudnn.so.8'; dlerror: libcudnn.so.8: cannot open shared object "
        f"file: No such file or directory; from http://u:{SECRET}@127.0.0.1/simple\n"
        "Cannot dlopen some GPU libraries. Please make sure the missing libraries mentioned above are "
        f"installed properly https://127.0.0.1/T/{SECRET}/chan ?access_token={SECRET}\n"
    )
    done = cli("doctor", "--log", str(log), *(["--json"] if json else []))
    assert done.code == 1, done.out + done.err
    assert "libcudnn" in done.out
    assert SECRET not in done.out + done.err
