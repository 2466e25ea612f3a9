"""Checks of one environment: its Python, its TensorFlow wheel, the libraries it will load,
cuDNN, shadowing, release-specific loader bugs, and XLA's ptxas and libdevice."""

from __future__ import annotations

import re
from pathlib import Path

from packaging.version import InvalidVersion, Version

from tfgpu import untrusted
from tfgpu.doctor import closed
from tfgpu.doctor.findings import Finding, fail, ok, skip, warn
from tfgpu.doctor.libraries import Resolved
from tfgpu.resolver import gpu, tables

REBUILD = "tfgpu-install create --force --prefix {root} --tf {tf} --mode pip"
REPAIR = "tfgpu-install repair --prefix {root}"
"""In place and undoable: what an env tfgpu-install did not build is pointed at first."""


def release_of(version: str | None) -> tables.Release | None:
    try:
        wanted = Version(version or "")
    except InvalidVersion:
        return None
    return next((r for r in tables.releases() if r.version == wanted), None)


def python_supported(env, host) -> list[Finding]:
    release = release_of(env.tf_version)
    if release is None or not env.python_version:
        return [skip("env.python", "TensorFlow release or Python version unknown")]
    platform = {"linux": "linux_x86_64", "wsl2": "linux_x86_64"}.get(host.os, "")
    wheel = release.wheels.get(platform if host.arch == "x86_64" else "linux_aarch64")
    if wheel and env.python_version not in wheel.python:
        return [
            fail(
                "env.python",
                f"TF {env.tf_version} has no wheels for Python {env.python_version}",
                f"Rebuild with a supported Python ({', '.join(wheel.python)}): "
                f"tfgpu-install create --force --prefix {env.root} --tf {env.tf_version} --python {wheel.python[-1]}",
            )
        ]
    return [ok("env.python", f"Python {env.python_version} is supported by TF {env.tf_version}")]


def cuda_build(env, host) -> list[Finding]:
    if not env.tf_version:
        where = (
            f"looked in {env.site_packages}" if env.site_packages else f"{env.root} has no lib/python3.*/site-packages"
        )
        return [
            fail(
                "tf.installed",
                "TensorFlow is not installed in this environment",
                f"tfgpu-install create --force --prefix {env.root} --tf latest"
                if env.marker
                else f"tfgpu-install create --prefix {env.root.parent / (env.root.name + '-tf')} --tf latest",
                where,
            )
        ]
    findings = [ok("tf.installed", f"{env.tf_distribution} {env.tf_version}", f"{env.site_packages}")]
    info = env.build_info
    if not info.get("is_cuda_build"):
        why = {
            "aarch64": "Linux aarch64 wheels are CPU-only",
            "macos": "macOS wheels are CPU-only (use tensorflow-metal)",
            "windows": "Windows wheels from 2.11 on are CPU-only (use WSL2)",
        }.get(host.arch if host.arch == "aarch64" else host.os, "this wheel was built without CUDA")
        findings.append(
            fail(
                "tf.cuda-build",
                f"TensorFlow {env.tf_version} here is not a CUDA build: {why}",
                "Use a Linux x86_64 (or WSL2) CUDA build: `tfgpu-install plan` shows one; on aarch64 "
                "use NVIDIA's NGC TensorFlow container.",
                f"build_info.py: is_cuda_build={info.get('is_cuda_build')!r}",
            )
        )
    else:
        where = sorted({env.build_sources.get(k, "") for k in ("cuda_version", "cudnn_version")} - {""})
        findings.append(
            ok(
                "tf.cuda-build",
                f"CUDA build: CUDA {info.get('cuda_version')}, cuDNN {info.get('cudnn_version')}",
                "read from " + (" and ".join(where) or "tensorflow/python/platform/build_info.py"),
            )
        )
    return findings


def wheel_capabilities(env) -> tuple[tuple[str, ...], str]:
    """The wheel's compute capabilities in TF's notation, and where they were read: build_info.py, else
    (TF 2.22+, whose cuda_config.h lists bare numbers) tfgpu's row for this release, read from its fatbins."""
    caps = tuple(env.build_info.get("cuda_compute_capabilities") or ())
    if caps:
        return caps, "build_info.py"
    release = release_of(env.tf_version)
    wheel = release.wheels.get("linux_x86_64") if release else None
    if wheel and wheel.compute_capabilities and env.header_capabilities:
        return wheel.compute_capabilities, "tfgpu's data for this release (cuda_config.h lists no SASS/PTX kinds)"
    return (), ""


