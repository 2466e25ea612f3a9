"""Closed envs: every CUDA library a process of the env loads comes from the env, including the
names cuDNN and cuBLASLt ``dlopen`` without a version (``libnvrtc.so``), and doctor says when one
comes from outside.

Real components: uv builds the envs, ``tfgpu-install repair`` and ``doctor`` run for real, glibc's
loader resolves every name, and the "system toolkit" is a real ld.so.cache made by ``ldconfig``
and bind-mounted over /etc/ld.so.cache in a user + mount namespace (``unshare``), which is how the
H200's /usr/local/cuda-13.0 answered ``dlopen("libnvrtc.so")`` for TF 2.13's cuDNN 8.6.

Stand-ins, at the package-index boundary only: the wheels are tests/repairhelpers.py's, with gcc-built
libraries; ``libcudnn_graph.so.9`` here is a tiny library that, like cuDNN 9's (sonames.toml,
``[[dlopened]]``), has RUNPATH ``$ORIGIN:$ORIGIN/../../cublas/lib:$ORIGIN/../../nvrtc/lib`` and
calls ``dlopen("libnvrtc.so")`` itself, so the loader searches *its* RUNPATH exactly as it does for
cuDNN's call. The system libraries are gcc-built too (``libnvrtc.so.13``, ``libcurand.so.10``).
The test marked ``network`` uses NVIDIA's real cuDNN 8.6 / cuBLAS 11 / NVRTC 11.8 wheels instead:
loading their libraries is enough to make them dlopen ``libnvrtc.so``, no GPU needed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import builtenvs
import pytest
import repairhelpers as rh
import wheelhouse
from conftest import run_tool

CALLER_RUNPATH = "$ORIGIN:$ORIGIN/../../cublas/lib:$ORIGIN/../../nvrtc/lib"
SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stddef.h>
/* What cuDNN does at run time: dlopen a name without a version, from this library. */
const char *tfgpu_test_nvrtc_origin(void) {
    struct link_map *map = NULL;
    void *handle = dlopen("libnvrtc.so", RTLD_NOW | RTLD_GLOBAL);
    if (!handle || dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || !map) return NULL;
    return map->l_name;
}
"""
ORIGIN = (
    "import ctypes, os, sys\n"
    "f = ctypes.CDLL(sys.argv[1]).tfgpu_test_nvrtc_origin\n"
    "f.restype = ctypes.c_char_p\n"
    "r = f()\n"
    "print(os.path.realpath(r.decode()) if r else 'NOT FOUND')\n"
)


def gcc(path: Path, soname: str, source: str = "", runpath: str = "") -> Path:
    options = ["-shared", "-fPIC", f"-Wl,-soname,{soname}"]
    if runpath:
        options.append(f"-Wl,-rpath,{runpath},--enable-new-dtags")
    symbol = "tfgpu_test_" + "".join(c if c.isalnum() else "_" for c in soname)
    return wheelhouse.gcc(path, options, f"int {symbol}(void) {{ return 1; }}\n{source}", ("-ldl",))


def _replace(directory: Path, dist: str, version: str, files: dict[str, bytes]) -> None:
    for old in directory.glob(f"{dist.replace('-', '_')}-*.whl"):
        old.unlink()
    wheelhouse.wheel(directory, dist, version, files)


_CLOSED_WHEELS: dict[Path, Path] = {}
"""``closed_wheels`` by the ``repair_wheels`` it was made from: one directory for the test process."""


@pytest.fixture(scope="module")
def closed_wheels(repair_wheels, tmp_path_factory) -> Path:
    """repair_wheels with a cuDNN whose libcudnn_graph.so.9 dlopens libnvrtc.so, a real NVRTC and cuRAND.

    Made once per test process and shared by every module that takes this fixture (also
    tests/hostile/test_hostile_closed_env.py): each only reads it, as the wheel directory of an
    install, so the user env built from it is one template for all of them (tests/builtenvs.py),
    not a ``uv venv`` and ``uv pip install`` again for each module."""
    if repair_wheels not in _CLOSED_WHEELS:
        _CLOSED_WHEELS[repair_wheels] = _closed_wheels(repair_wheels, tmp_path_factory.mktemp("closed-wheels"))
    return _CLOSED_WHEELS[repair_wheels]


