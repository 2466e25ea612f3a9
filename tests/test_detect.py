"""The host probe: platform facts, WSL2, toolkits, conda executables, the Host document, and the
real probe on this machine.

Recorded cases run against a ``RecordedSystem``. Where NVML or libcuda must answer (WSL2), their
answers are given as values: this build machine has no GPU, so that boundary cannot be real here.
The toolkit and System tests touch the real filesystem and run real child processes.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest
from hangguard import hang_guard

from tfgpu import records
from tfgpu.detect import CondaExe, Host, System, Toolkit, probe
from tfgpu.detect.nvidia_smi import query_argv, summary_argv
from tfgpu.detect.platform_facts import find_interpreters
from tfgpu.detect.recorded import RecordedSystem
from tfgpu.detect.system import NvmlSnapshot, PlatformFacts

FIXTURES = Path(__file__).parent / "fixtures" / "detect"
WSL_LIB = "/usr/lib/wsl/lib"


def recording(name: str) -> str:
    return (FIXTURES / name).read_bytes().decode("utf-8", "replace")


# -- platform --------------------------------------------------------------------------------


def test_linux_facts_from_real_recordings():
    system = RecordedSystem(
        files={
            "/etc/os-release": recording("os/debian-12.os-release"),
            "/proc/sys/kernel/osrelease": recording("os/debian-12.osrelease"),
        },
        executables={
            "python3.11": "/usr/bin/python3.11",
            "python3.13": "/opt/py/bin/python3.13",
            "python3": "/usr/bin/python3",
        },
    )
    host = probe(system)
    assert (host.os, host.arch, host.os_release, host.glibc, host.python) == (
        "linux",
        "x86_64",
        "Debian GNU/Linux 12 (bookworm)",
        "2.36",
        "3.11",
    )
    assert host.pythons == ("3.11", "3.13")
    assert system.ran == []  # Pythons are found, never run


def test_pyenv_shims_are_looked_through_to_installed_versions():
    """A pyenv shim for an unselected version fails when run (seen on this build machine), so
    the interpreter reported is the one under $PYENV_ROOT/versions, or none."""
    system = RecordedSystem(
        files={
            "/root/.pyenv/versions/3.12.1/bin/python3.12": "\x7fELF",
            "/root/.local/share/uv/python/cpython-3.13.0-linux-x86_64-gnu/bin/python3.13": "\x7fELF",
        },
        executables={
            "python3.11": "/usr/bin/python3.11",
            "python3.12": "/root/.pyenv/shims/python3.12",
            "python3.10": "/root/.pyenv/shims/python3.10",  # shim, but 3.10 is not installed
        },
        environ={"HOME": "/root"},
    )
    assert find_interpreters(system) == {
        "3.11": "/usr/bin/python3.11",
        "3.12": "/root/.pyenv/versions/3.12.1/bin/python3.12",
        "3.13": "/root/.local/share/uv/python/cpython-3.13.0-linux-x86_64-gnu/bin/python3.13",
    }
    assert probe(system).pythons == ("3.11", "3.12", "3.13")


def test_os_release_falls_back_and_may_be_unknown():
    ubuntu = RecordedSystem(files={"/usr/lib/os-release": recording("os/ubuntu-24.04.os-release")})
    assert probe(ubuntu).os_release == "Ubuntu 24.04.3 LTS"
    assert probe(RecordedSystem()).os_release == ""


@pytest.mark.parametrize(
    ("system", "machine", "expected"),
    [
        ("Linux", "aarch64", ("linux", "aarch64", "2.36")),
        ("Linux", "arm64", ("linux", "aarch64", "2.36")),
        ("Windows", "AMD64", ("windows", "x86_64", None)),
        ("Darwin", "arm64", ("macos", "aarch64", None)),
        ("Linux", "ppc64le", ("linux", "ppc64le", "2.36")),
    ],
)
def test_os_and_arch_are_normalized(system, machine, expected):
    facts = PlatformFacts(system=system, machine=machine, python="3.12", glibc="2.36", description="X 1")
    host = probe(RecordedSystem(facts=facts))
    assert (host.os, host.arch, host.glibc) == expected
    if system != "Linux":
        assert host.os_release == "X 1"


def test_macos_tries_no_driver_source():
    facts = PlatformFacts(system="Darwin", machine="arm64", python="3.12", glibc=None, description="macOS 14.4")
    system = RecordedSystem(facts=facts, executables={"nvidia-smi": "/usr/local/bin/nvidia-smi"})
    host = probe(system)
    assert (host.driver, host.gpus, host.os_release, system.ran) == (None, (), "macOS 14.4", [])


# -- WSL -------------------------------------------------------------------------------------


def wsl2_system(**overrides) -> RecordedSystem:
    """A WSL2 distribution with the Windows driver 551.86 mounted at /usr/lib/wsl/lib, which is
    not on the loader path or PATH. NVML and libcuda answers are values (no GPU here)."""
    smi = f"{WSL_LIB}/nvidia-smi"
    settings = dict(
        files={
            "/proc/sys/kernel/osrelease": recording("os/wsl2.osrelease"),
            f"{WSL_LIB}/libcuda.so.1": "",
            smi: "",
        },
        commands={
            tuple(query_argv(smi)): (0, recording("nvidia-smi/wsl2-551.86-rtx4090.query.txt"), ""),
            tuple(summary_argv(smi)): (
                0,
                recording("nvidia-smi/wsl2-551.86-rtx4090.q-compute.txt"),
                "",
            ),
        },
        nvml_answer=NvmlSnapshot("551.86", 12040, ()),
        libcuda={f"{WSL_LIB}/libcuda.so.1": 12040},
    )
    settings.update(overrides)
    return RecordedSystem(**settings)


# -- probing only what the options leave open ------------------------------------------------


def test_driver_and_gpu_cc_given_leave_the_driver_unprobed():
    """With both given nothing of the driver is read: nvidia-smi is not run, NVML and libcuda are
    not asked (their recorded answers would otherwise appear), and the notes say why."""
    system = wsl2_system()
    host = probe(system, given={"driver": "535.104.05", "gpu_cc": "8.6"})
    assert (host.os, host.driver, host.gpus, system.ran) == ("wsl2", None, (), [])
    assert host.notes[-1] == "The NVIDIA driver and the GPUs were not probed: --driver and --gpu-cc were given."
    only_driver = probe(wsl2_system(), given={"driver": "535.104.05"})
    assert only_driver.driver is not None and only_driver.gpus  # --gpu-cc still open: GPUs read


def test_another_machines_os_or_arch_leaves_the_rest_of_this_one_unprobed():
    """``--os windows`` on Linux: only the OS and arch are read (no os-release, no PATH walk, no
    driver, no toolkit); the same OS and arch given as this machine's probe as usual."""
    system = wsl2_system(
        files={
            "/proc/sys/kernel/osrelease": recording("os/debian-12.osrelease"),
            "/etc/os-release": recording("os/debian-12.os-release"),
        },
        executables={"python3.11": "/usr/bin/python3.11", "conda": "/opt/conda/bin/conda"},
    )
    elsewhere = probe(system, given={"os": "windows", "arch": None})
    assert (
        elsewhere.os,
        elsewhere.arch,
        elsewhere.os_release,
        elsewhere.pythons,
        elsewhere.driver,
        elsewhere.toolkits,
        elsewhere.conda,
        system.ran,
    ) == ("linux", "x86_64", "", (), None, (), (), [])
    assert "the target (windows) is another machine" in elsewhere.notes[-1]
    assert probe(system, given={"arch": "aarch64"}).pythons == ()
    here = probe(system, given={"os": "Linux", "arch": "amd64"})  # aliases of this machine's own
    assert (here.os_release, here.pythons) == ("Debian GNU/Linux 12 (bookworm)", ("3.11",))
    assert here == probe(system)


