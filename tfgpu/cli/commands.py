"""One function per command: build the objects from the parsed arguments, call the core, render.

Nothing here decides policy: option rules are ``tfgpu.installers.options``', what a lock allows is
``tfgpu.lock``'s, what a create does is ``tfgpu.ops``'. Each function returns the exit code or
raises a ``TfgpuError``; ``--json`` prints one document, otherwise ``tfgpu.render`` shows it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from tfgpu.cli.output import emit, render
from tfgpu.errors import ImpossibleError, UsageError

SELECTORS = ("tf", "mode", "python", "os", "arch", "driver", "gpu_cc", "pre")


def selectors(args: argparse.Namespace) -> dict:
    return {key: getattr(args, key, None) for key in SELECTORS}


def host_of(args: argparse.Namespace, artefact: bool = False):
    """This machine's facts, or None: with --no-detect, and for an artefact whose command line
    describes another machine (``tfgpu.resolver.target.names_another_machine``)."""
    if args.no_detect:
        return None
    if artefact:
        from tfgpu.resolver.target import names_another_machine

        if names_another_machine(selectors(args)):
            return None
    from tfgpu.detect import probe

    return probe(given=selectors(args))


def resolve(args: argparse.Namespace, artefact: bool = False):
    from tfgpu.resolver import make_request, resolve as run

    host = host_of(args, artefact)
    return run(make_request(**selectors(args)), host), host


def default_name(tensorflow: str) -> str:
    """``2.13.1`` -> ``tf2.13``: one env per series unless told otherwise."""
    major, minor = tensorflow.split(".")[:2]
    return f"tf{major}.{minor}"


def cmd_plan(args) -> int:
    with_project(args)
    resolution, host = resolve(args)
    document = resolution.to_dict() | {"host": host.to_dict() if host else None}
    emit(args, document, lambda: render().plan(resolution, host))
    return 0


def cmd_matrix(args) -> int:
    from tfgpu.resolver.matrix import matrix
    from tfgpu.resolver.overlay import data_status, describe_age

    rows, status = matrix(all_releases=args.all), data_status()
    emit(args, {"releases": rows, "data": status}, lambda: (
        render().matrix(rows),
        render().note(describe_age(status) + "; `tfgpu-install update-data` fetches newer releases.")))
    return 0


def cmd_update_data(args) -> int:
    from tfgpu.update import update_data

    report = update_data(offline=args.offline, index_url=args.index)
    emit(args, report, lambda: render().note(report["summary"]))
    return 0


def cmd_create(args) -> int:
    """``create``: from a fresh resolution, or exactly what a lock or bundle pins."""
    from tfgpu.installers.options import build_options
    from tfgpu.ops import create

    if not (args.from_lock or args.from_bundle):  # with a lock, the lock decides what is built
        with_project(args)
    if args.name is not None:
        from tfgpu.envs.location import check_name

        check_name(args.name)
    options = build_options(mode=args.mode, engine=args.engine, channels=args.channel, tf_source=args.tf_source,
                            channel_from=getattr(args, "channel_from", "--channel"),
                            find_links=args.find_links, offline=args.offline, jupyter=args.jupyter, force=args.force,
                            verify=not args.no_verify)
    reporter = None if args.dry_run else render().ConsoleReporter()
    extra: dict = {}
    host = None
    try:
        if args.from_lock or args.from_bundle:
            from tfgpu.lock.install import prepare

            resolution, options, source, lock = prepare(selectors(args), options, from_lock=args.from_lock,
                                                        from_bundle=args.from_bundle, reporter=reporter)
            extra = {"lock": str(lock.path), "lock_sha256": lock.meta["sha256"], "bundle": args.from_bundle}
        else:
            from tfgpu.installers.base import Source

            resolution, host = resolve(args)
            source = Source()
        name = args.name or (None if args.prefix else default_name(resolution.tensorflow))
        result = create(resolution, name=name, prefix=args.prefix, options=options, source=source,
                        reporter=reporter, dry_run=args.dry_run)
    finally:
        if reporter is not None:
            reporter.close()
    if args.dry_run:
        document = resolution.to_dict() | extra | {"dry_run": True, "prefix": str(result.location.prefix),
                                                   "steps": [step.to_dict() for step in result.steps]}
        emit(args, document, lambda: render().dry_run(resolution, host, result))
        return 0
    document = {"prefix": str(result.location.prefix), "tensorflow": resolution.tensorflow,
                "python": resolution.python, "installed": result.outcome.installed,
                "log": str(result.log_path) if result.log_path else None, "notes": result.notes,
                "verify": result.verify} | extra
    if result.verify is not None and not result.verify.get("ok"):
        from tfgpu.verify import failure

        if not args.json:
            render().verify(result.verify)
        error = failure(result.verify, built=True, details=document)
        how = result.outcome.activate or f"source {result.location.prefix}/bin/activate"
        error.alternatives.append(f"The env works for everything but the GPU now: `{how}` (or run "
                                  f"{result.location.prefix}/bin/python directly).")
        if result.log_path and not result.verify.get("log_path"):
            error.alternatives.append(f"The log of this create is {result.log_path}.")
        raise error
    emit(args, document, lambda: render().created(result, resolution))
    return 0


def cmd_remove(args) -> int:
    from tfgpu.ops import remove

    removed = remove(args.name, args.prefix)
    emit(args, removed, lambda: render().removed(removed["removed"], removed["recovered"]))
    return 0


def _targets(args, allow_cpu: bool):
    from tfgpu.lock.targets import lock_targets

    return lock_targets(args.platform, selectors(args), allow_cpu=allow_cpu, host=host_of(args, artefact=True))


def cmd_lock(args) -> int:
    """``lock``: one hashed lock per --platform (pip), or one conda-lock.yml for all (conda)."""
    from tfgpu.installers.options import check_channels_for, mode_of
    from tfgpu.lock.writing import write_conda_lock, write_locks

    from_project = with_project(args)
    if args.check:
        return lock_check(args, from_project)
    needs_platforms(args)
    mode = mode_of(args.mode)
    check_channels_for(mode, args.channel)
    targets = _targets(args, args.allow_cpu)
    reporter = render().ConsoleReporter()
    try:
        if mode == "conda":
            from tfgpu.engines.rattler import channel_urls, check_channels

            channels = channel_urls(tuple(args.channel or ()), getattr(args, "channel_from", "--channel"))
            check_channels(channels)
            summary = write_conda_lock(targets, args.output, channels=channels, reporter=reporter)
        else:
            written = write_locks(mode, targets, args.output, reporter)
    finally:
        reporter.close()
    if mode == "conda":
        emit(args, {"lock": summary}, lambda: render().note(
            f"{summary['path']}: {summary['packages']} packages for {', '.join(summary['platforms'])} "
            f"(install: tfgpu-install create --from-lock {summary['path']} --name N; conda-lock reads it too)"))
        return 0

    def show() -> None:
        for item in written:
            kind = "CPU-only" if item.meta["cpu_only"] else f"CUDA {item.meta['resolution']['cuda']}"
            render().note(f"{item.platform}: {item.path} ({len(item.pins)} packages, TF "
                          f"{item.meta['resolution']['tensorflow']}, {kind}, Python {item.meta['python']}); "
                          f"PEP 751: {item.pylock.name}")
    emit(args, {"locks": [item.to_dict() for item in written]}, show)
    return 0


def lock_check(args, from_project: list[str]) -> int:
    """``lock --check FILE``: 0 when the lock is what its recorded inputs resolve to today, else 1."""
    from tfgpu.lock.check import check_lock

    wanted = {key: getattr(args, key) for key in ("tf", "mode", "python", "platform") if getattr(args, key, None)}
    wanted["source"] = "the project file" if from_project else "the command line"
    reporter = None if args.json else render().ConsoleReporter()
    try:
        found = check_lock(args.check, wanted, reporter=reporter)
    finally:
        if reporter is not None:
            reporter.close()
    emit(args, found.to_dict(), lambda: render().lock_check(found))
    return 0 if found.current else 1


def cmd_bundle(args) -> int:
    """``bundle``: a lock, its packages and the tool's own wheels in one directory (one platform)."""
    from tfgpu.installers.options import check_channels_for, mode_of
    from tfgpu.lock.bundle import build_bundle

    with_project(args)
    needs_platforms(args)
    if len(set(args.platform)) != 1:
        raise UsageError("conflicting-options", "A bundle is for one platform; several --platform were given.",
                         ["Build one bundle per platform, each with its own -o DIR."])
    mode = mode_of(args.mode)
    if mode not in ("pip", "conda"):
        raise UsageError("mode-not-bundlable", f"--mode {mode} cannot be bundled: system mode installs vendor "
                         "archives, not packages.", ["Use --mode pip or --mode conda."])
    check_channels_for(mode, args.channel)
    [(platform, resolution, _)] = _targets(args, allow_cpu=False)
    reporter = render().ConsoleReporter()
    try:
        if mode == "conda":
            from tfgpu.engines.rattler import channel_urls, check_channels
            from tfgpu.lock.bundle_conda import build_conda_bundle

            channels = channel_urls(tuple(args.channel or ()), getattr(args, "channel_from", "--channel"))
            check_channels(channels)
            summary = build_conda_bundle(resolution, platform, Path(args.output), channels=channels, reporter=reporter)
        else:
            summary = build_bundle(resolution, platform, Path(args.output), reporter=reporter)
    finally:
        reporter.close()
    emit(args, summary, lambda: render().note(
        f"Bundle ready: {summary['bundle']} ({summary['files']} files, {summary['mb']} MB). Install it offline "
        f"with {summary['bundle']}/install.sh PREFIX"))
    return 0


