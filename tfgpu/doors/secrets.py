"""The one door for secrets: every URL or text the tool records (a lock, a bundle, an env's
marker), writes (every export), prints or logs passes through here, and no credential comes out.

**The forms known.** In a URL: an anaconda.org-style access token as a path segment ``t`` and the
token after it (``https://host/t/<token>/channel``: conda, mamba and rattler all send it so);
userinfo (``https://user:password@host/``, ``https://token@host/``); a query key that carries a
token (``?token=``, ``access_token=``, ``api_key=``, ``password=`` ...). Outside URLs: the values
of the engines' own credential variables (``CONDA_TOKEN``, ``ANACONDA_API_TOKEN``,
``UV_INDEX_<NAME>_PASSWORD``/``_USERNAME`` and any ``*_TOKEN``/``*_PASSWORD``/``*_SECRET``
variable set in this process), should one turn up in text. The credential files (``~/.netrc``,
``RATTLER_AUTH_FILE``, conda's token store, a keyring) are never read by the tool at all: the
engines read them themselves.

**What each writer does.**

* A conda lock (``lock --mode conda``, a bundle's lock) records every channel and package URL
  *without* its credential (:func:`strip`) and says in its header where the credential comes from
  when the lock is installed: the engine's own authentication. tfgpu-install's embedded engine
  (rattler) reads ``RATTLER_AUTH_FILE`` (JSON ``{"host": {"CondaToken": "..."}}``),
  ``~/.rattler/credentials.json`` or the keyring and puts ``/t/<token>/`` back into every request;
  conda reads ``conda token set``/``CONDA_TOKEN``; ``conda-lock install`` takes ``--auth``. This is
  proven here with a real channel served at ``/t/<token>/`` over loopback HTTP
  (``tests/test_secrets_conda.py``): the lock written from the token's URL holds no token, and
  ``create --from-lock`` of it installs with the token in ``RATTLER_AUTH_FILE`` only.
* An env's own records (its marker, ``tfgpu/conda-records.json``) keep every URL without its
  credential (:func:`stripped`), as a lock does.
* A lock that holds a credential anyway (written by hand, by another version, re-signed) is
  refused by its reader (``secret-in-lock``, exit 2) before anything installs, exports, bundles
  or checks from it: whatever it is copied into would carry the credential on.
* Every file a user asked for (``-o``: a lock, an export, a bundle's files) is written by
  ``tfgpu.doors.paths.write_output``, which refuses (``secret-in-output``, exit 2, nothing written) text
  holding a credential: the last check, whatever a renderer was given.
* ``script --channel`` with a credential is refused (``bad-channel``): an export is read and copied
  by others, and the export's engine (micromamba on the target) reads its own authentication.
* What is printed (messages, ``--json`` documents, notes) and logged (the run's log) is
  :func:`redact`-ed: the credential becomes ``***``, the rest of the URL stays readable.
"""

from __future__ import annotations

import json
import os
import re

from tfgpu.errors import UsageError

MASK = "***"
"""What a credential is shown as."""

QUERY_KEYS = frozenset(
    {"token", "access_token", "auth_token", "api_key", "apikey", "private_token", "password", "secret"}
)
"""Query keys whose value is a credential (compared lower-case)."""

# The patterns are kept as text and compiled on first use (``re``'s own cache): compiling them all
# cost every command that imports this door (``plan`` does, to redact its output) 9.7M instructions,
# a quarter of a bare ``python -c pass``.

# Any other key that names a credential, as servers and signed-URL schemes spell them: NVIDIA's
# download links carry ``?t=<jwt>``, S3 and CDNs ``X-Amz-Signature``/``sig``, others ``auth``, ``key``,
# ``pwd``, ``client_secret``, ``id_token``. A key that merely looks like one is masked too: showing
# ``***`` for a harmless value costs less than printing a password the list did not know.
_CREDENTIAL_KEY = (
    r"t|sig|key|auth|pwd|passwd|pass|jwt|.*(token|secret|passw|api[-_]?key|credential|signature|auth(?!or)).*"
)