def test_wsl2_with_the_windows_driver():
    host = probe(wsl2_system())
    assert host.os == "wsl2"
    readings = {r.source: r for r in host.driver.readings}
    assert readings["libcuda"].cuda == "12.4"
    assert (
        readings["nvidia-smi"].ok,
        readings["nvidia-smi"].driver_version,
        readings["nvidia-smi"].cuda,
    ) == (
        True,
        "551.86",
        None,  # "CUDA Version: ERR!" is unknown, not a failure and not a disagreement
    )
    assert not readings["procfs"].ok
    assert (host.driver.version, host.driver.cuda, host.driver.agree) == ("551.86", "12.4", True)
    (gpu,) = host.gpus
    assert (gpu.compute_capability, gpu.source) == ("8.9", "nvidia-smi")  # NVML listed no device
    notes = "\n".join(host.notes)
    assert "WSL2: libcuda is provided by the Windows driver at /usr/lib/wsl/lib" in notes
    assert "CUDA Version: ERR!" in notes
    assert "add /usr/lib/wsl/lib to LD_LIBRARY_PATH" in notes


def test_wsl2_where_libcuda_loads_by_name_needs_no_path_note():
    host = probe(wsl2_system(libcuda={"libcuda.so.1": 12040}))
    assert host.driver.readings[1].ok
    assert not any("LD_LIBRARY_PATH" in note for note in host.notes)


