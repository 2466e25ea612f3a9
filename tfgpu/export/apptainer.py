"""An Apptainer (Singularity) definition file for the resolution: the image the Dockerfile export
describes, for clusters that run containers with ``apptainer exec --nv`` instead of Docker.

The same base image (``tfgpu.export.dockerfile.choose_image`` in system mode, ``python:X.Y-slim``
in pip mode, micromamba in conda mode), the same packages, the same loader set-up and the same
checks: ``%post`` installs and checks that TensorFlow imports as a CUDA build (no GPU needed),
``%test`` repeats that check, ``%runscript`` runs a program given to ``apptainer run`` or, with
none, the GPU verification. Apptainer's ``--nv`` binds the host driver's libraries through
LD_LIBRARY_PATH, so ``%environment`` puts the env's directories in front of it, never instead.
Shell words go through ``tfgpu.doors.quoting.def_word`` (one line: a ``%`` at the start of a line
would open a section), labels through ``one_line``.
"""

from __future__ import annotations

from tfgpu.doors import quoting, requirements
from tfgpu.envs.activation import wheel_dirs
from tfgpu.errors import ImpossibleError
from tfgpu.export import embed
from tfgpu.export import pins as pins_of
from tfgpu.export.bash import channel_args, comment, default_env_name, header
from tfgpu.export.dockerfile import MICROMAMBA_IMAGE, VENV, _image_python, choose_image, programs

NAME = "tfgpu-env.def"
PROGRAMS = "/opt/tfgpu"
"""Where the image keeps its check programs (check.py, health.py, verify.py)."""


def _words(words: list[str]) -> str:
    """Shell words of one %post command: on its line when short, else one a line (continued)."""
    if len(" ".join(words)) <= 100:
        return " ".join(words)
    return " \\\n        ".join(words)


def _pip(resolution) -> tuple[str, list[str], list[str], str, str | None]:
    python = quoting.token(resolution.python, r"3\.[0-9]{1,2}", "The Python version")
    site = f"{VENV}/lib/python{python}/site-packages"
    lib_dirs, data_dir, ptxas = wheel_dirs(resolution.cuda, site)
    requirements = _words([quoting.def_word(r, "A requirement") for r in resolution.packages.pip])
    post = [
        f"python -m venv {VENV}",
        f"{VENV}/bin/pip install --no-cache-dir {requirements}",
        f"if [ -x {ptxas} ]; then ln -s {ptxas} {VENV}/bin/ptxas; fi",
    ]
    environment = [
        f"export VIRTUAL_ENV={VENV}",
        f'export PATH="{VENV}/bin:$PATH"',
        # the wheels' directories in front of what the host binds in (--nv), one a line
        *(f'export LD_LIBRARY_PATH="{d}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"' for d in reversed(lib_dirs)),
        f"export XLA_FLAGS=--xla_gpu_cuda_data_dir={data_dir}",
    ]
    return f"python:{python}-slim", post, environment, f"{VENV}/bin/python", None


def _system(resolution) -> tuple[str, list[str], list[str], str, str | None]:
    row = choose_image(resolution)
    image_python = _image_python(resolution, row)
    tag = quoting.token(row.tag, quoting.IMAGE_TAG, "The nvidia/cuda image tag")
    requirement = quoting.def_word(
        requirements.requirement(resolution.package, f"=={resolution.tensorflow}", what="The TensorFlow requirement"),
        "The TensorFlow requirement",
    )
    post = [
        "export DEBIAN_FRONTEND=noninteractive",
        "apt-get update",
        "apt-get install -y --no-install-recommends python3 python3-venv",
        "rm -rf /var/lib/apt/lists/*",
        f"python3 -m venv {VENV}",
        f"{VENV}/bin/pip install --no-cache-dir {requirement}",
    ]
    environment = [f"export VIRTUAL_ENV={VENV}", f'export PATH="{VENV}/bin:$PATH"']
    return f"nvidia/cuda:{tag}", post, environment, f"{VENV}/bin/python", image_python


def _conda(resolution) -> tuple[str, list[str], list[str], str, str | None]:
    cuda = resolution.cuda_build or resolution.cuda
    cuda_mm = quoting.token(".".join(cuda.split(".")[:2]), r"[0-9]+\.[0-9]+", "The CUDA version")
    specs = _words([quoting.def_word(spec, "A conda spec") for spec in resolution.packages.conda])
    channels = " ".join(channel_args(resolution, lambda c: quoting.def_word(c, "A conda channel")))
    requirements = _words([quoting.def_word(r, "A requirement") for r in resolution.packages.pip])
    post = [
        "# The build has no driver: the solver is told which CUDA the image is for.",
        f"export CONDA_OVERRIDE_CUDA={cuda_mm} MAMBA_ROOT_PREFIX=/opt/conda",
        f"micromamba install --yes --root-prefix /opt/conda --name base {channels} {specs}",
        "micromamba clean --all --yes",
        *([f"/opt/conda/bin/python -m pip install --no-cache-dir {requirements}"] if requirements else []),
    ]
    environment = [
        'export PATH="/opt/conda/bin:$PATH"',
        'export LD_LIBRARY_PATH="/opt/conda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"',
        "export XLA_FLAGS=--xla_gpu_cuda_data_dir=/opt/conda",
    ]
    return MICROMAMBA_IMAGE, post, environment, "/opt/conda/bin/python", None


