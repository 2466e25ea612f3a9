"""Properties generated from the shipped tables: every release, every Python, every mode.

No expected value here is typed by hand: each test derives it from tfgpu/data, so a new row in
the data is a new test case.

Each release's install-mode options (``pip_option``, ``conda_option``, ``system_option``: pure
functions of the release, platform, Python and CUDA build), each CUDA build's driver need
(``driver_need``, of the build and the OS) and each release's TensorFlow source
(``tfsource.choose``) are worked out once per module, not again for each of the hundreds of
``resolve`` calls here: a refusal scans every release for the newest that fits, so each such case
evaluated the same eighty releases' options anew, about three quarters of this module's CPU. Every
option is still the real function's answer for its inputs (``_mode_options_once``);
tests/test_resolve_cases.py and tests/test_conda_mode.py run them uncached.
"""

from __future__ import annotations

import functools

import pytest
from packaging.version import Version

from tfgpu.errors import ImpossibleError
from tfgpu.resolver import evaluate, make_request, resolve, tables
from tfgpu.resolver.drivers import driver_need
from tfgpu.resolver.gpu import lowest_cc

RELEASES = tables.releases()
LINUX_GPU = [r for r in RELEASES if r.wheels.get("linux_x86_64") and r.wheels["linux_x86_64"].cuda_build]
IDS = [str(r.version) for r in LINUX_GPU]


@pytest.fixture(autouse=True, scope="module")
def _mode_options_once():
    """The resolver's mode options, driver needs and sources computed once per distinct input for
    this module's tests (the module docstring says why). A release is matched by identity and kept
    alive beside its answer, so an answer is never handed to another release object; the tables
    are the shipped ones here."""
    with pytest.MonkeyPatch.context() as patch:
        for name in ("pip_option", "conda_option", "system_option"):
            patch.setattr(evaluate, name, _once(getattr(evaluate, name)))
        # Their inputs are strings: a driver need by CUDA build and OS, TensorFlow's source by the wish,
        # release, platform, Python and mode.
        for name in ("driver_need", "choose_source"):
            patch.setattr(evaluate, name, functools.cache(getattr(evaluate, name)))
        yield


def _once(function):
    answers: dict = {}

    def cached(release, *rest):
        key = (id(release), *(id(r) if r is not None and not isinstance(r, str) else r for r in rest))
        if key not in answers:
            answers[key] = (release, rest, function(release, *rest))
        kept_release, kept_rest, answer = answers[key]
        assert kept_release is release and kept_rest == rest
        return answer

    return cached


def linux(release, **extra):
    return make_request(tf=str(release.version), os="linux", arch="x86_64", **extra)


def test_every_tf2_release_is_known():
    versions = {str(r.version) for r in RELEASES}
    series = {f"2.{minor}" for minor in range(23)}
    assert {r.series for r in RELEASES} == series
    assert {"2.0.0", "2.21.0", "2.15.0.post1", "2.22.0rc0"} <= versions
    # pre-releases are rows marked as such, and only until a final of their series supersedes them
    assert [str(r.version) for r in RELEASES if r.prerelease] == [v for v in versions if Version(v).is_prerelease]
    for release in RELEASES:
        if release.prerelease:
            assert not [
                r
                for r in RELEASES
                if not r.prerelease
                and r.series == release.series
                and r.version >= Version(release.version.base_version)
            ]


@pytest.mark.parametrize("release", LINUX_GPU, ids=IDS)
def test_every_linux_release_has_a_gpu_plan(release):
    """Each release resolves in conda mode on Linux, with CUDA/cuDNN from the tables."""
    plan = resolve(linux(release, mode="conda"), None)
    wheel = release.wheels["linux_x86_64"]
    assert plan.tensorflow == str(release.version)
    assert plan.cuda.split(".")[0] == wheel.cuda.split(".")[0]
    assert plan.cudnn.split(".")[0] == wheel.cudnn.split(".")[0]
    assert plan.min_driver == driver_need(plan.cuda_build, "linux").minimum
    assert plan.python in wheel.python


@pytest.mark.parametrize("release", LINUX_GPU, ids=IDS)
def test_series_table_agrees_with_the_wheels(release):
    """TensorFlow's docs table and the wheel's build_info name the same CUDA and cuDNN major."""
    series = tables.series().get(release.series)
    if series is None:  # TensorFlow publishes its tested configuration with the final release
        assert release.prerelease
        pytest.skip(f"no tested configuration published for {release.series} yet")
    wheel = release.wheels["linux_x86_64"]
    assert Version(series.cudnn).major == Version(wheel.cudnn).major
    built = Version(wheel.cuda)
    docs = Version(series.cuda)
    assert built.major == docs.major
    if len(built.release) >= 2:
        assert built.release[:2] == docs.release[:2]


