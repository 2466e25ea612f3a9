"""Attacks on co-planning with PyTorch/JAX (``--with SPEC``): a spec whose version has more digits
than Python converts, a hostile ``companions-updates.toml`` overlay (a numpy cap that is no
specifier, or one with thousands of digits), a lock whose recorded companions are of the wrong kind,
and ``update-data``'s range-request reader of torch's wheel METADATA against a hostile index (a real
HTTP server on 127.0.0.1): a METADATA member that inflates far past the size its directory claims,
a central directory that claims gigabytes. Real files, the real CLI, run in this process (``here``):
the attacks are on what the reader reads and writes, not on the process it runs in."""

from __future__ import annotations

import io
import json
import re
import threading
import zipfile
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from .conftest import changed, no_traceback, snapshot

PLAN = ("plan", "--no-detect", "--os", "linux", "--arch", "x86_64", "--mode", "pip", "--json")


def test_a_with_spec_whose_version_has_thousands_of_digits_is_refused_not_a_traceback(cli, sandbox):
    """``--with torch==999...9`` (5,000 digits) parsed as a PEP 508 requirement, then crashed with
    Python's ValueError (int string conversion limit) when a release was matched against it. A spec is
    user input: ``companion-unsupported`` (exit 2), bounded, nothing written; a plain pin still plans."""
    before = snapshot(sandbox)
    for spec in ("torch==" + "9" * 5000, "torch>=2." + "9" * 200, "jax[cuda12]<" + "1" * 100_000):
        done = no_traceback(cli, *PLAN, "--with", spec)
        assert done.code == 2, done.out
        assert done.error == "companion-unsupported"
        assert len(done.out) < 4000
    assert changed(before, snapshot(sandbox)) == []
    assert no_traceback(cli, *PLAN, "--with", "torch>=2.5").code == 0


def _overlay(sandbox, numpy: str) -> dict:
    data = sandbox / "userdata"
    data.mkdir(exist_ok=True)
    (data / "companions-updates.toml").write_text(
        f"""[[release]]
framework = "torch"
version = "2.99.0"
extra = ""
stack = "cu12"
python = ["3.11", "3.12"]
numpy = {json.dumps(numpy)}
wheels = ["torch==2.99.0"]
source = ["PYPI-JSON", "WHL-META"]

[release.nvidia]
"nvidia-cudnn-cu12" = ">=9"

[versions]
"nvidia-cudnn-cu12" = ["9.3.0.75"]
""",
        encoding="utf-8",
    )
    return {"TFGPU_USER_DATA_DIR": str(data)}


@pytest.mark.parametrize("numpy", ["garbage; rm -rf ~", ">=" + "9" * 5000, "<2\n>=1"])
def test_an_overlay_row_whose_numpy_is_no_specifier_is_overlay_corrupt(cli, sandbox, numpy):
    """A companions-updates.toml row's ``numpy`` was held only to "one line of text", then read as a
    PEP 440 specifier when the plan met TensorFlow's numpy: InvalidSpecifier / ValueError traceback.
    The overlay is fetched data: ``data-overlay-corrupt`` naming the key, before any plan."""
    env = _overlay(sandbox, numpy)
    done = no_traceback(cli, *PLAN, "--tf", "2.18", "--with", "torch", env=env)
    assert done.code != 0, done.out
    assert done.error in ("data-overlay-corrupt", "bad-data"), done.out
    assert "numpy" in json.loads(done.out)["error"]["message"]
    ok = no_traceback(cli, *PLAN, "--tf", "2.18", "--with", "torch", env=_overlay(sandbox, ">=1.26"))
    assert ok.code == 0, ok.out


