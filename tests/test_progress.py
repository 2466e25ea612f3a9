"""Progress of transfers, end to end: real downloads off a local HTTP server (one that drips, for a
slow transfer), a real ``uv pip install`` from a local index on a pseudo-terminal, and what a person
sees: the bar on a terminal (a real pseudo-terminal), plain lines on a pipe. Time is a fake
clock where pace matters; nothing here waits ten seconds."""

from __future__ import annotations

import ensurepip
import hashlib
import io
import os
import pty
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import wheelhouse
from localindex import Server, build_index

from tfgpu.cli.render import live
from tfgpu.engines import download
from tfgpu.engines import uv as uv_engine
from tfgpu.engines.uv_progress import LABEL, UvProgress, draws_progress
from tfgpu.process.runner import Runner
from tfgpu.progress import Combined, RecordingReporter

MIB = 1 << 20


def served_file(root: Path, name: str, size: int) -> tuple[Path, str]:
    """``root/files/name``: ``size`` random (incompressible) bytes, and its sha256."""
    path = root / "files" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(os.urandom(size))
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


class FakeClock:
    """Seconds that pass only when asked: ``step`` at every reading."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


class Pipe(io.StringIO):
    """stderr as a pipe: every write kept with the fake time it was made at."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self.clock, self.writes = clock, []

    def write(self, text: str) -> int:
        self.writes.append((self.clock.now, text))
        return super().write(text)

    def isatty(self) -> bool:
        return False


def test_a_download_reports_its_bytes_growing_to_the_total(tmp_path, monkeypatch):
    monkeypatch.setattr(download, "PROGRESS_EVERY", 0.0)
    path, sha256 = served_file(tmp_path / "root", "cudnn.tar.xz", 2 * MIB)
    reporter = RecordingReporter()
    with Server(tmp_path / "root", drip=0.001) as url:
        download.fetch(
            url.removesuffix("/simple") + "/files/cudnn.tar.xz", tmp_path / "cache", sha256=sha256, reporter=reporter
        )
    moved = reporter.transfers("cudnn.tar.xz")
    assert len(moved) > 5
    assert all(total == 2 * MIB for _, total in moved)  # the server said the size: the total is known throughout
    assert [done for done, _ in moved] == sorted(done for done, _ in moved)
    assert moved[-1] == (2 * MIB, 2 * MIB)


def test_a_bundles_files_are_one_transfer_over_their_sum(tmp_path, monkeypatch):
    """Many files, one bar: each file's bytes are added to those of the files before it."""
    monkeypatch.setattr(download, "PROGRESS_EVERY", 0.0)
    files = [served_file(tmp_path / "root", f"w{i}.whl", (i + 1) * 256 * 1024) for i in range(3)]
    total = sum(path.stat().st_size for path, _ in files)
    reporter = RecordingReporter()
    combined = Combined(reporter, "3 wheels", total)
    with Server(tmp_path / "root") as url:
        for path, sha256 in files:
            got = download.fetch(
                f"{url.removesuffix('/simple')}/files/{path.name}", tmp_path / "out", sha256=sha256, reporter=combined
            )
            combined.next_file(got.stat().st_size)
    moved = reporter.transfers("3 wheels")
    assert {t for _, t in moved} == {total}
    assert [d for d, _ in moved] == sorted(d for d, _ in moved)
    assert moved[-1] == (total, total)
    assert reporter.transfers("w0.whl") == []  # no bar per file
    assert not [e for e in reporter.events if e[0] == "note"]  # nor a line per file