# A URL inside text: a scheme, then everything up to whitespace, a quote or a bracket. The slashes
# after the scheme are read as a browser and WHATWG-style parsers read them: ``http:/u:p@host`` and
# ``http:\\u:p@host`` are ``http://u:p@host`` to them, so their credentials are credentials here too.
# A scheme is short; bounding it keeps every search linear in a megabyte of text without one.
_SCHEME = r"[A-Za-z][A-Za-z0-9+.-]{0,31}:[/\\]{1,8}"
_SCHEME_GROUP = "(" + _SCHEME + ")"
_URL = _SCHEME + r"[^\s'\"<>`]+"
_SCHEME_FIRST = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")  # _SCHEME's first class
_SCHEME_CHARACTERS = _SCHEME_FIRST | frozenset("0123456789+.-")  # and the class after it
# Names of variables whose value is a credential: the engines' own and the common conventions.
_VARIABLE = (
    r"(CONDA_TOKEN|ANACONDA_API_TOKEN|ANACONDA_TOKEN|UV_INDEX_.+_(USERNAME|PASSWORD)"
    r"|.*_(TOKEN|PASSWORD|PASSWD|SECRET|API_KEY|APIKEY|AUTH))"
)  # matched with re.IGNORECASE
# ``user:password@host`` written without a scheme (``--insecure-host u:p@mirror``, a channel
# ``u:p@host/chan``): refused as a host or a channel, but the password is the user's all the same.
# After a slash too: ``http ://u:p@host`` or ``//u:p@host`` (no scheme the URL pattern knows) is
# quoted whole by the message refusing it. An image and its digest (``nvidia/cuda:12.5@sha256:…``
# in a Dockerfile) is no userinfo; nor does a start follow a character a userinfo holds, so a
# megabyte of them is not tried at every place.
_BARE_USERINFO = (
    r"(?<![A-Za-z0-9+.\-:@*_%~!$])[^\s'\"<>`@/\\:]{1,256}:[^\s'\"<>`@/]{1,256}@(?=[A-Za-z0-9\[])(?!sha(?:256|384|512):)"
)
# The userinfo of a URL whose password holds a character that ends a URL in text (a quote, a space,
# ``<``): the URL pattern stops there and would leave the rest of the password, or all of it, shown.
# Everything from the scheme's slashes to the last ``@`` before the path is the userinfo, a
# backslash included: Python's urllib (pip's) reads one as the password's, and text that shows a
# character escaped (``\t``, a ``--json`` document's ``\u00e9`` and ``\"``) writes one there.
# The userinfo may not begin with a slash: the scheme's run of slashes is all of it, so a start is
# tried once per slash count that ends the run, not once per count times 256 characters.
_LOOSE_USERINFO = _SCHEME_GROUP + r"(?![/\\])[^/?#\r\n]{0,256}@"
# A special scheme as WHATWG parsers (rattler's ``url`` crate) read it: any run of slashes after it,
# or none, is skipped, and an ``@`` before the next ``/\?#`` ends a userinfo: ``https:u:p@host``,
# ``https:%2F%2Fu:p@host`` and a tenth slash all send ``p``. (The file door's: redact masks them too.)
_SPECIAL_USERINFO = r"(?<![A-Za-z0-9+.\-])((?i:https?|wss?|ftp):[/\\]*)[^/\\?#\s'\"<>`]{1,256}@"
# A URL without its scheme (``//u:p@host/simple``, an ``--index-url`` some tools accept).
_SLASHED_USERINFO = r"(?<![/\\:])(//)[^/\\?#\s'\"<>`@:]{1,256}:[^/\\?#\s'\"<>`]{0,256}@"
# A query pair cut off its URL (``… /simple ?token=<t>`` in a child's or a user's log): masked
# the same as in a URL when its key names a credential.
_BARE_PAIR = r"([?&;#])([A-Za-z0-9_.%+-]+=)([^\s&;#'\"<>`]+)"
_SHORTEST = 8
"""A variable's value shorter than this is not looked for in text: a short value (``user``, ``enabled``)
would mask, or refuse, ordinary words; a real token or password is longer."""


