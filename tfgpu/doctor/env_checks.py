"""Checks of one environment: its Python, its TensorFlow wheel, the libraries it will load,
cuDNN, shadowing, release-specific loader bugs, an interrupted repair (XLA's ptxas and libdevice:
``tfgpu.doctor.xla_checks``)."""

from __future__ import annotations

from pathlib import Path

from packaging.version import InvalidVersion, Version

from tfgpu.doctor import closed
from tfgpu.doctor.findings import Finding, fail, ok, skip, warn
from tfgpu.doctor.libraries import Resolved
from tfgpu.doors import untrusted
from tfgpu.resolver import gpu, tables
from tfgpu.verify.origins import stack_of

REBUILD = "tfgpu-install create --force --prefix {root} --tf {tf} --mode pip"
REPAIR = "tfgpu-install repair --prefix {root}"
"""In place and undoable: what an env tfgpu-install did not build is pointed at first."""
REPAIR_JOURNAL = Path("etc/tfgpu/repair.json")
"""``tfgpu.repair.survey.JOURNAL`` (repair imports doctor, so doctor names the place itself)."""


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
                if env.marker is not None and env.marker.present  # a marker of {} says nothing
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
        read = sorted({env.build_sources.get(k, "") for k in ("cuda_version", "cudnn_version")} - {""})
        findings.append(
            ok(
                "tf.cuda-build",
                f"CUDA build: CUDA {info.get('cuda_version')}, cuDNN {info.get('cudnn_version')}",
                "read from " + (" and ".join(read) or "tensorflow/python/platform/build_info.py"),
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
            also = (
                (
                    f"TensorFlow's own {lib.own} loads too, but lookups of {lib.soname} get the copy loaded first "
                    "(the other CUDA stack's, by the load hook)",
                )
                if lib.own
                else ()
            )
            findings.append(ok(f"libs.{lib.name}", f"{lib.soname} loads{version}", where, *also))
    return findings


def _own_copy_passed_over(env, lib: Resolved) -> str | None:
    """The env's own copy of ``lib`` when the loader took a file from outside the env instead."""
    if lib.path is None or closed.inside(lib.path, closed.own_dirs(env)):
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


def _stack(env, path: str | None) -> str:
    return stack_of(Path(env.root), path)


def cudnn_version(env, resolved: list[Resolved], probe=None) -> list[Finding]:
    """The cuDNN TensorFlow computes with: the version its ``libcudnn.so.9`` reports in a process
    that holds what TensorFlow's holds (the load hook's other-stack libraries loaded first), and
    the sub-libraries that copy forwards to, each with its wheel."""
    lib = next((r for r in resolved if r.name == "cudnn"), None)
    series = tables.series().get(".".join((env.tf_version or "0.0").split(".")[:2]))
    # The env's own cudnn_version.h (TF 2.21+) is the compiled version; else TF's tested-configurations table.
    compiled = ".".join(env.cudnn_compiled.split(".")[:2]) if env.cudnn_compiled else (series.cudnn if series else None)
    if lib is None or not lib.version or compiled is None:
        return [skip("cudnn.version", "cuDNN version or TensorFlow's compiled cuDNN unknown")]
    have, need = Version(lib.version), Version(compiled)
    uses = getattr(probe, "uses", {}) or {}
    parts = [
        f"{name} ← {use.get('path')} ({use.get('package') or 'wheel unknown'}; {_stack(env, use.get('path'))})"
        for name, use in sorted(uses.items())
        if name.startswith("libcudnn") and isinstance(use, dict)
    ]
    evidence = (
        f"loaded {lib.path}: cuDNN {lib.version} (what TensorFlow's lookups of {lib.soname} get; cudnnGetVersion)",
        f"TF {env.tf_version} was built with cuDNN {compiled}"
        + (" (its cudnn_version.h)" if env.cudnn_compiled else ""),
        *(
            [f"TensorFlow's own {lib.own} is mapped too; the loader answers with the copy loaded first"]
            if lib.own
            else []
        ),
        *parts,
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


FAMILIES = (
    ("cuDNN", "libcudnn"),
    ("NCCL", "libnccl"),
    ("cuRAND", "libcurand"),
    ("cuSPARSE", "libcusparse"),
    ("cuBLAS", "libcublas"),
    ("cuFFT", "libcufft"),
    ("cuSOLVER", "libcusolver"),
    ("CUDA runtime", "libcudart"),
)


def stacks_used(env, probe) -> list[Finding]:
    """In an env with two CUDA stacks (TensorFlow's set kept apart in ``lib/tfgpu/cuda<N>``): which
    stack's copy TensorFlow's lookups get, library by library. The load hook loads the other
    stack's copies of the SONAMEs both ship first (docs/modes.md), so those answer TensorFlow."""
    own_root = Path(env.root) / "lib" / "tfgpu"
    if not own_root.is_dir() or not getattr(probe, "ran", False):
        return []
    own = {lib.name: str(lib) for lib in sorted(own_root.glob("cuda[0-9]*/nvidia/*/lib/*.so*"))}
    other: list[str] = []
    mine: list[str] = []
    evidence: list[str] = []
    for label, prefix in FAMILIES:
        entries = [
            (name, use)
            for name, use in sorted(probe.uses.items())
            if name.startswith(prefix) and isinstance(use, dict) and use.get("path") and name in own
        ]
        if not entries:
            continue
        elsewhere = [(name, use) for name, use in entries if not _stack(env, use["path"]).startswith("TensorFlow's")]
        versions = sorted({str(use.get("version")) for _, use in elsewhere if use.get("version")})
        (other if elsewhere else mine).append(label + (f" {'/'.join(versions)}" if versions else ""))
        for name, use in elsewhere:
            evidence.append(
                f"{name} ← {use['path']} ({use.get('package') or 'wheel unknown'}); TensorFlow's own: {own[name]}"
            )
    if not other:
        return [
            ok(
                "libs.stacks",
                "TensorFlow uses its own CUDA set for every library it shares a SONAME with",
                f"kept apart in {own_root}",
            )
        ]
    return [
        ok(
            "libs.stacks",
            f"TensorFlow computes with the other CUDA stack's {', '.join(other)}"
            + (f"; its own {', '.join(mine)}" if mine else ""),
            "The env's load hook loads the other stack's copies of these SONAMEs before TensorFlow's "
            "(docs/modes.md, two CUDA stacks): the loader then answers TensorFlow's lookups with them, and "
            "TensorFlow's own copies in lib/tfgpu are not used for these. `tfgpu-install verify --with torch` "
            "(or jax) runs cuDNN, cuSPARSE, NCCL and cuRAND operations on this mix in both import orders.",
            *evidence,
        )
    ]


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


def repair_journal(env) -> list[Finding]:
    """A repair journal that is not ``done``: a repair was interrupted (SIGKILL, a power cut) before
    it finished or rolled back, and the env holds some of what it had done. Nothing when there is
    no journal, or the repair finished."""
    # Start-up cost: `doctor` loads this module but not tfgpu.doors.quoting.
    from tfgpu.doors.quoting import sh

    path = env.root / REPAIR_JOURNAL
    if not (path.exists() or path.is_symlink()):
        return []
    try:
        journal = untrusted.load_json(path, untrusted.JOURNAL)
    except untrusted.Unreadable:
        journal = None
    if not isinstance(journal, dict):
        journal = {"unreadable": True}
    if journal.get("state") == "done":
        return []
    undo = f"tfgpu-install repair --undo --prefix {sh(str(env.root))}"
    if journal.get("unreadable"):
        return [
            fail(
                "env.repair",
                "The env's repair journal cannot be read",
                f"Set it aside, keeping the env as it is: {undo} --forget-journal",
                str(path),
            )
        ]
    return [
        fail(
            "env.repair",
            f"A repair of this env was interrupted (its journal says {journal.get('state')!r}): "
            "the env may hold part of what it was installing",
            f"Take back what it had done: {undo} (then `tfgpu-install repair --prefix {sh(str(env.root))}` to repair again)",
            str(path),
        )
    ]
