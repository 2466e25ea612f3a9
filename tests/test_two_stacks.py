"""Envs with two CUDA stacks (TensorFlow's CUDA 12 wheels next to torch's or JAX's CUDA 13 ones):
the ownership reader, doctor's ``mixed.*`` checks, the load hook loading the other stack's colliding
SONAMEs first, create installing TensorFlow's CUDA wheels apart, the post-install refusal, and
repair leaving the other stack's files alone (or refusing when it could not).

Real venvs filled by real uv from local wheels holding real gcc-built shared objects with the
SONAMEs NVIDIA's wheels use, laid out as those wheels lay them out (``nvidia/nccl/lib`` owned by
both NCCL wheels, ``nvidia/curand/lib`` for CUDA 12 and the merged ``nvidia/cu13/lib`` for CUDA 13).
The network test at the end builds the same kind of env from NVIDIA's real wheels on PyPI.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import repairhelpers as rh
import wheelhouse
from conftest import TEST_CACHE, run_tool, suite_cache

from tfgpu.detect import probe
from tfgpu.detect.recorded import RecordedSystem
from tfgpu.detect.system import PlatformFacts
from tfgpu.doctor import ownership, run_doctor
from tfgpu.errors import ImpossibleError, OperationError
from tfgpu.installers import stacks

CURAND12 = ("nvidia-curand-cu12", "10.3.10.19", "nvidia/curand/lib/libcurand.so.10")
CURAND13 = ("nvidia-curand", "10.4.5.25", "nvidia/cu13/lib/libcurand.so.10")
NCCL = "nvidia/nccl/lib/libnccl.so.2"


def stack_wheels(directory: Path) -> Path:
    """cuRAND for both stacks (one SONAME, two files) and NCCL for both (one file, two owners,
    different bytes), as NVIDIA's wheels ship them."""
    if not wheelhouse.have_compiler():
        pytest.skip("gcc is needed to build the test shared libraries")
    libs = directory / ".libs"
    curand = wheelhouse.shared_library(libs / "curand" / "libcurand.so.10", "libcurand.so.10").read_bytes()
    nccl = wheelhouse.shared_library(libs / "nccl" / "libnccl.so.2", "libnccl.so.2").read_bytes()
    wheelhouse.wheel(directory, CURAND12[0], CURAND12[1], {CURAND12[2]: curand})
    wheelhouse.wheel(directory, CURAND13[0], CURAND13[1], {CURAND13[2]: curand + b"\0cu13"})
    header = b"/* nccl.h */\n"
    wheelhouse.wheel(directory, "nvidia-nccl-cu12", "2.32.3", {NCCL: nccl, "nvidia/nccl/include/nccl.h": header})
    wheelhouse.wheel(
        directory, "nvidia-nccl-cu13", "2.32.3", {NCCL: nccl + b"\0cu13", "nvidia/nccl/include/nccl.h": header}
    )
    return directory


def no_gpu_host():
    """A recorded Linux host without a driver: the mixed checks read files only."""
    return probe(RecordedSystem(facts=PlatformFacts(system="Linux", machine="x86_64", python="3.11", glibc="2.36")))


def site_of(prefix: Path) -> Path:
    return next(prefix.glob("lib/python3*/site-packages"))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def stack_wheelhouse(tmp_path_factory) -> Path:
    """``stack_wheels`` built once for the module (gcc); a test that adds wheels copies them."""
    return stack_wheels(tmp_path_factory.mktemp("stack-wheels"))


def with_stack_wheels(directory: Path, stack_wheelhouse: Path) -> Path:
    """``directory`` (made if need be) holding the stack wheels too."""
    directory.mkdir(parents=True, exist_ok=True)
    for wheel in stack_wheelhouse.glob("*.whl"):
        shutil.copy2(wheel, directory)
    return directory


@pytest.fixture(scope="module")
def mixed_env(stack_wheelhouse, tmp_path_factory) -> Path:
    """Both stacks' NCCL and cuRAND in one env (real uv), built once: the tests that use it only read it."""
    return rh.user_venv(
        tmp_path_factory.mktemp("mixed") / "env",
        stack_wheelhouse,
        "nvidia-nccl-cu12==2.32.3",
        "nvidia-nccl-cu13==2.32.3",
        f"{CURAND12[0]}=={CURAND12[1]}",
        f"{CURAND13[0]}=={CURAND13[1]}",
    )