def _split(url: str) -> tuple[str, str, str, str, str]:
    """(scheme://, authority, path, ?query, #fragment) as written, without decoding anything. A
    backslash ends the authority as a slash does (``http:\\\\host\\path``), as WHATWG parsers read it."""
    head = re.match(_SCHEME, url)
    scheme, rest = (url[: head.end()], url[head.end() :]) if head else ("", url)
    end = len(rest)
    for mark in "/?#\\":
        found = rest.find(mark)
        if found != -1:
            end = min(end, found)
    authority, rest = rest[:end], rest[end:]
    rest, hash_mark, fragment = rest.partition("#")
    path, question, query = rest.partition("?")
    return scheme, authority, path, question + query, hash_mark + fragment


def _decoded(text: str) -> str:
    """``text`` percent-decoded, as a server reads a path segment or a query key (``%74`` is ``t``)."""
    if "%" not in text:  # nothing encoded: no pattern compiled for every path segment of a plain URL
        return text
    return re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), text)


def _is_credential_key(part: str) -> bool:
    """``part`` (``key=value`` of a query) has a credential's key, read as a server reads it
    (percent-decoded: ``%74oken`` is ``token``). A value holding ``?key=`` (``?a=1?token=<t>``) is
    read as a server that splits on every ``?`` reads it: the whole value is then the credential's."""
    for piece in part.split("?"):
        key = _decoded(piece.split("=", 1)[0]).strip().lower()
        if key in QUERY_KEYS or re.fullmatch(_CREDENTIAL_KEY, key) is not None:
            return True
    return False


_SEPARATOR = r"/|\\+"
"""What ends a path segment: a slash, or a backslash, which WHATWG parsers read as one
(``http://host\\t\\<token>\\chan`` is ``http://host/t/<token>/chan`` to them). A run of
backslashes is one: a ``--json`` document, which is redacted as written, doubles each."""


def _token_index(segments: list[str]) -> int | None:
    """The index of the first ``t`` segment of an anaconda.org token (``/t/<token>``), or None. The
    segment is read as a server reads it, percent-decoded and in either case (``/%74/``, ``/T/``)."""
    for index, segment in enumerate(segments[1:-1], start=1):
        if _decoded(segment).lower() == "t" and segments[index + 1]:
            return index
    return None


_SSH_SCHEMES = ("ssh", "git+ssh", "svn+ssh", "hg+ssh", "sftp")
_DIGEST_HOST = r"sha(?:256|384|512):[0-9a-fA-F]{32,}"
# Container image transports (skopeo's, podman's): ``docker://name:tag@sha256:…`` names an image.
_IMAGE_SCHEMES = ("docker", "oci", "docker-archive", "oci-archive", "docker-daemon", "containers-storage")


def _named_not_secret(scheme: str, authority: str) -> bool:
    """An ``@`` in ``authority`` that names no secret: an SSH user alone (``git+ssh://git@github.com``:
    SSH authenticates by key, and ``git`` is every user's name there; ``user:password@`` still
    counts), or an image and its digest under a container transport (``docker://ubuntu:22.04@sha256:…``;
    ``git+https://u:p@sha256:…`` is a password all the same)."""
    userinfo, _, host = authority.rpartition("@")
    if scheme in _SSH_SCHEMES:
        return ":" not in userinfo
    return scheme in _IMAGE_SCHEMES and re.fullmatch(_DIGEST_HOST, host) is not None


