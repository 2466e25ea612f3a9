"""scripts/regen_tf_data.py against recorded PyPI responses, and the tensorflow.toml it shipped.

The fixture (tests/fixtures/pypi/, written by scripts/record_fixture.py) holds the real PyPI
JSON trimmed to TF 2.0.0 and 2.14.1 (plus listing-only 2.14.0rc1 and 1.15.5, which must be
skipped) and exactly the byte ranges the script fetched from their wheels. A local
http.server serves both, answering Range requests with 206, so no network is used.
"""

from __future__ import annotations

import importlib.util
import io
import re
import sys
import tarfile
import threading
import tomllib
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.resources import files
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "pypi"
SHIPPED = files("tfgpu.data").joinpath("tensorflow.toml")  # what the installed package ships


def _load_script(name: str):
    if name in sys.modules:  # a sibling already imported by regen_tf_data: the same module
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


regen = _load_script("regen_tf_data")
remote_wheel = _load_script("remote_wheel")
wheel_facts = _load_script("wheel_facts")


# --------------------------------------------------------------------------------------------
# A local index serving the recorded responses


class RecordedIndex(BaseHTTPRequestHandler):
    """GET /pypi/<project>/json and ranged GET /files/<wheel> from the fixture."""

    ranges: dict[str, list[tuple[int, int, bytes]]] = {}
    requests: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self.requests.append(self.path)
        if match := re.fullmatch(r"/pypi/([^/]+)/json", self.path):
            path = FIXTURE / "index" / f"{match.group(1)}.json"
            if path.is_file():
                return self._send(200, path.read_bytes(), {"Content-Type": "application/json"})
        elif match := re.fullmatch(r"/files/([^/]+)", self.path):
            wanted = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
            if not wanted:
                return self._send(400, b"this test server only answers Range requests")
            start, end = int(wanted.group(1)), int(wanted.group(2))
            for first, last, data in self.ranges.get(match.group(1), []):
                if first <= start and end <= last:
                    body = data[start - first:end - first + 1]
                    return self._send(206, body, {"Content-Range": f"bytes {start}-{end}/*"})
            return self._send(416, b"range not recorded")
        self._send(404, b"")

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for key, value in {**(headers or {}), "Content-Length": str(len(body))}.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def index_url():
    with tarfile.open(FIXTURE / "ranges.tar.xz") as tar:
        for member in tar.getmembers():
            filename, span = member.name.split("/")
            start, end = map(int, span.split("-"))
            RecordedIndex.ranges.setdefault(filename, []).append((start, end, tar.extractfile(member).read()))
    server = ThreadingHTTPServer(("127.0.0.1", 0), RecordedIndex)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/pypi"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def generated(index_url, tmp_path_factory):
    """Run the script once against the recorded index; returns (parsed TOML, text, cache dir)."""
    tmp = tmp_path_factory.mktemp("regen")
    out, cache = tmp / "tensorflow.toml", tmp / "cache"
    assert regen.main(["--index-url", index_url, "--out", str(out), "--cache", str(cache)]) == 0
    text = out.read_text("utf-8")
    return tomllib.loads(text), text, cache


def by_version(document: dict) -> dict[str, dict]:
    return {release["version"]: release for release in document["release"]}


CU11_AND_CUDA = {
    "nvidia-cublas-cu11": "==11.11.3.6", "nvidia-cuda-cupti-cu11": "==11.8.87",
    "nvidia-cuda-nvcc-cu11": "==11.8.89", "nvidia-cuda-runtime-cu11": "==11.8.89",
    "nvidia-cudnn-cu11": "==8.7.0.84", "nvidia-cufft-cu11": "==10.9.0.58",
    "nvidia-curand-cu11": "==10.3.0.86", "nvidia-cusolver-cu11": "==11.4.1.48",
    "nvidia-cusparse-cu11": "==11.7.5.86", "nvidia-nccl-cu11": "==2.16.5", "tensorrt": "==8.5.3.1",
}


def test_lists_final_releases_newest_first(generated, index_url):
    document, text, _ = generated
    assert [r["version"] for r in document["release"]] == ["2.14.1", "2.0.0"]  # no rc, no 1.x
    assert document["index"] == index_url
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", document["generated"])
    assert text.startswith("# GENERATED by scripts/regen_tf_data.py on ")


