"""doctor's reads of an env's files are bounded: a file two RECORDs own is compared by size first,
hashed only if it is a regular file and fits what is left of the run's budget, and said to be "not
checked" otherwise; each library's ELF data is read once a run, however many rows name it.

Envs here are the directory layout pip leaves (``lib/python3.11/site-packages``, dist-info RECORDs
with sha256 and size), the hostile files real: a 20 GB sparse file, a FIFO, a gcc-built library.
"""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import wheelhouse

from tfgpu.detect import probe
from tfgpu.detect.recorded import RecordedSystem
from tfgpu.detect.system import PlatformFacts
from tfgpu.doctor import elf, ownership, run_doctor
from tfgpu.doctor import reads as doctor_reads

SHARED = "nvidia/nccl/lib/libnccl.so.2"
OWNERS = ("nvidia_nccl_cu12-2.32.3", "nvidia_nccl_cu13-2.32.3")


def host():
    return probe(RecordedSystem(facts=PlatformFacts(system="Linux", machine="x86_64", python="3.11", glibc="2.36")))


def record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def env_owning_twice(prefix: Path, rows: dict[str, tuple[str, int]]) -> Path:
    """A venv layout whose two NCCL distributions (one per CUDA stack) both list SHARED in their
    RECORD; ``rows``: dist-info name -> (hash field, size). Returns site-packages."""
    site = prefix / "lib" / "python3.11" / "site-packages"
    (site / SHARED).parent.mkdir(parents=True)
    (prefix / "bin").mkdir()
    (prefix / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.11.0\n")
    for name, (digest, size) in rows.items():
        (site / f"{name}.dist-info").mkdir()
        (site / f"{name}.dist-info" / "RECORD").write_text(f"{SHARED},{digest},{size}\n{name}.dist-info/RECORD,,\n")
    return site


def mixed(report) -> dict:
    return {f.id: f for f in report.findings if f.id.startswith("mixed.")}


def count_hashed(monkeypatch) -> list[int]:
    """The byte counts doctor's reader feeds its sha256, one entry per block (filled as it hashes)."""
    fed: list[int] = []

    class Counting:
        def __init__(self):
            self._digest = hashlib.sha256()

        def update(self, block):
            fed.append(len(block))
            self._digest.update(block)

        def hexdigest(self):
            return self._digest.hexdigest()

    monkeypatch.setattr(doctor_reads, "hashlib", SimpleNamespace(sha256=Counting))
    return fed


def test_a_20_gb_sparse_file_owned_twice_is_not_hashed_and_doctor_says_so(tmp_path, monkeypatch):
    size = 20 * 1024**3
    site = env_owning_twice(
        tmp_path / "env", {OWNERS[0]: (record_hash(b"a"), size), OWNERS[1]: (record_hash(b"b"), size)}
    )
    with open(site / SHARED, "wb") as sparse:
        sparse.truncate(size)
    hashed = count_hashed(monkeypatch)
    report = run_doctor(root=tmp_path / "env", host=host(), environ={})
    assert hashed == [], "a file past the run's budget was read to be hashed"
    finding = mixed(report)["mixed.shared-files"]
    assert finding.status == "warn" and "not checked" in finding.title
    [line] = [e for e in finding.evidence if e.startswith(SHARED)]
    assert "not checked (too large: 21,474,836,480 bytes" in line


def test_a_size_no_record_lists_decides_without_reading_a_byte(tmp_path):
    data = b"\x7fELF not the bytes either wheel ships"
    site = env_owning_twice(tmp_path / "env", {OWNERS[0]: (record_hash(b"a"), 5), OWNERS[1]: (record_hash(b"b"), 6)})
    (site / SHARED).write_bytes(data)
    from tfgpu.doctor.reads import RunReads

    reads = RunReads()
    [item] = ownership.shared_files(site, reads=reads)
    assert reads.hashed == 0 and item.on_disk is None and item.size == len(data)
    assert item.winners == () and set(item.losers) == {"nvidia-nccl-cu12 2.32.3", "nvidia-nccl-cu13 2.32.3"}
    line = next(
        e for e in mixed(run_doctor(root=tmp_path / "env", host=host(), environ={}))["mixed.shared-files"].evidence
    )
    assert f"its size, {len(data):,} bytes, is none its RECORDs list" in line


def test_a_matching_size_is_hashed_and_names_the_winner(tmp_path):
    data = b"cu13's libnccl"
    site = env_owning_twice(
        tmp_path / "env",
        {OWNERS[0]: (record_hash(b"cu12's libnccl"), len(data)), OWNERS[1]: (record_hash(data), len(data))},
    )
    (site / SHARED).write_bytes(data)
    from tfgpu.doctor.reads import RunReads

    reads = RunReads()
    [item] = ownership.shared_files(site, reads=reads)
    assert reads.hashed == len(data)
    assert item.winners == ("nvidia-nccl-cu13 2.32.3",) and item.losers == ("nvidia-nccl-cu12 2.32.3",)


def test_a_fifo_owned_twice_is_not_read_and_not_called_missing(tmp_path):
    site = env_owning_twice(tmp_path / "env", {OWNERS[0]: (record_hash(b"a"), 1), OWNERS[1]: (record_hash(b"b"), 1)})
    os.mkfifo(site / SHARED)
    finding = mixed(run_doctor(root=tmp_path / "env", host=host(), environ={}))["mixed.shared-files"]
    [line] = [e for e in finding.evidence if e.startswith(SHARED)]
    assert "not checked (it is not a regular file" in line and "missing" not in line


def test_the_budget_is_per_run_and_a_file_past_what_is_left_is_not_checked(tmp_path):
    from tfgpu.doctor.reads import RunReads

    first, second = tmp_path / "first", tmp_path / "second"
    first.write_bytes(b"x" * 600)
    second.write_bytes(b"y" * 600)
    reads = RunReads(budget=1000)
    assert reads.hash(first).digest == hashlib.sha256(b"x" * 600).hexdigest()
    refused = reads.hash(second)
    assert refused.digest is None and refused.skipped.startswith("not checked (600 bytes, past the 400 bytes")
    alone = RunReads(budget=500).hash(second)  # a file larger than a whole run's budget says so
    assert alone.digest is None and alone.skipped.startswith("not checked (too large: 600 bytes")
    assert reads.hashed == 600
    assert RunReads(budget=1000).hash(second).digest is not None  # a new run, a new budget


def test_each_library_is_read_once_a_run_however_many_rows_name_it(tmp_path, monkeypatch):
    if not wheelhouse.have_compiler():
        pytest.skip("gcc is needed to build the test shared library")
    library = wheelhouse.shared_library(tmp_path / "libnccl.so.2", "libnccl.so.2").read_bytes()
    site = env_owning_twice(
        tmp_path / "env",
        {OWNERS[0]: (record_hash(library), len(library)), OWNERS[1]: (record_hash(library), len(library))},
    )
    (site / SHARED).write_bytes(library)
    parsed = []
    real = elf.Image.of_stream

    # Each row opens the file to learn which file it is (its fstat); its bytes are read, and its
    # headers parsed, once.
    def counting(stream, size, source, budget=None):
        parsed.append(source)
        return real(stream, size, source, budget)

    monkeypatch.setattr(elf.Image, "of_stream", counting)
    report = run_doctor(root=tmp_path / "env", host=host(), environ={})
    assert mixed(report)["mixed.sonames"].status == "ok"  # both rows read, as one library
    assert parsed == [str(site / SHARED)]


def _rows_one_line_at_a_time(text: str) -> tuple[dict[str, str], dict[str, int]]:
    """A RECORD read the plain way: each line through the csv module on its own, each digest through
    base64 (what ownership reads faster, and must read the same)."""
    import csv
    import posixpath

    files, sizes = {}, {}
    for line in text.splitlines():
        try:
            row = next(csv.reader([line]), None)
        except csv.Error:
            continue
        if row and row[0]:
            path = posixpath.normpath(row[0])
            algorithm, _, value = row[1].partition("=") if len(row) > 1 else ("", "", "")
            try:
                digest = (
                    base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).hex()
                    if algorithm == "sha256" and value
                    else ""
                )
            except ValueError:
                digest = ""
            files[path] = digest
            size = row[2].strip() if len(row) > 2 else ""
            if size.isascii() and size.isdigit() and len(size) <= 20:
                sizes[path] = int(size)
            else:
                sizes.pop(path, None)
    return files, sizes