@pytest.mark.parametrize("release", LINUX_GPU, ids=IDS)
def test_newest_driver_admits_every_release_and_an_old_one_none(release):
    resolve(linux(release, mode="conda", driver="999.99"), None)
    with pytest.raises(ImpossibleError) as caught:
        resolve(linux(release, mode="conda", driver="300.10"), None)
    assert caught.value.code == "driver-too-old"


@pytest.mark.parametrize("release", LINUX_GPU, ids=IDS)
def test_driver_exactly_at_the_minimum_is_enough(release):
    need = driver_need(resolve(linux(release, mode="conda"), None).cuda_build, "linux").minimum
    assert resolve(linux(release, mode="conda", driver=need), None).min_driver == need


@pytest.mark.parametrize("release", LINUX_GPU, ids=IDS)
def test_every_published_python_resolves_and_others_do_not(release):
    wheel = release.wheels["linux_x86_64"]
    for python in wheel.python:
        assert resolve(linux(release, mode="conda", python=python), None).python == python
    for python in ("3.4", "3.15"):
        with pytest.raises(ImpossibleError) as caught:
            resolve(linux(release, mode="conda", python=python), None)
        assert caught.value.code == "python-unsupported"


@pytest.mark.parametrize(
    "release", [r for r in LINUX_GPU if r.wheels["linux_x86_64"].compute_capabilities], ids=lambda r: str(r.version)
)
def test_lowest_architecture_runs_and_below_it_is_too_old(release):
    caps = release.wheels["linux_x86_64"].compute_capabilities
    lowest = lowest_cc(caps)
    assert resolve(linux(release, mode="conda", gpu_cc=lowest), None)
    major, minor = (int(x) for x in lowest.split("."))
    below = f"{major - 1}.{minor}" if major > 1 else None
    if below:
        with pytest.raises(ImpossibleError) as caught:
            resolve(linux(release, mode="conda", gpu_cc=below), None)
        assert caught.value.code == "gpu-too-old"


@pytest.mark.parametrize("release", LINUX_GPU, ids=IDS)
def test_conda_plan_uses_only_what_conda_forge_carries(release):
    """CUDA 11 and older: cudatoolkit; CUDA 12: cuda-version + split packages; cuDNN of the same
    major with a minor >= the compiled one, a version conda-forge has."""
    plan = resolve(linux(release, mode="conda"), None)
    forge = tables.conda_forge()
    specs = dict(spec.split(" ", 1) if " " in spec else (spec, "") for spec in plan.packages.conda)
    if Version(plan.cuda).major >= 12:
        assert "cudatoolkit" not in specs
        assert specs["cuda-version"] == f"{plan.cuda}.*" and plan.cuda in forge.cuda_version
        assert set(specs) - {"python", "cuda-version", "cudnn"} <= set(forge.cuda12_packages)
    else:
        assert specs["cudatoolkit"] == f"{plan.cuda}.*" and plan.cuda in forge.cudatoolkit
    cudnn = Version(specs["cudnn"].removeprefix("=="))
    assert cudnn in {row.version for row in forge.cudnn}
    wanted = Version(plan.cudnn)
    assert cudnn.major == wanted.major and cudnn.release[:2] >= wanted.release[:2]


@pytest.mark.parametrize("release", [r for r in RELEASES if r.version >= Version("2.11")], ids=lambda r: str(r.version))
def test_native_windows_after_2_10_is_refused(release):
    with pytest.raises(ImpossibleError) as caught:
        resolve(make_request(tf=str(release.version), mode="conda", os="windows", arch="x86_64"), None)
    assert caught.value.code == "windows-native-gpu-unsupported"
    assert any("wsl2" in a.lower() for a in caught.value.alternatives)


@pytest.mark.parametrize("release", RELEASES, ids=lambda r: str(r.version))
def test_linux_aarch64_never_has_a_gpu_build(release):
    with pytest.raises(ImpossibleError) as caught:
        resolve(make_request(tf=str(release.version), os="linux", arch="aarch64"), None)
    assert caught.value.code == "no-gpu-build"


@pytest.mark.parametrize("release", [r for r in LINUX_GPU if r.and_cuda], ids=lambda r: str(r.version))
def test_pip_plan_follows_the_and_cuda_extra(release):
    """Releases with the extra install it, or (where it is broken) its pins without TensorRT."""
    wheel = release.wheels["linux_x86_64"]
    for python in wheel.python:
        plan = resolve(linux(release, mode="pip", python=python), None)
        pip = plan.packages.pip
        if pip[0].endswith(f"[and-cuda]=={release.version}"):
            continue
        assert pip[0] == f"tensorflow=={release.version}"
        assert not [p for p in pip if p.startswith("tensorrt")]
        expected = {f"{d}{s}" for d, s in release.and_cuda.items() if not d.startswith("tensorrt")}
        assert set(pip[1:]) == expected
