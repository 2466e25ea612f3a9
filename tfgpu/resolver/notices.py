"""The "why" trace and the warnings of a chosen plan."""

from __future__ import annotations

from tfgpu.resolver import archtruth, gpu, tables
from tfgpu.resolver.drivers import driver_at_least
from tfgpu.resolver.evaluate import Evaluation
from tfgpu.resolver.model import Notice
from tfgpu.resolver.newgpu import new_gpu_notices
from tfgpu.resolver.packages import quirks_for
from tfgpu.versions import Range


def notices_for(ev: Evaluation, how: str, host) -> tuple[list[Notice], list[str]]:
    """Warnings (with codes) and reasons (sentences) for the release ``ev`` describes."""
    warnings: list[Notice] = []
    reasons = [f"TensorFlow {ev.release.version}: {how}."]
    target = ev.target
    if ev.release.version.is_prerelease:
        warnings.append(
            Notice(
                "prerelease",
                f"TF {ev.release.version} is a pre-release (published {ev.release.uploaded or 'on an unknown date'}): "
                "release candidates change before the final release, and its dependencies may be pre-releases too.",
                f"For production use the newest final release (drop --pre, or --tf {ev.release.version.base_version} "
                "once it is published: `tfgpu-install update-data` fetches it).",
            )
        )
    if ev.release.origin == "update":
        reasons.append(f"TF {ev.release.version}'s row was fetched from PyPI by `tfgpu-install update-data`.")
    reasons.append(f"Target {target.os} {target.arch} (wheel platform {target.platform}).")
    if ev.metal is not None:
        _metal(ev, warnings, reasons)
    else:
        _cuda(ev, warnings, reasons)
    py_how = (
        "as requested"
        if target.python_given
        else "the running interpreter"
        if ev.python == target.running_python and ev.mode != "conda"
        else "the newest with wheels"
    )
    reasons.append(
        f"Python {ev.python}: {py_how} (TF {ev.release.version} has {target.platform} wheels "
        f"for {', '.join(ev.pythons)})."
    )
    if ev.mode == "conda" and ev.metal is None:
        reasons.append(ev.source_reason)
    reasons.extend(ev.options[ev.mode].packages.notes)
    warnings.extend(ev.options[ev.mode].warnings)
    for quirk in quirks_for(ev.release, ev.mode, ev.python):
        warnings.append(Notice(quirk.code, quirk.message, quirk.fix))
    if (
        host is not None
        and host.toolkits
        and (target.os, target.arch) == (getattr(host, "os", None), getattr(host, "arch", None))
    ):
        kits = ", ".join(f"{t.version} at {t.path}" for t in host.toolkits)
        reasons.append(
            f"System CUDA toolkit(s) found ({kits}): TensorFlow does not use them in pip or conda "
            f"mode; what matters is the driver and the CUDA {ev.cuda or '-'} libraries in the env."
        )
    return warnings, reasons


def _metal(ev: Evaluation, warnings: list[Notice], reasons: list[str]) -> None:
    row = ev.metal
    assert row is not None  # a macOS plan's
    reasons.append(
        f"macOS has no CUDA: the GPU is used through tensorflow-metal {row.metal} "
        f"(published for TF {row.tensorflow}, macOS {row.macos}+)."
    )
    if row.unverified:
        warnings.append(
            Notice(
                "unverified-data",
                f"The tensorflow-metal pairing for TF {ev.release.version} is unverified: {row.note}",
                "Check `python -c \"import tensorflow as tf; print(tf.config.list_physical_devices('GPU'))\"` after install.",
            )
        )


_WHEEL_FILES = {
    "WHL-BI": "build_info.py",
    "WHL-CUDA-H": "cuda_config.h",
    "WHL-CUDNN-H": "cudnn_version.h",
    "WHL-FATBIN": "the fatbins of its GPU library",
}


def _cuda(ev: Evaluation, warnings: list[Notice], reasons: list[str]) -> None:
    target, wheel = ev.target, ev.wheel
    assert wheel is not None  # a release without the target's wheel fails before its notices
    series = tables.series().get(ev.release.series)
    read_from = ", ".join(_WHEEL_FILES[k] for k in wheel.source if k in _WHEEL_FILES) or "its build_info.py"
    compiled = f", compiled against cuDNN {wheel.cudnn_compiled}" if wheel.cudnn_compiled else ""
    reasons.append(
        f"The {target.platform} wheel is a CUDA build: CUDA {wheel.cuda}, cuDNN {wheel.cudnn}"
        f"{compiled} (read from the wheel: {read_from}); TensorFlow's tested configuration for "
        f"{ev.release.series}: " + (f"CUDA {series.cuda}, cuDNN {series.cudnn}." if series else "not published yet.")
    )
    reasons.append(
        f"cuDNN {ev.cudnn}: TensorFlow loads a cuDNN of the same major and a minor >= the one it was built with."
    )
    if series and "cudnn" in series.unverified and not wheel.cudnn_compiled:
        warnings.append(
            Notice(
                "unverified-data",
                f"The cuDNN minor TF {ev.release.series} was compiled against is unverified; "
                f"the plan assumes {ev.cudnn}.",
                "",
            )
        )
    _driver(ev, warnings, reasons)
    _gpus(ev, warnings, reasons)


