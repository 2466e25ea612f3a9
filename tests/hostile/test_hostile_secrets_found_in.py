"""found_in (the file door's check) against redact (what is shown): whatever redact hides as a
credential also stops ``write_output``; text holding no credential is still written; found_in takes
no quadratic time on a megabyte. Cases from an outside attack on the file door."""

from __future__ import annotations

import json

import pytest
from hangguard import hang_guard

from tfgpu.doors import paths, secrets
from tfgpu.errors import UsageError

PW = "SECRETPW42"
TOKEN = "SECRETTOKEN42"

# Credentials redact masks (the secret is absent from its output) that a WHATWG parser (rattler's
# ``url`` crate, browsers) or redact's own bare patterns read as a credential.
HIDDEN_BY_REDACT = {
    # A special scheme without slashes: WHATWG reads https:u:p@host as https://u:p@host.
    "scheme_without_slashes": f"https:user:{PW}@host.example/simple",
    # Nine slashes: _SCHEME stops at eight; WHATWG ignores any number after a special scheme.
    "nine_slashes_after_scheme": f"https://///////user:{PW}@host.example/simple",
    # Percent-encoded or fullwidth slashes: no slash at all to WHATWG, so the authority follows.
    "percent_encoded_slashes": f"https:%2F%2Fuser:{PW}@host.example/simple",
    "fullwidth_slashes": f"https:\uff0f\uff0fuser:{PW}@host.example/simple",
    # A tab inside a password: WHATWG strips every tab, so this is password SECRETPW42.
    "tab_inside_password": "https://user:SECRET\tPW42@host.example/simple",
    # A URL without its scheme: redact's _BARE_USERINFO masks it.
    "protocol_relative_url": f"--index-url //user:{PW}@host.example/simple",
    # A credential query pair cut off its URL: redact's _BARE_PAIR masks it.
    "query_pair_after_blank": f"https://host.example/simple ?token={PW}",
    "fragment_pair_after_blank": f"https://host.example/x #access_token={PW}",
    "protocol_relative_query": f"//host.example/simple?token={PW}",
}


@pytest.mark.parametrize("text", HIDDEN_BY_REDACT.values(), ids=HIDDEN_BY_REDACT.keys())
def test_found_in_finds_every_credential_redact_hides(text):
    assert PW not in secrets.redact(text, environ={})  # redact treats it as a credential
    assert secrets.found_in(text, environ={}) != []


def test_found_in_finds_a_conda_token_after_a_userinfo_holding_a_blank():
    # redact masks both the userinfo and the /t/<token>/ after it; found_in skips the userinfo (it
    # holds a blank) and so never looks at the token either.
    text = f"https://user:s ecret@conda.example/t/{TOKEN}/chan"
    assert TOKEN not in secrets.redact(text, environ={})
    assert secrets.found_in(text, environ={}) != []


@pytest.mark.parametrize(
    "text", [HIDDEN_BY_REDACT["nine_slashes_after_scheme"], HIDDEN_BY_REDACT["scheme_without_slashes"]]
)
def test_write_output_refuses_a_password_redact_hides(tmp_path, text):
    target = tmp_path / "out.txt"
    with pytest.raises(UsageError) as caught:
        paths.write_output(target, text + "\n")
    assert caught.value.code == "secret-in-output"
    assert not target.exists()


@pytest.mark.xfail(strict=True, reason="known gap: a userinfo is read at most 256 characters long")
def test_a_password_over_256_characters_holding_a_quote_is_hidden_and_refused():
    # The loose userinfo pattern stops at 256 characters; the URL pattern stops at the quote. The URL
    # door refuses any userinfo before such a URL reaches a file.
    text = "https://user:" + "s" * 300 + f"'{PW}@host.example/simple"
    assert PW not in secrets.redact(text, environ={})
    assert secrets.found_in(text, environ={}) != []


@pytest.mark.xfail(strict=True, reason="known gap: a user:password@host with no scheme is masked, not refused")
@pytest.mark.parametrize("text", [f"--trusted-host user:{PW}@host.example", f"http ://user:{PW}@host.example/simple"])
def test_a_userinfo_with_no_scheme_before_it_is_refused_in_a_file(text):
    # The display masks it (the bare pattern); in a file it is refused only after a scheme or `//`
    # (a bare one reads as an image's name and tag). The URL and host doors refuse both as an
    # option's value (`--insecure-host u:p@host`, `--channel "http ://…"`).
    assert PW not in secrets.redact(text, environ={})
    assert secrets.found_in(text, environ={}) != []


# Text with no credential that the tool plausibly writes: found_in must let it through.
NO_CREDENTIAL = {
    "requirement_from_git_over_ssh": "pkg @ git+ssh://git@github.com/org/repo.git@v1.0",
    "compact_json_homepage_then_email": json.dumps(
        {"homepage": "https://example.com", "author": "me@example.com"}, separators=(",", ":")
    ),
    "json_string_url_line_then_email_line": json.dumps({"d": "https://example.org\nme@example.com"}),
    "windows_path_with_npm_scope": "prefix: C:\\Users\\me\\node_modules\\@types\\node",
    "container_transport_with_digest": "docker://ubuntu:22.04@sha256:" + "a" * 64,
}


@pytest.mark.parametrize("text", NO_CREDENTIAL.values(), ids=NO_CREDENTIAL.keys())
def test_found_in_lets_text_without_a_credential_through(text):
    assert secrets.found_in(text, environ={}) == []


def test_a_url_then_an_address_after_a_comma_is_a_userinfo_as_parsers_read_it():
    # WHATWG and urllib read "example.com,me" as the user of example.com: refused, like any user@.
    text = "https://example.com,me@example.com"
    assert secrets.found_in(text, environ={}) == ["https://***@example.com"]


def test_redact_leaves_a_docker_image_digest_alone():
    line = "FROM nvidia/cuda:12.2.0-base-ubuntu22.04@sha256:" + "a" * 64
    assert secrets.redact(line, environ={}) == line


# Each of these made an earlier found_in quadratic (every loose userinfo re-read forms() of every
# URL reported before it): a megabyte did not end in 60 s, where it takes 0.2-1.0 s now. Inputs the
# attack found merely slow (linear, with a large constant) are not kept as tests, which they would
# pass either way: 1 MB of `("a" * 31 + ":" + "\\" * 8)` runs took 1.2-1.3 s in redact and found_in,
# 1 MB of `"_" * 255 + ":"` runs 1.8 s in redact.
QUADRATIC_BEFORE = {
    "userinfo_marks_in_one_url": ("a:/" + "@" * 50) * 20000,
    "many_credential_urls": " ".join(f"https://u:p{i}@h/" for i in range(60000)),
}


@pytest.mark.parametrize("text", QUADRATIC_BEFORE.values(), ids=QUADRATIC_BEFORE.keys())
def test_a_megabyte_of_userinfos_ends(text):
    with hang_guard(f"found_in over {len(text):,} characters"):
        assert secrets.found_in(text, environ={})


def test_the_refusal_of_a_megabyte_long_url_is_a_short_message(tmp_path):
    text = "https://u:p w@conda.example/" + "p" * 1_000_000 + f"/t/{PW}/chan\n"
    with pytest.raises(UsageError) as refused:
        paths.write_output(tmp_path / "out.txt", text)
    assert len(refused.value.message) < 1000 and PW not in refused.value.message
    assert list(tmp_path.iterdir()) == []
