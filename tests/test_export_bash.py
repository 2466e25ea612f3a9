"""The bash export: shellcheck-clean for every mode and several releases, and run for real.

pip mode runs against the local wheelhouse (tests/wheelhouse.py: real wheels, real ELF libraries,
a stand-in ``tensorflow`` package that has no ``tf.config``), so its verification step must fail;
system mode runs against the fake NVIDIA server (tests/fakenvidia.py); conda mode runs with a fake
``conda`` executable on PATH that records its argv and creates the env with ``python -m venv``
(the fake sits at the subprocess boundary, as no conda-forge CUDA can be solved offline).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import shellchecked
import wheelhouse
from exporthelpers import MODES, VERSIONS, fake_nvidia, render, tensorflow_wheel_dir

SCRIPT_ENV_DROP = (
    "PIP_FIND_LINKS",
    "PIP_NO_INDEX",
    "PIP_INDEX_URL",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "LD_LIBRARY_PATH",
    "XLA_FLAGS",
    "TFGPU_DATA_DIR",
)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tf", VERSIONS)
def test_every_script_passes_shellcheck(tf, mode, tmp_path):
    """The script as the CLI writes it (tests/shellchecked.py: the cloud-init export embeds the
    same bytes, and its test reads this verdict)."""
    script = shellchecked.bash_script(tf, mode)
    done = shellchecked.check(script, tmp_path)
    assert done.returncode == 0 and done.stdout == "", done.stdout
    assert script.startswith("#!/usr/bin/env bash\n") and "set -euo pipefail" in script


def test_header_says_what_and_why():
    script = render("2.21", "pip", "bash").main.content
    head = script.split("set -euo pipefail")[0]
    for fact in (
        "TensorFlow 2.21.0",
        "CUDA 12.5.1",
        "cuDNN 9.3",
        "driver >= 525.60.13",
        "Why this combination",
        "TFGPU_PREFIX",
        "TFGPU_SKIP_VERIFY",
    ):
        assert fact in head
    assert "PIP_REQUIREMENTS=('tensorflow[and-cuda]==2.21.0' 'nvidia-cuda-nvcc-cu12>=12.6.3')" in script


def script_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SCRIPT_ENV_DROP}
    env.update(
        {"TFGPU_PREFIX": str(tmp_path / "env"), "TFGPU_PYTHON": sys.executable, "HOME": str(tmp_path / "home"), **extra}
    )
    return env


def run(script: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, timeout=600)


def mtimes(root: Path) -> dict[str, int]:
    return {str(p): p.lstat().st_mtime_ns for p in root.rglob("*")}


@pytest.fixture
def pip_script(tmp_path) -> Path:
    path = tmp_path / "install.sh"
    path.write_text(render("2.21", "pip", "bash", python=f"{sys.version_info[0]}.{sys.version_info[1]}").main.content)
    return path


@pytest.mark.slow
def test_pip_script_builds_the_env_fails_verification_honestly_then_changes_nothing(tmp_path, local_wheels, pip_script):
    prefix = tmp_path / "my envs" / "tf 2.21"  # a space: every path in the script must be quoted
    env = script_env(
        tmp_path,
        TFGPU_FIND_LINKS=str(local_wheels),
        TFGPU_OFFLINE="1",
        TFGPU_PREFIX=str(prefix),
        TFGPU_LOG=str(tmp_path / "install.log"),
    )
    first = run(pip_script, env)
    # The stand-in TensorFlow cannot list GPUs, and there is no GPU: the script must say so and fail.
    assert first.returncode == 1, first.stdout + first.stderr
    assert "FAIL: TensorFlow 2.21.0 could not list GPUs" in first.stdout
    assert "verification failed" in first.stderr and "no NVIDIA driver found" in first.stderr
    # the advice is what the target itself can check (it has no tfgpu-install), for its administrator
    assert "send these lines and" in first.stdout
    assert "nvidia-smi is not on PATH: no NVIDIA driver is installed here" in first.stdout
    assert "check again by hand:" in first.stdout and "tfgpu-install doctor" not in first.stdout + first.stderr
    site = next(prefix.glob("lib/python3*/site-packages"))
    assert (site / "_tfgpu_cuda_hook.pth").is_file() and (prefix / "etc" / "tfgpu" / "activate.sh").is_file()
    assert (prefix / "bin" / "ptxas").resolve().is_file()
    assert "pip install" in (tmp_path / "install.log").read_text()
    # pip's own lines come through as it works (piped here), and reach the log too: the longest step
    # of the script is not minutes of silence.
    assert "Installing collected packages" in first.stderr
    assert "Installing collected packages" in (tmp_path / "install.log").read_text()

    # The same hook as tfgpu-install's own pip mode: an unactivated python preloads the env's libraries.
    clean = {k: v for k, v in os.environ.items() if k not in SCRIPT_ENV_DROP}
    hook = subprocess.run(
        [
            str(prefix / "bin" / "python"),
            "-c",
            "import tensorflow, json, _tfgpu_cuda_hook as h; print(json.dumps([h.loaded, h.errors]))",
        ],
        capture_output=True,
        text=True,
        env=clean,
    )
    loaded, errors = json.loads(hook.stdout)
    assert errors == [] and {Path(p).name for p in loaded} >= {"libcudart.so.12", "libcusolver.so.11", "libcudnn.so.9"}

    before = mtimes(prefix)
    second = run(pip_script, dict(env, TFGPU_SKIP_VERIFY="1"))
    assert second.returncode == 0, second.stderr
    assert "already in place: venv" in second.stdout
    assert "already in place: Python packages" in second.stdout
    assert "already in place: activation scripts and load hook" in second.stdout
    assert "nothing changed: everything was already in place" in second.stdout
    assert "VERIFICATION SKIPPED (TFGPU_SKIP_VERIFY=1)" in second.stderr
    assert mtimes(prefix) == before


def test_pip_script_stops_clearly_without_the_python_it_needs(tmp_path, pip_script):
    env = script_env(tmp_path, TFGPU_PYTHON="/nonexistent/python", PATH="/usr/bin:/bin")
    script = pip_script.read_text().replace("PYTHON_VERSION=", "PYTHON_VERSION=3.1 #", 1)
    pip_script.write_text(script)
    done = run(pip_script, env)
    assert done.returncode == 1 and "Python 3.1 is needed" in done.stderr
    assert not (tmp_path / "env").exists()


FAKE_CONDA = """#!/bin/sh
# Fake conda (tests): records its argv, and for `create --prefix P` makes P a venv.
printf '%s\\n' "$*" >> "$FAKE_CONDA_LOG"
printf 'CONDA_OVERRIDE_CUDA=%s\\n' "${CONDA_OVERRIDE_CUDA:-}" >> "$FAKE_CONDA_LOG"
prev=
for arg in "$@"; do
    if [ "$prev" = --prefix ]; then exec "$FAKE_CONDA_PYTHON" -m venv "$arg"; fi
    prev="$arg"