def _driver(ev: Evaluation, warnings: list[Notice], reasons: list[str]) -> None:
    target, need = ev.target, ev.need
    if need is None:
        reasons.append(f"No driver minimum is recorded for CUDA {ev.cuda} on {target.os}.")
        return
    reasons.append(need.rule)
    assert ev.cuda is not None  # a driver need is found only for a CUDA
    wsl = tables.cuda_facts().wsl2_driver.get(int(ev.cuda.split(".")[0]))
    if target.os == "wsl2" and (wsl is None or ev.release.version not in Range(wsl.docs_cover)):
        warnings.append(
            Notice(
                "unverified-data",
                f"TensorFlow's docs of TF {ev.release.series}'s time say nothing about WSL2: the plan asks for the "
                f"Windows driver {need.minimum}, but whether TF {ev.release.version} runs in WSL2 is not recorded.",
                "Prefer a release whose docs cover WSL2 (TF 2.9 and later).",
            )
        )
    if target.driver is None:
        warnings.append(
            Notice(
                "no-driver",
                f"No NVIDIA driver version is known ({target.driver_source}): this plan needs driver "
                f">= {need.minimum} on the machine that runs it.",
                "Install the NVIDIA driver (the plan never installs one), or pass --driver to plan for another machine.",
            )
        )
        return
    reasons.append(f"Driver {target.driver} ({target.driver_source}) >= {need.minimum}.")
    if not driver_at_least(target.driver, need.toolkit_minimum):
        warnings.append(
            Notice(
                "ptx-jit-driver",
                f"Driver {target.driver} is below CUDA {ev.cuda}'s own minimum {need.toolkit_minimum}: compiled "
                "kernels run (minor-version compatibility), but PTX the driver must JIT-compile can fail with "
                "CUDA_ERROR_UNSUPPORTED_PTX_VERSION.",
                f"Upgrade the driver to {need.toolkit_minimum} or newer for full compatibility.",
            )
        )


def _architecture(ev: Evaluation, cc: str, warnings: list[Notice], reasons: list[str]) -> None:
    """The per-architecture answer (tfgpu.resolver.archtruth) as a reason, and where the sources
    say the release cannot run there but --allow-unsupported-gpu went on, a warning naming the risk."""
    truth = ev.truths.get(cc)
    if truth is None:
        return
    reasons.append(
        f"Compute capability {cc} ({archtruth.target_name(cc)}) on TF {ev.release.version}: {truth.verdict}. "
        f"{truth.why} Sources: {', '.join(truth.source)}."
    )
    if truth.verdict == archtruth.CANNOT_RUN:
        warnings.append(
            Notice(
                "gpu-arch-cannot-run-allowed",
                f"--allow-unsupported-gpu: TF {ev.release.version} is planned for compute capability {cc} although "
                f"its sources say it cannot run there: {truth.why} Expect the install to succeed and the failing "
                "operations (the first kernel the driver cannot JIT, any XLA compilation) to fail at run time.",
                "Run without XLA (jit_compile=False, TF_XLA_FLAGS=--tf_xla_auto_jit=0) and check with "
                "`tfgpu-install verify`, which runs a convolution and an XLA-compiled function on the GPU.",
            )
        )
    elif truth.verdict == archtruth.UNKNOWN and ev.coverage.get(cc) is not gpu.Coverage.UNKNOWN:
        warnings.append(
            Notice(
                "gpu-arch-unknown",
                f"Whether TF {ev.release.version} runs on compute capability {cc} is unknown: {truth.why}",
                "Check with `tfgpu-install verify` after installing.",
            )
        )


def _gpus(ev: Evaluation, warnings: list[Notice], reasons: list[str]) -> None:
    assert ev.wheel is not None  # a release without the target's wheel fails before its notices
    target, caps = ev.target, ev.wheel.compute_capabilities
    if caps:
        reasons.append(f"TF {ev.release.version}'s kernels: compute capability {gpu.describe(caps)}.")
    if "compute_capabilities" in ev.wheel.unverified:
        warnings.append(
            Notice(
                "unverified-data",
                f"TF {ev.release.version}'s wheel lists its GPU targets without saying which carry PTX; the plan "
                "assumes the SASS/PTX split of an older release with the same targets.",
                "The next tfgpu-install release reads the wheel's fatbins (scripts/regen_tf_data.py) and supersedes this row.",
            )
        )
    if not target.gpu_ccs:
        reasons.append(f"GPU: {target.gpu_source}; pass --gpu-cc to check a GPU's architecture.")
        return
    for cc, cov in ev.coverage.items():
        if cov is gpu.Coverage.NATIVE:
            reasons.append(f"GPU compute capability {cc} ({target.gpu_source}): compiled kernels included.")
        elif cov is gpu.Coverage.PTX_JIT:
            warnings.append(
                Notice(
                    "gpu-ptx-jit",
                    f"TF {ev.release.version} has no compiled kernels for compute capability {cc}: the driver "
                    "JIT-compiles them from PTX (slow first run, minutes for large models; needs a driver at "
                    "least as new as the PTX toolchain).",
                    "Set CUDA_CACHE_MAXSIZE=4294967296 so the JIT cache keeps the compiled kernels; a newer TF "
                    "or NVIDIA's NGC container may carry native kernels.",
                )
            )
        if cov in (gpu.Coverage.PTX_JIT, gpu.Coverage.NATIVE):
            warnings.extend(new_gpu_notices(ev.release, ev.wheel, cc, cov, target.os))
        elif cov is gpu.Coverage.UNKNOWN:
            warnings.append(
                Notice(
                    "gpu-arch-unknown",
                    f"TF {ev.release.version}'s wheel does not record its GPU architectures; compute "
                    f"capability {cc} could not be checked.",
                    "",
                )
            )
        _architecture(ev, cc, warnings, reasons)
