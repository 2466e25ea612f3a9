"""Driver detection: the four sources, their parsers, and reconciliation.

Every case runs :func:`tfgpu.detect.probe` against a ``RecordedSystem`` built from the recordings
in ``tests/fixtures/detect/`` (see its README for which are real). NVML and libcuda cannot answer
on the GPU-less build machine, so their answers are given as values: the H200 ones are what
nvidia-ml-py and ``cuDriverGetVersion`` returned on the project's H200 machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tfgpu.detect import probe
from tfgpu.detect.driver import cuda_from_int, parse_procfs
from tfgpu.detect.nvidia_smi import (
    LEGACY_FIELDS,
    parse_cuda_version,
    parse_query,
    query_argv,
    summary_argv,
)
from tfgpu.detect.recorded import RecordedSystem
from tfgpu.detect.system import NvmlDevice, NvmlSnapshot

FIXTURES = Path(__file__).parent / "fixtures" / "detect"
SMI = "/usr/bin/nvidia-smi"
PROCFS = "/proc/driver/nvidia/version"
H200_BYTES = 150754820096  # nvmlDeviceGetMemoryInfo().total on the H200 machine


def recording(name: str) -> str:
    return (FIXTURES / name).read_bytes().decode("utf-8", "replace")


def smi(
    *,
    query: str | None = None,
    q_compute: str | None = None,
    legacy: str | None = None,
    query_rc: int = 0,
    exe: str = SMI,
) -> dict:
    """Recorded nvidia-smi runs: fixture names for the csv query, the legacy query, ``-q``."""
    commands = {}
    if query is not None:
        commands[tuple(query_argv(exe))] = (query_rc, recording(query), "")
    if legacy is not None:
        commands[tuple(query_argv(exe, LEGACY_FIELDS))] = (0, recording(legacy), "")
    if q_compute is not None:
        commands[tuple(summary_argv(exe))] = (0, recording(q_compute), "")
    return commands


def gpu_system(
    *, nvml="libnvidia-ml.so.1 not found", libcuda=None, commands=None, procfs: str | None = None
) -> RecordedSystem:
    files = {PROCFS: recording(procfs)} if procfs else {}
    return RecordedSystem(
        files=files,
        executables={"nvidia-smi": SMI} if commands else {},
        commands=commands or {},
        nvml_answer=nvml,
        libcuda={"libcuda.so.1": libcuda} if libcuda is not None else {},
    )


def h200_nvml(count: int = 1, driver: str = "580.159.04", cuda: int = 13000) -> NvmlSnapshot:
    devices = tuple(
        NvmlDevice(i, "NVIDIA H200", (9, 0), H200_BYTES, f"GPU-5f1c7a2e-9d4b-4c3e-8a61-00000000000{i}")
        for i in range(count)
    )
    return NvmlSnapshot(driver, cuda, devices)


def test_h200_every_source_answers_and_agrees():
    system = gpu_system(
        nvml=h200_nvml(8),
        libcuda=13000,
        commands=smi(
            query="nvidia-smi/580.159.04-h200x8.query.txt",
            q_compute="nvidia-smi/580.159.04-h200.q-compute.txt",
        ),
        procfs="procfs/580.159.04-open.txt",
    )
    host = probe(system)
    driver = host.driver
    assert (driver.version, driver.cuda, driver.agree, driver.disagreement) == (
        "580.159.04",
        "13.0",
        True,
        None,
    )
    assert [(r.source, r.ok, r.driver_version, r.cuda) for r in driver.readings] == [
        ("nvml", True, "580.159.04", "13.0"),
        ("libcuda", True, None, "13.0"),
        ("nvidia-smi", True, "580.159.04", "13.0"),
        ("procfs", True, "580.159.04", None),
    ]
    assert len(host.gpus) == 8
    assert {(g.name, g.compute_capability, g.memory_mib, g.source) for g in host.gpus} == {
        ("NVIDIA H200", "9.0", 143771, "nvml")
    }
    assert [g.index for g in host.gpus] == list(range(8))
    assert not any("driver" in note.lower() for note in host.notes)


def test_gpus_come_from_nvidia_smi_when_nvml_does_not_answer():
    system = gpu_system(
        nvml="nvidia-ml-py is not installed",
        libcuda=12020,
        commands=smi(
            query="nvidia-smi/535.104.05-a100.query.txt",
            q_compute="nvidia-smi/535.104.05-a100.q-compute.txt",
        ),
        procfs="procfs/535.104.05-proprietary.txt",
    )
    host = probe(system)
    assert (host.driver.version, host.driver.cuda, host.driver.agree) == (
        "535.104.05",
        "12.2",
        True,
    )
    assert host.driver.readings[0].error == "nvidia-ml-py is not installed"
    (gpu,) = host.gpus
    assert gpu.to_dict() == {
        "index": 0,
        "name": "NVIDIA A100-SXM4-80GB",
        "compute_capability": "8.0",
        "memory_mib": 81920,
        "uuid": "GPU-3b0e6c1d-7f2a-4e59-9c1b-5d8e2a4f6b70",
        "source": "nvidia-smi",
    }


def test_a_driver_that_does_not_know_compute_cap_is_asked_again_without_it():
    commands = smi(
        query="nvidia-smi/470.199.02.compute-cap-error.txt",
        query_rc=2,
        legacy="nvidia-smi/470.199.02-t4.legacy-query.txt",
        q_compute="nvidia-smi/470.199.02-t4.q-compute.txt",
    )
    system = gpu_system(commands=commands)
    host = probe(system)
    assert (host.driver.version, host.driver.cuda) == ("470.199.02", "11.4")
    (gpu,) = host.gpus
    assert (gpu.name, gpu.compute_capability, gpu.memory_mib) == ("Tesla T4", "", 15109)
    assert tuple(query_argv(SMI, LEGACY_FIELDS)) in system.ran


def test_disagreement_after_an_upgrade_without_a_reboot():
    system = gpu_system(
        nvml=NvmlSnapshot("535.129.03", 12020, ()),
        libcuda=12020,
        commands=smi(
            query="nvidia-smi/535.129.03-a100.query.txt",
            q_compute="nvidia-smi/535.104.05-a100.q-compute.txt",
        ),
        procfs="procfs/535.104.05-proprietary.txt",
    )
    driver = probe(system).driver
    assert driver.version == "535.129.03"  # NVML wins
    assert driver.agree is False
    assert "NVML says 535.129.03" in driver.disagreement
    assert "/proc/driver/nvidia/version says 535.104.05" in driver.disagreement
    assert "without a reboot" in driver.disagreement
    assert "CUDA" not in driver.disagreement  # every CUDA answer was 12.2


def test_library_mismatch_falls_back_to_the_kernel_module_and_says_reboot():
    system = gpu_system(
        nvml="Driver/library version mismatch",
        libcuda=12020,
        commands={tuple(query_argv(SMI)): (18, recording("nvidia-smi/mismatch.txt"), "")},
        procfs="procfs/535.104.05-proprietary.txt",
    )
    host = probe(system)
    assert (host.driver.version, host.driver.cuda, host.driver.agree) == (
        "535.104.05",
        "12.2",
        True,
    )
    smi_reading = host.driver.readings[2]
    assert (smi_reading.ok, smi_reading.error) == (
        False,
        "Failed to initialize NVML: Driver/library version mismatch",
    )
    assert host.gpus == ()
    assert any("reboot" in note for note in host.notes)


@pytest.mark.parametrize("smi_installed", [True, False])
def test_no_driver_at_all_is_a_fact_not_an_error(smi_installed):
    no_driver = (9, recording("nvidia-smi/no-driver.txt"), "")
    commands = {tuple(query_argv(SMI)): no_driver, tuple(summary_argv(SMI)): no_driver}
    host = probe(gpu_system(commands=commands if smi_installed else None))
    assert host.driver is None
    assert host.gpus == ()
    (note,) = [note for note in host.notes if note.startswith("No NVIDIA driver answered")]
    assert "libnvidia-ml.so.1 not found" in note
    expected = "couldn't communicate with the NVIDIA driver" if smi_installed else "not on PATH"
    assert expected in note


def test_garbage_output_is_recorded_not_raised():
    commands = smi(query="nvidia-smi/garbage.txt", q_compute="nvidia-smi/garbage.txt")
    host = probe(gpu_system(nvml=h200_nvml(), libcuda=13000, commands=commands, procfs="procfs/garbage.txt"))
    nvml, libcuda, smi_reading, procfs = host.driver.readings
    assert nvml.ok and libcuda.ok
    assert not smi_reading.ok and smi_reading.error.startswith("unexpected")
    assert not procfs.ok and procfs.error.startswith("unexpected")
    assert (host.driver.version, host.driver.agree) == ("580.159.04", True)
    assert [g.source for g in host.gpus] == ["nvml"]


def test_garbage_everywhere_means_no_driver():
    commands = smi(query="nvidia-smi/garbage.txt", q_compute="nvidia-smi/garbage.txt")
    host = probe(
        gpu_system(
            libcuda="cuDriverGetVersion failed with CUresult 999",
            commands=commands,
            procfs="procfs/garbage.txt",
        )
    )
    assert host.driver is None and host.gpus == ()


def test_nvidia_smi_timing_out_is_an_error_of_that_source():
    timeout = (124, "", "timed out after 10 s")
    commands = {tuple(query_argv(SMI)): timeout, tuple(summary_argv(SMI)): timeout}
    host = probe(gpu_system(nvml=h200_nvml(), commands=commands))
    assert host.driver.readings[2].error == "timed out after 10 s"
    assert host.driver.version == "580.159.04"


def test_libcuda_alone_gives_the_cuda_version_but_no_driver_version():
    host = probe(gpu_system(libcuda=12040))
    assert (host.driver.version, host.driver.cuda, host.driver.agree) == (None, "12.4", True)


def test_cuda_versions_that_disagree_are_reported():
    system = gpu_system(nvml=h200_nvml(cuda=12080), libcuda=13000)
    driver = probe(system).driver
    assert driver.agree is False
    assert driver.disagreement == "The driver sources disagree (CUDA version: NVML says 12.8, libcuda says 13.0)."


def test_nvml_devices_it_cannot_read_become_notes():
    snapshot = NvmlSnapshot("580.159.04", 13000, h200_nvml().devices, ("GPU 1: GPU is lost",))
    host = probe(gpu_system(nvml=snapshot))
    assert len(host.gpus) == 1
    assert "NVML could not read GPU 1: GPU is lost" in host.notes


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("procfs/580.159.04-open.txt", "580.159.04"),
        ("procfs/535.104.05-proprietary.txt", "535.104.05"),
        ("procfs/470.199.02-aarch64.txt", "470.199.02"),
        ("procfs/garbage.txt", None),
    ],
)
def test_parse_procfs(name, version):
    assert parse_procfs(recording(name)) == version


@pytest.mark.parametrize(
    ("name", "cuda"),
    [
        ("nvidia-smi/580.159.04-h200.q-compute.txt", "13.0"),
        ("nvidia-smi/580.159.04-h200.table.txt", "13.0"),
        ("nvidia-smi/535.104.05-a100.q-compute.txt", "12.2"),
        ("nvidia-smi/wsl2-551.86-rtx4090.q-compute.txt", None),
        ("nvidia-smi/wsl2-551.86-rtx4090.table.txt", None),
    ],
)
def test_parse_cuda_version(name, cuda):
    assert parse_cuda_version(recording(name)) == cuda


def test_parse_cuda_version_rejects_output_without_it():
    with pytest.raises(ValueError):
        parse_cuda_version(recording("nvidia-smi/garbage.txt"))


def test_parse_query_keeps_a_name_with_a_comma_and_unknown_fields():
    rows = parse_query("550.54.15, NVIDIA RTX A6000, Ada, 8.9, [N/A], [N/A]\n")
    ((driver, gpu),) = rows
    assert driver == "550.54.15"
    assert (gpu.name, gpu.compute_capability, gpu.memory_mib, gpu.uuid) == (
        "NVIDIA RTX A6000, Ada",
        "8.9",
        None,
        None,
    )


def test_parse_query_of_the_real_h200_legacy_query():
    ((driver, gpu),) = parse_query(recording("nvidia-smi/580.159.04-h200.legacy-query.txt"), with_cc=False)
    assert (driver, gpu.name, gpu.compute_capability, gpu.memory_mib) == (
        "580.159.04",
        "NVIDIA H200",
        "",
        143771,
    )


def test_the_real_bad_field_message_is_what_the_retry_looks_for():
    # Recorded on driver 580 with a made-up field: old drivers word a missing compute_cap alike.
    assert "is not a valid field to query" in recording("nvidia-smi/580.159.04.bad-field.txt")


@pytest.mark.parametrize(("value", "text"), [(13000, "13.0"), (12040, "12.4"), (11080, "11.8"), (12010, "12.1")])
def test_cuda_from_int(value, text):
    assert cuda_from_int(value) == text


def test_the_loader_check_answers_like_ctypes():
    """``System`` asks the dynamic loader before it calls into a library: a library that is there
    (libc) loads, one that is not gives ctypes' own message."""
    import ctypes

    from tfgpu.detect.system import _loads

    assert _loads("libc.so.6") is None
    with pytest.raises(OSError) as raised:
        ctypes.CDLL("libtfgpu-no-such-library.so.1")
    assert _loads("libtfgpu-no-such-library.so.1") == str(raised.value)


