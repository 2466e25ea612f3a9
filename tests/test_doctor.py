"""doctor, one broken situation per test, built for real (tests/envtree.py: real files and ELF
libraries). The driver's answers are the only fake: this machine has no GPU, so hosts with a
driver come from tfgpu.detect's RecordedSystem with outputs recorded on real machines.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys

import pypifixture
import pytest
import wheelhouse
from conftest import run_tool
from envtree import RUNPATH_2_16_1, RUNPATH_2_21, RUNPATH_FULL, make_env

from tfgpu.detect import probe
from tfgpu.detect.recorded import RecordedSystem
from tfgpu.detect.system import NvmlDevice, NvmlSnapshot, PlatformFacts
from tfgpu.doctor import elf, run_doctor

pytestmark = pytest.mark.skipif(not wheelhouse.have_compiler(), reason="gcc builds the test libraries")
CLEAN = {"PATH": "/usr/bin:/bin"}  # no LD_LIBRARY_PATH, no XLA_FLAGS


def gpu_host(driver="580.159.04", cuda=13000, cc=(9, 0), os_kind="Linux", files=None, name="NVIDIA H200"):
    """A host whose NVML answers as recorded on the H200 machine (or with the given values)."""
    system = RecordedSystem(
        facts=PlatformFacts(system=os_kind, machine="x86_64", python="3.11", glibc="2.39"),
        nvml_answer=NvmlSnapshot(driver, cuda, (NvmlDevice(0, name, cc, 150754820096, None),)),
        files=files or {},
    )
    return probe(system)


def no_gpu_host():
    return probe(RecordedSystem(facts=PlatformFacts(system="Linux", machine="x86_64", python="3.11", glibc="2.36")))


def findings(report) -> dict[str, object]:
    return {f.id: f for f in report.findings}


def test_healthy_env_has_no_failures(tmp_path):
    env = make_env(tmp_path / "env")
    report = run_doctor(env, host=gpu_host(), environ=CLEAN)
    failed = [f"{f.id}: {f.title}" for f in report.findings if f.status == "fail"]
    assert failed == []
    by_id = findings(report)
    assert by_id["libs.cusolver"].status == "ok" and "load hook" in by_id["libs.cusolver"].evidence[0]
    assert by_id["cudnn.version"].title.startswith("cuDNN 9.28.0 >= 9.3")
    assert by_id["libs.cudart"].title.endswith("version 12.9")
    assert by_id["release.runpath-missing-cusolver"].status == "ok"


def test_tf_2_21_without_loader_setup_names_libcusolver_and_the_fix(tmp_path):
    env = make_env(tmp_path / "env", hook=False)
    by_id = findings(run_doctor(env, host=gpu_host(), environ=CLEAN))
    assert by_id["libs.cusolver"].status == "fail"
    assert "libcusolver.so.11 is not on any path TensorFlow searches" == by_id["libs.cusolver"].title
    bug = by_id["release.runpath-missing-cusolver"]
    assert bug.status == "fail" and "libcusolver.so.11" in bug.title
    assert "LD_LIBRARY_PATH" in bug.fix and "tfgpu-install repair --prefix" in bug.fix
    assert by_id["libs.cublas"].status == "ok"  # on the RUNPATH


def test_a_runpath_as_long_as_tensorflow_2_21s_is_read_whole(tmp_path):
    """TF 2.21.0's framework library ships a RUNPATH of 20,358 bytes (each entry some forty times
    over); read as a symbol name (4 KiB at most) it was "a name without an end", so doctor on a real
    TF 2.21 venv found none of its CUDA libraries and called the library damaged."""
    env = make_env(tmp_path / "env", hook=False, runpath=RUNPATH_2_21 * 90)
    framework = next(env.glob("lib/python3*/site-packages/tensorflow/libtensorflow_framework.so.2"))
    dynamic = elf.read_dynamic(str(framework))
    assert len(":".join(f"$ORIGIN/../nvidia/{c}/lib" for c in RUNPATH_2_21 * 90)) > 20_000
    assert dynamic.runpath == tuple(f"$ORIGIN/../nvidia/{c}/lib" for c in RUNPATH_2_21)
    by_id = findings(run_doctor(env, host=gpu_host(), environ=CLEAN))
    assert "env.library-reads" not in by_id
    assert by_id["libs.cublas"].status == "ok" and by_id["libs.cusolver"].status == "fail"


def test_activation_covers_what_the_runpath_lacks(tmp_path):
    env = make_env(tmp_path / "env", hook=False)
    site = env / "lib/python3.11/site-packages"
    environ = {"LD_LIBRARY_PATH": f"{site}/nvidia/cusolver/lib"}
    by_id = findings(run_doctor(env, host=gpu_host(), environ=environ))
    assert by_id["libs.cusolver"].status == "ok" and "LD_LIBRARY_PATH" in by_id["libs.cusolver"].evidence[0]


def test_tf_2_16_1_without_loader_setup_fails_five_libraries(tmp_path):
    env = make_env(
        tmp_path / "env",
        tf_version="2.16.1",
        cuda="12.3",
        cudnn_major="8",
        runpath=RUNPATH_2_16_1,
        hook=False,
        libraries=[
            ("cuda_runtime", "libcudart.so.12"),
            ("cublas", "libcublasLt.so.12"),
            ("cublas", "libcublas.so.12"),
            ("cufft", "libcufft.so.11"),
            ("cusolver", "libcusolver.so.11"),
            ("cusparse", "libcusparse.so.12"),
            ("curand", "libcurand.so.10"),
            ("cudnn", "libcudnn.so.8"),
        ],
        cudnn_version=8907,
        caps=("sm_50", "sm_60", "sm_70", "sm_80", "compute_90"),
    )
    report = run_doctor(env, host=gpu_host(), environ=CLEAN)
    failing = sorted(f.id for f in report.findings if f.status == "fail" and f.id.startswith("libs."))
    assert failing == [
        "libs.cublas",
        "libs.cublasLt",
        "libs.cudnn",
        "libs.cufft",
        "libs.curand",
        "libs.cusolver",
        "libs.cusparse",
    ]
    assert findings(report)["release.runpath-missing-cuda-libs"].status == "fail"


def test_cudnn_older_than_the_compiled_minor(tmp_path):
    env = make_env(tmp_path / "env", cudnn_version=90100)
    finding = findings(run_doctor(env, host=gpu_host(), environ=CLEAN))["cudnn.version"]
    assert finding.status == "fail" and "9.1.0 is older than the 9.3" in finding.title
    assert "nvidia-cudnn-cu12>=9.3" in finding.fix


def test_a_system_cudnn_on_ld_library_path_shadows_the_envs(tmp_path):
    system = tmp_path / "usr-local-cuda" / "lib64"
    wheelhouse.shared_library(system / "libcudnn.so.9", "libcudnn.so.9")
    env = make_env(tmp_path / "env", hook=False, runpath=RUNPATH_FULL)
    by_id = findings(run_doctor(env, host=gpu_host(), environ={"LD_LIBRARY_PATH": str(system)}))
    assert by_id["libs.shadowing"].status == "warn"
    assert str(system / "libcudnn.so.9") in by_id["libs.shadowing"].evidence[0]
    hooked = make_env(tmp_path / "hooked", runpath=RUNPATH_FULL)
    by_id = findings(run_doctor(hooked, host=gpu_host(), environ={"LD_LIBRARY_PATH": str(system)}))
    assert by_id["libs.shadowing"].status == "ok" and "not used" in by_id["libs.shadowing"].title


@pytest.mark.parametrize("data_dir", [".", "etc/tfgpu/cuda"])
def test_libdevice_where_a_conda_envs_activation_points_xla(tmp_path, data_dir):
    """conda envs keep libdevice under the env root (CUDA 12 packages) or behind a link under
    etc/tfgpu/cuda (cudatoolkit 11); the env's layout.json says where (found on the H200: doctor
    looked only in site-packages and failed a working conda env)."""
    env = make_env(tmp_path / "env", libdevice=False)
    (env / data_dir / "nvvm" / "libdevice").mkdir(parents=True)
    (env / data_dir / "nvvm" / "libdevice" / "libdevice.10.bc").write_bytes(b"BC\xc0\xde")
    (env / "etc" / "tfgpu").mkdir(parents=True, exist_ok=True)
    (env / "etc" / "tfgpu" / "layout.json").write_text(json.dumps({"cuda_data_dir": data_dir}))
    assert findings(run_doctor(env, host=gpu_host(), environ=CLEAN))["xla.libdevice"].status == "ok"


def test_missing_ptxas_and_libdevice(tmp_path):
    env = make_env(tmp_path / "env", ptxas_release=None, libdevice=False)
    by_id = findings(run_doctor(env, host=gpu_host(), environ=CLEAN))
    assert by_id["xla.ptxas"].status == "warn" and "nvidia-cuda-nvcc-cu12>=12.6.3" in by_id["xla.ptxas"].fix
    assert by_id["xla.libdevice"].status == "fail" and "--xla_gpu_cuda_data_dir" in by_id["xla.libdevice"].fix


def test_a_ptxas_that_miscompiles_is_named(tmp_path):
    env = make_env(tmp_path / "env", ptxas_release="12.5.82")
    finding = findings(run_doctor(env, host=gpu_host(), environ=CLEAN))["xla.ptxas"]
    assert finding.status == "warn" and "12.5.82" in finding.title


def test_a_ptxas_too_old_for_the_gpu(tmp_path):
    env = make_env(tmp_path / "env", ptxas_release="11.2.152")
    host = gpu_host(cc=(12, 0), name="NVIDIA GeForce RTX 5090")
    assert findings(run_doctor(env, host=host, environ=CLEAN))["xla.ptxas"].status == "fail"


@pytest.mark.parametrize("driver,status", [("470.82.01", "fail"), ("530.30.02", "warn"), ("580.159.04", "ok")])
def test_driver_against_the_envs_cuda(tmp_path, driver, status):
    env = make_env(tmp_path / "env")
    finding = findings(run_doctor(env, host=gpu_host(driver=driver, cuda=12000), environ=CLEAN))
    assert finding["driver.supports-build"].status == status


@pytest.mark.parametrize("cc,status", [((5, 2), "fail"), ((9, 0), "ok"), ((8, 6), "ok"), ((12, 0), "warn")])
def test_gpu_architecture_against_the_wheel(tmp_path, cc, status):
    env = make_env(tmp_path / "env")
    finding = findings(run_doctor(env, host=gpu_host(cc=cc), environ=CLEAN))["gpu.arch"]
    assert finding.status == status
    if status == "warn":
        assert "CUDA_CACHE_MAXSIZE" in finding.fix


@functools.cache
def _tf_2_22_members():
    """TF 2.22.0rc0's wheel members, read once for the module from the recorded ranges (a walk of the
    wheel's some 50,000 entries, 0.3 CPU-s). A named tuple of text and entries: nothing in it can
    change, so every test reads the same answer."""
    return pypifixture.recorded_members("tensorflow-2.22.0rc0-cp314-cp314-manylinux_2_27_x86_64.whl")


def _tf_2_22_env(root, cudnn_version: int):
    """An env laid out like TF 2.22.0rc0's wheel: its recorded build_info.py (is_cuda_build only) and
    the two headers, at the paths the wheel installs them."""
    members = _tf_2_22_members()
    env = make_env(root, tf_version="2.22.0rc0", python="3.12", cudnn_version=cudnn_version)
    tf = env / "lib" / "python3.12" / "site-packages" / "tensorflow"
    (tf / "python" / "platform" / "build_info.py").write_text(members.build_info)
    for path, text in (
        ("include/third_party/gpus/cuda/cuda_config.h", members.cuda_config),
        ("include/third_party/gpus/cudnn/include/cudnn_version.h", members.cudnn_version),
    ):
        (tf / path).parent.mkdir(parents=True, exist_ok=True)
        (tf / path).write_text(text)
    return env


def test_tf_2_22_cuda_facts_come_from_the_headers(tmp_path):
    by_id = findings(run_doctor(_tf_2_22_env(tmp_path / "env", 91500), host=gpu_host(), environ=CLEAN))
    build = by_id["tf.cuda-build"]
    assert build.status == "ok" and build.title == "CUDA build: CUDA 12.5.1, cuDNN 9"
    assert "tensorflow/include/third_party/gpus/cuda/cuda_config.h" in build.evidence[0]
    assert by_id["cudnn.version"].status == "ok" and by_id["cudnn.version"].title == "cuDNN 9.15.0 >= 9.10 (same major)"
    assert "its cudnn_version.h" in by_id["cudnn.version"].evidence[1]
    assert by_id["gpu.arch"].status == "ok"  # the H200 host: sm_90 from tfgpu's row for 2.22.0rc0


def test_tf_2_22_with_a_cudnn_older_than_its_header(tmp_path):
    finding = findings(run_doctor(_tf_2_22_env(tmp_path / "env", 90300), host=gpu_host(), environ=CLEAN))[
        "cudnn.version"
    ]
    assert finding.status == "fail" and "9.3.0 is older than the 9.10" in finding.title


def test_no_driver_is_a_failure_with_every_source_as_evidence(tmp_path):
    report = run_doctor(host=no_gpu_host(), environ=CLEAN)
    finding = findings(report)["driver.present"]
    assert finding.status == "fail" and "NVML" in " ".join(finding.evidence)


def test_a_cpu_only_wheel(tmp_path):
    env = make_env(tmp_path / "env", cuda_build=False)
    finding = findings(run_doctor(env, host=gpu_host(), environ=CLEAN))["tf.cuda-build"]
    assert finding.status == "fail"


def test_python_the_release_has_no_wheels_for(tmp_path):
    env = make_env(tmp_path / "env", python="3.9")
    finding = findings(run_doctor(env, host=gpu_host(), environ=CLEAN))["env.python"]
    assert finding.status == "fail" and "--python 3.13" in finding.fix


def test_toolkit_newer_than_the_driver(tmp_path):
    system = RecordedSystem(
        facts=PlatformFacts(system="Linux", machine="x86_64", python="3.11", glibc="2.36"),
        nvml_answer=NvmlSnapshot("535.104.05", 12020, (NvmlDevice(0, "NVIDIA A100", (8, 0), None, None),)),
        files={"/usr/local/cuda-12.4/version.json": '{"cuda": {"name": "CUDA SDK", "version": "12.4.1"}}'},
    )
    finding = findings(run_doctor(host=probe(system), environ=CLEAN))["toolkit.versions"]
    assert finding.status == "warn" and "12.4.1 is newer than the driver's CUDA 12.2" in finding.title
    assert any("nvidia-smi prints" in line for line in finding.evidence)


WSL_FILES = {"/proc/sys/kernel/osrelease": "5.15.153.1-microsoft-standard-WSL2\n"}


def wsl_tree(tmp_path, linux_driver=False, conf=True):
    root = tmp_path / "wslroot"
    (root / "usr/lib/wsl/lib").mkdir(parents=True)
    (root / "usr/lib/wsl/lib/libcuda.so.1").write_bytes(b"\x7fELF")
    if conf:
        (root / "etc/ld.so.conf.d").mkdir(parents=True)
        (root / "etc/ld.so.conf.d/ld.wsl.conf").write_text("/usr/lib/wsl/lib\n")
    if linux_driver:
        (root / "usr/lib/x86_64-linux-gnu").mkdir(parents=True)
        (root / "usr/lib/x86_64-linux-gnu/libcuda.so.550.54.14").write_bytes(b"\x7fELF")
    return str(root)


def test_wsl2_shaped_filesystem(tmp_path):
    host = gpu_host(driver="551.86", cuda=12040, cc=(8, 9), files=WSL_FILES, name="NVIDIA GeForce RTX 4090")
    assert host.os == "wsl2"
    healthy = findings(run_doctor(host=host, environ=CLEAN, fs_root=wsl_tree(tmp_path / "a")))
    assert healthy["wsl.libcuda"].status == "ok" and healthy["wsl.no-linux-driver"].status == "ok"
    broken = findings(
        run_doctor(host=host, environ=CLEAN, fs_root=wsl_tree(tmp_path / "b", linux_driver=True, conf=False))
    )
    assert broken["wsl.libcuda"].status == "warn" and "LD_LIBRARY_PATH=/usr/lib/wsl/lib" in broken["wsl.libcuda"].fix
    assert broken["wsl.no-linux-driver"].status == "fail"


def test_doctor_cli_json_schema_and_exit_codes(tmp_path, tool_env):
    env = make_env(tmp_path / "env")
    done = subprocess.run(
        [sys.executable, "-m", "tfgpu", "doctor", "--prefix", str(env), "--json"],
        capture_output=True,
        text=True,
        env=tool_env,
    )
    document = json.loads(done.stdout)
    # which_env (how the env was chosen, tfgpu.envs.which) is the one key added to the contract
    assert set(document) == {"target", "summary", "ok", "findings", "which_env"}
    assert document["which_env"]["chosen_by"] == "--prefix" and document["which_env"]["prefix"] == str(env)
    assert set(document["findings"][0]) == {"id", "title", "status", "evidence", "fix"}
    assert done.returncode == (0 if document["ok"] else 1)
    assert done.returncode == 1  # no driver on this machine: driver.present fails
    # The text report's lines: the command in this process (its exit code is held above, by the process).
    human = run_tool("doctor", "--prefix", str(env), env=tool_env)
    assert "✗ fail driver.present" in human.stdout and "fix:" in human.stdout


def test_doctor_interpreter_flag_reads_the_same_env(tmp_path, local_wheels, tool_env):
    prefix = tmp_path / "real-env"
    assert (
        run_tool(
            "create",
            "--tf",
            "2.21",
            "--mode",
            "pip",
            "--python",
            "3.11",
            "--prefix",
            str(prefix),
            "--find-links",
            str(local_wheels),
            "--offline",
            "--no-verify",
            env=tool_env,
        ).returncode
        == 0
    )
    done = run_tool("doctor", "--interpreter", str(prefix / "bin" / "python"), "--json", env=tool_env)
    document = json.loads(done.stdout)
    assert document["target"]["env"]["tensorflow"] == "2.21.0"
    assert document["target"]["env"]["load_hook"] is True


def test_with_another_stack_loaded_first_doctor_reports_the_cudnn_tensorflow_gets(tmp_path):
    """The load hook loads the other CUDA stack's copies first (its OTHER_FIRST; here given as paths
    through TFGPU_OTHER_STACK_FIRST, the hook's own switch): doctor's probe does the same, so the
    cuDNN version and file it reports are the ones a TensorFlow process gets by SONAME, not the copy
    merely installed for TensorFlow; in an env with TensorFlow's set kept apart, libs.stacks says
    which libraries TensorFlow takes from the other stack."""
    from envtree import compile_library

    env = make_env(tmp_path / "env", tf_version="2.21.0", python="3.12", cudnn_version=92800)
    other = tmp_path / "other" / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9"
    compile_library(other, "libcudnn.so.9", "unsigned long cudnnGetVersion(void) { return 91900UL; }\n")
    kept_apart = env / "lib" / "tfgpu" / "cuda12" / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9"
    compile_library(kept_apart, "libcudnn.so.9", "unsigned long cudnnGetVersion(void) { return 92800UL; }\n")
    by_id = findings(run_doctor(env, host=gpu_host(), environ={**CLEAN, "TFGPU_OTHER_STACK_FIRST": str(other)}))
    cudnn = by_id["cudnn.version"]
    assert cudnn.title.startswith("cuDNN 9.19.0 >= "), cudnn.title
    assert cudnn.evidence[0].startswith(f"loaded {other}: cuDNN 9.19.0")
    assert any(
        line.startswith("TensorFlow's own ") and "nvidia/cudnn/lib/libcudnn.so.9" in line for line in cudnn.evidence
    )
    stacks = by_id["libs.stacks"]
    assert stacks.title == "TensorFlow computes with the other CUDA stack's cuDNN 9.19.0", stacks.title
    assert any(str(other) in line and str(kept_apart) in line for line in stacks.evidence)
    # the hook switched off: TensorFlow's own copy answers, and doctor says that instead
    plain = findings(run_doctor(env, host=gpu_host(), environ={**CLEAN, "TFGPU_OTHER_STACK_FIRST": "0"}))
    assert plain["cudnn.version"].title.startswith("cuDNN 9.28.0 >= ")


def test_the_hooks_other_first_list_is_read_as_the_hook_reads_it(tmp_path):
    from tfgpu.doctor.libraries import hook_other_first

    hook = tmp_path / "site" / "_tfgpu_cuda_hook.py"
    hook.parent.mkdir()
    hook.write_text('LIBRARIES = []\nOTHER_FIRST = ["nvidia/nccl/lib/libnccl.so.2"]\n')
    assert hook_other_first(hook, {}) == [str(tmp_path / "site" / "nvidia" / "nccl" / "lib" / "libnccl.so.2")]
    assert hook_other_first(hook, {"TFGPU_OTHER_STACK_FIRST": "off"}) == []
    assert hook_other_first(hook, {"TFGPU_OTHER_STACK_FIRST": "/a.so:/b.so"}) == ["/a.so", "/b.so"]
    assert hook_other_first(None, {}) == []


def test_the_library_probe_runs_while_the_records_are_read(tmp_path, monkeypatch):
    """The probe's child process loads the CUDA libraries (a third of a second for TensorFlow
    2.21's) while doctor reads the env's RECORDs: the mixed checks run before the probe has
    answered, and the report is the same as one made in turn."""
    import threading

    from tfgpu.doctor import libraries, mixed_checks

    env = make_env(tmp_path / "env")
    in_turn = [(f.id, f.status, f.title) for f in run_doctor(env, host=gpu_host(), environ=CLEAN).findings]
    started, released = threading.Event(), threading.Event()
    real_load, real_check = libraries.load_in_child, mixed_checks.check

    def held_load(*args, **kwargs):
        started.set()
        assert released.wait(60), "the mixed checks never ran while the probe was held"  # a hang guard only
        return real_load(*args, **kwargs)

    def check_while_probing(found_env):
        assert started.wait(60), "the probe had not started when the RECORDs were read"
        try:
            return real_check(found_env)
        finally:
            released.set()

    monkeypatch.setattr(libraries, "load_in_child", held_load)
    monkeypatch.setattr(mixed_checks, "check", check_while_probing)
    overlapped = [(f.id, f.status, f.title) for f in run_doctor(env, host=gpu_host(), environ=CLEAN).findings]
    assert overlapped == in_turn


def test_what_the_probe_raises_is_raised_where_its_findings_go(tmp_path, monkeypatch):
    """An env part the probe cannot read is the ``env.readable`` finding after the mixed checks', as
    before the probe ran beside them; anything else it raises reaches the command, not a thread."""
    from tfgpu.doctor import libraries

    env = make_env(tmp_path / "env")

    def unreadable(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(env / "lib"))

    monkeypatch.setattr(libraries, "resolve_libraries", unreadable)
    report = run_doctor(env, host=gpu_host(), environ=CLEAN)
    assert report.findings[-1].id == "env.readable" and str(env / "lib") in report.findings[-1].evidence[0]
    assert "libs.cudart" not in findings(report)

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in the probe")

    monkeypatch.setattr(libraries, "resolve_libraries", broken)
    with pytest.raises(RuntimeError, match="a bug in the probe"):
        run_doctor(env, host=gpu_host(), environ=CLEAN)


@pytest.mark.slow
def test_doctor_stopped_while_its_probe_loads_leaves_no_probe_behind(tmp_path, tool_env):
    """The probe's child is started by a thread of doctor's, not its main thread: a doctor stopped
    (SIGTERM) while a library's load blocks the probe exits with 143 and takes the probe with it
    (the child dies with the thread that started it, which dies with the process)."""
    import signal
    import time
    from pathlib import Path

    from envtree import compile_library

    def state(pid: int) -> str | None:
        """The process's state letter (``Z``: killed, not yet reaped), None once it is gone."""
        try:
            return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return None

    env = make_env(tmp_path / "env", hook=False)
    [cudart] = env.glob("lib/python3*/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12")
    # A load that blocks: the library's constructor sleeps (a hung NFS read looks the same to doctor).
    compile_library(
        cudart,
        "libcudart.so.12",
        "#include <unistd.h>\n__attribute__((constructor)) static void hang(void) { sleep(600); }\n",
    )
    doctor = subprocess.Popen(
        [sys.executable, "-m", "tfgpu", "doctor", "--prefix", str(env), "--json"],
        env=tool_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        probe, deadline = None, time.monotonic() + 120  # a hang guard only
        while probe is None and time.monotonic() < deadline and doctor.poll() is None:
            for entry in Path("/proc").iterdir():
                try:
                    cmdline = (entry / "cmdline").read_bytes()
                    ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, ValueError, IndexError):
                    continue
                if b"probe_libs.py" in cmdline and ppid == doctor.pid:
                    probe = int(entry.name)
            time.sleep(0.05)
        assert probe is not None, "the probe never started"
        doctor.send_signal(signal.SIGTERM)
        assert doctor.wait(timeout=60) == 143, doctor.stderr.read()[-2000:]
        assert b"Traceback" not in doctor.stderr.read()
        while state(probe) not in (None, "Z") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert state(probe) in (None, "Z"), "the probe outlived doctor"
    finally:
        if doctor.poll() is None:
            doctor.kill()
            doctor.wait()