def forms(url: str) -> list[str]:
    """The credential forms ``url`` holds: ``"conda-token"`` (``/t/<token>/``), ``"userinfo"``
    (``user:password@``), ``"query"`` (``?token=`` and the like); empty when it holds none."""
    if not re.match(_SCHEME, url):
        return []
    _, authority, path, query, fragment = _split(url)
    found = []
    if _token_index(re.split(_SEPARATOR, path)) is not None:
        found.append("conda-token")
    if "@" in authority and not _named_not_secret(url[: url.index(":")].lower(), authority):
        found.append("userinfo")
    # The fragment too: an OAuth-style ``#access_token=`` is a credential wherever it is written.
    # An empty query or fragment holds no key (an empty key is no credential's): not split at all.
    given = [part for part in (query[1:], fragment[1:]) if part]
    if any(_is_credential_key(pair) for part in given for pair in re.split(r"[&;]", part)):
        found.append("query")
    return found


def strip(url: str) -> str:
    """``url`` without its credential: ``/t/<token>`` removed from the path, the userinfo and the
    credential query keys dropped. What remains is the URL the engine's own authentication adds
    the credential to (rattler and conda insert ``/t/<token>/`` after the host themselves)."""
    return _rewrite(url, None)


def masked(url: str) -> str:
    """``url`` with its credential shown as ``***`` (for messages and logs)."""
    return _rewrite(url, MASK)


def with_credential(url: str, given) -> str:
    """``url`` (recorded without a credential) as fetched from a channel of ``given`` (the channels
    as the user gave them, credential included, in this run only): the given channel's URL put back
    in front, so a bundle downloads what the lock records from the channel the user named."""
    for channel in given:
        bare = strip(channel).rstrip("/") + "/"
        if bare != channel.rstrip("/") + "/" and url.startswith(bare):
            return channel.rstrip("/") + "/" + url[len(bare) :]
    return url


def _rewrite(url: str, mask: str | None) -> str:
    if not forms(url):
        return url
    scheme, authority, path, query, fragment = _split(url)
    if "@" in authority:
        host = authority.rsplit("@", 1)[1]
        authority = f"{mask}@{host}" if mask else host
    path = _without_tokens(path, mask)
    return scheme + authority + path + _without_keys(query, "?", mask) + _without_keys(fragment, "#", mask)


def _without_tokens(path: str, mask: str | None) -> str:
    """``path`` with every token segment (``/t/<a>/t/<b>/`` holds two) masked, or dropped with its
    ``t`` (``mask`` None), each separator kept as written. One walk over the segments: a path of
    thousands of ``/t/<x>`` pairs costs what its length does."""
    pieces = re.split(f"({_SEPARATOR})", path)
    words, separators = pieces[0::2], pieces[1::2]
    kept, index = [words[0]], 1
    while index < len(words):
        if index < len(words) - 1 and _decoded(words[index]).lower() == "t" and words[index + 1]:
            if mask:
                kept += [separators[index - 1], words[index], separators[index], mask]
            index += 2
            continue
        kept += [separators[index - 1], words[index]]
        index += 1
    return "".join(kept)


def _without_keys(part: str, mark: str, mask: str | None) -> str:
    """A query or fragment (``mark`` and its pairs) with every credential key's value masked, or the
    pair dropped (``mask`` None)."""
    if not part:
        return part
    # Pairs with the separator before each ("&" or ";", as servers read either), kept as written.
    pairs = re.findall(r"(^|[&;])([^&;]*)", part[1:])
    kept: list[str] = []
    for separator, pair in pairs:
        if _is_credential_key(pair):
            if not mask:
                continue
            pair = pair.split("=", 1)[0] + "=" + mask
        kept.append((separator if kept else "") + pair)
    return (mark + "".join(kept)) if kept else ""