def test_piped_a_slow_transfer_says_its_bytes_at_least_every_ten_seconds(tmp_path, monkeypatch):
    """A server that drips; the reporter's clock is fake and moves 0.7 s per reading, so the
    transfer "takes" minutes while the test takes a second."""
    monkeypatch.setattr(download, "PROGRESS_EVERY", 0.0)
    clock = FakeClock(0.7)
    pipe = Pipe(clock)
    monkeypatch.setattr(sys, "stderr", pipe)
    path, sha256 = served_file(tmp_path / "root", "cuda.run", 3 * MIB)
    reporter = live.ConsoleReporter(clock=clock)
    with Server(tmp_path / "root", drip=0.0005) as url:
        reporter.step(1, 1, "Download CUDA")
        download.fetch(
            url.removesuffix("/simple") + "/files/cuda.run", tmp_path / "cache", sha256=sha256, reporter=reporter
        )
        reporter.close()
    lines = [(at, text) for at, text in pipe.writes if text.startswith("  cuda.run: ")]
    assert clock.now > 60  # the fake transfer lasted over a minute
    assert len(lines) >= clock.now // live.PLAIN_EVERY - 1
    assert all(re.search(r"[\d.]+ [kMG]?B of 3\.1 MB \(\d+%\)", text) for _, text in lines), lines
    times = [at for at, _ in lines]
    assert max(b - a for a, b in zip(times, times[1:], strict=False)) <= live.PLAIN_EVERY + 2 * clock.step
    assert "3.1 MB of 3.1 MB (100%)" in lines[-1][1] and " in " in lines[-1][1]  # the last word: how long it took
    assert sum("(100%)" in text for _, text in lines) == 1
    assert "\x1b" not in pipe.getvalue()  # a pipe gets no escape sequences


def test_piped_an_unknown_total_still_says_the_bytes_so_far(monkeypatch):
    clock = FakeClock(3.0)
    pipe = Pipe(clock)
    monkeypatch.setattr(sys, "stderr", pipe)
    reporter = live.ConsoleReporter(clock=clock)
    for done in range(0, 20 * MIB, MIB):
        reporter.transfer("conda packages", done, None)
    reporter.close()
    lines = pipe.getvalue().splitlines()
    assert lines and all(line.startswith("  conda packages: ") for line in lines)
    assert "so far" in lines[0] and "so far" not in lines[-1] and "19.9 MB" in lines[-1]


CHILD = r"""
import sys, time
from tfgpu.doors import urls
from tfgpu.engines import download
from tfgpu.cli.render.results import ConsoleReporter, _out

urls.trust(["127.0.0.1"])
url, sha256, cache = sys.argv[1:4]
reporter = ConsoleReporter()
reporter.step(1, 2, "Download the toolkit")
download.fetch(url, cache, sha256=sha256, reporter=reporter)
reporter.step(2, 2, "Install it")
reporter.transfer("PyPI wheels", 1000000, 4000000)
time.sleep(0.3)
reporter.note("a note while the bar is live")
time.sleep(0.3)
reporter.transfer("PyPI wheels", 2000000, 4000000)
time.sleep(0.2)
_out.print("printed on stdout while the bar is live")
reporter.close()
"""


