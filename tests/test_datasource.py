"""The pieces of tfgpu.datasource (shared by scripts/regen_tf_data.py and update-data), on
hand-made inputs and recorded wheel members: the remote zip reader, METADATA and extras,
build_info.py, cuda_config.h and cudnn_version.h (TF 2.22's layout), versions and wheel tags."""

from __future__ import annotations

import io
import tomllib
import zipfile
from pathlib import Path

import pypifixture
import pytest

from tfgpu.datasource import releases, remote_zip, toml_out, wheel_facts

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "pypi"
WHEEL_2_22 = "tensorflow-2.22.0rc0-cp314-cp314-manylinux_2_27_x86_64.whl"


def _zip_fetcher(data: bytes):
    calls = []

    def fetch(start: int, end: int) -> bytes:
        assert 0 <= start <= end < len(data)
        calls.append((start, end))
        return data[start : end + 1]

    return fetch, calls


@pytest.mark.parametrize("zip64", [False, True])
def test_reads_members_by_range_including_zip64(monkeypatch, zip64):
    if zip64:  # make zipfile write zip64 end records and zip64 extra fields for every entry
        monkeypatch.setattr(zipfile, "ZIP_FILECOUNT_LIMIT", 0)
        monkeypatch.setattr(zipfile, "ZIP64_LIMIT", 0)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as wheel:
        wheel.writestr("tensorflow/__init__.py", b"x" * 5000, zipfile.ZIP_DEFLATED)
        wheel.writestr("tensorflow/python/platform/build_info.py", "is_cuda_build = True\n", zipfile.ZIP_STORED)
        wheel.writestr("tensorflow-9.9.dist-info/METADATA", "Name: tensorflow\n" * 50, zipfile.ZIP_DEFLATED)
    data = buffer.getvalue()
    assert (b"PK\x06\x06" in data) is zip64
    fetch, calls = _zip_fetcher(data)
    members = remote_zip.read_wheel_members(fetch, len(data))
    assert members.build_info == "is_cuda_build = True\n"
    assert members.metadata == "Name: tensorflow\n" * 50
    assert all(end - start < 20_000 for start, end in calls)


def test_parses_both_build_info_styles():
    old = "is_rocm_build = False\nis_cuda_build = True\n\ncuda_version_number = '10.1'\ncudnn_version_number = '7'\n"
    assert wheel_facts.parse_build_info(old) == wheel_facts.BuildInfo(True, "10.1", "7", (), "10.1", "7")
    new = (
        "import collections\nbuild_info = collections.OrderedDict([('cuda_compute_capabilities', "
        "['sm_35', 'compute_80']), ('cuda_version', '64_112'), ('cudnn_version', '64_8'), "
        "('is_cuda_build', True), ('cpu_compiler', some_name)])\n"
    )
    assert wheel_facts.parse_build_info(new) == wheel_facts.BuildInfo(
        True, "11.2", "8", ("sm_35", "compute_80"), "64_112", "64_8"
    )
    assert wheel_facts.parse_build_info("is_cuda_build = False\n").cuda_build is False
    assert wheel_facts.parse_build_info("build_info = {'is_cuda_build': False}\n").cuda == ""


@pytest.mark.parametrize("written", ["5", "'sm_80'", "None"])
def test_build_info_whose_compute_capabilities_are_no_list_is_a_bad_answer(written):
    """A number was a TypeError, a string read as one capability a letter: both are refused."""
    with pytest.raises(wheel_facts.SourceError, match="cuda_compute_capabilities is not a list"):
        wheel_facts.parse_build_info(f"build_info = {{'cuda_compute_capabilities': {written}}}\n")


@pytest.mark.parametrize(
    "raw, normalized",
    [
        ("64_112", "11.2"),
        ("64_101", "10.1"),
        ("64_110", "11.0"),
        ("64_8", "8"),
        ("64_7", "7"),
        ("12.5.1", "12.5.1"),
        ("", ""),
    ],
)
def test_normalizes_windows_dll_suffixes(raw, normalized):
    assert wheel_facts.normalize_dll_version(raw) == normalized


