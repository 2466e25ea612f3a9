"""System mode and its exports with the NVIDIA data as shipped (no TFGPU_DATA_DIR overlay).

* every TF release with a Linux CUDA build gets a runfile and a cuDNN archive whose checksums the
  data records, of the build's CUDA minor and cuDNN major (generated from tensorflow.toml);
* TF 2.13 (CUDA 11.8, cuDNN 8) plans a system install and renders every system export without
  ``unverified-download``, with NVIDIA's URLs and the data's checksums in them;
* the legacy cuDNN tarball layout (``cuda/include``, ``cuda/lib64``), which is what the CUDA 10
  releases get, is installed by ``--mode system`` and by the bash export, against the fake NVIDIA
  server of tests/fakenvidia.py (its ``TFGPU_DATA_DIR`` overlay stands in for NVIDIA's files).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import wheelhouse
from conftest import run_tool
from exporthelpers import clear_tables, render, resolution, shellcheck
from fakenvidia import serve_fake_nvidia

from tfgpu import cli, export
from tfgpu.engines import nvidia as vendor
from tfgpu.resolver import tables

CUDA_RELEASES = [str(r.version) for r in tables.releases() if (w := r.wheels.get("linux_x86_64")) and w.cuda_build]


@pytest.fixture(autouse=True)
def shipped_data(monkeypatch):
    """The tables as shipped: no overlay from the environment or from another test."""
    monkeypatch.delenv("TFGPU_DATA_DIR", raising=False)
    clear_tables()
    yield
    clear_tables()


def test_every_cuda_release_is_a_cuda_build_of_the_data():
    assert len(CUDA_RELEASES) > 60 and "2.0.0" in CUDA_RELEASES and "2.13.1" in CUDA_RELEASES


@pytest.mark.parametrize("tf", CUDA_RELEASES)
def test_system_mode_downloads_are_verifiable_for_every_cuda_release(tf):
    plan = resolution(tf, "system")
    items = vendor.artifacts(plan)
    assert vendor.unverifiable(items) is None, [item.filename for item in items]
    runfile, cudnn = items
    build = (plan.cuda_build or plan.cuda).split(".")
    assert runfile.version.split(".")[:2] == build[:2], runfile.filename
    archive = next(a for a in tables.cudnn_archives() if a.filename == cudnn.filename)
    assert archive.cuda_major == int(build[0]) and archive.version.major == int(plan.cudnn.split(".")[0])
    assert archive.version.release[:2] >= tuple(int(p) for p in plan.cudnn.split(".")[:2])
    if int(build[0]) < 11:
        # Before CUDA 11 there is no minor-version compatibility: cuDNN must be built for this X.Y.
        assert archive.cuda_min == archive.cuda_max == ".".join(build[:2]), archive.filename
    assert cudnn.url.startswith("https://developer.download.nvidia.com/") and runfile.url.startswith("https://")


@pytest.mark.parametrize(
    "tf", [v for v in CUDA_RELEASES if v.startswith(("2.18.", "2.19.", "2.20.", "2.21.", "2.22."))]
)
def test_cudnn9_releases_get_the_archive_of_the_cudnn_they_were_compiled_against(tf):
    """TF 2.18-2.21 (compiled against cuDNN 9.3) keep the 9.3 archive, whose recorded CUDA range covers
    their CUDA 12.5 build, though a newer 9.x is recorded; 2.22.0rc0 (compiled against 9.10) gets 9.10."""
    plan = resolution(tf, "system")
    _, cudnn = vendor.artifacts(plan)
    compiled = next(r.wheels["linux_x86_64"] for r in tables.releases() if str(r.version) == tf)
    assert cudnn.version.split(".")[:2] == compiled.cudnn_compiled.split(".")[:2], (tf, cudnn.filename)


def test_tf213_system_dry_run_lists_nvidias_files_with_the_datas_checksums(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TFGPU_CACHE_DIR", str(tmp_path / "cache"))
    code = cli.main(
        [
            "create",
            "--tf",
            "2.13",
            "--mode",
            "system",
            "--python",
            "3.11",
            "--driver",
            "999.99",
            "--prefix",
            str(tmp_path / "env"),
            "--dry-run",
            "--json",
        ]
    )
    document = json.loads(capsys.readouterr().out)
    assert code == 0, document
    downloads = [step["content"] for step in document["steps"] if step["kind"] == "download"]
    runfile, cudnn = vendor.artifacts(resolution("2.13", "system", "3.11"))
    assert runfile.filename == "cuda_11.8.0_520.61.05_linux.run" and cudnn.version.startswith("8.")
    for item, content in zip((runfile, cudnn), downloads, strict=True):
        assert item.url in content and item.sha256 in content
    assert not (tmp_path / "env").exists() and not (tmp_path / "cache" / "downloads").exists()


@pytest.mark.parametrize("fmt", ["bash", "ansible", "cloud-init", "dockerfile"])
def test_tf213_system_exports_render_with_the_datas_checksums(fmt, tmp_path):
    rendered = export.render(resolution("2.13", "system"), fmt)
    text = "\n".join(f.content for f in rendered.files)
    if fmt != "dockerfile":  # the Dockerfile starts from an nvidia/cuda image instead
        for item in vendor.artifacts(resolution("2.13", "system")):
            assert item.url in text and item.sha256 in text
    if fmt == "bash":
        done = shellcheck(rendered.main.content, tmp_path)
        assert done.returncode == 0 and done.stdout == "", done.stdout


@pytest.mark.parametrize("fmt", ["bash", "ansible", "cloud-init"])
def test_script_command_renders_tf213_system(fmt, tmp_path):
    out = tmp_path / ("playbook" if fmt == "ansible" else "out")
    done = run_tool(
        "script",
        "--tf",
        "2.13",
        "--mode",
        "system",
        "--no-detect",
        "--os",
        "linux",
        "--arch",
        "x86_64",
        "--format",
        fmt,
        "-o",
        str(out),
        "--json",
        env={k: v for k, v in os.environ.items() if k != "TFGPU_DATA_DIR"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "unverified-download" not in done.stdout and json.loads(done.stdout)["written"]


needs_gcc = pytest.mark.skipif(not wheelhouse.have_compiler(), reason="gcc builds the fake NVIDIA libraries")


@needs_gcc
def test_legacy_cudnn_tarball_installs_with_system_mode(tmp_path, uv_cache):
    """cuDNN in NVIDIA's pre-8.3 layout (``cuda/lib64``) lands in the toolkit's lib64."""
    wheels = wheelhouse.wheel(
        tmp_path / "wheels", "tensorflow", "2.13.1", {"tensorflow/__init__.py": b"__version__ = '2.13.1'\n"}
    ).parent
    with serve_fake_nvidia(tmp_path, cuda="11.8.0", cudnn="8.6.0.163", legacy_cudnn=True) as fake:
        assert fake.cudnn.name == "cudnn-11.8-linux-x64-v8.6.0.163.tgz"
        env = {
            **{k: v for k, v in os.environ.items() if k != "TFGPU_DATA_DIR"},
            **fake.env(),
            "TFGPU_CACHE_DIR": str(tmp_path / "cache"),
            "TFGPU_LOG_DIR": str(tmp_path / "logs"),
            "UV_CACHE_DIR": str(uv_cache),
        }
        prefix = tmp_path / "env"
        done = run_tool(
            "create",
            "--tf",
            "2.13",
            "--mode",
            "system",
            "--python",
            "3.11",
            "--driver",
            "999.99",
            "--prefix",
            str(prefix),
            "--find-links",
            str(wheels),
            "--offline",
            "--no-verify",
            "--json",
            env=env,
        )
    assert done.returncode == 0, done.stdout + done.stderr
    lib64 = prefix / "cuda" / "lib64"
    assert (lib64 / "libcudnn.so.8").exists() and (lib64 / "libcudnn.so.8.6.0").is_file()
    assert (prefix / "cuda" / "include" / "cudnn_version.h").is_file()


@needs_gcc
def test_bash_export_installs_cuda10_with_the_legacy_cudnn_tarball(tmp_path, monkeypatch):
    """TF 2.3: CUDA 10.1 and cuDNN 7.6 (a legacy tarball). The venv step needs Python 3.8, which this
    machine lacks, so the script stops there, after toolkit and cuDNN are in place."""
    with serve_fake_nvidia(tmp_path, cuda="10.1.243", cudnn="7.6.5.32", legacy_cudnn=True) as fake:
        monkeypatch.setenv("TFGPU_DATA_DIR", str(fake.overlay_dir))
        clear_tables()
        script = tmp_path / "install.sh"
        script.write_text(render("2.3", "system", "bash").main.content)
        env = {k: v for k, v in os.environ.items() if k not in ("TFGPU_DATA_DIR", "LD_LIBRARY_PATH", "VIRTUAL_ENV")}
        env.update(
            TFGPU_PREFIX=str(tmp_path / "env"),
            HOME=str(tmp_path / "home"),
            TFGPU_SYSTEM_WIDE="0",
            TFGPU_CUDA_PREFIX=str(tmp_path / "cuda"),
            TFGPU_DOWNLOADS=str(tmp_path / "dl"),
            TFGPU_ALLOW_HTTP="1",
            TFGPU_FIND_LINKS=str(tmp_path),
            TFGPU_OFFLINE="1",
            TFGPU_PYTHON="/nonexistent/python",
            PATH="/usr/bin:/bin",
        )
        done = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, timeout=600)
    assert "Python 3.8 is needed" in done.stderr, done.stdout + done.stderr
    assert f"downloaded {fake.cudnn.name} (checksum verified)" in done.stdout
    cudnn_home = tmp_path / "cuda" / "cudnn-7.6.5.32-cuda10"
    assert (cudnn_home / "include" / "cudnn.h").is_file() and os.readlink(cudnn_home / "lib") == "lib64"
    activation = tmp_path / "cuda" / "tfgpu-cuda-10.1.sh"
    load = "import ctypes; ctypes.CDLL('libcudart.so.10.1'); ctypes.CDLL('libcudnn.so.7')"
    loads = subprocess.run(
        ["bash", "-c", f'. "{activation}"; "{sys.executable}" -c "{load}"'], capture_output=True, text=True
    )
    assert loads.returncode == 0, loads.stderr
    assert (tmp_path / "cuda" / "cuda-10.1" / "version.json").is_file() and not (tmp_path / "env").exists()
