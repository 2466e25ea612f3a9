"""What each install mode puts into the environment for one release and target.

pip:    ``tensorflow[and-cuda]==X`` where the extra works; TensorFlow plus explicit CUDA wheel pins
        where the extra is broken or missing (pip_cuda.toml); tensorflow-metal on macOS.
conda:  ``cudatoolkit`` + ``cudnn`` for CUDA 10/11 builds, ``cuda-version`` + the split CUDA
        packages + ``cudnn`` for CUDA 12 builds, only versions conda-forge carries; TensorFlow
        itself from PyPI into the env's Python.
system: NVIDIA's runfile for the build's CUDA, a cuDNN archive, then TensorFlow in a venv.
"""

from __future__ import annotations

from tfgpu.doors.requirements import Requirement, canonical, match_spec, requirement
from tfgpu.resolver import tables
from tfgpu.resolver.model import ModeOption, Notice, Packages
from tfgpu.versions import Range, parse

# The CUDA 12 libraries TensorFlow dlopens, plus nvcc tools for XLA's ptxas and libdevice.
CUDA12_CONDA = (
    "cuda-cudart",
    "libcublas",
    "libcufft",
    "libcurand",
    "libcusolver",
    "libcusparse",
    "cuda-nvrtc",
    "cuda-cupti",
    "libnvjitlink",
    "cuda-nvcc-tools",
)


_DATA = "A requirement from the release data"


def _counted(specs) -> str:
    """How many of an extra's requirements are exact pins (``==12.5.82``) and how many ranges
    (``<10.0,>=9.10.2.21``): "12 requirements, all ranges", not "12 pins" after a warning that the
    extra gives ranges."""
    specs = list(specs)
    exact = sum(1 for spec in specs if spec.strip().startswith("==") and "," not in spec and "*" not in spec)
    if exact == len(specs):
        return f"{len(specs)} requirements, all exact pins"
    if exact == 0:
        return f"{len(specs)} requirements, all version ranges"
    ranged = len(specs) - exact
    return (
        f"{len(specs)} requirements: {exact} exact pin{'s' * (exact > 1)}, {ranged} version range{'s' * (ranged > 1)}"
    )


def quirks_for(release: tables.Release, mode: str, python: str | None) -> list[tables.Quirk]:
    """Known problems of ``release`` that matter for ``mode`` (and ``python``, where given)."""
    return [
        q
        for q in tables.quirks()
        if release.version in q.tensorflow
        and mode in q.modes
        and (python is None or not str(q.python) or parse(python) in q.python)
    ]


def unavailable(code: str, reason: str) -> ModeOption:
    return ModeOption(available=False, code=code, reason=reason)


def pip_option(release, platform: str, python: str, metal_row) -> ModeOption:
    """The pip (venv) mode for one release."""
    name = release.gpu_package
    if metal_row is not None:
        return ModeOption(
            True,
            Packages(
                pip=(
                    requirement(metal_row.package, f"=={release.version}", what=_DATA),
                    requirement("tensorflow-metal", f"=={metal_row.metal}", what=_DATA),
                ),
                notes=(
                    f"tensorflow-metal {metal_row.metal} is the plugin published for TF "
                    f"{metal_row.tensorflow} (macOS {metal_row.macos}+).",
                ),
            ),
        )
    if platform == "windows_x86_64":
        return unavailable(
            "no-pip-cuda-wheels",
            "NVIDIA publishes no CUDA wheels for native Windows: TensorFlow's own recipe takes "
            "cudatoolkit and cuDNN from conda-forge (--mode conda).",
        )
    explicit = [q for q in quirks_for(release, "pip", python) if q.effect == "explicit-pins"]
    if release.and_cuda and not explicit:
        extra = release.cuda_extra or "and-cuda"
        pip = [requirement(name, f"=={release.version}", extras=(extra,), what=_DATA)]
        pins = tuple(requirement(dist, spec, what=_DATA) for dist, spec in sorted(release.and_cuda.items()))
        notes = [
            f"CUDA libraries from the {extra} extra of TF {release.version} (read from its wheel; "
            f"packages.cuda_extra lists its {_counted(release.and_cuda.values())})."
        ]
        floor = _ptxas_floor(release)
        if floor:
            pip.append(floor)
            notes.append(
                f"{floor}: XLA warns that ptxas up to 12.6.2 miscompiles; the extra's range allows a newer one."
            )
        return ModeOption(True, Packages(pip=tuple(pip), notes=tuple(notes), cuda_extra=pins))
    if release.and_cuda:
        explicit_pins = [
            requirement(dist, spec, what=_DATA)
            for dist, spec in sorted(release.and_cuda.items())
            if not dist.startswith("tensorrt")
        ]
        return ModeOption(
            True,
            Packages(
                pip=(requirement(name, f"=={release.version}", what=_DATA), *explicit_pins),
                notes=(
                    f"The and-cuda extra of TF {release.version} cannot be installed ({explicit[0].code}): "
                    "its CUDA pins are installed explicitly, without TensorRT.",
                ),
            ),
        )
    sets, _ = tables.pip_cuda()
    for cuda_set in sets:
        if release.version in cuda_set.tensorflow:
            return ModeOption(
                True,
                Packages(
                    pip=(
                        requirement(name, f"=={release.version}", what=_DATA),
                        *(canonical(p, what=_DATA) for p in cuda_set.packages),
                    ),
                    notes=(
                        f"TF {release.version} has no and-cuda extra: CUDA {cuda_set.cuda} / cuDNN "
                        f"{cuda_set.cudnn} wheels pinned explicitly.",
                    ),
                ),
            )
    return unavailable(
        "no-pip-cuda-wheels",
        f"TF {release.version} was built on CUDA {_cuda(release, platform)}, which has no CUDA wheels on PyPI "
        "(nvidia-*-cu11 wheels start at CUDA 11.7): use --mode conda or --mode system.",
    )


