"""JSON documents and byte ranges over HTTP: bounded, retried, optionally cached on disk.

Every request has a timeout; a JSON document larger than ``max_json_bytes`` and a range larger
than ``max_range_bytes`` are refused before they are read, and a server that answers a range
request with the whole file is refused too (that would download the wheel). ``offline=True``
answers only from the cache and never opens a connection. Every URL, and every redirect's
target, passes the URL door (``tfgpu.urls``) before a connection is opened to it.

A ``deadline`` (a ``time.monotonic()`` value) bounds a whole run, and ``request_deadline`` (seconds)
bounds each request with its retries, not one read: a server that sends one byte every few seconds
never trips a per-read timeout, so a watchdog shuts the connection's socket down when the deadline
passes, and no retry starts after it. ``update-data`` uses the per-request one: a run that reads many
releases takes as long as they need, and only a request that stalls fails.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import re
import socket
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from tfgpu import secrets, untrusted, urls
from tfgpu.datasource.errors import SourceError
from tfgpu.errors import TfgpuError

__all__ = ["Fetcher", "SourceError", "preflight", "write_atomic"]

USER_AGENT = "tfgpu-install (Python urllib; reads wheel metadata by range requests)"
MAX_JSON_BYTES = 64 * 1024 * 1024
MAX_RANGE_BYTES = 16 * 1024 * 1024


class _CheckedRedirects(urllib.request.HTTPRedirectHandler):
    """urllib follows redirects by itself: each target passes the URL door before it is followed."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: D102 - urllib hook
        target = urls.join(req.full_url, newurl, f"the redirect from {req.full_url}")
        return super().redirect_request(req, fp, code, msg, headers, target)


