"""A re-signed conda lock whose package file name walks out of its channel once a server decodes
it: ``..%2F..%2Fother%2Flinux-64%2Fpkg``, ``%2e%2e%2F...``, ``..%5C...``. The text still starts with
the channel's ``/<subdir>/``, but Python's http.server (and many proxies) decode the path before
resolving it, so the archive would come from another directory of the host. Every reader refuses
it (``lock-url-outside-channel``, exit 2) before anything is fetched or written. The lock is a real
one, made from tests/condachannel.py's channel; the checksum is recomputed as anyone can.
"""

from __future__ import annotations

import pytest

from .conftest import changed, snapshot


@pytest.fixture
def conda_lock(tmp_path, tmp_path_factory, lock_channel, lock_index, monkeypatch):
    """The real lock, made once a session and copied here (tests/madelocks.py): each case edits its own."""
    import madelocks

    path = madelocks.conda_lock(tmp_path_factory, tmp_path / "conda-lock.yml", lock_channel, lock_index)
    monkeypatch.setenv("TFGPU_INDEX_URL", lock_index)
    monkeypatch.setenv("TFGPU_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TFGPU_LOG_DIR", str(tmp_path / "logs"))
    return path


def _walk_out(path, name: str) -> None:
    """The first conda package's file name replaced by ``name`` (``{file}``: the real one), re-signed."""
    from conda_lock.lockfile import parse_conda_lock_file

    from tfgpu.lock.conda.write import model_digest

    lockfile = parse_conda_lock_file(path)
    recorded = lockfile.metadata.custom_metadata["tfgpu_packages_sha256"]
    url = str(next(p for p in lockfile.package if p.manager == "conda").url)
    base, file = url.rsplit("/", 1)
    text = path.read_text().replace(url, f"{base}/{name.format(file=file)}")
    path.write_text(text)
    path.write_text(text.replace(recorded, model_digest(parse_conda_lock_file(path))))


ESCAPES = [
    "..%2F..%2Fother%2Flinux-64%2F{file}",
    "%2e%2e%2F%2E%2E%2Fother%2Flinux-64%2F{file}",
    "..%5C..%5Cother%5Clinux-64%5C{file}",
    "%2e%2e",
]


@pytest.mark.parametrize("name", ESCAPES)
@pytest.mark.parametrize("command", ["check", "script", "create"])
def test_a_package_name_that_decodes_out_of_its_channel_is_refused(cli, sandbox, conda_lock, name, command):
    _walk_out(conda_lock, name)
    before = snapshot(sandbox)
    argv = {
        "check": ("lock", "--check", str(conda_lock)),
        "script": ("script", "--format", "bash", "--from-lock", str(conda_lock), "-o", str(sandbox / "x.sh")),
        "create": ("create", "--from-lock", str(conda_lock), "--prefix", str(sandbox / "env"), "--no-verify", "--yes"),
    }[command]
    done = cli(*argv, "--json")
    assert (done.code, done.error) == (2, "lock-url-outside-channel"), done.out
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []


def test_the_lock_as_written_is_still_read(cli, sandbox, conda_lock):
    done = cli("lock", "--check", str(conda_lock), "--json")
    assert done.code == 0, done.out