def test_wsl2_without_the_windows_driver():
    system = RecordedSystem(files={"/proc/sys/kernel/osrelease": recording("os/wsl2.osrelease")})
    host = probe(system)
    assert (host.os, host.driver) == ("wsl2", None)
    assert any("never install a Linux NVIDIA driver inside WSL" in note for note in host.notes)


def test_wsl2_with_a_custom_kernel_is_recognized_by_its_environment():
    system = RecordedSystem(
        files={"/proc/sys/kernel/osrelease": "6.6.36-custom\n"},
        environ={"WSL_DISTRO_NAME": "Ubuntu"},
    )
    assert probe(system).os == "wsl2"


def test_wsl1_is_linux_with_a_note():
    host = probe(RecordedSystem(files={"/proc/sys/kernel/osrelease": recording("os/wsl1.osrelease")}))
    assert host.os == "linux"
    assert any(note.startswith("WSL1 detected") for note in host.notes)


# -- toolkits --------------------------------------------------------------------------------


def test_toolkits_from_version_files_nvcc_and_path_deduplicated():
    system = RecordedSystem(
        files={
            "/usr/local/cuda-12.4/version.json": recording("toolkit/12.4.1.version.json"),
            "/usr/local/cuda-10.2/version.txt": recording("toolkit/10.2.89.version.txt"),
            "/usr/local/cuda-12.4/bin/nvcc": "\x7fELF",
        },
        dirs=["/usr/local/cuda-9.0-removed"],  # a leftover directory with nothing in it
        links={"/usr/local/cuda": "/usr/local/cuda-12.4"},
        executables={"nvcc": "/opt/nvhpc/cuda/bin/nvcc"},
        commands={("/opt/nvhpc/cuda/bin/nvcc", "--version"): (0, recording("toolkit/nvcc-12.4.txt"), "")},
        environ={"CUDA_HOME": "/usr/local/cuda-12.4"},
    )
    assert probe(system).toolkits == (
        Toolkit("12.4.1", "/usr/local/cuda", "version.json"),
        Toolkit("10.2.89", "/usr/local/cuda-10.2", "version.txt"),
        Toolkit("12.4", "/opt/nvhpc/cuda", "nvcc"),
    )
    assert system.ran == [("/opt/nvhpc/cuda/bin/nvcc", "--version")]  # only where no file answered


