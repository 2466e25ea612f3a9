"""The listing a repair takes of uv's areas before uv runs, and the sweep that takes out what an
interrupted install wrote (``tfgpu.repair.listing``); the journal check of a listing; doctor's
finding for an interrupted repair. Plain directories stand in for an env here: the real uv and
real signals are in tests/test_repair_interrupts.py."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from tfgpu.errors import ImpossibleError
from tfgpu.repair import listing


def _env(tmp_path: Path) -> tuple[Path, Path]:
    prefix = tmp_path / "env"
    site = prefix / "lib" / "python3.11" / "site-packages"
    (site / "tensorflow").mkdir(parents=True)
    (site / "tensorflow" / "__init__.py").write_text("x = 1\n")
    (prefix / "bin").mkdir()
    (prefix / "bin" / "python").symlink_to("/usr/bin/python3")
    return prefix, site


CUDNN = ("nvidia-cudnn-cu12", "9.28.0.42")


def _cached_wheel(cache: Path) -> Path:
    """The wheel as uv's cache keeps it unpacked (``archive-v0/<id>/``), its RECORD with sha256s."""
    entry = cache / listing.ARCHIVES / "Xy12AbCd"
    (entry / "nvidia" / "cudnn" / "lib").mkdir(parents=True)
    (entry / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9").write_bytes(b"\x7fELF")
    info = entry / "nvidia_cudnn_cu12-9.28.0.42.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Name: nvidia-cudnn-cu12\nVersion: 9.28.0.42\n")
    digest = base64.urlsafe_b64encode(hashlib.sha256(b"\x7fELF").digest()).rstrip(b"=").decode()
    (info / "RECORD").write_text(
        f"nvidia/cudnn/lib/libcudnn.so.9,sha256={digest},4\n"
        "nvidia_cudnn_cu12-9.28.0.42.dist-info/METADATA,,\nnvidia_cudnn_cu12-9.28.0.42.dist-info/RECORD,,\n"
    )
    return cache


def _half_install(site: Path) -> None:
    """What uv leaves of nvidia-cudnn-cu12 when it is stopped while writing its own RECORD: the
    wheel's file copied from its cache (``_cached_wheel``), uv's own notes in its ``.dist-info``."""
    (site / "nvidia" / "cudnn" / "lib").mkdir(parents=True)
    (site / "nvidia" / "cudnn" / "include").mkdir()  # empty: in no RECORD
    (site / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9").write_bytes(b"\x7fELF")
    info = site / "nvidia_cudnn_cu12-9.28.0.42.dist-info"
    info.mkdir()
    (info / "REQUESTED").write_text("")
    (info / ".tmpAbC123").write_text("nvidia/cudnn/lib/libcudnn.so.9,,\n")


def _tree(prefix: Path) -> list[str]:
    return sorted(str(p.relative_to(prefix)) for p in prefix.rglob("*"))


def test_the_sweep_takes_out_a_half_written_install_and_nothing_that_was_there(tmp_path):
    prefix, site = _env(tmp_path)
    before = _tree(prefix)
    taken = listing.take(prefix, site)
    _half_install(site)
    cache = _cached_wheel(tmp_path / "uv-cache")
    done = listing.sweep(prefix, site, taken, {"nvidia-cudnn-cu12"}, set(), cache=cache, wanted={CUDNN})
    assert _tree(prefix) == before
    assert "lib/python3.11/site-packages/nvidia_cudnn_cu12-9.28.0.42.dist-info/.tmpAbC123" in done.removed
    assert "lib/python3.11/site-packages/nvidia/cudnn/include/" in done.removed
    assert done.missing == ()


def test_the_sweep_keeps_a_package_the_user_installed_since(tmp_path):
    prefix, site = _env(tmp_path)
    taken = listing.take(prefix, site)
    _half_install(site)
    (site / "somepkg").mkdir()
    (site / "somepkg" / "__init__.py").write_text("VALUE = 1\n")
    info = site / "somepkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Name: somepkg\nVersion: 1.0\n")
    (info / "RECORD").write_text(
        "somepkg/__init__.py,,\nsomepkg-1.0.dist-info/METADATA,,\nsomepkg-1.0.dist-info/RECORD,,\n"
    )
    cache = _cached_wheel(tmp_path / "uv-cache")
    listing.sweep(prefix, site, taken, {"nvidia-cudnn-cu12"}, set(), cache=cache, wanted={CUDNN})
    assert (site / "somepkg" / "__init__.py").read_text() == "VALUE = 1\n"
    assert (info / "RECORD").exists()
    assert not (site / "nvidia").exists() and not list(site.glob("nvidia_*"))


