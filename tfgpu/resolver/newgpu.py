"""A GPU newer than a release's kernels (Blackwell, 10.x/12.x): what runs, what does not, what to do.

Per release, from the tables: the wheel's newest ``compute_XX`` PTX and its PTX ISA (tensorflow.toml,
read from the wheel), the PTX ISA the GPU's target needs and the PTX ISA XLA emits for the
release's build CUDA (ptx.toml), the driver that knows the GPU (cuda.toml), and JIT failures
reported for the release (ptx.toml). Pure: tables in, notices out.
"""

from __future__ import annotations

from tfgpu.data import derived
from tfgpu.resolver import gpu, tables
from tfgpu.resolver.model import Notice
from tfgpu.versions import Range, parse


@derived
def ptx_table() -> dict:
    """ptx.toml, parsed (the rules and reports archtruth.py applies too)."""
    return tables.load_toml("ptx.toml")


@derived
def _fatbin_rows() -> dict[str, dict]:
    return {row["tensorflow"]: row for row in tables.load_toml_part("arch_support.toml", "fatbin", [])}


def wheel_ptx(release: tables.Release, wheel: tables.Wheel) -> tuple[tuple[str, ...], str, str]:
    """(compute capabilities, PTX ISA of the newest embedded PTX, the source key of that ISA)."""
    if wheel.ptx_isa:
        return wheel.compute_capabilities, wheel.ptx_isa, "WHL-FATBIN"
    row = _fatbin_rows().get(str(release.version))
    if row:
        return tuple(row["compute_capabilities"]) or wheel.compute_capabilities, row["ptx_isa"], "WHL-FATBIN"
    return wheel.compute_capabilities, "", ""


def target_row(cc: str) -> dict | None:
    """The ptx.toml ``[[target]]`` row of a compute capability ("12.0"), if it has one."""
    return next((row for row in ptx_table().get("target", []) if row["cc"] == cc), None)


def xla_ptx_isa(cuda: str) -> str:
    """The highest PTX ISA XLA emits in a build made with CUDA ``cuda`` ("12.5.1" -> "8.5")."""
    major, minor = (int(p) for p in cuda.split(".")[:2])
    mapped = ptx_table().get("xla", {}).get("cuda_to_ptx_isa", {}).get(f"{major}.{minor}")
    return mapped or f"{major - 4}.{minor}"


def cuda_for_isa(need: str) -> str:
    """The first CUDA whose PTX ISA reaches ``need`` (for the message)."""
    mapping = ptx_table().get("xla", {}).get("cuda_to_ptx_isa", {})
    fits = [cuda for cuda, isa in mapping.items() if parse(isa) >= parse(need)]
    return min(fits, key=parse) if fits else ""


def _driver_for(cc: str, os: str) -> tuple[str, str]:
    """(the lowest driver whose CUDA knows this GPU, that CUDA) from [[arch_min_cuda]] and [[toolkit]]."""
    rows = tables.load_toml("cuda.toml").get("arch_min_cuda", [])
    cuda = next((row["cuda"] for row in rows if row["cc"] == cc), "")
    if not cuda:
        return "", ""
    column = "linux" if os == "linux" else "windows"
    kits = [t for t in tables.toolkits() if t.version.release[:2] == parse(cuda).release[:2] and getattr(t, column)]
    return (getattr(kits[0], column), cuda) if kits else ("", cuda)


def newest_ptx(caps: tuple[str, ...]) -> str:
    """The newest ``compute_XY`` of a wheel's architectures ("" without PTX)."""
    ptx = [gpu.Arch.parse(c) for c in caps if c.startswith("compute_")]
    if not ptx:
        return ""
    newest = max(ptx, key=lambda a: a.cc)
    return f"compute_{newest.major}{newest.minor}"


def jit_report(release: tables.Release, cc: str) -> dict | None:
    """The ptx.toml ``[[jit_report]]`` row saying the driver JIT failed for this release on ``cc``."""
    for row in ptx_table().get("jit_report", []):
        if release.version in Range(row["tensorflow"]) and parse(cc) in Range(row["cc"]):
            return row
    return None


