"""Attacks on doctor's bounded reads of an env's libraries and RECORD-listed files (tfgpu.doctor.reads,
tfgpu.doctor.elf): what a hostile or changing file in an env costs one doctor run, and what it makes
doctor say. Every file here is real: a gcc-built library grown sparse, crafted ELF headers, a file
truncated by another writer while it is hashed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import struct
import sys
import tracemalloc

import pytest
import wheelhouse

from tfgpu.doctor import elf, ownership, reads
from tfgpu.doors import untrusted

MiB = 1 << 20


def _library(tmp_path, name="libcudnn.so.9"):
    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed to build the test shared libraries")
    return wheelhouse.shared_library(tmp_path / "built" / name, name)


def _peak(call):
    """What ``call`` returns, and the most memory Python allocated while it ran."""
    tracemalloc.start()
    try:
        result = call()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_huge_sparse_library_is_not_read_whole(tmp_path):
    """Attack: a real library grown (sparse) to 1 GiB, named like cuDNN. Before the fix each
    ``lib*.so.N`` a RECORD listed was read whole (up to 4 GiB a file, outside the run's hash budget),
    so a few such files cost a doctor run gigabytes of memory and minutes. Must hold: its dynamic
    section and exports are still read, from the ranges the headers point at, in a few MiB."""
    path = _library(tmp_path)
    with open(path, "r+b") as grown:
        grown.truncate(1 << 30)
    run = reads.RunReads()
    dynamic, peak = _peak(lambda: run.dynamic(path))
    assert dynamic is not None and dynamic.soname == "libcudnn.so.9"
    assert peak < 32 * MiB, f"{peak:,} bytes held to read one library's dynamic section"
    exports, peak = _peak(lambda: elf.unversioned_exports(str(path)))
    assert exports is not None and "tfgpu_test_libcudnn_so_9" in exports
    assert peak < 32 * MiB


def _dynamic_flood(path, entries: int, sparse_to: int) -> None:
    """A 64-bit ELF whose one PT_DYNAMIC segment claims ``sparse_to`` bytes and holds ``entries``
    DT_NEEDED entries (no DT_NULL, no DT_STRTAB) before its zeros."""
    header = bytearray(64)
    header[:7] = b"\x7fELF\x02\x01\x01"
    struct.pack_into("<Q", header, 32, 64)  # program headers right after the ELF header
    struct.pack_into("<HH", header, 54, 56, 1)
    phdr = struct.pack("<IIQQQQQQ", 2, 0, 4096, 0, 0, sparse_to, sparse_to, 8)
    with open(path, "wb") as out:
        out.write(bytes(header) + phdr)
        out.seek(4096)
        out.write(struct.pack("<qQ", 1, 0) * entries)
        out.truncate(sparse_to)


def test_a_dynamic_segment_that_never_ends_is_not_walked_to_its_end(tmp_path):
    """Attack: a "libnccl.so.2" whose dynamic segment claims 512 MiB and starts with a million
    DT_NEEDED entries. Before the fix the file was read whole and every entry kept as a tuple
    (hundreds of MB, seconds of CPU; at 4 GiB, an out-of-memory kill). Must hold: no library is
    made of it, in a bounded amount of memory."""
    path = tmp_path / "libnccl.so.2"
    _dynamic_flood(path, 1 << 20, 512 * MiB)
    dynamic, peak = _peak(lambda: reads.RunReads().dynamic(path))
    assert dynamic is None
    assert peak < 32 * MiB, f"{peak:,} bytes held for a hostile dynamic segment"


class _TruncatedOnFirstRead:
    """A stream whose file another writer truncates right after its first block was read (pip
    reinstalling the wheel while doctor runs): the bytes read are real, the file on disk changed."""

    def __init__(self, stream, path):
        self._stream, self._path, self._first = stream, path, True

    def __getattr__(self, name):
        return getattr(self._stream, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._stream.close()

    def read(self, size=-1):
        block = self._stream.read(size)
        if self._first:
            self._first = False
            os.truncate(self._path, 100)
        return block


def test_a_file_truncated_while_hashed_is_not_called_lost(tmp_path, monkeypatch):
    """Attack: the shared file two RECORDs own is truncated while doctor hashes it. Before the fix the
    digest of the bytes read so far was taken as the file's, with the size it had when opened: both
    owners "lost" it (a finding that names the wrong culprit). Must hold: it is "not checked", saying
    it changed while it was read."""
    path = tmp_path / "libnccl.so.2"
    data = os.urandom(3 * reads.BLOCK)
    path.write_bytes(data)
    opened = untrusted.open_stream
    monkeypatch.setattr(untrusted, "open_stream", lambda p, kind, **kw: _TruncatedOnFirstRead(opened(p, kind, **kw), p))
    hashed = reads.RunReads().hash(path, {len(data)})
    assert hashed.digest is None
    assert "changed while it was read" in hashed.skipped
    shared = ownership.SharedFile(
        "nvidia/nccl/lib/libnccl.so.2",
        (("a 1", hashlib.sha256(data).hexdigest()), ("b 1", "00" * 32)),
        hashed.digest,
        hashed.size,
        (len(data), len(data)),
        hashed.skipped,
    )
    assert shared.losers == ()


def test_a_record_row_with_a_nul_in_its_path_is_not_a_traceback(tmp_path):
    """Attack: two RECORDs list one path that holds a NUL byte (the csv module reads it as any other
    character). Before the fix hashing it raised ValueError ("embedded null byte") out of
    ``os.open``, past every reader's "cannot use" handling: a traceback from doctor. Must hold: the
    name is a file that cannot be used, like any other unreadable one, in every reader of the door."""
    site = tmp_path / "site-packages"
    for dist in ("nvidia_nccl_cu12-2.32.3", "nvidia_nccl_cu13-2.32.3"):
        (site / f"{dist}.dist-info").mkdir(parents=True)
        (site / f"{dist}.dist-info" / "RECORD").write_text("nvidia/nccl/lib/lib\0nccl.so.2,sha256=AAAA,7\n")
    [shared] = ownership.shared_files(site)
    assert shared.on_disk is None and shared.losers == (shared.owners[0][0], shared.owners[1][0])
    with pytest.raises(untrusted.Unreadable, match="NUL"):
        untrusted.read_bytes(tmp_path / "a\0b", untrusted.ENV_FILE)
    assert reads.RunReads().dynamic(str(tmp_path / "lib\0x.so.1")) is None


def test_a_runpath_directory_swapped_for_a_link_out_before_the_write_gets_no_link(tmp_path):
    """Attack (TOCTOU): repair plans the dlopen links (cuBLAS's directory is inside the env, so
    ``libnvrtc.so`` goes there), then, while uv runs and before the activation files are written, the
    directory is swapped for a link to a directory of the user's outside the env. Before the fix the
    links (and ``bin/ptxas``) were made through the env's doors without the env as their root, so the
    link landed outside the env. Must hold: ``repair-path-outside``, nothing written outside."""
    from tfgpu.envs import activation
    from tfgpu.errors import TfgpuError

    root, outside = tmp_path / "env", tmp_path / "home-of-the-user"
    site = "lib/python3.11/site-packages"
    cublas, nvrtc = root / site / "nvidia/cublas/lib", root / site / "nvidia/cuda_nvrtc/lib"
    for directory in (cublas, nvrtc, outside, root / "bin"):
        directory.mkdir(parents=True)
    (cublas / "libcublasLt.so.11").write_bytes(b"\x7fELF")
    (nvrtc / "libnvrtc.so.11.2").write_bytes(b"\x7fELF")
    row = {"name": "libnvrtc.so", "provides": "libnvrtc", "caller": "libcublasLt.so.11", "runpath": ["$ORIGIN"]}
    lib_dirs = (f"{site}/nvidia/cublas/lib", f"{site}/nvidia/cuda_nvrtc/lib")
    links = activation.dlopen_links(root, lib_dirs, (row,))
    assert links == ((f"{site}/nvidia/cublas/lib/libnvrtc.so", "../../cuda_nvrtc/lib/libnvrtc.so.11.2"),)
    layout = activation.CudaLayout(site, lib_dirs, (), None, None, links=links)
    shutil.rmtree(cublas)
    cublas.symlink_to(outside, target_is_directory=True)
    with pytest.raises(TfgpuError) as raised:
        activation.write_venv_activation(root, layout)
    assert raised.value.code == "repair-path-outside"
    assert os.listdir(outside) == []


def test_a_fifo_named_as_a_wheel_in_the_find_links_directory_is_refused_before_uv_hangs_on_it(tmp_path):
    """Attack: ``--find-links DIR --offline`` where DIR holds a FIFO named
    ``six-1.16.0-py2.py3-none-any.whl`` (a shared wheel directory, a half-set-up download). Tried for
    real: ``uv pip install --offline --no-index --find-links DIR six`` blocks forever opening it, so
    create and repair hung with no word. Before the fix the directory was only checked to be one.
    Must hold: ``bad-find-links`` naming the file, before any uv run (``--dry-run`` included)."""
    from tfgpu.engines import uv as uv_engine
    from tfgpu.errors import UsageError

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "numpy-2.0.0-py3-none-any.whl").write_bytes(b"PK\x05\x06" + b"\0" * 18)
    assert uv_engine.find_links_source(str(wheels)) == str(wheels)
    os.mkfifo(wheels / "six-1.16.0-py2.py3-none-any.whl")
    with pytest.raises(UsageError) as raised:
        uv_engine.find_links_source(str(wheels))
    assert raised.value.code == "bad-find-links" and "six-1.16.0-py2.py3-none-any.whl" in raised.value.message
    os.unlink(wheels / "six-1.16.0-py2.py3-none-any.whl")
    os.symlink("/dev/zero", wheels / "six-1.16.0-py2.py3-none-any.whl")
    with pytest.raises(UsageError, match="not a regular file"):
        uv_engine.find_links_source(str(wheels))


def test_record_rows_naming_no_file_cost_no_path_resolution(tmp_path, monkeypatch):
    """Attack: two stacks' RECORDs of 100,000 rows each, every one a ``lib*.so.N`` that is not there.
    Tried for real: ``soname_pairs`` took 18 s (27 s profiled) of a doctor run, two ``Path.resolve``
    per row, and doctor asks it more than once. Must hold: a row whose file is missing is passed by
    with one stat, never resolved (``inside``), and the answer is the same: no library."""
    site = tmp_path / "site-packages"
    rows = "".join(f"nvidia/cu13/lib/libx{i}.so.1,sha256=AAAA,{i}\n" for i in range(2000))
    for dist in ("nvidia_a_cu12-1.0", "nvidia_b_cu13-1.0"):
        (site / f"{dist}.dist-info").mkdir(parents=True)
        (site / f"{dist}.dist-info" / "RECORD").write_text(rows)
    resolved = []
    real = ownership.inside
    monkeypatch.setattr(ownership, "inside", lambda *args: resolved.append(args) or real(*args))
    assert ownership.soname_pairs(site) == []
    assert resolved == []


def test_overlay_rows_of_callers_the_env_lacks_cost_no_directory_search(tmp_path, monkeypatch):
    """Attack: a TFGPU_DATA_DIR sonames.toml with 20,000 valid, distinct ``[[dlopened]]`` rows (its
    16 MiB cap holds 100,000), none of whose callers the env holds. Tried for real: create's
    ``dlopen_links`` took 6 s and repair's ``dlopen_left_out`` 7 s more, each row globbing every
    CUDA library directory before asking whether its caller is there. Must hold: a row whose caller
    is in no library directory is passed by before any search, with the same (empty) answer."""
    from tfgpu.envs import activation

    root, site = tmp_path / "env", "lib/python3.11/site-packages"
    lib_dirs = tuple(f"{site}/nvidia/{component}/lib" for component, _ in activation.COMPONENTS)
    for directory in lib_dirs:
        (root / directory).mkdir(parents=True)
        (root / directory / "libq.so.1").write_bytes(b"\x7fELF")
    rows = tuple(
        {"name": f"libx{i}.so", "provides": f"libx{i}", "caller": f"libc{i}.so.1", "runpath": ["$ORIGIN"]}
        for i in range(500)
    )
    searched = []
    real = activation._soname_files
    monkeypatch.setattr(activation, "_soname_files", lambda *args: searched.append(args) or real(*args))
    assert activation.dlopen_links(root, lib_dirs, rows) == ()
    assert activation.dlopen_left_out(root, lib_dirs, rows) == ()
    assert searched == []


def test_lacking_reads_uv_output_with_a_huge_name_in_linear_time_and_keeps_no_control_characters():
    """Attack: a wheel in the ``--find-links`` directory whose METADATA requires a 40,000-character
    name, and one whose requirement carries an escape sequence; uv's offline failure repeats them.
    Before the fix ``lacking`` (what the directory lacks, read from uv's output for the message and
    the note) searched from every position inside the name to its end: 36 s for 40,000 characters,
    minutes for more, after the build had already failed; and an extra or version holding
    ``\\x1b[2J`` went whole into the message. Must hold: a name ten times that long (hours, were the
    search quadratic; milliseconds as it is) ends under a hang guard, and the names found hold no
    control character."""
    from hangguard import hang_guard

    from tfgpu.doors.controls import has_control
    from tfgpu.engines.uv import lacking

    flood = f"Because six==1.0 depends on {'a' * 400_000} and you require six, we can conclude that six cannot be used."
    with hang_guard("reading a 400,000-character name from uv's output"):
        assert lacking(flood) == []
    found = lacking("there is no version of evil[\x1b[2J]==1\x07, and dep==2.0 was not found in the cache")
    assert found and not any(has_control(name) for name in found)
    assert lacking("Because there is no version of tensorflow[and-cuda]==2.21.0 and you require it") == [
        "tensorflow[and-cuda]==2.21.0"
    ]


def test_a_library_from_outside_named_like_a_pattern_is_not_matched_to_the_env_s_files(tmp_path):
    """Attack: the probe maps ``/opt/x/libcu*.so.12`` from outside the env (a file of that very
    name; ``[``, ``*`` and ``?`` are legal in file names). Before the fix its name went into a glob:
    ``libcu*`` matched the env's libcudart and libcublas, and libs.closed's evidence said "the env
    has its own" copy of a library it does not hold. Must hold: the name is matched as written."""
    from types import SimpleNamespace

    from tfgpu.doctor import closed

    site = tmp_path / "env" / "lib" / "python3.11" / "site-packages"
    (site / "nvidia" / "cuda_runtime" / "lib").mkdir(parents=True)
    (site / "nvidia" / "cuda_runtime" / "lib" / "libcudart.so.12").write_bytes(b"\x7fELF")
    env = SimpleNamespace(root=tmp_path / "env", site_packages=site)
    assert closed.own_copy(env, "/opt/x/libcudart.so.12") is not None  # the env's own copy, found
    assert closed.own_copy(env, "/opt/x/libcu*.so.12") is None
    assert closed.own_copy(env, "/opt/x/libcu[d]art.so.12") is None


def test_a_library_rewritten_in_place_with_its_size_and_mtime_kept_is_read_again(tmp_path):
    """Attack: within one doctor run, a library is rewritten in place (``cp other lib``, which keeps
    the inode) by one of the same size, its modification time then put back (``touch -r``). Before the
    fix the run's ELF data was keyed by (dev, inode, size, mtime), all four unchanged: the old
    library's SONAME was answered for the new file. Must hold: the new file's own SONAME (the key
    holds the change time too, which no user can set back)."""
    import subprocess

    first, second = _library(tmp_path, "libnccl.so.2"), _library(tmp_path, "libnvshmem.so.3")
    size = max(first.stat().st_size, second.stat().st_size)
    for path in (first, second):
        os.truncate(path, size)
    run = reads.RunReads()
    assert run.dynamic(first).soname == "libnccl.so.2"
    kept = tmp_path / "mtime"
    subprocess.run(["touch", "-r", str(first), str(kept)], check=True)
    inode = first.stat().st_ino
    subprocess.run(["cp", str(second), str(first)], check=True)
    subprocess.run(["touch", "-r", str(kept), str(first)], check=True)
    assert first.stat().st_ino == inode and first.stat().st_size == size
    assert run.dynamic(first).soname == "libnvshmem.so.3"


def test_a_link_out_removed_while_repair_looks_at_it_is_no_traceback(tmp_path, monkeypatch):
    """Attack (race): repair's ``left_open`` finds ``libnvrtc.so.12`` linking out of the env, and the
    link is removed (a reinstall of the wheel, the user) before it is read. Before the fix it was
    tested for a link, resolved, and only then read: ``FileNotFoundError`` out of repair's plan.
    Here the link goes when it is resolved, deterministically. Must hold: no traceback; what was
    read of the link is what is said."""
    from tfgpu.envs import activation

    root, site = tmp_path / "env", "lib/python3.11/site-packages"
    cublas, nvrtc = root / site / "nvidia/cublas/lib", root / site / "nvidia/cuda_nvrtc/lib"
    for directory in (cublas, nvrtc, tmp_path / "system"):
        directory.mkdir(parents=True, exist_ok=True)
    (cublas / "libcublasLt.so.12").write_bytes(b"\x7fELF")
    (tmp_path / "system" / "libnvrtc.so.12").write_bytes(b"\x7fELF")
    (nvrtc / "libnvrtc.so.12").symlink_to(tmp_path / "system" / "libnvrtc.so.12")
    row = {"name": "libnvrtc.so.12", "provides": "libnvrtc", "caller": "libcublasLt.so.12", "runpath": ["$ORIGIN"]}
    lib_dirs = (f"{site}/nvidia/cublas/lib", f"{site}/nvidia/cuda_nvrtc/lib")
    resolve = os.path.realpath

    def removing(path, *args, **kwargs):
        answer = resolve(path, *args, **kwargs)
        looking = sys._getframe(1).f_code.co_name == "out"  # left_out's own look at the link, not the plan's
        if looking and str(path).endswith("cuda_nvrtc/lib/libnvrtc.so.12") and os.path.lexists(path):
            os.unlink(path)
        return answer

    assert activation.dlopen_links(root, lib_dirs, (row,)) == ()
    monkeypatch.setattr(activation.os.path, "realpath", removing)
    found = activation.dlopen_left_out(root, lib_dirs, (row,))
    assert found in ((), ((f"{site}/nvidia/cuda_nvrtc/lib/libnvrtc.so.12", str(tmp_path / "system/libnvrtc.so.12")),))


@pytest.mark.parametrize("field", ["name", "provides", "caller", "runpath"])
def test_a_blank_dlopened_field_in_an_overlay_is_bad_data(field):
    """Attack: a TFGPU_DATA_DIR sonames.toml whose ``[[dlopened]]`` row has ``name = ""`` (or a blank
    provider, caller, or RUNPATH entry). Each field's pattern was checked only when not blank (blank
    is the tables' "unknown"), so the row passed: doctor's probe then asked ``dlopen("")``, which
    answers with the program itself (python, from outside the env: a false libs.closed failure), and
    an empty RUNPATH entry means the process's working directory. Must hold: ``bad-data`` naming the
    field, when the table is parsed."""
    from tfgpu.data import schema
    from tfgpu.errors import UsageError

    row = {
        "name": "libnvrtc.so",
        "provides": "libnvrtc",
        "caller": "libcudnn_adv_infer.so.8",
        "runpath": ["$ORIGIN"],
        "wheel": "nvidia-cudnn-cu11==8.6.0.163",
        "found": "nvidia/cudnn/lib/libcudnn_adv_infer.so.8",
        "source": ["WHL-DLOPEN"],
    }
    cuda = [
        {"versions": ">=12", "source": ["WHL-DLOPEN"], "libraries": [{"name": "cudart", "soname": "libcudart.so.12"}]}
    ]
    schema.validate("sonames.toml", {"cuda": cuda, "dlopened": [row]}, "overlay")
    row[field] = [""] if field == "runpath" else ""
    with pytest.raises(UsageError) as raised:
        schema.validate("sonames.toml", {"cuda": cuda, "dlopened": [row]}, "overlay")
    assert raised.value.code == "bad-data" and field in raised.value.message