@pytest.mark.parametrize("companions", [5, "torch", [["torch"]], ["torch==" + "9" * 5000]])
def test_a_lock_whose_recorded_companions_are_the_wrong_kind_is_malformed(cli, sandbox, companions):
    """A lock's record lists ``companions`` (what ``lock --check`` plans again): a number, a string,
    a nested list or a 5,000-digit pin. Each is ``lock-malformed`` (exit 2) naming the record, with no
    traceback, and ``--check`` writes nothing."""
    from tfgpu.lock.pip import lockfile as pip_lock

    from .test_hostile_locks import forged_pip_lock

    lock = sandbox / "team.txt"
    forged_pip_lock(lock)
    parsed = pip_lock.read(lock)
    meta = {key: value for key, value in parsed.meta.items() if key != "sha256"}
    meta["resolution"] = {**meta["resolution"], "companions": ["torch==2.15.0"]}
    text = pip_lock.render(meta, parsed.body, str(lock))  # a well-formed record, then made hostile
    hostile = {**meta, "resolution": {**meta["resolution"], "companions": companions}}
    text = text.replace(pip_lock._digest(meta, parsed.body), pip_lock._digest(hostile, parsed.body))
    text = text.replace('"companions":["torch==2.15.0"]', '"companions":' + json.dumps(companions))
    assert json.dumps(companions) in text
    lock.write_text(text, encoding="utf-8")
    before = snapshot(sandbox)
    done = no_traceback(cli, "lock", "--check", str(lock), "--json")
    assert done.code == 2, done.out
    assert done.error == "lock-malformed", done.out
    assert changed(before, snapshot(sandbox)) == []


def _lock_recording(path, companions: list[str]) -> None:
    """A pip lock as the tool writes it (its own renderer, its checksum right) recording ``companions``:
    what a hand edit of the record looks like once the checksum is recomputed, as anyone can."""
    from tfgpu.lock.pip import lockfile as pip_lock

    from .test_hostile_locks import forged_pip_lock

    forged_pip_lock(path)
    parsed = pip_lock.read(path)
    meta = {key: value for key, value in parsed.meta.items() if key != "sha256"}
    meta["resolution"] = {**meta["resolution"], "companions": companions}
    path.write_text(pip_lock.render(meta, parsed.body, str(path)), encoding="utf-8")


UNPINNED = ["torch", "torch>=2", "torch>=2.10,<2.12", "torch==2.*", "torch===2.15.0", "jax[cuda12]", "torch!=2.9.0"]


@pytest.mark.parametrize("companion", UNPINNED)
@pytest.mark.parametrize(
    "command",
    [
        ("lock", "--check", "{lock}"),
        ("script", "--format", "bash", "--from-lock", "{lock}", "-o", "{out}"),
        ("script", "--format", "kubernetes", "--from-lock", "{lock}", "-o", "{out}"),
        ("create", "--from-lock", "{lock}", "--prefix", "{out}", "--dry-run"),
    ],
    ids=["lock-check", "script-bash", "script-kubernetes", "create-dry-run"],
)
def test_a_lock_recording_an_unpinned_companion_is_malformed_wherever_it_is_read(cli, sandbox, companion, command):
    """A lock records each ``--with`` companion as the release it planned (``torch==2.15.0``). Edited
    to a bare name or a range, ``lock --check`` planned the newest release again and the exports and
    ``create`` took the record as it was: the lock no longer pinned what it installs. Every reader of
    a lock refuses it: ``lock-malformed`` (exit 2) naming the companion, nothing written."""
    lock = sandbox / "team.txt"
    _lock_recording(lock, [companion])
    out = sandbox / "out"
    before = snapshot(sandbox)
    done = no_traceback(cli, *(part.format(lock=lock, out=out) for part in command), "--json")
    assert (done.code, done.error) == (2, "lock-malformed"), done.out
    message = json.loads(done.out)["error"]["message"]
    assert repr(companion) in message and "pinned" in message
    assert changed(before, snapshot(sandbox), allowed=("cache", "logs")) == []
    assert not out.exists()


@pytest.mark.parametrize("companions", [["torch==2.15.0"], ["jax[cuda12]==0.12.0.1"], ["torch==2.15.0+cu128"]])
def test_a_lock_recording_pinned_companions_is_read(companions, sandbox):
    from tfgpu.lock.pip import lockfile as pip_lock

    lock = sandbox / "team.txt"
    _lock_recording(lock, companions)
    assert pip_lock.read(lock).meta["resolution"]["companions"] == companions


# --- update-data's range-request reader of torch's METADATA, against a hostile index ---------------

TORCH = "2.99.0"
WHEEL = f"torch-{TORCH}-cp311-cp311-manylinux_2_28_x86_64.whl"
GOOD_METADATA = (
    f"Metadata-Version: 2.1\nName: torch\nVersion: {TORCH}\n"
    'Requires-Dist: nvidia-cudnn-cu12==9.1.0.70; platform_system == "Linux"\n'
)


