"""``tfgpu-install doctor``: explain what is broken and how to fix it, without importing TensorFlow.

A catalogue of checks with stable ids (docs/doctor-and-verify.md); each returns findings with a status
(ok/warn/fail/skip), the evidence it read, and the fix. The environment is read as files
(dist-info, ``build_info.py``, ELF RUNPATHs); libraries are loaded only in a child process.
A part of the env the user running doctor cannot read (a directory without search permission, a
link into one) is a finding, ``env.readable``, never a traceback: every check runs through
:func:`_guarded`.
"""

from __future__ import annotations

import os
from pathlib import Path

from tfgpu.doctor import env_checks, host_checks, mixed_checks, xla_checks
from tfgpu.doctor.findings import Finding, Report


def run_doctor(
    root: Path | None = None,
    python: Path | None = None,
    host=None,
    environ: dict[str, str] | None = None,
    fs_root: str = "/",
) -> Report:
    """Every check, for the host and (when given) one environment.

    ``host`` (a detected Host) and ``environ`` default to this machine's; tests pass recorded
    hosts, and ``fs_root`` for the WSL2 file checks."""
    environ = dict(os.environ if environ is None else environ)
    env, unreadable, target_env, probing = None, None, None, None
    if root is not None or python is not None:
        # Start-up cost: `doctor` loads this module but not tfgpu.doctor.envfacts.
        from tfgpu.doctor.envfacts import read_env

        try:
            env = read_env(root, python)
        except OSError as error:
            target_env = {"root": str(root or python)}
            unreadable = _unreadable("env.readable", error)
        else:
            target_env = env.to_dict()
            probing = _start_probe(env, environ)
    if host is None:
        # Looked up at each call: tests stand a fake in for probe().
        from tfgpu.detect import probe

        host = probe()
    report = Report(target={"host": host.to_dict()})
    if target_env is not None:
        report.target["env"] = target_env
    tf_cuda = str(env.build_info.get("cuda_version")) if env and env.build_info.get("cuda_version") else None
    report.findings += host_checks.driver_present(host, tf_cuda)
    report.findings += host_checks.driver_new_enough(host, tf_cuda)
    report.findings += host_checks.wsl(host, environ, fs_root)
    report.findings += host_checks.toolkits(host, tf_cuda)
    if unreadable is not None:
        report.findings.append(unreadable)
        return report
    if env is None:
        report.findings.append(
            Finding(
                "env.given",
                "No environment given: only the machine was checked",
                "skip",
                ("Add --prefix, --name or --interpreter PATH to check an environment (or activate one).",),
            )
        )
        return report
    _env_findings(report, env, host, environ, probing)
    # Last, for every library any check above read: one that asked for more than the run's read
    # budget has an unknown answer, which is said rather than taken for "no library".
    report.findings += _unfinished(env)
    return report


class _Probing:
    """The library probe (:func:`tfgpu.doctor.libraries.load_in_child`) running beside the other
    checks: its child process loads the CUDA libraries (a third of a second for TensorFlow 2.21's)
    while this process reads the env's RECORDs. Where the loader would look is read here, before the
    child starts; a thread of its own only starts the child and waits on its pipes (holding no lock
    the checks need meanwhile). What it finds or raises is taken back by :meth:`result`, where the
    probe's findings go."""

    def __init__(self, env, environ: dict[str, str]) -> None:
        # Start-up cost: `doctor` without an env loads this module but not the library probe.
        import threading

        # Start-up cost: the same; the probe's readers come with it.
        from tfgpu.doctor.libraries import dlopen_callers, hook_other_first, resolve_libraries

        self._outcome: tuple = (None, None)
        self._thread = None
        try:
            resolved = resolve_libraries(env.build_info, env.runpath, env.hook, environ)
            # the hook's other-stack libraries first: the probe's process then holds what TensorFlow's does
            first = hook_other_first(env.hook, environ)
            callers = dlopen_callers(env.root, env.site_packages)
        except Exception as error:  # noqa: BLE001 - raised again by result(), where the findings go
            self._outcome = (None, error)
            return
        self._thread = threading.Thread(
            target=self._run, args=(resolved, callers, first), name="library-probe", daemon=True
        )
        self._thread.start()

    def _run(self, resolved, callers, first) -> None:
        # Start-up cost: `doctor` without an env loads this module but not the library probe.
        from tfgpu.doctor.libraries import load_in_child

        try:
            self._outcome = ((resolved, load_in_child(resolved, callers, first=first)), None)
        except BaseException as error:  # noqa: BLE001 - raised again by result(), in the command's thread
            self._outcome = (None, error)

    def result(self):
        """(resolved libraries, probe); raises what reading the env or the probe raised."""
        if self._thread is not None:
            self._thread.join()
        found, error = self._outcome
        if error is not None:
            raise error
        return found


