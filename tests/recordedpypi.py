"""tests/pypifixture.py's recorded PyPI, its recordings read once per test process.

Reading ``ranges.tar.xz`` and deflating the fatbin images into streams costs about two CPU-seconds
per ``pypifixture.serve()``; the recordings are only ever read, so every server started here shares
one copy. Each server still gets its own handler class: its own request log and index directory,
so a test sees only its own requests.
"""

from __future__ import annotations

import functools
import tarfile
from pathlib import Path

import pypifixture


@functools.cache
def images() -> dict[str, dict]:
    """:func:`pypifixture.load_images` (shared: do not change it)."""
    return pypifixture.load_images()


@functools.cache
def recordings() -> tuple[dict, dict]:
    """``(ranges, members)`` as :func:`pypifixture.serve` loads them (shared: do not change them)."""
    ranges: dict[str, list[tuple[int, int, bytes]]] = {}
    with tarfile.open(pypifixture.FIXTURE / "ranges.tar.xz") as tar:
        for member in tar.getmembers():
            filename, span = member.name.split("/")
            start, end = map(int, span.split("-"))
            ranges.setdefault(filename, []).append((start, end, tar.extractfile(member).read()))
    members = {
        wheel: (image["data_start"], pypifixture.deflate_image(image["pieces"], image["inflated_size"]))
        for wheel, image in images().items()
    }
    return ranges, members


def serve(index_dir: Path | None = None):
    """As :func:`pypifixture.serve`: a context manager yielding the ``.../pypi`` root URL; its
    ``handler`` (the class answering, with its own ``requests`` log) may be subclassed before entry."""
    ranges, members = recordings()
    handler = type(
        "Handler",
        (pypifixture.RecordedIndex,),
        {
            "ranges": ranges,
            "members": members,
            "index_dir": index_dir or pypifixture.FIXTURE / "index",
            "requests": [],
        },
    )
    return pypifixture._Running(handler)
