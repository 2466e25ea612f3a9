"""A real HTTPS server and a real CONNECT proxy on the loopback, for the transport's TLS, proxy and
redirect tests. The certificate authority and the server's certificate (for 127.0.0.1) are made by
the ``openssl`` command; a test that needs them is skipped where there is none."""

from __future__ import annotations

import select
import shutil
import socket
import socketserver
import ssl
import subprocess
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def have_openssl() -> bool:
    return shutil.which("openssl") is not None


def certificates(directory: Path) -> tuple[Path, Path, Path]:
    """(the authority's certificate, the server's certificate, the server's key), made in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca, ca_key = directory / "ca.pem", directory / "ca.key"
    cert, key, csr, ext = (directory / name for name in ("server.pem", "server.key", "server.csr", "server.ext"))
    curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run = lambda *args: subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)  # noqa: E731
    run("req", "-x509", "-new", *curve, "-keyout", str(ca_key), "-out", str(ca), "-days", "2",
        "-subj", "/CN=tfgpu test authority", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign")  # fmt: skip
    run("req", "-new", *curve, "-keyout", str(key), "-out", str(csr), "-subj", "/CN=127.0.0.1")
    ext.write_text(
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
        "authorityKeyIdentifier=keyid,issuer\nsubjectKeyIdentifier=hash\n"
    )
    run("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
        "-out", str(cert), "-days", "2", "-extfile", str(ext))  # fmt: skip
    return ca, cert, key


@dataclass
class Served:
    """What the HTTPS server answers: ``files`` by path; ``redirects`` maps a path to a Location."""

    files: dict[str, bytes] = field(default_factory=dict)
    redirects: dict[str, str] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)


class HttpsServer:
    def __init__(self, directory: Path, served: Served) -> None:
        self.ca, cert, key = certificates(directory)
        self.served = served

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                served.requests.append(self.path)
                if self.path in served.redirects:
                    self.send_response(302)
                    self.send_header("Location", served.redirects[self.path])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = served.files.get(self.path)
                self.send_response(200 if body is not None else 404)
                body = body if body is not None else b"not here"
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key)
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class ConnectProxy:
    """An HTTP proxy that tunnels ``CONNECT`` and records every request line it is sent; any other
    method (a plain-HTTP request through it) is recorded and answered 502."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        lines = self.lines

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                head = b""
                while b"\r\n\r\n" not in head:
                    piece = self.request.recv(4096)
                    if not piece:
                        return
                    head += piece
                line = head.split(b"\r\n", 1)[0].decode("latin-1")
                lines.append(line)
                method, target = line.split()[:2]
                if method != "CONNECT":
                    self.request.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                    return
                host, port = target.rsplit(":", 1)
                with socket.create_connection((host, int(port)), timeout=30) as upstream:
                    self.request.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    ends = [self.request, upstream]
                    while True:
                        ready, _, _ = select.select(ends, [], [], 30)
                        if not ready:
                            return
                        for end in ready:
                            data = end.recv(65536)
                            if not data:
                                return
                            (upstream if end is self.request else self.request).sendall(data)

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