def cmd_script(args) -> int:
    """``script --format F [-o PATH]``: a provisioning artefact for the resolution (``tfgpu.export``)."""
    from tfgpu import export

    with_project(args)
    if args.format in export.DIRECTORY_FORMATS and not args.output:
        raise UsageError("missing-output", f"The {args.format} export is a directory of files "
                         f"({export.DIRECTORY_FORMATS[args.format]}): say where with -o DIR.",
                         [f"tfgpu-install script --format {args.format} -o ./tf-{args.format}"])
    resolution, _ = resolve(args, artefact=True)
    result = export.render(resolution, args.format)
    if args.output:
        written = export.write(result, args.output)
        document = result.to_dict() | {"output": args.output, "written": [str(path) for path in written]}
        emit(args, document, lambda: render().note(
            f"Wrote {', '.join(str(path) for path in written)} ({args.format}, TensorFlow {resolution.tensorflow}, "
            f"{resolution.mode} mode)."))
    elif args.json:
        document = result.to_dict()
        document["files"] = [entry | {"content": item.content} for entry, item in zip(document["files"], result.files)]
        emit(args, document, lambda: None)
    else:
        sys.stdout.write(result.main.content)
    return 0


def cmd_doctor(args) -> int:
    if args.log is not None:
        from tfgpu.doctor.logs import LOG_LIMIT, match_log, read_log

        text, cut = read_log(args.log)
        matches = match_log(text)
        document = {"log": args.log, "matches": [m.to_dict() for m in matches],
                    "ok": not any(m.severity == "fail" for m in matches), "truncated": cut}

        def show() -> None:
            if cut:
                render().note(f"Only the first {LOG_LIMIT >> 20} MiB of {args.log} were read.")
            render().log_matches(matches)
        emit(args, document, show)
        return 0 if document["ok"] else 1
    from tfgpu.doctor import run_doctor
    from tfgpu.envs.location import prefix_for

    root = prefix_for(args.name, args.prefix)[0] if (args.name or args.prefix) else None
    report = run_doctor(root=root, python=Path(args.python) if args.python else None)
    emit(args, report.to_dict(), lambda: render().doctor(report))
    return 1 if report.failed else 0


