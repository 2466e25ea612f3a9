"""One function per command: take what it needs from the settings, call the core, return a result.

Nothing here decides policy: option rules are ``tfgpu.installers.options``', what a lock allows is
``tfgpu.lock``'s, what a create does is ``tfgpu.ops``'. Each function returns a typed result
(``tfgpu.results``) that ``tfgpu.cli.output.show`` renders, or raises a ``TfgpuError``.
"""

from __future__ import annotations

from tfgpu import results
from tfgpu.cli.output import note, render, text
from tfgpu.errors import ImpossibleError, UsageError
from tfgpu.settings import Settings


def host_of(settings: Settings, artefact: bool = False):
    """This machine's facts, or None: with --no-detect, and for an artefact whose command line
    describes another machine (``tfgpu.resolver.target.names_another_machine``)."""
    if not settings.detect:
        return None
    if artefact:
        from tfgpu.resolver.target import names_another_machine

        if names_another_machine(settings.selectors):
            return None
    from tfgpu.detect import probe

    return probe(given=settings.selectors.given())


def resolve(settings: Settings, artefact: bool = False):
    from tfgpu.resolver import request_for
    from tfgpu.resolver import resolve as run

    host = host_of(settings, artefact)
    resolution = run(request_for(settings.selectors), host)
    if resolution.two_stacks:
        from tfgpu.resolver.coplanned import refuse_two_stacks

        refuse_two_stacks(resolution, settings.command)
    return resolution, host


def default_name(tensorflow: str) -> str:
    """``2.13.1`` -> ``tf2.13``: one env per series unless told otherwise."""
    major, minor = tensorflow.split(".")[:2]
    return f"tf{major}.{minor}"


def with_channels(settings: Settings, resolution, export: bool = False):
    """``resolution`` with the channels of ``--channel`` or the project file (conda mode), read as
    ``create`` reads them, or for an export as the target's engine will (no local channel). None
    named: the resolution's default (conda-forge), and nothing imported (a plan reads no URL)."""
    if not settings.channels:
        return resolution
    from tfgpu import records
    from tfgpu.engines.channels import planned
    from tfgpu.installers.options import check_channels_for

    check_channels_for(resolution.mode, settings.channels)
    return records.replace(resolution, channels=planned(settings.channels, settings.channels_from, export=export))


def cmd_plan(settings: Settings) -> results.Result:
    resolution, host = resolve(settings)
    return results.Planned(with_channels(settings, resolution), host)


def cmd_matrix(settings: Settings) -> results.Result:
    from tfgpu.resolver.matrix import matrix
    from tfgpu.resolver.overlay import data_status

    return results.Matrix(matrix(all_releases=settings.all_releases), data_status())


def cmd_update_data(settings: Settings) -> results.Result:
    from tfgpu.datasource.update import update_data

    return results.DataUpdate(update_data(offline=settings.offline, index_url=settings.index))


def cmd_create(settings: Settings) -> results.Result:
    """``create``: from a fresh resolution, or exactly what a lock or bundle pins."""
    from tfgpu.cli.endings import refuse_unverifiable
    from tfgpu.installers.options import build_options
    from tfgpu.ops import create

    refuse_unverifiable(settings)
    if settings.name is not None:
        from tfgpu.envs.location import check_name

        check_name(settings.name)
    options = build_options(
        mode=settings.selectors.mode,
        engine=settings.engine,
        channels=settings.channels,
        channel_from=settings.channels_from,
        find_links=settings.find_links,
        offline=settings.offline,
        jupyter=settings.jupyter,
        force=settings.force,
        verify=settings.verify,
    )
    reporter = None if settings.dry_run else render().ConsoleReporter()
    lock: dict = {}
    host = None
    try:
        if settings.from_lock or settings.from_bundle:
            from tfgpu.lock import prepare

            resolution, options, source, found = prepare(
                settings.selectors,
                options,
                from_lock=settings.from_lock,
                from_bundle=settings.from_bundle,
                reporter=reporter,
            )
            lock = {"lock": str(found.path), "lock_sha256": found.meta["sha256"], "bundle": settings.from_bundle}
        else:
            from tfgpu.installers.base import Source

            resolution, host = resolve(settings)
            source = Source()
        name = settings.name or (None if settings.prefix else default_name(resolution.tensorflow))
        outcome = create(
            resolution,
            name=name,
            prefix=settings.prefix,
            options=options,
            source=source,
            reporter=reporter,
            dry_run=settings.dry_run,
        )
    finally:
        if reporter is not None:
            reporter.close()
    if settings.dry_run:
        return results.Created(outcome, resolution, host, dry_run=True, lock=lock)
    from tfgpu.cli.endings import created_ending

    return created_ending(settings, results.Created(outcome, resolution, host, lock=lock), name)