def render_apptainer(resolution, pins=None) -> str:
    """The definition file's text (Linux CUDA targets; the same refusals as the Dockerfile export)."""
    if resolution.accelerator != "cuda" or resolution.os not in ("linux", "wsl2"):
        raise ImpossibleError(
            "export-unsupported",
            f"Apptainer images with NVIDIA GPUs are Linux images; this plan is for {resolution.os}.",
            ["Plan for Linux: --os linux --arch x86_64."],
        )
    base, post, environment, python, image_python = {"pip": _pip, "system": _system, "conda": _conda}[resolution.mode](
        resolution
    )
    stage = []
    if pins is not None and resolution.mode == "pip":  # the lock's pins and hashes, every hash required
        locked = pins_of.image_pip(pins, f"{VENV}/bin/pip", quoting.def_word)
        assert locked is not None  # made from the pins given
        post = [post[0], *pins_of.joined(locked), *post[2:]]
    elif pins is not None and resolution.mode == "conda":  # the checked files of a download stage
        stage = _lock_stage(pins)
        locked = pins_of.image_pip(pins, "/opt/conda/bin/python -m pip", quoting.def_word)
        install = (
            f"micromamba install --yes --root-prefix /opt/conda --name base --file {pins_of.LOCK_STAGE}/explicit.txt"
        )
        post = [*post[:2], install, post[3], *(pins_of.joined(locked) if locked else [])]
    base = quoting.single_line(base, "The base image")
    name = quoting.token(default_env_name(resolution), quoting.NAME, "The env name")
    files = programs(resolution, how="with --nv", runtime="its libraries bound into the container")
    written = []
    for file_name, text in files.items():
        if any(line.startswith("%") for line in text.splitlines()):  # would start a section of the file
            raise AssertionError(f"{file_name} has a line starting with %")
        delimiter = "TFGPU_" + file_name.upper().replace(".", "_")
        written += embed.file_heredoc(f"{PROGRAMS}/{file_name}", text, delimiter).splitlines()
    labels = {
        "org.opencontainers.image.title": f"{name}-gpu",
        "tfgpu.tensorflow": resolution.tensorflow,
        "tfgpu.mode": resolution.mode,
        "tfgpu.cuda": resolution.cuda_build or resolution.cuda,
        "tfgpu.cudnn": resolution.cudnn,
        "tfgpu.min_driver": resolution.min_driver,
    }
    what = f"an Apptainer image ({base})"
    lines = [
        comment(header(resolution, what, image_python=image_python, pins=pins)),
        "#",
        comment(
            [
                f"Build:  apptainer build {name}-gpu.sif {NAME}   (Docker's base image is pulled; no GPU needed)",
                f"Verify: apptainer run --nv {name}-gpu.sif   (lists the GPUs, runs a matmul, exit 1 without one)",
                f"Run:    apptainer run --nv {name}-gpu.sif train.py   (a program: run with the image's Python)",
                f"The host needs NVIDIA driver >= {resolution.min_driver}; --nv binds its libraries into the image.",
            ]
        ),
        *stage,
        "Bootstrap: docker",
        f"From: {base}",
        *(["Stage: final", "", "%files from lock", f"    {pins_of.LOCK_STAGE} {pins_of.LOCK_STAGE}"] if stage else []),
        "",
        "%labels",
        *(f"    {key} {quoting.one_line(value)}" for key, value in labels.items()),
        "",
        "%environment",
        *(f"    {line}" for line in environment),
        "    export NCCL_NVLS_ENABLE=0  # NVLink multicast off: shared GPU hosts",
        "",
        "%post",
        "    set -eu",
        *(f"    {line}" for line in post),
        "    # The image's checks as files (heredocs start at the line's beginning: no indentation).",
        f"    mkdir -p {PROGRAMS}",
        *written,
        "    # Build-time check (no GPU needed): TensorFlow imports and is a CUDA build.",
        f"    {python} {PROGRAMS}/check.py",
        "",
        "%test",
        f"    exec {python} {PROGRAMS}/check.py",
        "",
        "%runscript",
        f'    if [ "$#" -gt 0 ]; then exec {python} "$@"; fi',
        f"    exec {python} {PROGRAMS}/verify.py",
    ]
    return quoting.def_file("\n".join(lines) + "\n")


def _lock_stage(pins) -> list[str]:
    """The first stage of a definition built from a conda lock: its packages downloaded and each
    checked against the lock's sha256 (``tfgpu.export.pins.conda_fetch``); the image stage takes
    the checked files with ``%files from lock``."""
    return [
        "Bootstrap: docker",
        "From: python:3.12-slim",
        "Stage: lock",
        "",
        "%post",
        "    set -eu",
        f"    mkdir -p {pins_of.LOCK_STAGE}",
        f"    cd {pins_of.LOCK_STAGE}",
        *(f"    {line}" for line in pins_of.joined(pins_of.conda_fetch(pins, quoting.def_word))),
        "",
    ]


def sections(text: str) -> dict[str, str]:
    """``{section: body}`` of a definition file (``header`` for what precedes the first ``%``);
    the tests use it to shellcheck each script section."""
    found: dict[str, list[str]] = {"header": []}
    current = "header"
    for line in text.splitlines():
        if line.startswith("%"):
            current = line[1:].split()[0]
            found[current] = []
        else:
            found[current].append(line)
    return {key: "\n".join(value) + "\n" for key, value in found.items()}