def cmd_verify(args) -> int:
    from tfgpu.envs.location import prefix_for
    from tfgpu.verify import failure, run_verify

    if not (args.name or args.prefix):
        raise UsageError("missing-location", "Say which environment to verify: --name N or --prefix P.",
                         ["`tfgpu-install verify --name tf2.21`"])
    prefix, _ = prefix_for(args.name, args.prefix)
    if not prefix.is_dir():
        raise ImpossibleError("no-such-env", f"There is no environment at {prefix}.",
                              ["Give the env's path with --prefix, or create it first."])
    if args.workers is not None:
        from tfgpu.verify import multiworker_failure, run_multiworker

        if not args.json:
            render().note(f"{args.workers} workers of {prefix}/bin/python, one MultiWorkerMirroredStrategy step…")
        report = run_multiworker(prefix, args.workers)
        if not report.get("ok"):
            if not args.json:
                render().multiworker(report)
            raise multiworker_failure(report)
        emit(args, report, lambda: render().multiworker(report))
        return 0
    if not args.json:
        render().note(f"Checking the GPU with {prefix}/bin/python (imports TensorFlow).")
    from tfgpu.envs.location import safe_label
    from tfgpu.proc import Runner

    runner = Runner.for_operation(f"verify-{safe_label(prefix.name)}")
    report = run_verify(prefix, bench=args.bench, runner=runner)
    if not report.get("ok"):
        if not args.json:
            render().verify(report)
        raise failure(report)
    emit(args, report, lambda: render().verify(report))
    return 0