def _start_probe(env, environ: dict[str, str]) -> _Probing | None:
    """The library probe started as soon as the env is read, where doctor will need it."""
    if not env.tf_version or not env.build_info.get("is_cuda_build"):
        return None
    return _Probing(env, environ)


def _env_findings(report: Report, env, host, environ: dict[str, str], probing: _Probing | None) -> None:
    report.findings += _guarded(env_checks.repair_journal, env)
    report.findings += _guarded(env_checks.python_supported, env, host)
    report.findings += _guarded(env_checks.cuda_build, env, host)
    report.findings += _guarded(mixed_checks.check, env)
    if probing is None:
        return
    # Import cycle: tfgpu.doctor.closed, tfgpu.doctor.libraries import this module.
    from tfgpu.doctor import closed

    try:
        resolved, probe = probing.result()
    except OSError as error:
        report.findings.append(_unreadable("env.readable", error))
        return
    report.target["libraries"] = [
        {"soname": r.soname, "path": r.path, "via": r.via, "version": r.version, "loaded": r.loaded, "own": r.own}
        for r in resolved
    ]
    report.target["uses"] = probe.uses
    report.target["dlopened"] = [
        {"name": u.name, "caller": u.caller, "path": u.path, "via": u.via} for u in probe.dlopened
    ]
    report.findings += _guarded(env_checks.gpu_architectures, env, host)
    report.findings += _guarded(env_checks.libraries, env, resolved)
    report.findings += _guarded(env_checks.cudnn_version, env, resolved, probe)
    report.findings += _guarded(env_checks.stacks_used, env, probe)
    report.findings += _guarded(env_checks.shadowing, env, resolved)
    report.findings += _guarded(closed.closed, env, resolved, probe, environ)
    report.findings += _guarded(env_checks.release_bugs, env, resolved)
    report.findings += _guarded(xla_checks.xla_tools, env, host, environ)


def _unfinished(env) -> list[Finding]:
    # Import cycle: tfgpu.doctor.findings, tfgpu.doctor.reads import this module.
    from tfgpu.doctor.findings import warn
    from tfgpu.doctor.reads import unfinished_lines

    lines = unfinished_lines(env.reads, env.root)
    if not lines:
        return []
    return [
        warn(
            "env.library-reads",
            f"{len(lines)} librar{'y was' if len(lines) == 1 else 'ies were'} not fully read: what doctor says "
            f"of {'it' if len(lines) == 1 else 'them'} is incomplete",
            "A real CUDA library's ELF tables are a few MiB at most: check the file (`readelf -d PATH`) and "
            "reinstall the wheel that ships it (`uv pip install --reinstall --no-deps NAME==VERSION`)",
            *lines[:12],
            *([f"... and {len(lines) - 12} more"] if len(lines) > 12 else []),
        )
    ]


def _guarded(check, *args) -> list[Finding]:
    """``check``'s findings; a file it cannot read (permissions, a link into a closed directory)
    becomes a failing ``env.readable`` finding naming the path, and the other checks still run."""
    try:
        return check(*args)
    except OSError as error:
        return [_unreadable("env.readable", error)]


def _unreadable(id: str, error: OSError) -> Finding:
    where = f" {error.filename}" if error.filename else ""
    return Finding(
        id,
        "Part of the environment cannot be read by this user",
        "fail",
        (f"{error.strerror or error}:{where}",),
        "Run doctor as the env's owner, or give this user read and search permission "
        "(`chmod -R u+rX,go+rX` on the env).",
    )
