"""How a build that succeeded ends: the GPU checked and working, not checkable here, or failing.

By the time ``create`` or ``repair`` checks the GPU, the env is built (or repaired, and the repair
kept) whatever the check finds. The check then ends one of three ways:

* it passed: exit 0;
* this machine has no NVIDIA driver at all (a laptop, or a login node that prepares envs for GPU
  nodes): the build is what was asked for, and the GPU can only be checked where there is one.
  Exit 0 with one notice saying so and naming the ``verify`` command to run on the GPU host;
  ``--require-gpu`` makes it ``gpu-required`` (exit 1), for CI on GPU hosts;
* anything else (a driver here and the check fails): exit 1, as a failed check always is.

"No driver at all" is read twice, and both must agree: the env's own check could not load
``libcuda.so.1`` (its code ``no-driver``), and this machine's detection (``tfgpu.detect``) found no
driver source answering, no ``/proc/driver/nvidia`` (nor WSL2's driver directory), no ``nvidia-smi``
and no ``libcuda.so.1`` for the loader to find — anything of a driver that is there and fails is a
failing driver. A machine where the kernel module is loaded
but the env cannot load libcuda (a container without the driver's libraries mounted, WSL2's
library path) has a driver that fails, and fails.
"""

from __future__ import annotations

from tfgpu.cli.output import note, text
from tfgpu.detect.platform_facts import WSL_LIB
from tfgpu.envs.which import naming
from tfgpu.errors import OperationError, UsageError
from tfgpu.records import replace
from tfgpu.results import Verified
from tfgpu.settings import Settings
from tfgpu.verify import driverless_report, failure

DRIVER_DIR = "/proc/driver/nvidia"
"""Present whenever the NVIDIA kernel module is loaded, with or without its user-space libraries."""


def check_command(settings: Settings, prefix: str, name: str | None = None) -> str:
    """The ``verify`` command that checks this env on the GPU host: by name when it was made by name."""
    from tfgpu.doors.quoting import sh  # pasted into a shell: a prefix may hold spaces, ';' or '$'

    name = name if name is not None else settings.name
    return f"tfgpu-install verify --name {sh(name)}" if name else f"tfgpu-install verify --prefix {sh(prefix)}"


def refuse_unverifiable(settings: Settings) -> None:
    """``--require-gpu`` asks for the check that ``--no-verify`` skips: the two contradict."""
    if settings.require_gpu and not settings.verify:
        raise UsageError(
            "conflicting-options",
            "--require-gpu asks for the GPU check and --no-verify skips it; nothing was changed.",
            ["Leave out one of them."],
        )


def no_driver_here(report: dict | None, system=None) -> str | None:
    """Why the GPU could not be checked on this machine (it has no NVIDIA driver at all), or None
    when it could have been (no report, a passing one, or a driver that is here and fails).
    ``system``: the machine to ask (``tfgpu.detect.System``; tests give a recorded one)."""
    if not report or report.get("ok") or report.get("code") != "no-driver":
        return None
    return no_driver_on_this_machine(system)


def no_driver_on_this_machine(system=None) -> str | None:
    """Why no GPU check can pass here (this machine has no NVIDIA driver at all, as detection reads
    it in about a second), or None when some part of a driver is here (working or failing)."""
    # Looked up at each call: tests stand a fake in for probe().
    from tfgpu.detect import System, probe

    system = system if system is not None else System()
    host = probe(system)
    if host.driver is not None or host.gpus or system.is_dir(DRIVER_DIR) or system.is_dir(WSL_LIB):
        return None
    # Installed but not answering is a driver that fails, not none: an nvidia-smi that errs or hangs
    # (the kernel module not loaded after a kernel update), a libcuda.so.1 the loader finds but cannot
    # load (a missing dependency, another architecture). Only "no such file" means absent; a loader
    # message in another language reads as present, the safe side (exit 1, the reason shown).
    if system.which("nvidia-smi") is not None:
        return None
    answer = system.libcuda_driver_version("libcuda.so.1")
    # dlerror names the file it could not open: libcuda.so.1 itself when it is absent, a dependency
    # when libcuda.so.1 is there and one of its libraries is not.
    if not (isinstance(answer, str) and answer.startswith("libcuda.so.1: ") and "No such file" in answer):
        return None
    return f"no NVIDIA driver on this machine (no libcuda.so.1, no nvidia-smi, and no {DRIVER_DIR})"


def before_the_check(settings: Settings, prefix, chosen: dict) -> None:
    """``verify`` on a machine with no driver at all fails with ``no-driver`` before it imports
    TensorFlow (seconds to minutes), as doctor knows it in a second; else it says it is importing."""
    why = no_driver_on_this_machine()
    if why is not None:
        raise failure(driverless_report(prefix, why) | {"which_env": chosen})
    if not settings.json:
        note(f"Checking the GPU with {prefix}/bin/python (imports TensorFlow).")


def unchecked(settings: Settings, report: dict | None, prefix: str, name: str | None = None) -> dict | None:
    """Why the GPU of a finished build was not checked, as ``--json`` reports it (``not_verified``),
    or None when it was (passed or failed). Raises ``gpu-required`` under ``--require-gpu``."""
    if report is not None and report.get("ok"):
        return None
    how = check_command(settings, prefix, name)
    if report is None:
        reason = "--no-verify" if not settings.verify else "nothing changed, so the GPU was not checked again"
        return {"code": "skipped", "reason": reason, "check_with": how}
    missing = no_driver_here(report)
    if missing is None:
        return None
    return {"code": "no-driver-here", "reason": missing, "check_with": how}


def gpu_required(found: dict, prefix: str, what: str, details: dict) -> OperationError:
    """``--require-gpu`` on a machine without a driver: the build stays, and the run fails."""
    return OperationError(
        "gpu-required",
        f"{what} {prefix}, but --require-gpu asks for a checked GPU and there is {found['reason']}.",
        [
            f"Run it on a GPU host, or check this env there: `{found['check_with']}`.",
            "Leave out --require-gpu where no GPU is expected (the build then ends with exit 0 and a notice).",
        ],
        details=details,
    )


def created_ending(settings: Settings, created, name: str | None):
    """The result of a finished ``create`` (its GPU checked, not checkable here, or skipped), or
    the error of a check that failed with a driver here, or of ``--require-gpu`` without one."""
    outcome = created.outcome
    report = outcome.verify

    found = unchecked(settings, report, created.prefix, name)
    created = replace(created, unchecked=found, naming=naming(outcome.location.prefix, name))
    # Start-up cost: `doctor` loads this module but not tfgpu.doors.quoting.
    from tfgpu.doors.quoting import sh

    how = outcome.outcome.activate or f"source {sh(f'{created.prefix}/bin/activate')}"
    works = (
        f"The env works for everything but the GPU now: `{how}` (or run {sh(f'{created.prefix}/bin/python')} directly)."
    )
    if found is not None and found["code"] == "no-driver-here" and settings.require_gpu:
        error = gpu_required(found, created.prefix, "The environment is built at", created.to_dict())
        error.alternatives.insert(0, works)
        raise error
    if found is None and report is not None and not report.get("ok"):
        if not settings.json:
            text(Verified(report, failing=True))
        error = failure(report, built=True, details=created.to_dict())
        error.alternatives.insert(0, works)  # first: the env is there and usable, then how to get the GPU
        if outcome.log_path and not report.get("log_path"):
            error.alternatives.append(f"The log of this create is {outcome.log_path}.")
        raise error
    return created
