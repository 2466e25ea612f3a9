"""The one HTTP transport (``tfgpu.datasource.transport``) with the environment users set for pip and
requests: certificates from ``SSL_CERT_FILE`` or ``REQUESTS_CA_BUNDLE``, HTTPS through
``HTTPS_PROXY`` (not where ``NO_PROXY`` says), plain HTTP never through a proxy, and HTTPS never
continuing over plain HTTP; for both of its users, vendor downloads and update-data's reads. The
HTTPS server and the CONNECT proxy are real, on the loopback (tests/tlsserver.py)."""

from __future__ import annotations

import hashlib
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import tlsserver

from tfgpu.datasource import transport
from tfgpu.datasource.http import Fetcher, SourceError
from tfgpu.engines import download
from tfgpu.errors import OperationError, UsageError

BODY = b"runfile bytes " * 4096
VARIABLES = ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
PROXIES = ("https_proxy", "http_proxy", "all_proxy", "no_proxy")


@pytest.fixture
def env(monkeypatch):
    """No certificate or proxy setting but what the test sets."""
    for name in VARIABLES + PROXIES + tuple(p.upper() for p in PROXIES):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(transport, "sleep", lambda seconds: None)
    return monkeypatch


@pytest.fixture
def https(tmp_path):
    if not tlsserver.have_openssl():
        pytest.skip("the openssl command makes the test certificates")
    served = tlsserver.Served(files={"/cuda.run": BODY, "/index.json": b'{"releases": {}}'})
    server = tlsserver.HttpsServer(tmp_path / "tls", served)
    yield server
    server.close()


@pytest.fixture
def proxy():
    server = tlsserver.ConnectProxy()
    yield server
    server.close()


def fetch(url, tmp_path):
    return download.fetch(url, tmp_path / "cache", sha256=hashlib.sha256(BODY).hexdigest(), retries=1)


def test_a_certificate_authority_named_by_ssl_cert_file_is_trusted(env, https, tmp_path):
    env.setenv("SSL_CERT_FILE", str(https.ca))
    assert fetch(f"{https.url}/cuda.run", tmp_path).read_bytes() == BODY
    assert Fetcher(timeout=30).json(f"{https.url}/index.json") == {"releases": {}}


def test_a_certificate_authority_named_by_requests_ca_bundle_is_trusted(env, https, tmp_path):
    env.setenv("REQUESTS_CA_BUNDLE", str(https.ca))
    assert fetch(f"{https.url}/cuda.run", tmp_path).read_bytes() == BODY
    assert Fetcher(timeout=30).json(f"{https.url}/index.json") == {"releases": {}}


def test_an_unknown_certificate_authority_fails_once_and_names_the_variables(env, https, tmp_path):
    with pytest.raises(OperationError) as caught:
        fetch(f"{https.url}/cuda.run", tmp_path)
    message = caught.value.message
    assert caught.value.code == "download-failed" and "certificate" in message and "SSL_CERT_FILE" in message
    assert "failed after" not in message  # not retried: another try meets the same certificate
    assert not (tmp_path / "cache" / "cuda.run").exists()
    with pytest.raises(SourceError, match="REQUESTS_CA_BUNDLE"):
        Fetcher(timeout=30, retries=3).json(f"{https.url}/index.json")


def test_https_goes_through_https_proxy(env, https, proxy, tmp_path):
    env.setenv("SSL_CERT_FILE", str(https.ca))
    env.setenv("HTTPS_PROXY", proxy.url)
    assert fetch(f"{https.url}/cuda.run", tmp_path).read_bytes() == BODY
    assert Fetcher(timeout=30).json(f"{https.url}/index.json") == {"releases": {}}
    port = https.url.rsplit(":", 1)[1]
    assert [line.split()[:2] for line in proxy.lines] == [["CONNECT", f"127.0.0.1:{port}"]] * 2


def test_no_proxy_keeps_a_host_off_the_proxy(env, https, proxy, tmp_path):
    env.setenv("SSL_CERT_FILE", str(https.ca))
    env.setenv("HTTPS_PROXY", proxy.url)
    env.setenv("NO_PROXY", "127.0.0.1")
    assert fetch(f"{https.url}/cuda.run", tmp_path).read_bytes() == BODY
    assert proxy.lines == []


def test_plain_http_never_goes_through_a_proxy(env, proxy, tmp_path):
    """Over plain HTTP a proxy could answer for the named host in clear text: HTTP_PROXY and
    ALL_PROXY are not used for it (the proxy here would answer 502 to anything but CONNECT)."""
    env.setenv("HTTP_PROXY", proxy.url)
    env.setenv("ALL_PROXY", proxy.url)
    server = _plain_server({"/cuda.run": BODY})
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        assert fetch(f"{url}/cuda.run", tmp_path).read_bytes() == BODY
        with transport.request(f"{url}/cuda.run", "a test URL") as answer:
            assert answer.status == 200 and answer.read() == BODY
    finally:
        server.shutdown()
        server.server_close()
    assert proxy.lines == []


