"""Judge one release against one target and mode: does it fit, and if not, why not.

Checks run in a fixed order (GPU build on the platform, Python, glibc, install mode, driver,
GPU architecture); the first that fails names the release's error code.
"""

from __future__ import annotations

import re

from tfgpu.records import factory, record
from tfgpu.resolver import archtruth, gpu, macos, tables
from tfgpu.resolver.drivers import DriverNeed, driver_at_least, driver_need
from tfgpu.resolver.model import ModeOption, Target
from tfgpu.resolver.packages import conda_option, pip_option, system_option
from tfgpu.resolver.tfsource import choose as choose_source
from tfgpu.versions import parse

LAST_NATIVE_WINDOWS = parse("2.10.1")


@record
class Failure:
    code: str
    message: str
    alternatives: tuple[str, ...] = ()


@record(frozen=False)
class Evaluation:
    """Everything learned about one release for one target."""

    release: tables.Release
    target: Target
    mode: str
    wish: str | None = None
    """Where the user wants TensorFlow from (``--tf-source``), if they said."""
    wheel: tables.Wheel | None = None
    metal: tables.MetalRow | None = None
    python: str | None = None
    pythons: tuple[str, ...] = ()
    cuda: str | None = None
    cudnn: str | None = None
    need: DriverNeed | None = None
    coverage: dict[str, gpu.Coverage] = factory(dict)
    truths: dict[str, archtruth.Truth] = factory(dict)
    """The architecture answer per compute capability ptx.toml judges (``tfgpu.resolver.archtruth``)."""
    options: dict[str, ModeOption] = factory(dict)
    failure: Failure | None = None
    tf_source: str = "pypi"
    """Where TensorFlow comes from (``tfgpu.resolver.tfsource``), and why: ``source_reason``."""
    source_reason: str = ""


def evaluate(release: tables.Release, target: Target, mode: str, tf_source: str | None = None) -> Evaluation:
    """Run every check; ``Evaluation.failure`` is ``None`` when the release fits. ``tf_source``:
    the user's wish for where TensorFlow comes from in conda mode."""
    ev = Evaluation(release=release, target=target, mode=mode, wish=tf_source)
    for check in (_gpu_build, _python, _glibc, _modes, _driver, _compute_capability):
        failure = check(ev)
        if failure is not None:
            ev.failure = failure
            break
    return ev


def _gpu_build(ev: Evaluation) -> Failure | None:
    release, target = ev.release, ev.target
    ev.wheel = release.wheels.get(target.platform)
    if target.os == "macos":
        pairing = macos.pair(release, target.platform)
        if pairing.row is None:
            return Failure("no-gpu-build", pairing.problem, pairing.alternatives)
        ev.metal = pairing.row
        return None
    if target.platform == "windows_x86_64" and release.version > LAST_NATIVE_WINDOWS:
        linux = release.wheels.get("linux_x86_64")
        need = driver_need(linux.cuda, "wsl2") if linux and linux.cuda_build and "." in linux.cuda else None
        driver = f", Windows driver >= {need.minimum}" if need else ""
        return Failure(
            "windows-native-gpu-unsupported",
            f"TF {release.version} has no GPU support on native Windows: TF 2.10 was the last release "
            "with it; from 2.11 on, TensorFlow's Windows wheels are CPU-only.",
            (
                f"Use WSL2 (Windows 10 21H2/19044 or newer{driver}): --os wsl2.",
                "Or stay on native Windows with TF 2.10: --tf 2.10 --mode conda.",
            ),
        )
    if ev.wheel is None or not ev.wheel.cuda_build:
        if target.platform == "linux_aarch64":
            return Failure(
                "no-gpu-build",
                f"TensorFlow's Linux aarch64 wheels are CPU-only (TF {release.version} included): "
                "`pip install tensorflow[and-cuda]` there gives no GPU.",
                (
                    "Use NVIDIA's NGC TensorFlow container (nvcr.io/nvidia/tensorflow), which has GPU "
                    "builds for aarch64 (Grace Hopper, Jetson).",
                    "Or plan for an x86_64 server: --arch x86_64.",
                ),
            )
        what = "no wheel" if ev.wheel is None else "a CPU-only wheel"
        return Failure("no-gpu-build", f"TF {release.version} has {what} for {target.platform}.")
    series = tables.series().get(release.series)
    ev.cuda = ev.wheel.cuda if ev.wheel.cuda.count(".") >= 1 else (series.cuda if series else None)
    ev.cudnn = compiled_cudnn(ev.wheel, series)
    return None


def compiled_cudnn(wheel: tables.Wheel, series: tables.Series | None) -> str:
    """The cuDNN major.minor the build needs: the wheel's own cudnn_version.h where it ships one
    (TF 2.21+), else TensorFlow's tested-configurations table, else the major of build_info."""
    if wheel.cudnn_compiled:
        return ".".join(wheel.cudnn_compiled.split(".")[:2])
    return series.cudnn if series else wheel.cudnn


def _supported_pythons(ev: Evaluation) -> tuple[str, ...]:
    if ev.metal is not None:  # the Pythons both the TF package and tensorflow-metal have wheels for
        return ev.metal.python
    return ev.wheel.python if ev.wheel else ()


