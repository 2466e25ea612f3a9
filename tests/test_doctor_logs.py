"""`doctor --log`: the signature table and the matcher.

The per-signature tests are generated from tfgpu/data/log_signatures.toml: a new row is a new
test case, and a row without a matching `example` fails. The fixtures under tests/fixtures/logs/
are whole log excerpts in the format TensorFlow, pip, docker and ldconfig print them.
"""

from __future__ import annotations

import json
import random
import re
import tomllib
from importlib.resources import files
from pathlib import Path

import pytest
from hangguard import hang_guard

from tfgpu.doctor.logs import SEVERITIES, LogMatch, match_log, signatures

LOGS = Path(__file__).parent / "fixtures" / "logs"
DATA = files("tfgpu.data")
ROWS = tomllib.loads(DATA.joinpath("log_signatures.toml").read_text("utf-8"))["signature"]
SIGNATURES = {sig.id: sig for sig in signatures()}
SOURCES = tomllib.loads(DATA.joinpath("sources.toml").read_text("utf-8"))["sources"]
"""The shipped sources table, read once for every row's check (not once per row)."""
PLACEHOLDER = re.compile(r"\{(\w+)\}")
REQUIRED = {
    "id": str,
    "title": str,
    "pattern": str,
    "severity": str,
    "cause": str,
    "fix": str,
    "source": list,
    "example": str,
}


def fixture(name: str) -> str:
    return (LOGS / name).read_text(encoding="utf-8")


# --- The table --------------------------------------------------------------------------------


def test_ids_are_unique_and_kebab_case():
    ids = [row["id"] for row in ROWS]
    assert len(ids) == len(set(ids))
    for id_ in ids:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", id_), id_
    assert [sig.id for sig in signatures()] == ids


@pytest.mark.parametrize("row", ROWS, ids=[row["id"] for row in ROWS])
def test_row_shape(row):
    for field, kind in REQUIRED.items():
        assert isinstance(row.get(field), kind) and row[field], f"{row['id']}: {field}"
    assert set(row) <= {*REQUIRED, "shadows"}, f"{row['id']}: unknown fields {set(row) - {*REQUIRED, 'shadows'}}"
    assert row["severity"] in SEVERITIES
    assert "\n" not in row["title"] and "\n" not in row["example"]
    assert set(row["source"]) <= set(SOURCES), f"{row['id']}: unknown sources {set(row['source']) - set(SOURCES)}"
    assert len(set(row["source"])) == len(row["source"])
    for other in row.get("shadows", []):
        assert other in SIGNATURES and other != row["id"], (row["id"], other)


@pytest.mark.parametrize("row", ROWS, ids=[row["id"] for row in ROWS])
def test_placeholders_name_groups_of_the_pattern(row):
    groups = set(re.compile(row["pattern"]).groupindex)
    for text in (row["cause"], row["fix"]):
        assert set(PLACEHOLDER.findall(text)) <= groups, row["id"]
        # braces only as placeholders: a literal "{" in the text would read as a broken one
        assert text.count("{") == text.count("}") == len(PLACEHOLDER.findall(text)), row["id"]


@pytest.mark.parametrize("sig", SIGNATURES.values(), ids=list(SIGNATURES))
def test_example_matches_and_is_unambiguous(sig):
    """The example matches its own pattern; any other signature matching it is one it shadows."""
    found = sig.pattern.search(sig.example)
    assert found, f"{sig.id}: pattern does not match its example"
    for name in PLACEHOLDER.findall(sig.cause + sig.fix):
        assert found.group(name) is not None, f"{sig.id}: group {name} empty on the example"
    others = {other.id for other in signatures() if other.id != sig.id and other.pattern.search(sig.example)}
    assert others <= set(sig.shadows), f"{sig.id}: example also matches {others - set(sig.shadows)}"


