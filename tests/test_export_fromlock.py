"""``script --from-lock LOCK``: every format installs exactly a lock's pins with their hashes.

The pip lock is written by the real ``tfgpu-install lock`` with real uv against a real local index
(tests/localindex.py serving tests/wheelhouse.py's small TensorFlow-shaped wheels over HTTP: the
real TensorFlow set is 4 GB), the bash export is shellchecked and run for real with real pip into
a prefix, offline from the same wheels; ``uv pip freeze`` of the result is compared with the lock.
The conda lock is written by the real tool against a local conda channel (tests/condachannel.py);
its bash export cannot run here (no conda), so its text is checked and shellchecked.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_tool
from exporthelpers import need, shellcheck
from test_export_bash import run, script_env

from tfgpu.lock.pip import lockfile as pip_lock

PYTHON = f"{sys.version_info[0]}.{sys.version_info[1]}"
TARGET = ("--tf", "2.21", "--mode", "pip", "--python", PYTHON, "--no-detect")
HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")


@pytest.fixture
def lock_file(tmp_path, lock_env) -> Path:
    path = tmp_path / "team.txt"
    done = run_tool("lock", *TARGET, "--platform", "linux-64", "-o", str(path), env=lock_env)
    assert done.returncode == 0, done.stderr
    return path


def export(lock: Path, fmt: str, out: Path, env, *extra: str) -> subprocess.CompletedProcess:
    return run_tool("script", "--format", fmt, "--from-lock", str(lock), "-o", str(out), *extra, env=env)


SEEDS = ("pip", "setuptools")
"""What ``python -m venv`` puts into every venv (ensurepip's bundle): the installer, not the lock's."""


def freeze(prefix: Path) -> dict[str, str]:
    """``{name: version}`` the env holds (``uv pip freeze``), less the venv's own seed packages;
    ``name @ URL`` lines (a conda lock's PyPI part) are read through ``uv pip list``."""
    python = ["--python", str(prefix / "bin" / "python")]
    done = subprocess.run(
        [sys.executable, "-m", "uv", "pip", "freeze", *python], capture_output=True, text=True, check=True
    )
    found = dict(line.split("==") for line in done.stdout.split("\n") if "==" in line)
    if any(" @ " in line for line in done.stdout.splitlines()):
        listed = subprocess.run(
            [sys.executable, "-m", "uv", "pip", "list", "--format", "json", *python],
            capture_output=True,
            text=True,
            check=True,
        )
        found = {item["name"]: item["version"] for item in json.loads(listed.stdout)}
    return {name.lower(): version for name, version in found.items() if name.lower() not in SEEDS}


@pytest.mark.slow
def test_bash_from_a_pip_lock_installs_exactly_the_lock_and_refuses_a_tampered_wheel(
    tmp_path, lock_file, local_wheels, lock_env
):
    script = tmp_path / "install.sh"
    done = export(lock_file, "bash", script, lock_env)
    assert done.returncode == 0, done.stderr
    text = script.read_text()
    checked = shellcheck(text, tmp_path)
    assert checked.returncode == 0 and checked.stdout == "", checked.stdout
    digest = hashlib.sha256(lock_file.read_bytes()).hexdigest()
    head = text.split("set -euo pipefail")[0]
    assert "Pinned: exactly the lock team.txt for linux-64" in head and digest in head
    assert "Not pinned" not in text
    lock = pip_lock.read(lock_file)
    assert set(HASH.findall(text)) == set(HASH.findall(lock.body)) != set()
    assert "--require-hashes --no-deps -r" in text

    prefix = tmp_path / "my envs" / "tf"  # a space: every path in the script must be quoted
    env = script_env(
        tmp_path,
        TFGPU_FIND_LINKS=str(local_wheels),
        TFGPU_OFFLINE="1",
        TFGPU_PREFIX=str(prefix),
        TFGPU_SKIP_VERIFY="1",
    )
    first = run(script, env)
    assert first.returncode == 0, first.stdout + first.stderr
    assert f"pinned: installing exactly the lock team.txt (sha256 {digest})" in first.stdout
    assert freeze(prefix) == lock.pins()
    again = run(script, env)
    assert again.returncode == 0 and "nothing changed" in again.stdout, again.stdout + again.stderr

    # One byte of one wheel changed in the find-links directory: pip's hash check refuses it.
    tampered = tmp_path / "tampered"
    shutil.copytree(local_wheels, tampered)
    wheel = next(tampered.glob("nvidia_cudnn*.whl"))
    data = bytearray(wheel.read_bytes())
    data[len(data) // 2] ^= 0x01
    wheel.write_bytes(bytes(data))
    other = tmp_path / "other"
    bad = run(script, dict(env, TFGPU_FIND_LINKS=str(tampered), TFGPU_PREFIX=str(other)))
    assert bad.returncode != 0
    assert "is not what the lock team.txt pinned" in bad.stderr and "refused" in bad.stderr, bad.stderr
    assert "nvidia-cudnn-cu12" not in freeze(other)


def test_an_export_without_a_lock_says_it_resolves_at_install_time(tmp_path, tool_env):
    out = tmp_path / "install.sh"
    done = run_tool("script", *TARGET, "--format", "bash", "-o", str(out), env=tool_env)
    assert done.returncode == 0, done.stderr
    head = out.read_text().split("set -euo pipefail")[0]
    assert "Not pinned: the packages are resolved at install time" in head and "--from-lock" in head
    assert "not pinned: pip resolves ${PIP_REQUIREMENTS[*]} at install time" in out.read_text()


@pytest.mark.slow
def test_every_format_from_a_pip_lock_carries_the_pins(tmp_path, lock_file, lock_env):
    lock = pip_lock.read(lock_file)
    hashes = set(HASH.findall(lock.body))
    digest = hashlib.sha256(lock_file.read_bytes()).hexdigest()
    for fmt, main in (
        ("dockerfile", "Dockerfile"),
        ("cloud-init", "user-data.yaml"),
        ("ansible", "files/install-tf.sh"),
        ("slurm", "install-tf.sh"),
        ("slurm", "tfgpu-env.def"),
        ("kubernetes", "Dockerfile"),
    ):
        out = tmp_path / fmt / ("Dockerfile" if fmt == "dockerfile" else "user-data.yaml")
        out = out if fmt in ("dockerfile", "cloud-init") else tmp_path / fmt
        out.parent.mkdir(exist_ok=True)
        done = export(lock_file, fmt, out, lock_env)
        assert done.returncode == 0, done.stderr
        text = (out if out.is_file() else out / main).read_text()
        assert set(HASH.findall(text)) == hashes, (fmt, main)
        assert digest in text and "--require-hashes --no-deps" in text, (fmt, main)
        assert "Not pinned" not in text, (fmt, main)
        longest = max(len(line) for line in text.splitlines())  # reviewable: hashes one a line
        assert longest <= 200, (fmt, main, longest)
    for written in tmp_path.rglob("*"):  # the lock's directory is this machine's: never in an export
        if written.is_file() and written != lock_file and written.suffix != ".toml":
            assert str(tmp_path) not in written.read_text(), written
    job = (tmp_path / "kubernetes" / "tfgpu-job.yaml").read_text()
    assert digest in job and "Pinned: exactly the lock team.txt" in job


@pytest.mark.slow
def test_validators_pass_on_lock_exports(tmp_path, lock_file, lock_env):
    docker = tmp_path / "Dockerfile"
    assert export(lock_file, "dockerfile", docker, lock_env).returncode == 0
    linted = subprocess.run(
        [need("hadolint"), "--no-color", "-"], input=docker.read_text(), capture_output=True, text=True
    )
    assert linted.returncode == 0 and linted.stdout == "", linted.stdout
    kube = tmp_path / "kube"
    assert export(lock_file, "kubernetes", kube, lock_env).returncode == 0
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    import yaml

    documents = [doc for doc in yaml.safe_load_all((kube / "tfgpu-job.yaml").read_text()) if doc]
    assert [doc["kind"] for doc in documents] == ["Service", "ConfigMap", "Job"]
    for document in documents:
        kubernetes_validate.validate(document, "1.30", strict=True)
    playbook = tmp_path / "ansible"
    assert export(lock_file, "ansible", playbook, lock_env).returncode == 0
    (playbook / "inventory.ini").write_text("[gpu]\nlocalhost ansible_connection=local\n")
    syntax = subprocess.run(
        [need("ansible-playbook"), "-i", "inventory.ini", "playbook.yml", "--syntax-check"],
        cwd=playbook,
        capture_output=True,
        text=True,
    )
    assert syntax.returncode == 0, syntax.stdout + syntax.stderr
    slurm = tmp_path / "slurm"
    assert export(lock_file, "slurm", slurm, lock_env).returncode == 0
    for name in ("install-tf.sh", "tfgpu-job.sbatch"):
        checked = shellcheck((slurm / name).read_text(), tmp_path, name)
        assert checked.returncode == 0 and checked.stdout == "", (name, checked.stdout)


def test_a_platform_the_pip_lock_does_not_hold_is_refused(tmp_path, lock_file, lock_env):
    done = export(lock_file, "bash", tmp_path / "x.sh", lock_env, "--platform", "linux-aarch64", "--json")
    assert done.returncode == 3 and json.loads(done.stdout)["error"]["code"] == "platform-not-in-lock"
    assert not (tmp_path / "x.sh").exists()
    done = export(lock_file, "bash", tmp_path / "x.sh", lock_env, "--python", "3.9", "--json")
    assert done.returncode == 2 and json.loads(done.stdout)["error"]["code"] == "conflicting-options"


def test_an_edited_lock_is_refused_before_anything_is_rendered(tmp_path, lock_file, lock_env):
    text = lock_file.read_text()
    digest = HASH.search(text).group(1)
    lock_file.write_text(text.replace(digest, digest[::-1]))
    out = tmp_path / "x.sh"
    done = export(lock_file, "bash", out, lock_env, "--json")
    assert done.returncode == 2 and json.loads(done.stdout)["error"]["code"] == "lock-modified"
    assert not out.exists()


def _serve(root: Path):
    """``root`` over HTTP on the loopback, always the whole file: rattler's conditional requests
    for absent shard indexes would otherwise get ``304 Not Modified``, which it does not take for
    "absent"."""
    import threading
    from functools import partial
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    class Handler(SimpleHTTPRequestHandler):
        def parse_request(self):  # noqa: D102 - http.server's hook
            ok = super().parse_request()
            if ok:
                del self.headers["If-Modified-Since"]
            return ok

        def log_message(self, *args):  # noqa: D102 - quiet
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=str(root)))
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return httpd


@pytest.fixture(scope="module")
def http_channel(lock_channel):
    """The local conda channel served over HTTP on the loopback (a lock of a file:// channel names
    this machine's disk, which no target can reach: the exports refuse it)."""
    httpd = _serve(lock_channel)
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def conda_env(tmp_path, lock_index) -> dict[str, str]:
    import os

    return dict(
        os.environ,
        TFGPU_INDEX_URL=lock_index,
        TFGPU_CACHE_DIR=str(tmp_path / "cache"),
        TFGPU_LOG_DIR=str(tmp_path / "logs"),
        HOME=str(tmp_path),
        TFGPU_INSECURE_HOSTS="127.0.0.1",  # the stand-in channel and index are plain HTTP on the loopback
    )


def conda_lock(tmp_path, channel: str, env, *platforms: str) -> Path:
    out = tmp_path / "conda-lock.yml"
    argv = ["lock", "--tf", "2.13", "--mode", "conda", "--python", PYTHON, "--no-detect", "--channel", channel]
    argv += [flag for name in platforms for flag in ("--platform", name)]
    done = run_tool(*argv, "--allow-cpu", "-o", str(out), env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


@pytest.mark.slow
def test_bash_from_a_conda_lock_pins_every_package_by_url_and_sha256(tmp_path, http_channel, conda_env):
    from tfgpu.lock.conda.read import read

    path = conda_lock(tmp_path, http_channel, conda_env, "linux-64", "linux-aarch64")
    ambiguous = export(path, "bash", tmp_path / "x.sh", conda_env, "--json")
    assert ambiguous.returncode == 2, ambiguous.stdout + ambiguous.stderr
    error = json.loads(ambiguous.stdout)["error"]
    assert error["code"] == "lock-platform-ambiguous" and any("--platform linux-64" in a for a in error["alternatives"])
    script = tmp_path / "install.sh"
    done = export(path, "bash", script, conda_env, "--platform", "linux-64")
    assert done.returncode == 0, done.stdout + done.stderr
    text = script.read_text()
    checked = shellcheck(text, tmp_path)
    assert checked.returncode == 0 and checked.stdout == "", checked.stdout
    lock = read(path)
    packages = lock.packages("linux-64", "conda")
    assert packages
    for package in packages:
        assert f"'{package.url} {package.hash.sha256}'" in text
    for package in lock.packages("linux-64", "pip"):
        assert f"--hash=sha256:{package.hash.sha256}" in text
    assert hashlib.sha256(path.read_bytes()).hexdigest() in text.split("set -euo pipefail")[0]
    assert 'CONDA_SPECS=(--file "$LOCK_EXPLICIT")' in text


def _named(package, prefix: str) -> str:
    """The package's URL with ``prefix`` put before its file name."""
    head, _, name = str(package.url).rpartition("/")
    return f"{head}/{prefix}{name}"


def _resign(path: Path, edit) -> None:
    """A deliberate forgery: a package entry changed and the lock's checksum recomputed."""
    from conda_lock.lockfile import parse_conda_lock_file, write_conda_lock_file

    from tfgpu.lock.conda.write import model_digest

    lockfile = parse_conda_lock_file(path)
    target = next(p for p in lockfile.package if p.manager == "conda" and p.platform == "linux-64")
    edit(target)
    lockfile.metadata.custom_metadata["tfgpu_packages_sha256"] = model_digest(lockfile)
    write_conda_lock_file(lockfile, path, metadata_choices=set())


@pytest.mark.slow
@pytest.mark.parametrize(
    ("edit", "code"),
    [
        (lambda p: setattr(p, "url", _named(p, "$(touch pwned)")), "bad-url lock-has-options"),
        (lambda p: setattr(p, "url", _named(p, "x;reboot;")), "bad-url lock-has-options"),
        (lambda p: setattr(p, "url", _named(p, "x'y")), "bad-url lock-has-options"),
        (lambda p: setattr(p, "url", "ftp://example.org/x.conda"), "bad-url"),
        (lambda p: setattr(p, "url", "http://example.org/linux-64/x.conda"), "insecure-url"),
        (lambda p: setattr(p.hash, "sha256", "ab" * 31), "lock-has-options"),
    ],
)
def test_a_hostile_conda_lock_is_refused_before_anything_is_rendered(tmp_path, http_channel, conda_env, edit, code):
    path = conda_lock(tmp_path, http_channel, conda_env, "linux-64")
    _resign(path, edit)
    out = tmp_path / "x.sh"
    done = export(path, "bash", out, conda_env, "--json")
    assert done.returncode == 2, done.stdout + done.stderr
    assert json.loads(done.stdout)["error"]["code"] in code.split()  # the URL door or the pins' own check
    assert not out.exists() and not (tmp_path / "pwned").exists()


@pytest.mark.slow
def test_the_dockerfile_download_stage_checks_every_conda_package(tmp_path, http_channel, lock_channel, conda_env):
    """The first stage's command, run here with real bash, python, sha256sum and sed against the
    channel over HTTP: the checked files and their @EXPLICIT list; then the same command against a
    mirror where one byte of one package differs: the build step fails."""
    import dockerfile_parse

    path = conda_lock(tmp_path, http_channel, conda_env, "linux-64")
    out = tmp_path / "Dockerfile"
    done = export(path, "dockerfile", out, conda_env)
    assert done.returncode == 0, done.stdout + done.stderr
    linted = subprocess.run(
        [need("hadolint"), "--no-color", "-"], input=out.read_text(), capture_output=True, text=True
    )
    assert linted.returncode == 0 and linted.stdout == "", linted.stdout
    steps = dockerfile_parse.DockerfileParser(str(out)).structure
    froms = [step["value"] for step in steps if step["instruction"] == "FROM"]
    assert froms[0] == "python:3.12-slim AS lock" and froms[1].startswith("mambaorg/micromamba")
    command = next(step["value"] for step in steps if step["instruction"] == "RUN")
    work = tmp_path / "stage"
    work.mkdir()
    ran = subprocess.run(["bash", "-euc", command], cwd=work, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    from tfgpu.lock.conda.read import read

    packages = read(path).packages("linux-64", "conda")
    explicit = (work / "explicit.txt").read_text().split()
    assert explicit[0] == "@EXPLICIT" and len(explicit) == len(packages) + 1
    assert all(line.startswith("file:///lock/") for line in explicit[1:])

    mirror = tmp_path / "mirror"
    shutil.copytree(lock_channel, mirror)
    victim = next(mirror.rglob(str(packages[0].url).rsplit("/", 1)[1]))
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0x01
    victim.write_bytes(bytes(data))
    httpd = _serve(mirror)
    try:
        swapped = command.replace(http_channel, f"http://127.0.0.1:{httpd.server_address[1]}")
        bad_work = tmp_path / "bad"
        bad_work.mkdir()
        bad = subprocess.run(["bash", "-euc", swapped], cwd=bad_work, capture_output=True, text=True)
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert bad.returncode != 0 and "FAILED" in bad.stdout + bad.stderr
    assert not (bad_work / "explicit.txt").exists()


@pytest.mark.slow
def test_bash_from_a_conda_lock_runs_with_a_fake_conda_and_refuses_a_changed_package(tmp_path, lock_channel, conda_env):
    """The conda script run for real up to conda: real curl downloads over HTTP, real sha256sum;
    conda itself is a fake on PATH (no conda here) that records its argv and makes a venv. The
    lock's PyPI part is installed by real pip with every hash required."""
    from test_export_bash import FAKE_CONDA

    from tfgpu.lock.conda.read import read

    served = tmp_path / "channel"
    shutil.copytree(lock_channel, served)
    httpd = _serve(served)
    try:
        path = conda_lock(tmp_path, f"http://127.0.0.1:{httpd.server_address[1]}", conda_env, "linux-64")
        script = tmp_path / "install.sh"
        done = export(path, "bash", script, conda_env)
        assert done.returncode == 0, done.stdout + done.stderr
        bindir = tmp_path / "bin"
        bindir.mkdir()
        (bindir / "conda").write_text(FAKE_CONDA)
        (bindir / "conda").chmod(0o755)
        downloads = tmp_path / "downloads"
        env = script_env(
            tmp_path,
            PATH=f"{bindir}:/usr/bin:/bin",
            FAKE_CONDA_LOG=str(tmp_path / "conda.log"),
            FAKE_CONDA_PYTHON=sys.executable,
            TFGPU_SKIP_VERIFY="1",
            TFGPU_ALLOW_HTTP="1",
            TFGPU_DOWNLOADS=str(downloads),
        )
        first = run(script, env)
        assert first.returncode == 0, first.stdout + first.stderr
        lock = read(path)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        argv = (tmp_path / "conda.log").read_text().splitlines()[0]
        explicit = downloads / f"lock-{digest}.explicit.txt"
        assert argv.endswith(f"--file {explicit}")
        lines = explicit.read_text().split()
        packages = lock.packages("linux-64", "conda")
        assert lines[0] == "@EXPLICIT" and len(lines) == len(packages) + 1
        for package in packages:
            local = downloads / str(package.url).rsplit("/", 1)[1]
            assert f"file://{local}" in lines
            assert hashlib.sha256(local.read_bytes()).hexdigest() == package.hash.sha256
        pip_part = {str(p.name).lower(): str(p.version) for p in lock.packages("linux-64", "pip")}
        assert pip_part and {k: v for k, v in freeze(tmp_path / "env").items() if k in pip_part} == pip_part

        # One byte of one package changed on the server: the script refuses it, conda never runs.
        victim = next(served.rglob(str(packages[0].url).rsplit("/", 1)[1]))
        data = bytearray(victim.read_bytes())
        data[len(data) // 2] ^= 0x01
        victim.write_bytes(bytes(data))
        log = tmp_path / "conda2.log"
        bad = run(
            script,
            dict(
                env, TFGPU_PREFIX=str(tmp_path / "env2"), TFGPU_DOWNLOADS=str(tmp_path / "d2"), FAKE_CONDA_LOG=str(log)
            ),
        )
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert bad.returncode == 1 and "does not have the sha256 the lock conda-lock.yml pinned" in bad.stderr, bad.stderr
    assert not log.exists() and not (tmp_path / "env2").exists()


def test_platform_without_a_lock_is_refused_not_ignored(tmp_path, tool_env):
    done = run_tool("script", *TARGET, "--format", "bash", "--platform", "linux-64", "--json", env=tool_env)
    assert done.returncode == 2 and json.loads(done.stdout)["error"]["code"] == "bad-arguments"
    assert "--from-lock" in json.loads(done.stdout)["error"]["message"]


@pytest.fixture(scope="module")
def real_lock(tmp_path_factory) -> Path:
    """TF 2.21 for linux-64, Python 3.11, locked from PyPI by the real tool (as tests/test_lock_pip.py)."""
    import os

    root = tmp_path_factory.mktemp("real-lock")
    env = {k: v for k, v in os.environ.items() if k != "TFGPU_INDEX_URL"} | {"TFGPU_LOG_DIR": str(root / "logs")}
    argv = ["lock", "--tf", "2.21", "--mode", "pip", "--python", "3.11", "--platform", "linux-64", "--no-detect"]
    done = run_tool(*argv, "-o", str(root / "tf221.txt"), env=env)
    assert done.returncode == 0, done.stderr
    return root / "tf221.txt"


@pytest.mark.network
@pytest.mark.slow
def test_exports_from_a_real_tensorflow_lock(tmp_path, real_lock):
    """TF 2.21 locked from PyPI by the real tool: the bash script and the Kubernetes directory carry
    every hash of the lock, and shellcheck, hadolint and kubernetes-validate pass (the 4 GB install
    itself is what the local-index test runs, with small wheels)."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "TFGPU_INDEX_URL"} | {"TFGPU_LOG_DIR": str(tmp_path / "logs")}
    hashes = set(HASH.findall(pip_lock.read(real_lock).body))
    assert len(hashes) > 10
    script = tmp_path / "install.sh"
    assert export(real_lock, "bash", script, env).returncode == 0
    checked = shellcheck(script.read_text(), tmp_path)
    assert checked.returncode == 0 and checked.stdout == "", checked.stdout
    assert set(HASH.findall(script.read_text())) == hashes
    kube = tmp_path / "kube"
    assert export(real_lock, "kubernetes", kube, env).returncode == 0
    docker = (kube / "Dockerfile").read_text()
    assert set(HASH.findall(docker)) == hashes
    linted = subprocess.run([need("hadolint"), "--no-color", "-"], input=docker, capture_output=True, text=True)
    assert linted.returncode == 0 and linted.stdout == "", linted.stdout
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    import yaml

    for document in (doc for doc in yaml.safe_load_all((kube / "tfgpu-job.yaml").read_text()) if doc):
        kubernetes_validate.validate(document, "1.30", strict=True)
    longest = {
        path.name: max(len(line) for line in path.read_text().splitlines())
        for path in (script, kube / "Dockerfile", kube / "tfgpu-job.yaml")
    }
    print("longest lines:", longest)
    assert max(longest.values()) <= 200, longest


def test_the_scripts_activation_run_again_rewrites_nothing(tmp_path):
    """The exported scripts' activation step (``activate_env.py``, what ``write_activation`` runs),
    run twice on one env, as a rerun after a failed GPU check does: the second run changes no file,
    ``layout.json`` included. The env holds a caller of a name CUDA dlopens (cuBLASLt 12's
    ``libnvrtc.so.12``) and its provider in another wheel's directory, so the first run makes a link;
    the second finds it in place (plain files stand in for the libraries: only names are read)."""
    import os

    from tfgpu.export.embed import activation_files

    files = tmp_path / "files"
    files.mkdir()
    for name, text in activation_files():
        (files / name).write_text(text)
    env = tmp_path / "env"
    nvidia = env / "lib" / f"python{PYTHON}" / "site-packages" / "nvidia"
    for library in ("cublas/lib/libcublasLt.so.12", "cublas/lib/libcublas.so.12", "cuda_nvrtc/lib/libnvrtc.so.12"):
        (nvidia / library).parent.mkdir(parents=True, exist_ok=True)
        (nvidia / library).write_bytes(b"\x7fELF stand-in\n")
    (env / "bin").mkdir()
    (env / "bin" / "activate").write_text("# venv's activate\n")

    def activate() -> dict:
        done = subprocess.run(
            [sys.executable, str(files / "activate_env.py"), str(env), str(files)], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    first = activate()
    link = nvidia / "cublas" / "lib" / "libnvrtc.so.12"
    assert link.is_symlink() and os.readlink(link) == "../../cuda_nvrtc/lib/libnvrtc.so.12", first
    layout = env / "etc" / "tfgpu" / "layout.json"
    written, stamp = layout.read_text(), layout.stat().st_mtime_ns
    again = activate()
    assert again["changed"] == [], again["changed"]
    assert layout.read_text() == written and layout.stat().st_mtime_ns == stamp
    made = f"lib/python{PYTHON}/site-packages/nvidia/cublas/lib/libnvrtc.so.12"
    assert json.loads(written)["links"] == [[made, "../../cuda_nvrtc/lib/libnvrtc.so.12"]]
