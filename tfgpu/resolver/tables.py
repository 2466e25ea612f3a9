"""The compatibility tables in ``tfgpu/data``, loaded once into typed records.

Each TOML file keeps its provenance (``source`` keys listed in ``sources.toml``); this module only
reads them. ``scripts/regen_tf_data.py`` regenerates ``tensorflow.toml`` from the wheels on PyPI;
the other files are curated from shared/reference/compat-facts.md.
"""

from __future__ import annotations

from tfgpu import data
from tfgpu.data import derived, load, load_part
from tfgpu.records import record
from tfgpu.resolver.releases import Release, Wheel, Wheels, release_from_row, releases, wheel_from_row
from tfgpu.versions import PlainVersion, Range, parse

__all__ = ["Release", "Wheel", "Wheels", "release_from_row", "releases", "wheel_from_row"]
"""The release records live in ``tfgpu.resolver.releases``; every caller reads them from here."""

PLATFORMS = ("linux_x86_64", "linux_aarch64", "windows_x86_64", "macos_x86_64", "macos_arm64")


def load_toml(name: str) -> dict:
    """One data table, parsed and validated by ``tfgpu.data`` (which may cache; this module only reads)."""
    return load(name)


def load_toml_part(name: str, key: str, default=None):
    """One top-level key of a data table, without decoding the rest where the cache keeps it apart
    (``tfgpu.data.load_part``)."""
    return load_part(name, key, default)


@record
class Series:
    """TensorFlow's tested build configuration for one minor series (docs table)."""

    series: str
    python: str
    compiler: str
    bazel: str
    cuda: str
    cudnn: str
    note: str
    source: tuple[str, ...]
    unverified: tuple[str, ...] = ()


@record
class Quirk:
    """A known way a release breaks, and what the plan does about it (``quirks.toml``)."""

    code: str
    tensorflow: Range
    modes: tuple[str, ...]
    python: Range
    effect: str
    newer: str
    message: str
    fix: str
    source: tuple[str, ...]


@record
class Toolkit:
    """One CUDA toolkit release and the driver it needs (``cuda.toml``)."""

    version: PlainVersion
    linux: str
    windows: str
    runfile: str
    runfile_url: str
    md5: str
    sha256: str
    source: tuple[str, ...]
    unverified: tuple[str, ...] = ()


@record
class MvcFloor:
    """The lowest driver that runs any CUDA of one major (minor-version compatibility)."""

    cuda_major: int
    linux: str
    windows: str
    source: tuple[str, ...]
    unverified: tuple[str, ...] = ()


@record
class MetalRow:
    """A row of tensorflow-metal's published compatibility table (``metal.toml``)."""

    tensorflow: Range
    metal: str
    macos: str
    python: tuple[str, ...]
    x86_64: bool
    package: str
    source: tuple[str, ...]
    unverified: tuple[str, ...] = ()
    note: str = ""


@record
class CondaCudnn:
    """A cuDNN version conda-forge carries, with the CUDA variants it was built for."""

    version: PlainVersion
    cuda: tuple[str, ...]
    source: tuple[str, ...]
    unverified: tuple[str, ...] = ()
    runs_with: tuple[str, ...] = ()
    """PEP 440 ranges of the CUDA its linux-64 builds install with (``>=12.0,<13``)."""


@record
class CondaForge:
    """What conda-forge carries for CUDA and TensorFlow (``conda_forge.toml``)."""

    cudatoolkit: tuple[str, ...]
    cuda_version: tuple[str, ...]
    cuda12_packages: tuple[str, ...]
    cudnn: tuple[CondaCudnn, ...]
    tensorflow_cuda: dict[str, tuple[str, ...]]
    tensorflow_cuda_platforms: tuple[str, ...] = ("linux_x86_64",)
    """The wheel platforms conda-forge builds TensorFlow with CUDA for (elsewhere its builds are CPU-only)."""


@record
class PipCudaSet:
    """Explicit CUDA wheels for releases without the ``and-cuda`` extra (``pip_cuda.toml``)."""

    tensorflow: Range
    cuda: str
    cudnn: str
    packages: tuple[str, ...]
    source: tuple[str, ...]