def cmd_remove(settings: Settings) -> results.Result:
    from tfgpu.cli.envs import cmd_remove as remove

    return remove(settings)


def cmd_lock(settings: Settings) -> results.Result:
    """``lock``: one hashed lock per --platform (pip), or one conda-lock.yml for all (conda)."""
    from tfgpu import lock

    if settings.check:
        return lock_check(settings)
    needs_platforms(settings)
    reporter = render().ConsoleReporter()
    try:
        written = lock.write(
            mode=settings.selectors.mode,
            platforms=list(settings.platforms),
            selectors=settings.selectors,
            allow_cpu=settings.allow_cpu,
            host=host_of(settings, artefact=True),
            output=settings.output,
            channels=settings.channels,
            channel_from=settings.channels_from,
            reporter=reporter,
        )
    finally:
        reporter.close()
    return results.Written(written.to_dict(), tuple(written.notes()))


def lock_check(settings: Settings) -> results.Result:
    """``lock --check [FILE]``: 0 when the lock (with no FILE: every lock the project file
    describes) is what its recorded inputs resolve to today, else 1."""
    from tfgpu.lock import check_lock, check_project
    from tfgpu.project import Project

    wanted: dict[str, object] = {
        key: value
        for key, value in (
            ("tf", settings.selectors.tf),
            ("mode", settings.selectors.mode),
            ("python", settings.selectors.python),
            ("platform", list(settings.platforms)),
        )
        if value
    }
    wanted["source"] = "the project file" if settings.project_keys else "the command line"
    wanted["sources"] = {
        key: "the project file" if Project.key_of(key) in settings.project_keys else "the command line"
        for key in ("tf", "mode", "python", "platform")
    }
    if settings.project_file:
        wanted["project"] = settings.project_file
        wanted["flags"] = _given_flags(settings)
    if settings.output:
        wanted["output"] = settings.output
    if settings.check is True and not settings.project_file:
        raise UsageError(
            "bad-arguments",
            "tfgpu-install lock --check: which lock? No file was given, and no project file applies here "
            "(tfgpu.toml or [tool.tfgpu] in pyproject.toml, in this directory or above).",
            [
                "Give the lock: tfgpu-install lock --check tfgpu-lock.linux-64.txt (or conda-lock.yml).",
                "Or run it in a project whose tfgpu.toml says what is locked (or pass --project FILE).",
            ],
        )
    reporter = None if settings.json else render().ConsoleReporter()
    try:
        if settings.check is True:
            found = check_project(
                mode=settings.selectors.mode,
                platforms=list(settings.platforms),
                output=settings.output,
                wanted=wanted,
                reporter=reporter,
            )
        else:
            assert isinstance(settings.check, str)  # lock --check FILE
            found = check_lock(settings.check, wanted, reporter=reporter)
    finally:
        if reporter is not None:
            reporter.close()
    return results.LockChecked(found)