@pytest.mark.parametrize("sig", SIGNATURES.values(), ids=list(SIGNATURES))
def test_example_alone_gives_its_signature_filled(sig):
    (match,) = match_log(sig.example)
    assert (match.id, match.severity, match.line_number, match.count) == (sig.id, sig.severity, 1, 1)
    assert match.line == sig.example.rstrip()
    captured = sig.pattern.search(sig.example).groupdict()
    if not any("{" in (value or "") for value in captured.values()):
        assert "{" not in match.cause and "{" not in match.fix


def test_compat_facts_failure_table_is_covered():
    """Every row of compat-facts §8 (and its noise note) has a signature whose example is its string."""
    strings = [
        "Cannot dlopen some GPU libraries. Please make sure the missing libraries",
        "Could not load dynamic library 'libcudnn.so.8'; dlerror: libcudnn.so.8: cannot open shared object file",
        "Could not load dynamic library 'libcusolver.so.10'",
        "Can't find libdevice directory ${CUDA_DIR}/nvvm/libdevice. This may result in compilation",
        "INTERNAL: libdevice not found at ./libdevice.10.bc",
        "Couldn't invoke ptxas --version",
        "ptxas ptxas too old. Falling back to the driver to compile.",
        "Your CUDA software stack is old. We fallback to the NVIDIA driver for some compilation.",
        "No PTX compilation provider is available. Neither ptxas/nvlink nor nvjtlink is available.",
        "Could not find cuda drivers on your machine, GPU will not be used.",
        "libcuda.so.1 does not exist",
        "RuntimeError: Physical devices cannot be modified after being initialized",
        "Virtual devices cannot be modified after being initialized",
        "ValueError: Memory growth cannot differ between GPU devices",
        "cudaGetDevice() failed. Status: CUDA driver version is insufficient for CUDA runtime version",
        "Loaded runtime CuDNN library: 9.1.0 but source was compiled with: 9.3.0.  CuDNN library needs",
        'ERROR: No matching distribution found for tensorrt-libs==8.6.1; extra == "and-cuda"',
        "NotFoundError: dlopen(/x/tensorflow-plugins/libmetal_plugin.dylib, 0x0006): Symbol not found: _TF_X",
        "CUDA_ERROR_UNSUPPORTED_PTX_VERSION: the provided PTX was compiled with an unsupported toolchain.",
        "Unable to register cuDNN factory: Attempting to register factory for plugin cuDNN",
        "TF-TRT Warning: Could not find TensorRT",
    ]
    for text in strings:
        assert match_log(text), f"no signature for {text!r}"


# --- Whole logs --------------------------------------------------------------------------------

EXPECTED = {
    # fixture: [(id, line_number, count), ...] in the order match_log returns them
    "tf2161-and-cuda-no-gpu.txt": [
        ("cannot-dlopen-gpu-libraries", 9, 1),
        ("duplicate-factory-registration-noise", 3, 3),
        ("tensorrt-not-found-noise", 8, 1),
    ],
    "h200-tf221-cusolver.txt": [("missing-libcusolver-11", 8, 1), ("cannot-dlopen-gpu-libraries", 11, 1)],
    "traceback-physical-devices.txt": [("physical-devices-already-initialized", 9, 1)],
    "mirrored-strategy-reshape.txt": [("mirrored-strategy-reshape", 17, 2)],
    "wsl2-tf213-no-cuda.txt": [
        ("could-not-find-cuda-drivers", 6, 2),
        ("wsl-libcuda-not-symlink", 3, 1),
        ("tensorrt-not-found-noise", 10, 1),
    ],
    "docker-no-toolkit.txt": [("docker-no-gpu-driver", 2, 1)],
    "cudnn-mismatch.txt": [("cudnn-version-mismatch", 3, 1), ("dnn-library-init-failed", 4, 2)],
    "blackwell-rtx5080.txt": [("invalid-ptx", 4, 1), ("no-kernels-for-compute-capability", 3, 1)],
    "cpu-host-cuinit-303.txt": [("cuinit-303", 2, 1)],
    "container-cuinit-stub.txt": [("cuinit-stub-library", 2, 1), ("kernel-driver-not-running", 3, 1)],
    "pip-tf2150-tensorrt.txt": [("tensorrt-not-on-pypi", 6, 1)],
    "xla-libdevice.txt": [
        ("libdevice-not-found", 8, 2),
        ("cant-find-libdevice-directory", 1, 1),
        ("ptxas-too-old", 11, 1),
    ],
    "clean-h200-tf221.txt": [],
}


