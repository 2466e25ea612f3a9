"""A Dockerfile for the resolution: an image whose TensorFlow runs on the host's GPUs.

* system mode: ``FROM nvidia/cuda:<cuda>-cudnn…-runtime-<ubuntu>`` (a tag from
  ``tfgpu/data/docker_images.toml``: same CUDA major.minor as the build, else a newer minor of the
  same major, and the same cuDNN major), Ubuntu's python3 and a venv with plain ``tensorflow``.
* pip mode: ``python:X.Y-slim`` and a venv with the pinned CUDA wheels; the loader set-up is ENV
  (the wheels' library directories first on LD_LIBRARY_PATH, XLA_FLAGS, ptxas on PATH), which in an
  image reaches every process the way the load hook does in a venv.
* conda mode: ``mambaorg/micromamba`` solving the same conda specs from the plan's channels (CONDA_OVERRIDE_CUDA set,
  as the build has no driver), then TensorFlow from PyPI into the env.

Every image runs as a non-root user, checks at build time that TensorFlow imports and is a CUDA
build (no GPU needed), and its default command is the GPU verification
(``docker run --rm --gpus all IMAGE`` exits 1 when TensorFlow sees no GPU).
"""

from __future__ import annotations

from packaging.version import Version

from tfgpu.doors import quoting, requirements
from tfgpu.envs.activation import wheel_dirs
from tfgpu.errors import ImpossibleError
from tfgpu.export import pins as pins_of
from tfgpu.export.bash import channel_args, comment, default_env_name, header
from tfgpu.records import record
from tfgpu.resolver.tables import load_toml, releases

MICROMAMBA_IMAGE = "mambaorg/micromamba:1.5.10"  # tag of the 1.5 series; pin by digest in production
VENV = "/opt/tf"
# The image's own checks, as files of the image (readable, and every line short): the build check
# needs no GPU; the health check and the default command (the verification) need one.
BUILD_CHECK = """import tensorflow as tf
print("TensorFlow", tf.__version__, "CUDA build:", tf.test.is_built_with_cuda())
assert tf.test.is_built_with_cuda(), "not a CUDA build"
"""
HEALTH = """import sys
import tensorflow as tf
sys.exit(0 if tf.config.list_physical_devices("GPU") else 1)
"""
VERIFY = """import sys
import tensorflow as tf
gpus = tf.config.list_physical_devices("GPU")
print("TensorFlow", tf.__version__, "GPUs:", [g.name for g in gpus])
if not gpus:
    sys.exit("FAIL: TensorFlow sees no GPU: run it {how} on a host with NVIDIA driver >= {driver} and {runtime}")
x = tf.random.normal((1024, 1024))
print("OK: matmul on", tf.matmul(x, x).device)
"""


def programs(resolution, how: str = "with --gpus all", runtime: str = "the NVIDIA Container Toolkit") -> dict:
    """The image's check programs by file name (``check.py``, ``health.py``, ``verify.py``)."""
    driver = quoting.token(resolution.min_driver, r"[0-9.]+", "The driver version")
    return {
        "check.py": BUILD_CHECK,
        "health.py": HEALTH,
        "verify.py": VERIFY.format(how=how, driver=driver, runtime=runtime),
    }


def _write_programs(directory: str, files: dict) -> list[str]:
    """One RUN writing ``files`` into ``directory`` (a line of each program a printf argument)."""
    lines = [f"RUN mkdir -p {directory} \\"]
    for name, text in files.items():
        lines.append("    && printf '%s\\n' \\")
        lines += [f"        {quoting.docker_word(line, 'A program line')} \\" for line in text.splitlines()]
        lines.append(f"        >{directory}/{name} \\")
    lines[-1] = lines[-1].removesuffix(" \\")
    return lines


@record
class CudaImage:
    """A row of ``docker_images.toml``: an nvidia/cuda runtime image, its CUDA, cuDNN and the
    distribution's own python3 (``unverified``: the facts not checked against Docker Hub)."""

    cuda: str
    cudnn_major: int
    os: str
    python: str
    tag: str
    source: tuple[str, ...] = ()
    unverified: tuple[str, ...] = ()


def choose_image(resolution) -> CudaImage:
    """The nvidia/cuda image for ``resolution``; ImpossibleError when no tag fits."""

    cuda = Version(resolution.cuda_build or resolution.cuda)
    cudnn_major = Version(resolution.cudnn).major
    images = [
        CudaImage(
            row["cuda"],
            row["cudnn_major"],
            row["os"],
            row["python"],
            row["tag"],
            tuple(row.get("source", ())),
            tuple(row.get("unverified", ())),
        )
        for row in load_toml("docker_images.toml")["image"]
    ]
    rows = [
        row
        for row in images
        if Version(row.cuda).major == cuda.major
        and row.cudnn_major == cudnn_major
        and Version(row.cuda).release[:2] >= cuda.release[:2]
    ]
    if not rows:
        raise ImpossibleError(
            "no-docker-image",
            f"No nvidia/cuda image with cuDNN {cudnn_major} and CUDA {cuda.major}.{cuda.minor} or a newer "
            f"{cuda.major}.x is recorded for TF {resolution.tensorflow} (built with CUDA {cuda}, cuDNN {resolution.cudnn}).",
            [
                "--mode pip --format dockerfile builds the same TensorFlow on python:X.Y-slim with NVIDIA's CUDA wheels.",
                "Or choose a TensorFlow whose CUDA/cuDNN has an image (`tfgpu-install matrix`).",
            ],
        )
    exact = [row for row in rows if Version(row.cuda).release[:2] == cuda.release[:2]]
    if exact:  # the newest patch release of the build's own CUDA
        return max(exact, key=lambda row: Version(row.cuda))
    return min(rows, key=lambda row: Version(row.cuda))  # else the nearest newer minor