def _ptxas_floor(release) -> Requirement | None:
    _, ptxas = tables.pip_cuda()
    spec = release.and_cuda.get(ptxas.get("package", ""), "")
    first_good = ptxas.get("first_good", "")
    if not spec or not first_good or spec.startswith("=="):
        return None
    allowed = Range(spec)
    return requirement(ptxas["package"], f">={first_good}", what=_DATA) if parse(first_good) in allowed else None


def _cuda(release, platform: str) -> str:
    wheel = release.wheels.get(platform)
    return wheel.cuda if wheel else "?"


def choose_conda_cudnn(cuda: str, cudnn: str) -> tables.CondaCudnn | None:
    """The conda-forge cuDNN for a build: same major, minor >= the compiled one, a build that installs
    with the build's CUDA (its recipe's run pins, ``runs_with``; rows without them: a variant of the
    same CUDA major at or below the build's). Preferred: a variant of exactly the build's CUDA, then one
    built with a CUDA no newer than the build's, then the newest.

    Where no row has a known build for this CUDA, the newest row of the right major whose CUDA
    variants are unrecorded is taken (its ``unverified`` marks say so; the plan warns).
    """
    need = parse(cudnn)
    cuda_v = parse(cuda)

    def fits(row: tables.CondaCudnn) -> bool:
        if row.runs_with:
            return any(cuda_v in Range(spec) for spec in row.runs_with)
        return any(parse(v).major == cuda_v.major and parse(v).release[:2] <= cuda_v.release[:2] for v in row.cuda)

    known, unknown = [], []
    for row in tables.conda_forge().cudnn:
        if row.version.major != need.major or row.version.release[:2] < need.release[:2]:
            continue
        if row.cuda and fits(row):
            same_major = [parse(v) for v in row.cuda if parse(v).major == cuda_v.major]
            exact = any(v.release[:2] == cuda_v.release[:2] for v in same_major)
            older = any(v.release[:2] <= cuda_v.release[:2] for v in same_major)
            known.append(((exact, older), row.version, row))
        elif not row.cuda:
            unknown.append((row.version, row))
    if known:
        return max(known, key=lambda c: (c[0], c[1]))[2]
    return max(unknown, key=lambda c: c[0])[1] if unknown else None


def conda_option(release, cuda: str | None, cudnn: str | None, python: str, metal_row) -> ModeOption:
    """The conda mode for one release."""
    name = release.gpu_package
    if metal_row is not None:
        pip_part = pip_option(release, "macos", python, metal_row).packages
        return ModeOption(
            True,
            Packages(conda=(match_spec(f"python {python}.*", what=_DATA),), pip=pip_part.pip, notes=pip_part.notes),
        )
    if not cuda or not cudnn:
        return unavailable("no-gpu-build", f"TF {release.version} has no CUDA build here.")
    forge = tables.conda_forge()
    mm = ".".join(cuda.split(".")[:2])
    specs = [f"python {python}.*"]
    if parse(mm).major >= 12:
        if mm not in forge.cuda_version:
            return unavailable("no-conda-cuda-packages", f"conda-forge has no cuda-version {mm}.")
        specs += [f"cuda-version {mm}.*", *CUDA12_CONDA]
    else:
        if mm not in forge.cudatoolkit:
            return unavailable(
                "no-conda-cuda-packages",
                f"conda-forge has no cudatoolkit {mm} (it carries {', '.join(forge.cudatoolkit)}).",
            )
        specs.append(f"cudatoolkit {mm}.*")
    row = choose_conda_cudnn(mm, cudnn)
    if row is None:
        return unavailable(
            "no-conda-cuda-packages",
            f"conda-forge has no cuDNN {parse(cudnn).major}.x >= {cudnn} built for CUDA {mm}.",
        )
    specs.append(f"cudnn =={row.version}")
    caveats = (
        ()
        if row.cuda
        else (
            Notice(
                "unverified-data",
                f"conda-forge carries cuDNN {row.version}, but which CUDA versions it was built for is unverified; "
                f"the solve decides whether a build for CUDA {mm} exists.",
                "If the solve fails, use --mode system (NVIDIA's cuDNN archive) or a newer TensorFlow.",
            ),
        )
    )
    return ModeOption(
        True,
        warnings=caveats,
        packages=Packages(
            conda=tuple(match_spec(spec, what=_DATA) for spec in specs),
            pip=(requirement(name, f"=={release.version}", what=_DATA),),
            notes=(
                f"cuDNN {row.version}: major {parse(cudnn).major} as TF requires, minor >= {cudnn}, "
                f"conda-forge build for CUDA {_variants_for(row, mm)}.",
                "TensorFlow itself comes from PyPI into the env's Python, without the and-cuda extra, "
                "so CUDA is not installed twice.",
            ),
        ),
    )


