"""Is the env closed: does every CUDA library a process of the env loads come from the env?

The probe process (``tfgpu/verify/probe_libs.py``) loads the libraries TensorFlow asks for, then
resolves the names cuDNN and cuBLASLt ``dlopen`` themselves (``libnvrtc.so``, sonames.toml
``[[dlopened]]``) the way their own call would, and lists every file it mapped. This module
turns that into findings: a CUDA library mapped from outside the env (a system toolkit, the
ld.so.cache, LD_LIBRARY_PATH) is a failure naming the file, how it was found and the fix; a copy
from outside is never "ok" while the env holds its own. The driver's libraries (``libcuda.so``,
``libnvidia-*``) belong to the system and are not counted. A system-mode env's toolkit, named by
absolute path in its ``etc/tfgpu/layout.json``, counts as the env's own.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

from tfgpu.doctor.findings import Finding, fail, ok, skip, warn
from tfgpu.doctor.libraries import Probe, Resolved, env_library_dirs, ld_library_path
from tfgpu.doors import untrusted

REPAIR = "tfgpu-install repair --prefix {root}"
# The toolkit's libraries; the driver's (libcuda.so.1, libnvidia-*.so) are the system's by design.
CUDA_PREFIXES = (
    "libcudart.",
    "libcublas.",
    "libcublasLt.",
    "libcudnn",
    "libcufft.",
    "libcufftw.",
    "libcurand.",
    "libcusolver.",
    "libcusolverMg.",
    "libcusparse.",
    "libnccl.",
    "libnvrtc.",
    "libnvrtc-builtins.",
    "libnvJitLink.",
    "libcupti.",
    "libnvblas.",
    "libnvToolsExt.",
    "libcufile.",
    "libnvperf",
)


def is_cuda_library(path: str) -> bool:
    return os.path.basename(path).startswith(CUDA_PREFIXES)


def own_dirs(env) -> list:
    """The env's root, resolved, and any toolkit library directory its layout names by absolute path
    (system mode) as ``(directory, "only")``: the files directly in that directory count as the env's,
    never what is under or beside it, so a layout that names ``/`` or ``/usr`` (damaged, or written
    by someone else) cannot make every system library the env's own."""
    dirs: list = [os.path.realpath(env.root)]
    try:
        layout = untrusted.load_json(env.root / "etc" / "tfgpu" / "layout.json", untrusted.ENV_FILE)
        dirs += [
            (os.path.realpath(d), "only")
            for d in layout.get("lib_dirs", ())
            if isinstance(d, str) and d.startswith("/")
        ]
    except (untrusted.Unreadable, AttributeError, TypeError):
        pass
    return dirs


def inside(path: str, dirs: list) -> bool:
    real = os.path.realpath(path)
    for d in dirs:
        if isinstance(d, tuple):
            if os.path.dirname(real) == d[0]:
                return True
        elif real == d or real.startswith(d.rstrip(os.sep) + os.sep):
            return True
    return False


def own_copy(env, path: str) -> str | None:
    """The env's own file of the same library as ``path`` (``libnvrtc.so.13`` -> the env's
    ``libnvrtc.so.11.2``), or None when the env holds none."""
    base = os.path.basename(path).split(".so")[0]
    for directory in env_library_dirs(env.root, env.site_packages):
        # The name is a file the probe mapped from outside the env: ``libcu*.so.12`` is a name, not a pattern.
        for candidate in sorted(directory.glob(f"{glob.escape(base)}.so*")):
            if candidate.is_file():
                return str(candidate)
    return None


def outside(env, resolved: list[Resolved], probe: Probe) -> list[tuple[str, str]]:
    """(file, how it came in) for each CUDA library the probe mapped from outside the env."""
    dirs = own_dirs(env)
    found: dict[str, str] = {}
    for lib in resolved:
        if lib.path and lib.loaded and not inside(lib.path, dirs):
            found.setdefault(os.path.realpath(lib.path), f"TensorFlow's dlopen('{lib.soname}'), found via {lib.via}")
    for name in probe.dlopened:
        if name.path and not inside(name.path, dirs):
            found.setdefault(
                os.path.realpath(name.path),
                f"dlopen('{name.name}') by {os.path.basename(name.caller)}, found via {name.via}"
                + _through_link(name.found, dirs),
            )
    for path in probe.mapped:
        if is_cuda_library(path) and not inside(path, dirs):
            found.setdefault(os.path.realpath(path), "loaded as a dependency of another CUDA library")
    return sorted(found.items())


def _through_link(found: str | None, dirs: list) -> str:
    """The env's own link the search went through to a file outside (a user's ``libnvrtc.so`` made
    to point at /usr/local/cuda): the file to replace, which the mapped path alone does not name."""
    if not found or not os.path.islink(found) or not inside(os.path.dirname(found), dirs):
        return ""
    try:
        target = os.readlink(found)
    except OSError:
        return ""
    return f", through the env's link {found} -> {target}, which leads out of the env"


def _fix(env, leaks: list[tuple[str, str]], environ: dict[str, str]) -> str:
    ld_path = ld_library_path(environ)  # as the loader splits it: ':' and ';', an empty entry is "."
    on_path = sorted({d for d in ld_path for path, _ in leaks if Path(path).parent == Path(os.path.realpath(d))})
    fix = (
        f"`{REPAIR.format(root=env.root)}` provides every library inside the env (the load hook, and links "
        "for the names cuDNN and cuBLASLt dlopen themselves); `--dry-run` shows what, `--undo` reverts."
    )
    if on_path:
        fix = (
            f"Remove {', '.join(on_path)} from LD_LIBRARY_PATH: the loader searches it before the env's own "
            "directories. Then, if a finding remains: " + fix
        )
    return fix


def closed(env, resolved: list[Resolved], probe: Probe, environ: dict[str, str]) -> list[Finding]:
    if not probe.ran:
        return [skip("libs.closed", "The library probe did not run: which files a process maps is unknown")]
    leaks = outside(env, resolved, probe)
    findings = []
    if leaks:
        evidence = []
        for path, how in leaks:
            mine = own_copy(env, path)
            evidence.append(f"{path}: {how}" + (f"; the env has its own: {mine}" if mine else ""))
        many = len(leaks) > 1
        findings.append(
            fail(
                "libs.closed",
                f"{len(leaks)} CUDA librar{'ies' if many else 'y'} load{'' if many else 's'} from outside the env",
                _fix(env, leaks, environ),
                *evidence,
            )
        )
    else:
        count = sum(1 for path in probe.mapped if is_cuda_library(path))
        findings.append(
            ok(
                "libs.closed",
                "Every CUDA library the probe process maps comes from the env",
                f"{count} CUDA libraries mapped, all under {env.root}",
                *(
                    f"dlopen('{u.name}') by {os.path.basename(u.caller)} -> {u.path} ({u.via})"
                    for u in probe.dlopened
                    if u.path
                ),
            )
        )
    missing = [u for u in probe.dlopened if u.path is None]
    if missing:
        findings.append(
            warn(
                "libs.dlopen",
                f"{', '.join(sorted({u.name for u in missing}))} is found nowhere: the library that asks "
                "for it itself gets nothing",
                _fix(env, [], environ),
                *(
                    f"dlopen('{u.name}') by {u.caller}: {u.error or 'not found'}; RUNPATH {':'.join(u.runpath)}"
                    for u in missing
                ),
            )
        )
    return findings