SHIM_METADATA = """\
Metadata-Version: 2.1
Name: tensorflow
Version: 2.13.1
Requires-Dist: tensorflow-macos (==2.13.1) ; platform_system == "Darwin" and platform_machine == "arm64"
Requires-Dist: tensorflow-cpu-aws (==2.13.1) ; platform_system == "Linux" and (platform_machine == "arm64" or platform_machine == "aarch64")
Requires-Dist: tensorflow-intel (==2.13.1) ; platform_system == "Windows"
Requires-Dist: tensorflow-io-gcs-filesystem (>=0.23.1) ; platform_machine != "arm64" or platform_system != "Darwin"
Requires-Dist: numpy<2.2.0,>=1.26.0
Requires-Dist: nvidia-cudnn-cu12==9.3.0.75; extra == "and-cuda"

"""


@pytest.mark.parametrize(
    "platform, target",
    [
        ("linux_aarch64", ("tensorflow-cpu-aws", "2.13.1")),
        ("windows_x86_64", ("tensorflow-intel", "2.13.1")),
        ("macos_arm64", ("tensorflow-macos", "2.13.1")),
        ("macos_x86_64", None),
        ("linux_x86_64", None),
    ],
)
def test_finds_the_shim_target_for_each_platform(platform, target):
    assert wheel_facts.find_shim_target(wheel_facts.parse_requirements(SHIM_METADATA), platform) == target


def test_parses_old_and_new_requirement_syntax():
    reqs = {r.name: r for r in wheel_facts.parse_requirements(SHIM_METADATA)}
    assert reqs["tensorflow-intel"].specifier == "==2.13.1"
    assert reqs["numpy"] == wheel_facts.Requirement("numpy", "<2.2.0,>=1.26.0", "")
    assert wheel_facts.marker_extra(reqs["nvidia-cudnn-cu12"].marker) == "and-cuda"


def test_selects_2x_versions_newest_first_with_the_unsuperseded_pre_releases():
    document = {
        "releases": {
            v: [{}]
            for v in [
                "1.15.5",
                "2.0.0",
                "2.10.0",
                "2.9.3",
                "2.15.0.post1",
                "2.15.0",
                "2.16.0rc0",
                "2.16.1",
                "2.11.0.dev2022",
                "2.2.0a1",
                "2.2.0",
                "2.17.0rc1",
                "2.17.1rc0",
                "2.17.0",
            ]
        }
        | {"2.99.0": []}
    }
    # 2.16.0rc0 (2.16.1 is out), 2.2.0a1 and 2.17.0rc1 are superseded; 2.17.1rc0 is not; dev builds never rows
    assert releases.select_versions(document) == [
        "2.17.1rc0",
        "2.17.0",
        "2.16.1",
        "2.15.0.post1",
        "2.15.0",
        "2.10.0",
        "2.9.3",
        "2.2.0",
        "2.0.0",
    ]


def test_version_key_is_pep440_order():
    ordered = ["2.9.3", "2.22.0a1", "2.22.0b2", "2.22.0rc0", "2.22.0rc1", "2.22.0", "2.22.0.post1", "2.22.1"]
    assert sorted(reversed(ordered), key=wheel_facts.version_key) == ordered
    assert wheel_facts.is_prerelease("2.22.0rc0") and not wheel_facts.is_prerelease("2.15.0.post1")
    assert wheel_facts.base_version("2.22.0rc0") == "2.22.0"


@pytest.mark.parametrize(
    "filename, platform, tag, pythons",
    [
        (
            "tensorflow-2.13.1-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
            "linux_x86_64",
            "manylinux_2_17_x86_64",
            ("3.11",),
        ),
        (
            "tensorflow-2.21.0-cp313-cp313-manylinux_2_27_aarch64.whl",
            "linux_aarch64",
            "manylinux_2_27_aarch64",
            ("3.13",),
        ),
        ("tensorflow-2.0.0-cp27-cp27mu-manylinux2010_x86_64.whl", "linux_x86_64", "manylinux2010_x86_64", ("2.7",)),
        ("tensorflow-2.10.0-cp310-cp310-win_amd64.whl", "windows_x86_64", "win_amd64", ("3.10",)),
        ("tensorflow-2.0.0-cp37-cp37m-macosx_10_11_x86_64.whl", "macos_x86_64", "macosx_10_11_x86_64", ("3.7",)),
        ("tensorflow-2.16.1-cp312-cp312-macosx_12_0_arm64.whl", "macos_arm64", "macosx_12_0_arm64", ("3.12",)),
    ],
)
def test_classifies_wheels_by_platform(filename, platform, tag, pythons):
    entry = {"filename": filename, "packagetype": "bdist_wheel", "url": "../../x/" + filename, "size": 1}
    wheel = releases.wheel_from_json(entry, "https://pypi.org/pypi/tensorflow/json")
    assert (wheel.platform, wheel.platform_tag, wheel.pythons) == (platform, tag, pythons)
    assert wheel.url == "https://pypi.org/x/" + filename