_VARIABLE_WORDS = ("TOKEN", "USERNAME", "PASSWORD", "PASSWD", "SECRET", "API_KEY", "APIKEY", "AUTH")
"""A word every name :data:`_VARIABLE` matches holds (each of its alternatives ends in one)."""


def _is_credential_variable(name: str) -> bool:
    """Whether ``name`` is a credential variable's (:data:`_VARIABLE`, any case). An ASCII name
    without any of :data:`_VARIABLE_WORDS` cannot match, and is not run through the pattern: the
    pattern's compile and its backtracking over every variable of the environment cost each command
    that prints (``plan --json`` redacts its output) 2M instructions, a twentieth of a bare start.
    A name with other characters is always matched, as ``re`` folds their case (``ſ`` is ``s``)."""
    if name.isascii() and not any(word in name.upper() for word in _VARIABLE_WORDS):
        return False
    return re.fullmatch(_VARIABLE, name, re.IGNORECASE) is not None


def _variable_values(environ=None) -> list[str]:
    environ = os.environ if environ is None else environ
    return sorted(
        {value for name, value in environ.items() if len(value) >= _SHORTEST and _is_credential_variable(name)},
        key=len,
        reverse=True,
    )


def stripped(text: str) -> str:
    """``text`` (a record the tool keeps, such as an env's marker) with every URL in it without its
    credential (:func:`strip`): the engine's own authentication supplies it when the URL is used."""
    return _each_url(text, lambda match: strip(match.group(0)))


def _each_url(text: str, rewrite) -> str:
    """``re.sub(_URL, rewrite, text)``, with the pattern tried only where a URL can start: within a
    scheme's length (:data:`_SCHEME`: at most 32 characters, none of them ``:``) before a ``:/`` or
    ``:\\``. A URL's scheme ends at the first ``:`` after its start, and that ``:`` is followed by a
    slash, so the leftmost URL from any point starts in the window before the first such ``:``
    whose window holds one, which this tries start by start, as the whole-text search would. Run over
    the whole text, the pattern tries a scheme at every letter: 3.2M instructions (callgrind) for a
    plan's 8 kB JSON with two URLs, which every ``--json`` document is redacted through, and 32M
    for a pip lock and its pylock (every hex digit of 800 hashes a letter to try), which every
    written file is checked through (:func:`found_in`)."""
    pattern = re.compile(_URL)  # re's own cache: compiled once
    found, start, look = [], 0, 0
    marks = {":/": text.find(":/"), ":\\": text.find(":\\")}  # each mark's next place at or after `look`
    while True:
        for mark, at in marks.items():
            if at != -1 and at < look:
                marks[mark] = text.find(mark, look)
        colon = min((at for at in marks.values() if at != -1), default=-1)
        if colon == -1:
            break
        # Only a start inside the run of scheme characters that ends at the colon can reach it
        # (any other stops at a character no scheme holds), so the tries begin at that run's start.
        first = colon
        while first > max(start, colon - 32) and text[first - 1] in _SCHEME_CHARACTERS:
            first -= 1
        match = next(
            (
                m
                for at in range(first, colon)
                if text[at] in _SCHEME_FIRST and (m := pattern.match(text, at)) is not None
            ),
            None,
        )
        if match is None:
            look = colon + 1
            continue
        found += [text[start : match.start()], rewrite(match)]
        start = look = match.end()
    found.append(text[start:])
    return "".join(found)