def test_the_sweep_leaves_what_the_journal_restores_and_what_is_older_than_the_listing(tmp_path):
    prefix, site = _env(tmp_path)
    (prefix / "bin" / "mine").write_text("the user's, there before\n")
    taken = listing.take(prefix, site)
    taken["paths"].pop("bin/mine")  # a listing that lost an entry: the file's inode is older than it
    taken["taken_ns"] += 2 * listing.SLACK_NS  # (as if made well before: no sleeping in a test)
    (prefix / "bin" / "ptxas").symlink_to("../lib/python3.11/site-packages/nvidia/cuda_nvcc/bin/ptxas")
    listing.sweep(prefix, site, taken, set(), {"bin/ptxas"})
    assert (prefix / "bin" / "mine").exists()
    assert (prefix / "bin" / "ptxas").is_symlink()


def test_a_path_gone_since_the_listing_is_reported(tmp_path):
    prefix, site = _env(tmp_path)
    taken = listing.take(prefix, site)
    (site / "tensorflow" / "__init__.py").unlink()
    done = listing.sweep(prefix, site, taken, set(), set())
    assert done.missing == ("lib/python3.11/site-packages/tensorflow/__init__.py",)


def test_undoing_a_finished_repair_takes_out_only_empty_directories_its_packages_made(tmp_path):
    prefix, site = _env(tmp_path)
    taken = listing.take(prefix, site)
    (site / "nvidia" / "cublas" / "lib").mkdir(parents=True)
    (site / "mine.txt").write_text("written after the repair\n")
    assert listing.empty_dirs(prefix, site, taken) == [
        "lib/python3.11/site-packages/nvidia/cublas/lib/",
        "lib/python3.11/site-packages/nvidia/cublas/",
        "lib/python3.11/site-packages/nvidia/",
    ]
    assert (site / "mine.txt").exists()


@pytest.mark.parametrize(
    "bad",
    [
        {"taken_ns": "now", "paths": {}},
        {"taken_ns": 0, "paths": ["a"]},
        {"taken_ns": 0, "paths": {"../outside": "dir"}},
        {"taken_ns": 0, "paths": {"/etc/passwd": "file 1"}},
        {"taken_ns": 0, "paths": {"bin": 3}},
    ],
)
def test_a_journal_with_a_listing_this_tool_does_not_write_is_refused(tmp_path, bad):
    from tfgpu.repair.journal import FORMAT, check_journal

    journal = {
        "tool": "tfgpu-install",
        "format": FORMAT,
        "prefix": os.path.realpath(tmp_path),
        "files": {},
        "written": {},
        "intended": [],
        "added": [],
        "before": {},
        "listing": bad,
    }
    with pytest.raises(ImpossibleError) as raised:
        check_journal(tmp_path, journal)
    assert raised.value.code == "repair-journal-foreign"


@pytest.mark.parametrize("state", ["applying", "done", None])
def test_doctor_names_an_interrupted_repair_and_its_undo(tmp_path, state):
    from tfgpu.doctor.env_checks import repair_journal

    if state is not None:
        (tmp_path / "etc" / "tfgpu").mkdir(parents=True)
        (tmp_path / "etc" / "tfgpu" / "repair.json").write_text(json.dumps({"state": state}))
    found = repair_journal(SimpleNamespace(root=tmp_path))
    if state != "applying":
        assert found == []
        return
    [finding] = found
    assert (finding.id, finding.status) == ("env.repair", "fail")
    assert "interrupted" in finding.title
    assert f"tfgpu-install repair --undo --prefix {tmp_path}" in finding.fix


def test_doctor_looks_for_the_journal_where_repair_writes_it():
    from tfgpu.doctor.env_checks import REPAIR_JOURNAL
    from tfgpu.repair.survey import JOURNAL

    assert REPAIR_JOURNAL == JOURNAL