def test_toml_strings_are_escaped():
    value = 'python_version >= "3.12" \\ é'
    assert tomllib.loads(f"k = {toml_out.toml_value(value)}")["k"] == value


# --------------------------------------------------------------------------------------------
# TF 2.22's members, as recorded from its wheel (the ranges of tests/fixtures/pypi/)


@pytest.fixture(scope="module")
def members_2_22():
    """read_wheel_members over the recorded ranges of the 2.22.0rc0 Linux wheel."""
    return pypifixture.recorded_members(WHEEL_2_22)


def test_2_22_build_info_holds_only_the_build_kind(members_2_22):
    info = wheel_facts.parse_build_info(members_2_22.build_info)
    assert info == wheel_facts.BuildInfo(True, "", "", (), "", "")


def test_2_22_cuda_config_and_cudnn_version_headers(members_2_22):
    config = wheel_facts.parse_cuda_config(members_2_22.cuda_config)
    assert config == wheel_facts.CudaConfig("12.5.1", "9", ("6.0", "7.0", "8.0", "8.9", "9.0"))
    assert wheel_facts.parse_cudnn_version(members_2_22.cudnn_version) == "9.10.0"


def test_2_22_and_cuda_extra_adds_nvshmem(members_2_22):
    reqs = wheel_facts.parse_requirements(members_2_22.metadata)
    extras = wheel_facts.cuda_extras(reqs, wheel_facts.provided_extras(members_2_22.metadata))
    assert extras.name == "and-cuda" and extras.names == ("and-cuda",)
    assert extras.pins["nvidia-nvshmem-cu12"] == ">=3.2.5"
    assert extras.pins["nvidia-cudnn-cu12"] == "<10.0,>=9.10.2.21"
    keras = next(r for r in reqs if r.name == "keras-nightly")
    assert keras.specifier == ">=3.12.0.dev"  # a pre-release dependency: an rc pulls nightlies


def test_old_cuda_config_form():
    text = (
        '#define TF_CUDA_CAPABILITIES CudaVersion("3.5"), CudaVersion("7.0")\n'
        '#define TF_CUDA_VERSION "10.1"\n#define TF_CUDNN_VERSION "7"\n'
    )
    assert wheel_facts.parse_cuda_config(text) == wheel_facts.CudaConfig("10.1", "7", ("3.5", "7.0"))
    assert wheel_facts.parse_cudnn_version("#define CUDNN_MAJOR 8\n") == ""


TF_NIGHTLY_METADATA = """\
Metadata-Version: 2.4
Name: tf_nightly
Version: 2.23.0.dev20261026
Requires-Dist: numpy>=1.26.0
Provides-Extra: and-cuda
Requires-Dist: nvidia-cudnn-cu12<10.0,>=9.10.2.21; extra == "and-cuda"
Requires-Dist: nvidia-nvshmem-cu12>=3.2.5; extra == "and-cuda"
Provides-Extra: cuda
Requires-Dist: nvidia-cudnn-cu12<10.0,>=9.10.2.21; extra == "cuda"
Provides-Extra: cuda12
Requires-Dist: nvidia-cudnn-cu12<10.0,>=9.10.2.21; extra == "cuda12"
Provides-Extra: cuda12-local
Provides-Extra: gcs-filesystem
Requires-Dist: tensorflow-io-gcs-filesystem>=0.23.1; (sys_platform != "win32" and python_version < "3.13") and extra == "gcs-filesystem"

"""


