"""``tfgpu-install doctor`` and ``verify``: the checks of an env, the one the user named or the
active one (``tfgpu.envs.which``)."""

from __future__ import annotations

from tfgpu import results
from tfgpu.cli.endings import before_the_check
from tfgpu.cli.output import note, text
from tfgpu.doctor import run_doctor
from tfgpu.doctor.logs import match_log, read_log
from tfgpu.envs.location import safe_label
from tfgpu.envs.which import which_env
from tfgpu.errors import ImpossibleError
from tfgpu.proc import Runner
from tfgpu.settings import Settings
from tfgpu.verify import failure, multiworker_failure, run_multiworker, run_verify
from tfgpu.verify.frameworks import frameworks_failure, frameworks_of, run_frameworks
from tfgpu.verify.origins import annotate


def _which(settings: Settings, purpose: str):
    """The env the command means (``tfgpu.envs.which``), said on stderr when the user did not type it."""
    target = which_env(
        name=settings.name,
        prefix=settings.prefix,
        interpreter=settings.interpreter,
        environ=dict(settings.active_env),
        purpose=purpose,
    )
    if target is not None and target.implicit and not settings.json:
        note(target.describe())
    return target


def cmd_doctor(settings: Settings) -> results.Result:
    if settings.log is not None:
        content, cut = read_log(settings.log)
        return results.LogMatches(settings.log, match_log(content), cut)
    target = _which(settings, "doctor")
    report = run_doctor(root=target.prefix if target else None, python=target.interpreter if target else None)
    return results.Doctored(report, target.to_dict() if target else None)


def cmd_verify(settings: Settings) -> results.Result:
    target = _which(settings, "verify")
    prefix = target.prefix
    if not prefix.is_dir():
        raise ImpossibleError(
            "no-such-env",
            f"There is no environment at {prefix}.",
            ["Give the env's path with --prefix, or create it first."],
        )
    chosen = target.to_dict()
    if settings.selectors.companions:
        frameworks = frameworks_of(settings.selectors.companions)
        if not settings.json:
            note(f"TensorFlow and {', '.join(frameworks)} in one process, each import order, with {prefix}/bin/python…")
        report = annotate(prefix, run_frameworks(prefix, frameworks)) | {"which_env": chosen}
        if not report["ok"]:
            if not settings.json:
                text(results.Verified(report, frameworks=True, failing=True))
            raise frameworks_failure(report)
        return results.Verified(report, frameworks=True, which_env=chosen)
    if settings.workers is not None:
        if not settings.json:
            note(f"{settings.workers} workers of {prefix}/bin/python, one MultiWorkerMirroredStrategy step…")
        report = run_multiworker(prefix, settings.workers)
        if not report.get("ok"):
            if not settings.json:
                text(results.Verified(report, multiworker=True, failing=True))
            raise multiworker_failure(report | {"which_env": chosen})
        return results.Verified(report, multiworker=True, which_env=chosen)
    before_the_check(settings, prefix, chosen)
    runner = Runner.for_operation(f"verify-{safe_label(prefix.name)}")
    report = run_verify(prefix, bench=settings.bench, runner=runner)
    if not report.get("ok"):
        if not settings.json:
            text(results.Verified(report, failing=True))
        raise failure(report | {"which_env": chosen})
    return results.Verified(report, which_env=chosen)
