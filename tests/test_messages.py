"""What the tool says when something is wrong: the message fits the machine and the case, names
what it found, and offers a way forward that works as written."""

from __future__ import annotations

import json
import os
import re

import pytest
from conftest import run_tool

from tfgpu.detect.host import Host
from tfgpu.doctor import host_checks
from tfgpu.doctor.logs import signatures


def host(os_release: str, os_name: str = "linux") -> Host:
    return Host(
        os=os_name,
        arch="x86_64",
        os_release=os_release,
        glibc="2.36",
        python="3.11",
        pythons=(),
        driver=None,
        gpus=(),
        toolkits=(),
        conda=(),
    )


@pytest.mark.parametrize(
    "release,says,never",
    [
        ("Debian GNU/Linux 12 (bookworm)", "apt install nvidia-driver firmware-misc-nonfree", "ubuntu"),
        ("Ubuntu 24.04.1 LTS", "ubuntu-drivers install", "non-free"),
        ("Fedora Linux 40 (Workstation Edition)", "akmod-nvidia", "apt"),
        ("Rocky Linux 9.4 (Blue Onyx)", "dnf install cuda-drivers", "apt"),
        ("Gentoo Linux", "nvidia.com/Download", "apt"),
    ],
)
def test_the_driver_fix_is_the_one_for_this_distribution(release, says, never):
    [finding] = host_checks.driver_present(host(release), "12.5.1")
    assert finding.status == "fail" and says in finding.fix and never not in finding.fix.lower()
    assert "525.60.13 or newer" in finding.fix  # the driver the env's CUDA needs


def test_wsl2_is_told_to_install_the_driver_on_windows():
    [finding] = host_checks.driver_present(host("Ubuntu 22.04.4 LTS", "wsl2"))
    assert "on Windows (not inside WSL)" in finding.fix and "apt" not in finding.fix


STANDARD_VARIABLES = {"PATH", "LD_LIBRARY_PATH", "CONDA_PREFIX", "VIRTUAL_ENV", "CUDA_VISIBLE_DEVICES", "HOME"}


@pytest.mark.parametrize("signature", signatures(), ids=lambda s: s.id)
def test_a_log_fix_uses_no_variable_it_does_not_define(signature):
    """A fix is pasted into a shell: every $VARIABLE in it is a standard one or defined in it."""
    defined = set(re.findall(r"(?:export\s+)?([A-Z_][A-Z0-9_]*)=", signature.fix))
    used = set(re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", signature.fix))
    assert used - STANDARD_VARIABLES - defined == set()


def test_doctor_on_a_directory_that_is_not_an_env(tmp_path):
    (tmp_path / "notes.txt").write_text("not an env\n")
    done = run_tool("doctor", "--prefix", str(tmp_path), env=dict(os.environ))
    assert done.returncode == 3 and "error: not-an-env" in done.stderr
    assert "None" not in done.stdout + done.stderr
    as_json = json.loads(run_tool("doctor", "--prefix", str(tmp_path), "--json", env=dict(os.environ)).stdout)
    assert as_json["error"]["code"] == "not-an-env"


def test_doctor_on_an_env_without_tensorflow_says_so_in_words(tmp_path):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").symlink_to("/usr/bin/python3")
    done = run_tool("doctor", "--prefix", str(tmp_path), env=dict(os.environ))
    assert done.returncode == 1
    assert f"doctor {tmp_path} (no TensorFlow, Python unknown)" in done.stdout
    assert "None" not in done.stdout
    assert "has no lib/python3.*/site-packages" in done.stdout


def test_an_unreachable_conda_channel_offers_pip_mode(tmp_path):
    env = dict(os.environ, TFGPU_CACHE_DIR=str(tmp_path / "cache"), TFGPU_LOG_DIR=str(tmp_path / "logs"))
    done = run_tool(
        "create",
        "--tf",
        "2.13",
        "--mode",
        "conda",
        "--prefix",
        str(tmp_path / "env"),
        "--channel",
        "http://127.0.0.1:9/conda-forge",
        "--no-verify",
        "--no-detect",
        "--os",
        "linux",
        env=env,
    )
    assert done.returncode == 1 and "error: channel-unreachable" in done.stderr
    assert "--mode pip" in done.stderr
    [log] = (tmp_path / "logs").glob("create-env-*.log")  # conda builds keep a log too, and say where
    assert str(log) in done.stderr
    assert not (tmp_path / "env").exists()