class Fetcher:
    """Fetches JSON documents and byte ranges, retrying transient failures.

    With ``cache_dir`` every JSON document and byte range is stored on disk and served from
    there next time. Wheel URLs are content-addressed, so cached ranges never go stale; pass
    ``refresh_json=True`` to re-read the (changing) JSON documents. ``on_retry(message)`` is
    told about each retry (the regeneration script logs them).
    """

    def __init__(
        self,
        cache_dir: Path | None = None,
        *,
        refresh_json: bool = False,
        timeout: float = 60.0,
        retries: int = 5,
        offline: bool = False,
        max_json_bytes: int = MAX_JSON_BYTES,
        max_range_bytes: int = MAX_RANGE_BYTES,
        on_retry=None,
        deadline: float | None = None,
        request_deadline: float | None = None,
    ) -> None:
        self.cache_dir = cache_dir
        self.refresh_json = refresh_json
        self.timeout = timeout
        self.retries = retries
        self.offline = offline
        self.max_json_bytes = max_json_bytes
        self.max_range_bytes = max_range_bytes
        self.on_retry = on_retry
        self.deadline = deadline
        """``time.monotonic()`` after which no request runs on (None: only the per-request timeout)."""
        self.request_deadline = request_deadline
        """Seconds one request may take, its retries included (None: only the per-read timeout)."""
        self._stats_lock = threading.Lock()
        self.requests = 0
        self.bytes = 0

    def json(self, url: str) -> dict | None:
        """The JSON document at ``url``, or None when the server answers 404."""
        cached = self._cache_path("json", url, ".json")
        if cached and cached.exists() and (not self.refresh_json or self.offline):
            try:
                return untrusted.load_json(cached, untrusted.CACHE)
            except untrusted.Unreadable:
                pass  # a damaged cache entry is asked for again (or, offline, is not in the cache)
        body = self._request(url, None)

        try:
            document = None if body is None else untrusted.parse_json(body, untrusted.UPSTREAM, url)
        except TfgpuError as error:
            raise SourceError(error.message) from None
        if cached:
            write_atomic(cached, json.dumps(document).encode())
        return document

    def range(self, url: str, start: int, end: int) -> bytes:
        """Bytes ``start`` to ``end`` (inclusive) of the file at ``url``."""
        if end < start or end - start + 1 > self.max_range_bytes:
            raise SourceError(
                f"{url}: refusing a range of {end - start + 1} bytes (at most {self.max_range_bytes} per request)"
            )
        cached = self._cache_path("ranges", url, f"/{start}-{end}")
        if cached and cached.exists():
            try:
                data = untrusted.read_bytes(cached, untrusted.CACHE)
            except untrusted.Unreadable:
                data = b""
            if len(data) == end - start + 1:  # a cut or grown file is not the range asked: fetched again
                return data
        data = self._request(url, (start, end))
        if data is None:
            raise SourceError(f"{url}: 404 Not Found")
        if cached:
            write_atomic(cached, data)
        return data

    def _cache_path(self, kind: str, url: str, suffix: str) -> Path | None:
        if self.cache_dir is None:
            return None
        digest = hashlib.sha256(url.encode()).hexdigest()[:24]
        # The readable part of the name is the path without its credential (an index given as
        # https://host/t/<token>/pypi): a file name is shown by ls, `cache` and backups alike.
        name = re.sub(r"[^A-Za-z0-9._-]", "_", urls.path_of(secrets.strip(url)).strip("/"))[-80:]
        return self.cache_dir / kind / f"{name}-{digest}{suffix}"

    def _request(self, url: str, byte_range: tuple[int, int] | None) -> bytes | None:
        if self.offline:
            raise SourceError(f"{url}: not in the cache, and --offline allows no network")
        url = urls.checked(url, "a data source's URL")
        headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity"}
        if byte_range:
            headers["Range"] = "bytes={}-{}".format(*byte_range)
        limit = byte_range[1] - byte_range[0] + 1 if byte_range else self.max_json_bytes
        deadline = self._deadline_of_request()
        for attempt in range(self.retries + 1):
            remaining = self._remaining(url, deadline)
            watch = _Watchdog(remaining)
            try:
                with (
                    watch,
                    _opener(watch).open(
                        urllib.request.Request(url, headers=headers), timeout=min(self.timeout, remaining)
                    ) as response,
                ):
                    _check_response(url, response, byte_range, limit)
                    data = response.read(limit + 1)
                if watch.expired:
                    raise TimeoutError("the deadline passed while the answer was read")
                break
            except urllib.error.HTTPError as exc:
                if exc.code == 404:
                    return None
                if exc.code != 429 and exc.code < 500 or attempt == self.retries:
                    raise SourceError(f"{url}: HTTP {exc.code} {exc.reason}") from None
                problem = f"HTTP {exc.code}"
            except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
                if watch.expired:
                    self._remaining(url, deadline, after=True)
                if attempt == self.retries:
                    raise SourceError(f"{url}: {getattr(exc, 'reason', exc)}") from None
                problem = str(exc)
            delay = 2**attempt
            if deadline is not None and time.monotonic() + delay >= deadline:
                raise SourceError(f"{url}: {problem}, and no time is left to try again")
            if self.on_retry:
                self.on_retry(f"retry in {delay}s ({problem}): {url}")
            time.sleep(delay)
        if len(data) > limit:
            raise SourceError(f"{url}: answer larger than the {limit} bytes allowed")
        if byte_range and len(data) != limit:
            raise SourceError(f"{url}: asked for bytes {byte_range}, got {len(data)} bytes")
        with self._stats_lock:
            self.requests += 1
            self.bytes += len(data)
        return data

    def _deadline_of_request(self) -> float | None:
        """The earlier of the run's deadline and this request's own (None: neither is set)."""
        own = None if self.request_deadline is None else time.monotonic() + self.request_deadline
        given = [d for d in (self.deadline, own) if d is not None]
        return min(given) if given else None

    def _remaining(self, url: str, deadline: float | None, *, after: bool = False) -> float:
        """Seconds left before ``deadline`` (the per-request timeout when there is none); a
        :class:`SourceError` once it has passed."""
        if deadline is None:
            return self.timeout
        left = deadline - time.monotonic()
        if left <= 0 or after:
            if self.deadline is not None and deadline == self.deadline:
                why = f"before the run's deadline (the whole run may take {self.timeout:g} s)"
            else:
                why = f"within the request's deadline ({self.request_deadline:g} s, its retries included)"
            raise SourceError(f"{url}: no complete answer {why}")
        return left


