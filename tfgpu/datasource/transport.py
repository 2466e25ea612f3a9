"""The tool's one HTTP transport: every request tfgpu-install makes itself (ranged and JSON reads of
``update-data`` and remote wheels, streamed vendor downloads, the preflight of a plain-HTTP URL
before an engine gets it) goes through :func:`request`; no other module imports an HTTP library
(held by tests/test_layering.py).

- **One redirect rule.** Redirects are followed here, by hand, never by the library: each target
  passes :func:`tfgpu.doors.urls.redirect` (the URL door, and HTTPS never continuing over plain HTTP)
  before a connection is opened to it, at most :data:`MAX_REDIRECTS` times.
- **One deadline model.** A ``deadline`` (a ``time.monotonic()`` value) bounds one request, its
  redirects and the reading of its body: a server that sends a byte every few seconds never trips a
  per-read timeout, so a watchdog shuts the request's sockets down when the deadline passes, and
  the read ends with a :class:`Failure` whose ``expired`` is set. Connecting has its own
  :data:`CONNECT_TIMEOUT`; every read has the request's ``timeout``.
- **One retry policy.** :class:`Retry`: ``backoff * 2**n`` seconds before retry n+1, none that would
  end past the caller's deadline; :func:`retryable` says which answers are worth another try.
- **Proxies and TLS from the environment**, as users set them for pip and requests: ``HTTPS_PROXY``
  (else an http(s) ``ALL_PROXY``) and ``NO_PROXY`` for HTTPS; plain HTTP never goes through a proxy
  (one could answer for the named host in clear text). Certificates: ``REQUESTS_CA_BUNDLE`` or
  ``CURL_CA_BUNDLE`` when set (as requests reads them), else OpenSSL's defaults, which read
  ``SSL_CERT_FILE``/``SSL_CERT_DIR``, else certifi's bundle where Python knows no store at all.

urllib, not requests: it is what the standard library already loads, and a command that never
downloads should not pay for requests' import (about three times urllib.request's, measured).
Messages name URLs only through :func:`tfgpu.doors.urls.shown` (the secrets door masks credentials).
"""

from __future__ import annotations

import http.client
import ipaddress
import os
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request

from tfgpu.doors import controls, untrusted, urls

__all__ = ["Failure", "Response", "Retry", "preflight", "request", "retryable", "sleep"]

USER_AGENT = "tfgpu-install (Python urllib)"
MAX_REDIRECTS = 5
REDIRECTS = frozenset({301, 302, 303, 307, 308})
CONNECT_TIMEOUT = 15.0
"""Seconds to connect (TLS handshake and proxy tunnel included); reads have the request's timeout."""
CERTIFICATE_VARIABLES = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE")
"""The variables that name a certificate file OpenSSL reads whole when the context is made, the
first one set of the first two in place of the third (as requests reads them)."""


class Failure(Exception):
    """No complete answer: the name did not resolve, the connection failed or broke off, a read
    timed out, the deadline passed, TLS refused the server. ``problem`` names no URL (the caller
    does, through the secrets door); ``retry`` is False where trying again cannot help."""

    def __init__(self, problem: str, *, retry: bool = True, expired: bool = False, unresolved: str = "") -> None:
        super().__init__(problem)
        self.problem = problem
        self.retry = retry
        self.expired = expired
        """The request's deadline passed."""
        self.unresolved = unresolved
        """The host whose name did not resolve (no network, or no DNS), else ""."""


def retryable(status: int) -> bool:
    """An answer worth another try: a timeout, too many requests, or a server error."""
    return status in (408, 429) or status >= 500


def sleep(seconds: float) -> None:
    """Backoff pause (a module function so tests can make it instant)."""
    time.sleep(seconds)


class Retry:
    """``retries`` more attempts after the first, ``backoff * 2**n`` seconds before retry n+1, and
    none whose pause would end past ``deadline`` (a ``time.monotonic()`` value, or None)."""

    def __init__(self, retries: int, backoff: float, deadline: float | None = None) -> None:
        self.retries, self.backoff, self.deadline = retries, backoff, deadline

    def attempts(self) -> range:
        return range(self.retries + 1)

    def last(self, attempt: int) -> bool:
        return attempt >= self.retries

    def pause(self, attempt: int, announce=None) -> bool:
        """Sleep before the attempt after ``attempt`` (``announce(delay)`` first); False, without
        sleeping, when the pause would end past the deadline."""
        delay = self.backoff * 2**attempt
        if self.deadline is not None and time.monotonic() + delay >= self.deadline:
            return False
        if announce is not None:
            announce(delay)
        sleep(delay)
        return True