def _first_release_reaching(need: str) -> str:
    for release in sorted(tables.releases(), key=lambda r: r.version):
        wheel = release.wheels.get("linux_x86_64")
        if wheel and wheel.cuda_build and wheel.cuda.count(".") >= 1 and parse(xla_ptx_isa(wheel.cuda)) >= parse(need):
            return str(release.version)
    return ""


def new_gpu_notices(
    release: tables.Release, wheel: tables.Wheel, cc: str, coverage: gpu.Coverage, os: str
) -> list[Notice]:
    """``blackwell-ptx-jit`` (the driver JIT is what runs) and ``blackwell-xla-ptx`` (XLA cannot
    target the GPU) for a GPU listed in ptx.toml; [] for other GPUs."""
    row = target_row(cc)
    if row is None or row.get("family") != "Blackwell":
        return []
    sm, need, name = f"sm_{cc.replace('.', '')}", row["min_ptx_isa"], row["name"]
    notices = []
    driver, driver_cuda = _driver_for(cc, os)
    driver_text = f" and only with a driver that knows {sm}: >= {driver} (CUDA {driver_cuda}'s)" if driver else ""
    if coverage is gpu.Coverage.PTX_JIT:
        ptx = newest_ptx(wheel.compute_capabilities)
        read = wheel_ptx(release, wheel)[1]
        isa = f"PTX ISA {read}" if read else "its PTX ISA unrecorded"
        message = (
            f"TF {release.version} has no SASS for compute capability {cc}, {name}: what runs is its "
            f"newest PTX, {ptx} ({isa}), JIT-compiled by the driver for {sm} at start-up: minutes the first "
            f"time{driver_text}."
        )
        report = jit_report(release, cc)
        if report:
            message += (
                f" With pip TF {', '.join(report['reported'])} this JIT was reported to fail on "
                f"{cc} GPUs: {report['error']}."
            )
        notices.append(
            Notice(
                "blackwell-ptx-jit",
                message,
                "Keep the JIT result between runs (CUDA_CACHE_MAXSIZE=4294967296); if ops fail "
                "with CUDA_ERROR_INVALID_PTX/INVALID_HANDLE, use NVIDIA's NGC TensorFlow container "
                "(nvcr.io/nvidia/tensorflow), which is built for Blackwell.",
            )
        )
    if wheel.cuda.count(".") >= 1 and parse(xla_ptx_isa(wheel.cuda)) < parse(need):
        emitted = xla_ptx_isa(wheel.cuda)
        ptxas = release.and_cuda.get("nvidia-cuda-nvcc-cu12", "")
        pinned = f" (the and-cuda extra installs ptxas from nvidia-cuda-nvcc-cu12{ptxas})" if ptxas else ""
        error = ptx_table().get("xla", {}).get("error", "").format(isa=emitted, target=sm, need=need)
        first = _first_release_reaching(need)
        newest = tables.releases()[0].version
        forward = (
            f"TF {first} is the first release built with a CUDA whose PTX ISA reaches {need}."
            if first
            else f"No TensorFlow release known to tfgpu-install (up to {newest}) is built with CUDA "
            f">= {cuda_for_isa(need)}, which XLA needs for {sm}, and the XLA fixes were closed "
            "without merging; NVIDIA's NGC TensorFlow container is built for Blackwell."
        )
        notices.append(
            Notice(
                "blackwell-xla-ptx",
                f"XLA cannot compile for {sm}: TF {release.version} was built with CUDA {wheel.cuda}, so its XLA emits "
                f"at most PTX ISA {emitted}, whatever ptxas is installed{pinned}, while {sm} needs PTX ISA >= {need}. "
                f"jit_compile=True, Keras models compiled with jit_compile and XLA auto-clustering fail on this GPU "
                f'(reported with TF 2.22.0.dev: "{error}").',
                "Run without XLA: jit_compile=False in model.compile and tf.function, and "
                f"TF_XLA_FLAGS=--tf_xla_auto_jit=0. A newer ptxas does not help. {forward}",
            )
        )
    return notices
