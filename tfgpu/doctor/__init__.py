"""``tfgpu-install doctor``: explain what is broken and how to fix it, without importing TensorFlow.

A catalogue of checks with stable ids (see the README); each returns findings with a status
(ok/warn/fail/skip), the evidence it read, and the fix. The environment is read as files
(dist-info, ``build_info.py``, ELF RUNPATHs); libraries are loaded only in a child process.
"""

from __future__ import annotations

import os
from pathlib import Path

from tfgpu.doctor import env_checks, host_checks
from tfgpu.doctor.findings import Finding, Report


def run_doctor(root: Path | None = None, python: Path | None = None, host=None,
               environ: dict[str, str] | None = None, fs_root: str = "/") -> Report:
    """Every check, for the host and (when given) one environment.

    ``host`` (a detected Host) and ``environ`` default to this machine's; tests pass recorded
    hosts, and ``fs_root`` for the WSL2 file checks."""
    environ = dict(os.environ if environ is None else environ)
    if host is None:
        from tfgpu.detect import probe

        host = probe()
    report = Report(target={"host": host.to_dict()})
    env = None
    if root is not None or python is not None:
        from tfgpu.doctor.envfacts import read_env

        env = read_env(root, python)
        report.target["env"] = env.to_dict()
    tf_cuda = str(env.build_info.get("cuda_version")) if env and env.build_info.get("cuda_version") else None
    report.findings += host_checks.driver_present(host, tf_cuda)
    report.findings += host_checks.driver_new_enough(host, tf_cuda)
    report.findings += host_checks.wsl(host, environ, fs_root)
    report.findings += host_checks.toolkits(host, tf_cuda)
    if env is None:
        report.findings.append(Finding("env.given", "No environment given: only the machine was checked", "skip",
                                       ("Add --prefix, --name or --python to check an environment.",)))
        return report
    report.findings += env_checks.python_supported(env, host)
    report.findings += env_checks.cuda_build(env, host)
    if not env.tf_version or not env.build_info.get("is_cuda_build"):
        return report
    from tfgpu.doctor.libraries import load_in_child, resolve_libraries

    resolved = resolve_libraries(env.build_info, env.runpath, env.hook, environ)
    load_in_child(resolved)
    report.target["libraries"] = [{"soname": r.soname, "path": r.path, "via": r.via, "version": r.version,
                                   "loaded": r.loaded} for r in resolved]
    report.findings += env_checks.gpu_architectures(env, host)
    report.findings += env_checks.libraries(env, resolved)
    report.findings += env_checks.cudnn_version(env, resolved)
    report.findings += env_checks.shadowing(env, resolved)
    report.findings += env_checks.release_bugs(env, resolved)
    report.findings += env_checks.xla_tools(env, host, environ)
    return report