class Response:
    """An answer, any status: its body is read through :meth:`read`/:meth:`read1`, which end in a
    :class:`Failure` when the connection breaks or the deadline passes. Close it (``with``)."""

    def __init__(self, url: str, raw: http.client.HTTPResponse, watch: _Watchdog) -> None:
        self.url = url
        """The URL that answered (after redirects)."""
        self.status: int = raw.status
        self.reason: str = _said(raw.reason)
        """The status line's reason phrase, as a message may show it (the server wrote it)."""
        self.headers = raw.headers
        self._raw, self._watch = raw, watch

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes (all when negative), fewer only at the end of the body."""
        return self._read(self._raw.read, None if size < 0 else size)

    def read1(self, size: int) -> bytes:
        """What has arrived, up to ``size`` bytes (b"" at the end of the body)."""
        return self._read(self._raw.read1, size)

    def _read(self, reader, size) -> bytes:
        try:
            data = reader(size)
        except (OSError, http.client.HTTPException) as error:
            self._watch.check()
            raise Failure(_problem(error)) from None
        self._watch.check()
        return data

    def close(self) -> None:
        self._watch.stop()
        self._raw.close()

    def __enter__(self) -> Response:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def request(
    url: str,
    what: str,
    *,
    headers: dict[str, str] | None = None,
    timeout: float = 60.0,
    deadline: float | None = None,
    redirects: int = MAX_REDIRECTS,
) -> Response:
    """GET ``url`` (checked by the URL door as ``what``) and return its answer, redirects followed
    up to ``redirects`` times (0: a redirect is the answer). Raises :class:`Failure` when no answer
    came, ``UsageError`` when the door refuses the URL or a redirect's target."""
    url = urls.checked(url, what)
    sent = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity", **(headers or {})}
    watch = _Watchdog(deadline)
    try:
        for hop in range(redirects + 1):
            reads = _read_timeout(timeout, deadline)
            # The head (connecting, a proxy's tunnel, TLS, the status line and headers) within
            # ``reads`` in all: each of its reads has that timeout too, but a server or proxy that
            # trickles header lines, or sends them without end, would satisfy every one of them.
            watch.head(reads)
            raw = _send(url, sent, reads, watch)
            location = raw.headers.get("Location")
            if raw.status not in REDIRECTS or location is None or not redirects:
                return Response(url, raw, watch)
            raw.close()
            if hop == redirects:
                raise Failure(f"more than {redirects} redirects", retry=False)
            url = urls.redirect(url, location, f"the redirect from {urls.shown(url)}")
    except BaseException:
        watch.stop()
        raise
    raise AssertionError("unreachable")  # the loop returns or raises


def _read_timeout(timeout: float, deadline: float | None) -> float:
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise Failure("the deadline passed", expired=True)
    return min(timeout, left)


def _send(url: str, headers: dict[str, str], timeout: float, watch: _Watchdog) -> http.client.HTTPResponse:
    try:
        direct = url.startswith("http:") or _bypassed(urls.parse(url, "").host)
        raw = _opener(watch, plain=direct).open(urllib.request.Request(url, headers=headers), timeout=timeout)
    except urllib.error.URLError as error:  # urllib wraps what connecting raised
        watch.check()
        reason = error.reason
        if isinstance(reason, socket.gaierror):
            host = urls.parse(url, "").host
            raise Failure(f"the name {host} does not resolve (no network, or no DNS)", unresolved=host) from None
        if isinstance(reason, ssl.SSLCertVerificationError):
            raise Failure(
                f"the server's TLS certificate was refused ({reason.verify_message}); a proxy or mirror "
                "with its own certificate authority is trusted through SSL_CERT_FILE or REQUESTS_CA_BUNDLE",
                retry=False,
            ) from None
        raise Failure(_problem(reason if isinstance(reason, BaseException) else error)) from None
    except (OSError, http.client.HTTPException) as error:
        watch.check()
        raise Failure(_problem(error)) from None
    watch.headed()
    watch.check()
    return raw


def _problem(error: BaseException) -> str:
    text = _said(str(error))
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


SAID = 200
"""Characters of a server's own text (a reason phrase, a status line) a message shows."""


