"""``tfgpu-install matrix``: one row per TensorFlow release, from the same tables the resolver uses."""

from __future__ import annotations

from tfgpu.resolver import gpu, tables
from tfgpu.resolver.drivers import driver_need
from tfgpu.resolver.evaluate import LAST_NATIVE_WINDOWS, compiled_cudnn
from tfgpu.resolver.packages import choose_conda_cudnn, pip_option


def matrix(all_releases: bool = False) -> list[dict]:
    """Rows for every release (``all_releases``) or the newest patch of each series, newest first."""
    rows, seen = [], set()
    for release in tables.releases():
        if not all_releases and release.series in seen:
            continue
        seen.add(release.series)
        rows.append(_row(release))
    return rows


def _row(release: tables.Release) -> dict:
    wheel = release.wheels.get("linux_x86_64")
    series = tables.series().get(release.series)
    cuda = None
    if wheel and wheel.cuda_build:
        cuda = wheel.cuda if "." in wheel.cuda else (series.cuda if series else None)
    cudnn = compiled_cudnn(wheel, series) if wheel and wheel.cuda_build else (series.cudnn if series else None)
    linux = driver_need(cuda, "linux") if cuda else None
    windows = driver_need(cuda, "windows") if cuda else None
    caps = wheel.compute_capabilities if wheel else ()
    pip = pip_option(release, "linux_x86_64", wheel.python[-1], None) if wheel and wheel.python else None
    conda_cudnn = choose_conda_cudnn(".".join(cuda.split(".")[:2]), cudnn) if cuda and cudnn else None
    metal = [row.metal for row in tables.metal() if release.version in row.tensorflow]
    return {
        "tensorflow": str(release.version),
        "prerelease": release.version.is_prerelease,
        "data": release.origin,
        "uploaded": release.uploaded,
        "python": list(wheel.python) if wheel else [],
        "cuda": cuda,
        "cudnn": cudnn,
        "min_driver_linux": linux.minimum if linux else None,
        "min_driver_windows": windows.minimum if windows else None,
        "compute_capabilities": list(caps),
        "min_compute_capability": gpu.lowest_cc(caps) if caps else None,
        "gpu_platforms": [
            key
            for key, w in release.wheels.items()
            if w.cuda_build and (key != "windows_x86_64" or release.version <= LAST_NATIVE_WINDOWS)
        ]
        + (["macos (tensorflow-metal)"] if metal else []),
        "pip_cuda": (pip.packages.pip if pip and pip.available else []),
        "conda_cudnn": str(conda_cudnn.version) if conda_cudnn else None,
        "tensorflow_metal": metal[0] if metal else None,
    }