def torch_wheel(metadata: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(f"torch-{TORCH}.dist-info/METADATA", metadata)
    return buffer.getvalue()


def lying_bomb() -> bytes:
    """A wheel whose METADATA inflates to 256 MiB while its central directory says 100 bytes (and a
    CRC the reader would only check after inflating everything). The deflate stream is one segment
    for the header and the same compressed MiB of zeros 256 times over (each segment flushed to a
    byte boundary, so they concatenate into one stream): the bytes a compressor of the whole would
    give in size and effect, without compressing 256 MiB per run."""
    head, zeros = b"Metadata-Version: 2.1\nName: torch\n", bytes(1 << 20)

    def segment(data: bytes, mode: int = zlib.Z_FULL_FLUSH) -> bytes:
        squeezer = zlib.compressobj(9, zlib.DEFLATED, -15)
        return squeezer.compress(data) + squeezer.flush(mode)

    packed = segment(head) + segment(zeros) * 256 + segment(b"", zlib.Z_FINISH)
    crc = zlib.crc32(head)
    for _ in range(256):
        crc = zlib.crc32(zeros, crc)
    name = f"torch-{TORCH}.dist-info/METADATA".encode()
    local = b"PK\x03\x04" + (20).to_bytes(2, "little") + b"\x00\x00" + (8).to_bytes(2, "little") + b"\x00" * 4
    local += crc.to_bytes(4, "little") + len(packed).to_bytes(4, "little") + (100).to_bytes(4, "little")
    local += len(name).to_bytes(2, "little") + b"\x00\x00" + name
    central = b"PK\x01\x02" + (20).to_bytes(2, "little") * 2 + b"\x00\x00" + (8).to_bytes(2, "little") + b"\x00" * 4
    central += crc.to_bytes(4, "little") + len(packed).to_bytes(4, "little") + (100).to_bytes(4, "little")
    central += len(name).to_bytes(2, "little") + b"\x00" * 12 + (0).to_bytes(4, "little") + name
    body = local + packed
    eocd = b"PK\x05\x06" + b"\x00" * 4 + (1).to_bytes(2, "little") * 2
    eocd += len(central).to_bytes(4, "little") + len(body).to_bytes(4, "little") + b"\x00\x00"
    return body + central + eocd


class Index(BaseHTTPRequestHandler):
    """PyPI's JSON API for tensorflow (nothing new) and torch (one new release, ``size`` as listed),
    and the wheel with range requests; ``claimed`` is the total the Content-Range header names."""

    wheel: bytes = b""
    size: int = 0
    pattern: bytes = b"\x00"
    pattern_at: int = 0
    url: str = ""
    redirect: str = ""
    answer: str = ""  # "whole": 200 with every byte; "shifted": a Content-Range naming other bytes
    requests: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self.requests.append(self.path)
        if self.path.endswith("/tensorflow/json"):
            return self._send(200, b'{"releases": {}}')
        if self.path.endswith("/torch/json"):
            entry = {
                "filename": WHEEL,
                "url": self.url or f"/files/{WHEEL}",
                "size": self.size or len(self.wheel),
                "packagetype": "bdist_wheel",
                "upload_time_iso_8601": "2027-01-01T00:00:00Z",
                "requires_python": ">=3.10",
            }
            return self._send(200, json.dumps({"releases": {TORCH: [entry]}}).encode())
        if self.path.endswith(WHEEL) and self.redirect:
            return self._send(302, b"", {"Location": self.redirect})
        if self.path.endswith(WHEEL):
            start, end = map(int, re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers["Range"]).groups())
            total = self.size or len(self.wheel)
            end = min(end, total - 1)
            offset = total - len(self.wheel)  # the wheel's bytes end the claimed size
            body = b""
            if start < offset:  # before them: ``pattern`` repeated from ``pattern_at`` on
                skip = (start - self.pattern_at) % len(self.pattern)
                count = min(end + 1, offset) - start
                body = (self.pattern * (count // len(self.pattern) + 2))[skip : skip + count]
            if end >= offset:
                body += self.wheel[max(start, offset) - offset : end + 1 - offset]
            if self.answer == "whole":
                return self._send(200, self.wheel)
            if self.answer == "shifted":
                return self._send(206, body, {"Content-Range": f"bytes {start + 1}-{end + 1}/{total}"})
            return self._send(206, body, {"Content-Range": f"bytes {start}-{end}/{total}"})
        self._send(404, b"")

    def _send(self, status: int, body: bytes, headers: dict | None = None) -> None:
        head = f"HTTP/1.1 {status} X\r\nContent-Length: {len(body)}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items()) + "\r\n"
        try:
            self.wfile.write(head.encode() + body)
        except OSError:
            pass

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def index():
    Index.wheel, Index.size, Index.requests, Index.pattern, Index.pattern_at = b"", 0, [], b"\x00", 0
    Index.url, Index.redirect, Index.answer = "", "", ""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Index)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/pypi"
    server.shutdown()
    server.server_close()


@pytest.fixture
def here(cli):
    """``here(*argv, env={...})``: the tool in this process, failing the test on a traceback (as the
    child process of the ``tool`` fixture did) and on a hang."""
    from hangguard import hang_guard

    def run(*argv: str, env: dict[str, str] | None = None):
        with hang_guard(" ".join(argv[:2])):
            done = no_traceback(cli, *argv, env=env)
        assert "Traceback" not in done.err, done.err  # one a thread of the tool printed
        return done

    return run


def _update(here, sandbox, url):
    # TFGPU_CACHE_DIR is the sandbox's own ``cache``, as the sandbox fixture set it
    return here(
        "update-data",
        "--index",
        url,
        "--json",
        env={"TFGPU_USER_DATA_DIR": str(sandbox / "data"), "TFGPU_UPDATE_TIMEOUT": "20"},
    )


def test_the_companion_reader_reads_a_plain_torch_wheel(here, sandbox, index):
    """The baseline the attacks below change one thing of: a new torch release whose METADATA pins
    cuDNN 9 lands in companions-updates.toml as a cu12 row."""
    Index.wheel = torch_wheel(GOOD_METADATA.encode())
    done = _update(here, sandbox, index)
    assert done.code == 0, done.out + done.err
    overlay = (sandbox / "data" / "companions-updates.toml").read_text(encoding="utf-8")
    assert 'version = "2.99.0"' in overlay and "nvidia-cudnn-cu12" in overlay


def test_a_metadata_member_that_inflates_past_its_claimed_size_stays_bounded(here, sandbox, index):
    """Attack: the torch wheel's METADATA is a deflate bomb (about 250 KB on the wire) that inflates to
    256 MiB while the central directory claims 100 bytes. The reader inflated it whole before it
    compared anything (memory as large as the bomb). It must stop at the claimed size plus one byte:
    ``update-failed``, no overlay written."""
    Index.wheel = lying_bomb()
    done = _update(here, sandbox, index)
    assert done.code != 0, done.out
    assert json.loads(done.out)["error"]["code"] == "update-failed", done.out
    assert not (sandbox / "data" / "companions-updates.toml").exists()


def test_a_central_directory_that_claims_gigabytes_is_refused_without_reading_it(here, sandbox, index):
    """Attack: the index lists the wheel at 2 GB and its end record says the central directory is
    1.9 GB (the bytes answered are zeros and entries). The reader fetched it 512 KiB at a time until the
    run's deadline. A wheel's directory is a few MiB: a claim beyond the cap is ``update-failed`` at
    once, after a handful of requests, no overlay written."""
    size = 2 * 1024 * 1024 * 1024
    cd_size = size - 100 * 1024 * 1024
    eocd = b"PK\x05\x06" + b"\x00" * 4 + (1).to_bytes(2, "little") * 2
    eocd += cd_size.to_bytes(4, "little") + (size - 22 - cd_size).to_bytes(4, "little") + b"\x00\x00"
    name = b"torch/lib/libtorch_cuda.so"
    entry = b"PK\x01\x02" + b"\x00" * 24 + len(name).to_bytes(2, "little") + b"\x00" * 16 + name
    Index.wheel, Index.size, Index.pattern, Index.pattern_at = eocd, size, entry, size - 22 - cd_size
    done = _update(here, sandbox, index)
    assert done.code != 0, done.out
    assert json.loads(done.out)["error"]["code"] == "update-failed", done.out
    assert "central directory" in json.loads(done.out)["error"]["message"]
    assert sum(WHEEL in r for r in Index.requests) <= 4, Index.requests
    assert not (sandbox / "data" / "companions-updates.toml").exists()


HOSTILE_METADATA = {
    "nul-in-a-pin": GOOD_METADATA + "Requires-Dist: nvidia-nccl-cu12==2.1\x00; rm -rf ~\n",
    "shell-in-a-pin": GOOD_METADATA + "Requires-Dist: nvidia-nccl-cu12 (==2.1;$(touch PWNED))\n",
    "url-requirement": GOOD_METADATA + "Requires-Dist: nvidia-nccl-cu12 @ https://evil.example/x.whl\n",
    "ten-thousand-pins": GOOD_METADATA + "".join(f"Requires-Dist: nvidia-x{i}-cu12==1.{i}\n" for i in range(10_000)),
    "two-majors": GOOD_METADATA + "Requires-Dist: nvidia-nccl-cu13==2.1\n",
    "not-utf8": GOOD_METADATA + "Requires-Dist: nvidia-nccl-cu12==2.\udcff1\n",
}

HOSTILE_METADATA["nested-marker"] = GOOD_METADATA + (
    "Requires-Dist: nvidia-nccl-cu12==2.1; " + "(" * 5000 + "os_name == 'posix'" + ")" * 5000 + "\n"
)
HOSTILE_METADATA["not-not-marker"] = GOOD_METADATA + (
    "Requires-Dist: nvidia-nccl-cu12==2.1; " + "not " * 100_000 + "os_name == 'posix'\n"
)


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(case, marks=pytest.mark.slow)
        if case == "ten-thousand-pins"
        else case  # 13 s: the full run keeps it
        for case in sorted(HOSTILE_METADATA)
    ],
)
def test_a_hostile_torch_metadata_ends_with_a_code_and_an_overlay_that_loads(here, sandbox, index, case):
    """Attack: the new torch wheel's METADATA pins with a NUL or shell syntax in a marker (which crashed
    the marker parser: SyntaxError, ValueError traceback), a marker nested 5,000 deep, a URL, ten thousand
    nvidia names, two CUDA majors, bytes that are not UTF-8. ``update-data`` either refuses
    (``update-failed``, no overlay) or writes an overlay that the planner then loads and plans with,
    never a traceback, never a command run."""
    Index.wheel = torch_wheel(HOSTILE_METADATA[case].encode("utf-8", "surrogateescape"))
    done = _update(here, sandbox, index)
    overlay = sandbox / "data" / "companions-updates.toml"
    if done.code != 0:
        assert json.loads(done.out)["error"]["code"] == "update-failed", done.out
        assert not overlay.exists()
        return
    plan = here(*PLAN, "--tf", "2.18", "--with", "torch", env={"TFGPU_USER_DATA_DIR": str(sandbox / "data")})
    assert plan.code in (0, 1, 2), plan.out + plan.err


