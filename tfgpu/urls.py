"""The one transport rule for every URL the tool fetches from or hands to uv or rattler.

HTTPS, or plain HTTP to this machine's own loopback address (a local mirror, a test's server).
Over plain HTTP to anywhere else, whoever sits on the path can swap the bytes *and* the checksums
served beside them (a conda channel's repodata.json, an index page, a data overlay's URL), so a
hash check would only confirm the attacker's own numbers. ``file://`` URLs and paths are local
directories, checked by the caller.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit


def is_loopback(host: str | None) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host or "").is_loopback
    except ValueError:
        return False


def is_secure(url: str) -> bool:
    """``url`` may be fetched: https anywhere, http only to loopback."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:  # a malformed netloc (an unclosed "[")
        return False
    return parts.scheme == "https" or (parts.scheme == "http" and is_loopback(host))


def checked(url: str, what: str) -> str:
    """``url`` in canonical form if the transport rule allows it; else a ``UsageError("insecure-url")``
    naming ``what`` (where the URL came from: "--channel", "TFGPU_INDEX_URL", "the lock's index").

    The one door every URL passes before the tool or an engine uses it (see the module's docstring).
    """
    from tfgpu.errors import UsageError

    if not is_secure(url):
        raise UsageError("insecure-url", f"{what}: {url!r} is not an HTTPS URL (plain HTTP is allowed only to "
                         "this machine's loopback address).", ["Use the https:// address of the same server."])
    return url
