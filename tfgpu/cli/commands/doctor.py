"""``tfgpu-install doctor``: the checks of an env and of this machine, or the matches in a log."""

from __future__ import annotations

from tfgpu import results
from tfgpu.cli.commands.which import target_env
from tfgpu.doctor import run_doctor
from tfgpu.doctor.logs import match_log, read_log
from tfgpu.settings import Settings


def cmd_doctor(settings: Settings) -> results.Result:
    if settings.log is not None:
        content, cut = read_log(settings.log)
        return results.LogMatches(settings.log, match_log(content), cut)
    target = target_env(settings, "doctor")
    report = run_doctor(root=target.prefix if target else None, python=target.interpreter if target else None)
    return results.Doctored(report, target.to_dict() if target else None)
