"""What an outside attack on ``lock --check`` without a file, the honest endings and progress found,
held here so it stays fixed:

* the no-driver notice's ``tfgpu-install verify --prefix PREFIX`` (and the activation line) is
  quoted for a shell: a prefix the tool accepts (``x; touch PWNED; y``) pastes as one word;
* a machine whose driver is installed and failing (an ``nvidia-smi`` that errs or hangs, a
  ``libcuda.so.1`` the loader finds and cannot load) is a failing driver (exit 1), never "no NVIDIA
  driver on this machine" (exit 0);
* ``lock --check`` of a project in a directory whose name holds a newline forges no line;
* what uv prints on its pseudo-terminal reaches the spinner defused; megabytes without a newline
  cost linear time; a piped transfer says at most one line per 10 s even when uv redraws a
  finished download.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_process, run_tool, tool_environ

from tfgpu.detect import probe

TARGET = ("--tf", "2.21", "--mode", "pip", "--python", "3.11")


def _no_driver_here():
    host = probe()
    if host.driver is not None or host.gpus or Path("/proc/driver/nvidia").exists():
        pytest.skip("this host has an NVIDIA driver: a GPU-less ending cannot be seen here")


def _env(sandbox: Path, uv_cache: Path, **extra) -> dict:
    return tool_environ(sandbox, uv_cache, **extra)


def test_no_driver_notice_quotes_a_hostile_prefix(sandbox, no_gpu_wheels, uv_cache):
    """The notice's command, pasted, checks the env that was built and runs nothing else."""
    _no_driver_here()
    prefix = sandbox / "x; touch PWNED; y"
    done = run_tool(
        "create",
        *TARGET,
        "--prefix",
        str(prefix),
        "--find-links",
        str(no_gpu_wheels),
        "--offline",
        env=_env(sandbox, uv_cache),
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    [line] = [line for line in done.stdout.splitlines() if "check it with: " in line]
    command = line.split("check it with: ", 1)[1]
    assert shlex.split(command) == ["tfgpu-install", "verify", "--prefix", str(prefix)], command


@pytest.mark.slow
def test_no_driver_notice_in_json_quotes_a_hostile_prefix(sandbox, no_gpu_wheels, uv_cache):
    """In the full tier: ``--json``'s ``check_with`` is the one command string the text notice
    prints (``tfgpu.cli.endings.check_command``), held for a hostile prefix in the fast tier by
    ``test_no_driver_notice_quotes_a_hostile_prefix``, and its place in the JSON document by
    tests/test_endings.py's ``test_create_json_says_verified_false_and_why``."""
    import json

    _no_driver_here()
    prefix = sandbox / "a b;touch PWNED"
    done = run_tool(
        "create",
        *TARGET,
        "--prefix",
        str(prefix),
        "--find-links",
        str(no_gpu_wheels),
        "--offline",
        "--json",
        env=_env(sandbox, uv_cache),
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)["not_verified"]
    assert shlex.split(found["check_with"]) == ["tfgpu-install", "verify", "--prefix", str(prefix)]


def _failing_driver(root: Path) -> tuple[Path, Path]:
    """A driver installed and failing: a libcuda.so.1 that will not load (a library it needs is
    gone) and an nvidia-smi that cannot talk to the (unloaded) kernel module."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed")
    lib, bin_ = root / "drv-lib", root / "drv-bin"
    lib.mkdir()
    bin_.mkdir()
    (root / "m.c").write_text("int missing_fn(void){return 0;}\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib / "libmissingdep.so"), str(root / "m.c")], check=True)
    (root / "c.c").write_text(
        "extern int missing_fn(void);\n"
        "int cuDriverGetVersion(int *v){*v=12040+missing_fn();return 0;}\nint cuInit(unsigned f){return 0;}\n"
    )
    subprocess.run(
        [
            "gcc",
            "-shared",
            "-fPIC",
            "-Wl,-soname,libcuda.so.1",
            "-Wl,--no-as-needed",
            "-o",
            str(lib / "libcuda.so.1"),
            str(root / "c.c"),
            f"-L{lib}",
            "-lmissingdep",
        ],
        check=True,
    )
    (lib / "libmissingdep.so").unlink()
    smi = bin_ / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\necho \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        'Make sure that the latest NVIDIA driver is installed and running."\nexit 9\n'
    )
    smi.chmod(0o755)
    return lib, bin_


def test_an_installed_failing_driver_is_not_no_driver(sandbox, tmp_path, no_gpu_wheels, uv_cache):
    """docs/doctor-and-verify.md: "A driver is here and the check fails (... a library will not
    load): exit 1 ... never a silent CPU success". Here libcuda.so.1 is on the library path and
    nvidia-smi is installed; neither works (the kernel module is not loaded, as after a kernel
    update). That is a failing driver, not a laptop without one."""
    _no_driver_here()
    lib, bin_ = _failing_driver(tmp_path)
    env = _env(sandbox, uv_cache, LD_LIBRARY_PATH=str(lib), PATH=f"{bin_}{os.pathsep}{os.environ['PATH']}")
    done = run_process(
        "create",
        *TARGET,
        "--prefix",
        str(sandbox / "env"),
        "--find-links",
        str(no_gpu_wheels),
        "--offline",
        env=env,
        timeout=600,
    )
    assert "Traceback" not in done.stderr
    said = done.stdout + done.stderr
    assert "no NVIDIA driver on this machine" not in said, said
    assert done.returncode == 1, said


@pytest.fixture
def index(local_wheels, tmp_path_factory):
    import localindex

    root = localindex.build_index(local_wheels, tmp_path_factory.mktemp("index"))
    with localindex.Server(root) as url:
        yield url


def test_lock_check_of_a_project_in_a_directory_with_a_newline_forges_no_line(sandbox, index, monkeypatch):
    project = sandbox / "team\ncurrent: all good \x1b[2J"
    project.mkdir()
    (project / "tfgpu.toml").write_text('tf = "2.21"\nmode = "pip"\npython = "3.11"\nplatforms = ["linux-64"]\n')
    env = dict(os.environ, TFGPU_INDEX_URL=index, TFGPU_CACHE_DIR=str(sandbox / "cache"))
    env["TFGPU_LOG_DIR"] = str(sandbox / "logs")
    env.pop("TFGPU_PROJECT_FILE", None)
    monkeypatch.chdir(project)
    made = run_tool("lock", "--no-detect", env=env)
    assert made.returncode == 0, made.stderr
    (project / "tfgpu.toml").write_text('tf = "2.21"\nmode = "pip"\npython = "3.12"\nplatforms = ["linux-64"]\n')
    done = run_tool("lock", "--check", env=env)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    for line in (done.stdout + done.stderr).splitlines():
        assert not line.startswith("current: all good"), done.stdout + done.stderr
    assert "\x1b" not in done.stdout + done.stderr
    assert not (sandbox / "PWNED").exists()


def _evil_wheel(directory: Path) -> Path:
    """A wheel whose METADATA holds a terminal reset (ESC c) in a Requires-Dist: uv, on a
    pseudo-terminal, prints it back raw in its "could not be parsed" hint."""
    import base64
    import hashlib
    import zipfile

    directory.mkdir(parents=True, exist_ok=True)
    meta = "Metadata-Version: 2.1\nName: evilpkg\nVersion: 1.0\nRequires-Dist: foo (>=1.0 \x1bc)\n\n"
    wheel = "Wheel-Version: 1.0\nGenerator: x\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    files = {"evilpkg/__init__.py": "", "evilpkg-1.0.dist-info/METADATA": meta, "evilpkg-1.0.dist-info/WHEEL": wheel}
    record = ""
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record += f"{name},sha256={digest},{len(text.encode())}\n"
    record += "evilpkg-1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(directory / "evilpkg-1.0-py3-none-any.whl", "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
        archive.writestr("evilpkg-1.0.dist-info/RECORD", record)
    return directory


def test_what_uv_prints_on_its_pseudo_terminal_reaches_the_spinner_defused(sandbox, tmp_path, monkeypatch, capsys):
    """uv runs on a pseudo-terminal, where it passes control bytes through (on a pipe it strips
    them); its printed lines go to ``ConsoleReporter.output``, the spinner's text. An ESC c (a full
    terminal reset) that ``Printed`` does not take out must not reach the terminal raw."""
    from tfgpu.cli.render.live import ConsoleReporter
    from tfgpu.process.runner import Runner

    uv = Path(sys.executable).parent / "uv"
    if not uv.exists():
        uv = Path(shutil.which("uv") or "uv")
    wheels = _evil_wheel(tmp_path / "wheels")
    subprocess.run(
        [str(uv), "venv", "-q", str(tmp_path / "v")],
        check=True,
        env={**os.environ, "UV_CACHE_DIR": str(tmp_path / "uvc")},
    )
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    monkeypatch.setenv("COLUMNS", "120")
    capsys.readouterr()
    reporter = ConsoleReporter()
    reporter.step(1, 1, "Install TensorFlow and its CUDA libraries")
    seen = []

    def on_line(line):
        seen.append(line)
        reporter.output(line)
        import time

        time.sleep(0.15)  # let the spinner draw it

    Runner(None).run(
        [str(uv), "pip", "install", "--offline", "--no-index", "--find-links", str(wheels), "evilpkg"],
        env={"VIRTUAL_ENV": str(tmp_path / "v"), "UV_CACHE_DIR": str(tmp_path / "uvc")},
        on_line=on_line,
        screen=lambda text: None,
        clean=False,
    )
    reporter.close()
    err = capsys.readouterr().err
    assert any("could not be parsed" in line or "Trailing" in line for line in seen), seen
    assert "\x1bc" not in err, repr(err[-600:])


def test_a_child_s_megabytes_without_a_newline_on_the_pseudo_terminal_cost_linear_time():
    """``Printed.feed`` joins the pending text to every chunk and splits it again: a 16 MB line
    costs about a minute (32 MB, four): quadratic, and all of it kept. Bounded here at 20 s in a
    child process of its own."""
    code = (
        "import sys\n"
        "from tfgpu.process.runner import Runner\n"
        'child = \'import os\\nfor i in range(256): os.write(1, b"x" * 65536)\\nos.write(1, b"\\\\ndone\\\\n")\'\n'
        "done = Runner(None).run([sys.executable, '-c', child], screen=lambda text: None)\n"
        "print(done.returncode, len(done.output))\n"
    )
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail("16 MB without a newline on the pseudo-terminal took more than 20 s to read")
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split()[1]) < 2 * 1024 * 1024, "the whole 16 MB line was kept in memory"


def test_plain_transfer_lines_at_most_one_per_10_s_when_uv_redraws_a_finished_download(capsys):
    """uv's bar for a download goes (complete) and is drawn again (a retry): every completion
    prints an end line, however little time passed; five in 2.5 s here."""
    from tfgpu.cli.render.live import ConsoleReporter
    from tfgpu.engines.uv_progress import UvProgress

    clock = [0.0]
    reporter = ConsoleReporter(clock=lambda: clock[0])
    watch = UvProgress(reporter)
    header = "Preparing packages... (0/1)\n"
    capsys.readouterr()
    for _ in range(5):
        watch.feed(header + "tensorflow ------------------------------ 99.00 MiB/100.00 MiB\n")
        watch.feed(header + "\n")
        clock[0] += 0.5
    reporter.close()
    lines = [line for line in capsys.readouterr().err.splitlines() if "PyPI wheels" in line]
    assert len(lines) <= 1, lines