def _tuple(row: dict, key: str) -> tuple[str, ...]:
    return tuple(row.get(key, ()))


@derived
def series() -> dict[str, Series]:
    """TensorFlow's tested build configurations, by series ("2.13")."""
    rows = load_toml("tensorflow_series.toml")["series"]
    return {
        row["series"]: Series(
            series=row["series"],
            python=row["python"],
            compiler=row["compiler"],
            bazel=row["bazel"],
            cuda=row["cuda"],
            cudnn=row["cudnn"],
            note=row.get("note", ""),
            source=_tuple(row, "source"),
            unverified=_tuple(row, "unverified"),
        )
        for row in rows
    }


@derived
def quirks() -> tuple[Quirk, ...]:
    """Known-broken releases."""
    return tuple(
        Quirk(
            code=row["code"],
            tensorflow=Range(row["tensorflow"]),
            modes=_tuple(row, "modes"),
            python=Range(row.get("python", "")),
            effect=row["effect"],
            newer=row.get("newer", ""),
            message=row["message"],
            fix=row["fix"],
            source=_tuple(row, "source"),
        )
        for row in load_toml("quirks.toml")["quirk"]
    )


@derived
def toolkits() -> tuple[Toolkit, ...]:
    """Every CUDA toolkit release, oldest first."""
    rows = load_toml("cuda.toml")["toolkit"]
    return tuple(
        sorted(
            (
                Toolkit(
                    version=parse(row["version"]),
                    linux=row.get("linux", ""),
                    windows=row.get("windows", ""),
                    runfile=row.get("runfile", ""),
                    runfile_url=row.get("runfile_url", ""),
                    md5=row.get("md5", ""),
                    sha256=row.get("sha256", ""),
                    source=_tuple(row, "source"),
                    unverified=_tuple(row, "unverified"),
                )
                for row in rows
            ),
            key=lambda t: t.version,
        )
    )


@record
class Wsl2Driver:
    """The Windows driver TensorFlow's docs asked for inside WSL2, for builds of one CUDA major
    (``docs_cover``: the releases whose docs of the time speak of WSL2 at all; empty: every one)."""

    cuda_major: int
    min_driver: str = ""
    docs_cover: str = ""
    source: tuple[str, ...] = ()


@record
class CudaFacts:
    """The rest of ``cuda.toml``, by CUDA major: the minor-version-compatibility floors and the
    WSL2 driver minimums."""

    mvc: dict[int, MvcFloor]
    wsl2_driver: dict[int, Wsl2Driver]


@derived
def cuda_facts() -> CudaFacts:
    """The rest of ``cuda.toml``: MVC floors and the WSL2 minimum."""
    data = load_toml("cuda.toml")
    floors = {
        int(row["cuda_major"]): MvcFloor(
            cuda_major=int(row["cuda_major"]),
            linux=row.get("linux", ""),
            windows=row.get("windows", ""),
            source=_tuple(row, "source"),
            unverified=_tuple(row, "unverified"),
        )
        for row in data.get("mvc", [])
        if row.get("mvc", True)
    }
    wsl2_driver = {
        int(row["cuda_major"]): Wsl2Driver(
            cuda_major=int(row["cuda_major"]),
            min_driver=row.get("min_driver", ""),
            docs_cover=row.get("docs_cover", ""),
            source=_tuple(row, "source"),
        )
        for row in data.get("wsl2_driver", [])
    }
    return CudaFacts(floors, wsl2_driver)


@derived
def metal() -> tuple[MetalRow, ...]:
    """tensorflow-metal's compatibility table."""
    return tuple(
        MetalRow(
            tensorflow=Range(row["tensorflow"]),
            metal=row["metal"],
            macos=row.get("macos", ""),
            python=_tuple(row, "python"),
            x86_64=bool(row.get("x86_64", False)),
            package=row.get("package", "tensorflow"),
            source=_tuple(row, "source"),
            unverified=_tuple(row, "unverified"),
            note=row.get("note", ""),
        )
        for row in load_toml("metal.toml")["metal"]
    )


