"""``tfgpu-install verify``: prove, inside an env, that TensorFlow computes on the GPU.

The check runs in the env's own Python (``check_env.py``, shipped as package data); this side
starts it, keeps TensorFlow's log, and turns the report into a result or an error.
"""

from __future__ import annotations

import json
import re
from importlib.resources import as_file, files
from pathlib import Path

from tfgpu import data
from tfgpu.doors import untrusted
from tfgpu.errors import ImpossibleError, OperationError, UsageError
from tfgpu.resolver import archtruth, tables

NO_BYTECODE = {"PYTHONDONTWRITEBYTECODE": "1"}
"""The check imports TensorFlow with the env's Python (``-B``) and so do the processes it starts:
none of them writes ``__pycache__`` into an env this tool may not own (a repaired one, say)."""

_LOG_SIGNS = re.compile(
    r"(Could not load dynamic library|Cannot dlopen|failed call to cuInit|"
    r"Could not find cuda drivers|CUDA_ERROR|libdevice|ptxas|Loaded runtime CuDNN)"
)


def _env_python(prefix: Path) -> Path:
    """The env's interpreter; a directory without one is ``not-an-env`` (exit 3), as for doctor."""
    python = prefix / "bin" / "python"
    if not python.exists():
        raise ImpossibleError(
            "not-an-env",
            f"{prefix} has no bin/python: it is not a Python environment.",
            ["Give the env's root with --prefix, or its name with --name."],
        )
    return python


def driverless_report(prefix: Path, why: str) -> dict:
    """The report of a check that cannot pass because this machine has no NVIDIA driver at all
    (``why``, from detection, which knows it in about a second): TensorFlow, whose import takes
    seconds to minutes, is not imported to find it out. A directory that is not an env is still
    ``not-an-env``."""
    _env_python(prefix)
    return {
        "ok": False,
        "code": "no-driver",
        "reason": f"{why[:1].upper()}{why[1:]}: libcuda.so.1 cannot be loaded. TensorFlow was not "
        "imported: no GPU check can pass without a driver.",
        "tensorflow_imported": False,
        "gpus": [],
        "build_info": {},
        "libraries": {},
        "log": [],
        "prefix": str(prefix),
        "log_path": None,
    }


def run_verify(prefix: Path, timeout: float = 900, bench: bool = False, runner=None) -> dict:
    """Run the check with ``prefix``'s Python; the report, with TensorFlow's notable log lines."""
    # Start-up cost: `plan` loads this module but not tfgpu.process.runner.
    from tfgpu.process.runner import Runner

    python = _env_python(prefix)
    runner = runner or Runner()
    with as_file(files("tfgpu.verify").joinpath("check_env.py")) as script:
        done = runner.capture(
            [str(python), "-I", "-B", str(script), *(_bench_arguments() if bench else [])],
            timeout=timeout,
            clean=False,
            env=NO_BYTECODE,
        )
    # Start-up cost: `plan` loads this module but not tfgpu.verify.ending.
    from tfgpu.verify.ending import ended, stderr_tail, stopped_at_timeout

    if stopped_at_timeout(done, timeout):
        raise OperationError(
            "verify-timeout",
            f"The GPU check in {prefix} ran past {timeout:.0f} s.",
            [
                "Run it by hand to see where it hangs: "
                f"{python} -c 'import tensorflow as tf; print(tf.config.list_physical_devices())'"
            ],
        )
    runner.log(
        f"$ {python} -I check_env.py{' --bench' if bench else ''}  (exit {done.returncode})\n{done.stderr}{done.output}"
    )
    lines = done.output.strip().splitlines()
    try:
        report = untrusted.expect(
            untrusted.parse_json(lines[-1], untrusted.CHILD_OUTPUT, str(python)),
            dict,
            untrusted.CHILD_OUTPUT,
            str(python),
        )
    except (IndexError, untrusted.Unreadable):
        # An exit (TensorFlow's import calling sys.exit) is said as the exit, a signal as a crash.
        raise OperationError(
            "verify-crashed",
            f"The GPU check in {prefix} ended before its report: {ended(done, timeout)}"
            + (f" (its stderr ends: {stderr_tail(done)})." if stderr_tail(done) else "."),
            [
                "Run `tfgpu-install doctor` for the environment.",
                *([f"The check's whole output is in {runner.log_path}."] if runner.log_path else []),
            ],
        ) from None
    report["log"] = [line.strip() for line in done.stderr.splitlines() if _LOG_SIGNS.search(line)][:20]
    report["prefix"] = str(prefix)
    report["log_path"] = str(runner.log_path) if runner.log_path else None
    return report


def _bench_arguments() -> list[str]:
    """``--bench`` and the peak rates its figures are held to (the env's Python reads no TOML)."""
    return ["--bench", "--peaks", json.dumps(data.load("gpu_peaks.toml")["arch"])]