def gpu_architectures(env, host) -> list[Finding]:
    caps, _ = wheel_capabilities(env)
    if not host.gpus:
        return [skip("gpu.arch", "No GPU detected to compare with the wheel's architectures")]
    if not caps:
        return [skip("gpu.arch", "The wheel does not record its GPU architectures")]
    findings = []
    kinds: dict[tuple[str, str], list[int]] = {}
    for device in host.gpus:
        if device.compute_capability:
            kinds.setdefault((device.name, device.compute_capability), []).append(device.index)
    for (name, cc), indices in kinds.items():
        device = next(d for d in host.gpus if d.index == indices[0])
        coverage = gpu.coverage(cc, caps)
        which = "GPU " + ", ".join(map(str, indices))
        evidence = (f"{which}: {name}, compute capability {cc}", f"wheel: {', '.join(caps)}")
        if coverage is gpu.Coverage.NATIVE:
            findings.append(ok("gpu.arch", f"{device.name} ({cc}) has compiled kernels in this wheel", *evidence))
        elif coverage is gpu.Coverage.PTX_JIT:
            findings.append(
                warn(
                    "gpu.arch",
                    f"{device.name} ({cc}) runs PTX JIT-compiled by the driver",
                    "export CUDA_CACHE_MAXSIZE=4294967296 so the JIT cache keeps compiled kernels "
                    "(first run is slow); a newer TF may carry native kernels.",
                    *evidence,
                )
            )
        else:
            findings.append(
                fail(
                    "gpu.arch",
                    f"This wheel has no kernels usable on {device.name} ({cc})",
                    "Use a TensorFlow built for this GPU (`tfgpu-install plan --gpu-cc "
                    f"{cc}`) or NVIDIA's NGC container.",
                    *evidence,
                )
            )
    return findings or [skip("gpu.arch", "GPU compute capability unknown")]


def libraries(env, resolved: list[Resolved]) -> list[Finding]:
    findings = []
    for lib in resolved:
        where = f"{lib.soname} -> {lib.path} (found via {lib.via})" if lib.path else f"{lib.soname}: not found"
        version = f", version {lib.version}" if lib.version else ""
        if lib.path is None:
            findings.append(
                fail(
                    f"libs.{lib.name}",
                    f"{lib.soname} is not on any path TensorFlow searches",
                    _loader_fix(env),
                    where,
                    f"RUNPATH: {':'.join(env.runpath) or '-'}",
                )
            )
        elif not lib.loaded:
            findings.append(
                fail(f"libs.{lib.name}", f"{lib.soname} does not load", _loader_fix(env), where, lib.error or "")
            )
        elif (mine := _own_copy_passed_over(env, lib)) is not None:
            findings.append(
                fail(
                    f"libs.{lib.name}",
                    f"{lib.soname} loads from outside the env although the env has its own",
                    f"`{REPAIR.format(root=env.root)}` makes the env's copy the one loaded (`--undo` reverts).",
                    where,
                    f"the env's own: {mine}",
                )
            )
        else:
            findings.append(ok(f"libs.{lib.name}", f"{lib.soname} loads{version}", where))
    return findings


def _own_copy_passed_over(env, lib: Resolved) -> str | None:
    """The env's own copy of ``lib`` when the loader took a file from outside the env instead."""
    if closed.inside(lib.path, closed.own_dirs(env)):
        return None
    return closed.own_copy(env, lib.path)


def _loader_fix(env) -> str:
    if env.marker is not None:
        return f"Rebuild the env's CUDA set-up: {REBUILD.format(root=env.root, tf=env.tf_version)}"
    return (
        f"Repair the env in place (adds the missing CUDA wheels, the load hook and activation; `--dry-run` "
        f"shows what, `--undo` reverts): {REPAIR.format(root=env.root)}; or put every "
        f"{env.site_packages}/nvidia/*/lib on LD_LIBRARY_PATH before starting Python."
    )