@derived
def conda_forge() -> CondaForge:
    """What conda-forge carries."""
    data = load_toml("conda_forge.toml")
    tf_cuda: dict[str, tuple[str, ...]] = {}
    for row in data.get("tensorflow", []):
        for version in row.get("versions", []):
            tf_cuda[version] = _tuple(row, "cuda")
    return CondaForge(
        cudatoolkit=_tuple(data["cudatoolkit"], "versions"),
        cuda_version=_tuple(data["cuda_version"], "versions"),
        cuda12_packages=_tuple(data["cuda12_packages"], "names"),
        cudnn=tuple(
            CondaCudnn(
                version=parse(row["version"]),
                cuda=_tuple(row, "cuda"),
                source=_tuple(row, "source"),
                unverified=_tuple(row, "unverified"),
                runs_with=_tuple(row, "runs_with"),
            )
            # generated from the cudnn-feedstock's history (scripts/regen_conda_cudnn.py)
            for row in load_toml("conda_cudnn.toml").get("cudnn", data.get("cudnn", []))
        ),
        tensorflow_cuda=tf_cuda,
        tensorflow_cuda_platforms=_tuple(data.get("tensorflow_builds", {}), "cuda_platforms") or ("linux_x86_64",),
    )


@derived
def pip_cuda() -> tuple[tuple[PipCudaSet, ...], dict]:
    """Explicit pip CUDA sets, and the ptxas facts."""
    data = load_toml("pip_cuda.toml")
    sets = tuple(
        PipCudaSet(
            tensorflow=Range(row["tensorflow"]),
            cuda=row["cuda"],
            cudnn=row["cudnn"],
            packages=_tuple(row, "packages"),
            source=_tuple(row, "source"),
        )
        for row in data["set"]
    )
    return sets, data.get("ptxas", {})


@record
class CudnnArchive:
    """One NVIDIA cuDNN archive (``cudnn_archives.toml``); ``sha256 == ""`` means unverifiable."""

    version: PlainVersion
    cuda_major: int
    cuda_min: str
    cuda_max: str
    platform: str
    filename: str
    url: str
    sha256: str
    size: int
    manifest: str
    source: tuple[str, ...]
    unverified: tuple[str, ...] = ()
    md5: str = ""
    """NVIDIA's md5 from the manifest ("" when unknown); sha256 is what downloads are checked against."""


@derived
def cudnn_archives() -> tuple[CudnnArchive, ...]:
    """Every recorded cuDNN archive, oldest first."""
    rows = load_toml("cudnn_archives.toml")["archive"]
    return tuple(
        sorted(
            (
                CudnnArchive(
                    version=parse(row["version"]),
                    cuda_major=int(row["cuda_major"]),
                    cuda_min=row.get("cuda_min", ""),
                    cuda_max=row.get("cuda_max", ""),
                    platform=row.get("platform", "linux_x86_64"),
                    filename=row["filename"],
                    url=row["url"],
                    sha256=row.get("sha256", ""),
                    size=int(row.get("size", 0)),
                    manifest=row.get("manifest", ""),
                    source=_tuple(row, "source"),
                    unverified=_tuple(row, "unverified"),
                    md5=row.get("md5", ""),
                )
                for row in rows
            ),
            key=lambda a: (a.version, a.cuda_major),
        )
    )


def clear_caches() -> None:
    """Forget every parsed table and record (for callers that change ``TFGPU_DATA_DIR`` in-process)."""
    data.clear()


def dlopened_names() -> tuple[dict, ...]:
    """sonames.toml's ``[[dlopened]]`` rows, one per caller and name (:mod:`tfgpu.data.dlopened`): the
    names CUDA libraries ``dlopen`` without a version, which create and repair provide inside the env
    (``tfgpu.envs.activation.dlopen_links``) and doctor probes (``tfgpu.doctor.libraries.dlopen_callers``)."""
    # Start-up cost: `plan --json --no-detect` loads this module but not tfgpu.data.dlopened.
    from tfgpu.data import dlopened

    return dlopened.rows(load_toml("sonames.toml"))