def test_release_2_14_1(generated):
    release = by_version(generated[0])["2.14.1"]
    assert release["uploaded"] == "2023-11-14"
    assert release["requires_python"] == ">=3.9"
    assert release["gpu_package"] == "tensorflow"
    assert release["numpy"] == "<2.0.0,>=1.23.5"
    assert release["source"] == ["PYPI-JSON", "WHL-META", "WHL-BI"]
    assert release["and_cuda"] == CU11_AND_CUDA
    wheels = release["wheels"]
    assert list(wheels) == ["linux_x86_64", "linux_aarch64", "windows_x86_64", "macos_x86_64", "macos_arm64"]
    assert wheels["linux_x86_64"] == {
        "python": ["3.9", "3.10", "3.11"],
        "platform_tag": "manylinux_2_17_x86_64",
        "cuda_build": True,
        "cuda": "11.8",
        "cudnn": "8",
        "compute_capabilities": ["sm_35", "sm_50", "sm_60", "sm_70", "sm_75", "compute_80"],
        "shim_for": "",
        "wheel": "tensorflow-2.14.1-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
    }
    shims = {platform: wheel["shim_for"] for platform, wheel in wheels.items()}
    assert shims == {"linux_x86_64": "", "linux_aarch64": "tensorflow-cpu-aws",
                     "windows_x86_64": "tensorflow-intel", "macos_x86_64": "",
                     "macos_arm64": "tensorflow-macos"}
    for platform in ("linux_aarch64", "windows_x86_64", "macos_x86_64", "macos_arm64"):
        assert wheels[platform]["cuda_build"] is False
        assert wheels[platform]["python"] == ["3.9", "3.10", "3.11"]
    # The shim's build_info comes from the target distribution's wheel of the same version.
    assert wheels["windows_x86_64"]["note"] == "build_info read from tensorflow_intel-2.14.1-cp311-cp311-win_amd64.whl"
    assert wheels["macos_arm64"]["platform_tag"] == "macosx_12_0_arm64"


def test_release_2_0_0_takes_its_cuda_build_from_tensorflow_gpu(generated):
    release = by_version(generated[0])["2.0.0"]
    assert release["gpu_package"] == "tensorflow-gpu"
    assert release["uploaded"] == "2019-09-30"
    assert release["requires_python"] == ""
    assert release["numpy"] == "<2.0,>=1.16.0"
    assert "and_cuda" not in release
    wheels = release["wheels"]
    assert list(wheels) == ["linux_x86_64", "windows_x86_64", "macos_x86_64"]
    linux, windows, macos = wheels["linux_x86_64"], wheels["windows_x86_64"], wheels["macos_x86_64"]
    assert (linux["cuda_build"], linux["cuda"], linux["cudnn"]) == (True, "10", "7")
    assert linux["python"] == ["2.7", "3.5", "3.6", "3.7"]
    assert linux["platform_tag"] == "manylinux2010_x86_64"
    assert linux["wheel"] == "tensorflow_gpu-2.0.0-cp37-cp37m-manylinux2010_x86_64.whl"
    assert linux["compute_capabilities"] == []
    assert (windows["cuda_build"], windows["cuda"], windows["cudnn"]) == (True, "10.0", "7")
    assert windows["python"] == ["3.5", "3.6", "3.7"]
    assert windows["wheel"].startswith("tensorflow_gpu-2.0.0-")
    assert (macos["cuda_build"], macos["cuda"], macos["wheel"]) == (
        False, "", "tensorflow-2.0.0-cp37-cp37m-macosx_10_11_x86_64.whl")


def test_output_matches_the_shipped_file_for_these_releases(generated):
    shipped = by_version(tomllib.loads(SHIPPED.read_text("utf-8")))
    for version, release in by_version(generated[0]).items():
        assert release == shipped[version]