def test_every_fixture_has_expectations():
    assert {path.name for path in LOGS.iterdir()} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture(name):
    text = fixture(name)
    got = match_log(text)
    assert [(m.id, m.line_number, m.count) for m in got] == EXPECTED[name]
    lines = text.splitlines()
    for m in got:
        assert lines[m.line_number - 1] == m.line
        assert "{" not in m.cause + m.fix or "${CUDA_DIR}" in m.cause


def test_captured_groups_fill_cause_and_fix():
    by_id = {m.id: m for m in match_log(fixture("h200-tf221-cusolver.txt"))}
    assert "libcusolver.so.11" in by_id["missing-libcusolver-11"].cause

    (cudnn, _) = match_log(fixture("cudnn-mismatch.txt"))
    assert "cuDNN 8.9.6 was loaded" in cudnn.cause and "compiled with 9.3.0" in cudnn.cause
    assert "'nvidia-cudnn-cu12==9.*,>=9.3.0'" in cudnn.fix

    (blackwell, jit) = match_log(fixture("blackwell-rtx5080.txt"))
    assert "compute capability 12.0" in jit.cause and "--gpu-cc 12.0" in jit.fix

    (reshape,) = match_log(fixture("mirrored-strategy-reshape.txt"))
    assert "3136 values" in reshape.cause and "expected 6272" in reshape.cause
    assert "num_replicas_in_sync" in reshape.fix and "drop_remainder=True" in reshape.fix

    (stub, driver) = match_log(fixture("container-cuinit-stub.txt"))
    assert "mv-inference-5f7d446b77-kmsxn" in driver.cause

    (libdevice, directory, _) = match_log(fixture("xla-libdevice.txt"))
    assert "it tried ${CUDA_DIR}/nvvm/libdevice and" in directory.cause


def test_specific_signature_shadows_the_generic_one():
    line = (
        "2020-12-15 18:20:21.222324: W tensorflow/stream_executor/platform/default/dso_loader.cc:60] "
        "Could not load dynamic library 'libcusolver.so.10'; dlerror: libcusolver.so.10: cannot open shared "
        "object file: No such file or directory"
    )
    other = line.replace("libcusolver.so.10", "libcurand.so.10")
    got = match_log(f"{line}\n{other}\n")
    assert [(m.id, m.line_number, m.count) for m in got] == [
        ("tf24-libcusolver-so10", 1, 1),
        ("could-not-load-dynamic-library", 2, 1),
    ]
    assert "libcurand.so.10" in got[1].cause  # the generic one is filled from ITS first line


def test_order_is_severity_then_line():
    text = "\n".join(
        [
            SIGNATURES["tensorrt-not-found-noise"].example,
            SIGNATURES["no-kernels-for-compute-capability"].example,
            SIGNATURES["oom-allocating-tensor"].example,
            SIGNATURES["cuda-out-of-memory"].example,
            SIGNATURES["memory-growth-differs"].example,
        ]
    )
    got = match_log(text)
    assert [m.id for m in got] == [
        "oom-allocating-tensor",
        "memory-growth-differs",
        "no-kernels-for-compute-capability",
        "cuda-out-of-memory",
        "tensorrt-not-found-noise",
    ]
    assert [m.line_number for m in got] == [3, 5, 2, 4, 1]


def test_count_is_lines_not_occurrences():
    example = SIGNATURES["physical-devices-already-initialized"].example
    text = f"{example} {example}\nnoise\n{example}\n"
    (match,) = match_log(text)
    assert (match.line_number, match.count) == (1, 2)


