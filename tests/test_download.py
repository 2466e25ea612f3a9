"""tfgpu.engines.download against a real local HTTP server with injected faults (tests/fakenvidia.py)."""

from __future__ import annotations

import hashlib

import pytest
import wheelhouse
from fakenvidia import serve_fake_nvidia

from tfgpu.datasource import transport
from tfgpu.engines import download
from tfgpu.errors import ImpossibleError, OperationError, UsageError
from tfgpu.progress import RecordingReporter

pytestmark = pytest.mark.skipif(not wheelhouse.have_compiler(), reason="gcc builds the fake libraries")


@pytest.fixture
def fake(tmp_path, monkeypatch):
    monkeypatch.setattr(transport, "sleep", lambda seconds: None)  # backoff without waiting
    server = serve_fake_nvidia(tmp_path, cuda="12.2.2", cudnn="8.9.7.29")
    yield server
    server.close()


def get(fake, tmp_path, reporter=None, **kwargs):
    return download.fetch(fake.runfile_url, tmp_path / "cache", sha256=fake.runfile_sha256, reporter=reporter, **kwargs)


def test_download_is_verified_and_cached(fake, tmp_path):
    path = get(fake, tmp_path)
    assert path.read_bytes() == fake.runfile.read_bytes()
    assert not (tmp_path / "cache" / f"{path.name}.part").exists()
    reporter = RecordingReporter()
    assert get(fake, tmp_path, reporter) == path
    assert len(fake.requests) == 1  # the second call used the cache
    assert any("already downloaded and verified" in e[1] for e in reporter.events if e[0] == "note")
    assert download.is_cached(fake.runfile_url, tmp_path / "cache", sha256=fake.runfile_sha256)


def test_vendor_md5_is_accepted_where_no_sha256(fake, tmp_path):
    md5 = hashlib.md5(fake.runfile.read_bytes()).hexdigest()
    path = download.fetch(fake.runfile_url, tmp_path / "cache", md5=md5)
    assert path.read_bytes() == fake.runfile.read_bytes()


def test_truncated_transfer_resumes_with_range(fake, tmp_path):
    fake.faults.truncate_after = 100_000
    reporter = RecordingReporter()
    path = get(fake, tmp_path, reporter)
    assert path.read_bytes() == fake.runfile.read_bytes()
    first, second = fake.requests
    assert first[1:] == ("", 200)
    assert second[1].startswith("bytes=") and int(second[1][6:-1]) > 0 and second[2] == 206
    assert any("retrying" in e[1] for e in reporter.events if e[0] == "note")


def test_corrupted_bytes_are_refused_and_deleted(fake, tmp_path):
    fake.faults.corrupt = True
    with pytest.raises(OperationError) as caught:
        get(fake, tmp_path)
    assert caught.value.code == "checksum-mismatch"
    assert "sha256" in caught.value.message and fake.runfile.name in caught.value.message
    assert list((tmp_path / "cache").iterdir()) == []  # nothing left, not even the .part


def test_corrupted_resume_is_retried_from_scratch_once(fake, tmp_path):
    fake.faults.truncate_after = 100_000
    fake.faults.corrupt = True
    with pytest.raises(OperationError, match="failed its sha256 check"):
        get(fake, tmp_path)
    ranges = [r for _, r, _ in fake.requests]
    assert ranges[0] == "" and ranges[1].startswith("bytes=") and ranges[-1] == ""


def test_server_errors_are_retried_then_reported(fake, tmp_path):
    fake.faults.status_503 = 2
    assert get(fake, tmp_path, retries=4).is_file()
    assert [s for _, _, s in fake.requests] == [503, 503, 200]


def test_persistent_server_errors_fail_clearly(fake, tmp_path):
    fake.faults.status_503 = 100
    with pytest.raises(OperationError) as caught:
        get(fake, tmp_path, retries=2)
    message = caught.value.message
    assert caught.value.code == "download-failed"
    assert fake.runfile_url in message and "3 attempts" in message and "HTTP 503" in message
    assert len(fake.requests) == 3


def test_missing_file_is_not_retried(fake, tmp_path):
    with pytest.raises(OperationError, match="HTTP 404"):
        download.fetch(fake.base_url + "/nope.run", tmp_path / "cache", sha256="0" * 64)
    assert len(fake.requests) == 1


def test_slow_server_still_reports_progress(fake, tmp_path, monkeypatch):
    monkeypatch.setattr(download, "PROGRESS_EVERY", 0.05)
    fake.faults.trickle = 0.003
    reporter = RecordingReporter()
    get(fake, tmp_path, reporter)
    moved = reporter.transfers(fake.runfile.name)
    assert len(moved) >= 3, moved
    assert [done for done, _ in moved] == sorted(done for done, _ in moved)  # bytes only grow
    assert moved[-1] == (fake.runfile.stat().st_size, fake.runfile.stat().st_size)


def test_refuses_plain_http_and_unverifiable_files(tmp_path):
    with pytest.raises(UsageError) as caught:
        download.fetch("http://example.com/cuda.run", tmp_path, sha256="0" * 64)
    assert caught.value.code == "insecure-url"
    with pytest.raises(ImpossibleError) as caught:
        download.fetch("https://example.com/cuda.run", tmp_path)
    assert caught.value.code == "unverified-download"
    assert not any(tmp_path.iterdir())


def test_reading_a_checksum_loads_no_http_or_tls_module(tmp_path):
    """Bundles and conda archives are checked offline: file_digest must not pay for urllib, http.client
    and ssl, which only a download needs (they load with the transport, inside the download)."""
    import subprocess
    import sys

    sample = tmp_path / "sample.bin"
    sample.write_bytes(b"x" * 1024)
    program = (
        "import sys\n"
        "from tfgpu.engines.download import file_digest\n"
        f"file_digest({str(sample)!r})\n"
        "print(sorted(m for m in ('http.client', 'ssl', 'urllib.request') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