@pytest.mark.parametrize("variant", ["plain", "with-a-nul", "with-quoted-rows"])
def test_record_rows_read_fast_are_the_rows_the_csv_module_reads(variant):
    """A RECORD with no quote in it is split on commas (a third of the csv module's cost a row, for
    TensorFlow's 24,000); every odd row still reads as the csv module and base64 read it."""
    digest = record_hash(b"x")
    lines = [
        f"nvidia/cudnn/lib/libcudnn.so.9,{digest},137432",
        f"./nvidia//cublas/lib/../lib/libcublas.so.12,{digest}, 42 ",
        "nvidia/x/lib/nohash.so.1,,",
        "nvidia/x/lib/md5.so.1,md5=abc,10",
        "nvidia/x/lib/odd.so.1,sha256=ab-_!c=d,x10",
        "nvidia/x/lib/short.so.1,sha256=a,1",
        "nvidia/x/lib/accent.so.1,sha256=é,1",
        "nvidia/x/lib/spaces.so.1,sha256= QUJD ,9" + "9" * 25,
        "nvidia/x/lib/extra.so.1,sha256=QUJD,3,more,fields",
        "",
        ",,",
        "../../../bin/tool,,",
        "nvidia/x/lib/" + "a" * 140_000 + ".so.1,,1",
        f"nvidia/cudnn/lib/libcudnn.so.9,{digest},99",  # the same path again: the last row counts
        "nvidia/x/lib/nul\0.so.1,,1",
    ]
    if variant == "with-quoted-rows":
        lines += ['"nvidia/x/lib/comma,name.so.1",sha256=QUJD,3', '"open quote,sha256=QUJD,3', "after.txt,,5"]
    elif variant == "plain":
        lines.remove("nvidia/x/lib/nul\0.so.1,,1")  # a NUL anywhere sends every row through the csv module
    text = "\n".join(lines) + "\r\n"
    assert ownership._record_rows(text) == _rows_one_line_at_a_time(text)
    assert ownership._record_rows(text.replace("\n", "\r\n")) == _rows_one_line_at_a_time(text.replace("\n", "\r\n"))


def test_a_record_is_parsed_again_only_when_it_changed(tmp_path, monkeypatch):
    """A repair reads an env's RECORDs six times; each is parsed once a process until it changes (an
    install rewrites it; a rewrite in place with the same size and times put back is a change too),
    and what a caller does with the rows it got never reaches the next caller."""
    site = env_owning_twice(tmp_path / "env", {OWNERS[0]: (record_hash(b"a"), 1), OWNERS[1]: (record_hash(b"b"), 1)})
    parsed = []
    real = ownership._record_rows
    monkeypatch.setattr(ownership, "_record_rows", lambda text: parsed.append(text) or real(text))
    first = ownership.distributions(site)
    assert len(parsed) == 2
    first[0].files.clear()  # a caller's own copy
    again = ownership.distributions(site)
    assert len(parsed) == 2 and SHARED in again[0].files
    record = site / f"{OWNERS[0]}.dist-info" / "RECORD"
    before = record.stat()
    record.write_text(record.read_text().replace(",1\n", ",2\n"))
    os.utime(record, ns=(before.st_atime_ns, before.st_mtime_ns))  # the times put back: the change time is not
    changed = ownership.distributions(site)
    assert len(parsed) == 3 and changed[0].sizes[SHARED] == 2