def test_the_reader_names_the_file_owned_twice_who_won_and_who_lost(mixed_env):
    site = site_of(mixed_env)
    dists = ownership.distributions(site)
    shared = {item.path: item for item in ownership.shared_files(site, dists)}
    assert set(shared) == {NCCL, "nvidia/nccl/include/nccl.h"}
    nccl = shared[NCCL]
    assert nccl.differ and not shared["nvidia/nccl/include/nccl.h"].differ
    assert nccl.on_disk == sha256(site / NCCL)
    assert len(nccl.winners) == 1 and len(nccl.losers) == 1
    assert {*nccl.winners, *nccl.losers} == {"nvidia-nccl-cu12 2.32.3", "nvidia-nccl-cu13 2.32.3"}
    assert ownership.stacks(dists) == {
        12: ["nvidia-curand-cu12 10.3.10.19", "nvidia-nccl-cu12 2.32.3"],
        13: ["nvidia-curand 10.4.5.25", "nvidia-nccl-cu13 2.32.3"],
    }
    pairs = ownership.soname_pairs(site, dists)
    assert [p.soname for p in pairs] == ["libcurand.so.10"]
    assert {(stack, path) for stack, path, _ in pairs[0].files} == {("cu12", CURAND12[2]), ("cu13", CURAND13[2])}
    assert ownership.colliding(site, 12, dists) == [CURAND13[2]]
    assert ownership.colliding(site, 13, dists) == [CURAND12[2]]


def test_doctor_fails_on_the_lost_file_and_warns_of_the_shared_soname(mixed_env):
    report = run_doctor(root=mixed_env, host=no_gpu_host(), environ={})
    found = {f.id: f for f in report.findings if f.id.startswith("mixed.")}
    assert set(found) == {"mixed.shared-files", "mixed.sonames"}  # no framework installed: no python-numpy
    shared = found["mixed.shared-files"]
    assert shared.status == "fail" and report.failed
    line = next(e for e in shared.evidence if e.startswith(NCCL))
    loser = ownership.shared_files(site_of(mixed_env))[1].losers[0]
    assert f"lost: {loser}" in line
    assert "separate envs" in shared.fix
    assert found["mixed.sonames"].status == "warn"
    assert any(CURAND13[2] in e and CURAND12[2] in e for e in found["mixed.sonames"].evidence)


def test_one_stack_gives_no_mixed_finding(tmp_path, stack_wheelhouse):
    prefix = rh.user_venv(
        tmp_path / "env", stack_wheelhouse, "nvidia-nccl-cu12==2.32.3", f"{CURAND12[0]}=={CURAND12[1]}"
    )
    report = run_doctor(root=prefix, host=no_gpu_host(), environ={})
    assert not [f for f in report.findings if f.id.startswith("mixed.")]
    assert ownership.other_stack_first(site_of(prefix)) == ()


def test_python_and_numpy_outside_a_frameworks_range_fail(tmp_path, stack_wheelhouse):
    wheels = with_stack_wheels(tmp_path / "wheels", stack_wheelhouse)
    wheelhouse.wheel(wheels, "numpy", "2.3.0", {"numpy/__init__.py": b""})
    wheelhouse.wheel(
        wheels,
        "tensorflow",
        "2.21.0",
        {"tensorflow/python/platform/build_info.py": rh.BUILD_INFO.format(cuda=True).encode()},
        requires=["numpy>=1.26.0", "nvidia-curand-cu12<11.0,>=10.3.6.82; extra == 'and-cuda'"],
        extras=["and-cuda"],
    )
    wheelhouse.wheel(wheels, "jax", "0.12.0", {"jax/__init__.py": b""}, requires=["numpy<2.2"])
    prefix = rh.user_venv(tmp_path / "env", wheels, "tensorflow==2.21.0", "jax==0.12.0", "numpy==2.3.0", "--no-deps")
    report = run_doctor(root=prefix, host=no_gpu_host(), environ={})
    found = next(f for f in report.findings if f.id == "mixed.python-numpy")
    assert found.status == "fail"
    assert "numpy 2.3.0 is outside jax 0.12.0's <2.2" in found.evidence
    assert "tensorflow 2.21.0: Requires-Python -, numpy >=1.26.0" in found.evidence