class _Watchdog:
    """Shuts down the sockets of one request when its time is up, so a read that trickles in
    byte by byte ends at the deadline instead of at the server's pleasure."""

    def __init__(self, seconds: float) -> None:
        self.sockets: list[socket.socket] = []
        self.expired = False
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._cut)
        self._timer.daemon = True

    def add(self, sock) -> None:
        with self._lock:
            self.sockets.append(sock)
            if self.expired:
                _shutdown(sock)

    def _cut(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self.sockets:
                _shutdown(sock)

    def __enter__(self):
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self._timer.cancel()


def _shutdown(sock) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _opener(watch: _Watchdog) -> urllib.request.OpenerDirector:
    """urllib's opener, with every connection's socket handed to ``watch`` and redirects held to
    the transport rule."""

    class Plain(http.client.HTTPConnection):
        def connect(self):
            super().connect()
            watch.add(self.sock)

    class Secure(http.client.HTTPSConnection):
        def connect(self):
            super().connect()
            watch.add(self.sock)

    class PlainHandler(urllib.request.HTTPHandler):
        def http_open(self, req):
            return self.do_open(Plain, req)

    class SecureHandler(urllib.request.HTTPSHandler):
        def https_open(self, req):
            return self.do_open(Secure, req, context=self._context)

    # Plain HTTP never goes through a proxy (one could answer for the named host in clear text):
    # only the HTTPS proxy is kept, a tunnel to a TLS-verified host.
    https_only = {scheme: url for scheme, url in urllib.request.getproxies().items() if scheme == "https"}
    return urllib.request.build_opener(
        urllib.request.ProxyHandler(https_only), PlainHandler, SecureHandler, _CheckedRedirects
    )


class _HeldRedirects(urllib.request.HTTPRedirectHandler):
    """The preflight's redirects: the target passes the URL door (or the run stops), and is kept in
    ``target`` instead of followed (urllib then answers with the 3xx as an ``HTTPError``)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.target = ""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: D102 - urllib hook
        self.target = urls.join(req.full_url, newurl, f"{self.what} ({urls.shown(req.full_url)} redirects to it)")
        return None


_preflown: set[str] = set()
PREFLIGHT_HOPS = 5


def preflight(url: str, what: str, *, timeout: float = 10.0) -> None:
    """Before a plain-HTTP ``url`` (a host named with --insecure-host) is handed to uv or rattler,
    which follow redirects by themselves with no switch to stop them: ask it once, redirects not
    followed, and stop the run (``insecure-url``/``bad-url`` naming the target) when it redirects
    somewhere the URL door refuses (plain HTTP to a host not named). HTTPS URLs are left alone
    (the engines follow those on TLS-verified hosts only), and so is a host that does not answer:
    the engine reports that as it always has. Each URL is asked once per run."""
    for _ in range(PREFLIGHT_HOPS):
        if not url.startswith("http:") or url in _preflown:
            return
        _preflown.add(url)
        # No proxy: plain HTTP never goes through one.
        held = _HeldRedirects(what)
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), held)
        try:
            with opener.open(urllib.request.Request(url, headers={"User-Agent": USER_AGENT}), timeout=timeout):
                return
        except urllib.error.HTTPError as answer:
            answer.close()
            if not held.target:
                return
            url = held.target
        except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError):
            return


def _check_response(url: str, response, byte_range, limit: int) -> None:
    if byte_range:
        if response.status != 206:
            # Never read on: that would download the whole wheel.
            raise SourceError(f"{url}: asked for a byte range, got HTTP {response.status}")
        content_range = response.headers.get("Content-Range", "")
        if not content_range.startswith("bytes {}-{}/".format(*byte_range)):
            raise SourceError(f"{url}: asked for bytes {byte_range}, got {content_range!r}")
    length = response.headers.get("Content-Length")
    # isascii: str.isdigit() also says yes to "²" (a header byte 0xB2), which int() refuses.
    if length and length.isascii() and length.isdigit() and int(length) > limit:
        raise SourceError(f"{url}: {length} bytes, more than the {limit} allowed")


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