def run_multiworker(prefix: Path, workers: int, timeout: float = 900, runner=None) -> dict:
    """``verify --workers N``: ``multiworker.py`` run by ``prefix``'s Python starts N local workers
    (one GPU each, N sharing one GPU, or the CPU) through one MultiWorkerMirroredStrategy step;
    the report has each worker's loss after the step, the collective used, and the wall time."""
    # Start-up cost: `plan` loads this module but not tfgpu.process.runner.
    from tfgpu.process.runner import Runner

    if not 2 <= workers <= 64:
        raise UsageError(
            "bad-option-value",
            f"--workers {workers}: a multi-worker check needs 2 to 64 workers.",
            ["`tfgpu-install verify --prefix ENV --workers 2`"],
        )
    python = _env_python(prefix)
    runner = runner or Runner()
    with as_file(files("tfgpu.verify").joinpath("multiworker.py")) as script:
        done = runner.capture(
            [str(python), "-I", "-B", str(script), "--workers", str(workers), "--timeout", str(int(timeout - 30))],
            timeout=timeout,
            clean=False,
            env={"NCCL_NVLS_ENABLE": "0", **NO_BYTECODE},
        )
    lines = [line for line in done.output.strip().splitlines() if line.startswith("{")]
    try:
        report = untrusted.expect(
            untrusted.parse_json(lines[-1], untrusted.CHILD_OUTPUT, str(python)),
            dict,
            untrusted.CHILD_OUTPUT,
            str(python),
        )
    except (IndexError, untrusted.Unreadable):
        raise OperationError(
            "verify-crashed",
            f"The multi-worker check in {prefix} crashed (exit {done.returncode}).\n"
            + "\n".join(done.stderr.strip().splitlines()[-8:]),
            ["Run `tfgpu-install doctor` for the environment."],
        ) from None
    report["prefix"] = str(prefix)
    return report


def multiworker_failure(report: dict) -> OperationError:
    """The error for a multi-worker check that did not pass (exit 1)."""
    return OperationError(
        "multiworker-failed",
        f"The {report.get('workers')}-worker MultiWorkerMirroredStrategy "
        f"step in {report['prefix']} failed: {report.get('reason')}",
        [
            'Run one worker by hand to see its whole log: TF_CONFIG=\'{"cluster": {"worker": '
            '["127.0.0.1:23456"]}, "task": {"type": "worker", "index": 0}}\' '
            f"{report['prefix']}/bin/python -I <tfgpu>/verify/multiworker.py --worker",
            "`tfgpu-install verify` (without --workers) checks each GPU on its own.",
        ],
        details=report,
    )


def failure(report: dict, *, built: bool = False, details: dict | None = None) -> OperationError:
    """The error for a report whose GPU check did not pass (exit 1, never a success); ``built``:
    the env was just built (and stays), which the message says first."""
    message = f"No working GPU in {report['prefix']}: {report.get('reason')}"
    if built:
        message = f"The environment is built at {report['prefix']}, but: {message}"
    ways = _ways_forward(report.get("code"))
    why, arch_ways = architecture_reason(report) if report.get("code") == "gpu-op-failed" else ("", [])
    if why:
        message += why
        ways = arch_ways + ways
    if report.get("log_path"):
        ways.append(f"TensorFlow's whole output is in {report['log_path']}.")
    return OperationError(report.get("code") or "no-gpu", message, ways, details=report if details is None else details)


def architecture_reason(report: dict) -> tuple[str, list[str]]:
    """For a GPU the wheel has no SASS for (``native_kernels`` False in the report) whose ops
    failed: what TensorFlow's sources say of that release on that architecture
    (``tfgpu.resolver.archtruth``), and the ways forward; ("", []) otherwise."""
    release = next((r for r in tables.releases() if str(r.version) == report.get("tensorflow")), None)
    caps = report.get("build_info", {}).get("cuda_compute_capabilities") or []
    for gpu in report.get("gpus", []):
        cc = gpu.get("compute_capability") or ""
        if gpu.get("native_kernels") is not False:
            continue
        failed = [
            p
            for p in ("matmul", "elementwise", "xla", "conv")
            if not (gpu if p == "matmul" else gpu.get(p, {})).get("ok")
        ]
        if not failed:
            continue
        text = (
            f" {gpu.get('device')} is compute capability {cc} ({archtruth.target_name(cc)}), for which TF "
            f"{report.get('tensorflow')} carries no SASS ({', '.join(map(str, caps)) or 'none recorded'}): "
            f"{', '.join(failed)} failed there."
        )
        wheel = release.wheels.get("linux_x86_64") if release else None
        truth = archtruth.judge(release, wheel, cc) if release and wheel else None
        if release is None or truth is None:
            return text, []
        text += f" Its sources say ({truth.verdict}): {truth.why} Sources: {', '.join(truth.source)}."
        return text, [w for w in archtruth.ways_forward(release, cc) if not w.startswith("--allow-unsupported-gpu")]
    return "", []


def _ways_forward(code: str | None) -> list[str]:
    return list(
        {
            "no-driver": [
                "Install the NVIDIA driver (the env needs nothing else); in WSL2 install it on Windows.",
                "`tfgpu-install doctor` shows every driver source it tried.",
            ],
            "driver-too-old": [
                "Upgrade the NVIDIA driver, or rebuild the env for an older TF: "
                "`tfgpu-install plan` names the newest one this driver runs."
            ],
            "library-not-loadable": [
                "Rebuild the env with --force; `tfgpu-install doctor` shows which file is missing."
            ],
            "tensorflow-import-failed": ["Rebuild the env with --force."],
        }.get(code or "", ["`tfgpu-install doctor` explains what is wrong and how to fix it."])
    )