def test_the_post_install_check_refuses_a_file_owned_twice(mixed_env):
    with pytest.raises(OperationError) as raised:
        stacks.refuse_files_owned_twice(site_of(mixed_env), str(mixed_env))
    assert raised.value.code == "files-owned-twice"
    assert NCCL in raised.value.message and raised.value.alternatives


HOOK_ORDER = "import tensorflow, _tfgpu_cuda_hook, json\nprint(json.dumps(_tfgpu_cuda_hook.loaded))\n"


def test_repair_adds_a_hook_that_loads_the_other_stacks_sonames_first_and_touches_none_of_its_files(
    tmp_path, repair_wheels, tool_env, stack_wheelhouse
):
    """The env a user has after ``uv pip install tensorflow[and-cuda] torch``: TensorFlow's cuRAND
    for CUDA 12 and torch's for CUDA 13. repair writes the load hook; it loads CUDA 13's
    libcurand.so.10 before TensorFlow's own, changes no byte of the CUDA 13 distribution, and
    ``--undo`` restores the env."""
    wheels = tmp_path / "wheels"
    shutil.copytree(repair_wheels, wheels)
    with_stack_wheels(wheels, stack_wheelhouse)
    prefix = rh.user_venv(
        tmp_path / "env", wheels, "tensorflow==2.21.0", f"{CURAND12[0]}=={CURAND12[1]}", f"{CURAND13[0]}=={CURAND13[1]}"
    )
    site = site_of(prefix)
    other = ownership.distributions(site)
    theirs = next(d for d in other if d.name == "nvidia-curand")
    before_theirs = {path: sha256(site / path) for path in theirs.files if (site / path).is_file()}
    before = rh.snapshot(prefix)

    done = run_tool("repair", "--prefix", str(prefix), "--find-links", str(wheels), "--no-detect", "--yes",
                    "--no-verify", "--offline", "--json", env=tool_env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert {path: sha256(site / path) for path in before_theirs} == before_theirs
    layout = json.loads((prefix / "etc" / "tfgpu" / "layout.json").read_text())
    assert layout["other_first"] == [CURAND13[2]]

    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "VIRTUAL_ENV")}
    run = subprocess.run([str(prefix / "bin" / "python"), "-c", HOOK_ORDER], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    loaded = json.loads(run.stdout)
    assert loaded[0] == str(site / CURAND13[2])
    assert str(site / CURAND12[2]) in loaded[1:]
    off = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", HOOK_ORDER],
        capture_output=True,
        text=True,
        env={**env, "TFGPU_OTHER_STACK_FIRST": "0"},
    )
    assert str(site / CURAND13[2]) not in json.loads(off.stdout)
    chosen = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", HOOK_ORDER],
        capture_output=True,
        text=True,
        env={**env, "TFGPU_OTHER_STACK_FIRST": str(site / CURAND12[2])},
    )
    assert json.loads(chosen.stdout)[0] == str(site / CURAND12[2])

    undone = run_tool("repair", "--undo", "--prefix", str(prefix), "--offline", "--json", env=tool_env)
    assert undone.returncode == 0, undone.stderr
    after = {k: v for k, v in rh.snapshot(prefix).items() if "__pycache__" not in k}
    assert after == {k: v for k, v in before.items() if "__pycache__" not in k}


REAL_WHEELS = (
    "nvidia-nccl-cu12==2.32.3",
    "nvidia-nccl-cu13==2.32.3",
    "nvidia-curand-cu12==10.3.10.19",
    "nvidia-curand==10.4.5.25",
)


