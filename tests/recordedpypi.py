"""tests/pypifixture.py's recorded PyPI, its recordings read once per test process.

Reading ``ranges.tar.xz`` and deflating the fatbin images into streams costs about two CPU-seconds
per ``pypifixture.serve()``; the recordings are only ever read, so every server started here shares
one copy. Each server still gets its own handler class: its own request log and index directory,
so a test sees only its own requests.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pypifixture


@functools.cache
def recordings() -> tuple[dict, dict]:
    """``(ranges, members)`` as :func:`pypifixture.serve` loads them (shared: do not change them)."""
    handler = pypifixture.serve().handler
    return handler.ranges, handler.members


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