def _python(ev: Evaluation) -> Failure | None:
    target = ev.target
    ev.pythons = tuple(sorted(_supported_pythons(ev), key=parse))
    if not ev.pythons:
        return Failure("python-unsupported", f"TF {ev.release.version} lists no Python wheels for {target.platform}.")
    if target.python is not None:
        if target.python not in ev.pythons:
            return Failure(
                "python-unsupported",
                f"TF {ev.release.version} has no {target.platform} wheels for Python {target.python}; "
                f"it has wheels for Python {', '.join(ev.pythons)}.",
                (f"Use --python {ev.pythons[-1]}.",),
            )
        ev.python = target.python
    elif ev.mode in ("pip", "system") and target.running_python in ev.pythons:
        ev.python = target.running_python
    else:
        ev.python = ev.pythons[-1]
    return None


_MANYLINUX = {"manylinux1": "2.5", "manylinux2010": "2.12", "manylinux2014": "2.17"}


def required_glibc(platform_tag: str) -> str | None:
    """The glibc a manylinux tag needs: ``manylinux_2_27_x86_64`` -> ``2.27``."""
    match = re.match(r"manylinux_(\d+)_(\d+)_", platform_tag)
    if match:
        return f"{match.group(1)}.{match.group(2)}"
    return _MANYLINUX.get(platform_tag.split("_")[0])


def _glibc(ev: Evaluation) -> Failure | None:
    if not ev.target.glibc or ev.wheel is None:
        return None
    needed = required_glibc(ev.wheel.platform_tag)
    if needed and parse(ev.target.glibc) < parse(needed):
        return Failure(
            "glibc-too-old",
            f"TF {ev.release.version}'s wheels ({ev.wheel.platform_tag}) need glibc >= {needed}; "
            f"this system has glibc {ev.target.glibc}.",
            ("Upgrade the OS, or use a container with a newer glibc.",),
        )
    return None


def _modes(ev: Evaluation) -> Failure | None:
    release, target = ev.release, ev.target
    assert ev.python is not None  # chosen by _python, the check before
    ev.options = {
        "pip": pip_option(release, target.platform, ev.python, ev.metal),
        "conda": conda_option(release, ev.cuda, ev.cudnn, ev.python, ev.metal),
        "system": (
            system_option(release, target.platform, ev.cuda, ev.cudnn)
            if ev.metal is None
            else ModeOption(
                False, code="mode-unsupported", reason="System mode installs NVIDIA's CUDA runfile; macOS has no CUDA."
            )
        ),
    }
    choice = choose_source(ev.wish, str(release.version), target.platform, ev.python, ev.mode)
    if choice.failure is not None:
        return Failure(*choice.failure)
    ev.tf_source, ev.source_reason = choice.source, choice.reason
    if choice.option is not None:
        ev.options["conda"] = choice.option
    option = ev.options[ev.mode]
    if option.available:
        return None
    others = [f"--mode {name}" for name, opt in ev.options.items() if opt.available and name != ev.mode]
    return Failure(
        option.code,
        f"--mode {ev.mode} cannot install TF {release.version}: {option.reason}",
        tuple(f"Use {o}." for o in others),
    )


def _driver(ev: Evaluation) -> Failure | None:
    if ev.metal is not None or ev.cuda is None:
        return None
    ev.need = driver_need(ev.cuda, ev.target.os)
    driver = ev.target.driver
    if ev.need is None or driver is None:
        return None
    if not driver_at_least(driver, ev.need.minimum):
        return Failure(
            "driver-too-old",
            f"TF {ev.release.version} was built with CUDA {ev.cuda}, which needs NVIDIA driver "
            f">= {ev.need.minimum} on {ev.target.os}; the driver is {driver} ({ev.target.driver_source}).",
            (
                f"Upgrade the NVIDIA driver to {ev.need.minimum} or newer (TensorFlow never needs a "
                "system CUDA toolkit, only the driver).",
            ),
        )
    return None


def _compute_capability(ev: Evaluation) -> Failure | None:
    if ev.metal is not None or ev.wheel is None:
        return None
    caps = ev.wheel.compute_capabilities
    for cc in ev.target.gpu_ccs:
        ev.coverage[cc] = gpu.coverage(cc, caps)
        if ev.coverage[cc] is gpu.Coverage.TOO_OLD:
            return Failure(
                "gpu-too-old",
                f"TF {ev.release.version}'s wheels have kernels for compute capability "
                f"{gpu.lowest_cc(caps)} and newer ({gpu.describe(caps)}); this GPU is {cc}.",
            )
        if ev.coverage[cc] is gpu.Coverage.NO_KERNELS:
            return Failure(
                "gpu-arch-unsupported",
                f"TF {ev.release.version}'s wheels have neither SASS nor usable PTX for compute "
                f"capability {cc} (they carry {gpu.describe(caps)}).",
            )
        truth = archtruth.judge(ev.release, ev.wheel, cc)
        if truth is not None:
            ev.truths[cc] = truth
            if truth.verdict == archtruth.CANNOT_RUN and not ev.target.allow_unsupported_gpu:
                return Failure(
                    "gpu-arch-cannot-run",
                    f"TF {ev.release.version} cannot run on compute capability {cc} "
                    f"({archtruth.target_name(cc)}), say its sources: {truth.why} "
                    f"Sources: {', '.join(truth.source)}.",
                    archtruth.ways_forward(ev.release, cc),
                )
    return None