def test_an_overlay_of_thousands_of_companion_rows_weighs_a_bounded_number_of_combinations(cli, sandbox, monkeypatch):
    """Attack: a companions-updates.toml of 600 KB (1,500 torch and 1,500 JAX releases, none of which
    fits) and ``--with torch --with jax``. The planner checked every combination (2.25 million) before
    it answered: minutes of CPU for one ``plan``. The combinations weighed are bounded, newest first
    (counted here: the checks the planner makes), ``companion-conflict`` (exit 3), no traceback,
    nothing written."""
    from hangguard import hang_guard

    from tfgpu.resolver import companions, tables

    checks = []
    real_check = companions.check

    def counting(*args, **kwargs):
        checks.append(1)
        return real_check(*args, **kwargs)

    monkeypatch.setattr(companions, "check", counting)
    data = sandbox / "userdata"
    data.mkdir()
    rows = [
        f'[[release]]\nframework = "{fw}"\nversion = "9.{i}.0"\nextra = "{extra}"\nstack = "cu13"\n'
        f'python = ["3.11"]\nnumpy = ">=99"\nwheels = ["x"]\nsource = ["PYPI-JSON"]\n\n'
        f'[release.nvidia]\n"nvidia-cudnn-cu13" = ">=99"\n'
        for i in range(1500)
        for fw, extra in (("torch", ""), ("jax", "cuda13"))
    ]
    (data / "companions-updates.toml").write_text(
        "\n".join(rows) + '\n[versions]\n"nvidia-cudnn-cu13" = ["9.3.0"]\n', encoding="utf-8"
    )
    before = snapshot(sandbox)
    with hang_guard("plan with 1,500 torch and 1,500 JAX rows"):
        done = cli(*PLAN, "--with", "torch>=9", "--with", "jax[cuda13]>=9", env={"TFGPU_USER_DATA_DIR": str(data)})
    assert done.code == 3, done.out + done.err
    # At most the bound per TensorFlow release weighed (the one asked and the ways forward), where
    # every combination would be 2.25 million per release.
    assert 0 < len(checks) <= companions.MAX_COMBOS * len(tables.releases()) < 1500 * 1500
    assert json.loads(done.out)["error"]["code"] == "companion-conflict"
    assert changed(before, snapshot(sandbox), allowed=("cache",)) == []