def redact(text: str, environ=None) -> str:
    """``text`` for display or a log: every URL's credential shown as ``***`` and the value of every
    credential variable set (``CONDA_TOKEN``, ``UV_INDEX_*_PASSWORD`` ...) replaced by ``***``."""
    if not isinstance(text, str):
        return text
    # Each pattern runs only where the text holds a character it cannot match without (a step's
    # output is judged afresh before the next): a plan's JSON, with no ``@`` and no query, is not
    # scanned by the userinfo patterns (compiling them and backtracking over its 8 kB cost 6.7M
    # instructions, as much as the rest of its redaction).
    if "@" in text:
        text = re.sub(_LOOSE_USERINFO, lambda match: match.group(1) + MASK + "@", text)
    if ":/" in text or ":\\" in text:
        text = _each_url(text, lambda match: masked(match.group(0)))
    if "@" in text:
        text = re.sub(_BARE_USERINFO, MASK + "@", text)
    if "=" in text and ("?" in text or "&" in text or ";" in text or "#" in text):
        text = re.sub(
            _BARE_PAIR,
            lambda m: m.group(1) + m.group(2) + (MASK if _is_credential_key(m.group(2) + m.group(3)) else m.group(3)),
            text,
        )
    for value in _variable_values(environ):
        text = text.replace(value, MASK)
    return text


def redacted_json(document) -> str:
    """``document`` as the indented JSON text ``--json`` prints, every string in it :func:`redact`-ed
    before it is escaped (a password's ``é`` or ``"`` is ``\\u00e9`` or ``\\"`` in the text, which no
    pattern reads as a URL's), and the text redacted again as a whole."""

    def each(value):
        if isinstance(value, str):
            # Only a string the encoder escapes can hide a credential from the text's redaction.
            escaped = not (value.isascii() and value.isprintable() and '"' not in value and "\\" not in value)
            return redact(value) if escaped else value
        if isinstance(value, dict):
            return {each(key) if isinstance(key, str) else key: each(field) for key, field in value.items()}
        if isinstance(value, (list, tuple)):
            return [each(field) for field in value]
        return value

    text = json.dumps(document, indent=2)
    # A document the encoder escaped nothing in reads in the text as in its strings: redacted once,
    # as a whole (a plan's, a matrix's: a string-by-string pass doubled what `plan --json` costs).
    if "\\" in text:
        text = json.dumps(each(document), indent=2)
    return redact(text)


def found_in(text: str, environ=None) -> list[str]:
    """What in ``text`` is a credential, each shown masked: the URLs with one (as :func:`masked`
    shows them), the userinfo and query pairs the display masks outside a URL it reads whole
    (:func:`_outside_urls`), and ``the value of NAME`` for a credential variable whose value is there."""
    urls: list[tuple[int, int, str]] = []

    def kept(match) -> str:
        if forms(match.group(0)):
            urls.append((match.start(), match.end(), match.group(0)))
        return ""

    _each_url(text, kept)  # the scan redact uses: see there
    found = [masked(url) for _, _, url in urls]
    seen = set(found)
    for shown in _outside_urls(text, urls):
        if shown not in seen:  # each once: a file may hold thousands
            seen.add(shown)
            found.append(shown)
    environ = os.environ if environ is None else environ
    for name, value in sorted(environ.items()):
        if _is_credential_variable(name) and len(value) >= _SHORTEST and value in text:
            found.append(f"the value of {name}")
    return found