def _variants_for(row: tables.CondaCudnn, cuda: str) -> str:
    """The row's CUDA variants that serve a build of ``cuda``, and the range they install with."""
    major = parse(cuda).major
    variants = [v for v in row.cuda if parse(v).major == major] or list(row.cuda)
    ranges = [spec for spec in row.runs_with if parse(cuda) in Range(spec)]
    return (", ".join(variants) or "unrecorded versions") + (f" (installs with CUDA {ranges[0]})" if ranges else "")


def system_option(release, platform: str, cuda: str | None, cudnn: str | None) -> ModeOption:
    """The system (runfile) mode for one release: the CUDA runfile and the concrete cuDNN archive."""
    if platform != "linux_x86_64":
        return unavailable(
            "mode-unsupported",
            "System mode installs NVIDIA's Linux x86_64 runfile; it exists only for Linux and WSL2 on x86_64.",
        )
    if not cuda or not cudnn:
        return unavailable("no-gpu-build", f"TF {release.version} has no CUDA build here.")
    toolkit = _runfile_toolkit(cuda)
    if toolkit is None:
        return unavailable("no-runfile", f"No CUDA {cuda} runfile is recorded in tfgpu's data.")
    archive = cudnn_archive_for(cuda, cudnn)
    if archive is None:
        return unavailable(
            "no-cudnn-archive",
            f"No cuDNN {parse(cudnn).major}.x >= {cudnn} archive for CUDA "
            f"{parse(cuda).major} is recorded in tfgpu's data (cudnn_archives.toml).",
        )
    notes = [
        f"CUDA {toolkit.version} toolkit (runfile, toolkit only, no driver) for a build made with CUDA {cuda}.",
        f"cuDNN {archive.version} ({archive.filename}): major {parse(cudnn).major} as TF requires, minor >= {cudnn}.",
    ]
    warnings = []
    for what, name, verified in (
        ("runfile", toolkit.runfile, toolkit.sha256 or toolkit.md5),
        ("cuDNN archive", archive.filename, archive.sha256),
    ):
        if not verified:
            warnings.append(
                Notice(
                    "unverified-download",
                    f"No checksum is recorded for the {what} {name}: system mode refuses to install a download it "
                    "cannot verify.",
                    "Use --mode pip or --mode conda, or give the file's sha256 in a TFGPU_DATA_DIR overlay "
                    "(docs/modes.md, System mode).",
                )
            )
    return ModeOption(
        True,
        warnings=tuple(warnings),
        packages=Packages(
            downloads=(toolkit.runfile_url or toolkit.runfile, archive.url),
            pip=(requirement(release.gpu_package, f"=={release.version}", what=_DATA),),
            notes=tuple(notes),
        ),
    )


def _runfile_toolkit(cuda: str) -> tables.Toolkit | None:
    """The runfile for a build's CUDA: the exact release when the build names a patch (12.5.1) and
    its checksum is known, else the newest patch of the same minor with a known checksum (any patch
    of X.Y runs an X.Y build; a bare "12.2" is not a request for 12.2.0), else the exact one, else
    the newest of the minor."""
    wanted = parse(cuda)
    rows = [t for t in tables.toolkits() if t.runfile and t.version.release[:2] == wanted.release[:2]]
    exact = [t for t in rows if t.version == wanted] if len(wanted.release) > 2 else []
    checked = [t for t in rows if t.sha256 or t.md5]
    for choice in ([t for t in exact if t in checked], checked[-1:], exact, rows[-1:]):
        if choice:
            return choice[0]
    return None


def cudnn_archive_for(cuda: str, cudnn: str) -> tables.CudnnArchive | None:
    """The cuDNN archive for a build: the same major and at least the compiled minor [CUDNN-FC], the
    archive for the build's CUDA major; a verifiable one (known sha256) first, then one whose
    recorded CUDA range covers the build, then the newest."""
    need, cuda_v = parse(cudnn), parse(cuda)

    def covers(row: tables.CudnnArchive) -> bool:
        if not row.cuda_min or not row.cuda_max:
            return False
        return parse(row.cuda_min).release[:2] <= cuda_v.release[:2] <= parse(row.cuda_max).release[:2]

    rows = [
        row
        for row in tables.cudnn_archives()
        if row.platform == "linux_x86_64"
        and row.cuda_major == cuda_v.major
        and row.version.major == need.major
        and row.version.release[:2] >= need.release[:2]
    ]
    if not rows:
        return None
    return max(rows, key=lambda row: (bool(row.sha256), covers(row), row.version))