def test_the_probe_glob_finds_what_glob_finds(tmp_path):
    """The probe walks its ``prefix*`` patterns with scandir instead of ``glob``; the answers must be
    ``glob``'s, hidden entries, symbolic links (broken too) and files in place of directories included."""
    import glob
    import os

    from tfgpu.detect.system import _prefix_glob

    root = tmp_path / "versions"
    for version in ("3.10.4", "3.12.1", ".3.9-hidden", "2.7.18"):
        (root / version / "bin").mkdir(parents=True)
        (root / version / "bin" / f"python{version[:4].lstrip('.')}").write_text("")
        (root / version / "bin" / "python3.x-config").write_text("")
    (root / "3.11-file").write_text("a file where a version directory would be")
    (root / "3.13-link").symlink_to(root / "3.12.1")
    (root / "3.12.1" / "bin" / "python3.broken").symlink_to(tmp_path / "nowhere")
    for pattern in (
        f"{root}/3.*/bin/python3.*",
        f"{root}/3.*",
        f"{root}/*",
        f"{root}/.*",
        f"{root}/3.*/bin",
        f"{root}/none-*/bin/x",
        f"{tmp_path}/nowhere-*",
        f"{root}/3.1[02]*/bin/*",  # not a prefix pattern: glob's own answer
    ):
        assert sorted(_prefix_glob(pattern)) == sorted(glob.glob(pattern)), pattern
    assert os.path.islink(f"{root}/3.12.1/bin/python3.broken")
