"""The Dockerfile export: parsed with dockerfile-parse, linted with hadolint (no findings at all).

One rule is ignored inline, in the generated file, with its reason: DL3008 (pin apt packages) for
Ubuntu's python3 in system mode, whose version the nvidia/cuda base tag already fixes.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from exporthelpers import MODES, VERSIONS, need, render

from tfgpu.errors import ImpossibleError


def parse(text: str, tmp_path) -> list[dict]:
    dockerfile_parse = pytest.importorskip("dockerfile_parse")
    (tmp_path / "Dockerfile").write_text(text)
    return dockerfile_parse.DockerfileParser(str(tmp_path / "Dockerfile")).structure


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tf", VERSIONS)
def test_dockerfile_parses_and_lints_clean(tf, mode, tmp_path):
    try:
        text = render(tf, mode, "dockerfile").main.content
    except ImpossibleError as error:
        # TF 2.16 needs cuDNN 8 on CUDA 12.3: no nvidia/cuda tag has that pair (12.3.2 ships cuDNN 9).
        assert (tf, mode, error.code) == ("2.16.1", "system", "no-docker-image")
        assert any("--mode pip --format dockerfile" in a for a in error.alternatives)
        return
    instructions = [
        (item["instruction"], item["value"]) for item in parse(text, tmp_path) if item["instruction"] != "COMMENT"
    ]
    kinds = [kind for kind, _ in instructions]
    assert kinds[0] == "FROM" and kinds.count("FROM") == 1
    assert {"RUN", "HEALTHCHECK", "CMD"} <= set(kinds)
    base = instructions[0][1]
    if mode == "pip":
        assert base.startswith("python:3.") and base.endswith("-slim")
        assert any(
            kind == "ENV" and "LD_LIBRARY_PATH=" in value and "XLA_FLAGS=" in value for kind, value in instructions
        )
    elif mode == "system":
        assert base.startswith("nvidia/cuda:") and "-runtime-ubuntu" in base
    else:
        assert base.startswith("mambaorg/micromamba:")
    if mode != "conda":  # micromamba's image already runs as its own non-root user
        assert ("USER", "10001:10001") in instructions
    cmd = json.loads(dict(instructions)["CMD"])
    assert cmd[1].endswith("/tfgpu/verify.py")  # written into the image by a RUN, line for line:
    assert "'gpus = tf.config.list_physical_devices(\"GPU\")'" in text and f">{cmd[1]}" in text
    assert 'sys.exit("FAIL: TensorFlow sees no GPU' in text
    done = subprocess.run([need("hadolint"), "--no-color", "-"], input=text, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == "", done.stdout


def test_pip_image_installs_the_pinned_cuda_wheels():
    text = render("2.13", "pip", "dockerfile").main.content
    assert "FROM python:3.11-slim" in text
    assert "pip install --no-cache-dir tensorflow==2.13.1 \\\n        nvidia-cuda-runtime-cu11==11.8.89 \\\n" in text


def test_system_image_tag_matches_the_build():
    text = render("2.21", "system", "dockerfile").main.content
    assert "FROM nvidia/cuda:12.5.1-cudnn-runtime-ubuntu22.04" in text
    assert "tensorflow==2.21.0" in text and "Python 3.10 is ubuntu22.04's python3" in text
    text = render("2.13", "system", "dockerfile").main.content
    assert "FROM nvidia/cuda:11.8.0-cudnn8-runtime-ubuntu22.04" in text


def test_an_image_from_an_nvidia_cuda_base_says_nothing_of_the_runfile_or_its_checksums():
    """The system-mode image gets CUDA and cuDNN from its base: the header names neither the runfile
    nor the cuDNN archive, warns about no checksum of a file it never downloads, and gives the
    base's Python, not the plan's."""
    from exporthelpers import resolution

    from tfgpu.export.dockerfile import render_dockerfile
    from tfgpu.records import replace
    from tfgpu.resolver.model import Notice

    plan = resolution("2.13", "system")
    plan = replace(
        plan,
        warnings=(
            *plan.warnings,
            Notice(
                "unverified-download", "No checksum is recorded for the runfile cuda_11.8.0_520.61.05_linux.run.", ""
            ),
        ),
    )
    head = render_dockerfile(plan).split("\nFROM ")[0]
    assert "runfile" not in head and "cudnn-linux" not in head and "No checksum" not in head
    assert "Python 3.10: the base image's python3." in head and "for Python 3.10, system mode" in head