def test_nvcc_wrapper_script_is_followed_to_its_toolkit():
    # This build machine's layout: /usr/local/cuda -> cuda-13.0 (no version.json) and a wrapper
    # script /usr/local/bin/nvcc that execs the toolkit's nvcc.
    system = RecordedSystem(
        files={
            "/usr/local/bin/nvcc": '#!/bin/sh\nexec /usr/local/cuda-13.0/bin/nvcc "$@"\n',
            "/usr/local/cuda-13.0/bin/nvcc": "\x7fELF",
        },
        links={"/usr/local/cuda": "/usr/local/cuda-13.0"},
        executables={"nvcc": "/usr/local/bin/nvcc"},
        commands={("/usr/local/cuda/bin/nvcc", "--version"): (0, recording("toolkit/nvcc-13.0.txt"), "")},
    )
    host = probe(system)
    assert host.toolkits == (Toolkit("13.0", "/usr/local/cuda", "nvcc"),)
    assert system.ran == [("/usr/local/cuda/bin/nvcc", "--version")]
    assert any("no NVIDIA driver answered: a toolkit alone" in note for note in host.notes)


def test_cuda_13_without_version_file_is_read_from_cuda_h_without_running_nvcc():
    """CUDA 13 ships no version.json (this build machine and the H200 both): cuda.h's
    CUDA_VERSION define answers before nvcc would be run."""
    system = RecordedSystem(
        files={
            "/usr/local/cuda-13.0/include/cuda.h": recording("toolkit/13.0.cuda.h.txt"),
            "/usr/local/cuda-13.0/bin/nvcc": "\x7fELF",
        },
        links={"/usr/local/cuda": "/usr/local/cuda-13.0"},
    )
    assert probe(system).toolkits == (Toolkit("13.0", "/usr/local/cuda", "cuda.h"),)
    assert system.ran == []


def test_a_toolkit_newer_than_the_driver_is_noted():
    system = RecordedSystem(
        files={"/usr/local/cuda-12.4/version.json": recording("toolkit/12.4.1.version.json")},
        nvml_answer=NvmlSnapshot("535.104.05", 12020, ()),
    )
    (note,) = [note for note in probe(system).notes if "toolkit" in note]
    assert note.startswith("CUDA toolkit 12.4.1 at /usr/local/cuda-12.4 is newer than the CUDA 12.2")


class SpySystem(System):
    """The real System, recording which commands it ran."""

    def __init__(self):
        self.ran = []

    def run(self, argv, timeout=10.0):
        self.ran.append(list(argv))
        return super().run(argv, timeout)