def on_a_terminal(argv: list[str], columns: int = 100) -> str:
    """What ``argv`` draws on a real pseudo-terminal (stdout and stderr both)."""
    import fcntl
    import struct
    import termios

    reader, child_end = pty.openpty()
    fcntl.ioctl(child_end, termios.TIOCSWINSZ, struct.pack("HHHH", 30, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("TTY_COMPATIBLE", "NO_COLOR", "COLUMNS", "FORCE_COLOR")}
    child = subprocess.Popen(
        argv, stdout=child_end, stderr=child_end, stdin=subprocess.DEVNULL, env={**env, "TERM": "xterm"}
    )
    os.close(child_end)
    drawn = b""
    while True:
        try:
            chunk = os.read(reader, 1 << 16)
        except OSError:
            break
        if not chunk:
            break
        drawn += chunk
    os.close(reader)
    assert child.wait(timeout=60) == 0, drawn.decode(errors="replace")[-2000:]
    return drawn.decode("utf-8", "replace")


def before(plain: str, text: str) -> str:
    """The character the terminal got just before ``text`` (escape sequences taken out)."""
    return plain[: plain.index(text)][-1:]


def test_on_a_terminal_a_download_is_a_bar_with_a_total_and_nothing_is_glued_to_it(tmp_path):
    path, sha256 = served_file(tmp_path / "root", "cudnn.tar.xz", 3 * MIB)
    with Server(tmp_path / "root", drip=0.001) as url:
        drawn = on_a_terminal(
            [
                sys.executable,
                "-c",
                CHILD,
                url.removesuffix("/simple") + "/files/cudnn.tar.xz",
                sha256,
                str(tmp_path / "c"),
            ]
        )
    plain = re.sub(r"\x1b\[[0-?]*[ -/]*[@-~]", "", drawn)
    assert re.search(r"cudnn\.tar\.xz ━+.* [\d.]+/3\.1 MB", plain), plain[-1500:]  # bytes of the total
    assert re.search(r"3\.1/3\.1 MB", plain)
    assert re.search(r"[\d.]+/4\.0 MB", plain)
    assert "MB/s" in plain  # the rate
    # Every line printed while a display is live starts on a line of its own: after a newline, or
    # after the display's line was taken back (a carriage return, then an erase).
    for text in ("  → a note while the bar is live", "printed on stdout while the bar is live", "[2/2] Install it"):
        assert before(plain, text) in ("\n", "\r"), (text, plain[plain.index(text) - 80 : plain.index(text)])


@pytest.fixture(scope="module")
def big_index(tmp_path_factory) -> tuple[Path, Path]:
    """Two wheels of 3 MiB of random (incompressible) bytes each, ``bigpkg`` and ``otherpkg``, and
    a PEP 503 tree of them to serve: built once, the installs only read them."""
    top = tmp_path_factory.mktemp("big-wheels")
    wheels = top / "wheels"
    for name in ("bigpkg", "otherpkg"):
        wheelhouse.wheel(wheels, name, "1.0", {f"{name}/data.bin": os.urandom(3 * MIB)})
    build_index(wheels, top / "root")
    return wheels, top / "root"


def test_a_uv_install_from_a_local_index_reports_the_wheels_bytes(tmp_path, big_index):
    """A real ``uv pip install`` on a pseudo-terminal; the index drips, so uv draws its bars."""
    uv = uv_engine.find_uv()
    if uv is None:
        pytest.skip("uv is not installed")
    wheels, root = big_index
    runner = Runner()
    assert runner.run([uv, "venv", str(tmp_path / "v"), "--python", sys.executable, "--no-config"]).returncode == 0
    reporter = RecordingReporter()
    watch = UvProgress(reporter)
    printed = []
    with Server(root, drip=0.003) as url:
        argv = uv_engine.install(
            uv,
            str(tmp_path / "v" / "bin" / "python"),
            _requirements(tmp_path, "bigpkg\notherpkg\n"),
            cache=tmp_path / "uvcache",
            extra=("--default-index", url),
            compile_bytecode=False,
        )
        assert draws_progress(argv)
        done = runner.run(argv, on_line=printed.append, screen=watch.feed)
    assert done.returncode == 0, done.output
    watch.finish()
    moved = reporter.transfers(LABEL)
    assert len(moved) >= 3, moved
    wheel_bytes = sum(w.stat().st_size for w in wheels.glob("*.whl"))
    assert abs(moved[-1][1] - wheel_bytes) < 0.02 * wheel_bytes  # uv's sizes, to its two decimals
    assert moved[-1][0] == moved[-1][1]
    assert any(0 < d < (t or 0) for d, t in moved)  # seen part way, not only at the end
    # Until uv draws both downloads, the sum of one is not the total: no total is said.
    assert {t for _, t in moved} <= {None, moved[-1][1]}
    # What uv printed reaches the log and the caller as plain lines: no bar, no escape sequence.
    assert any("Installed 2 packages" in line for line in printed)
    assert "\x1b" not in done.output and "\r" not in done.output and "---" not in done.output


def _requirements(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "requirements.txt"
    path.write_text(text)
    return path


def test_uvs_bars_are_read_whole_frames_at_a_time():
    """uv's redraws, cut anywhere: a wheel no longer drawn is complete; the total is every size."""
    reporter = RecordingReporter()
    watch = UvProgress(reporter)
    frames = (
        "\x1b[2mPreparing packages...\x1b[0m (0/2)   \x1b[2mnumpy  \x1b[0m ------------------------------  1.00 MiB/16.00 MiB"
        "  scipy ------------------------------ 512.00 KiB/32.00 MiB\x1b[1A\r\x1b[2K"
        "\x1b[2mPreparing packages...\x1b[0m (0/2) numpy ------------------------------ 15.50 MiB/16.00 MiB"
        "  scipy ------------------------------ 8.00 MiB/32.00 MiB\r\x1b[2K"
        "\x1b[2mPreparing packages...\x1b[0m (1/2) scipy ------------------------------ 9.00 MiB/32.00 MiB\r\x1b[2K"
        "\x1b[2mPreparing packages...\x1b[0m (1/2) scipy ---------"
    )
    for start in range(0, len(frames), 37):  # pieces that cut escapes, numbers and names in two
        watch.feed(frames[start : start + 37])
    assert reporter.transfers()[-1] == ((16 + 9) * MIB, 48 * MIB)
    watch.finish()
    assert reporter.transfers()[-1] == (48 * MIB, 48 * MIB)


def test_only_uvs_installs_run_on_a_terminal():
    assert draws_progress(["/x/uv", "pip", "install", "-r", "r.txt"])
    assert not draws_progress(["/x/uv", "pip", "compile", "r.in"])
    assert not draws_progress(["/x/uv", "pip", "list"])
    assert not draws_progress(["/x/python", "-m", "pip", "install"])


def test_nothing_drawn_means_no_numbers_not_wrong_ones():
    reporter = RecordingReporter()
    watch = UvProgress(reporter)
    watch.feed("Resolved 3 packages in 20ms\r\nInstalled 3 packages in 5ms\r\n")
    watch.finish()
    assert reporter.transfers() == []


def test_uvs_downloads_are_complete_when_it_says_prepared():
    """After its last redraw uv prints "Prepared N packages"; no redraw follows to read."""
    reporter = RecordingReporter()
    watch = UvProgress(reporter)
    watch.feed(
        "\x1b[2mPreparing packages...\x1b[0m (0/1) tensorflow ------------------------------ 600.00 MiB/620.00 MiB"
    )
    assert reporter.transfers() == []  # that redraw may still be arriving
    watch.feed("\r\x1b[2K\x1b[2mPrepared \x1b[1m1 package\x1b[0m \x1b[2min 20.5s\x1b[0m\r\n")
    assert reporter.transfers()[-1] == (620 * MIB, 620 * MIB)


def test_rattlers_package_downloads_become_one_transfer(capsys):
    """The engine process sums its downloads (rattler's installer callbacks) into one line the tool
    reads; py-rattler calls these hooks itself, fed here by hand (no conda channel to reach)."""
    from tfgpu.engines import rattler_child
    from tfgpu.engines.rattler_engine import PROGRESS, transfer_of

    progress = rattler_child._Progress(2)
    first, second = progress.on_download_start(0), progress.on_download_start(1)
    progress.on_download_progress(first, 100, 1000)
    progress.said = 0.0  # past the pause between two lines
    progress.on_download_progress(second, 50, 500)
    progress.on_download_completed(first)
    progress.on_download_completed(second)
    lines = [line.removeprefix(PROGRESS) for line in capsys.readouterr().out.splitlines()]
    moved = [transfer_of(line) for line in lines]
    assert moved[0] == (100, None)  # the second download's size was not known yet
    assert moved[-1] == (1500, 1500)
    assert transfer_of("linked 3/9 packages") is None and transfer_of("bytes 12 x") is None


# --- pip (--engine pip) --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pip_venv(tmp_path_factory) -> Path:
    """A venv with the pip its Python bundles, as ``--engine pip`` makes it (``python -m venv``).

    ``python -m venv`` has that pip install itself from the bundled wheel (ensurepip), seconds of
    CPU; here the venv is made without it and the same wheel is unpacked into it, which is the same
    pip in the same place. Its bytecode is not compiled ahead (most of it pip never imports here):
    Python compiles and keeps what the first run imports, as for any source without it. A Python
    without the bundled wheel (Debian's keep it elsewhere) gets ``python -m venv`` whole."""
    venv = tmp_path_factory.mktemp("pip-venv") / "v"
    bundled = sorted((Path(ensurepip.__file__).parent / "_bundled").glob("pip-*.whl"))
    if not bundled:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        return venv
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python3*/site-packages"))
    with zipfile.ZipFile(bundled[-1]) as wheel:
        wheel.extractall(site)
    return venv


def test_a_pip_install_from_a_slow_index_reports_each_wheels_bytes(pip_venv, big_index):
    """A real pip (the one ``python -m venv`` bundles) on a pseudo-terminal, as ``--engine pip``
    runs it; the index drips, so pip draws its bar, read back as each wheel's bytes of its size."""
    from tfgpu.engines.pip_progress import PipProgress
    from tfgpu.engines.pip_progress import draws_progress as pip_draws

    wheels, root = big_index
    reporter = RecordingReporter()
    watch = PipProgress(reporter)
    argv = [
        str(pip_venv / "bin" / "python"),
        *("-m", "pip", "install", "--force-reinstall", "--disable-pip-version-check", "--no-cache-dir", "--isolated"),
    ]
    assert pip_draws(argv)
    with Server(root, drip=0.002) as url:
        done = Runner().run([*argv, "--index-url", url, "bigpkg", "otherpkg"], screen=watch.feed)
    assert done.returncode == 0, done.output
    watch.finish()
    for name in ("bigpkg", "otherpkg"):
        moved = reporter.transfers(f"{name} 1.0")
        size = next(wheels.glob(f"{name}-*.whl")).stat().st_size
        assert len(moved) >= 3, reporter.events
        assert all(abs(total - size) <= 0.05 * size for _, total in moved)  # pip's size, to its one decimal
        assert [d for d, _ in moved] == sorted(d for d, _ in moved) and moved[-1][0] == moved[-1][1]
        assert any(0 < d < (t or 0) for d, t in moved)  # seen part way, not only at the end
    # Until uv draws both downloads, the sum of one is not the total: no total is said.
    assert {t for _, t in moved} <= {None, moved[-1][1]}
    assert "Successfully installed" in done.output and "\x1b" not in done.output


def test_pips_raw_lines_and_cut_redraws_are_read():
    """pip 24.1's ``--progress-bar raw`` lines (exact bytes), and rich's redraws cut anywhere."""
    from tfgpu.engines.pip_progress import PipProgress

    reporter = RecordingReporter()
    watch = PipProgress(reporter)
    text = (
        "Collecting tensorflow\r\n  Downloading https://files.example/tensorflow-2.21.0-cp311-cp311-manylinux_2_17_x86_64.whl"
        " (620.1 MB)\r\nProgress 0 of 620100000\r\nProgress 310050000 of 620100000\r\n"
        "Collecting numpy\r\n  Downloading numpy-2.1.0-cp311-cp311-manylinux_2_17_x86_64.whl (16.3 MB)\r\n"
        "\x1b[?25l     \x1b[91m━━━━\x1b[0m\x1b[90m╺━━━━\x1b[0m \x1b[32m8.1/16.3 MB\x1b[0m \x1b[31m9.0 MB/s\x1b[0m eta \x1b[36m0:00:01\x1b[0m\r\x1b[2K"
        "     \x1b[91m━━━━━━━━\x1b[0m \x1b[32m16.3/16.3 MB\x1b[0m\r\n\x1b[?25hInstalling collected packages: numpy, tensorflow\r\n"
    )
    for start in range(0, len(text), 23):
        watch.feed(text[start : start + 23])
    watch.finish()
    assert reporter.transfers("tensorflow 2.21.0") == [(0, 620100000), (310050000, 620100000), (620100000, 620100000)]
    assert reporter.transfers("numpy 2.1.0") == [(8100000, 16300000), (16300000, 16300000)]


def test_only_pip_installs_are_read_as_pips():
    from tfgpu.engines.pip_progress import draws_progress as pip_draws

    assert pip_draws(["/e/bin/python", "-m", "pip", "install", "-r", "r.txt"])
    assert not pip_draws(["/e/bin/python", "-m", "pip", "list"])
    assert not pip_draws(["/x/uv", "pip", "install"])


def test_piped_a_pip_download_ends_with_a_plain_line_of_its_bytes(pip_venv, big_index, capsys):
    """What a log of ``--engine pip`` reads: a line per wheel with its bytes of its size (real pip,
    a dripping local index, the tool's console reporter on a pipe)."""
    from tfgpu.engines.pip_progress import PipProgress

    _, root = big_index
    reporter = live.ConsoleReporter()
    reporter.step(1, 1, "Install TensorFlow with pip")
    watch = PipProgress(reporter)
    python = str(pip_venv / "bin" / "python")
    with Server(root, drip=0.002) as url:
        argv = [
            python,
            "-m",
            "pip",
            "install",
            "--force-reinstall",
            "--no-cache-dir",
            "--isolated",
            "--index-url",
            url,
            "bigpkg",
        ]
        done = Runner().run(argv, screen=watch.feed)
    watch.finish()
    reporter.close()
    assert done.returncode == 0, done.output
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("  bigpkg 1.0: ")]
    assert lines and re.fullmatch(
        r"  bigpkg 1\.0: 3\.1 MB of 3\.1 MB \(100%\), [\d.]+ [kMG]?B/s in 0:0\d", lines[-1]
    ), lines


HANG = 60
"""Seconds a reader may take before it counts as hung (each case takes well under one)."""
_READERS = """
import sys, time
from tfgpu.engines.pip_progress import PipProgress
from tfgpu.engines.uv_progress import UvProgress
from tfgpu.progress import RecordingReporter

def feed(reader, text, piece=4096):
    for start in range(0, len(text), piece):
        reader.feed(text[start : start + piece])
    reader.finish()

MIB = 1 << 20
for unit in sys.argv[1:]:
    line = "Preparing packages...\\n" + unit * (MIB // len(unit)) + "\\nPreparing packages...\\n"
    for cls in (UvProgress, PipProgress):
        reporter = RecordingReporter()
        feed(cls(reporter), line)
        print(cls.__name__, "line", repr(unit), reporter.transfers())
frame = "Preparing packages... (0/1)\\n" + "tensorflow ------------------------------ {} MiB/600.00 MiB\\n"
stream = "".join(frame.format(f"{n % 600}.00") for n in range(10 * MIB // len(frame)))
reporter = RecordingReporter()
feed(UvProgress(reporter), stream)
print("UvProgress stream", reporter.transfers()[-1], len(stream))
pip = "  Downloading https://files.example/x-1.0-py3-none-any.whl (600.0 MB)\\r\\n"
pip += "".join(f"   ━━━━━━━ {n % 600}.0/600.0 MB 9.0 MB/s\\r" for n in range(10 * MIB // 40))
reporter = RecordingReporter()
feed(PipProgress(reporter), pip)
print("PipProgress stream", reporter.transfers("x 1.0")[-1], len(pip))
"""


LINE_UNITS = ("a", "a ", " ", "9", "-", "x ----", "\x1b[0", "\x1b]0;", "tf ---- 1")
"""What the 1 MB lines repeat: runs of name characters, spaces, digits, dashes, unfinished escapes."""


def test_every_progress_reader_reads_a_1_mb_line_and_a_10_mb_stream_in_linear_time():
    """A child that draws a 1 MB line and redraws its bar for 10 MB: uv's reader took 38 s on a
    32 KiB line of name characters (each position of the run began a scan to its end: a 1 MB line,
    hours). Run in a process of its own under a timeout that only catches a hang; junk yields no
    numbers and the bars' numbers are still read."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", _READERS, *LINE_UNITS], capture_output=True, text=True, timeout=HANG
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"1 MB lines of {LINE_UNITS} and a 10 MB stream took more than {HANG} s to read")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[: 2 * len(LINE_UNITS)] == [
        f"{reader} line {unit!r} []" for unit in LINE_UNITS for reader in ("UvProgress", "PipProgress")
    ]
    assert lines[-2].startswith("UvProgress stream (629145600, 629145600)")
    assert lines[-1].startswith("PipProgress stream (600000000, 600000000)")