@pytest.mark.parametrize(
    "url, redirect",
    [
        ("file:///etc/passwd", ""),
        ("http://user:secret@127.0.0.2/torch.whl", ""),
        ("", "http://169.254.169.254/latest/meta-data/torch.whl"),
        ("", "file:///etc/passwd"),
    ],
)
def test_a_torch_wheel_url_or_redirect_off_the_rule_is_refused(here, sandbox, index, url, redirect):
    """Attack: the torch release lists its wheel at a ``file:`` URL or with credentials, or the wheel's
    URL redirects to the cloud metadata address or a local file. The companion reader goes through
    the URL door like TensorFlow's: a code, no overlay, no request reaching anywhere else."""
    Index.wheel = torch_wheel(GOOD_METADATA.encode())
    Index.url, Index.redirect = url, redirect
    done = _update(here, sandbox, index)
    assert done.code != 0, done.out
    assert json.loads(done.out)["error"]["code"] in ("update-failed", "bad-url", "insecure-url"), done.out
    assert not (sandbox / "data" / "companions-updates.toml").exists()


@pytest.mark.parametrize("answer", ["whole", "shifted"])
def test_a_range_answer_that_is_not_the_range_asked_is_refused(here, sandbox, index, answer):
    """Attack: the server answers a range request for the torch wheel with the whole file (200) or
    with a Content-Range naming other bytes. The reader never reads on past the range, never takes
    the bytes as the ones asked: ``update-failed``, no overlay."""
    Index.wheel = torch_wheel(GOOD_METADATA.encode())
    Index.answer = answer
    done = _update(here, sandbox, index)
    assert done.code != 0, done.out
    assert json.loads(done.out)["error"]["code"] == "update-failed", done.out
    assert not (sandbox / "data" / "companions-updates.toml").exists()