def test_https_never_continues_over_plain_http(env, https, tmp_path):
    """Even to a host named as trusted (the suite names 127.0.0.1): the first hop's TLS would vouch
    for bytes anyone on the second hop's path can swap. Refused before the second hop is asked."""
    env.setenv("SSL_CERT_FILE", str(https.ca))
    https.served.redirects["/cuda.run"] = "http://127.0.0.1:9/cuda.run"
    https.served.redirects["/index.json"] = "http://127.0.0.1:9/index.json"
    with pytest.raises(UsageError) as caught:
        fetch(f"{https.url}/cuda.run", tmp_path)
    assert caught.value.code == "insecure-url" and "never continues" in caught.value.message
    with pytest.raises(UsageError, match="never continues"):
        Fetcher(timeout=30).json(f"{https.url}/index.json")
    assert https.served.requests == ["/cuda.run", "/index.json"]  # each asked once, never retried
    assert not (tmp_path / "cache" / "cuda.run").exists()


def test_a_redirect_on_the_same_https_server_is_followed(env, https, tmp_path):
    env.setenv("SSL_CERT_FILE", str(https.ca))
    https.served.redirects["/old/cuda.run"] = "/cuda.run"
    assert fetch(f"{https.url}/old/cuda.run", tmp_path).read_bytes() == BODY


def test_a_redirect_loop_ends(env, https):
    env.setenv("SSL_CERT_FILE", str(https.ca))
    https.served.redirects["/loop"] = "/loop"
    with pytest.raises(transport.Failure) as caught:
        transport.request(f"{https.url}/loop", "a test URL")
    assert not caught.value.retry and len(https.served.requests) == transport.MAX_REDIRECTS + 1


def test_the_deadline_ends_a_body_that_never_ends(env):
    """A server that sends a byte at a time within every read timeout: the watchdog ends the read
    at the request's deadline (the hang guard is the test's timeout, not a wall-clock figure)."""
    server = _plain_server({}, drip=True)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/drip"
        with transport.request(url, "a test URL", timeout=5, deadline=time.monotonic() + 0.5) as answer:
            with pytest.raises(transport.Failure) as caught:
                while answer.read1(1024):
                    pass
        assert caught.value.expired
    finally:
        server.shutdown()
        server.server_close()


def test_the_retry_policy_backs_off_and_keeps_within_the_deadline(env):
    slept = []
    env.setattr(transport, "sleep", slept.append)
    retry = transport.Retry(3, 0.5)
    assert list(retry.attempts()) == [0, 1, 2, 3] and retry.last(3) and not retry.last(2)
    assert all(retry.pause(n) for n in range(3)) and slept == [0.5, 1.0, 2.0]
    assert not transport.Retry(3, 10.0, deadline=time.monotonic() + 1).pause(0) and slept == [0.5, 1.0, 2.0]
    assert [s for s in range(600) if transport.retryable(s)] == [408, 429, *range(500, 600)]


def test_messages_show_a_urls_credential_masked(env, tmp_path):
    """NVIDIA's links carry ``?t=<jwt>``, a private channel ``/t/<token>/``: what a failure says
    reaches CI logs, so the URL in it passes the secrets door."""
    server = _plain_server({"/broken": b""}, status=503)
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        with pytest.raises(OperationError) as caught:
            fetch(f"{base}/cuda.run?t=sekrit-jwt", tmp_path)
        assert "HTTP 404" in caught.value.message and "sekrit" not in caught.value.message
        with pytest.raises(OperationError) as caught:
            fetch(f"{base}/t/sekrit-token/broken", tmp_path)
        assert "HTTP 503" in caught.value.message and "sekrit" not in caught.value.message
        with pytest.raises(SourceError) as caught:
            Fetcher(timeout=30, retries=1).range(f"{base}/t/sekrit-token/broken", 0, 9)
        assert "HTTP 503" in str(caught.value) and "sekrit" not in str(caught.value)
    finally:
        server.shutdown()
        server.server_close()


def _plain_server(files: dict[str, bytes], *, drip: bool = False, status: int = 200) -> ThreadingHTTPServer:
    stop = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            if drip:
                self.send_response(200)
                self.send_header("Content-Length", str(1 << 30))
                self.end_headers()
                while not stop.wait(0.05):
                    try:
                        self.wfile.write(b"x")
                        self.wfile.flush()
                    except OSError:
                        return
                return
            body = next((files[name] for name in files if self.path.endswith(name)), b"")
            self.send_response(status if self.path.endswith(tuple(files)) else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    original = server.shutdown
    server.shutdown = lambda: (stop.set(), original())  # type: ignore[method-assign]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