def cudnn_version(env, resolved: list[Resolved]) -> list[Finding]:
    lib = next((r for r in resolved if r.name == "cudnn"), None)
    series = tables.series().get(".".join((env.tf_version or "0.0").split(".")[:2]))
    # The env's own cudnn_version.h (TF 2.21+) is the compiled version; else TF's tested-configurations table.
    compiled = ".".join(env.cudnn_compiled.split(".")[:2]) if env.cudnn_compiled else (series.cudnn if series else None)
    if lib is None or not lib.version or compiled is None:
        return [skip("cudnn.version", "cuDNN version or TensorFlow's compiled cuDNN unknown")]
    have, need = Version(lib.version), Version(compiled)
    evidence = (
        f"loaded {lib.path}: cuDNN {lib.version}",
        f"TF {env.tf_version} was built with cuDNN {compiled}"
        + (" (its cudnn_version.h)" if env.cudnn_compiled else ""),
    )
    if have.major != need.major or have.release[:2] < need.release[:2]:
        return [
            fail(
                "cudnn.version",
                f"cuDNN {lib.version} is older than the {compiled} TF was built with",
                f"Install cuDNN {need.major}.x >= {compiled} in the env: "
                f"`{REPAIR.format(root=env.root)} --allow-changes` (undoable), or `uv pip install --python "
                f"{env.python} 'nvidia-cudnn-cu12>={compiled}'`; and remove any older copy from the loader "
                "path.",
                *evidence,
            )
        ]
    return [ok("cudnn.version", f"cuDNN {lib.version} >= {compiled} (same major)", *evidence)]


def shadowing(env, resolved: list[Resolved]) -> list[Finding]:
    losing = [r for r in resolved if r.shadowed and r.via == "LD_LIBRARY_PATH"]
    harmless = [r for r in resolved if r.shadowed and r.via == "load hook"]
    if losing:
        return [
            warn(
                "libs.shadowing",
                "A copy outside the env, earlier on LD_LIBRARY_PATH, wins over the env's",
                "Remove that directory from LD_LIBRARY_PATH (or activate the env, which puts its own first).",
                *(f"{r.soname}: {r.path} wins over {r.shadowed}" for r in losing),
            )
        ]
    if harmless:
        return [
            ok(
                "libs.shadowing",
                "Other copies on LD_LIBRARY_PATH are not used (the load hook preloads the env's)",
                *(f"{r.soname}: {r.shadowed} is not used" for r in harmless),
            )
        ]
    passed_over = [(r, mine) for r in resolved if r.path and (mine := _own_copy_passed_over(env, r))]
    if passed_over:
        return [
            warn(
                "libs.shadowing",
                f"A copy outside the env ({passed_over[0][0].via}) wins over the env's own",
                f"`{REPAIR.format(root=env.root)}` makes the env's copies the ones loaded (`--undo` reverts).",
                *(f"{r.soname}: {r.path} wins over {mine}" for r, mine in passed_over),
            )
        ]
    return [ok("libs.shadowing", "No other copy of a CUDA library shadows the env's")]


def release_bugs(env, resolved: list[Resolved]) -> list[Finding]:
    release = release_of(env.tf_version)
    if release is None:
        return []
    findings = []
    for quirk in tables.quirks():
        if release.version not in quirk.tensorflow or quirk.effect != "loader-setup":
            continue
        missing = [r.soname for r in resolved if r.path is None]
        covered = "the env's load hook" if env.hook else ("LD_LIBRARY_PATH" if not missing else "")
        if missing:
            findings.append(
                fail(
                    f"release.{quirk.code}",
                    f"TF {env.tf_version}: {', '.join(missing)} will not be found",
                    _loader_fix(env),
                    quirk.message,
                )
            )
        else:
            findings.append(
                ok(
                    f"release.{quirk.code}",
                    f"TF {env.tf_version}'s known loader bug is covered by {covered}",
                    quirk.message,
                )
            )
    return findings


_PTXAS_VERSION = re.compile(r"V(\d+\.\d+\.\d+)")
# ptxas knows an architecture from this CUDA release on [MESON] (compat-facts section 5).
_ARCH_NEEDS = {(8, 9): "11.8", (9, 0): "11.8", (10, 0): "12.8", (12, 0): "12.8"}


def _toolkit_dirs(site: Path | None) -> list[Path]:
    """Where pip wheels keep ptxas and libdevice: ``nvidia/cuda_nvcc`` (CUDA 11/12 wheels) and the
    merged ``nvidia/cu13`` tree of CUDA 13's wheels (newest first)."""
    if site is None:
        return []
    merged = sorted(
        (p for p in (site / "nvidia").glob("cu[0-9][0-9]") if p.is_dir()), key=lambda p: p.name, reverse=True
    )
    return [site / "nvidia" / "cuda_nvcc", *merged]