def test_real_toolkit_trees_in_tmp_path(tmp_path, monkeypatch):
    with_json = tmp_path / "cuda-12.4"
    with_json.mkdir()
    shutil.copy(FIXTURES / "toolkit/12.4.1.version.json", with_json / "version.json")
    (with_json / "bin").mkdir()
    (with_json / "bin/nvcc").write_text("#!/bin/sh\nexit 99\n")  # must not be run
    nvcc_only = tmp_path / "cuda-from-tarball"
    (nvcc_only / "bin").mkdir(parents=True)
    script = nvcc_only / "bin/nvcc"
    script.write_text(f"#!/bin/sh\ncat '{FIXTURES / 'toolkit/nvcc-12.4.txt'}'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("CUDA_HOME", str(with_json))
    monkeypatch.setenv("CUDA_PATH", str(nvcc_only))

    system = SpySystem()
    found = {t.path: t for t in probe(system).toolkits}
    assert found[str(with_json)] == Toolkit("12.4.1", str(with_json), "version.json")
    assert found[str(nvcc_only)] == Toolkit("12.4", str(nvcc_only), "nvcc")
    assert [str(with_json / "bin/nvcc"), "--version"] not in system.ran


# -- conda -----------------------------------------------------------------------------------


def test_conda_family_executables_deduplicated_by_real_path():
    system = RecordedSystem(
        files={"/opt/conda/bin/conda": "", "/home/u/.local/bin/micromamba": ""},
        environ={"CONDA_EXE": "/opt/conda/bin/conda", "MAMBA_EXE": "/home/u/.local/bin/micromamba"},
        executables={
            "conda": "/opt/conda/condabin/conda",
            "micromamba": "/home/u/bin/micromamba",
            "pixi": "/home/u/.pixi/bin/pixi",
        },
        links={"/home/u/bin/micromamba": "/home/u/.local/bin/micromamba"},
    )
    assert probe(system).conda == (
        CondaExe("conda", "/opt/conda/bin/conda"),
        CondaExe("micromamba", "/home/u/.local/bin/micromamba"),
        CondaExe("conda", "/opt/conda/condabin/conda"),
        CondaExe("pixi", "/home/u/.pixi/bin/pixi"),
    )


# -- the Host document -----------------------------------------------------------------------


def test_host_is_frozen_and_its_dict_is_plain_json():
    host = probe(wsl2_system(executables={"python3.12": "/usr/bin/python3.12", "conda": "/opt/conda/bin/conda"}))
    with pytest.raises(records.FrozenInstanceError):
        host.os = "linux"
    document = host.to_dict()
    assert json.loads(json.dumps(document)) == document  # lists, not tuples; nothing exotic
    assert set(document) == set(records.fields(Host))
    assert document["driver"]["readings"][0] == {
        "source": "nvml",
        "ok": True,
        "driver_version": "551.86",
        "cuda": "12.4",
        "error": None,
    }


# -- the real machine ------------------------------------------------------------------------


def _has_nvidia_driver() -> bool:
    return os.path.exists("/proc/driver/nvidia/version") or shutil.which("nvidia-smi") is not None


def test_real_system_answers_without_raising(tmp_path):
    system = System()
    assert system.file_text(str(tmp_path / "missing")) is None
    assert system.run([str(tmp_path / "missing")]) is None
    assert system.run(["sleep", "5"], timeout=0.2).returncode == 124
    done = system.run(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")
    if not _has_nvidia_driver():
        assert isinstance(system.nvml(), str)
        assert isinstance(system.libcuda_driver_version("libcuda.so.1"), str)


def test_real_probe_on_this_machine(monkeypatch):
    """What made a probe slow is a program it starts running into its timeout: none does here, and
    the probe ends (a hang guard, no bound on its time)."""
    ran = []
    real_run = System.run

    def recording(self, argv, timeout=10.0):
        done = real_run(self, argv, timeout=timeout)
        ran.append((argv[0], None if done is None else done.returncode))
        return done

    monkeypatch.setattr(System, "run", recording)
    with hang_guard("probe() on this machine"):
        host = probe()
    assert isinstance(host, Host)
    json.dumps(host.to_dict())
    assert [program for program, code in ran if code == 124] == [], ran
    if not _has_nvidia_driver():
        assert host.driver is None and host.gpus == ()
    if not os.path.isdir("/usr/local/cuda"):
        pytest.skip("no /usr/local/cuda on this machine")
    real = os.path.realpath("/usr/local/cuda")
    assert any(os.path.realpath(t.path) == real for t in host.toolkits), host.toolkits


@pytest.mark.gpu
def test_real_probe_on_a_gpu_machine():
    if not _has_nvidia_driver():
        pytest.skip("no NVIDIA driver on this machine")
    host = probe()
    assert host.driver is not None and host.driver.agree, host.driver
    assert host.gpus and all(gpu.compute_capability for gpu in host.gpus)
    assert [r.source for r in host.driver.readings if r.ok][:1] == ["nvml"]


def test_which_finds_what_shutil_which_finds(tmp_path, monkeypatch):
    """The probe's own PATH walk (it spares plan the import of shutil) answers as shutil.which."""
    import shutil

    from tfgpu.detect.system import which

    first, second = tmp_path / "a", tmp_path / "b"
    for folder in (first, second):
        folder.mkdir()
    (first / "tool").write_text("")  # not executable: skipped
    (second / "tool").write_text("#!/bin/sh\n")
    (second / "tool").chmod(0o755)
    (first / "dir").mkdir()  # a directory is never the answer
    (second / "dir").write_text("")
    (second / "dir").chmod(0o755)
    paths = [f"{first}{os.pathsep}{second}", f"{second}{os.pathsep}{second}", "", str(first)]
    for path in paths:
        monkeypatch.setenv("PATH", path)
        for name in ("tool", "dir", "absent", str(second / "tool"), str(first / "tool")):
            assert which(name) == shutil.which(name), (path, name)
    monkeypatch.delenv("PATH")
    assert which("sh") == shutil.which("sh")