@pytest.mark.network
@pytest.mark.slow
def test_doctor_on_a_real_two_stack_env_from_pypi_names_the_clobbered_files():
    """NVIDIA's own wheels (~770 MB, kept in TFGPU_TEST_CACHE): uv installs NCCL for CUDA 12 and 13
    without a word, one libnccl.so.2 stays; doctor names it and the distribution that lost it."""
    from tfgpu.engines.uv import find_uv

    uv = find_uv()
    if uv is None:
        pytest.skip("uv is not installed")
    env = TEST_CACHE / "envs" / f"two-stacks-py{sys.version_info[0]}.{sys.version_info[1]}"
    if not (env / ".complete").is_file():
        shutil.rmtree(env, ignore_errors=True)
        common = {**os.environ, "UV_CACHE_DIR": str(suite_cache("e2e", "uv"))}
        subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(env)], check=True, env=common, timeout=300)
        subprocess.run(
            [uv, "pip", "install", "-q", "--no-deps", "--python", str(env / "bin" / "python"), *REAL_WHEELS],
            check=True,
            env=common,
            timeout=1800,
        )
        (env / ".complete").write_text("\n".join(REAL_WHEELS) + "\n")
    report = run_doctor(root=env, host=no_gpu_host(), environ={})
    found = {f.id: f for f in report.findings if f.id.startswith("mixed.")}
    shared = found["mixed.shared-files"]
    assert shared.status == "fail"
    site = site_of(env)
    lost = {item.path: item for item in ownership.shared_files(site) if item.differ}
    assert NCCL in lost and len(lost[NCCL].losers) == 1
    assert any(e.startswith(NCCL) and f"lost: {lost[NCCL].losers[0]}" in e for e in shared.evidence)
    assert found["mixed.sonames"].status == "warn"
    assert any(e.startswith("libcurand.so.10: ") for e in found["mixed.sonames"].evidence)
    assert ownership.colliding(site, 12) == [CURAND13[2]]


TARGET = ("--tf", "2.21.0", "--mode", "pip", "--python", f"{sys.version_info[0]}.{sys.version_info[1]}",
          "--os", "linux", "--arch", "x86_64", "--driver", "580.65.06", "--gpu-cc", "9.0")  # fmt: skip


def tensorflow_also_requiring(local_wheels: Path, directory: Path, *extra: str) -> Path:
    """``local_wheels`` with a TensorFlow whose ``and-cuda`` extra also requires ``extra``: the
    resolution a second framework's CUDA 13 wheels bring (tests/wheelhouse.py's stand-in TensorFlow)."""
    shutil.copytree(local_wheels, directory)
    requires = [f"{dist}>={ver}; extra == 'and-cuda'" for dist, ver, _ in wheelhouse.CUDA_WHEELS]
    requires.append(f"{wheelhouse.NVCC[0]}>=12.5.82; extra == 'and-cuda'")
    requires += [f"{req}; extra == 'and-cuda'" for req in extra]
    files = {
        "tensorflow/__init__.py": b"__version__ = '2.21.0'\n",
        "tensorflow/python/platform/build_info.py": rh.BUILD_INFO.format(cuda=True).encode(),
    }
    wheelhouse.wheel(directory, "tensorflow", "2.21.0", files, requires, extras=["and-cuda"])
    return directory


def create(prefix: Path, wheels: Path, env: dict) -> subprocess.CompletedProcess:
    return run_tool("create", *TARGET, "--prefix", str(prefix), "--find-links", str(wheels), "--offline",
                    "--no-verify", "--json", env=env)  # fmt: skip