def test_rerun_is_served_from_the_cache(generated, index_url, tmp_path):
    RecordedIndex.requests.clear()
    out = tmp_path / "again.toml"
    assert regen.main(["--index-url", index_url, "--out", str(out), "--cache", str(generated[2])]) == 0
    assert RecordedIndex.requests == []
    assert out.read_text("utf-8") == generated[1]  # deterministic


def test_only_restricts_the_run_and_rejects_unknown_versions(index_url, tmp_path):
    out = tmp_path / "only.toml"
    assert regen.main(["--index-url", index_url, "--out", str(out), "--only", "2.0.0"]) == 0
    assert [r["version"] for r in tomllib.loads(out.read_text("utf-8"))["release"]] == ["2.0.0"]
    assert regen.main(["--index-url", index_url, "--out", str(out), "--only", "2.14.0rc1"]) == 1


# --------------------------------------------------------------------------------------------
# The pieces, on hand-made inputs


def _zip_fetcher(data: bytes):
    calls = []

    def fetch(start: int, end: int) -> bytes:
        assert 0 <= start <= end < len(data)
        calls.append((start, end))
        return data[start:end + 1]
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
    members = remote_wheel.read_wheel_members(fetch, len(data))
    assert members.build_info == "is_cuda_build = True\n"
    assert members.metadata == "Name: tensorflow\n" * 50
    assert all(end - start < 20_000 for start, end in calls)


def test_parses_both_build_info_styles():
    old = "is_rocm_build = False\nis_cuda_build = True\n\ncuda_version_number = '10.1'\ncudnn_version_number = '7'\n"
    assert wheel_facts.parse_build_info(old) == wheel_facts.BuildInfo(True, "10.1", "7", (), "10.1", "7")
    new = ("import collections\nbuild_info = collections.OrderedDict([('cuda_compute_capabilities', "
           "['sm_35', 'compute_80']), ('cuda_version', '64_112'), ('cudnn_version', '64_8'), "
           "('is_cuda_build', True), ('cpu_compiler', some_name)])\n")
    assert wheel_facts.parse_build_info(new) == wheel_facts.BuildInfo(
        True, "11.2", "8", ("sm_35", "compute_80"), "64_112", "64_8")
    assert wheel_facts.parse_build_info("is_cuda_build = False\n").cuda_build is False
    assert wheel_facts.parse_build_info("build_info = {'is_cuda_build': False}\n").cuda == ""


@pytest.mark.parametrize("raw, normalized", [("64_112", "11.2"), ("64_101", "10.1"), ("64_110", "11.0"),
                                             ("64_8", "8"), ("64_7", "7"), ("12.5.1", "12.5.1"), ("", "")])
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


@pytest.mark.parametrize("platform, target", [
    ("linux_aarch64", ("tensorflow-cpu-aws", "2.13.1")), ("windows_x86_64", ("tensorflow-intel", "2.13.1")),
    ("macos_arm64", ("tensorflow-macos", "2.13.1")), ("macos_x86_64", None), ("linux_x86_64", None)])
def test_finds_the_shim_target_for_each_platform(platform, target):
    assert wheel_facts.find_shim_target(wheel_facts.parse_requirements(SHIM_METADATA), platform) == target


def test_parses_old_and_new_requirement_syntax():
    reqs = {r.name: r for r in wheel_facts.parse_requirements(SHIM_METADATA)}
    assert reqs["tensorflow-intel"].specifier == "==2.13.1"
    assert reqs["numpy"] == wheel_facts.Requirement("numpy", "<2.2.0,>=1.26.0", "")
    assert wheel_facts.marker_extra(reqs["nvidia-cudnn-cu12"].marker) == "and-cuda"


def test_selects_final_2x_versions_newest_first():
    document = {"releases": {v: [{}] for v in ["1.15.5", "2.0.0", "2.10.0", "2.9.3", "2.15.0.post1", "2.15.0",
                                               "2.16.0rc0", "2.11.0.dev2022", "2.2.0a1"]} | {"2.99.0": []}}
    assert regen.select_versions(document, None) == ["2.15.0.post1", "2.15.0", "2.10.0", "2.9.3", "2.0.0"]


