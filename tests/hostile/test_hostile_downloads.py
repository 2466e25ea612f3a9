"""Hostile servers: redirects off HTTPS, endless or lying bodies, a byte every few seconds, a full
disk, no DNS. Each download is refused with its own error, stops within its bounds, and keeps a
``.part`` only where the message says it can be resumed. The server is real (tests/fakenvidia.py
on 127.0.0.1). HTTPS that redirects to plain HTTP is refused in tests/test_transport.py, against a
real HTTPS server."""

from __future__ import annotations

import subprocess
import sys

import pytest
import wheelhouse
from fakenvidia import serve_fake_nvidia
from hangguard import hang_guard

from tfgpu.datasource import transport
from tfgpu.engines import download
from tfgpu.errors import OperationError, UsageError

pytestmark = pytest.mark.skipif(not wheelhouse.have_compiler(), reason="gcc builds the fake libraries")


@pytest.fixture
def fake(tmp_path, monkeypatch):
    monkeypatch.setattr(transport, "sleep", lambda seconds: None)
    server = serve_fake_nvidia(tmp_path, cuda="12.2.2", cudnn="8.9.7.29")
    yield server
    server.close()


def leftovers(directory):
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


def fetch(fake, tmp_path, **kwargs):
    values = {"sha256": fake.runfile_sha256, "retries": 1} | kwargs
    return download.fetch(fake.runfile_url, tmp_path / "cache", **values)


def test_redirect_to_plain_http_elsewhere_is_refused(fake, tmp_path):
    fake.faults.redirect_to = "http://downloads.example.com/cuda.run"
    with pytest.raises(UsageError) as caught:
        fetch(fake, tmp_path)
    assert caught.value.code == "insecure-url" and "downloads.example.com" in caught.value.message
    assert leftovers(tmp_path / "cache") == []


def test_redirect_on_the_same_loopback_server_is_followed_and_verified(fake, tmp_path):
    fake.faults.redirect_to = f"/redirected/{fake.runfile.name}"
    path = fetch(fake, tmp_path)
    assert path.read_bytes() == fake.runfile.read_bytes()
    assert [status for _, _, status in fake.requests] == [302, 200]


def test_endless_body_stops_at_the_recorded_size_and_keeps_nothing(fake, tmp_path):
    fake.faults.endless = True
    size = fake.runfile.stat().st_size
    with pytest.raises(OperationError) as caught:
        fetch(fake, tmp_path, size=size)
    assert caught.value.code == "download-too-large" and "Nothing was kept" in caught.value.message
    assert leftovers(tmp_path / "cache") == []


def test_endless_body_of_unknown_size_stops_at_the_cap(fake, tmp_path, monkeypatch):
    monkeypatch.setattr(download, "MAX_UNKNOWN", 2 << 20)
    fake.faults.endless = True
    with hang_guard("a download from a server that never stops sending"), pytest.raises(OperationError) as caught:
        fetch(fake, tmp_path)
    assert caught.value.code == "download-too-large"
    assert leftovers(tmp_path / "cache") == []


def test_announced_length_above_the_recorded_size_is_refused_before_reading(fake, tmp_path):
    fake.faults.announce = 50 << 20
    with pytest.raises(OperationError) as caught:
        fetch(fake, tmp_path, size=fake.runfile.stat().st_size)
    assert caught.value.code == "download-too-large" and str(50 << 20) in caught.value.message
    assert leftovers(tmp_path / "cache") == []


@pytest.mark.slow
def test_a_byte_every_few_seconds_is_given_up_on(fake, tmp_path, monkeypatch):
    monkeypatch.setattr(download, "GRACE", 1.0)
    fake.faults.drip = 0.3
    # The server drips a byte every 0.3 s for as long as the file lasts (hours): ending at all is the point.
    with hang_guard("a download from a server that drips a byte at a time"), pytest.raises(OperationError) as caught:
        fetch(fake, tmp_path, retries=1)
    assert caught.value.code == "download-failed" and "stalled" in caught.value.message
    # The server takes no range requests, so the bytes could not be resumed: none are kept.
    assert "Nothing was kept" in caught.value.message and leftovers(tmp_path / "cache") == []


def test_a_cut_transfer_from_a_server_with_ranges_is_kept_and_said_so(fake, tmp_path):
    fake.faults.truncate_after = 100_000
    fake.faults.status_503 = 0
    with pytest.raises(OperationError) as caught:
        fetch(fake, tmp_path, retries=0)
    assert "kept in" in caught.value.message and "resumed next time" in caught.value.message
    assert leftovers(tmp_path / "cache") == [f"{fake.runfile.name}.part"]
    path = fetch(fake, tmp_path)  # the next run resumes it
    assert path.read_bytes() == fake.runfile.read_bytes() and fake.requests[-1][2] == 206


def test_a_server_without_ranges_starts_over_after_a_cut(fake, tmp_path):
    fake.faults.truncate_after, fake.faults.no_ranges = 100_000, True
    path = fetch(fake, tmp_path)
    assert path.read_bytes() == fake.runfile.read_bytes()
    assert [rng == "" for _, rng, _ in fake.requests] == [True, True]


def test_a_full_disk_stops_at_once_and_keeps_nothing(fake, tmp_path):
    """The file-size limit of a child process stands in for a full disk (same EFBIG/ENOSPC path)."""
    program = (
        "import resource, signal, sys\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, resource.RLIM_INFINITY))\n"
        "from pathlib import Path\nfrom tfgpu.doors import urls\nfrom tfgpu.engines import download\n"
        "from tfgpu.errors import TfgpuError\nurls.trust(['127.0.0.1'])\n"
        "try:\n"
        f"    download.fetch({fake.runfile_url!r}, Path({str(tmp_path / 'cache')!r}), sha256={fake.runfile_sha256!r})\n"
        "except TfgpuError as error:\n"
        "    print(error.code); print(error.message)\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    code, message = done.stdout.splitlines()[:2]
    assert code == "download-failed" and "Writing" in message and "Nothing was kept" in message
    assert leftovers(tmp_path / "cache") == []
    assert len(fake.requests) == 1  # a full disk is not retried


def test_no_dns_names_the_offline_route_and_does_not_retry(tmp_path, monkeypatch):
    slept = []
    monkeypatch.setattr(transport, "sleep", slept.append)
    with pytest.raises(OperationError) as caught:
        download.fetch("https://cuda-downloads.invalid/cuda.run", tmp_path / "cache", sha256="0" * 64)
    assert caught.value.code == "download-unreachable" and "--offline" in " ".join(caught.value.alternatives)
    assert slept == [] and leftovers(tmp_path / "cache") == []