def _image_python(resolution, row: CudaImage) -> str:

    wanted = Version(resolution.tensorflow)
    supported = next(
        (
            r.wheels[resolution.platform].python
            for r in releases()
            if r.version == wanted and resolution.platform in r.wheels
        ),
        (),
    )
    if row.python not in supported:
        raise ImpossibleError(
            "no-docker-image",
            f"nvidia/cuda:{row.tag} has Python {row.python} ({row.os}), and TF {resolution.tensorflow} "
            f"has wheels for {', '.join(supported)} only.",
            ["--mode pip --format dockerfile picks a python:X.Y-slim base that fits."],
        )
    return row.python


def _lines(resolution, what: str, image_python: str | None = None, pins=None) -> list[str]:
    name = quoting.token(default_env_name(resolution), quoting.NAME, "The env name")
    return [
        "# syntax=docker/dockerfile:1",
        comment(header(resolution, what, image_python=image_python, pins=pins)),
        "#",
        comment(
            [
                f"Build:  docker build -t {name}-gpu .",
                f"Verify: docker run --rm --gpus all {name}-gpu   (the default command: lists the GPUs, runs a",
                "        matmul on one, exits 1 if TensorFlow sees none). The host needs NVIDIA driver",
                f"        >= {resolution.min_driver} and the NVIDIA Container Toolkit.",
            ]
        ),
    ]


def _tail(resolution, python: str, user: str | None, directory: str = "/usr/local/share/tfgpu") -> list[str]:
    lines = [
        "# The image's checks (build, health, verification) as files of the image.",
        *_write_programs(directory, programs(resolution)),
    ]
    if user:
        lines += [
            f"RUN groupadd --gid 10001 {user} \\",
            f"    && useradd --create-home --uid 10001 --gid 10001 --shell /bin/bash {user}",
            "USER 10001:10001",
            f"WORKDIR /home/{user}",
        ]
    lines += [
        "# Build-time check (no GPU needed): TensorFlow imports and is a CUDA build.",
        f"RUN {quoting.docker_json([python, f'{directory}/check.py'])}",
        "HEALTHCHECK --interval=30m --timeout=2m --start-period=1m \\",
        f"    CMD {quoting.docker_json([python, f'{directory}/health.py'])}",
        f"CMD {quoting.docker_json([python, f'{directory}/verify.py'])}",
    ]
    return lines


def _words(words: list[str]) -> str:
    """Shell words for a RUN line: on that line when short, else one a line (backslash-continued)."""
    if len(" ".join(words)) <= 100:
        return " ".join(words)
    return " \\\n        ".join(words)


def _python(resolution) -> str:
    return quoting.token(resolution.python, r"3\.[0-9]{1,2}", "The Python version")


def _pip(resolution, pins=None) -> list[str]:
    python = _python(resolution)
    site = f"{VENV}/lib/python{python}/site-packages"
    lib_dirs, data_dir, ptxas = wheel_dirs(resolution.cuda, site)
    requirements = _words([quoting.docker_word(r, "A requirement") for r in resolution.packages.pip])
    install = [f"RUN python -m venv {VENV} \\", f"    && {VENV}/bin/pip install --no-cache-dir {requirements} \\"]
    locked = pins_of.image_pip(pins, f"{VENV}/bin/pip", quoting.docker_word)
    if locked:  # the lock's pins and hashes, installed with every hash required
        install = [
            f"RUN python -m venv {VENV} \\",
            f"    && {locked[0]} \\",
            *(f"    {line} \\" for line in locked[1:]),
        ]
    return [
        *_lines(resolution, "a Docker image (python slim base + NVIDIA's CUDA wheels)", pins=pins),
        f"FROM python:{python}-slim",
        f"ENV VIRTUAL_ENV={VENV} PATH={VENV}/bin:$PATH PIP_DISABLE_PIP_VERSION_CHECK=1",
        *install,
        f"    && if [ -x {ptxas} ]; then ln -s {ptxas} {VENV}/bin/ptxas; fi",
        "# The loader set-up (what the venv's load hook does): the wheels' CUDA libraries first, XLA's",
        "# libdevice; ENV reaches every process in the container (docker exec, Jupyter, cron).",
        # one directory a line: a continuation line's leading blanks would become part of the value
        "ENV LD_LIBRARY_PATH=\\",
        *(f"{d}:\\" for d in lib_dirs[:-1]),
        f"{lib_dirs[-1]} \\",
        f"    XLA_FLAGS=--xla_gpu_cuda_data_dir={data_dir}",
        *_tail(resolution, "python", "tf"),
    ]