@pytest.mark.parametrize("filename, platform, tag, pythons", [
    ("tensorflow-2.13.1-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
     "linux_x86_64", "manylinux_2_17_x86_64", ("3.11",)),
    ("tensorflow-2.21.0-cp313-cp313-manylinux_2_27_aarch64.whl", "linux_aarch64", "manylinux_2_27_aarch64", ("3.13",)),
    ("tensorflow-2.0.0-cp27-cp27mu-manylinux2010_x86_64.whl", "linux_x86_64", "manylinux2010_x86_64", ("2.7",)),
    ("tensorflow-2.10.0-cp310-cp310-win_amd64.whl", "windows_x86_64", "win_amd64", ("3.10",)),
    ("tensorflow-2.0.0-cp37-cp37m-macosx_10_11_x86_64.whl", "macos_x86_64", "macosx_10_11_x86_64", ("3.7",)),
    ("tensorflow-2.16.1-cp312-cp312-macosx_12_0_arm64.whl", "macos_arm64", "macosx_12_0_arm64", ("3.12",)),
])
def test_classifies_wheels_by_platform(filename, platform, tag, pythons):
    entry = {"filename": filename, "packagetype": "bdist_wheel", "url": "../../x/" + filename, "size": 1}
    wheel = regen.wheel_from_json(entry, "https://pypi.org/pypi/tensorflow/json")
    assert (wheel.platform, wheel.platform_tag, wheel.pythons) == (platform, tag, pythons)
    assert wheel.url == "https://pypi.org/x/" + filename


def test_toml_strings_are_escaped():
    value = 'python_version >= "3.12" \\ é'
    assert tomllib.loads(f"k = {regen.toml_value(value)}")["k"] == value


# --------------------------------------------------------------------------------------------
# The shipped file

FINAL = re.compile(r"^2\.\d+\.\d+(\.post\d+)?$")
# compat-facts.md section 1: the linux x86_64 wheel's build_info per series (x.y.0 and patches).
LINUX_BUILD = {"2.0": ("10", "7"), "2.1": ("10.1", "7"), "2.2": ("10", "7"), "2.3": ("10.1", "7"),
               "2.4": ("11.0", "8"), **{f"2.{m}": ("11.2", "8") for m in range(5, 12)},
               "2.12": ("11.8", "8"), "2.13": ("11.8", "8"), "2.14": ("11.8", "8"), "2.15": ("12.2", "8"),
               "2.16": ("12.3", "8"), "2.17": ("12.3", "8"),
               **{f"2.{m}": ("12.5.1", "9") for m in range(18, 22)}}


@pytest.fixture(scope="module")
def shipped() -> dict:
    return tomllib.loads(SHIPPED.read_text("utf-8"))


def test_shipped_file_lists_every_final_release_newest_first(shipped):
    versions = [r["version"] for r in shipped["release"]]
    assert all(FINAL.match(v) for v in versions), "pre-releases must not be listed"
    keys = [wheel_facts.version_key(v) for v in versions]
    assert keys == sorted(keys, reverse=True) and len(set(versions)) == len(versions)
    assert versions[-1] == "2.0.0"
    assert {"2.21.0", "2.15.0.post1", "2.16.1", "2.0.4"} <= set(versions)
    assert "2.16.0" not in versions  # never released


def test_shipped_file_has_a_linux_cuda_build_for_every_release(shipped):
    for release in shipped["release"]:
        linux = release["wheels"]["linux_x86_64"]
        series = ".".join(release["version"].split(".")[:2])
        assert linux["cuda_build"] is True, release["version"]
        assert (linux["cuda"], linux["cudnn"]) == LINUX_BUILD[series], release["version"]
        assert linux["python"] and linux["wheel"].endswith(".whl")
        expected = "tensorflow-gpu" if series == "2.0" else "tensorflow"
        assert release["gpu_package"] == expected


def test_shipped_file_records_where_each_fact_came_from(shipped):
    for release in shipped["release"]:
        assert release["source"] == ["PYPI-JSON", "WHL-META", "WHL-BI"]
        for wheel in release["wheels"].values():
            assert {"python", "platform_tag", "cuda_build", "cuda", "cudnn", "compute_capabilities",
                    "shim_for", "wheel"} <= set(wheel)