def test_thousands_of_with_flags_and_a_hostile_project_with_list_are_refused_before_planning(cli, sandbox, monkeypatch):
    """Attack: thousands of ``--with`` flags on one command line, and a tfgpu.toml whose ``with`` names
    torch twice, a URL and an option. Each is refused with its code (``companion-unsupported`` for
    the flags, ``bad-project-file`` for the file) before the planner weighs one combination, nothing
    written. 2,000 flags: the refusal comes at the second torch; what a larger count adds is
    argparse's own scan of the command line, quadratic in the flags (10,000 took seconds there)."""
    from hangguard import hang_guard

    from tfgpu.resolver import companions

    def planned(*args, **kwargs):
        raise AssertionError("the planner weighed a combination of a refused --with")

    monkeypatch.setattr(companions, "check", planned)
    before = snapshot(sandbox)
    argv = [part for i in range(2_000) for part in ("--with", f"torch>=2.{i}")]
    with hang_guard("plan with 2,000 --with flags"):
        done = cli(*PLAN, *argv)
    assert done.code == 2 and json.loads(done.out)["error"]["code"] == "companion-unsupported", done.out
    for listed in ('["torch", "torch"]', '["torch @ https://evil.example/t.whl"]', '["--index-url=http://x"]'):
        (sandbox / "tfgpu.toml").write_text(f"with = {listed}\n", encoding="utf-8")
        done = cli(*PLAN, "--project", str(sandbox / "tfgpu.toml"))
        assert done.code == 2 and json.loads(done.out)["error"]["code"] == "bad-project-file", done.out
    (sandbox / "tfgpu.toml").unlink()
    assert changed(before, snapshot(sandbox), allowed=("cache",)) == []


