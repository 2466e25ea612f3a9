"""The Ansible export: syntax-checked, then run for real with ``-c local`` against localhost.

pip mode installs from the local wheelhouse into a user prefix under tmp_path; a second run must
report ``changed=0``. The machine has no GPU, so the run sets ``tfgpu_require_driver=false`` and
``tfgpu_require_gpu=false`` and the summary must report the failed GPU check; a fake
``nvidia-smi`` (the subprocess boundary) reporting an old driver must fail the host first.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import shellchecked
import wheelhouse
from exporthelpers import MODES, fake_nvidia, need, render, tensorflow_wheel_dir

from tfgpu import cli, export


def write(tmp_path: Path, tf: str, mode: str, python: str | None = None) -> Path:
    out = tmp_path / "playbook"
    export.write(render(tf, mode, "ansible", python), str(out))
    (out / "inventory.ini").write_text(
        f"[gpu]\nlocalhost ansible_connection=local ansible_python_interpreter={sys.executable}\n"
    )
    return out


def ansible_env(tmp_path: Path, path_prefix: str = "") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "PIP_", "TFGPU_"))}
    env.update(
        ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-local"),
        ANSIBLE_REMOTE_TEMP=str(tmp_path / "ansible-remote"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_RETRY_FILES_ENABLED="0",
        ANSIBLE_HOST_KEY_CHECKING="0",
        ANSIBLE_CONFIG=str(tmp_path / "none.cfg"),
        ANSIBLE_STDOUT_CALLBACK="default",
        HOME=str(tmp_path / "home"),
    )
    if path_prefix:
        env["PATH"] = f"{path_prefix}:{env['PATH']}"
    return env


def playbook(out: Path, env: dict, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [need("ansible-playbook"), "-i", "inventory.ini", "playbook.yml", *extra],
        cwd=out,
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )


def recap(output: str) -> dict[str, int]:
    line = re.search(r"^localhost\s+:(.*)$", output, re.MULTILINE).group(1)
    return {key: int(value) for key, value in re.findall(r"(\w+)=(\d+)", line)}


@pytest.fixture(scope="module")
def syntax_checked(tmp_path_factory) -> tuple[dict[str, Path], subprocess.CompletedProcess]:
    """Each mode's playbook, and ONE ``ansible-playbook --syntax-check`` of all three with both
    inventories of each (``inventory.ini`` and ``inventory.example.ini``): ansible checks each
    playbook and parses each inventory in turn and names the file it fails on, so one start of
    ansible (a second of CPU) holds what a start per playbook and inventory did."""
    tmp_path = tmp_path_factory.mktemp("ansible-syntax")
    outs = {}
    for mode in MODES:  # as the CLI writes them, with the inventory ``write`` adds
        (tmp_path / mode).mkdir()
        outs[mode] = tmp_path / mode / "playbook"
        argv = ["script", "--tf", "2.21", "--mode", mode, *shellchecked.TARGET, "--format", "ansible"]
        with contextlib.redirect_stdout(io.StringIO()):
            assert cli.main([*argv, "-o", str(outs[mode])]) == 0
        (outs[mode] / "inventory.ini").write_text(
            f"[gpu]\nlocalhost ansible_connection=local ansible_python_interpreter={sys.executable}\n"
        )
    inventories = [arg for mode in MODES for name in ("inventory.ini", "inventory.example.ini")
                   for arg in ("-i", str(outs[mode] / name))]  # fmt: skip
    done = subprocess.run(
        [need("ansible-playbook"), *inventories, "--syntax-check", *(str(outs[m] / "playbook.yml") for m in MODES)],
        capture_output=True,
        text=True,
        env=ansible_env(tmp_path),
        timeout=900,
    )
    return outs, done


@pytest.mark.parametrize("mode", MODES)
def test_playbook_passes_syntax_check_and_carries_a_clean_script(mode, tmp_path, syntax_checked):
    outs, done = syntax_checked
    out = outs[mode]
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) == [
        ".tfgpu-export.json",  # what the export wrote, so a later one knows its own files from the user's
        "README.md",
        "files/install-tf.sh",
        "inventory.example.ini",
        "inventory.ini",
        "playbook.yml",
    ]
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"playbook: {out / 'playbook.yml'}" in done.stdout, done.stdout
    script = (out / "files" / "install-tf.sh").read_text()
    assert script == shellchecked.bash_script("2.21", mode)  # the bash export's bytes, checked once
    check = shellchecked.check(script, tmp_path)
    assert check.stdout == ""
    assert os.access(out / "files" / "install-tf.sh", os.X_OK)
    modules = set(
        re.findall(r"^\s+(?:- )?([a-z_]+\.[a-z_]+\.[a-z_]+):", (out / "playbook.yml").read_text(), re.MULTILINE)
    )
    assert modules and all(m.startswith("ansible.builtin.") for m in modules)


@pytest.mark.slow
def test_playbook_installs_on_localhost_then_changes_nothing(tmp_path, local_wheels):
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    out = write(tmp_path, "2.21", "pip", python)
    extra = {
        "tfgpu_require_driver": False,
        "tfgpu_require_gpu": False,
        "tfgpu_prefix": str(tmp_path / "env"),
        "tfgpu_workdir": str(tmp_path / "work"),
        "tfgpu_script_env": {
            "TFGPU_FIND_LINKS": str(local_wheels),
            "TFGPU_OFFLINE": "1",
            "TFGPU_PYTHON": sys.executable,
        },
    }
    (out / "extra.json").write_text(json.dumps(extra))
    env = ansible_env(tmp_path)
    first = playbook(out, env, "-e", "@extra.json")
    assert first.returncode == 0, first.stdout + first.stderr
    assert recap(first.stdout)["changed"] >= 1 and recap(first.stdout)["failed"] == 0
    assert (tmp_path / "env" / "bin" / "python").is_file()
    summary = re.search(r'"msg": "localhost: (.*)"', first.stdout).group(1)
    assert summary.startswith(f"TensorFlow 2.21.0 in {tmp_path / 'env'} (installed); driver none; GPU check: FAIL")

    second = playbook(out, env, "-e", "@extra.json")
    assert second.returncode == 0, second.stdout + second.stderr
    assert recap(second.stdout)["changed"] == 0
    assert "(already in place)" in second.stdout

    strict = playbook(out, env, "-e", "@extra.json", "-e", "tfgpu_require_gpu=true")
    assert strict.returncode != 0 and recap(strict.stdout)["failed"] == 1  # no GPU: the host fails, last


@pytest.mark.slow
def test_a_host_with_an_old_driver_fails_with_the_version_needed(tmp_path):
    out = write(tmp_path, "2.21", "pip")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "nvidia-smi").write_text("#!/bin/sh\necho 470.199.02\n")
    (bindir / "nvidia-smi").chmod(0o755)
    done = playbook(out, ansible_env(tmp_path, str(bindir)), "-e", f"tfgpu_prefix={tmp_path / 'env'}")
    assert done.returncode != 0
    assert "NVIDIA driver 470.199.02 is too old: TensorFlow 2.21.0 needs >= 525.60.13." in done.stdout
    assert recap(done.stdout)["failed"] == 1 and not (tmp_path / "env").exists()


@pytest.mark.slow
@pytest.mark.skipif(not wheelhouse.have_compiler(), reason="gcc builds the fake NVIDIA libraries")
def test_system_mode_playbook_against_the_fake_nvidia_server(tmp_path, monkeypatch):
    with fake_nvidia(tmp_path, monkeypatch) as fake:
        out = write(tmp_path, "2.13", "system", "3.11")
        wheels = tensorflow_wheel_dir(tmp_path)
        extra = {
            "tfgpu_require_driver": False,
            "tfgpu_require_gpu": False,
            "tfgpu_prefix": str(tmp_path / "env"),
            "tfgpu_workdir": str(tmp_path / "work"),
            "tfgpu_script_env": {
                "TFGPU_CUDA_PREFIX": str(tmp_path / "cuda"),
                "TFGPU_SYSTEM_WIDE": "0",
                "TFGPU_DOWNLOADS": str(tmp_path / "dl"),
                "TFGPU_ALLOW_HTTP": "1",
                "TFGPU_FIND_LINKS": str(wheels),
                "TFGPU_OFFLINE": "1",
                "TFGPU_PYTHON": sys.executable,
            },
        }
        (out / "extra.json").write_text(json.dumps(extra))
        env = ansible_env(tmp_path)
        first = playbook(out, env, "-e", "@extra.json")
        assert first.returncode == 0 and recap(first.stdout)["changed"] >= 1, first.stdout + first.stderr
        assert (tmp_path / "cuda" / "cuda-11.8" / "version.json").is_file()
        second = playbook(out, env, "-e", "@extra.json")
        assert second.returncode == 0 and recap(second.stdout)["changed"] == 0, second.stdout
        assert [status for _, _, status in fake.requests] == [200, 200]
