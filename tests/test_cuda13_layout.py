"""CUDA 13's wheel layout, everywhere the CUDA 12 layout is handled: the activation's layout reader,
the load hook, the activate scripts, doctor and the sonames table.

The env is built from the recorded file lists of NVIDIA's real CUDA 13 wheels
(tests/fixtures/cuda13/wheel-layout.json): every library a real ELF object with the real soname
(gcc-built), at the real path (one merged ``nvidia/cu13/lib``; cuDNN, NCCL and NVSHMEM in their own
``nvidia/<component>/lib``), ``ptxas`` in ``nvidia/cu13/bin``, libdevice in ``nvidia/cu13/nvvm``.
TensorFlow itself is a stand-in package: no TensorFlow is built against CUDA 13 yet, and this is
what the first one's env will look like.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import wheelhouse
from conftest import shells
from envtree import compile_library, cuda_source

from tfgpu.envs import activation

pytestmark = pytest.mark.skipif(not wheelhouse.have_compiler(), reason="gcc builds the test libraries")
LAYOUT = json.loads((Path(__file__).parent / "fixtures" / "cuda13" / "wheel-layout.json").read_text())
PY = f"{sys.version_info.major}.{sys.version_info.minor}"
MAPS = (
    "import json, os\n"
    "paths = sorted({l.split()[-1] for l in open('/proc/self/maps') if '/nvidia/' in l})\n"
    "print(json.dumps(paths))\n"
)


def cuda13_env(root: Path, *, with_tf: bool = True) -> Path:
    """A venv whose site-packages holds the CUDA 13 wheels' files, as pip lays them out."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    site = root / "lib" / f"python{PY}" / "site-packages"
    for wheel in LAYOUT["wheels"].values():
        for member in wheel["members"]:
            path = site / member
            if member.endswith("/bin/ptxas"):
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.5, V13.5.37'\n")
                path.chmod(0o755)
            elif member.endswith(".bc"):
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(b"BC\xc0\xde")
            else:
                name = path.name
                compile_library(path, name, cuda_source(name, 13050, 92801))
    if with_tf:
        (site / "tensorflow").mkdir()
        (site / "tensorflow" / "__init__.py").write_text("__version__ = '2.99.0'\n")
    return root


@pytest.fixture(scope="module")
def env13(tmp_path_factory) -> Path:
    root = cuda13_env(tmp_path_factory.mktemp("cuda13") / "env")
    site = f"lib/python{PY}/site-packages"
    activation.write_venv_activation(root, activation.read_layout(root, site))
    return root


def test_the_layout_reader_finds_the_merged_tree(tmp_path):
    root = cuda13_env(tmp_path / "env", with_tf=False)
    site = f"lib/python{PY}/site-packages"
    layout = activation.read_layout(root, site)
    names = [Path(p).name for p in layout.preload]
    assert names == [
        "libnvJitLink.so.13",
        "libcudart.so.13",
        "libcublasLt.so.13",
        "libcublas.so.13",
        "libcusparse.so.12",
        "libcusolver.so.12",
        "libcufft.so.12",
        "libcurand.so.10",
        "libnvrtc.so.13",
        "libcudnn.so.9",
        "libnccl.so.2",
        "libcupti.so.13",
    ]
    assert [p for p in layout.preload if Path(p).name == "libcudnn.so.9"] == ["nvidia/cudnn/lib/libcudnn.so.9"]
    assert layout.preload[1] == "nvidia/cu13/lib/libcudart.so.13"
    assert layout.lib_dirs[:2] == (f"{site}/nvidia/cu13/lib", f"{site}/nvidia/cudnn/lib")
    assert f"{site}/nvidia/nvshmem/lib" in layout.lib_dirs and len(set(layout.lib_dirs)) == len(layout.lib_dirs)
    assert layout.cuda_data_dir == f"{site}/nvidia/cu13"
    assert layout.ptxas == f"{site}/nvidia/cu13/bin/ptxas"