def _system(resolution, pins=None) -> list[str]:
    row = choose_image(resolution)
    python = _image_python(resolution, row)
    tag = quoting.token(row.tag, quoting.IMAGE_TAG, "The nvidia/cuda image tag")
    unverified = " (tag unverified: check it exists on Docker Hub)" if "tag" in row.unverified else ""
    return [
        *_lines(
            resolution,
            f"a Docker image (nvidia/cuda base with CUDA {row.cuda} and cuDNN {row.cudnn_major})",
            image_python=python,
            pins=pins,
        ),
        quoting.comment(
            [
                f"Base: nvidia/cuda:{tag}{unverified}; Python {python} is {row.os}'s python3",
                f"(the plan's Python {resolution.python} is not what this base ships). XLA's ptxas/libdevice are",
                "not in runtime images: use the matching -devel- tag if the model uses jit_compile.",
            ]
        ),
        f"FROM nvidia/cuda:{tag}",
        "# Ubuntu's python3 packages are not pinned: the base tag fixes the release they come from.",
        "# hadolint ignore=DL3008",
        "RUN apt-get update \\",
        "    && apt-get install -y --no-install-recommends python3 python3-venv \\",
        "    && rm -rf /var/lib/apt/lists/*",
        f"ENV VIRTUAL_ENV={VENV} PATH={VENV}/bin:$PATH PIP_DISABLE_PIP_VERSION_CHECK=1",
        f"RUN python3 -m venv {VENV} \\",
        f"    && {VENV}/bin/pip install --no-cache-dir "
        f"{quoting.docker_word(_tensorflow(resolution), 'The TensorFlow requirement')}",
        *_tail(resolution, "python", "tf"),
    ]


def _tensorflow(resolution) -> str:
    """The system image's one requirement, through the requirement door like every other."""
    return requirements.requirement(resolution.package, f"=={resolution.tensorflow}", what="The TensorFlow requirement")


def _conda(resolution, pins=None) -> list[str]:
    cuda = resolution.cuda_build or resolution.cuda
    cuda_mm = quoting.token(".".join(cuda.split(".")[:2]), r"[0-9]+\.[0-9]+", "The CUDA version")
    specs = _words([quoting.docker_word(spec, "A conda spec") for spec in resolution.packages.conda])
    requirements = _words([quoting.docker_word(r, "A requirement") for r in resolution.packages.pip])
    channels = " ".join(channel_args(resolution, lambda c: quoting.docker_word(c, "A conda channel")))
    stage, conda, pip = (
        [],
        [f"RUN micromamba install --yes --name base {channels} {specs} \\"],
        ([f"RUN python -m pip install --no-cache-dir {requirements}"] if requirements else []),
    )
    if pins is not None and pins.conda:  # a conda lock: its checked files, and its PyPI part by hash
        stage = pins_of.conda_image_stage(pins, quoting.docker_word)
        conda = [
            f"COPY --from=lock {pins_of.LOCK_STAGE} {pins_of.LOCK_STAGE}",
            f"RUN micromamba install --yes --name base --file {pins_of.LOCK_STAGE}/explicit.txt \\",
        ]
        locked = pins_of.image_pip(pins, "python -m pip", quoting.docker_word)
        pip = (
            [f"RUN {locked[0]} \\", *(f"    {line} \\" for line in locked[1:-1]), f"    {locked[-1]}"] if locked else []
        )
    return [
        *_lines(resolution, "a Docker image (micromamba base, CUDA and cuDNN from conda packages)", pins=pins),
        *stage,
        f"FROM {MICROMAMBA_IMAGE}",
        "# The build has no driver: the solver is told which CUDA the image is for.",
        f"ENV CONDA_OVERRIDE_CUDA={cuda_mm}",
        *conda,
        "    && micromamba clean --all --yes",
        "ARG MAMBA_DOCKERFILE_ACTIVATE=1",
        *pip,
        "# What the env's activate.d script does: its CUDA libraries first, XLA's libdevice.",
        "ENV LD_LIBRARY_PATH=/opt/conda/lib XLA_FLAGS=--xla_gpu_cuda_data_dir=/opt/conda",
        "# The image's own user (mambauser) is not root; the entrypoint activates the env.",
        *_tail(resolution, "/opt/conda/bin/python", None, "/opt/conda/share/tfgpu"),
    ]


def render_dockerfile(resolution, pins=None) -> str:
    """The Dockerfile text for ``resolution`` (system, pip or conda mode; Linux CUDA targets)."""
    if resolution.accelerator != "cuda" or resolution.os not in ("linux", "wsl2"):
        raise ImpossibleError(
            "export-unsupported",
            f"Docker images with NVIDIA GPUs are Linux images; this plan is for {resolution.os}.",
            ["Plan for Linux: --os linux --arch x86_64."],
        )
    build = {"pip": _pip, "system": _system, "conda": _conda}[resolution.mode]
    return "\n".join(build(resolution, pins)) + "\n"
