"""found_in (the file door's check) against redact (what is shown), a second outside attack on the
fixed door: whatever redact hides as a credential also stops ``write_output``; text holding no
credential is still written; neither raises."""

from __future__ import annotations

import pytest

from tfgpu.doors import paths, secrets
from tfgpu.errors import UsageError

PW = "SECRETPW42"
TOKEN = "SECRETTOKEN42"


def test_found_in_finds_a_conda_token_far_after_a_userinfo_holding_a_blank():
    # The token after a loose userinfo is looked for in the next 4096 characters only; redact masks
    # the userinfo and then reads the URL after it whole, token included.
    text = "https://user:s ecret@conda.example/" + "p" * 5000 + f"/t/{TOKEN}/chan"
    assert TOKEN not in secrets.redact(text, environ={})
    assert secrets.found_in(text, environ={}) != []


def test_write_output_refuses_a_conda_token_far_after_a_userinfo_holding_a_blank(tmp_path):
    target = tmp_path / "out.txt"
    text = "https://user:s ecret@conda.example/" + "p" * 5000 + f"/t/{TOKEN}/chan\n"
    with pytest.raises(UsageError) as caught:
        paths.write_output(target, text)
    assert caught.value.code == "secret-in-output"
    assert not target.exists()


# A bare token as the URL's user, with a backslash in it: the URL pattern's authority ends at the
# backslash, the loose pattern requires a colon. urllib (pip's) reads the netloc to the first slash,
# so urlsplit(...).username is the whole "CORP\\<token>" and is sent as basic auth.
BACKSLASH_USERS = {
    "token_then_backslash": f"https://{TOKEN}\\x@host.example/simple",
    "domain_backslash_token": f"https://CORP\\{TOKEN}@host.example/simple",
    "json_escaped_backslash": f"https://CORP\\\\{TOKEN}@host.example/simple",
}


@pytest.mark.parametrize("text", BACKSLASH_USERS.values(), ids=BACKSLASH_USERS.keys())
def test_found_in_finds_a_bare_token_user_holding_a_backslash(text):
    assert TOKEN not in secrets.redact(text, environ={})
    assert secrets.found_in(text, environ={}) != []


# A real password after a "user" holding a character that ends a URL in text. The exemption meant
# for compact JSON (``"https://x.org","author":"me@x.org"``) skips any user with a blank, a bracket,
# a single quote or a backtick; WHATWG percent-encodes these and sends the password.
ODD_USERS = {
    "placeholder_user_in_angle_brackets": f"https://<user>:{PW}@host.example/simple",
    "user_with_a_blank": f"https://a b:{PW}@host.example/simple",
    "user_with_a_single_quote": f"https://us'er:{PW}@host.example/simple",
    "user_with_a_backtick": f"https://us`er:{PW}@host.example/simple",
}


@pytest.mark.parametrize("text", ODD_USERS.values(), ids=ODD_USERS.keys())
def test_found_in_finds_a_password_after_a_user_holding_a_character_that_ends_a_url(text):
    assert PW not in secrets.redact(text, environ={})
    assert secrets.found_in(text, environ={}) != []


# The digest exemption (meant for docker://image:tag@sha256:...) also let a password through before
# a digest "host" under any scheme but http(s)/ws(s)/ftp/file, git+https (pip sends it to git) too.
# (Under a container transport, oci://NAME@sha256:..., the name before the @ is the image's.)
DIGEST_HOSTS = {
    "git_https": f"git+https://user:{PW}@sha256:" + "a" * 64 + "/repo.git",
    "s3": f"s3://user:{PW}@sha512:" + "a" * 128,
}


@pytest.mark.parametrize("text", DIGEST_HOSTS.values(), ids=DIGEST_HOSTS.keys())
def test_found_in_finds_a_credential_before_a_digest_host(text):
    secret = TOKEN if TOKEN in text else PW
    assert secret not in secrets.redact(text, environ={})
    assert secrets.found_in(text, environ={}) != []


# Text with no credential that the tool plausibly writes: found_in must let it through.
NO_CREDENTIAL = {
    # A Windows PATH list: the first "C:\" reads as a scheme and the second drive's colon as a
    # userinfo's, up to the @ of an npm scope.
    "windows_path_list_with_npm_scope": "PATH=C:\\Python312;C:\\Users\\me\\AppData\\Roaming\\npm\\node_modules\\@angular\\cli",
    "conda_prefixes_with_npm_scope": "prefix: C:\\Users\\me\\miniconda3\\envs\\tf;C:\\Users\\me\\node_modules\\@types\\node",
    "windows_file_url_with_npm_scope": "file://C:\\Users\\me\\node_modules\\@types\\node",
    # A query key merely holding "auth" is no credential's.
    "query_key_author": "https://github.com/org/repo/commits?author=me",
}


@pytest.mark.parametrize("text", NO_CREDENTIAL.values(), ids=NO_CREDENTIAL.keys())
def test_found_in_lets_text_without_a_credential_through_again(text):
    assert secrets.found_in(text, environ={}) == []


def test_a_url_into_a_directory_named_t_is_refused_as_a_token():
    # By design: a repository directory named t (Perl-style tests) reads as /t/<token>/, which the
    # door cannot tell from an anaconda.org token; it refuses rather than write one.
    assert secrets.found_in("https://github.com/org/repo/tree/main/t/tests", environ={}) != []


# Slow but linear, so not kept as tests (they would pass either way): redact's bare-userinfo pattern
# starts at every comma, bracket or "=" and reads 256 + 256 characters from each, 1.4-2.4 CPU-s for a
# megabyte of "," or "=" runs against 0.06 s for found_in; a loose userinfo's long host is read once.
NO_RAISE = [
    "",
    "@",
    ":/@",
    "a:/@" * 3,
    "https://@",
    "https:@",
    "//:@",
    "?=&=;=#=",
    "https://h/?=",
    "https://h/t/",
    "\x00https://u:p@h\x00",
    "https://u:p@h\udcff/",
    "ſ_TOKEN",
]


@pytest.mark.parametrize("text", NO_RAISE)
def test_neither_raises_on_degenerate_text(text):
    secrets.redact(text, environ={"X_TOKEN": "abcdefghij", "\u017f_TOKEN": "klmnopqrst"})
    secrets.found_in(text, environ={"X_TOKEN": "abcdefghij", "\u017f_TOKEN": "klmnopqrst"})