def _said(text: str) -> str:
    """Text a server or proxy wrote (the library's exceptions quote its status line) on one line,
    its control characters escaped and its length bounded: a bare carriage return in a reason
    phrase would otherwise forge a line of the message ("-> Fix it: curl ... | sh")."""
    text = controls.shown(text)
    return text if len(text) <= SAID else f"{text[:SAID]}... ({len(text):,} characters)"


class _AllAnswers(urllib.request.HTTPErrorProcessor):
    """Every answer is handed back as it came: urllib neither raises on a status nor follows a
    redirect by itself (``request`` follows them, through the door)."""

    def http_response(self, request, response):  # noqa: D102 - urllib hook
        return response

    https_response = http_response


def _opener(watch: _Watchdog, *, plain: bool) -> urllib.request.OpenerDirector:
    """urllib's opener: every connection's socket handed to ``watch``, connecting bounded by
    :data:`CONNECT_TIMEOUT`, the proxy and TLS settings of the environment (``plain``: no proxy)."""

    class Plain(http.client.HTTPConnection):
        def connect(self):
            _connect(self, super().connect, watch)

    class Secure(http.client.HTTPSConnection):
        def connect(self):
            _connect(self, super().connect, watch)

    class PlainHandler(urllib.request.HTTPHandler):
        def http_open(self, req):
            return self.do_open(Plain, req)

    class SecureHandler(urllib.request.HTTPSHandler):
        def https_open(self, req):
            return self.do_open(Secure, req, context=self._context)

    return urllib.request.build_opener(
        urllib.request.ProxyHandler({} if plain else _https_proxy()),
        PlainHandler,
        SecureHandler(context=_tls()),
        _AllAnswers,
    )


def _connect(connection: http.client.HTTPConnection, connect, watch: _Watchdog) -> None:
    """Connect within :data:`CONNECT_TIMEOUT` (or the read timeout, when shorter), then read
    with the request's own timeout; the socket is the watchdog's from then on."""
    reads = connection.timeout
    connection.timeout = min(CONNECT_TIMEOUT, reads) if isinstance(reads, (int, float)) else CONNECT_TIMEOUT

    def create(*args, **kwargs):
        # The plain socket is the watchdog's before a proxy's tunnel is read through it.
        sock = socket.create_connection(*args, **kwargs)
        watch.add(sock)
        return sock

    connection._create_connection = create  # type: ignore[attr-defined]  # http.client's private hook, untyped in typeshed
    connect()
    if isinstance(reads, (int, float)):
        connection.sock.settimeout(reads)
    watch.add(connection.sock)


def _https_proxy() -> dict[str, str]:
    """The proxy for HTTPS, as requests reads it: ``HTTPS_PROXY``, else an http(s) ``ALL_PROXY``
    (a SOCKS one is left out: neither urllib nor a bare requests speaks it). ``NO_PROXY`` is read
    by urllib's handler for each host."""
    found = urllib.request.getproxies()
    proxy = found.get("https") or found.get("all", "")
    return {"https": proxy} if proxy.lower().startswith(("http://", "https://")) else {}


def _bypassed(host: str) -> bool:
    """``NO_PROXY`` names ``host`` by a network (``10.0.0.0/8``), as requests reads it; urllib's
    own reading of the variable (names, suffixes, ``*``) knows no networks."""
    for entry in (os.environ.get("no_proxy") or os.environ.get("NO_PROXY") or "").split(","):
        if "/" in entry:
            try:
                if ipaddress.ip_address(host) in ipaddress.ip_network(entry.strip(), strict=False):
                    return True
            except ValueError:  # a host that is a name, or an entry that is no network
                continue
    return False


_contexts: dict[tuple[str, str], ssl.SSLContext] = {}
_CERTIFICATES = untrusted.Kind("a certificate bundle", 64 * untrusted.MiB, None)


def _tls() -> ssl.SSLContext:
    """One verifying TLS context per certificate setting of the environment (built once: loading
    a store takes milliseconds)."""
    bundle = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or ""
    key = (bundle, os.environ.get("SSL_CERT_FILE", "") + os.pathsep + os.environ.get("SSL_CERT_DIR", ""))
    if key not in _contexts:
        _check_certificate_files()
        if bundle:
            if os.path.isdir(bundle):
                context = ssl.create_default_context(capath=bundle)
            else:
                context = ssl.create_default_context(cafile=bundle)
        else:
            context = ssl.create_default_context()
            if not context.get_ca_certs() and not _has_default_store():
                context = _certifi_context() or context
        _contexts[key] = context
    return _contexts[key]


