"""The file a download is saved as is the last segment of its URL (a mirror's URL comes from a
``TFGPU_DATA_DIR`` overlay): a URL ending in ``/..`` or ``/.``, or whose last segment is longer
than a file name may be, names no file in the cache. Refused as ``bad-url`` naming the URL before
anything is fetched or deleted, instead of a traceback (``IsADirectoryError`` on ``cache/..``,
``File name too long``). No server is reached: the refusal comes first."""

from __future__ import annotations

import pytest

from tfgpu.engines import download
from tfgpu.errors import UsageError


@pytest.mark.parametrize(
    "url", ["https://127.0.0.1:9/cuda/..", "https://127.0.0.1:9/cuda/.", "https://127.0.0.1:9/" + "a" * 300 + ".run"]
)
def test_a_url_whose_last_segment_is_no_file_name_is_refused(tmp_path, url):
    cache = tmp_path / "cache"
    with pytest.raises(UsageError) as caught:
        download.fetch(url, cache, sha256="0" * 64, retries=0)
    assert caught.value.code == "bad-url" and "file name" in caught.value.message
    assert not download.is_cached(url, cache, sha256="0" * 64)
    assert list(tmp_path.iterdir()) == []  # not even the cache directory was made