def test_create_installs_tensorflows_stack_apart_so_no_file_is_owned_twice(
    tmp_path, local_wheels, tool_env, stack_wheelhouse
):
    """The resolution holds NCCL for CUDA 12 (TensorFlow's) and for CUDA 13 (another framework's):
    both own nvidia/nccl/lib/libnccl.so.2. TensorFlow's CUDA 12 wheels go to lib/tfgpu/cuda12, the
    rest to site-packages; the load hook loads CUDA 13's libnccl.so.2 first, then TensorFlow's own
    libraries from lib/tfgpu/cuda12; the marker records what was decided."""
    wheels = tensorflow_also_requiring(
        local_wheels, tmp_path / "wheels", "nvidia-nccl-cu12==2.32.3", "nvidia-nccl-cu13==2.32.3"
    )
    with_stack_wheels(wheels, stack_wheelhouse)
    prefix = tmp_path / "env"
    done = create(prefix, wheels, tool_env)
    assert done.returncode == 0, done.stderr
    site, apart = site_of(prefix), prefix / "lib" / "tfgpu" / "cuda12"
    assert stacks.owned_twice(site) == frozenset() and not ownership.shared_files(site)
    assert ownership.stacks(ownership.distributions(site)) == {13: ["nvidia-nccl-cu13 2.32.3"]}
    assert set(ownership.stacks(ownership.distributions(apart))) == {12}
    on_disk = sha256(site / NCCL)
    theirs = next(d for d in ownership.distributions(site) if d.name == "nvidia-nccl-cu13")
    assert on_disk == theirs.files[NCCL]
    found = json.loads((prefix / "tfgpu-env.json").read_text())["cuda_apart"]
    assert found["dir"] == "lib/tfgpu/cuda12" and "nvidia-nccl-cu12==2.32.3" in found["locked"]
    layout = json.loads((prefix / "etc" / "tfgpu" / "layout.json").read_text())
    assert layout["other_first"] == [NCCL] and layout["lib_dirs"] == []
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "VIRTUAL_ENV")}
    run = subprocess.run([str(prefix / "bin" / "python"), "-c", HOOK_ORDER], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    loaded = json.loads(run.stdout)
    assert loaded[0] == str(site / NCCL)
    assert loaded[1:] and all(path.startswith(str(apart) + "/nvidia/") for path in loaded[1:])
    assert any(path.endswith("libcudnn.so.9") for path in loaded[1:])
    report = run_doctor(root=prefix, host=no_gpu_host(), environ={})
    found = {f.id: f for f in report.findings}
    assert found["libs.cudnn"].status == "ok" and str(apart / "nvidia" / "cudnn") in found["libs.cudnn"].evidence[0]
    assert not [f for f in report.findings if f.id.startswith("mixed.") and f.status == "fail"]
    assert found["mixed.apart"].status == "ok"
    libcudnn = apart / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9"
    libcudnn.write_bytes(libcudnn.read_bytes() + b"\0changed")
    changed = {f.id: f for f in run_doctor(root=prefix, host=no_gpu_host(), environ={}).findings}["mixed.apart"]
    assert changed.status == "fail" and any("nvidia/cudnn/lib/libcudnn.so.9" in e for e in changed.evidence)


def test_create_rolls_back_when_two_distributions_own_a_file(tmp_path, local_wheels, tool_env):
    """Any two distributions, not only two named stacks: here a package that ships its own
    libcudnn.so.9 into TensorFlow's cuDNN directory."""
    wheels = tensorflow_also_requiring(local_wheels, tmp_path / "wheels", "bundles-cudnn==1.0")
    cudnn = wheelhouse.shared_library(tmp_path / "other" / "libcudnn.so.9", "libcudnn.so.9").read_bytes()
    wheelhouse.wheel(wheels, "bundles-cudnn", "1.0", {"nvidia/cudnn/lib/libcudnn.so.9": cudnn + b"\0other"})
    prefix = tmp_path / "env"
    done = create(prefix, wheels, tool_env)
    assert done.returncode == 1, done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "files-owned-twice"
    assert "nvidia/cudnn/lib/libcudnn.so.9" in error["message"] and "bundles-cudnn 1.0" in error["message"]
    assert not prefix.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".env.")]


def test_pins_name_their_stacks():
    pins = [
        "nvidia-cudnn-cu12==9.28.0.42",
        "cuda-toolkit[cublas,cudart]==13.2.2",
        "nvidia-nccl-cu13==2.30.7",
        "jax-cuda12-plugin==0.12.0",
        "numpy==2.3.0",
    ]
    assert stacks.stacks_of_pins(pins) == {
        12: ["nvidia-cudnn-cu12==9.28.0.42", "jax-cuda12-plugin==0.12.0"],
        13: ["cuda-toolkit[cublas,cudart]==13.2.2", "nvidia-nccl-cu13==2.30.7"],
    }
    stacks.refuse_two_stacks(["nvidia-cudnn-cu12==9.28.0.42", "jax-cuda12-plugin==0.12.0"], "env")
    with pytest.raises(ImpossibleError) as raised:
        stacks.refuse_two_stacks(pins, "env")
    assert raised.value.code == "two-cuda-stacks" and raised.value.exit_code == 3


