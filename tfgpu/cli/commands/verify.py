"""``tfgpu-install verify``: TensorFlow run on the GPU inside an env (with ``--with``, beside other
frameworks; with ``--workers``, several processes of one MultiWorkerMirroredStrategy step)."""

from __future__ import annotations

from tfgpu import results
from tfgpu.cli.commands.which import target_env
from tfgpu.cli.endings import before_the_check
from tfgpu.cli.output import note, text
from tfgpu.envs.location import safe_label
from tfgpu.errors import ImpossibleError
from tfgpu.process.runner import Runner
from tfgpu.settings import Settings
from tfgpu.verify import failure, multiworker_failure, run_multiworker, run_verify
from tfgpu.verify.frameworks import frameworks_failure, frameworks_of, run_frameworks
from tfgpu.verify.origins import annotate


def cmd_verify(settings: Settings) -> results.Result:
    target = target_env(settings, "verify")
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
