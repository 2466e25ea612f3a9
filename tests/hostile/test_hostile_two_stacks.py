"""Two CUDA stacks in one env, attacked from the env's own files: RECORD rows that lead out of the
env, hostile ELF files where a CUDA library should be, FIFOs and devices, and the data overlay that
decides whether a release runs on a new GPU architecture.

The env's RECORDs, METADATA and libraries are text and bytes anyone who can install a wheel into the
env wrote; the load hook loads, with RTLD_GLOBAL, whatever the ownership reader hands it. Real files,
real gcc-built shared objects, real venvs made by uv (once; each test attacks a copy of its own,
tests/builtenvs.py), the real CLI.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import builtenvs
import pytest
import repairhelpers as rh
import wheelhouse
from conftest import run_tool
from hangguard import hang_guard

from tfgpu.doctor import elf, ownership
from tfgpu.doctor.reads import RunReads

from .conftest import no_traceback

HOOK_ORDER = "import tensorflow, _tfgpu_cuda_hook, json\nprint(json.dumps(_tfgpu_cuda_hook.loaded))\n"
CUDART12 = "nvidia/cuda_runtime/lib/libcudart.so.12"
CUDART13 = "nvidia/cu13/lib/libcudart.so.13"


def need_gcc():
    if not wheelhouse.have_compiler():
        pytest.skip("gcc is needed to build the test shared libraries")


def site_of(prefix: Path) -> Path:
    return next(prefix.glob("lib/python3*/site-packages"))


def add_rows(site: Path, dist_prefix: str, *rows: str) -> None:
    """Append rows to the RECORD of the installed distribution whose dist-info starts with ``dist_prefix``."""
    record = next(site.glob(f"{dist_prefix}-*.dist-info")) / "RECORD"
    with open(record, "a", encoding="utf-8") as stream:
        for row in rows:
            stream.write(f"{row},,\n")


@pytest.fixture(scope="module")
def two_stack_kept(repair_wheels, tmp_path_factory):
    """The env of ``uv pip install tensorflow nvidia-cuda-runtime-cu12 nvidia-cuda-runtime`` (CUDA 13,
    merged tree), built once by real uv and kept (tests/builtenvs.py); the wheels it came from; and
    outside it a real libcudart.so.12 an attacker would like loaded first."""
    need_gcc()
    top = tmp_path_factory.mktemp("two-stacks")
    wheels, libs = top / "wheels", top / "libs"
    shutil.copytree(repair_wheels, wheels)
    cudart12 = wheelhouse.shared_library(libs / "12" / "libcudart.so.12", "libcudart.so.12").read_bytes()
    cudart13 = wheelhouse.shared_library(libs / "13" / "libcudart.so.13", "libcudart.so.13").read_bytes()
    wheelhouse.wheel(wheels, "nvidia-cuda-runtime-cu12", "12.9.79", {CUDART12: cudart12})
    wheelhouse.wheel(wheels, "nvidia-cuda-runtime", "13.0.96", {CUDART13: cudart13})
    built = rh.user_venv(top / "env", wheels, "tensorflow==2.21.0", "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime")
    evil = wheelhouse.shared_library(top / "outside" / "libcudart.so.12", "libcudart.so.12")
    return builtenvs.keep(built, top / "kept" / "env"), built, wheels, evil


@pytest.fixture
def two_stack_env(two_stack_kept, tmp_path):
    """A copy of the kept two-stack env of the test's own (its files are changed), with the wheels
    and the outside library."""
    kept, built_at, wheels, evil = two_stack_kept
    return builtenvs.relocated(kept, built_at, tmp_path / "env"), wheels, evil


def doctor(prefix: Path, what: str):
    """``doctor --prefix PREFIX --json`` by the real command line in this process (an exception
    escaping the tool fails the test: the traceback it would print), under a guard that only
    catches a hang."""
    with hang_guard(f"doctor of an env whose {what}"):
        done = run_tool("doctor", "--prefix", str(prefix), "--json")
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    return done


def escapes(site: Path, evil: Path) -> dict[str, str]:
    """RECORD rows of the CUDA 13 distribution that name the outside library (each its own way)."""
    depth = len(site.resolve().parts) - 1
    os.symlink(evil, site / "nvidia" / "cu13" / "lib" / "libcudart.so.12.9")
    return {
        "absolute": str(evil),
        "dot-dot": "../" * depth + str(evil).lstrip("/"),
        "dot-dot-inside-first": "nvidia/cu13/../../" + "../" * depth + str(evil).lstrip("/"),
        "symlink-out": "nvidia/cu13/lib/libcudart.so.12.9",
    }


@pytest.mark.parametrize("how", ["absolute", "dot-dot", "dot-dot-inside-first", "symlink-out"])
def test_a_record_row_leading_out_of_the_env_never_reaches_the_load_hook(two_stack_env, tmp_path, how, tool_env):
    """Attack: the CUDA 13 distribution's RECORD gains a row for a ``libcudart.so.12`` outside the env
    (absolute, ``../`` up to /, or a link inside the env pointing out). TensorFlow's stack ships that
    SONAME, so before the fix the reader called it a collision and `repair` wrote the outside path into
    the load hook's OTHER_FIRST: importing tensorflow then loaded it RTLD_GLOBAL. Must hold: neither
    doctor nor the hook's list names it; after `repair`, importing tensorflow loads nothing outside the env."""
    prefix, wheels, evil = two_stack_env
    site = site_of(prefix)
    row = escapes(site, evil)[how]
    add_rows(site, "nvidia_cuda_runtime", row)
    assert ownership.other_stack_first(site) == ()
    assert not [f for pair in ownership.soname_pairs(site) for f in pair.files if f[1] == row]

    done = run_tool("repair", "--prefix", str(prefix), "--find-links", str(wheels), "--no-detect", "--yes",
                    "--no-verify", "--offline", "--json", env=tool_env)  # fmt: skip
    assert done.returncode == 0, done.stdout[-800:] + done.stderr[-800:]
    layout = json.loads((prefix / "etc" / "tfgpu" / "layout.json").read_text())
    assert layout["other_first"] == []
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "VIRTUAL_ENV")}
    run = subprocess.run([str(prefix / "bin" / "python"), "-c", HOOK_ORDER], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    loaded = json.loads(run.stdout)
    assert all(Path(p).resolve().is_relative_to(prefix.resolve()) for p in loaded), loaded


def test_the_hook_writer_drops_a_path_out_of_site_packages(tmp_path):
    """Attack: a layout whose other_first names an absolute path or one with ``..`` out of
    site-packages (a future caller, a layout built from elsewhere). Must hold: the generated hook's
    OTHER_FIRST holds only site-relative paths inside site-packages."""
    from tfgpu.envs import activation

    site = tmp_path / "lib" / "python3.12" / "site-packages"
    site.mkdir(parents=True)
    layout = activation.CudaLayout(
        site_packages="lib/python3.12/site-packages",
        lib_dirs=(),
        preload=(),
        cuda_data_dir="",
        ptxas="",
        other_first=("/tmp/x/libcudnn.so.9", "../../../../tmp/libnccl.so.2", "nvidia/cu13/lib/libcublas.so.13"),
    )
    activation.write_load_hook(site, layout)
    text = (site / f"{activation.HOOK_MODULE}.py").read_text()
    line = next(line for line in text.splitlines() if line.startswith("OTHER_FIRST ="))
    assert json.loads(line.split("=", 1)[1]) == ["nvidia/cu13/lib/libcublas.so.13"]


@pytest.mark.parametrize(
    "rows",
    [
        ["a" * 200_000],  # one field past the csv module's 128 KiB limit
        ['"nvidia/cu13/lib/libcudart.so.13', "=cmd|' /C calc'!A0"],  # an open quote; a spreadsheet formula
        [CUDART13, CUDART13, CUDART13],  # duplicate rows
    ],
    ids=["huge-field", "quoting", "duplicates"],
)
def test_odd_record_rows_are_read_around_not_a_traceback(two_stack_env, rows):
    """Attack: RECORD rows the csv module chokes on (a 200,000-character path: ``csv.Error: field
    larger than field limit`` escaped doctor's mixed checks and create's post-install check), a row
    with an open quote (it swallowed every row after it, hiding those files from the checks), a
    formula, duplicates. Must hold: the other rows are still read (the env's two
    stacks are still told apart) and `doctor` prints no traceback."""
    prefix, _, _ = two_stack_env
    site = site_of(prefix)
    add_rows(site, "nvidia_cuda_runtime", *rows)
    add_rows(site, "nvidia_cuda_runtime", "nvidia/cu13/lib/after.txt")
    dist = next(d for d in ownership.distributions(site) if d.name == "nvidia-cuda-runtime")
    assert CUDART13 in dist.files and "nvidia/cu13/lib/after.txt" in dist.files
    assert set(ownership.stacks(ownership.distributions(site))) == {12, 13}
    done = doctor(prefix, "RECORD rows are odd")
    assert any(f["id"] == "mixed.sonames" for f in json.loads(done.stdout)["findings"]), done.stdout[-1000:]


# --- hostile ELF files ------------------------------------------------------------------------------


def real_library(tmp_path) -> bytes:
    need_gcc()
    return wheelhouse.shared_library(tmp_path / "good" / "libcudnn.so.9", "libcudnn.so.9").read_bytes()


def mangled(good: bytes) -> dict[str, bytes]:
    """ELF files that lie: each cut or header field a crafted file would hold."""
    phoff = struct.unpack_from("<Q", good, 32)[0]
    out = {f"cut-at-{n}": good[:n] for n in (5, 64, 65, phoff + 20, len(good) // 2, len(good) - 1)}

    def patch(offset: int, fmt: str, value: int) -> bytes:
        data = bytearray(good)
        struct.pack_into(fmt, data, offset, value)
        return bytes(data)

    out["phoff-past-end"] = patch(32, "<Q", 1 << 62)
    out["phnum-65535"] = patch(56, "<H", 0xFFFF)
    out["shoff-past-end"] = patch(40, "<Q", 1 << 62)
    out["shnum-65535"] = patch(60, "<H", 0xFFFF)
    out["shentsize-0"] = patch(58, "<H", 0)
    out["big-endian-flag"] = good[:5] + b"\x02" + good[6:]
    out["32-bit-flag"] = good[:4] + b"\x01" + good[5:]
    out["32-bit-header-only"] = b"\x7fELF\x01\x01\x01" + b"\0" * 45
    out["big-endian-header-only"] = b"\x7fELF\x02\x02\x01" + b"\xff" * 57
    # every program header's offset and size maxed: the dynamic section "runs" to 2**64
    data = bytearray(good)
    phentsize, phnum = struct.unpack_from("<HH", good, 54)
    for index in range(phnum):
        base = phoff + index * phentsize
        struct.pack_into("<QQ", data, base + 8, 1 << 63, 1 << 63)
    out["segments-past-end"] = bytes(data)
    return out


def test_hostile_elf_files_are_no_library_and_no_traceback(tmp_path):
    """Attack: truncated ELF files, headers whose offsets and counts point past the end, the 32-bit and
    big-endian flags flipped on a 64-bit file. Before the fix read_dynamic raised struct.error,
    ValueError or OverflowError out of doctor's mixed checks. Must hold: both readers answer None (or
    a set) for every one, never raise."""
    good = real_library(tmp_path)
    assert elf.read_dynamic(str(tmp_path / "good" / "libcudnn.so.9")).soname == "libcudnn.so.9"
    for name, data in mangled(good).items():
        path = tmp_path / name
        path.write_bytes(data)
        try:
            elf.read_dynamic(str(path))
            elf.unversioned_exports(str(path))
        except Exception as error:  # noqa: BLE001 - the point of the test
            pytest.fail(f"{name}: {type(error).__name__}: {error}")


def test_names_that_never_end_cost_no_more_than_one_look_each(tmp_path):
    """Attack: a 4 MB "libtensorflow_framework.so.2" whose symbol table holds 87,000 exported symbols,
    each naming a string that runs 2 MB to the file's last byte: each name lookup scanned the rest of the
    file (minutes of CPU per doctor run). Must hold: the readers read no name longer than
    elf.NAME_LIMIT, so the file is read about once (counted: no more bytes than it holds)."""
    size, half = 4 << 20, 2 << 20
    count = (half - 192) // 24
    data = bytearray(b"A" * size)
    data[:64] = b"\x7fELF\x02\x01\x01" + b"\0" * 57
    struct.pack_into("<Q", data, 40, 64)  # section headers at 64
    struct.pack_into("<HH", data, 58, 64, 2)  # shentsize, shnum
    # section 0: the string table (the second half of the file, no NUL but its last byte);
    # section 1: .dynsym from 192 to the middle, its link 0
    struct.pack_into("<IIQQQQIIQQ", data, 64, 0, 3, 0, 0, half, half, 0, 0, 1, 0)
    struct.pack_into("<IIQQQQIIQQ", data, 128, 0, 11, 0, 0, 192, count * 24, 0, 0, 8, 24)
    for index in range(1, count):
        struct.pack_into("<IBBHQQ", data, 192 + index * 24, index % 1000, 0x12, 0, 1, 0, 0)
    data[-1] = 0
    path = tmp_path / "tensorflow" / "libtensorflow_framework.so.2"
    path.parent.mkdir()
    path.write_bytes(bytes(data))
    reads = RunReads()
    with hang_guard("reading 87,000 names that never end"):
        assert ownership.reexported_libraries(tmp_path, reads=reads) == frozenset()
    # Each name is looked up within NAME_LIMIT bytes of one window: the file is read about once, where
    # a scan of each name to the end of the file would be 87,000 times 2 MB.
    assert reads.library_budget.spent <= size, reads.library_budget.spent


@pytest.mark.parametrize("what", ["fifo", "dev-zero", "directory", "huge-sparse"])
def test_a_library_row_that_is_no_regular_file_is_skipped(two_stack_env, tmp_path, what):
    """Attack: the CUDA 13 distribution's RECORD lists ``libcudart.so.12`` and the env holds there a
    FIFO (an open blocks), a link to /dev/zero (never ends), a directory, or a 64 GiB sparse file. Must
    hold: the reader and doctor finish, name none of them as a library, and never hang (held before
    any fix: is_file() and the reader's regular-file and size checks)."""
    prefix, _, _ = two_stack_env
    site = site_of(prefix)
    path = site / "nvidia" / "cu13" / "lib" / "libcudart.so.12"
    if what == "fifo":
        os.mkfifo(path)
    elif what == "dev-zero":
        os.symlink("/dev/zero", path)
    elif what == "directory":
        path.mkdir()
    else:
        with open(path, "wb") as stream:
            stream.truncate(64 << 30)
    add_rows(site, "nvidia_cuda_runtime", "nvidia/cu13/lib/libcudart.so.12")
    if what != "huge-sparse":  # owned twice too: its bytes are hashed (a sparse 64 GiB file would take minutes)
        add_rows(site, "nvidia_cuda_runtime_cu12", "nvidia/cu13/lib/libcudart.so.12")
    with hang_guard(f"reading an env whose library row is a {what}"):  # a FIFO's open would block
        assert ownership.other_stack_first(site) == ()
        if what != "huge-sparse":
            shared = {item.path: item for item in ownership.shared_files(site)}
            assert shared["nvidia/cu13/lib/libcudart.so.12"].on_disk is None
    doctor(prefix, f"library row is a {what}")  # and it ended: the guard catches the hang


# --- the architecture data ------------------------------------------------------------------------


def overlay(tmp_path, old: str, new: str) -> Path:
    from tfgpu import data

    shipped = Path(data.__file__).parent / "ptx.toml"
    text = shipped.read_text()
    assert old in text
    directory = tmp_path / "overlay"
    directory.mkdir(exist_ok=True)
    (directory / "ptx.toml").write_text(text.replace(old, new, 1))
    return directory


PLAN = ("plan", "--os", "linux", "--arch", "x86_64", "--driver", "580.65.06", "--gpu-cc", "12.0", "--json")
HOSTILE_ROWS = {
    "format-index": ('text = "A self-built', 'text = "{0} A self-built', "2.21"),
    "format-brace": ('text = "A self-built', 'text = "{ A self-built', "2.21"),
    "format-attribute": ('text = "A self-built', 'text = "{sm.__class__.__mro__} A self-built', "2.21"),
    "jit-range-garbage": ('tensorflow = ">=2.16.2,<2.21"', 'tensorflow = "garbage!"', "2.20"),
    "jit-range-int": ('tensorflow = ">=2.16.2,<2.21"', "tensorflow = 5", "2.20"),
    "jit-cc-garbage": ('cc = ">=12.0,<13"', 'cc = "zz"', "2.20"),
    "jit-reported-int": ('reported = ["2.16.2"', 'reported = 5\nx = ["2.16.2"', "2.20"),
    "keras-range-garbage": ('tensorflow = ">=2.16"', 'tensorflow = "x y"', "2.21"),
    "isa-of-5000-digits": ('min_ptx_isa = "8.7"', 'min_ptx_isa = "1.' + "9" * 5000 + '"', "2.21"),
    "cc-of-5000-digits": ('cc = "12.0"', 'cc = "' + "1" * 5000 + '.0"', "2.21"),
}


@pytest.mark.parametrize("row", HOSTILE_ROWS, ids=list(HOSTILE_ROWS))
def test_a_hostile_overlay_row_of_the_architecture_data_is_bad_data_not_a_traceback(cli, sandbox, tmp_path, row):
    """Attack: a TFGPU_DATA_DIR (or update-data) ptx.toml whose [[jit_report]], [keras_xla] or
    [[way_forward]] rows have the wrong shape, or whose way-forward text is a format string (``{0}``,
    ``{``, ``{sm.__class__.__mro__}``). Before the fix `plan --gpu-cc 12.0` ended in IndexError,
    KeyError, ValueError, InvalidSpecifier or TypeError, and an attribute lookup printed Python
    internals; a PTX ISA or compute capability of 5,000 digits passed the schema's ``[0-9]+\\.[0-9]+``
    and ended in ValueError (int() of over 4,300 digits). Must hold: ``bad-data`` naming the row, or a plan whose text is the row's text verbatim."""
    old, new, tf = HOSTILE_ROWS[row]
    directory = overlay(tmp_path, old, new)
    done = no_traceback(cli, *PLAN, "--tf", tf, env={"TFGPU_DATA_DIR": str(directory)})
    if row.startswith("format-"):
        assert "<class 'str'>" not in done.out + done.err
        assert new.removeprefix('text = "').split(" A self-built")[0] in done.out + done.err
    else:
        assert done.code != 0 and json.loads(done.out)["error"]["code"] == "bad-data", done.out[-500:]


@pytest.mark.parametrize("cc", ["0.0", "99.9", "12.0a", "1e400", "9" * 400 + ".0", "-1", "nan", "", "١٢.٠"])
def test_odd_compute_capabilities_are_a_clear_usage_error(cli, sandbox, cc):
    """Attack: `plan --gpu-cc` with values no GPU has (0.0, 99.9, family suffixes, huge, NaN, Arabic
    digits). Must hold: ``bad-compute-capability`` (exit 2), never a traceback (held before any fix)."""
    done = no_traceback(cli, "plan", "--tf", "2.21", "--os", "linux", "--arch", "x86_64", "--driver", "580.65.06",
                        "--gpu-cc", cc, "--json")  # fmt: skip
    assert json.loads(done.out)["error"]["code"] == "bad-compute-capability", done.out[-400:]


@pytest.mark.parametrize("where", ["../../outside", "/tmp", "lib/tfgpu/cuda12/../../../../../outside"])
def test_a_marker_naming_an_apart_directory_out_of_the_env_is_not_read(tmp_path, where):
    """Attack: the env's marker says TensorFlow's CUDA wheels are kept apart in a directory out of the
    env (``../../outside``, ``/tmp``, or a ``..`` after the real prefix). Before the fix doctor read
    every RECORD there and hashed the ``.so`` files they list, anywhere (an absolute row too), and
    called the foreign directory TensorFlow's CUDA wheels. Must hold: ``mixed.apart`` fails naming
    the marker's value, and nothing out of the env is read."""
    from types import SimpleNamespace

    from tfgpu.doctor import mixed_checks
    from tfgpu.envs import marker

    prefix = tmp_path / "a" / "b" / "env"
    prefix.mkdir(parents=True)
    outside = tmp_path / "a" / "outside"
    (outside / "x-1.dist-info").mkdir(parents=True)
    (outside / "x-1.dist-info" / "RECORD").write_text("libsecret.so.1,sha256=AAAA,1\n")
    (prefix / marker.NAME).write_text(json.dumps({"cuda_apart": {"dir": where}}))
    env = SimpleNamespace(marker=marker.read(prefix), root=prefix, tf_version="2.21.0")
    [finding] = mixed_checks.apart(env)
    assert finding.status == "fail" and "marker" in finding.title and where[:40] in finding.title
    assert not any("x 1" in line for line in finding.evidence)


def test_a_cuda_major_of_thousands_of_digits_is_no_stack_and_no_traceback(two_stack_env):
    """Attack: a RECORD row ``nvidia/cu<5,000 digits>/...``, TensorFlow's METADATA requiring
    ``nvidia-cudnn-cu<5,000 digits>``, and pins named so: ``int()`` of more than 4,300 digits raises
    ValueError, which escaped doctor's mixed checks, repair's hook list and the lock's stack check;
    and the row's 5,000-character directory name made ``Path.is_file`` raise ENAMETOOLONG.
    Must hold: no such thing is a CUDA stack; doctor prints no traceback."""
    from tfgpu.installers import stacks

    prefix, _, _ = two_stack_env
    site = site_of(prefix)
    digits = "9" * 5000
    add_rows(site, "nvidia_cuda_runtime", f"nvidia/cu{digits}/lib/libx.so.1")
    metadata = next(site.glob("tensorflow-*.dist-info")) / "METADATA"
    metadata.write_text(metadata.read_text() + f"Requires-Dist: nvidia-cudnn-cu{digits}\n")
    assert set(ownership.stacks(ownership.distributions(site))) == {12, 13}
    assert ownership.tensorflow_stack(site) in (None, 12)
    ownership.other_stack_first(site)
    pins = [f"nvidia-cudnn-cu{digits}==9.1", f"cuda-toolkit=={digits}.0", f"jax-cuda{digits}-plugin==0.7"]
    assert stacks.stacks_of_pins(pins) == {}
    doctor(prefix, "CUDA major has thousands of digits")


@pytest.mark.parametrize("setting", ["0", "off", "OFF", "false", "no", " 0 "])
def test_the_other_stack_switch_set_off_in_any_usual_word_is_off(tmp_path, setting):
    """Attack (an unlucky user): TFGPU_OTHER_STACK_FIRST=off, false, no or " 0 ". Before the fix only
    the exact ``0`` switched it off: every other word silently kept loading the other stack's
    libraries first, the opposite of what was asked. Must hold: each is off, in the real generated hook."""
    from tfgpu.envs import activation

    site = tmp_path / "lib" / "python3.12" / "site-packages"
    site.mkdir(parents=True)
    layout = activation.CudaLayout(
        site_packages="lib/python3.12/site-packages",
        lib_dirs=(),
        preload=(),
        cuda_data_dir="",
        ptxas="",
        other_first=("nvidia/cu13/lib/libcublas.so.13",),
    )
    activation.write_load_hook(site, layout)
    probe = "import sys, json; import _tfgpu_cuda_hook as h; print(json.dumps([h.other_first(sys.argv[1]), h.other_first('')]))"
    done = subprocess.run(
        [sys.executable, "-S", "-c", probe, setting],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(site)},
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [[], ["nvidia/cu13/lib/libcublas.so.13"]]


@pytest.mark.parametrize(
    ("setting", "preloads"), [("0", True), ("false", True), ("", True), ("1", False), ("yes", False)]
)
def test_no_preload_set_to_0_keeps_the_hook_on(tmp_path, setting, preloads):
    """Attack (an unlucky user): TFGPU_NO_PRELOAD=0 or false, meaning "do not switch it off". Before
    the fix any non-empty value switched the whole hook off. Must hold: 0, false and empty keep it on;
    1 and yes switch it off (the real generated hook, a real ``import tensorflow``)."""
    from tfgpu.envs import activation

    site = tmp_path / "lib" / "python3.12" / "site-packages"
    (site / "tensorflow").mkdir(parents=True)
    (site / "tensorflow" / "__init__.py").write_text("")
    layout = activation.CudaLayout(
        site_packages="lib/python3.12/site-packages",
        lib_dirs=(),
        preload=("nvidia/missing/lib/libmissing.so.1",),
        cuda_data_dir="",
        ptxas="",
    )
    activation.write_load_hook(site, layout)
    probe = "import _tfgpu_cuda_hook as h, tensorflow, json; print(json.dumps(len(h.errors)))"
    done = subprocess.run(
        [sys.executable, "-S", "-c", probe],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(site), "TFGPU_NO_PRELOAD": setting},
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == (1 if preloads else 0)


def test_a_framework_metadata_asking_for_a_version_of_thousands_of_digits_is_no_traceback(two_stack_env):
    """Attack: a METADATA that lies: torch's ``Requires-Python: >=9999…`` and TensorFlow's
    ``Requires-Dist: numpy>=1.9999…`` with 5,000 digits. packaging parses them, then comparing raises
    ValueError (int() of over 4,300 digits), which escaped doctor's mixed.python-numpy. Must hold: the
    requirement is reported as unknown, doctor prints no traceback."""
    prefix, _, _ = two_stack_env
    site = site_of(prefix)
    digits = "9" * 5000
    torch = site / "torch-2.9.0.dist-info"
    torch.mkdir()
    (torch / "METADATA").write_text(f"Name: torch\nVersion: 2.9.0\nRequires-Python: >={digits}\n")
    (torch / "RECORD").write_text("torch/__init__.py,,\n")
    (site / "numpy-2.0.0.dist-info").mkdir()
    metadata = next(site.glob("tensorflow-*.dist-info")) / "METADATA"
    metadata.write_text(metadata.read_text() + f"Requires-Dist: numpy>=1.{digits}\n")
    done = doctor(prefix, "framework metadata asks for thousands of digits")
    assert any(f["id"] == "mixed.python-numpy" for f in json.loads(done.stdout)["findings"]), done.stdout[-1500:]