def test_line_numbers_with_crlf_and_bare_cr():
    example = SIGNATURES["docker-no-gpu-driver"].example
    (match,) = match_log(f"one\r\ntwo\r\n{example}\r\n")
    assert (match.line_number, match.line) == (3, example)
    (match,) = match_log(f"1/3 [==>....]\r2/3 [=====>.]\r3/3 [========]\n{example}")
    assert match.line_number == 4


def test_clean_and_empty_logs_give_nothing():
    assert match_log("") == []
    assert match_log("\n\n\n") == []
    assert match_log(fixture("clean-h200-tf221.txt")) == []


def test_to_dict_is_json():
    (match,) = match_log(SIGNATURES["cudnn-version-mismatch"].example)
    data = match.to_dict()
    assert json.loads(json.dumps(data)) == data
    assert set(data) == {"id", "title", "severity", "cause", "fix", "line", "line_number", "count", "source"}
    assert data["source"] == list(SIGNATURES["cudnn-version-mismatch"].source)
    assert isinstance(match, LogMatch)


# --- Hostile input -------------------------------------------------------------------------------


def test_garbage_never_raises():
    rng = random.Random(1234)
    blob = bytes(rng.getrandbits(8) for _ in range(200_000))
    assert isinstance(match_log(blob), list)
    assert isinstance(match_log(blob.decode("utf-8", errors="replace")), list)
    assert isinstance(match_log(blob.decode("latin-1")), list)
    assert isinstance(match_log(blob.decode("utf-8", errors="surrogateescape")), list)
    assert match_log("\x00" * 10_000 + "\ud800\udfff{}{0}{library}") == []
    # a signature inside binary junk is still found, on the right line
    example = SIGNATURES["cuinit-303"].example.encode()
    (match,) = match_log(b"\xff\xfe\x00garbage\n\x80\x81\n" + example + b"\n\xc3")
    assert (match.id, match.line_number) == ("cuinit-303", 3)


def test_one_enormous_line_is_truncated_in_the_result():
    example = SIGNATURES["oom-allocating-tensor"].example
    (match,) = match_log("x" * 3_000_000 + example + "y" * 3_000_000)
    assert match.line_number == 1 and len(match.line) <= 1000


def test_twenty_megabytes_of_noise_ends_with_the_one_match():
    """A guard against catastrophic backtracking, not a performance target."""
    noise = fixture("clean-h200-tf221.txt") + "".join(
        line + "\n"
        for line in [
            "2024-03-12 10:11:13.000001: I external/local_xla/xla/stream_executor/cuda/cuda_executor.cc:998] "
            "successful NUMA node read from SysFS had negative value (-1), but there must be at least one NUMA "
            "node, so returning NUMA node zero.",
            "2024-03-12 10:11:15.000003: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1616] Could not "
            "identify NUMA node of platform GPU id 0, defaulting to 0.  Your kernel may not have been built with "
            "NUMA support.",
            "2021-02-03 14:15:16.171819: I tensorflow/stream_executor/platform/default/dso_loader.cc:49] "
            "Successfully opened dynamic library libcudart.so.11.0",
            "1875/1875 [==============================] - 5s 2ms/step - loss: 0.2961 - accuracy: 0.9143",
            "Input to the model: failed call to nothing; kernel image is fine; PTX ok; back to the start; "
            "libmetal_plugin.dylib loaded; Could not load dynamic library 'libfoo.so'x",
        ]
    )
    text = noise * (20_000_000 // len(noise) + 1)
    # Backtracking gone wrong takes many minutes on 20 MB (the match itself about 1 s on a busy
    # 2-core machine): a guard that catches that hang, and no bound on how fast it is.
    with hang_guard(f"matching {len(text) / 1e6:.0f} MB of log noise"):
        got = match_log(text)
    assert [m.id for m in got] == ["could-not-load-dynamic-library"]