def _given_flags(settings: Settings) -> list[str]:
    """What ``tfgpu-install lock`` needs besides the project file to write the lock this check
    wants: the selectors given on the command line, and ``--project`` where the directory walk
    would not find the file from here."""
    from pathlib import Path

    flags = []
    assert settings.project_file is not None  # asked only for the project's locks
    project = Path(settings.project_file)
    if project.parent not in (Path.cwd(), *Path.cwd().parents):
        flags += ["--project", str(project)]
    taken = set(settings.project_keys)
    for key, value in (
        ("tf", settings.selectors.tf),
        ("mode", settings.selectors.mode),
        ("python", settings.selectors.python),
    ):
        if value and key not in taken:
            flags += [f"--{key}", value]
    if "platforms" not in taken:
        flags += [flag for name in settings.platforms for flag in ("--platform", name)]
    return flags


def cmd_bundle(settings: Settings) -> results.Result:
    """``bundle``: a lock, its packages and the tool's own wheels in one directory (one platform)."""
    from tfgpu.lock import bundle

    needs_platforms(settings)
    assert settings.output is not None  # bundle's -o is required
    reporter = render().ConsoleReporter()
    try:
        built = bundle.build(
            mode=settings.selectors.mode,
            platforms=list(settings.platforms),
            selectors=settings.selectors,
            host=host_of(settings, artefact=True),
            output=settings.output,
            channels=settings.channels,
            channel_from=settings.channels_from,
            reporter=reporter,
        )
    finally:
        reporter.close()
    return results.Written(
        built.to_dict(),
        (
            f"Bundle ready: {built.bundle} ({built.files} files, {built.mb} MB). "
            f"Install it offline with {built.bundle}/install.sh PREFIX",
        ),
    )


def cmd_script(settings: Settings) -> results.Result:
    """``script --format F [-o PATH] [--from-lock LOCK]``: a provisioning artefact for the resolution
    (``tfgpu.export``), or for exactly a lock's pins."""
    from tfgpu import export

    if settings.format in export.DIRECTORY_FORMATS and not settings.output:
        raise UsageError(
            "missing-output",
            f"The {settings.format} export is a directory of files "
            f"({export.DIRECTORY_FORMATS[settings.format]}): say where with -o DIR.",
            [f"tfgpu-install script --format {settings.format} -o ./tf-{settings.format}"],
        )
    pins = None
    from tfgpu.project import Project

    if settings.platforms and not settings.from_lock and Project.key_of("platform") not in settings.project_keys:
        # A project file's platforms are for `lock`; typed here, --platform would be ignored silently.
        raise UsageError(
            "bad-arguments",
            f"script --platform {settings.platforms[0]}: --platform chooses which of a lock's platforms "
            "to export, and no --from-lock was given.",
            [
                "Export a lock: tfgpu-install script --from-lock LOCK --platform PLAT --format ...",
                "Or describe the target machine: --os linux --arch x86_64 (or aarch64).",
            ],
        )
    if settings.from_lock and settings.channels:
        # A lock's conda packages are installed by the URLs it recorded: a channel would change nothing.
        raise UsageError(
            "conflicting-options",
            f"script --channel {settings.channels[0]}: --channel does not go with --from-lock: the export "
            "installs the lock's packages by the URLs it recorded, from no channel.",
            [
                "Drop --channel.",
                "Or lock from the channel you want (tfgpu-install lock --channel URL ...) and export that lock.",
            ],
        )
    if settings.from_lock:  # the lock decides the target and every pin (tfgpu.lock.for_export)
        from tfgpu import lock

        resolution, pins = lock.for_export(settings.from_lock, settings.selectors, settings.platforms)
    else:
        from tfgpu.export.target import export_resolution

        resolution = with_channels(
            settings, export_resolution(settings.selectors), export=True
        )  # never this machine's facts
    if resolution.two_stacks:
        from tfgpu.resolver.coplanned import refuse_two_stacks

        refuse_two_stacks(resolution, "script")
    assert settings.format is not None  # script's --format is required
    made = export.render(resolution, settings.format, pins=pins)
    if settings.output:
        written = export.write(made, settings.output, force=settings.force)
        return results.Exported(made, resolution, settings.format, settings.output, tuple(written))
    if settings.json:
        return results.Exported(made, resolution, settings.format)
    return results.Text(made.main.content)


