"""``resolve(request, host) -> Resolution``: the whole algorithm, pure.

No subprocess, no network, no printing: the tables in ``tfgpu/data`` and the two inputs are all
it reads. Impossible requests raise :class:`~tfgpu.errors.ImpossibleError` with a stable code and
ways forward.
"""

from __future__ import annotations

from tfgpu.errors import ImpossibleError
from tfgpu.records import replace
from tfgpu.resolver import tables
from tfgpu.resolver.candidates import candidates
from tfgpu.resolver.evaluate import Evaluation, evaluate
from tfgpu.resolver.model import Rejection, Resolution, Target
from tfgpu.resolver.notices import notices_for
from tfgpu.resolver.request import Request
from tfgpu.resolver.target import make_target


def resolve(request: Request, host=None) -> Resolution:
    """Choose TensorFlow, Python, CUDA and cuDNN for ``request`` on ``host`` (a detected
    ``tfgpu.detect.Host``, or ``None`` to plan purely from the request).

    The newest release admitted by ``request.tf`` that passes every check wins; every newer one
    is listed in ``Resolution.rejected`` with its reason.
    """
    target = make_target(request, host)
    releases, how = candidates(request.tf, request.pre)
    rejected: list[Rejection] = []
    for release in releases:
        ev = evaluate(release, target, request.mode, request.tf_source)
        if ev.failure is None:
            resolution = _resolution(ev, how, rejected, host)
            return with_companions(request, resolution, host) if request.companions else resolution
        rejected.append(Rejection(str(release.version), ev.failure.code, ev.failure.message))
    raise _no_fit(request, target, releases)


def with_companions(request: Request, resolution: Resolution, host) -> Resolution:
    """The resolution with the ``--with`` companions planned in (``tfgpu.resolver.companions``).
    Where the Python chosen for TensorFlow alone has no companion wheel and the user named none,
    TensorFlow is resolved again for the newest Python both sides have."""
    # Start-up cost: `plan --json --no-detect` loads this module but not tfgpu.resolver.coplanned.
    from tfgpu.resolver import companions, coplanned

    coplanned.check_target(request, resolution)
    release = next(r for r in tables.releases() if str(r.version) == resolution.tensorflow)
    tf_pythons = release.wheels[companions.LINUX].python
    given = request.python is not None
    target = make_target(request, host)
    plan = companions.coplan(
        release,
        tf_pythons,
        resolution.python,
        given,
        list(request.companions),
        tables.releases(),
        target.driver,
        tuple(target.gpu_ccs),
        target.os,
    )
    if plan.pythons and resolution.python not in plan.pythons and not given:
        again = resolve(replace(request, tf=resolution.tensorflow, python=plan.pythons[-1], companions=()), host)
        resolution = replace(
            again, reasons=(*again.reasons, f"Python {plan.pythons[-1]}: the newest every side has wheels for.")
        )
    return coplanned.planned(resolution, plan)


def newest_fit(target: Target, mode: str, pre: bool = False, tf_source: str | None = None) -> Evaluation | None:
    """The newest release of all that fits ``target`` in ``mode``, if any (pre-releases only with
    ``pre``; from ``tf_source`` where the user asked for one)."""
    for release in tables.releases():
        if release.version.is_prerelease and not pre:
            continue
        ev = evaluate(release, target, mode, tf_source)
        if ev.failure is None:
            return ev
    return None


def _no_fit(request: Request, target: Target, releases) -> ImpossibleError:
    first = evaluate(releases[0], target, request.mode, request.tf_source).failure
    assert first is not None  # no release fits
    alternatives = list(first.alternatives)
    if first.code == "gpu-arch-cannot-run":
        # ways_forward already names the newest release the sources do not say fails, first.
        return ImpossibleError(first.code, _many(request, releases, first), alternatives)
    message = _many(request, releases, first)
    fit = (
        newest_fit(target, request.mode, request.pre, request.tf_source) if request.tf not in (None, "latest") else None
    )
    if fit is not None:
        alternatives.append(
            f"TF {fit.release.version} is the newest release that fits this target "
            f"(Python {fit.python}, CUDA {fit.cuda or '-'}): --tf {fit.release.version}."
        )
    if first.code == "python-unsupported" and target.python_given:
        fit = newest_fit(replace(target, python=None, python_given=False), request.mode, request.pre, request.tf_source)
        if fit is not None and request.tf in (None, "latest"):
            alternatives.append(f"Without --python, TF {fit.release.version} fits (Python {', '.join(fit.pythons)}).")
    if first.code in ("driver-too-old", "gpu-too-old", "gpu-arch-unsupported"):
        alternatives.append(
            "NVIDIA's NGC TensorFlow containers (nvcr.io/nvidia/tensorflow) are built for current GPUs and drivers."
        )
    return ImpossibleError(first.code, message, alternatives)


def _many(request: Request, releases, first) -> str:
    if len(releases) > 1:
        return (
            f"No release matching --tf {request.tf or 'latest'} fits this target. "
            f"The newest, TF {releases[0].version}: {first.message}"
        )
    return first.message


def _resolution(ev: Evaluation, how: str, rejected: list[Rejection], host) -> Resolution:
    release, target = ev.release, ev.target
    assert ev.python is not None  # a release that fits has its Python
    option = ev.options[ev.mode]
    warnings, reasons = notices_for(ev, how, host)
    series = tables.series().get(release.series)
    sources = set(release.source) | set(series.source if series else ())
    if ev.need:
        sources |= set(ev.need.source)
    for truth in ev.truths.values():
        sources |= set(truth.source)
    return Resolution(
        tensorflow=str(release.version),
        package=ev.metal.package if ev.metal else release.gpu_package,
        python=ev.python,
        mode=ev.mode,
        os=target.os,
        arch=target.arch,
        platform=target.platform,
        accelerator="metal" if ev.metal else "cuda",
        cuda=".".join(ev.cuda.split(".")[:2]) if ev.cuda else None,
        cuda_build=ev.cuda,
        cudnn=ev.cudnn if not ev.metal else None,
        min_driver=ev.need.minimum if ev.need else None,
        toolkit_driver=ev.need.toolkit_minimum if ev.need else None,
        driver=target.driver,
        compute_capabilities=ev.wheel.compute_capabilities if ev.wheel and not ev.metal else (),
        packages=option.packages,
        modes=ev.options,
        warnings=tuple(warnings),
        reasons=tuple(reasons),
        rejected=tuple(rejected),
        sources=tuple(sorted(sources)),
        prerelease=release.version.is_prerelease,
        tensorflow_source=ev.tf_source,
        architecture=tuple(ev.truths.values()),
    )
