"""``tfgpu-install script``: exit codes, -o, --json, and the cloud-init wrapper around the script."""

from __future__ import annotations

import json

import pytest
import shellchecked

from tfgpu import cli
from tfgpu.export.cloudinit import embedded_script

TARGET = ("--no-detect", "--os", "linux", "--arch", "x86_64")


def main(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_bash_to_stdout(capsys):
    code, out, _ = main(capsys, "script", "--tf", "2.21", *TARGET, "--format", "bash")
    assert code == 0 and out.startswith("#!/usr/bin/env bash\n") and "PIP_REQUIREMENTS=" in out


@pytest.mark.parametrize("tf, exit_code, error", [("2.99", 3, "unknown-tf-version"), ("banana", 2, None)])
def test_bad_tf_version_exits_like_plan(capsys, tf, exit_code, error):
    code, out, _ = main(capsys, "script", "--tf", tf, *TARGET, "--format", "bash", "--json")
    plan_code = cli.main(["plan", "--tf", tf, *TARGET, "--json"])
    plan = json.loads(capsys.readouterr().out)
    document = json.loads(out)
    assert code == plan_code == exit_code and document["error"]["code"] == plan["error"]["code"]
    if error:
        assert document["error"]["code"] == error


def test_output_into_a_missing_directory_is_a_clear_error(capsys, tmp_path):
    target = tmp_path / "nowhere" / "install.sh"
    code, out, _ = main(capsys, "script", "--tf", "2.21", *TARGET, "--format", "bash", "-o", str(target), "--json")
    error = json.loads(out)["error"]
    assert code == 3 and error["code"] == "bad-output" and str(tmp_path / "nowhere") in error["message"]
    assert "mkdir -p" in error["alternatives"][0]


def test_output_file_and_json(capsys, tmp_path):
    target = tmp_path / "install.sh"
    code, out, _ = main(
        capsys, "script", "--tf", "2.16.1", "--mode", "conda", *TARGET, "--format", "bash", "-o", str(target), "--json"
    )
    document = json.loads(out)
    assert code == 0 and document["format"] == "bash" and document["written"] == [str(target)]
    assert document["files"][0]["mode"] == "0o755" and target.stat().st_mode & 0o777 == 0o755
    assert "CONDA_SPECS=(" in target.read_text()


def test_json_without_output_carries_the_contents(capsys):
    code, out, _ = main(
        capsys, "script", "--tf", "2.21", "--mode", "system", *TARGET, "--format", "dockerfile", "--json"
    )
    document = json.loads(out)
    assert code == 0 and document["format"] == "dockerfile"
    assert document["files"][0]["name"] == "Dockerfile" and "FROM nvidia/cuda:" in document["files"][0]["content"]


def test_ansible_needs_a_directory(capsys, tmp_path):
    code, out, _ = main(capsys, "script", "--tf", "2.21", *TARGET, "--format", "ansible", "--json")
    assert code == 2 and json.loads(out)["error"]["code"] == "missing-output"
    (tmp_path / "file").write_text("")
    code, out, _ = main(
        capsys, "script", "--tf", "2.21", *TARGET, "--format", "ansible", "-o", str(tmp_path / "file"), "--json"
    )
    assert code == 3 and json.loads(out)["error"]["code"] == "bad-output"


@pytest.mark.parametrize("mode", ["pip", "conda", "system"])
@pytest.mark.parametrize("tf", ["2.13", "2.21"])
def test_cloud_init_is_yaml_running_the_script_with_a_log(capsys, tmp_path, tf, mode):
    yaml = pytest.importorskip("yaml")
    code, out, _ = main(capsys, "script", "--tf", tf, "--mode", mode, *TARGET, "--format", "cloud-init")
    assert code == 0 and out.startswith("#cloud-config\n")
    document = yaml.safe_load(out)
    (entry,) = document["write_files"]
    assert entry["path"] == "/opt/tfgpu-install/install-tf.sh" and entry["permissions"] == "0755"
    assert entry["content"] == embedded_script(out)
    assert document["runcmd"] == [
        ["bash", "-c", "HOME=/root bash /opt/tfgpu-install/install-tf.sh >> /var/log/tfgpu-install.log 2>&1"]
    ]
    # The bytes ``script --format bash`` writes: checked once (tests/shellchecked.py).
    assert entry["content"] == shellchecked.bash_script(tf, mode)
    assert shellchecked.check(entry["content"], tmp_path).stdout == ""


@pytest.mark.parametrize("fmt", ["slurm", "kubernetes"])
def test_cluster_formats_need_a_directory(capsys, tmp_path, fmt):
    code, out, _ = main(capsys, "script", "--tf", "2.21", *TARGET, "--format", fmt, "--json")
    error = json.loads(out)["error"]
    assert code == 2 and error["code"] == "missing-output" and f"--format {fmt} -o" in error["alternatives"][0]
    code, out, _ = main(capsys, "script", "--tf", "2.21", *TARGET, "--format", fmt, "-o", str(tmp_path / fmt), "--json")
    document = json.loads(out)
    assert (
        code == 0 and document["format"] == fmt and all(p.startswith(str(tmp_path / fmt)) for p in document["written"])
    )
