"""Attacks on ``script --from-lock LOCK`` and on the bundle's install.sh: a lock whose record the
exports cannot parse, a lock whose file name carries terminal escapes, a lock rewritten while it is
read, a conda lock whose PyPI URL names an environment variable pip expands or that names one
package file twice, a pip lock pin without hashes, two runs of a conda export sharing one download
directory, and an interpreter candidate that never answers. Real files, the real CLI (run in this
process: the cases are about what it writes, not about its process), real bash."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tfgpu import __version__
from tfgpu.lock.bundle.files import install_script

from .test_hostile_locks import forged_pip_lock

WANT = f"{sys.version_info[0]}.{sys.version_info[1]}"


def _forge_with(path: Path, **resolution) -> None:
    """``forged_pip_lock`` with fields of its recorded resolution replaced, checksum recomputed."""
    from tfgpu.lock.pip import lockfile as pip_lock

    forged_pip_lock(path)
    lock = pip_lock.read(path)
    meta = {key: value for key, value in lock.meta.items() if key != "sha256"}
    meta["resolution"] = {**meta["resolution"], **resolution}
    path.write_text(pip_lock.render(meta, lock.body, str(path)), encoding="utf-8")


def test_a_recorded_compute_capability_the_exports_cannot_parse_is_malformed_not_a_traceback(cli, sandbox):
    """The record's compute_capabilities were checked as a user's --gpu-cc (``8.0`` passes), but the
    Kubernetes export reads them as a wheel lists them (``sm_80``) and crashed with a ValueError
    traceback. A lock is data: a record in another form is ``lock-malformed`` (exit 2), nothing written."""
    lock = sandbox / "team.txt"
    _forge_with(lock, compute_capabilities=["8.0"])
    out = sandbox / "kube"
    done = cli("script", "--format", "kubernetes", "--from-lock", str(lock), "-o", str(out), "--json")
    assert done.code == 2, done.out + done.err
    assert json.loads(done.out)["error"]["code"] == "lock-malformed"
    assert not out.exists()
    _forge_with(lock, compute_capabilities=["sm_80", "compute_90"])  # the wheel's form still exports
    done = cli("script", "--format", "kubernetes", "--from-lock", str(lock), "-o", str(out))
    assert done.code == 0, done.err


def test_a_lock_name_with_terminal_escapes_reaches_no_export_raw(cli, sandbox):
    """A lock file named with an escape sequence and a carriage return: the header's comments were
    cleaned, but the bash script's ``LOCK_NAME='...'`` carried the bytes raw, so ``cat install.sh``
    (or the script's own "pinned: ..." line on the target) would run them in the reviewer's terminal
    (here: hide the rest of the line, rewrite it). No generated file may hold a control character."""
    lock = sandbox / "team\x1b[8m\rhidden.txt"
    forged_pip_lock(lock)
    for fmt in ("bash", "slurm", "ansible", "cloud-init"):
        out = sandbox / fmt
        done = cli("script", "--format", fmt, "--from-lock", str(lock), "-o", str(out))
        assert done.code == 0, done.err
        for written in [out] if out.is_file() else [p for p in out.rglob("*") if p.is_file()]:
            data = written.read_bytes()
            assert b"\x1b" not in data and b"\r" not in data, (fmt, written)
    assert "LOCK_NAME='team [8m hidden.txt'" in (sandbox / "bash").read_text()


def test_a_lock_rewritten_while_it_is_read_is_refused(cli, sandbox, monkeypatch):
    """Another ``tfgpu-install lock`` rewrites the file between the reader's check and the
    export's checksum: the export carried the old pins under the new file's sha256, a header a
    reviewer would verify with ``sha256sum`` and believe. It must refuse and write nothing."""
    import tfgpu.lock as lock_module

    lock = sandbox / "team.txt"
    forged_pip_lock(lock)
    later = sandbox / "later.txt"
    forged_pip_lock(later, tensorflow="2.15.0")
    read = lock_module.read

    def read_then_rewritten(path):
        found = read(path)
        shutil.copyfile(later, lock)  # the concurrent writer lands just after the check
        return found

    monkeypatch.setattr(lock_module, "read", read_then_rewritten)
    out = sandbox / "install.sh"
    done = cli("script", "--format", "bash", "--from-lock", str(lock), "-o", str(out), "--json")
    assert done.code == 2, done.out
    assert done.error == "lock-unreadable" and "changed while it was being read" in done.out
    assert not out.exists()


def _bundle(tmp_path: Path) -> Path:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "install.sh").write_text(install_script(WANT, __version__, "2.21.0", "linux-64"))
    return bundle


def _install(bundle: Path, shims: Path, tmp_path: Path, **extra: str) -> subprocess.CompletedProcess:
    env = {"PATH": f"{shims}:/usr/bin:/bin", "HOME": str(tmp_path / "home"), **extra}
    return subprocess.run(
        [shutil.which("bash"), str(bundle / "install.sh"), str(tmp_path / "env")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


@pytest.mark.slow  # waits out a timeout or compares a large sample: the full run keeps it
def test_install_sh_gives_up_on_an_interpreter_that_hangs(tmp_path):
    """A python3.X on PATH that never answers (a shim on a dead network home): install.sh ran it
    with no limit and hung for ever, silently. Each candidate gets TFGPU_PYTHON_TIMEOUT seconds;
    then the next one is tried, and with none left the message names the one that hung."""
    shims = tmp_path / "shims dir"  # a space in the interpreter's path, too
    shims.mkdir()
    hanging = shims / f"python{WANT}"
    hanging.write_text("#!/bin/sh\nsleep 300\n")
    hanging.chmod(0o755)
    (shims / "python3").symlink_to(sys.executable)
    bundle = _bundle(tmp_path)
    done = _install(bundle, shims, tmp_path, TFGPU_PYTHON_TIMEOUT="2")
    assert done.returncode == 3 and "carries no tfgpu-install wheels" in done.stderr, done.stderr
    done = _install(bundle, shims, tmp_path, TFGPU_PYTHON_TIMEOUT="2", TFGPU_PYTHON=str(hanging))
    assert done.returncode == 3 and "no working one was found" in done.stderr, done.stderr
    assert f"{hanging}: did not answer within 2 seconds" in done.stderr


@pytest.fixture(scope="module")
def served_channel(lock_channel):
    """The local channel served over HTTP on the loopback for the module: the exported scripts
    download from it."""
    from test_export_fromlock import _serve

    httpd = _serve(lock_channel)
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def conda_lock(tmp_path, tmp_path_factory, served_channel, lock_index):
    """A real conda lock (TF 2.13 from the local channel served over HTTP on the loopback, its PyPI
    part from the local index): what an export accepts. Made once a session, each case edits its
    own copy (tests/madelocks.py)."""
    import madelocks

    return madelocks.conda_lock(
        tmp_path_factory,
        tmp_path / "conda-lock.yml",
        served_channel,
        lock_index,
        "--allow-cpu",
        env={"TFGPU_INSECURE_HOSTS": "127.0.0.1"},
    )


def test_a_conda_locks_pypi_url_naming_an_environment_variable_is_refused(cli, sandbox, conda_lock):
    """pip (and uv) expand ``${NAME}`` in a requirements file. A conda lock whose PyPI entry's URL
    holds ``${AWS_SECRET_ACCESS_KEY}`` (checksum recomputed: anyone can) passed the URL door, so the
    exported script's ``pip install --require-hashes`` would send the target's secret to the lock's
    server in the request path before any hash is checked. Such a URL is refused: nothing written."""
    from conda_lock.lockfile import parse_conda_lock_file, write_conda_lock_file

    from tfgpu.lock.conda.write import model_digest

    lockfile = parse_conda_lock_file(conda_lock)
    wheels = [p for p in lockfile.package if p.manager == "pip" and p.platform == "linux-64"]
    if not wheels:
        pytest.skip("the local lock has no PyPI part")
    head, _, name = str(wheels[0].url).rpartition("/")
    wheels[0].url = f"{head}/${{AWS_SECRET_ACCESS_KEY}}/{name}"
    lockfile.metadata.custom_metadata["tfgpu_packages_sha256"] = model_digest(lockfile)
    write_conda_lock_file(lockfile, conda_lock, metadata_choices=set())
    assert "${AWS_SECRET_ACCESS_KEY}" in conda_lock.read_text()
    out = sandbox / "install.sh"
    insecure = {"TFGPU_INSECURE_HOSTS": "127.0.0.1"}
    done = cli("script", "--format", "bash", "--from-lock", str(conda_lock), "-o", str(out), "--json", env=insecure)
    assert done.code == 2 and json.loads(done.out)["error"]["code"] == "lock-has-options", done.out + done.err
    assert not out.exists()


@pytest.mark.slow  # waits out a timeout or compares a large sample: the full run keeps it
def test_two_runs_of_a_conda_lock_script_sharing_the_downloads_each_install_the_whole_lock(tool, sandbox, conda_lock):
    """Two runs of the conda export at once with one download directory (a second install, or two
    nodes with the same home): both wrote ``$LOCK_EXPLICIT.part`` and ``$file.part``; the second
    truncated the first's list, and whichever moved it last left an @EXPLICIT list without its
    header or with packages missing, which conda then installed. Real bash, real curl (slowed down
    so that the runs overlap), a fake conda on PATH."""
    from test_export_bash import FAKE_CONDA, script_env

    from tfgpu.lock.conda.read import read

    script = sandbox / "install.sh"
    insecure = {"TFGPU_INSECURE_HOSTS": "127.0.0.1"}
    done = tool("script", "--format", "bash", "--from-lock", str(conda_lock), "-o", str(script), env=insecure)
    assert done.code == 0, done.err
    bindir = sandbox / "bin"
    bindir.mkdir()
    (bindir / "conda").write_text(FAKE_CONDA)
    (bindir / "curl").write_text(f'#!/bin/sh\nsleep 0.4\nexec {shutil.which("curl")} "$@"\n')
    for program in bindir.iterdir():
        program.chmod(0o755)
    downloads = sandbox / "downloads"
    runs = []
    for name in ("a", "b"):
        env = script_env(
            sandbox / name,
            PATH=f"{bindir}:/usr/bin:/bin",
            FAKE_CONDA_LOG=str(sandbox / f"conda-{name}.log"),
            FAKE_CONDA_PYTHON=sys.executable,
            TFGPU_SKIP_VERIFY="1",
            TFGPU_ALLOW_HTTP="1",
            TFGPU_DOWNLOADS=str(downloads),
        )
        runs.append(subprocess.Popen(["bash", str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
        time.sleep(0.6)
    outputs = [run.communicate(timeout=300)[0].decode(errors="replace") for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    packages = read(conda_lock).packages("linux-64", "conda")
    wanted = sorted(f"file://{downloads / str(p.url).rsplit('/', 1)[1]}" for p in packages)
    explicit = next(downloads.glob("lock-*.explicit.txt")).read_text().split()
    assert explicit[0] == "@EXPLICIT" and sorted(explicit[1:]) == wanted, explicit
    assert not list(downloads.glob("*.part*"))


def test_a_conda_lock_naming_one_package_file_twice_is_refused(cli, sandbox, conda_lock):
    """Two conda entries whose URLs end in the same file name (another directory of the same channel,
    noarch/ beside linux-64/, another sha256; checksum recomputed): the bash export downloads each to
    its file name, so the second replaced the first after the first was checked, and conda got the
    second's bytes twice in its @EXPLICIT list. The lock is refused before anything is written."""
    from conda_lock.lockfile import parse_conda_lock_file, write_conda_lock_file

    from tfgpu.lock.conda.write import model_digest

    lockfile = parse_conda_lock_file(conda_lock)
    first, second = [p for p in lockfile.package if p.manager == "conda" and p.platform == "linux-64"][:2]
    channel = str(second.url).rsplit("/", 2)[0]  # within the channel: a URL outside it is refused first
    second.url = f"{channel}/noarch/{str(first.url).rsplit('/', 1)[1]}"
    lockfile.metadata.custom_metadata["tfgpu_packages_sha256"] = model_digest(lockfile)
    write_conda_lock_file(lockfile, conda_lock, metadata_choices=set())
    out = sandbox / "install.sh"
    insecure = {"TFGPU_INSECURE_HOSTS": "127.0.0.1"}
    done = cli("script", "--format", "bash", "--from-lock", str(conda_lock), "-o", str(out), "--json", env=insecure)
    assert done.code == 2 and json.loads(done.out)["error"]["code"] == "lock-has-options", done.out + done.err
    assert "appear under two URLs" in done.out and not out.exists()


def test_a_pip_lock_pin_without_a_hash_is_refused_at_export_not_on_the_target(cli, sandbox):
    """A lock whose pin has no --hash line (checksum recomputed) passed: the export's header said
    every file is checked against its sha256, and only pip's --require-hashes on the target, after
    review and shipping, refused the whole install, with the hint that a mirror had changed a file.
    The export refuses it here, with the pin named."""
    lock = sandbox / "team.txt"
    forged_pip_lock(lock)
    from tfgpu.lock.pip import lockfile as pip_lock

    read = pip_lock.read(lock)
    meta = {key: value for key, value in read.meta.items() if key != "sha256"}
    lock.write_text(pip_lock.render(meta, read.body + "numpy==1.26.4\n", str(lock)), encoding="utf-8")
    out = sandbox / "install.sh"
    done = cli("script", "--format", "bash", "--from-lock", str(lock), "-o", str(out), "--json")
    assert done.code == 2 and json.loads(done.out)["error"]["code"] == "lock-has-options", done.out + done.err
    assert "numpy==1.26.4" in done.out and not out.exists()
