"""The readers of uv's and pip's download bars on output no download draws: a bar whose size is
``99999999999999 GiB`` (or pip's raw line with thirty digits), or whose numbers are digits of
another script. Such a bar is not read (no numbers), never shown as a download's true total.
The readers are fed the text uv and pip would draw; the tool's own bar board takes what they say.
"""

from __future__ import annotations

from tfgpu.cli.render.bars import Board
from tfgpu.engines.pip_progress import PipProgress
from tfgpu.engines.uv_progress import UvProgress

HEADER = "Preparing packages... (0/1)\n"


def test_a_uv_bar_claiming_more_than_any_download_shows_no_total():
    board = Board("install")
    reader = UvProgress(board)
    reader.feed(HEADER + "torch ---------- 1 GiB/99999999999999 GiB\n" + HEADER)
    assert reader.downloads == {} and board.transfers == {}


def test_a_uv_bar_in_another_scripts_digits_is_not_read():
    reader = UvProgress(Board("install"))
    reader.feed(HEADER + "torch ---------- ١٢ MiB/٣٤ MiB\n" + HEADER)
    assert reader.downloads == {}


def test_a_real_sized_uv_bar_is_still_read():
    reader = UvProgress(Board("install"))
    reader.feed(HEADER + "torch ---------- 1.00 GiB/2.00 GiB\n" + HEADER)
    assert reader.downloads == {"torch": (1 << 30, 2 << 30)}


def test_a_pip_line_claiming_more_than_any_download_shows_no_total():
    board = Board("install")
    reader = PipProgress(board)
    reader.feed("Downloading https://x/t-1-py3-none-any.whl (1 MB)\nProgress 5 of " + "9" * 30 + "\n")
    reader.feed("Downloading https://x/u-1-py3-none-any.whl (1 MB)\n━━━ 1.0/999999999999999.9 EB\n")
    reader.finish()
    assert reader.downloads == {} and board.transfers == {}