def xla_tools(env, host, environ: dict[str, str]) -> list[Finding]:
    site = env.site_packages
    toolkits = _toolkit_dirs(site)
    candidates = [env.root / "bin" / "ptxas", *(d / "bin" / "ptxas" for d in toolkits)]
    ptxas = next((p for p in candidates if p.exists()), None)
    findings = []
    if ptxas is None:
        findings.append(
            warn(
                "xla.ptxas",
                "No ptxas in the env: XLA falls back to the driver to compile PTX",
                f"uv pip install --python {env.python} 'nvidia-cuda-nvcc-cu12>=12.6.3' (CUDA 12 builds)",
                *(f"looked for {p}" for p in candidates),
            )
        )
    else:
        from tfgpu.proc import Runner

        done = Runner().capture([str(ptxas), "--version"], timeout=20, clean=False)
        out = done.output if done.started else done.stderr
        match = _PTXAS_VERSION.search(out)
        version = match.group(1) if match else None
        evidence = (f"{ptxas}: {version or 'version unknown'}",)
        too_old = [
            d
            for d in host.gpus
            if version
            and d.compute_capability
            and Version(version) < Version(_ARCH_NEEDS.get(tuple(int(x) for x in d.compute_capability.split(".")), "0"))
        ]
        if version is None:
            # A ptxas that hangs, crashes or prints no version is no ptxas XLA can use: never an ok.
            how = (
                "did not answer `--version` within 20 s"
                if done.returncode == 124 and done.seconds >= 20
                else f"exited {done.returncode} without saying its version"
                if done.returncode
                else "printed no version"
            )
            findings.append(
                warn(
                    "xla.ptxas",
                    f"The env's ptxas {how}: XLA may not be able to compile PTX with it",
                    f"uv pip install --python {env.python} --reinstall 'nvidia-cuda-nvcc-cu12>=12.6.3'",
                    *evidence,
                )
            )
        elif too_old:
            findings.append(
                fail(
                    "xla.ptxas",
                    f"ptxas {version} does not know {too_old[0].name}'s sm_"
                    f"{too_old[0].compute_capability.replace('.', '')}",
                    "Install a newer nvidia-cuda-nvcc-cu12 in the env.",
                    *evidence,
                )
            )
        elif version and Version("12.0") <= Version(version) <= Version("12.6.2"):
            findings.append(
                warn(
                    "xla.ptxas",
                    f"ptxas {version} is one of the versions XLA says miscompile",
                    f"uv pip install --python {env.python} 'nvidia-cuda-nvcc-cu12>=12.6.3'",
                    *evidence,
                    "XLA: CUDA 12.x.y up to and including 12.6.2 miscompile certain edge cases around clamping.",
                )
            )
        else:
            findings.append(ok("xla.ptxas", f"ptxas {version} for XLA", *evidence))
    flag = re.search(r"--xla_gpu_cuda_data_dir=(\S+)", environ.get("XLA_FLAGS", ""))
    dirs = [Path(flag.group(1))] if flag else []
    dirs += toolkits
    recorded = _recorded_data_dir(env.root)
    dirs += [recorded] if recorded else []
    libdevice = next(
        (
            d / "nvvm" / "libdevice" / "libdevice.10.bc"
            for d in dirs
            if (d / "nvvm" / "libdevice" / "libdevice.10.bc").exists()
        ),
        None,
    )
    if libdevice:
        findings.append(ok("xla.libdevice", "libdevice for XLA", str(libdevice)))
    else:
        findings.append(
            fail(
                "xla.libdevice",
                "XLA will not find libdevice ('Can't find libdevice directory')",
                f"`{REPAIR.format(root=env.root)}` adds nvidia-cuda-nvcc and sets XLA_FLAGS for the env;"
                f" by hand: uv pip install --python {env.python} nvidia-cuda-nvcc-cu12 and set XLA_FLAGS="
                "--xla_gpu_cuda_data_dir=<site-packages>/nvidia/cuda_nvcc.",
                *(f"looked in {d}" for d in dirs),
            )
        )
    return findings


def _recorded_data_dir(root: Path) -> Path | None:
    """Where the env's own activation points XLA (``etc/tfgpu/layout.json``): conda and system envs
    keep libdevice outside site-packages (the env root, a link under etc/tfgpu/cuda, the toolkit)."""
    try:
        data = untrusted.load_json(root / "etc" / "tfgpu" / "layout.json", untrusted.ENV_FILE)["cuda_data_dir"]
    except (untrusted.Unreadable, KeyError, TypeError):
        return None
    return root / data if data else None