HANDLERS = {"create": cmd_create, "plan": cmd_plan, "lock": cmd_lock, "bundle": cmd_bundle, "script": cmd_script,
            "doctor": cmd_doctor, "verify": cmd_verify, "matrix": cmd_matrix, "update-data": cmd_update_data,
            "remove": cmd_remove}


def trust_hosts(args, project_hosts=()) -> None:
    """Name the hosts plain HTTP may reach (``tfgpu.urls``), once at start-up: ``--insecure-host``,
    ``TFGPU_INSECURE_HOSTS`` and, when a project file applies, its ``insecure-hosts``. Every run
    starts from these alone, so nothing carries over from an earlier call in the same process."""
    from tfgpu import urls

    named = os.environ.get(urls.ENVIRONMENT, "").split(",")
    urls.trust([*(getattr(args, "insecure_host", None) or ()), *named, *project_hosts])


def with_project(args) -> list[str]:
    """The project file's settings where the command line left them unset (``tfgpu.project``);
    returns the keys it supplied."""
    if getattr(args, "no_project", False):
        return []
    from tfgpu import project

    explicit = getattr(args, "project", None)
    found = project.load(Path(explicit).expanduser().absolute() if explicit else None, explicit=bool(explicit))
    for refusal in () if explicit else project.refused:
        render().note(refusal)  # stderr, also under --json
    if found is None:
        return []
    taken = project.apply(found, args, set(vars(args)))
    trust_hosts(args, found.values.get("insecure_hosts", ()))
    if taken and not args.json:
        render().note(f"Using the project file {found.describe()}; flags on the command line override it.")
    return [f"{key} (from {found.path})" for key in taken]


def needs_platforms(args) -> None:
    if not args.platform:
        raise UsageError("bad-arguments", f"tfgpu-install {args.command}: say which platforms with --platform "
                         "(e.g. --platform linux-64), or list them in the project file (platforms = [...]).",
                         [f"tfgpu-install {args.command} --platform linux-64 ..."])


def cmd_list(args) -> int:
    """``list``: the envs tfgpu-install built (their markers prove it), with a cheap health check."""
    from tfgpu.envs.listing import list_envs, search_dirs

    dirs = search_dirs()
    envs = list_envs(dirs)
    emit(args, {"envs": envs, "searched": [str(d) for d in dirs]}, lambda: render().env_list(envs, dirs))
    return 0


def cmd_completion(args) -> int:
    """``completion SHELL``: the completion script, generated from the parser."""
    from tfgpu.cli.completion import script

    sys.stdout.write(script(args.shell))
    return 0


HANDLERS.update({"list": cmd_list, "completion": cmd_completion})
