"""Vendor downloads: streamed, resumable (HTTP Range), retried with backoff, verified, cached.

A file is downloaded to ``<name>.part`` in the cache directory, resumed from where a broken
transfer stopped, checked against its sha256 (or NVIDIA's md5 where no sha256 is known) and only
then renamed to its final name; a file that fails the check is deleted. A verified file is kept
with a ``.verified`` note (its digest, size and mtime), so a later run uses it without hashing
gigabytes again. Requests go through the tool's one HTTP transport (``tfgpu.datasource.transport``):
every URL and every redirect's target passes the URL door (``tfgpu.doors.urls``: HTTPS, plain HTTP only
to hosts the user named; an https URL never continues over http), retries follow its policy, and
each attempt's deadline is :data:`MAX_SECONDS`.

Bounded: a transfer stops at the size the data records (else the size the server announces, else
:data:`MAX_UNKNOWN`), a server that sends less than :data:`MIN_RATE` on average after
:data:`GRACE` seconds is given up on (a byte every few seconds never satisfies a read timeout),
no single attempt runs past :data:`MAX_SECONDS`, and a full disk stops at once. A ``.part`` is kept only when the server takes range requests, so
that the next run can resume it; every failure message says whether it was kept.
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
from pathlib import Path

from tfgpu.doors import trees, untrusted, urls
from tfgpu.errors import ImpossibleError, OperationError, UsageError

CHUNK = 1 << 16
MAX_UNKNOWN = 16 << 30
"""Bytes accepted when neither the data nor the server say how large a file is."""
MIN_RATE = 32 << 10
"""Bytes per second, averaged over a transfer, below which it is given up on as stalled..."""
GRACE = 30.0
"""...once it has run this many seconds."""
MAX_SECONDS = 6 * 3600.0
"""The longest one attempt may take, however fast it goes; a resumable transfer continues in the next."""
PROGRESS_EVERY = 0.2
"""Seconds between progress reports (the last is always reported); the renderer throttles further."""


def fetch(
    url: str,
    dest_dir: Path,
    *,
    sha256: str = "",
    md5: str = "",
    size: int = 0,
    reporter=None,
    retries: int = 4,
    backoff: float = 0.5,
) -> Path:
    """Download ``url`` into ``dest_dir`` (a cache) and return the verified file.

    ``retries`` is how many times a failed attempt (connection error, cut transfer, HTTP 5xx/429)
    is retried, sleeping ``backoff * 2**n`` seconds before retry n; a cut transfer resumes with a
    Range request. Raises ``OperationError`` naming the URL on failure; nothing unverified is
    ever left under the final name.
    """
    url = urls.checked(url, "a download's URL")
    if not sha256 and not md5:
        raise ImpossibleError(
            "unverified-download",
            f"No checksum is known for {urls.shown(url)}, so it is not downloaded: every download is verified before use.",
            ["Give its sha256 in a TFGPU_DATA_DIR overlay (docs/modes.md, System mode)."],
        )
    name = _file_name(url)
    dest_dir = Path(dest_dir)
    dest_dir.mkdir(parents=True, exist_ok=True)
    final, part, note = dest_dir / name, dest_dir / f"{name}.part", dest_dir / f"{name}.verified"
    algorithm, expected = ("sha256", sha256.lower()) if sha256 else ("md5", md5.lower())
    if final.is_file() and _known_good(final, note, algorithm, expected):
        _say(reporter, "note", f"{name}: already downloaded and verified ({algorithm})")
        return final
    trees.unlink(final)
    trees.unlink(note)
    transfer = Transfer(url, part, size=size, reporter=reporter, name=name)
    transfer.run(retries=retries, backoff=backoff)
    found = file_digest(part, algorithm)
    if found != expected and transfer.resumed:
        # A resumed file can mix two versions of a changed upstream file: once more from zero.
        trees.unlink(part)
        transfer = Transfer(url, part, size=size, reporter=reporter, name=name)
        transfer.run(retries=retries, backoff=backoff)
        found = file_digest(part, algorithm)
    if found != expected:
        got = part.stat().st_size
        trees.unlink(part)
        raise OperationError(
            "checksum-mismatch",
            f"{name} from {urls.shown(url)} failed its {algorithm} check (expected {expected}, got {found}, {got} bytes); "
            "the file was deleted and nothing was installed.",
            [
                "Run the same command again (a proxy or mirror may have served a damaged copy).",
                "If it keeps failing, the file upstream differs from the one tfgpu's data records: report it.",
            ],
        )
    if size and part.stat().st_size != size:
        got = part.stat().st_size
        trees.unlink(part)
        raise OperationError(
            "size-mismatch",
            f"{name} from {urls.shown(url)} has {got} bytes, not the recorded {size}; deleted, nothing installed.",
            ["Report it: tfgpu's data may be wrong."],
        )
    trees.replace(part, final)
    stat = final.stat()
    _write_note(note, f"{algorithm}:{expected} {stat.st_size} {stat.st_mtime_ns}\n")
    _say(reporter, "note", f"{name}: downloaded, {algorithm} verified")
    return final


def _file_name(url: str) -> str:
    """The name ``url``'s file has in the cache: its last path segment (as written, percent-encoded),
    ``download`` for none; ``bad-url`` when that is no file name (``.``, ``..``, or too long for
    the name and its ``.verified`` note beside it)."""
    name = urls.path_of(url).rsplit("/", 1)[-1] or "download"
    if name in (".", "..") or len(os.fsencode(name)) > 255 - len(".verified"):
        raise UsageError(
            "bad-url",
            f"{urls.shown(url)} ends in {urls.shown(name, 40)!r}, which is not a file name a download can be "
            "saved as. Nothing was fetched.",
            ["Give the URL of the file itself (a TFGPU_DATA_DIR overlay's `url`), ending in its file name."],
        )
    return name


def is_cached(url: str, dest_dir: Path, *, sha256: str = "", md5: str = "") -> bool:
    """The file of ``url`` is in ``dest_dir`` and was verified against this checksum (no hashing)."""
    try:
        name = _file_name(url)
    except UsageError:
        return False
    algorithm, expected = ("sha256", sha256.lower()) if sha256 else ("md5", md5.lower())
    final = Path(dest_dir) / name
    return (
        bool(expected) and final.is_file() and _noted(final, Path(dest_dir) / f"{name}.verified", algorithm, expected)
    )


def _noted(final: Path, note: Path, algorithm: str, expected: str) -> bool:
    try:
        recorded, size, mtime = untrusted.read_text(note, untrusted.CACHE).split()
    except (untrusted.Unreadable, ValueError):
        return False
    stat = final.stat()
    return recorded == f"{algorithm}:{expected}" and int(size) == stat.st_size and int(mtime) == stat.st_mtime_ns


def _known_good(final: Path, note: Path, algorithm: str, expected: str) -> bool:
    if _noted(final, note, algorithm, expected):
        return True
    if file_digest(final, algorithm) != expected:
        return False
    stat = final.stat()
    _write_note(note, f"{algorithm}:{expected} {stat.st_size} {stat.st_mtime_ns}\n")
    return True


def _write_note(note: Path, text: str) -> None:
    """The ``.verified`` note, written as a new file and never through a link at its name (one
    planted in the cache would aim the write at another file). Not renamed into place: a note cut
    short does not parse, and the file is hashed again."""
    trees.unlink(note)
    fd = os.open(note, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def _part_size(part: Path) -> int:
    """Bytes a partial download left in ``part`` to resume from; 0 when there is none. Anything
    there but a regular file (a link, planted or left by an older tool) is deleted, never followed:
    resuming through a link would append the download to the file it points to."""

    try:
        info = part.lstat()
    except FileNotFoundError:
        return 0
    if stat.S_ISREG(info.st_mode):
        return info.st_size
    trees.unlink(part, strict=False)  # a directory stays, and the write below names it
    return 0


def file_digest(path: Path, algorithm: str = "sha256") -> str:
    """The hex digest of a file, read in blocks (the one checksum reader: downloads, conda archives,
    bundle files)."""
    digest = hashlib.new(algorithm)
    with untrusted.open_stream(path, untrusted.ARTIFACT) as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _say(reporter, kind: str, text: str) -> None:
    if reporter is not None:
        getattr(reporter, kind)(text)


class _Fatal(Exception):
    """A failure retrying cannot mend (carries the error to raise)."""

    def __init__(self, error) -> None:
        super().__init__(error.message)
        self.error = error


PROXY_HINT = "Behind a proxy? Set HTTPS_PROXY (and SSL_CERT_FILE or REQUESTS_CA_BUNDLE for its certificate authority)."


class Transfer:
    """One file's download into ``part``, resumed across attempts."""

    def __init__(self, url: str, part: Path, *, size: int, reporter, name: str) -> None:
        self.url, self.part, self.size, self.reporter, self.name = url, part, size, reporter, name
        self.shown = urls.shown(url)
        self.resumed = False
        self.resumable = False
        """The server takes range requests (``Accept-Ranges: bytes`` or a 206 seen)."""

    def run(self, *, retries: int, backoff: float) -> None:
        """Attempt until complete; the last failure becomes an ``OperationError``."""
        # Here, not at the top: file_digest (bundles, conda archives) is read offline, without the
        # HTTP and TLS modules the transport loads.
        from tfgpu.datasource import transport

        retry = transport.Retry(retries, backoff)
        problem = ""
        try:
            for attempt in retry.attempts():
                if attempt:
                    note = f"{self.name}: {problem}; retrying ({attempt} of {retries})"
                    retry.pause(attempt - 1, lambda delay, note=note: _say(self.reporter, "note", note))
                try:
                    problem = self._attempt()
                except transport.Failure as failure:
                    if failure.unresolved:
                        raise _Fatal(
                            OperationError(
                                "download-unreachable",
                                f"Cannot download {self.shown}: the name {failure.unresolved} does not resolve "
                                f"(no network, or no DNS).{self._kept()}",
                                [
                                    f"Offline: copy {self.name} into {self.part.parent} on this machine (it is checked "
                                    "against its checksum before use), then run again with --offline.",
                                    PROXY_HINT,
                                ],
                            )
                        ) from None
                    if not failure.retry:
                        raise _Fatal(
                            OperationError(
                                "download-failed",
                                f"Downloading {self.shown} failed: {failure.problem}.{self._kept()}",
                                [PROXY_HINT, "Check the URL (a TFGPU_DATA_DIR overlay may point at a mirror)."],
                            )
                        ) from None
                    problem = (
                        f"the transfer took longer than {MAX_SECONDS / 3600:.0f} h"
                        if failure.expired
                        else f"transfer broke off ({failure.problem})"
                    )
                if not problem:
                    return
                if problem.startswith("HTTP 4") and not problem.startswith(("HTTP 408", "HTTP 429")):
                    raise _Fatal(
                        OperationError(
                            "download-failed",
                            f"Downloading {self.shown} failed: {problem}.{self._kept()}",
                            ["Check the URL (a TFGPU_DATA_DIR overlay may point at a mirror that lacks the file)."],
                        )
                    )
        except _Fatal as fatal:
            raise fatal.error from None
        raise OperationError(
            "download-failed",
            f"Downloading {self.shown} failed after {retries + 1} attempts; the last: {problem}. "
            f"Nothing was installed.{self._kept()}",
            [
                "Run the same command again later (the server may be busy)"
                + (": it resumes where this run stopped." if self._keeps() else "."),
                PROXY_HINT,
            ],
        )

    def _keeps(self) -> bool:
        return self.resumable and self.part.exists() and self.part.stat().st_size > 0

    def _kept(self) -> str:
        """Keep the partial file only when it can be resumed; say which."""
        if self._keeps():
            return f" The {self.part.stat().st_size} bytes that arrived are kept in {self.part} and resumed next time."
        trees.unlink(self.part)
        return " Nothing was kept."

    def _attempt(self) -> str:
        """One request; "" when the whole file is in ``part``, else what went wrong."""
        # Start-up cost: as in run(): file_digest reads offline without the HTTP and TLS modules.
        from tfgpu.datasource import transport

        have = _part_size(self.part)
        headers = {"Range": f"bytes={have}-"} if have else {}
        try:
            response = transport.request(
                self.url, "a download's URL", headers=headers, deadline=time.monotonic() + MAX_SECONDS
            )
        except UsageError as error:  # a redirect the door refuses: not retried
            raise _Fatal(error) from None
        with response:
            status = response.status
            if response.headers.get("Accept-Ranges", "").lower() == "bytes" or status == 206:
                self.resumable = True
            if status == 416 and have:  # nothing after `have`: complete (the checksum decides)
                return ""
            if status not in (200, 206):
                return f"HTTP {status} {response.reason}"
            if status == 206 and have:
                self.resumed = True
                how, done = os.O_APPEND, have
            else:
                how, done = os.O_TRUNC, 0
            announced = response.headers.get("Content-Length") or ""
            # isascii: str.isdigit() also says yes to "²", which int() refuses.
            length = int(announced) if announced.isascii() and announced.isdigit() else 0
            if self.size and length and done + length > self.size:
                raise _Fatal(
                    OperationError(
                        "download-too-large",
                        f"{self.shown} announces {done + length} bytes; tfgpu's data records "
                        f"{self.size}. Nothing was installed.{self._drop()}",
                        ["The server is not serving the file the data names: check the URL or the mirror."],
                    )
                )
            limit = self.size or (done + length if length else 0) or MAX_UNKNOWN
            total = done + length if length else self.size
            expected_end = done + length
            started, last, first = time.monotonic(), 0.0, done
            try:
                # Never through a link at the name (see _part_size): one made since is ELOOP, a failed write.
                fd = os.open(self.part, os.O_WRONLY | os.O_CREAT | how | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
                with os.fdopen(fd, "ab" if how == os.O_APPEND else "wb") as out:
                    while chunk := response.read1(CHUNK):
                        if done + len(chunk) > limit:
                            raise _Fatal(
                                OperationError(
                                    "download-too-large",
                                    f"{self.shown} sent more than the {limit} bytes "
                                    f"{'its data records' if self.size else 'it announced' if length else 'allowed'}; "
                                    f"the transfer was stopped.{self._drop()}",
                                    ["The server is not serving the file the data names: check the URL or the mirror."],
                                )
                            )
                        out.write(chunk)
                        done += len(chunk)
                        now = time.monotonic()
                        elapsed = now - started
                        if elapsed > GRACE and (done - first) / elapsed < MIN_RATE:
                            return (
                                f"the server sent {done - first} bytes in {elapsed:.0f} s (less than "
                                f"{MIN_RATE // 1024} KiB/s): stalled"
                            )
                        if now - last >= PROGRESS_EVERY:
                            last = now
                            self._report(done, total)
            except OSError as error:  # the transport's own troubles are Failures: this is the disk
                raise _Fatal(
                    OperationError(
                        "download-failed",
                        f"Writing {self.part} failed: {error.strerror or error}.{self._drop()}",
                        [f"Free space in {self.part.parent} (`df -h`), or point TFGPU_CACHE_DIR at a larger disk."],
                    )
                ) from None
            self._report(done, total)
            if length and done < expected_end:
                return f"transfer broke off at {done} of {expected_end} bytes"
        return ""

    def _drop(self) -> str:
        trees.unlink(self.part)
        return " Nothing was kept."

    def _report(self, done: int, total: int) -> None:
        """Bytes in ``part`` so far (a resumed transfer counts what the earlier attempt left), of
        ``total`` when the data or the server says it; the renderer turns them into a bar or lines."""
        if self.reporter is not None:
            self.reporter.transfer(self.name, done, total or None)
