"""An export describes its target, never the machine it is made on.

The build machine's facts are made up here (an NVIDIA driver, a GPU, a CUDA toolkit path and a
running Python that no real machine of the test has) and handed to detection — the GPU and the
driver cannot be real on this GPU-less machine. ``plan`` shows them (so they did reach detection);
``script``, with a project file present, carries none of them in any format, and says in its header
what it assumed instead.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import tfgpu.detect
from tfgpu import export
from tfgpu.cli import main
from tfgpu.detect.host import DriverInfo, DriverReading, Gpu, Host, Toolkit

DRIVER = "571.86.99"
TOOLKIT = "/opt/made-up-cuda-12.7"
GPU = "Made-Up Accelerator 7700"
PYTHON = "3.12"  # supported by TF 2.21, and not the export's default: it would show if detection leaked in


def fake_host() -> Host:
    return Host(
        os="linux",
        arch="x86_64",
        os_release="Made-Up Linux 77",
        glibc="2.39",
        python=PYTHON,
        pythons=(PYTHON,),
        driver=DriverInfo(
            version=DRIVER,
            cuda="12.8",
            readings=(DriverReading(source="nvidia-smi", ok=True, driver_version=DRIVER, cuda="12.8"),),
            agree=True,
        ),
        gpus=(Gpu(index=0, name=GPU, compute_capability="8.6", memory_mib=24576, uuid=None, source="nvidia-smi"),),
        toolkits=(Toolkit(version="12.7", path=TOOLKIT, source="version.json"),),
        conda=(),
    )


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.setattr(tfgpu.detect, "probe", lambda *a, **k: fake_host())
    monkeypatch.delenv("TFGPU_PROJECT_FILE", raising=False)
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "tfgpu.toml").write_text('tf = "2.21"\n')
    monkeypatch.chdir(repo)
    return repo


def unwrapped(text: str) -> str:
    """Comment lines as written before wrapping (``tfgpu.doors.quoting.comment`` continues them indented)."""
    return re.sub(r"\n *(#|--) {5}", " ", text)


def _texts(out: Path) -> str:
    files = [out] if out.is_file() else sorted(p for p in out.rglob("*") if p.is_file())
    return unwrapped("\n".join(p.read_text() for p in files))


def test_detection_is_really_faked(project, capsys):
    assert main(["plan", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["driver"] == DRIVER and plan["python"] == PYTHON and plan["tensorflow"] == "2.21.0"


@pytest.mark.parametrize("mode", ["pip", "conda"])
@pytest.mark.parametrize("fmt", export.FORMATS)
def test_an_export_carries_no_fact_of_the_machine_it_is_made_on(project, capsys, tmp_path, fmt, mode):
    out = tmp_path / "out" / ("export" if fmt in export.DIRECTORY_FORMATS else "export.txt")
    out.parent.mkdir()
    assert main(["script", "--format", fmt, "--mode", mode, "-o", str(out)]) == 0, capsys.readouterr().err
    text = _texts(out)
    for fact in (DRIVER, TOOLKIT, GPU, "Made-Up Linux", f"python{PYTHON}", f"Python {PYTHON}", "running interpreter"):
        assert fact not in text, f"{fact!r} of the build machine is in the {fmt} export"
    assert "TensorFlow 2.21.0" in text  # the project file's release
    assert "Assumed about the target" in text
    assert "--driver not given" in text and "--gpu-cc not given" in text


def test_the_default_python_is_one_the_common_server_distributions_install(project, capsys):
    assert main(["script", "--format", "bash"]) == 0
    script = unwrapped(capsys.readouterr().out)
    assert "PYTHON_VERSION=3.11" in script
    assert "Python 3.11 (neither --python nor the project file says)" in script
    assert "Debian 12: apt-get install python3.11-venv" in script and "RHEL 9: dnf install python3.11" in script
    assert "Not packaged there: Ubuntu 24.04 (3.12); export with --python X.Y" in script


def test_what_the_project_file_says_is_not_assumed(project, capsys):
    (project / "tfgpu.toml").write_text('tf = "2.21"\npython = "3.10"\ndriver = "535.104.05"\ngpu-cc = "8.0"\n')
    assert main(["script", "--format", "bash"]) == 0
    script = unwrapped(capsys.readouterr().out)
    assert "PYTHON_VERSION=3.10" in script and "MIN_DRIVER=" in script
    assert "Python 3.10: as requested" in script
    assert (
        "neither --python" not in script and "--driver not given" not in script and "--gpu-cc not given" not in script
    )
    assert DRIVER not in script and TOOLKIT not in script