def _closed_wheels(repair_wheels: Path, directory: Path) -> Path:
    for wheel in repair_wheels.glob("*.whl"):
        shutil.copy(wheel, directory)
    libs = directory / ".libs"
    cudnn = {
        "nvidia/cudnn/lib/libcudnn.so.9": gcc(libs / "libcudnn.so.9", "libcudnn.so.9").read_bytes(),
        "nvidia/cudnn/lib/libcudnn_graph.so.9": gcc(
            libs / "libcudnn_graph.so.9", "libcudnn_graph.so.9", SHIM, CALLER_RUNPATH
        ).read_bytes(),
    }
    _replace(directory, "nvidia-cudnn-cu12", "9.28.0.43", cudnn)
    nvrtc = gcc(libs / "libnvrtc.so.12", "libnvrtc.so.12").read_bytes()
    _replace(directory, "nvidia-cuda-nvrtc-cu12", "12.5.83", {"nvidia/cuda_nvrtc/lib/libnvrtc.so.12": nvrtc})
    curand = gcc(libs / "libcurand.so.10", "libcurand.so.10").read_bytes()
    _replace(directory, "nvidia-curand-cu12", "10.3.7.78", {"nvidia/curand/lib/libcurand.so.10": curand})
    return directory


@pytest.fixture(scope="module")
def system_cache(tmp_path_factory) -> Path:
    """A real ld.so.cache that knows a CUDA 13 toolkit's libnvrtc.so and a libcurand.so.10 (ldconfig)."""
    if shutil.which("unshare") is None or shutil.which("ldconfig") is None:
        pytest.skip("unshare and ldconfig are needed to stage a system toolkit")
    top = tmp_path_factory.mktemp("system")
    lib64 = top / "cuda-13.0" / "lib64"
    gcc(lib64 / "libnvrtc.so.13", "libnvrtc.so.13")
    (lib64 / "libnvrtc.so").symlink_to("libnvrtc.so.13")
    gcc(lib64 / "libcurand.so.10", "libcurand.so.10")
    (top / "ld.so.conf").write_text(f"{lib64}\n")
    subprocess.run(["ldconfig", "-C", str(top / "ld.so.cache"), "-f", str(top / "ld.so.conf")], check=True)
    probe = in_system(top, ["true"], clean_environ())
    if probe.returncode != 0:
        pytest.skip(f"no user + mount namespace here: {probe.stderr.strip()[:200]}")
    return top


def in_system(system: Path, argv: list[str], env: dict) -> subprocess.CompletedProcess:
    """``argv`` in a process whose loader reads the staged ld.so.cache (a namespace of its own)."""
    script = 'mount --bind "$0" /etc/ld.so.cache && exec "$@"'
    wrapper = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script, str(system / "ld.so.cache")]
    return subprocess.run([*wrapper, *argv], capture_output=True, text=True, env=env, timeout=600)


def clean_environ(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "VIRTUAL_ENV", "XLA_FLAGS")}
    return {**env, **extra}