def _check_certificate_files() -> None:
    """A :class:`Failure` naming the variable when the certificate file in use names something
    OpenSSL would block on or read without end (a FIFO, a device, a file past the cap): OpenSSL
    reads it whole when the context is made, before any socket exists, where no deadline reaches.
    A missing ``SSL_CERT_FILE`` is OpenSSL's to skip, as it always does; a missing bundle is an
    error, as it is for requests."""
    chosen = next((name for name in CERTIFICATE_VARIABLES[:2] if os.environ.get(name)), "SSL_CERT_FILE")
    path = os.environ.get(chosen, "")
    if not path or os.path.isdir(path) or (chosen == "SSL_CERT_FILE" and not os.path.lexists(path)):
        return
    try:
        untrusted.check_file(path, _CERTIFICATES)
    except untrusted.Unreadable as error:
        raise Failure(
            f"{chosen}: {error.reason} Point {chosen} at a PEM file of certificate authorities, or unset it",
            retry=False,
        ) from None


def _has_default_store() -> bool:
    paths = ssl.get_default_verify_paths()
    return any(p and os.path.exists(p) for p in (paths.cafile, paths.capath))


def _certifi_context() -> ssl.SSLContext | None:
    """certifi's bundle, where this Python's OpenSSL knows no store (some relocated builds)."""
    try:
        import certifi
    except ImportError:
        return None
    return ssl.create_default_context(cafile=certifi.where())


class _Watchdog:
    """Shuts down the sockets of one request when its deadline passes, so a read that trickles in
    byte by byte ends at the deadline instead of at the server's pleasure."""

    def __init__(self, deadline: float | None) -> None:
        self.sockets: list[socket.socket] = []
        self.expired = False
        self.headless = 0.0
        """The seconds a head was given, once it did not arrive in them (else 0)."""
        self._lock = threading.Lock()
        self._timer = None
        self._head: threading.Timer | None = None
        if deadline is not None:
            self._timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._cut)
            self._timer.daemon = True
            self._timer.start()

    def add(self, sock) -> None:
        with self._lock:
            self.sockets.append(sock)
            if self.expired or self.headless:
                _shutdown(sock)

    def head(self, seconds: float) -> None:
        """Cut the sockets when an answer's head has not arrived ``seconds`` from now."""
        self.headed()
        self._head = threading.Timer(max(0.0, seconds), self._cut_head, args=(seconds,))
        self._head.daemon = True
        self._head.start()

    def headed(self) -> None:
        """The head arrived (or the request ended): the head's timer is stopped."""
        if self._head is not None:
            self._head.cancel()
            self._head = None

    def check(self) -> None:
        """A :class:`Failure` once the deadline has passed (whatever the read made of the cut)."""
        if self.expired:
            raise Failure("the deadline passed while the answer was read", expired=True)
        if self.headless:
            raise Failure(f"no status line and headers within {self.headless:g} s (the deadline for an answer's head)")

    def stop(self) -> None:
        self.headed()
        if self._timer is not None:
            self._timer.cancel()

    def _cut(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self.sockets:
                _shutdown(sock)

    def _cut_head(self, seconds: float) -> None:
        with self._lock:
            self.headless = seconds
            for sock in self.sockets:
                _shutdown(sock)


def _shutdown(sock) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


_preflown: set[str] = set()


def preflight(url: str, what: str, *, timeout: float = 10.0) -> None:
    """Before a plain-HTTP ``url`` (a host named with --insecure-host) is handed to uv or rattler,
    which follow redirects by themselves with no switch to stop them: ask it, redirects followed
    here, and stop the run (``insecure-url``/``bad-url`` naming the target) when one leads
    somewhere the URL door refuses. HTTPS URLs are left alone (the engines follow those on
    TLS-verified hosts only), and so is a host that does not answer: the engine reports that as it
    always has. Each URL is asked once per run."""
    for _ in range(MAX_REDIRECTS):
        if not url.startswith("http:") or url in _preflown:
            return
        _preflown.add(url)
        try:
            with request(url, what, timeout=timeout, deadline=time.monotonic() + timeout, redirects=0) as answer:
                location = answer.headers.get("Location")
                if answer.status not in REDIRECTS or location is None:
                    return
        except Failure:
            return
        url = urls.redirect(url, location, f"{what} ({urls.shown(url)} redirects to it)")
