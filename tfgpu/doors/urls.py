"""The one door for URLs: every URL the tool fetches from, or hands to uv or rattler, passes
:func:`checked` first, whatever it came from (an option, an environment variable, a project file,
a lock, a bundle, a data overlay, an index's answer, a redirect).

**One reading.** Python's ``urlsplit`` and the engines (rattler and uv use the WHATWG reading, as
requests/urllib3 do for the authority) disagree on odd strings: ``http://10.9.9.9\\@127.0.0.1/``
is a URL to 127.0.0.1 for ``urlsplit`` and to 10.9.9.9 for the engines, which end the authority at
the backslash; they also drop tabs and newlines, percent-decode a host and read ``127.1`` or
``2130706433`` as an IPv4 address. So the door refuses (``bad-url``) rather than reinterprets
anything on which two readers could differ: a backslash, whitespace or a control character
anywhere, userinfo (``user:pw@``: credentials belong in ``~/.netrc`` or a keyring), an empty
host, a ``%`` or a non-IDNA character in a host, a host that is not a dotted quad but that an
engine would read as an IPv4 address, a bad port, and any scheme but ``https``, ``http`` and
(where the caller allows it) ``file``. What passes is handed on in canonical form: scheme and host
lowercased, the host in IDNA (ASCII), the default port dropped, non-ASCII in the path percent-encoded.

**One transport rule.** HTTPS anywhere; plain HTTP only to the hosts the user named with
``--insecure-host HOST`` (also ``TFGPU_INSECURE_HOSTS=a,b`` and a project file's
``insecure-hosts``), loopback included: over plain HTTP whoever sits on the path can swap the
bytes *and* the checksums served beside them (repodata.json, an index page, an overlay's URL), so a
hash check would only confirm the attacker's own numbers. Plain HTTP to any other host is
``insecure-url``. The named hosts are one module-level frozen set, set once by the command line
at start-up through :func:`trust` (and again when a project file adds its own); library code and
tests that call the door directly name theirs with :func:`trust` too. Nothing else changes it.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from urllib.parse import quote, unquote, urljoin, urlsplit

from tfgpu.doors import controls, secrets
from tfgpu.errors import UsageError
from tfgpu.records import record

ENVIRONMENT = "TFGPU_INSECURE_HOSTS"
"""Comma-separated hosts that plain HTTP may reach, as ``--insecure-host`` (read by the command line)."""

_trusted: frozenset[str] = frozenset()
# Patterns, compiled on first use (``re`` caches them): most runs never need them.
_SCHEME = r"([A-Za-z][A-Za-z0-9+.-]*)://"
_DEFAULT_PORTS = {"https": 443, "http": 80}
_LABEL = r"[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?"
# What an engine reads as an IPv4 part: decimal, 0x-hex or octal digits (WHATWG's IPv4 parser).
_NUMERIC = r"(0x[0-9a-f]*|[0-9]+)"
_SAFE = "".join(chr(c) for c in range(0x21, 0x7F))


@record
class Url:
    """A URL read once: its canonical text and the parts callers need (never re-split elsewhere)."""

    text: str
    scheme: str
    host: str
    path: str

    @property
    def loopback(self) -> bool:
        """The host is this machine (``localhost`` or a loopback address)."""
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    @property
    def filename(self) -> str:
        """The last path segment, percent-decoded: the file a download is saved as."""
        return unquote(self.path.rsplit("/", 1)[-1])


def trust(hosts) -> frozenset[str]:
    """Set the hosts plain HTTP may reach (each checked and canonical, as in a URL); returns them.
    A name that is not a host is ``bad-url``."""
    global _trusted
    _trusted = frozenset(host_name(str(name).strip(), "--insecure-host") for name in hosts if str(name).strip())
    return _trusted


def host_name(name: str, what: str) -> str:
    """``name`` as a host the door compares (lowercase, IDNA, an IP address in its plain form);
    ``bad-url`` naming ``what`` when it is not a host."""
    return _host(name, what, name)


def trusted() -> frozenset[str]:
    """The hosts plain HTTP may reach now (see the module's docstring)."""
    return _trusted


def checked(url: str, what: str, *, allow_file: bool = False) -> str:
    """``url`` in canonical form if it is well-formed and the transport rule allows it; else a
    ``UsageError``: ``bad-url`` (malformed, ambiguous, credentials) or ``insecure-url`` (plain
    HTTP to a host not named). ``what`` says where the URL came from ("--channel", "TFGPU_INDEX_URL",
    "the lock's index"); ``allow_file``: a ``file://`` URL (a local channel or wheel) is accepted."""
    return parse(url, what, allow_file=allow_file).text


def parse(url: str, what: str, *, allow_file: bool = False, transport: bool = True) -> Url:
    """:func:`checked`, returning the parts as well; ``transport=False``: only well-formed (a
    project file's channel, checked against the rule once the run's trusted hosts are known)."""
    if not isinstance(url, str):
        raise _bad(what, url, "it is not a string")
    # The set of controls is built only for a URL that is not ASCII (controls.has_control); the
    # first offending character says why, as the loop finds it.
    if "\\" in url or controls.has_control(url) or any(char.isspace() for char in url):
        for char in url:
            if char == "\\":
                raise _bad(what, url, "it holds a backslash, which engines read as the end of the host")
            if char.isspace() or controls.has_control(char):
                raise _bad(what, url, "it holds whitespace or a control character")
    match = re.match(_SCHEME, url)
    if not match:
        raise _bad(what, url, "it does not start with https:// (or http://)")
    scheme = match.group(1).lower()
    if scheme not in ("https", "http") and not (allow_file and scheme == "file"):
        raise _bad(
            what,
            url,
            f"{scheme}:// is not a scheme tfgpu-install fetches from (https, or http to a named "
            "host" + (", or file" if allow_file else "") + ")",
        )
    try:
        parts = urlsplit(url)
    except ValueError as error:  # an unclosed "["
        raise _bad(what, url, str(error)) from None
    netloc = parts.netloc
    if "@" in netloc:
        raise _bad(
            what, url, "it carries a user name or password; credentials belong in ~/.netrc or a keyring, never in a URL"
        )
    rest = quote(url[match.end() + len(netloc) :], safe=_SAFE)
    path = urlsplit("http://h" + rest).path
    if scheme == "file":
        if netloc not in ("", "localhost"):
            raise _bad(what, url, "a file:// URL names no host")
        return Url("file://" + rest, "file", "", path)
    end = netloc.find("]") + 1 if netloc.startswith("[") else 0
    raw, _, port = netloc[end:].partition(":") if not end else (netloc[:end], "", netloc[end:])
    if end and port and not port.startswith(":"):
        raise _bad(what, url, "text follows the IPv6 address")
    port = port.removeprefix(":") if end else port
    if port and not (port.isascii() and port.isdigit() and 0 < int(port) < 65536):
        raise _bad(what, url, f"{shown(port)!r} is not a port")
    host = _host(raw, what, url)
    authority = f"[{host}]" if ":" in host else host
    if port and int(port) != _DEFAULT_PORTS[scheme]:
        authority += f":{int(port)}"
    canonical = Url(f"{scheme}://{authority}{rest}", scheme, host, path)
    if transport and scheme == "http" and host not in _trusted:
        raise UsageError(
            "insecure-url",
            f"{what}: {shown(canonical.text)} is plain HTTP to {host}, a host not "
            "named as trusted: over plain HTTP anyone on the path can swap the files and the checksums "
            "beside them. Nothing was fetched.",
            [
                "Use the https:// address of the same server.",
                f"If {host} is yours and the path to it is trusted (a local mirror): --insecure-host {host} "
                f"(or {ENVIRONMENT}={host}).",
            ],
        )
    return canonical


def join(base: str, reference: str, what: str) -> str:
    """``reference`` (an index's link, a redirect's ``Location``) read against ``base``, through the door."""
    if not isinstance(reference, str):
        raise _bad(what, reference, "it is not a string")
    if "\\" in reference:  # before urljoin, which would read it its own way
        raise _bad(what, reference, "it holds a backslash, which engines read as the end of the host")
    return checked(urljoin(base, reference), what)


def redirect(source: str, location, what: str) -> str:
    """Where a redirect from ``source`` leads (``location``: its ``Location`` header), through the
    door: the one redirect rule of every HTTP request the tool makes itself. Besides the transport
    rule, an HTTPS request never continues over plain HTTP, even to a named host: the first hop's
    TLS would otherwise vouch for bytes that anyone on the second hop's path can swap."""
    target = join(source, location, what)
    if source.startswith("https:") and not target.startswith("https:"):
        raise UsageError(
            "insecure-url",
            f"{shown(source)} redirects to {shown(target)}: a request that started on HTTPS never "
            "continues without it. Nothing was fetched.",
            ["Point the URL at the final HTTPS address (for data: a TFGPU_DATA_DIR overlay)."],
        )
    return target


def is_local(url: str) -> bool:
    """``url`` is a ``file://`` URL or a path (not a URL of any other scheme)."""
    match = re.match(_SCHEME, url)
    return match is None or match.group(1).lower() == "file"


def local_path(url: str) -> Path:
    """The path a ``file://`` URL names."""
    return Path(unquote(urlsplit(url).path))


def filename(url: str) -> str:
    """The last path segment of ``url``, percent-decoded (a download's file name)."""
    return unquote(urlsplit(url).path.rsplit("/", 1)[-1])


def path_parts(url: str) -> list[str]:
    """The percent-decoded path segments of ``url``."""
    return unquote(path_of(url)).rstrip("/").split("/")


def path_of(url: str) -> str:
    """The path of ``url`` as it is written (percent-encoded): for names derived from it, not for fetching."""
    return urlsplit(url).path


def _host(raw: str, what: str, url) -> str:
    if "%" in raw:
        raise _bad(what, url, "its host is percent-encoded (or has an IPv6 zone), which engines read differently")
    if (raw.startswith("[") and raw.endswith("]")) or ":" in raw:
        try:
            return str(ipaddress.IPv6Address(raw.removeprefix("[").removesuffix("]")))
        except ValueError:
            raise _bad(what, url, f"{shown(raw)} is not an IPv6 address") from None
    if not raw:
        raise _bad(what, url, "it names no host")
    try:
        host = raw.encode("idna").decode("ascii").lower() if not raw.isascii() else raw.lower()
    except UnicodeError:
        raise _bad(what, url, f"its host {shown(raw)!r} is not a valid international domain name") from None
    host = host.removesuffix(".")
    labels = host.split(".")
    if re.fullmatch(_NUMERIC, labels[-1]):
        try:  # the last label is a number: engines read the host as IPv4, so it must be a plain dotted quad
            return str(ipaddress.IPv4Address(host))
        except ValueError:
            raise _bad(
                what, url, f"its host {shown(raw)!r} reads as an IPv4 address in other tools, but not as a dotted quad"
            ) from None
    if not all(re.fullmatch(_LABEL, label) for label in labels) or len(host) > 253:
        raise _bad(what, url, f"its host {shown(raw)!r} is not a host name")
    if any(len(label) > 63 for label in labels):  # socket's idna codec refuses it later, as a fetch that failed
        raise _bad(what, url, "a label of its host is longer than 63 characters")
    return host


def shown(url, limit: int = 200) -> str:
    """``url`` as a message shows it: its credential masked (``tfgpu.doors.secrets``: a message reaches
    CI logs), controls escaped (a backslash stays one backslash), at most ``limit`` characters,
    with how much was cut said in words (a hostile URL can be a megabyte)."""
    if isinstance(url, str):
        url = secrets.redact(url)
    # Not printable (spaces but " ") or one of tfgpu.doors.controls: a variation selector or a Hangul
    # filler is "printable" to Python, and shows as nothing.
    hidden = controls.CHARACTERS if isinstance(url, str) and not url.isascii() else ()  # ASCII: isprintable says
    text = (
        "".join(c if c.isprintable() and c not in hidden else ascii(c)[1:-1] for c in url)
        if isinstance(url, str)
        else repr(url)
    )
    if len(text) <= limit:
        return text
    return f"{text[:limit]} ({len(text):,} characters; the first {limit} shown)"


def _bad(what: str, url, reason: str) -> UsageError:
    return UsageError(
        "bad-url",
        f"{what}: '{shown(url)}' is refused: {reason}. Nothing was fetched.",
        ["Give the plain https:// address (scheme, host, optional port, path), as the server publishes it."],
    )