@pytest.mark.parametrize("cut", [0, 3, 45])
def test_cached_ranges_of_the_wrong_length_are_not_taken_as_the_wheel(here, sandbox, index, cut):
    """Attack: after one good run, every cached range answer of the torch wheel is cut to ``cut``
    bytes (another process, a full disk, a hostile cache), then ``update-data --offline`` reads the
    cache only. A cached range is the bytes asked or nothing: the run ends with a code (or re-reads
    nothing it cannot trust), never a struct/zip traceback, and never writes a row from cut bytes."""
    Index.wheel = torch_wheel(GOOD_METADATA.encode())
    assert _update(here, sandbox, index).code == 0
    overlay = sandbox / "data" / "companions-updates.toml"
    overlay.unlink()
    ranges = [p for p in (sandbox / "cache").rglob("*") if p.is_file() and "ranges" in p.parts]
    assert ranges
    for path in ranges:
        path.write_bytes(path.read_bytes()[:cut])
    done = here(
        "update-data", "--offline", "--index", index, "--json", env={"TFGPU_USER_DATA_DIR": str(sandbox / "data")}
    )
    if done.code == 0:
        assert 'version = "2.99.0"' not in (overlay.read_text(encoding="utf-8") if overlay.exists() else "") or (
            "nvidia-cudnn-cu12" in overlay.read_text(encoding="utf-8")
        )
    else:
        assert json.loads(done.out)["error"]["code"] in ("update-failed", "offline-no-cache"), done.out
        assert not overlay.exists()


def test_a_cut_cached_range_is_fetched_again_online(here, sandbox, index):
    """Attack: a cached range answer of the torch wheel is cut short (a crash of another writer, a
    hostile cache). Online, the reader took the cached bytes as the range asked, so every later
    ``update-data`` failed with "not a zip file" until the cache was cleared by hand. A cached range
    whose length is not the range's is not an answer: fetched again, the run succeeds."""
    Index.wheel = torch_wheel(GOOD_METADATA.encode())
    assert _update(here, sandbox, index).code == 0
    overlay = sandbox / "data" / "companions-updates.toml"
    overlay.unlink()
    for path in (sandbox / "cache").rglob("*"):
        if path.is_file() and "ranges" in path.parts:
            path.write_bytes(path.read_bytes()[:5])
    done = _update(here, sandbox, index)
    assert done.code == 0, done.out
    assert "nvidia-cudnn-cu12" in overlay.read_text(encoding="utf-8")


def _zip64_liar(extra: bytes) -> bytes:
    """A wheel whose one central-directory entry says its size is in a zip64 field, with ``extra``."""
    name = f"torch-{TORCH}.dist-info/METADATA".encode()
    central = b"PK\x01\x02" + b"\x00" * 16 + (5).to_bytes(4, "little") + (0xFFFFFFFF).to_bytes(4, "little")
    central += len(name).to_bytes(2, "little") + len(extra).to_bytes(2, "little") + b"\x00" * 14 + name + extra
    eocd = b"PK\x05\x06" + b"\x00" * 4 + (1).to_bytes(2, "little") * 2
    eocd += len(central).to_bytes(4, "little") + (0).to_bytes(4, "little") + b"\x00\x00"
    return central + eocd


@pytest.mark.parametrize("extra", [b"\x01\x00\x00\x00", b"\x01\x00\x10\x00\x00\x00\x00\x00"], ids=["empty", "short"])
def test_a_central_directory_whose_zip64_field_lies_is_update_failed(here, sandbox, index, extra):
    """Attack: the torch wheel's central directory marks METADATA's size as "in the zip64 field" and
    then gives an empty zip64 field (``next()`` inside the directory generator became a RuntimeError
    traceback) or one that says 16 bytes and holds 4 (that one already ended as update-failed, through
    struct.error). Both are a broken zip: ``update-failed``, no overlay."""
    Index.wheel = _zip64_liar(extra)
    done = _update(here, sandbox, index)
    assert done.code != 0, done.out
    assert json.loads(done.out)["error"]["code"] == "update-failed", done.out
    assert not (sandbox / "data" / "companions-updates.toml").exists()