def test_repair_does_not_install_tensorflows_cudnn_over_the_other_stacks(tmp_path, repair_wheels, tool_env):
    """torch's CUDA 13 cuDNN is in the env, TensorFlow's CUDA 12 one is missing: adding it would
    overwrite ``nvidia/cudnn/lib/libcudnn.so.9`` (and taking it back would delete torch's). The repair
    is refused before anything changes, as is its dry run."""
    wheels = tmp_path / "wheels"
    shutil.copytree(repair_wheels, wheels)
    cudnn = wheelhouse.shared_library(tmp_path / "cu13" / "libcudnn.so.9", "libcudnn.so.9").read_bytes()
    wheelhouse.wheel(wheels, "nvidia-cudnn-cu13", "9.26.0.51", {"nvidia/cudnn/lib/libcudnn.so.9": cudnn + b"\0cu13"})
    prefix = rh.user_venv(tmp_path / "env", wheels, "tensorflow==2.21.0", "nvidia-cudnn-cu13==9.26.0.51")
    before = rh.snapshot(prefix)
    for extra in ("--dry-run", "--yes"):
        done = run_tool("repair", "--prefix", str(prefix), "--find-links", str(wheels), "--no-detect", extra,
                        "--no-verify", "--offline", "--json", env=tool_env)  # fmt: skip
        assert done.returncode == 3, done.stderr
        error = json.loads(done.stdout)["error"]
        assert error["code"] == "two-cuda-stacks"
        assert "nvidia-cudnn-cu12 (CUDA 12) into nvidia/cudnn/" in error["message"]
        assert "nvidia-cudnn-cu13 9.26.0.51 (CUDA 13)" in error["message"]
        assert rh.snapshot(prefix) == before


def test_the_post_install_check_answers_only_for_what_the_install_did(mixed_env):
    site = site_of(mixed_env)
    already = stacks.owned_twice(site)
    assert already == {NCCL}
    stacks.refuse_files_owned_twice(site, str(mixed_env), already)  # the env was mixed before: not this install's doing


