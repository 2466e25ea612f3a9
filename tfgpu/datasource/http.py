"""JSON documents and byte ranges over HTTP: bounded, retried, optionally cached on disk.

Every request has a timeout; a JSON document larger than ``max_json_bytes`` and a range larger
than ``max_range_bytes`` are refused before they are read, and a server that answers a range
request with the whole file is refused too (that would download the wheel). ``offline=True``
answers only from the cache and never opens a connection. Requests go through the tool's one
HTTP transport (``tfgpu.datasource.transport``): every URL, and every redirect's target, passes the
URL door (``tfgpu.doors.urls``) before a connection is opened to it, and retries follow its policy.

A ``deadline`` (a ``time.monotonic()`` value) bounds a whole run, and ``request_deadline`` (seconds)
bounds each request with its retries, not one read: a server that sends one byte every few seconds
never trips a per-read timeout, so the transport's watchdog shuts the connection's socket down when
the deadline passes, and no retry starts after it. ``update-data`` uses the per-request one: a run that reads many
releases takes as long as they need, and only a request that stalls fails.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
from pathlib import Path

from tfgpu.datasource import transport
from tfgpu.datasource.errors import SourceError
from tfgpu.doors import secrets, trees, untrusted, urls
from tfgpu.errors import TfgpuError

__all__ = ["Fetcher", "SourceError", "write_atomic"]

MAX_JSON_BYTES = 64 * 1024 * 1024
MAX_RANGE_BYTES = 16 * 1024 * 1024


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
                f"{urls.shown(url)}: refusing a range of {end - start + 1} bytes (at most {self.max_range_bytes} per request)"
            )
        cached = self._cache_path("ranges", url, f"/{start}-{end}")
        if cached and cached.exists():
            try:
                data = untrusted.read_bytes(cached, untrusted.CACHE)
            except untrusted.Unreadable:
                data = b""
            if len(data) == end - start + 1:  # a cut or grown file is not the range asked: fetched again
                return data
        fetched = self._request(url, (start, end))
        if fetched is None:
            raise SourceError(f"{urls.shown(url)}: 404 Not Found")
        if cached:
            write_atomic(cached, fetched)
        return fetched

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
            raise SourceError(f"{urls.shown(url)}: not in the cache, and --offline allows no network")
        url = urls.checked(url, "a data source's URL")
        shown = urls.shown(url)
        headers = {"Range": "bytes={}-{}".format(*byte_range)} if byte_range else {}
        limit = byte_range[1] - byte_range[0] + 1 if byte_range else self.max_json_bytes
        deadline = self._deadline_of_request()
        retry = transport.Retry(self.retries, 1.0, deadline)
        for attempt in retry.attempts():
            remaining = self._remaining(shown, deadline)
            try:
                with transport.request(
                    url,
                    "a data source's URL",
                    headers=headers,
                    timeout=min(self.timeout, remaining),
                    deadline=time.monotonic() + remaining,
                ) as response:
                    if response.status == 404:
                        return None
                    if response.status >= 300:
                        problem = f"HTTP {response.status}"
                        if not transport.retryable(response.status) or retry.last(attempt):
                            raise SourceError(f"{shown}: HTTP {response.status} {response.reason}")
                    else:
                        _check_response(shown, response, byte_range, limit)
                        data = response.read(limit + 1)
                        break
            except transport.Failure as failure:
                if failure.expired:
                    self._remaining(shown, deadline, after=True)
                if not failure.retry or retry.last(attempt):
                    raise SourceError(f"{shown}: {failure.problem}") from None
                problem = failure.problem

            def announce(delay, problem=problem):
                if self.on_retry:
                    self.on_retry(f"retry in {delay:g}s ({problem}): {shown}")

            if not retry.pause(attempt, announce):
                raise SourceError(f"{shown}: {problem}, and no time is left to try again")
        if len(data) > limit:
            raise SourceError(f"{shown}: answer larger than the {limit} bytes allowed")
        if byte_range and len(data) != limit:
            raise SourceError(f"{shown}: asked for bytes {byte_range}, got {len(data)} bytes")
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
    """Write ``data`` to ``path`` through a temporary file in the same directory, renamed over it
    (``tfgpu.doors.trees.replace``): a reader, or a run killed half-way, sees the old entry or the
    new one, never half. The temporary is created exclusively and never through a link (a name
    planted in the cache cannot aim the write elsewhere), and a failed write leaves none behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    trees.unlink(tmp)  # a run killed between its write and its rename left it
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        trees.replace(tmp, path)
    except BaseException:
        trees.unlink(tmp, strict=False)
        raise
