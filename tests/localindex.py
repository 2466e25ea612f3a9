"""A real PEP 503 package index over HTTP on the loopback address, serving a wheel directory.

It stands in for PyPI at the network boundary only: uv resolves against it and the bundle
downloader fetches from it exactly as from https://pypi.org/simple.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import threading
import time
import zipfile
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def build_index(wheels: Path, root: Path, metadata: bool = False) -> Path:
    """``root/simple/<project>/index.html`` and ``root/files/<wheel>`` for every wheel in ``wheels``.
    ``metadata``: each wheel's METADATA beside it (``<wheel>.metadata``, PEP 658, as PyPI serves it),
    so that a resolver reads it instead of downloading the wheel."""
    files = root / "files"
    files.mkdir(parents=True, exist_ok=True)
    projects: dict[str, list[str]] = {}
    for wheel in sorted(wheels.glob("*.whl")):
        shutil.copy2(wheel, files / wheel.name)
        project = re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        core = ""
        if metadata:
            with zipfile.ZipFile(wheel) as archive:
                found = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
                data = archive.read(found)
            (files / f"{wheel.name}.metadata").write_bytes(data)
            core = f' data-core-metadata="sha256={hashlib.sha256(data).hexdigest()}"'
        link = f'<a href="../../files/{wheel.name}#sha256={digest}"{core}>{wheel.name}</a>'
        projects.setdefault(project, []).append(link)
    for project, links in projects.items():
        page = root / "simple" / project / "index.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text("<!DOCTYPE html><html><body>\n" + "<br>\n".join(links) + "\n</body></html>\n")
    (root / "simple" / "index.html").write_text(
        "<html><body>" + "".join(f'<a href="{p}/">{p}</a>' for p in projects) + "</body></html>\n"
    )
    return root


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):  # noqa: D102 - keep test output clean
        pass


class _Dripping(_Quiet):
    """Sends a file in pieces with a pause after each (``pause``), or at ``rate`` bytes a second per
    file: a slow server, for tests of progress. Counts the bytes of every file it sent (``sent``)."""

    pause = 0.0
    rate = 0
    piece = 1 << 14
    sent: dict[str, int] = {}

    def copyfile(self, source, outputfile):  # noqa: D102 - SimpleHTTPRequestHandler's hook
        began, moved = time.monotonic(), 0
        while piece := source.read(self.piece):
            outputfile.write(piece)
            outputfile.flush()
            moved += len(piece)
            self.sent[self.path] = self.sent.get(self.path, 0) + len(piece)
            if self.rate:
                time.sleep(max(0.0, began + moved / self.rate - time.monotonic()))
            else:
                time.sleep(self.pause)


class Server:
    """``with Server(root) as url:`` serves ``root`` on 127.0.0.1; ``url`` is the index URL.
    ``drip``: seconds to pause after every ``piece`` bytes (16 KiB) of a file, pages included (a slow
    server; ``piece=1`` a trickle); ``rate``: bytes a second each file is sent at (a throttled
    server). ``sent``: bytes sent of every file, by URL path (with ``drip`` or ``rate``)."""

    def __init__(self, root: Path, drip: float = 0.0, rate: int = 0, piece: int = 1 << 14) -> None:
        self.sent: dict[str, int] = {}
        slow = {"pause": drip, "rate": rate, "sent": self.sent, "piece": piece}
        handler = type("_Drip", (_Dripping,), slow) if drip or rate else _Quiet
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(handler, directory=str(root)))
        # A short poll interval: shutdown() waits for the next poll (the default 0.5 s, per test).
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/simple"

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> str:
        self.thread.start()
        return self.url

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def remembered_index(tmp_path: Path, cache: Path, dist: str, version: str, python: str) -> str:
    """The URL of an index that an earlier online run against it left in the uv cache ``cache``, and
    that is gone now. It offers ``dist`` ``version`` as a wheel that ranks higher for ``python``
    (``py311-none-any`` over a wheel directory's ``py3-none-any``, as PyPI's newer manylinux wheels
    outrank a directory's older ones), and an older release, which that run chose: the cache holds
    the index's page of ``dist`` and the older release's files, not ``version``'s."""
    import wheelhouse

    from tfgpu.engines.uv import find_uv

    served = tmp_path / "remembered-wheels"
    tag = f"py{python.replace('.', '')}-none-any"
    wheelhouse.wheel(served, dist, version, {"from_the_index.txt": b"never fetched\n"}, tag=tag)
    wheelhouse.wheel(served, dist, "0.1", {"from_the_index.txt": b"an older release\n"})
    root = build_index(served, tmp_path / "remembered-index")
    earlier = tmp_path / "earlier.in"
    earlier.write_text(f"{dist}<{version}\n")
    online = (find_uv(), "pip", "compile", str(earlier), "--no-config", "--python", sys.executable, "--quiet")
    with Server(root) as url:
        done = subprocess.run(
            [*online, "--default-index", url, "--cache-dir", str(cache)], capture_output=True, text=True, timeout=120
        )
    assert done.returncode == 0 and f"{dist}==0.1" in done.stdout, done.stderr
    return url
