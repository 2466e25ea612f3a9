"""Where TensorFlow comes from in a conda-mode env: PyPI (uv into the env's Python) or
conda-forge's own CUDA build. The resolver decides it here, so ``plan``, ``lock``, ``script`` and
``create`` agree, and engines only turn the decision into specs.

PyPI is the default: its wheels are TensorFlow's own builds (every release, every Python it
publishes), and the conda env supplies the CUDA toolkit and cuDNN they were built against.
conda-forge's CUDA builds (``--tf-source conda-forge``) bring their own CUDA and cuDNN and leave
PyPI out of the env entirely, but the feedstock lags (its newest is in ``conda_forge.toml``) and
builds CUDA variants for Linux x86_64 only. Asked for and missing, it is refused
(``no-conda-forge-build``), never silently replaced by PyPI.
"""

from __future__ import annotations

from tfgpu.doors.requirements import match_spec
from tfgpu.records import record
from tfgpu.resolver import tables
from tfgpu.resolver.model import ModeOption, Packages

PYPI = "pypi"
CONDA_FORGE = "conda-forge"


@record
class Choice:
    """The source chosen for one release, or why the one asked for cannot be had."""

    source: str
    reason: str
    option: ModeOption | None = None
    """conda mode's packages for this source (``None``: the PyPI option stands)."""
    failure: tuple[str, str, tuple[str, ...]] | None = None
    """``(code, message, ways forward)`` when the wish cannot be met."""


def conda_forge_cuda(version: str) -> tuple[str, ...] | None:
    """The CUDA versions conda-forge builds TensorFlow ``version`` for (by release, else by series),
    or ``None`` when it has no CUDA build of it."""
    builds = tables.conda_forge().tensorflow_cuda
    series = ".".join(version.split(".")[:2])
    return builds.get(version) or builds.get(series)


def newest_conda_forge() -> str:
    """The newest TensorFlow conda-forge has a CUDA build of, as the data writes it."""
    return max(tables.conda_forge().tensorflow_cuda, key=lambda v: tuple(int(p) for p in v.split(".")))


def choose(wish: str | None, version: str, platform: str, python: str, mode: str) -> Choice:
    """The source of TensorFlow ``version`` in ``mode`` for ``platform``: what the user wished for
    (``pypi``, ``conda-forge``) when it can be had, PyPI otherwise. Outside conda mode it is PyPI."""
    if mode != "conda":
        return Choice(PYPI, f"TensorFlow from PyPI: {mode} mode installs it with the Python packages.")
    newest = newest_conda_forge()
    if wish != CONDA_FORGE:
        how = "--tf-source pypi" if wish == PYPI else "the default"
        return Choice(
            PYPI,
            f"TensorFlow from PyPI into the conda env ({how}): TensorFlow's own wheels, with "
            "CUDA and cuDNN from conda-forge; --tf-source conda-forge takes conda-forge's CUDA "
            f"build instead (up to {newest}).",
        )
    cuda = conda_forge_cuda(version)
    forge = tables.conda_forge()
    drop = "Or drop --tf-source: TensorFlow from PyPI into the conda env."
    if cuda is None:
        return Choice(
            CONDA_FORGE,
            "",
            failure=(
                "no-conda-forge-build",
                f"conda-forge has no CUDA build of TensorFlow {version} (its newest is {newest}).",
                (f"--tf {newest} --tf-source conda-forge", drop),
            ),
        )
    if platform not in forge.tensorflow_cuda_platforms:
        return Choice(
            CONDA_FORGE,
            "",
            failure=(
                "no-conda-forge-build",
                f"conda-forge has no CUDA build of TensorFlow {version} for {platform}: its "
                f"CUDA builds are for {', '.join(forge.tensorflow_cuda_platforms)} only.",
                (drop,),
            ),
        )
    what = "--tf-source conda-forge"
    packages = Packages(
        conda=(match_spec(f"python {python}.*", what=what), match_spec(f"tensorflow =={version} cuda*", what=what)),
        notes=(
            f"TensorFlow {version} is conda-forge's CUDA build (built for CUDA {', '.join(cuda)}; the solve "
            "takes the variant the driver allows), which brings its own CUDA and cuDNN: nothing from PyPI.",
        ),
    )
    return Choice(
        CONDA_FORGE,
        f"TensorFlow from conda-forge (as asked, --tf-source conda-forge): its CUDA build "
        f"of {version}, not PyPI's wheel.",
        option=ModeOption(True, packages),
    )