def _which(settings: Settings, purpose: str):
    """The env the command means (``tfgpu.envs.which``), said on stderr when the user did not type it."""
    from tfgpu.envs.which import which_env

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
        from tfgpu.doctor.logs import match_log, read_log

        content, cut = read_log(settings.log)
        return results.LogMatches(settings.log, match_log(content), cut)
    from tfgpu.doctor import run_doctor

    target = _which(settings, "doctor")
    report = run_doctor(root=target.prefix if target else None, python=target.interpreter if target else None)
    return results.Doctored(report, target.to_dict() if target else None)


def cmd_verify(settings: Settings) -> results.Result:
    from tfgpu.verify import failure, run_verify

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
        from tfgpu.verify.frameworks import frameworks_failure, frameworks_of, run_frameworks
        from tfgpu.verify.origins import annotate

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
        from tfgpu.verify import multiworker_failure, run_multiworker

        if not settings.json:
            note(f"{settings.workers} workers of {prefix}/bin/python, one MultiWorkerMirroredStrategy step…")
        report = run_multiworker(prefix, settings.workers)
        if not report.get("ok"):
            if not settings.json:
                text(results.Verified(report, multiworker=True, failing=True))
            raise multiworker_failure(report | {"which_env": chosen})
        return results.Verified(report, multiworker=True, which_env=chosen)
    from tfgpu.cli.endings import before_the_check
    from tfgpu.envs.location import safe_label
    from tfgpu.process.runner import Runner

    before_the_check(settings, prefix, chosen)
    runner = Runner.for_operation(f"verify-{safe_label(prefix.name)}")
    report = run_verify(prefix, bench=settings.bench, runner=runner)
    if not report.get("ok"):
        if not settings.json:
            text(results.Verified(report, failing=True))
        raise failure(report | {"which_env": chosen})
    return results.Verified(report, which_env=chosen)


def needs_platforms(settings: Settings) -> None:
    if not settings.platforms:
        raise UsageError(
            "bad-arguments",
            f"tfgpu-install {settings.command}: say which platforms with --platform "
            "(e.g. --platform linux-64), or list them in the project file (platforms = [...]).",
            [f"tfgpu-install {settings.command} --platform linux-64 ..."],
        )


def cmd_list(settings: Settings) -> results.Result:
    """``list``: the envs tfgpu-install built, and what interrupted removes left (``tfgpu.cli.envs``)."""
    from tfgpu.cli.envs import cmd_list as listed

    return listed(settings)


def cmd_completion(settings: Settings) -> results.Result:
    """``completion SHELL``: the completion script, generated from the parser."""
    from tfgpu.cli.completion import script

    assert settings.shell is not None  # completion's SHELL is positional
    return results.Text(script(settings.shell))


def cmd_run(settings: Settings) -> results.Result:
    from tfgpu.cli.enter import cmd_run as run

    return run(settings)


def cmd_activate(settings: Settings) -> results.Result:
    from tfgpu.cli.enter import cmd_activate as activate

    return activate(settings)


def cmd_shell(settings: Settings) -> results.Result:
    from tfgpu.cli.enter import cmd_shell as shell

    return shell(settings)


def cmd_repair(settings: Settings) -> results.Result:
    from tfgpu.cli.repair import cmd_repair as run

    return run(settings)


def cmd_cache(settings: Settings) -> results.Result:
    """``cache info|prune|clean``: the tool's cache by kind, or what pruning or cleaning freed."""
    from tfgpu.cache import operate

    return results.CacheReport(operate(settings.cache_action or "info", dry_run=settings.dry_run))


HANDLERS = {
    "create": cmd_create,
    "plan": cmd_plan,
    "lock": cmd_lock,
    "bundle": cmd_bundle,
    "script": cmd_script,
    "doctor": cmd_doctor,
    "verify": cmd_verify,
    "matrix": cmd_matrix,
    "update-data": cmd_update_data,
    "remove": cmd_remove,
    "repair": cmd_repair,
    "list": cmd_list,
    "completion": cmd_completion,
    "cache": cmd_cache,
    "run": cmd_run,
    "activate": cmd_activate,
    "shell": cmd_shell,
}