done
exit 0
"""


@pytest.mark.slow
def test_conda_script_drives_the_conda_on_path_and_writes_activate_d(tmp_path):
    script = tmp_path / "install.sh"
    script.write_text(render("2.21", "conda", "bash").main.content)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "conda").write_text(FAKE_CONDA)
    (bindir / "conda").chmod(0o755)
    wheels = wheelhouse.wheel(
        tmp_path / "wheels", "tensorflow", "2.21.0", {"tensorflow/__init__.py": b"__version__ = '2.21.0'\n"}
    ).parent
    env = script_env(
        tmp_path,
        PATH=f"{bindir}:/usr/bin:/bin",
        FAKE_CONDA_LOG=str(tmp_path / "conda.log"),
        FAKE_CONDA_PYTHON=sys.executable,
        TFGPU_FIND_LINKS=str(wheels),
        TFGPU_OFFLINE="1",
        TFGPU_SKIP_VERIFY="1",
    )
    first = run(script, env)
    assert first.returncode == 0, first.stdout + first.stderr
    argv, override = (tmp_path / "conda.log").read_text().splitlines()
    assert argv.startswith(f"create --yes --prefix {tmp_path / 'env'} --override-channels -c conda-forge python 3.13.*")
    assert "cuda-version 12.5.* cuda-cudart" in argv and argv.endswith("cudnn ==9.3.0.75")
    assert override == "CONDA_OVERRIDE_CUDA=12.5"  # no driver here: the solve is told the target's CUDA
    activate = tmp_path / "env" / "etc" / "conda" / "activate.d" / "tfgpu-cuda.sh"
    assert activate.is_file() and (activate.parent.parent / "deactivate.d" / "tfgpu-cuda.sh").is_file()
    sourced = subprocess.run(
        [
            "bash",
            "-c",
            f'export CONDA_PREFIX={tmp_path / "env"}; LD_LIBRARY_PATH=/x; . "{activate}"; '
            'echo "$LD_LIBRARY_PATH|$XLA_FLAGS"; . "${CONDA_PREFIX}/etc/conda/deactivate.d/tfgpu-cuda.sh"; '
            'echo "$LD_LIBRARY_PATH|${XLA_FLAGS-unset}"',
        ],
        capture_output=True,
        text=True,
    )
    assert sourced.stdout.splitlines() == [
        f"{tmp_path / 'env'}/lib:/x|--xla_gpu_cuda_data_dir={tmp_path / 'env'}/lib",
        "/x|unset",
    ]
    second = run(script, env)
    assert "nothing changed: everything was already in place" in second.stdout, second.stderr
    assert len((tmp_path / "conda.log").read_text().splitlines()) == 2  # conda was not run again


def test_conda_script_without_conda_stops_with_instructions(tmp_path):
    script = tmp_path / "install.sh"
    script.write_text(render("2.13", "conda", "bash").main.content)
    done = run(script, script_env(tmp_path, PATH="/usr/bin:/bin"))
    assert done.returncode == 1
    assert "no conda, mamba or micromamba on PATH" in done.stderr and "Miniforge" in done.stderr


@pytest.mark.slow
@pytest.mark.skipif(not wheelhouse.have_compiler(), reason="gcc builds the fake NVIDIA libraries")
def test_system_script_against_the_fake_nvidia_server(tmp_path, monkeypatch):
    with fake_nvidia(tmp_path, monkeypatch) as fake:
        text = render("2.13", "system", "bash", python="3.11").main.content
        assert f"RUNFILE_SHA256={fake.runfile_sha256}" in text and f"CUDNN_SHA256={fake.cudnn_sha256}" in text
        script = tmp_path / "install.sh"
        script.write_text(text)
        wheels = tensorflow_wheel_dir(tmp_path)
        env = script_env(
            tmp_path,
            TFGPU_CUDA_PREFIX=str(tmp_path / "cuda"),
            TFGPU_DOWNLOADS=str(tmp_path / "dl"),
            TFGPU_SYSTEM_WIDE="0",
            TFGPU_ALLOW_HTTP="1",
            TFGPU_FIND_LINKS=str(wheels),
            TFGPU_OFFLINE="1",
            TFGPU_PYTHON=sys.executable,
        )
        first = run(script, dict(env, TFGPU_SKIP_VERIFY="1"))
        assert first.returncode == 0, first.stdout + first.stderr
        assert "downloaded cuda_11.8.0_000.00.00_linux.run (checksum verified)" in first.stdout
        cuda_home = tmp_path / "cuda" / "cuda-11.8"
        assert (cuda_home / "version.json").is_file() and (cuda_home / "nvvm" / "libdevice").is_dir()
        # where the Slurm export's modulefile finds the toolkit and cuDNN, wherever they were put
        assert (tmp_path / "env" / "etc" / "tfgpu" / "cuda").resolve() == cuda_home.resolve()
        assert (tmp_path / "env" / "etc" / "tfgpu" / "cudnn" / "lib").is_dir()
        activation = tmp_path / "cuda" / "tfgpu-cuda-11.8.sh"
        loads = subprocess.run(
            [
                "bash",
                "-c",
                f'. "{activation}"; "{tmp_path}/env/bin/python" -c '
                "\"import ctypes; ctypes.CDLL('libcudart.so.11.0'); ctypes.CDLL('libcudnn.so.8'); "
                "import os; print(os.environ['XLA_FLAGS'])\"",
            ],
            capture_output=True,
            text=True,
        )
        assert loads.returncode == 0, loads.stderr
        assert loads.stdout.strip() == f"--xla_gpu_cuda_data_dir={cuda_home}"
        before = mtimes(tmp_path / "cuda") | mtimes(tmp_path / "env")
        second = run(script, dict(env, TFGPU_SKIP_VERIFY="1"))
        assert "nothing changed: everything was already in place" in second.stdout, second.stderr
        assert "already in place: download cudnn-linux-x86_64-8.6.0.163_cuda11-archive.tar.xz" in second.stdout
        assert mtimes(tmp_path / "cuda") | mtimes(tmp_path / "env") == before
        assert [status for _, _, status in fake.requests] == [200, 200]  # nothing downloaded twice
        verify = run(script, env)
        assert verify.returncode == 1 and "FAIL: TensorFlow 2.13.1 could not list GPUs" in verify.stdout


@pytest.mark.skipif(not wheelhouse.have_compiler(), reason="gcc builds the fake NVIDIA libraries")
def test_system_script_refuses_a_corrupt_download(tmp_path, monkeypatch):
    from fakenvidia import Faults

    with fake_nvidia(tmp_path, monkeypatch, faults=Faults(corrupt=True, only=".run")):
        text = render("2.13", "system", "bash", python="3.11").main.content
        script = tmp_path / "install.sh"
        script.write_text(text)
        done = run(
            script,
            script_env(
                tmp_path,
                TFGPU_CUDA_PREFIX=str(tmp_path / "cuda"),
                TFGPU_SYSTEM_WIDE="0",
                TFGPU_DOWNLOADS=str(tmp_path / "dl"),
                TFGPU_ALLOW_HTTP="1",
            ),
        )
        assert done.returncode == 1 and "checksum mismatch for cuda_11.8.0_000.00.00_linux.run" in done.stderr
        assert list((tmp_path / "dl").iterdir()) == [] and not (tmp_path / "cuda" / "cuda-11.8").exists()


def test_system_script_refuses_plain_http_unless_allowed(tmp_path):
    text = render("2.21", "system", "bash").main.content
    script = tmp_path / "install.sh"
    script.write_text(text)
    done = run(
        script,
        script_env(
            tmp_path,
            TFGPU_CUDA_PREFIX=str(tmp_path / "cuda"),
            TFGPU_SYSTEM_WIDE="0",
            TFGPU_DOWNLOADS=str(tmp_path / "dl"),
            TFGPU_DOWNLOAD_BASE="http://127.0.0.1:9",
        ),
    )
    assert done.returncode == 1 and "refusing to download http://127.0.0.1:9/cuda_12.5.1" in done.stderr
    assert not (tmp_path / "dl" / "cuda_12.5.1_555.42.06_linux.run.partial").exists()


@pytest.mark.slow
@pytest.mark.skipif(not wheelhouse.have_compiler() or os.geteuid() != 0, reason="needs gcc and root")
def test_system_script_as_root_writes_profile_d_and_ld_so_conf_d(tmp_path, monkeypatch):
    with fake_nvidia(tmp_path, monkeypatch):
        script = tmp_path / "install.sh"
        script.write_text(render("2.13", "system", "bash", python="3.11").main.content)
        wheels = tensorflow_wheel_dir(tmp_path)
        env = script_env(
            tmp_path,
            TFGPU_CUDA_PREFIX=str(tmp_path / "usr-local"),
            TFGPU_ETC=str(tmp_path / "etc"),
            TFGPU_DOWNLOADS=str(tmp_path / "dl"),
            TFGPU_ALLOW_HTTP="1",
            TFGPU_FIND_LINKS=str(wheels),
            TFGPU_OFFLINE="1",
            TFGPU_SKIP_VERIFY="1",
        )
        done = run(script, env)
        assert done.returncode == 0, done.stdout + done.stderr
        conf = (tmp_path / "etc" / "ld.so.conf.d" / "tfgpu-cuda-11.8.conf").read_text().split()
        assert conf == [f"{tmp_path}/usr-local/cuda-11.8/lib64", f"{tmp_path}/usr-local/cudnn-8.6.0.163-cuda11/lib"]
        profile = (tmp_path / "etc" / "profile.d" / "tfgpu-cuda-11.8.sh").read_text()
        assert f"export CUDA_HOME={tmp_path}/usr-local/cuda-11.8" in profile
        again = run(script, env)
        assert "nothing changed: everything was already in place" in again.stdout, again.stderr


def test_an_env_of_another_python_is_not_touched(tmp_path):
    prefix = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True)
    other = "3.12" if sys.version_info[:2] != (3, 12) else "3.11"
    script = tmp_path / "install.sh"
    script.write_text(render("2.21", "pip", "bash", python=other).main.content)
    done = run(script, script_env(tmp_path))
    assert done.returncode == 1
    assert f"already holds a Python {sys.version_info[0]}.{sys.version_info[1]} environment" in done.stderr
    assert not (prefix / "etc").exists()


def test_pip_script_embeds_the_tools_own_activation_code():
    from importlib.resources import files

    script = render("2.16.1", "pip", "bash").main.content
    source = files("tfgpu.envs").joinpath("activation.py").read_text(encoding="utf-8")
    # line for line, in a quoted heredoc a reviewer reads as the module itself
    assert f"cat >\"$files/activation.py\" <<'TFGPU_ACTIVATION_PY'\n{source.rstrip()}\nTFGPU_ACTIVATION_PY\n" in script


@pytest.mark.slow
@pytest.mark.skipif(not wheelhouse.have_compiler(), reason="gcc builds the fake NVIDIA libraries")
def test_system_script_resumes_an_interrupted_download(tmp_path, monkeypatch):
    from fakenvidia import Faults

    with fake_nvidia(tmp_path, monkeypatch, faults=Faults(truncate_after=100_000, only=".run")) as fake:
        script = tmp_path / "install.sh"
        script.write_text(render("2.13", "system", "bash", python="3.11").main.content)
        # No wheels for the venv step: the script stops there, after the toolkit is in place.
        done = run(
            script,
            script_env(
                tmp_path,
                TFGPU_CUDA_PREFIX=str(tmp_path / "cuda"),
                TFGPU_SYSTEM_WIDE="0",
                TFGPU_DOWNLOADS=str(tmp_path / "dl"),
                TFGPU_ALLOW_HTTP="1",
                TFGPU_FIND_LINKS=str(tmp_path),
                TFGPU_OFFLINE="1",
            ),
        )
        assert "download of cuda_11.8.0_000.00.00_linux.run interrupted (attempt 1)" in done.stderr
        runfile = [(rng, status) for name, rng, status in fake.requests if name.endswith(".run")]
        assert runfile == [("", 200), ("bytes=100000-", 206)]
        assert (tmp_path / "cuda" / "cuda-11.8" / "version.json").is_file()