def nvrtc_origin(prefix: Path, system: Path | None, env: dict) -> str:
    caller = next(prefix.glob("lib/python3*/site-packages/nvidia/cudnn/lib/libcudnn_graph.so.9"))
    argv = [str(prefix / "bin" / "python"), "-c", ORIGIN, str(caller)]
    done = in_system(system, argv, env) if system else subprocess.run(argv, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def doctor(prefix: Path, system: Path | None, env: dict) -> dict[str, dict]:
    """doctor's findings, in a namespace whose loader reads the staged ld.so.cache; without one, in
    this process (the loader's view comes from doctor's probe, a process of its own that gets
    ``env`` as a child of the tool always does)."""
    argv = [sys.executable, "-m", "tfgpu", "doctor", "--prefix", str(prefix), "--json"]
    done = in_system(system, argv, env) if system else run_tool(*argv[3:], env=env)
    assert done.stdout, done.stderr
    return {f["id"]: f for f in json.loads(done.stdout)["findings"]}


def user_env(tmp_path: Path, wheels: Path) -> Path:
    """A user's `pip install tensorflow[and-cuda]`-style env: TF and its cuDNN, NVRTC, cuRAND, nothing else."""
    return builtenvs.user_venv(
        tmp_path / "env",
        wheels,
        "tensorflow==2.21.0",
        "nvidia-cudnn-cu12==9.28.0.43",
        "nvidia-cuda-nvrtc-cu12==12.5.83",
        "nvidia-curand-cu12==10.3.7.78",
    )


def test_a_copied_user_env_is_the_env_uv_builds_there(tmp_path, closed_wheels):
    """tests/builtenvs.py hands out copies of one built user env: each is what uv builds at that
    path, every file, link and mode the same (uv's own cache notes aside, as rh.snapshot has them)."""
    requirements = ("tensorflow==2.21.0", "nvidia-curand-cu12==10.3.7.78")
    fresh = rh.snapshot(rh.user_venv(tmp_path / "fresh" / "env", closed_wheels, *requirements))
    shutil.rmtree(tmp_path / "fresh")
    builtenvs.user_venv(tmp_path / "elsewhere" / "env", closed_wheels, *requirements)  # the template is built
    copied = builtenvs.user_venv(tmp_path / "fresh" / "env", closed_wheels, *requirements)
    assert rh.snapshot(copied) == fresh
    assert f"VIRTUAL_ENV='{copied}'" in (copied / "bin" / "activate").read_text()


def repair(prefix: Path, wheels: Path, tool_env: dict, *extra: str) -> subprocess.CompletedProcess:
    done = run_tool(
        "repair",
        "--prefix",
        str(prefix),
        "--find-links",
        str(wheels),
        "--no-detect",
        "--yes",
        "--no-verify",
        "--offline",
        *extra,
        env=tool_env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_the_system_toolkit_answers_until_repair_links_the_name_into_the_env(
    tmp_path, closed_wheels, system_cache, tool_env
):
    prefix = user_env(tmp_path, closed_wheels)
    site = next(prefix.glob("lib/python3*/site-packages"))
    system_nvrtc = str((system_cache / "cuda-13.0" / "lib64" / "libnvrtc.so.13").resolve())

    # Before: the loader (cuDNN's own call) maps the system's CUDA 13 NVRTC, and doctor says so.
    assert nvrtc_origin(prefix, system_cache, clean_environ()) == system_nvrtc
    before = doctor(prefix, system_cache, clean_environ())
    assert before["libs.closed"]["status"] == "fail", before["libs.closed"]
    evidence = "\n".join(before["libs.closed"]["evidence"])
    assert system_nvrtc in evidence and "dlopen('libnvrtc.so') by libcudnn_graph.so.9" in evidence
    assert "ld.so.cache" in evidence and str(site / "nvidia" / "cuda_nvrtc" / "lib" / "libnvrtc.so.12") in evidence
    assert "tfgpu-install repair --prefix" in before["libs.closed"]["fix"]
    # The system's cuRAND is not "ok" while the env has its own.
    assert before["libs.curand"]["status"] == "fail", before["libs.curand"]
    assert "although the env has its own" in before["libs.curand"]["title"]
    assert before["libs.shadowing"]["status"] == "warn"

    repair(prefix, closed_wheels, tool_env)
    link = site / "nvidia" / "cudnn" / "lib" / "libnvrtc.so"
    assert os.readlink(link) == "../../cuda_nvrtc/lib/libnvrtc.so.12"

    # After: the same call, the same system cache, lands in the env.
    own = str((site / "nvidia" / "cuda_nvrtc" / "lib" / "libnvrtc.so.12").resolve())
    assert nvrtc_origin(prefix, system_cache, clean_environ()) == own
    after = doctor(prefix, system_cache, clean_environ())
    assert after["libs.closed"]["status"] == "ok", after["libs.closed"]
    assert any(own in line for line in after["libs.closed"]["evidence"])
    assert after["libs.curand"]["status"] == "ok" and "load hook" in after["libs.curand"]["evidence"][0]

    # --undo takes the link back with the rest of the repair.
    undone = run_tool("repair", "--undo", "--prefix", str(prefix), "--offline", "--json", env=tool_env)
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert not link.is_symlink() and not link.exists()


def test_without_a_system_toolkit_the_name_is_found_nowhere_until_repaired(tmp_path, closed_wheels, tool_env):
    if "libnvrtc.so " in subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout:
        pytest.skip("this machine's ld.so.cache has a libnvrtc.so")
    prefix = user_env(tmp_path, closed_wheels)
    assert nvrtc_origin(prefix, None, clean_environ()) == "NOT FOUND"
    before = doctor(prefix, None, clean_environ())
    assert before["libs.dlopen"]["status"] == "warn"
    assert "libnvrtc.so" in before["libs.dlopen"]["title"]
    repair(prefix, closed_wheels, tool_env)
    site = next(prefix.glob("lib/python3*/site-packages"))
    assert nvrtc_origin(prefix, None, clean_environ()) == str(site / "nvidia" / "cuda_nvrtc" / "lib" / "libnvrtc.so.12")
    after = doctor(prefix, None, clean_environ())
    assert "libs.dlopen" not in after and after["libs.closed"]["status"] == "ok"


def test_ld_library_path_wins_over_the_env_and_doctor_says_to_remove_it(
    tmp_path, closed_wheels, system_cache, tool_env
):
    """The loader searches LD_LIBRARY_PATH before the caller's RUNPATH: the probe agrees with the
    real call, and the fix names the directory."""
    prefix = user_env(tmp_path, closed_wheels)
    repair(prefix, closed_wheels, tool_env)
    lib64 = system_cache / "cuda-13.0" / "lib64"
    env = clean_environ(LD_LIBRARY_PATH=str(lib64))
    assert nvrtc_origin(prefix, None, env) == str((lib64 / "libnvrtc.so.13").resolve())
    found = doctor(prefix, None, env)["libs.closed"]
    assert found["status"] == "fail"
    assert any("found via LD_LIBRARY_PATH" in line and "libnvrtc.so.13" in line for line in found["evidence"])
    assert f"Remove {lib64} from LD_LIBRARY_PATH" in found["fix"]
    # verify's own list, read in the env's Python after cuDNN's call: the same file, outside the env.
    assert verify_outside(prefix, env) == [str((lib64 / "libnvrtc.so.13").resolve())]
    assert verify_outside(prefix, clean_environ()) == []


def verify_outside(prefix: Path, env: dict) -> list[str]:
    """check_env.py's ``outside_env`` in the env's own Python, once the cuDNN stand-in has called dlopen."""
    import tfgpu.verify

    caller = next(prefix.glob("lib/python3*/site-packages/nvidia/cudnn/lib/libcudnn_graph.so.9"))
    code = (
        "import ctypes, json, sys\n"
        f"sys.path.insert(0, {str(Path(tfgpu.verify.__file__).parent)!r})\n"
        "import check_env\n"
        f"ctypes.CDLL({str(caller)!r}).tfgpu_test_nvrtc_origin()\n"
        "print(json.dumps(check_env.outside_env(check_env.loaded_cuda_libraries())))\n"
    )
    done = subprocess.run([str(prefix / "bin" / "python"), "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_links_go_into_the_callers_runpath_and_leave_a_real_file_alone(tmp_path):
    from tfgpu.envs import activation
    from tfgpu.resolver import tables

    site = "lib/python3.11/site-packages"
    root = tmp_path / "env"
    for relative in (
        "nvidia/cudnn/lib/libcudnn_cnn_infer.so.8",
        "nvidia/cudnn/lib/libcudnn_adv_infer.so.8",
        "nvidia/cublas/lib/libcublasLt.so.11",
        "nvidia/cuda_nvrtc/lib/libnvrtc.so.11.2",
    ):
        (root / site / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / site / relative).write_bytes(b"\x7fELF")
    layout = activation.read_layout(root, site, tables.dlopened_names())
    assert dict(layout.links) == {
        f"{site}/nvidia/cudnn/lib/libnvrtc.so": "../../cuda_nvrtc/lib/libnvrtc.so.11.2",
        f"{site}/nvidia/cublas/lib/libnvrtc.so": "../../cuda_nvrtc/lib/libnvrtc.so.11.2",
    }
    written = activation.write_venv_activation(root, layout)
    assert (root / site / "nvidia/cudnn/lib/libnvrtc.so").resolve() == (
        root / site / "nvidia/cuda_nvrtc/lib/libnvrtc.so.11.2"
    ).resolve()
    assert root / site / "nvidia/cudnn/lib/libnvrtc.so" in written
    # cuBLASLt 12 asks for libnvrtc.so.12 by that name: linked only when the env has that very file.
    cu12 = tmp_path / "cu12"
    for relative in ("nvidia/cublas/lib/libcublasLt.so.12", "nvidia/cuda_nvrtc/lib/libnvrtc.so.11.2"):
        (cu12 / site / relative).parent.mkdir(parents=True, exist_ok=True)
        (cu12 / site / relative).write_bytes(b"\x7fELF")
    assert activation.read_layout(cu12, site, tables.dlopened_names()).links == ()
    (cu12 / site / "nvidia/cuda_nvrtc/lib/libnvrtc.so.12").write_bytes(b"\x7fELF")
    assert activation.read_layout(cu12, site, tables.dlopened_names()).links == (
        (f"{site}/nvidia/cublas/lib/libnvrtc.so.12", "../../cuda_nvrtc/lib/libnvrtc.so.12"),
    )
    # conda: one lib/, the caller's $ORIGIN; a real libnvrtc.so (a -dev package's) is kept.
    conda = tmp_path / "conda"
    (conda / "lib").mkdir(parents=True)
    for name in ("libcudnn_cnn_infer.so.8", "libnvrtc.so.11.2"):
        (conda / "lib" / name).write_bytes(b"\x7fELF")
    assert activation.read_conda_layout(conda, site, tables.dlopened_names()).links == (
        ("lib/libnvrtc.so", "libnvrtc.so.11.2"),
    )
    (conda / "lib" / "libnvrtc.so").write_bytes(b"\x7fELF")
    assert activation.read_conda_layout(conda, site, tables.dlopened_names()).links == ()


def test_the_script_reads_the_names_and_runpath_from_the_libraries(tmp_path):
    """scripts/regen_dlopen_names.py on gcc-built stand-ins of two wheels' trees."""
    cudnn = tmp_path / "nvidia_cudnn_cu11-8.6.0.163"
    nvrtc = tmp_path / "nvidia_cuda_nvrtc_cu11-11.8.89"
    gcc(
        cudnn / "nvidia/cudnn/lib/libcudnn_cnn_infer.so.8",
        "libcudnn_cnn_infer.so.8",
        'const char *names[] = {"libnvrtc.so", "libcuda.so", "libcudnn_ops.so"};\n',
        "$ORIGIN:$ORIGIN/../../cublas/lib",
    )
    gcc(cudnn / "nvidia/cudnn/lib/libcudnn_ops.so.8", "libcudnn_ops.so.8")
    gcc(nvrtc / "nvidia/cuda_nvrtc/lib/libnvrtc.so.11.2", "libnvrtc.so.11.2")
    script = Path(__file__).resolve().parents[1] / "scripts" / "regen_dlopen_names.py"
    done = subprocess.run([sys.executable, str(script), str(cudnn), str(nvrtc)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    import tomllib

    rows = tomllib.loads(done.stdout)["dlopened"]
    assert [(r["name"], r["provides"], r["caller"], r["runpath"], r["wheel"]) for r in rows] == [
        (
            "libnvrtc.so",
            "libnvrtc",
            "libcudnn_cnn_infer.so.8",
            ["$ORIGIN", "$ORIGIN/../../cublas/lib"],
            "nvidia-cudnn-cu11==8.6.0.163",
        ),
    ]
    assert "# left alone: libcuda.so" in done.stdout  # the driver's
    assert "libcudnn_ops.so (next to the caller in its own wheel)" in done.stdout


PROBE = (
    "import json, sys\n"
    "from pathlib import Path\n"
    "from tfgpu.doctor.libraries import load_in_child, dlopen_callers\n"
    "root = Path(sys.argv[1])\n"
    "probe = load_in_child([], dlopen_callers(root, next(root.glob('lib/python3*/site-packages'))))\n"
    "print(json.dumps(sorted((Path(u.caller).name, u.path) for u in probe.dlopened)))\n"
)
LOAD = (
    "import ctypes, json, sys\n"
    "ctypes.CDLL(sys.argv[1])\n"
    "print(json.dumps(sorted({line.split()[-1] for line in open('/proc/self/maps') if 'libnvrtc' in line})))\n"
)


@pytest.mark.network
@pytest.mark.slow
def test_the_real_cuda_11_wheels_get_their_nvrtc_from_the_env(tmp_path, system_cache, shared_cache):
    """NVIDIA's own cuDNN 8.6, cuBLAS 11 and NVRTC 11.8 wheels (what TF 2.13 gets), 1.2 GB from PyPI
    into the tests' uv cache. No stand-in and no GPU needed: loading the real ``libcublasLt.so.11``
    (TF 2.13 and the load hook do, at start-up) or ``libcudnn_cnn_infer.so.8`` already calls
    ``dlopen("libnvrtc.so")``, and with the staged CUDA 13 toolkit in ld.so.cache the process maps
    its ``libnvrtc.so.13``, as on the H200. Once the env's activation is written (what create and
    repair write), the same loads map the env's ``libnvrtc.so.11.2``; doctor's probe agrees both times."""
    from tfgpu.envs import activation
    from tfgpu.resolver import tables

    prefix = tmp_path / "env"
    run = clean_environ(UV_CACHE_DIR=str(shared_cache / "uv"))
    subprocess.run([rh.uv(), "venv", "--quiet", "--python", sys.executable, str(prefix)], check=True, env=run)
    wheels = ("nvidia-cudnn-cu11==8.6.0.163", "nvidia-cublas-cu11==11.11.3.6", "nvidia-cuda-nvrtc-cu11==11.8.89")
    install = [rh.uv(), "pip", "install", "--quiet", "--python", str(prefix / "bin" / "python"), *wheels]
    subprocess.run(install, check=True, env=run, timeout=1800)
    site = next(prefix.glob("lib/python3*/site-packages"))
    real = [
        site / "nvidia" / "cublas" / "lib" / "libcublasLt.so.11",
        site / "nvidia" / "cudnn" / "lib" / "libcudnn_cnn_infer.so.8",
    ]
    callers = ["libcublasLt.so.11", "libcudnn_adv_infer.so.8", "libcudnn_cnn_infer.so.8"]

    def maps_after_loading(library: Path) -> list[str]:
        done = in_system(system_cache, [str(prefix / "bin" / "python"), "-c", LOAD, str(library)], clean_environ())
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def probe() -> list:
        done = in_system(system_cache, [sys.executable, "-c", PROBE, str(prefix)], clean_environ())
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    system_nvrtc = str((system_cache / "cuda-13.0" / "lib64" / "libnvrtc.so.13").resolve())
    assert [maps_after_loading(library) for library in real] == [[system_nvrtc], [system_nvrtc]]
    assert probe() == [[caller, system_nvrtc] for caller in callers]

    layout = activation.read_layout(prefix, str(site.relative_to(prefix)), tables.dlopened_names())
    activation.write_venv_activation(prefix, layout)
    own = str((site / "nvidia" / "cuda_nvrtc" / "lib" / "libnvrtc.so.11.2").resolve())
    assert [maps_after_loading(library) for library in real] == [[own], [own]]
    assert probe() == [[caller, own] for caller in callers]


def test_create_builds_a_closed_env(tmp_path, closed_wheels, system_cache, tool_env):
    """``create`` (pip mode) writes the same link: the cuDNN stand-in's dlopen lands in the env even
    with the staged system toolkit in ld.so.cache, and doctor finds nothing from outside."""
    from test_pip_mode import TARGET

    wheels = tmp_path / "wheels"
    shutil.copytree(closed_wheels, wheels, ignore=shutil.ignore_patterns("tensorflow-*", ".libs"))
    pins = {dist: version for dist, version, _ in wheelhouse.CUDA_WHEELS}
    pins.update(
        {"nvidia-cudnn-cu12": "9.28.0.43", "nvidia-cuda-nvrtc-cu12": "12.5.83", "nvidia-curand-cu12": "10.3.7.78"}
    )
    pins[wheelhouse.NVCC[0]] = wheelhouse.NVCC[1]
    files = {
        "tensorflow/__init__.py": b"__version__ = '2.21.0'\n",
        "tensorflow/python/platform/build_info.py": rh.BUILD_INFO.format(cuda=True).encode(),
    }
    requires = [f"{dist}=={version}; extra == 'and-cuda'" for dist, version in pins.items()]
    wheelhouse.wheel(wheels, "tensorflow", "2.21.0", files, requires, extras=["and-cuda"])
    prefix = tmp_path / "env"
    done = run_tool(
        "create", *TARGET, "--prefix", str(prefix), "--find-links", str(wheels), "--offline", "--no-verify",
        env=tool_env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    site = next(prefix.glob("lib/python3*/site-packages"))
    assert os.readlink(site / "nvidia" / "cudnn" / "lib" / "libnvrtc.so") == "../../cuda_nvrtc/lib/libnvrtc.so.12"
    own = str((site / "nvidia" / "cuda_nvrtc" / "lib" / "libnvrtc.so.12").resolve())
    assert nvrtc_origin(prefix, system_cache, clean_environ()) == own
    found = doctor(prefix, system_cache, clean_environ())
    assert found["libs.closed"]["status"] == "ok", found["libs.closed"]
    assert found["libs.curand"]["status"] == "ok"
    layout = json.loads((prefix / "etc" / "tfgpu" / "layout.json").read_text())
    assert [
        f"{site.relative_to(prefix)}/nvidia/cudnn/lib/libnvrtc.so",
        "../../cuda_nvrtc/lib/libnvrtc.so.12",
    ] in layout["links"]


def test_an_exported_scripts_activation_links_the_dlopened_names_too(tmp_path):
    """The pip-mode export carries the activation module in heredocs and runs it on the target with
    activate_env.py: that run gets the same [[dlopened]] rows (dlopened.json) and writes the same
    links into the env as `create` does, so an env built by the exported script is closed too."""
    from tfgpu.export import embed

    root = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    site = str(next(root.glob("lib/python3*/site-packages")).relative_to(root))
    for relative in ("nvidia/cudnn/lib/libcudnn_cnn_infer.so.8", "nvidia/cuda_nvrtc/lib/libnvrtc.so.11.2"):
        (root / site / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / site / relative).write_bytes(b"\x7fELF")
    files = tmp_path / "files"
    files.mkdir()
    for name, text in embed.activation_files():
        (files / name).write_text(text, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(files / "activate_env.py"), str(root), str(files)],
        capture_output=True,
        text=True,
        env={"PATH": os.environ.get("PATH", ""), "PYTHONNOUSERSITE": "1"},
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["links"] == 1
    link = root / site / "nvidia/cudnn/lib/libnvrtc.so"
    assert link.is_symlink() and os.readlink(link) == "../../cuda_nvrtc/lib/libnvrtc.so.11.2"


def test_a_name_already_linked_out_of_the_env_is_a_leak_that_repair_replaces_and_undo_restores(
    tmp_path, closed_wheels, system_cache, tool_env
):
    """The name cuDNN dlopens (``nvidia/cudnn/lib/libnvrtc.so``) is already there, as a link a user
    made to the system toolkit's ``libnvrtc.so``: doctor names the leak, repair replaces the link
    with the env's own relative one through the env-write door, and ``--undo`` puts the user's link
    back, byte for byte."""
    prefix = user_env(tmp_path, closed_wheels)
    site = next(prefix.glob("lib/python3*/site-packages"))
    link = site / "nvidia" / "cudnn" / "lib" / "libnvrtc.so"
    theirs = str(system_cache / "cuda-13.0" / "lib64" / "libnvrtc.so")
    link.symlink_to(theirs)
    system_nvrtc = str((system_cache / "cuda-13.0" / "lib64" / "libnvrtc.so.13").resolve())
    assert nvrtc_origin(prefix, system_cache, clean_environ()) == system_nvrtc

    before = doctor(prefix, system_cache, clean_environ())["libs.closed"]
    assert before["status"] == "fail", before
    assert any(
        line.startswith(system_nvrtc) and "dlopen('libnvrtc.so') by libcudnn_graph.so.9" in line and str(link) in line
        for line in before["evidence"]
    ), before["evidence"]

    planned = json.loads(repair(prefix, closed_wheels, tool_env, "--dry-run", "--json").stdout)
    assert str(link.relative_to(prefix)) in planned["plan"]["files"]
    repair(prefix, closed_wheels, tool_env)
    assert os.readlink(link) == "../../cuda_nvrtc/lib/libnvrtc.so.12"
    own = str((site / "nvidia" / "cuda_nvrtc" / "lib" / "libnvrtc.so.12").resolve())
    assert nvrtc_origin(prefix, system_cache, clean_environ()) == own
    assert doctor(prefix, system_cache, clean_environ())["libs.closed"]["status"] == "ok"

    undone = run_tool("repair", "--undo", "--prefix", str(prefix), "--offline", "--json", env=tool_env)
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert link.is_symlink() and os.readlink(link) == theirs


def test_the_link_goes_to_a_file_of_the_envs_own_never_through_one_that_links_out(tmp_path):
    """Real files and links: the provider of ``libnvrtc.so`` is a file where it is named. NVRTC's
    soname file made a link to the system's copy gives way to the versioned file beside it; the link
    create made in cuBLAS's directory (for cuBLASLt 12's ``libnvrtc.so.12``) is no provider, so repair
    replacing a name linked out of the env writes what create wrote; conda's soname link beside its
    file stays the provider."""
    from tfgpu.envs import activation
    from tfgpu.resolver import tables

    site = "lib/python3.11/site-packages"
    dirs = tuple(f"{site}/nvidia/{component}/lib" for component in ("cublas", "cuda_nvrtc", "cudnn"))
    system = tmp_path / "usr-local-cuda" / "lib64"
    gcc(system / "libnvrtc.so.12", "libnvrtc.so.12")
    (system / "libnvrtc.so").symlink_to("libnvrtc.so.12")

    def env(name: str) -> Path:
        root = tmp_path / name
        for relative in ("nvidia/cudnn/lib/libcudnn_graph.so.9", "nvidia/cublas/lib/libcublasLt.so.12"):
            (root / site / relative).parent.mkdir(parents=True, exist_ok=True)
            (root / site / relative).write_bytes(b"\x7fELF")
        (root / site / "nvidia/cuda_nvrtc/lib").mkdir(parents=True)
        return root

    linked_out = env("linked-out")
    nvrtc = linked_out / site / "nvidia/cuda_nvrtc/lib"
    (nvrtc / "libnvrtc.so.12").symlink_to(system / "libnvrtc.so.12")
    (nvrtc / "libnvrtc.so.12.5.82").write_bytes(b"\x7fELF the env's own")
    assert activation.dlopen_links(linked_out, dirs, tables.dlopened_names()) == (
        (f"{site}/nvidia/cudnn/lib/libnvrtc.so", "../../cuda_nvrtc/lib/libnvrtc.so.12.5.82"),
    )

    created = env("created")
    (created / site / "nvidia/cuda_nvrtc/lib/libnvrtc.so.12").write_bytes(b"\x7fELF")
    first = activation.dlopen_links(created, dirs, tables.dlopened_names())
    assert dict(first)[f"{site}/nvidia/cudnn/lib/libnvrtc.so"] == "../../cuda_nvrtc/lib/libnvrtc.so.12"
    for link, target in first:
        (created / link).symlink_to(target)
    name = created / site / "nvidia/cudnn/lib/libnvrtc.so"
    name.unlink()
    name.symlink_to(system / "libnvrtc.so")
    assert activation.dlopen_links(created, dirs, tables.dlopened_names()) == (
        (f"{site}/nvidia/cudnn/lib/libnvrtc.so", "../../cuda_nvrtc/lib/libnvrtc.so.12"),
    )

    conda = tmp_path / "conda"
    (conda / "lib").mkdir(parents=True)
    for file in ("libcudnn_graph.so.9", "libnvrtc.so.12.5.82"):
        (conda / "lib" / file).write_bytes(b"\x7fELF")
    (conda / "lib" / "libnvrtc.so.12").symlink_to("libnvrtc.so.12.5.82")
    (conda / "lib" / "libnvrtc.so").symlink_to(system / "libnvrtc.so")
    assert activation.dlopen_links(conda, ("lib",), tables.dlopened_names()) == (("lib/libnvrtc.so", "libnvrtc.so.12"),)


def test_repair_says_what_it_cannot_close_when_the_envs_own_library_links_out(
    tmp_path, closed_wheels, system_cache, tool_env
):
    """NVRTC's wheel file itself made a link to a system copy: no link the repair writes can keep
    cuDNN's ``dlopen("libnvrtc.so")`` in the env, and doctor fails libs.closed. Repair does not say
    "nothing to do" (exit 0) then: it names the link left open and the way to close it, exit 1."""
    prefix = user_env(tmp_path, closed_wheels)
    repair(prefix, closed_wheels, tool_env)
    site = next(prefix.glob("lib/python3*/site-packages"))
    wheel_file = site / "nvidia" / "cuda_nvrtc" / "lib" / "libnvrtc.so.12"
    theirs = gcc(system_cache / "elsewhere" / "libnvrtc.so.12", "libnvrtc.so.12")
    wheel_file.unlink()
    wheel_file.symlink_to(theirs)
    assert nvrtc_origin(prefix, system_cache, clean_environ()) == str(theirs.resolve())
    assert doctor(prefix, system_cache, clean_environ())["libs.closed"]["status"] == "fail"

    done = run_tool(
        "repair", "--prefix", str(prefix), "--find-links", str(closed_wheels), "--no-detect", "--yes",
        "--no-verify", "--offline", "--json", env=tool_env,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    left = json.loads(done.stdout)["plan"]["left_open"]
    assert {"path": str(wheel_file.relative_to(prefix)), "links_to": str(theirs)} in left
    text = run_tool(
        "repair", "--prefix", str(prefix), "--find-links", str(closed_wheels), "--no-detect", "--yes",
        "--no-verify", "--offline", env=tool_env,
    )  # fmt: skip
    assert text.returncode == 1 and "needs no repair" not in text.stdout + text.stderr
    assert "left open" in text.stderr and "--reinstall" in text.stderr