def test_an_unactivated_start_maps_every_library_from_the_env(env13):
    done = subprocess.run(
        [str(env13 / "bin" / "python"), "-c", "import tensorflow, os\n" + MAPS + "print(os.environ['XLA_FLAGS'])"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    mapped, xla = done.stdout.splitlines()
    names = {Path(p).name for p in json.loads(mapped)}
    assert {"libcudart.so.13", "libcublas.so.13", "libcusolver.so.12", "libcudnn.so.9", "libnccl.so.2"} <= names
    assert all(p.startswith(str(env13)) for p in json.loads(mapped))
    assert xla.endswith("site-packages/nvidia/cu13")


@pytest.mark.parametrize("shell", shells())
def test_activation_puts_the_merged_tree_first_and_restores_it(env13, shell):
    script = {
        "fish": 'source "$argv[1]/bin/activate.fish"; echo $LD_LIBRARY_PATH; echo $XLA_FLAGS; deactivate; '
        'echo "[$LD_LIBRARY_PATH]"',
    }.get(
        shell,
        '. "$1/bin/activate"; echo "$LD_LIBRARY_PATH"; echo "$XLA_FLAGS"; deactivate; echo "[${LD_LIBRARY_PATH-}]"',
    )
    argv = [shell, "-c", script, "x", str(env13)] if shell != "fish" else [shell, "-c", script, str(env13)]
    done = subprocess.run(argv, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "HOME": str(env13)})
    assert done.returncode == 0, done.stderr
    libs, xla, after = done.stdout.splitlines()[:3]
    assert libs.split(":")[0].replace(" ", ":").split(":")[0].endswith("site-packages/nvidia/cu13/lib")
    assert xla.endswith("site-packages/nvidia/cu13") and after == "[]"


def test_doctor_reads_a_cuda13_env(tmp_path):
    from test_doctor import gpu_host

    from tfgpu.doctor import run_doctor

    root = cuda13_env(tmp_path / "env", with_tf=False)
    site = root / "lib" / f"python{PY}" / "site-packages"
    tf = site / "tensorflow"
    (tf / "python" / "platform").mkdir(parents=True)
    (tf / "python" / "platform" / "build_info.py").write_text(
        "build_info = {'cuda_compute_capabilities': ['sm_90', 'compute_100'], 'cuda_version': '13.0', "
        "'cudnn_version': '9', 'is_cuda_build': True}\n"
    )
    (site / "tensorflow-2.99.0.dist-info").mkdir()
    (site / "tensorflow-2.99.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: tensorflow\nVersion: 2.99.0\n"
    )
    compile_library(tf / "libtensorflow_framework.so.2", "libtensorflow_framework.so.2")
    activation.write_venv_activation(root, activation.read_layout(root, f"lib/python{PY}/site-packages"))
    report = run_doctor(root=root, host=gpu_host(), environ={"PATH": "/usr/bin:/bin"})
    found = {f.id: f for f in report.findings}
    for name in ("cudart", "cublas", "cusolver", "cufft", "cusparse", "curand", "cudnn"):
        assert found[f"libs.{name}"].status == "ok", found[f"libs.{name}"]
    assert any("libcusolver.so.12" in line for line in found["libs.cusolver"].evidence)
    ptxas = Path(found["xla.ptxas"].evidence[0].split(":")[0])
    assert found["xla.ptxas"].status == "ok" and str(ptxas.resolve()).endswith("nvidia/cu13/bin/ptxas")
    assert found["xla.libdevice"].status == "ok" and "nvidia/cu13/nvvm" in found["xla.libdevice"].evidence[0]


def test_the_sonames_table_has_cuda_13():
    from tfgpu.resolver import tables

    rows = [row for row in tables.load_toml("sonames.toml")["cuda"] if row["versions"] == ">=13,<14"]
    assert rows and {lib["soname"] for lib in rows[0]["libraries"]} >= {"libcudart.so.13", "libcusolver.so.12"}
    members = {Path(m).name for wheel in LAYOUT["wheels"].values() for m in wheel["members"]}
    assert {lib["soname"] for lib in rows[0]["libraries"] if "{" not in lib["soname"]} <= members


ORACLE_NAMES = {
    "cudart": "libcudart",
    "nvJitLink": "libnvJitLink",
    "nvrtc": "libnvrtc",
    "cublas": "libcublas",
    "cublasLt": "libcublasLt",
    "cufft": "libcufft",
    "curand": "libcurand",
    "cusolver": "libcusolver",
    "cusparse": "libcusparse",
    "cupti": "libcupti",
}


def test_nvidias_own_finder_picks_the_same_files(env13):
    """NVIDIA's cuda-pathfinder (its public ``load_nvidia_dynamic_lib``) knows where CUDA wheels put
    their libraries; run in the env's own Python, it must find each library exactly where the load
    hook preloads it from. (The hook does not use cuda-pathfinder at run time: it must work in an
    env without it, and it preloads the paths fixed when the env was set up, env first, where
    cuda-pathfinder searches again at each start in its own order.)"""
    pathfinder = pytest.importorskip("cuda.pathfinder")
    search_root = Path(pathfinder.__file__).parents[2]
    program = (
        "import json, cuda.pathfinder as p\n"
        f"names = {sorted(ORACLE_NAMES)!r}\n"
        "print(json.dumps({n: p.load_nvidia_dynamic_lib(n).abs_path for n in names}))\n"
    )
    done = subprocess.run(
        [str(env13 / "bin" / "python"), "-c", program],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(search_root), "TFGPU_NO_PRELOAD": "1"},
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    layout = json.loads((env13 / "etc" / "tfgpu" / "layout.json").read_text())
    site = env13 / layout["site_packages"]
    preloaded = {Path(p).name.split(".so")[0]: str(site / p) for p in layout["preload"]}
    for name, base in ORACLE_NAMES.items():
        assert os.path.realpath(found[name]) == os.path.realpath(preloaded[base]), name


def test_artefacts_written_before_the_env_exists_name_the_merged_tree(env13):
    """Dockerfile, Apptainer and modulefile paths for a CUDA 13 build are where the recorded CUDA 13
    wheels put their files (and the CUDA 12 paths where the CUDA 12 wheels put theirs)."""
    from tfgpu.envs.activation import read_layout, wheel_dirs

    members = {m for wheel in LAYOUT["wheels"].values() for m in wheel["members"]}
    lib_dirs, data_dir, ptxas = wheel_dirs("13.0", "SITE")
    for directory in lib_dirs:
        assert any(m.startswith(directory.removeprefix("SITE/") + "/") for m in members), directory
    assert any(m.startswith(data_dir.removeprefix("SITE/") + "/nvvm/libdevice/") for m in members)
    assert ptxas.removeprefix("SITE/") in members
    # The same answer the layout reader gives once the env exists.
    site = f"lib/python{PY}/site-packages"
    layout = read_layout(env13, site)
    assert layout.cuda_data_dir == data_dir.replace("SITE", site) and layout.ptxas == ptxas.replace("SITE", site)
    assert set(lib_dirs[:1]) <= {d.replace(site, "SITE") for d in layout.lib_dirs}
    assert wheel_dirs("12.5", "SITE")[1] == "SITE/nvidia/cuda_nvcc"