def test_tf_nightly_cuda_extras_are_understood():
    """tf-nightly's METADATA (2.23.0.dev20261026, abridged) names and-cuda, cuda, cuda12 and the
    pin-less cuda12-local; the plan installs the first with pins, in CUDA_EXTRAS order."""
    reqs = wheel_facts.parse_requirements(TF_NIGHTLY_METADATA)
    extras = wheel_facts.cuda_extras(reqs, wheel_facts.provided_extras(TF_NIGHTLY_METADATA))
    assert extras.names == ("and-cuda", "cuda", "cuda12", "cuda12-local")
    assert extras.name == "and-cuda" and set(extras.pins) == {"nvidia-cudnn-cu12", "nvidia-nvshmem-cu12"}
    only_cuda12 = TF_NIGHTLY_METADATA.replace('extra == "and-cuda"', 'extra == "x"').replace(
        "Provides-Extra: and-cuda\n", ""
    )
    extras = wheel_facts.cuda_extras(
        wheel_facts.parse_requirements(only_cuda12), wheel_facts.provided_extras(only_cuda12)
    )
    assert extras.name == "cuda12"


def test_python_3_14_tags_sort_after_3_9():
    entry = {
        "filename": "tensorflow-2.22.0rc0-cp314-cp314-manylinux_2_27_x86_64.whl",
        "packagetype": "bdist_wheel",
        "url": "x",
        "size": 1,
    }
    assert releases.wheel_from_json(entry, "https://pypi.org/pypi/tensorflow/json").pythons == ("3.14",)
    assert sorted(["3.14", "3.9", "3.10"], key=wheel_facts.python_key) == ["3.9", "3.10", "3.14"]


def test_a_rendered_release_reads_back():
    record = releases.ReleaseRecord(
        version="2.22.0rc0",
        uploaded="2026-09-22",
        requires_python=">=3.10",
        gpu_package="tensorflow",
        numpy=">=1.26.0",
        numpy_markers={},
        sources=["PYPI-JSON"],
        and_cuda={"nvidia-nvshmem-cu12": ">=3.2.5"},
        wheels={
            "linux_x86_64": releases.PlatformRecord(
                python=["3.14"],
                platform_tag="manylinux_2_27_x86_64",
                cuda_build=True,
                cuda="12.5.1",
                cudnn="9",
                source=["PYPI-JSON"],
            )
        },
        prerelease=True,
        cuda_extra="and-cuda",
        cuda_extras=["and-cuda"],
    )
    row = tomllib.loads("\n".join(toml_out.render_release(record)))["release"][0]
    assert row["prerelease"] is True and row["and_cuda"] == {"nvidia-nvshmem-cu12": ">=3.2.5"}
    assert row["wheels"]["linux_x86_64"]["python"] == ["3.14"]


def test_a_cache_write_replaces_a_link_and_never_writes_through_one(tmp_path):
    """update-data's cache entries are written beside their name and renamed over it: a link at the
    name, or one planted at the temporary's name, is replaced, and the file it points to is untouched."""
    import os
    import threading

    from tfgpu.datasource.http import write_atomic

    outside = tmp_path / "outside"
    outside.write_bytes(b"keep")
    entry = tmp_path / "cache" / "json" / "entry.json"
    entry.parent.mkdir(parents=True)
    entry.symlink_to(outside)
    entry.with_name(f"{entry.name}.{os.getpid()}.{threading.get_ident()}.tmp").symlink_to(outside)
    write_atomic(entry, b"{}")
    assert outside.read_bytes() == b"keep"
    assert not entry.is_symlink() and entry.read_bytes() == b"{}"
    assert sorted(p.name for p in entry.parent.iterdir()) == ["entry.json"]


def test_a_cache_write_that_fails_leaves_no_temporary(tmp_path):
    from tfgpu.datasource.http import write_atomic

    entry = tmp_path / "cache" / "entry.json"
    entry.mkdir(parents=True)  # a directory where the entry goes: the rename fails
    with pytest.raises(OSError):
        write_atomic(entry, b"{}")
    assert sorted(p.name for p in entry.parent.iterdir()) == ["entry.json"]