def framework_library(path: Path, versioned: str = "") -> Path:
    """A real gcc-built stand-in for TensorFlow's libtensorflow_framework.so.2: it exports CUDA API
    names without symbol versions, as TensorFlow's forwarding stubs do; ``versioned`` names one that a
    version script exports under a version instead (a definition the loader would not mix up)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    names = ["cudaGetDeviceProperties_v2", "cublasCreate_v2", "cublasLtCreate", "cudnnCreate", "cuInit", "not_cuda"]
    source = "".join(f"int {name}(void) {{ return 0; }}\n" for name in names + ([versioned] if versioned else []))
    command = ["gcc", "-shared", "-fPIC", "-Wl,-soname,libtensorflow_framework.so.2", "-o", str(path), "-x", "c", "-"]
    if versioned:
        script = path.parent / "version.map"
        script.write_text(f"LIBX_1 {{ global: {versioned}; }};\nLIBX_0 {{ global: *; }};\n")
        command.insert(1, f"-Wl,--version-script={script}")
    subprocess.run(command, input=source, text=True, check=True)
    return path


def test_the_apis_tensorflow_reexports_unversioned_are_read_from_its_symbol_table(tmp_path):
    if not wheelhouse.have_compiler():
        pytest.skip("gcc is needed to build the test shared library")
    framework_library(tmp_path / ownership.FRAMEWORK_LIBRARY)
    assert ownership.reexported_libraries(tmp_path) == {"libcudart", "libcublas", "libcublasLt", "libcudnn"}
    versioned = tmp_path / "v"
    framework_library(versioned / ownership.FRAMEWORK_LIBRARY, versioned="cufftPlan1d")
    assert "libcufft" not in ownership.reexported_libraries(versioned)
    assert ownership.reexported_libraries(tmp_path / "nothing-here") == frozenset()
    (tmp_path / "junk" / "tensorflow").mkdir(parents=True)
    (tmp_path / "junk" / ownership.FRAMEWORK_LIBRARY).write_bytes(b"\x7fELF\x02\x01" + b"\xff" * 100)
    assert ownership.reexported_libraries(tmp_path / "junk") == frozenset()


def test_the_hook_loads_the_other_stacks_runtime_first_when_tensorflow_reexports_its_api(tmp_path):
    """The other stack's libcudart.so.13 (a different SONAME from TF's libcudart.so.12, so no collision)
    is still loaded first, because TF's framework exports cudart's API unversioned."""
    if not wheelhouse.have_compiler():
        pytest.skip("gcc is needed to build the test shared libraries")
    wheels, libs = tmp_path / "wheels", tmp_path / "libs"
    cudart12 = wheelhouse.shared_library(libs / "12" / "libcudart.so.12", "libcudart.so.12").read_bytes()
    cudart13 = wheelhouse.shared_library(libs / "13" / "libcudart.so.13", "libcudart.so.13").read_bytes()
    framework = framework_library(libs / "tf" / ownership.FRAMEWORK_LIBRARY).read_bytes()
    wheelhouse.wheel(
        wheels, "nvidia-cuda-runtime-cu12", "12.9.79", {"nvidia/cuda_runtime/lib/libcudart.so.12": cudart12}
    )
    wheelhouse.wheel(wheels, "nvidia-cuda-runtime", "13.0.96", {"nvidia/cu13/lib/libcudart.so.13": cudart13})
    wheelhouse.wheel(
        wheels, "tensorflow", "2.21.0", {ownership.FRAMEWORK_LIBRARY: framework}, requires=["nvidia-cuda-runtime-cu12"]
    )
    prefix = rh.user_venv(tmp_path / "env", wheels, "tensorflow", "nvidia-cuda-runtime")
    assert ownership.other_stack_first(site_of(prefix)) == ("nvidia/cu13/lib/libcudart.so.13",)


def test_create_apart_also_closes_the_other_stacks_dlopened_names(tmp_path, local_wheels, tool_env):
    """Side by side, the other stack's cuDNN 9 (in site-packages) dlopens "libnvrtc.so" itself, and
    TensorFlow uses that cuDNN (the hook loads it first). On an H200 the system toolkit's
    libnvrtc.so.13 answered that call in such an env; create links the name to the env's own CUDA 13
    NVRTC in the caller's RUNPATH directory, as it does for TensorFlow's own stack."""
    graph = wheelhouse.shared_library(tmp_path / "libs" / "libcudnn_graph.so.9", "libcudnn_graph.so.9").read_bytes()
    nvrtc = wheelhouse.shared_library(tmp_path / "libs" / "libnvrtc.so.13", "libnvrtc.so.13").read_bytes()
    extra = tmp_path / "extra"
    cudnn = wheelhouse.shared_library(tmp_path / "libs" / "libcudnn.so.9", "libcudnn.so.9").read_bytes()
    wheelhouse.wheel(
        extra,
        "nvidia-cudnn-cu13",
        "9.19.0.56",
        {"nvidia/cudnn/lib/libcudnn_graph.so.9": graph, "nvidia/cudnn/lib/libcudnn.so.9": cudnn},
    )
    wheelhouse.wheel(extra, "nvidia-cuda-nvrtc", "13.0.88", {"nvidia/cu13/lib/libnvrtc.so.13": nvrtc})
    wheels = tensorflow_also_requiring(
        local_wheels, tmp_path / "wheels", "nvidia-cudnn-cu13==9.19.0.56", "nvidia-cuda-nvrtc==13.0.88"
    )
    for wheel in extra.glob("*.whl"):
        shutil.copy(wheel, wheels)
    prefix = tmp_path / "env"
    done = create(prefix, wheels, tool_env)
    assert done.returncode == 0, done.stderr
    link = site_of(prefix) / "nvidia" / "cudnn" / "lib" / "libnvrtc.so"
    assert link.is_symlink() and link.resolve() == (site_of(prefix) / "nvidia/cu13/lib/libnvrtc.so.13").resolve()
    layout = json.loads((prefix / "etc" / "tfgpu" / "layout.json").read_text())
    assert any(entry[0].endswith("site-packages/nvidia/cudnn/lib/libnvrtc.so") for entry in layout["links"])