def _outside_urls(text: str, urls: list[tuple[int, int, str]]) -> list[str]:
    """The credentials in ``text`` that no URL of ``urls`` (``(start, end, url)`` with a credential, in
    order) holds: what the display masks by its other patterns, which a file may not hold either.

    * A userinfo the URL pattern stops inside (a password holding a quote, a backslash, ``<``; a
      token user holding a backslash, which urllib reads whole). Not one with a space in its password
      (``https://pypi.org and mail me@example.com`` is prose; the URL door refuses a blank anyway), but
      a ``/t/<token>/`` after its ``@`` is; nor a compact JSON "user" (``"https://x.org","a":"me@x"``),
      a drive's (``C:\\…;D:\\…@types``), a file URL's. A tab is no blank (WHATWG drops tabs).
    * A special scheme's userinfo as WHATWG reads it, and one of a URL without its scheme (``//``).
    * A query or fragment pair naming a credential, cut off its URL.

    Linear in ``text``: the text after a loose userinfo is read once however many userinfos end in it."""

    def inside(at: int, walked: list[int]) -> bool:  # in one of `urls`? asked in order: walked once a pass
        while walked[0] < len(urls) and urls[walked[0]][1] <= at:
            walked[0] += 1
        return walked[0] < len(urls) and urls[walked[0]][0] <= at

    found: list[str] = []
    if "@" in text:
        read_until, walked = 0, [0]
        for match in re.finditer(_LOOSE_USERINFO, text):
            if inside(match.start(), walked):
                continue
            scheme, userinfo = match.group(1), match.group(0)[len(match.group(1)) : -1]
            name = scheme[: scheme.index(":")].lower()
            if len(name) == 1 or name == "file":  # a drive (C:\…;D:\…\@types), a path: no userinfo
                continue
            user, colon, password = userinfo.partition(":")
            cut = re.compile(r"[/\\?#\s'\"<>`]").search(text, match.end(), match.end() + 256)
            host = text[match.end() : cut.start() if cut else match.end() + 256]
            named = _named_not_secret(name, f"{userinfo}@{host}")
            json_like = any(mark in user for mark in ('",', '":', "',", "':"))  # "https://x.org","a":"me@x"
            # A token user counts where urllib reads it whole (``https://CORP\TOKEN@host``), not after
            # an escaped line break or tab (``"https://x.org\nme@x.org"`` in JSON text).
            special = name in ("http", "https", "ws", "wss", "ftp")
            token_user = not colon and special and re.search(r"\\(?![nrt])", userinfo) is not None
            if (colon or token_user) and not named and not json_like and " " not in password:
                found.append(scheme + MASK + "@")
            if match.end() >= read_until:  # the URL after the @, to its first blank: a token in its path
                blank = re.compile(r"[\s'\"<>`]").search(text, match.end())
                read_until = blank.start() if blank else len(text)
                rest = scheme + text[match.end() : read_until]
                if any(form != "userinfo" for form in forms(rest)):
                    found.append(masked(rest))
        for pattern in (_SPECIAL_USERINFO, _SLASHED_USERINFO):
            walked = [0]
            for match in re.finditer(pattern, text):
                if not inside(match.start(1), walked):
                    found.append(match.group(1) + MASK + "@")
    if "=" in text and ("?" in text or "&" in text or ";" in text or "#" in text):
        walked = [0]
        for match in re.finditer(_BARE_PAIR, text):
            if not inside(match.start(), walked) and _is_credential_key(match.group(2) + match.group(3)):
                found.append(match.group(1) + match.group(2) + MASK)
    return found


WHERE_FROM = (
    "the engine's own authentication supplies it at install time: tfgpu-install (rattler) reads "
    'RATTLER_AUTH_FILE (JSON {"HOST": {"CondaToken": "TOKEN"}}), ~/.rattler/credentials.json or the '
    "keyring; conda reads `conda token set` (or CONDA_TOKEN); `conda-lock install` takes --auth"
)
"""Where a credential a lock does not record comes from when it is installed."""


def refuse_in(text: str, where: str, code: str = "secret-in-output") -> None:
    """Raise ``code`` (exit 2) when ``text``, bound for ``where``, holds a credential."""
    found = found_in(text)
    if found:
        raise UsageError(
            code,
            f"{where} would hold a credential ({'; '.join(shown[:200] for shown in found[:3])}); nothing "
            "was written there.",
            [
                "Give the URL without its credential (no /t/<token>/, user:password@ or ?token=) and let "
                f"{WHERE_FROM}.",
            ],
        )


def credential_hint(text) -> list[str]:
    """A way forward when a channel refused for want of a credential (HTTP 401/403 in ``text``): a
    lock records a channel without its token, so it comes from the engine's own authentication."""
    if not any(f"{status} " in str(text) for status in ("401", "403")):
        return []
    return [f"The channel asks for a credential: {WHERE_FROM}."]
