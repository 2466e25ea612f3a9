"""The command line: parse, call the core, render, return an exit code.

This is the only module that parses arguments or decides exit codes; rendering lives in
``tfgpu.render``. Exit codes (contract): 0 success; 1 the operation failed; 2 malformed input;
3 well-formed but impossible.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from tfgpu import __version__
from tfgpu.errors import ImpossibleError, OperationError, TfgpuError, UsageError

COMMANDS = ("create", "plan", "lock", "bundle", "script", "doctor", "verify", "matrix", "remove", "update-data")
ENGINES = {"uv": "pip", "pip": "pip", "rattler": "conda", "conda": "conda", "mamba": "conda",
           "micromamba": "conda"}


class _Parser(argparse.ArgumentParser):
    """argparse that raises a UsageError (exit 2, JSON-renderable) instead of exiting."""

    def error(self, message: str):  # noqa: D102 - argparse hook
        raise UsageError("bad-arguments", f"{self.prog}: {message}.",
                         [f"Run `{self.prog} --help` for the accepted options."])


def _selectors(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("what to resolve (values describe the target machine)")
    group.add_argument("--tf", metavar="SPEC", help="2.13, 2.13.1, latest, or a range such as '>=2.15,<2.18' "
                                                     "(default: the newest that fits)")
    group.add_argument("--mode", help="pip, conda or system (default: pip)")
    group.add_argument("--python", metavar="X.Y", help="Python version (default: per mode)")
    group.add_argument("--os", help="linux, wsl2, windows or macos (default: this machine's)")
    group.add_argument("--arch", help="x86_64 or aarch64 (default: this machine's)")
    group.add_argument("--driver", metavar="VER", help="NVIDIA driver version, e.g. 535.104.05 (default: detected)")
    group.add_argument("--gpu-cc", metavar="X.Y", help="GPU compute capability, e.g. 8.6 (default: detected)")
    group.add_argument("--pre", action="store_true", help="let latest and ranges choose pre-releases (an exact "
                                                          "one such as 2.22.0rc0 always resolves)")
    group.add_argument("--no-detect", action="store_true", help="do not look at this machine at all")
    parser.add_argument("--json", action="store_true", help="print one JSON document on stdout")


def _env_location(parser: argparse.ArgumentParser, required: bool = False) -> None:
    where = parser.add_mutually_exclusive_group(required=required)
    where.add_argument("--name", "-n", help="environment name")
    where.add_argument("--prefix", "-p", help="environment path")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tfgpu-install",
                     description="Get TensorFlow running on NVIDIA GPUs. The bare form is `create`: "
                                 "tfgpu-install --tf 2.13 --mode conda")
    parser.add_argument("--version", action="version", version=f"tfgpu-install {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    create = sub.add_parser("create", help="build an environment (the default command)")
    _selectors(create)
    _env_location(create)
    create.add_argument("--engine", help="uv, pip, rattler, conda, mamba or micromamba")
    create.add_argument("--channel", action="append", metavar="URL", help="conda channel (repeatable)")
    create.add_argument("--tf-source", choices=("pypi", "conda-forge"), help="where TensorFlow comes from")
    create.add_argument("--find-links", metavar="DIR", help="local wheel directory")
    create.add_argument("--offline", action="store_true", help="use no network")
    source = create.add_mutually_exclusive_group()
    source.add_argument("--from-lock", metavar="FILE")
    source.add_argument("--from-bundle", metavar="DIR")
    for flag, text in (("--jupyter", "register a Jupyter kernel"), ("--dry-run", "print the plan, touch nothing"),
                       ("--force", "replace an existing environment"), ("--yes", "do not ask"),
                       ("--no-verify", "skip the GPU check at the end")):
        create.add_argument(flag, action="store_true", help=text)

    plan = sub.add_parser("plan", help="print the resolution: versions, packages, reasons")
    _selectors(plan)

    for name, text in (("lock", "write a lockfile for a team"), ("bundle", "write an offline bundle")):
        cmd = sub.add_parser(name, help=text)
        _selectors(cmd)
        cmd.add_argument("--platform", action="append", required=True, metavar="PLAT")
        cmd.add_argument("-o", "--output", required=(name == "bundle"), metavar="PATH")
        if name == "lock":
            cmd.add_argument("--allow-cpu", action="store_true")
        cmd.add_argument("--channel", action="append", metavar="URL", help="conda channel (repeatable; "
                         "--mode conda; default conda-forge)")

    script = sub.add_parser("script", help="export a provisioning script")
    _selectors(script)
    script.add_argument("--format", required=True, choices=("bash", "dockerfile", "ansible", "cloud-init"))
    script.add_argument("-o", "--output", metavar="FILE")

    doctor = sub.add_parser("doctor", help="explain what is broken and how to fix it")
    where = doctor.add_mutually_exclusive_group()
    where.add_argument("--name", "-n")
    where.add_argument("--prefix", "-p")
    where.add_argument("--python", metavar="PATH")
    doctor.add_argument("--log", metavar="FILE")
    doctor.add_argument("--json", action="store_true")

    verify = sub.add_parser("verify", help="prove the GPU works inside an environment")
    _env_location(verify)
    verify.add_argument("--bench", action="store_true")
    verify.add_argument("--json", action="store_true")

    matrix = sub.add_parser("matrix", help="every TensorFlow release and what it needs")
    matrix.add_argument("--all", action="store_true", help="every patch release, not only the newest per series")
    matrix.add_argument("--json", action="store_true")

    update = sub.add_parser("update-data", help="fetch TensorFlow releases published since this tool's data")
    update.add_argument("--offline", action="store_true", help="use only cached answers; never fetch")
    update.add_argument("--index", metavar="URL", help="PyPI JSON API root (default: https://pypi.org/pypi)")
    update.add_argument("--json", action="store_true")

    remove = sub.add_parser("remove", help="delete an environment tfgpu-install created")
    _env_location(remove, required=True)
    remove.add_argument("--json", action="store_true")
    return parser


def _with_default_command(argv: list[str]) -> list[str]:
    """``tfgpu-install --tf 2.13 --mode conda`` means ``tfgpu-install create --tf 2.13 --mode conda``."""
    if not argv or argv == ["--json"]:
        raise UsageError("missing-command", "Say what to do: no command and no --tf were given.",
                         ["`tfgpu-install plan` shows what this machine can run.",
                          "`tfgpu-install --tf 2.21 --mode pip --name tf2.21` builds an environment.",
                          "`tfgpu-install --help` lists every command."])
    if argv[0] in COMMANDS or argv[0] in ("-h", "--help", "--version"):
        return argv
    if not argv[0].startswith("-"):
        raise UsageError("unknown-command", f"{argv[0]!r} is not a tfgpu-install command.",
                         [f"Commands: {', '.join(COMMANDS)}; or the bare form `tfgpu-install --tf 2.13 --mode conda`."])
    return ["create", *argv]


def _check_create(args: argparse.Namespace) -> None:
    """Option combinations argparse cannot express."""
    mode = (args.mode or "pip").lower()
    if args.engine is not None:
        if args.engine not in ENGINES:
            raise UsageError("bad-option-value", f"--engine {args.engine!r} is not one of: {', '.join(ENGINES)}.",
                             ["Use --engine uv or pip for --mode pip, rattler/conda/mamba/micromamba for --mode conda."])
        if ENGINES[args.engine] != mode and mode != "system":
            raise UsageError("conflicting-options", f"--engine {args.engine} drives {ENGINES[args.engine]} "
                             f"environments, but --mode is {mode}.",
                             [f"Use --mode {ENGINES[args.engine]}, or drop --engine."])
    for flag, value in (("--channel", args.channel), ("--tf-source", args.tf_source)):
        if value and mode != "conda":
            raise UsageError("conflicting-options", f"{flag} applies to --mode conda only (got --mode {mode}).",
                             [f"Add --mode conda, or drop {flag}."])
    if args.name is not None:
        from tfgpu.envs.location import check_name

        check_name(args.name)


def _resolve(args: argparse.Namespace):
    from tfgpu.resolver import make_request, resolve

    request = make_request(tf=args.tf, mode=args.mode, python=args.python, os=args.os, arch=args.arch,
                           driver=args.driver, gpu_cc=args.gpu_cc, pre=getattr(args, "pre", False))
    host = None
    if not args.no_detect:
        from tfgpu.detect import probe

        host = probe()
    return resolve(request, host), host


def _render():
    from tfgpu import (
        render,  # rich is imported only when something is rendered for a person
    )

    return render


def _emit(args: argparse.Namespace, document: dict, render) -> None:
    if getattr(args, "json", False):
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        render()


def run(args: argparse.Namespace) -> int:
    """Dispatch a parsed command; raises TfgpuError on failure."""
    command = args.command or "create"
    if command == "matrix":
        from tfgpu.resolver.matrix import matrix

        from tfgpu.resolver.overlay import data_status, describe_age

        rows, status = matrix(all_releases=args.all), data_status()
        _emit(args, {"releases": rows, "data": status},
              lambda: (_render().matrix(rows), _render().note(describe_age(status) + "; `tfgpu-install update-data` "
                                                               "fetches newer releases.")))
        return 0
    if command == "update-data":
        from tfgpu.update import update_data

        report = update_data(offline=args.offline, index_url=args.index)
        _emit(args, report, lambda: _render().note(report["summary"]))
        return 0
    if command == "create":
        _check_create(args)
        return _create(args)
    if command == "verify":
        return _verify(args)
    if command == "doctor":
        return _doctor(args)
    if command == "remove":
        from tfgpu.ops import remove

        removed = remove(args.name, args.prefix)
        _emit(args, removed, lambda: _render().removed(removed["removed"], removed["recovered"]))
        return 0
    if command == "plan":
        resolution, host = _resolve(args)
        document = resolution.to_dict() | {"host": host.to_dict() if host else None}
        _emit(args, document, lambda: _render().plan(resolution, host))
        return 0
    if command == "lock":
        return _lock(args)
    if command == "bundle":
        return _bundle(args)
    if command == "script":
        return _script(args)
    raise AssertionError(command)


def _not_yet(args: argparse.Namespace, what: str, issue: int) -> int:
    _resolve(args)  # a wrong version or an impossible target still gets its own error first
    raise OperationError(
        "not-implemented", f"`{what}` is not built yet (issue #{issue}); nothing was done.",
        ["`tfgpu-install plan` with the same options prints the resolution it will use."])


# --- lock / bundle / from-lock (issue 5) -------------------------------------------------------

def _lock(args: argparse.Namespace) -> int:
    """``lock``: one hashed lock per --platform (see tfgpu/lock/__init__.py for the file names)."""
    from tfgpu.lock import write_locks
    from tfgpu.lock.targets import lock_targets

    def resolve_for(os_name: str, arch: str):
        return _resolve(argparse.Namespace(**{**vars(args), "os": os_name, "arch": arch}))[0]

    targets = lock_targets(args.platform, os=args.os, arch=args.arch, allow_cpu=args.allow_cpu,
                           resolve=resolve_for)
    mode = (args.mode or "pip").lower()
    if args.channel and mode != "conda":
        raise UsageError("conflicting-options", f"--channel applies to --mode conda only (got --mode {mode}).",
                         ["Add --mode conda, or drop --channel."])
    if mode == "conda":
        return _lock_conda(args, targets)
    reporter = _render().ConsoleReporter()
    try:
        written = write_locks(mode, targets, args.output, reporter)
    finally:
        reporter.close()
    document = {"locks": [item.to_dict() for item in written]}

    def show() -> None:
        for item in written:
            kind = "CPU-only" if item.meta["cpu_only"] else f"CUDA {item.meta['resolution']['cuda']}"
            _render().note(f"{item.platform}: {item.path} ({len(item.pins)} packages, TF "
                           f"{item.meta['resolution']['tensorflow']}, {kind}, Python {item.meta['python']}); "
                           f"PEP 751: {item.pylock.name}")
    _emit(args, document, show)
    return 0


def _lock_conda(args: argparse.Namespace, targets) -> int:
    """``lock --mode conda``: one conda-lock.yml for every --platform."""
    from tfgpu.engines.rattler import channel_urls, check_channels
    from tfgpu.lock import conda_lock, tools

    channels = channel_urls(tuple(args.channel or ()))
    check_channels(channels)
    runner, uv, _ = tools("lock")
    from tfgpu.paths import cache_root

    reporter = _render().ConsoleReporter()
    try:
        summary = conda_lock.write(targets, args.output, channels=channels, runner=runner, uv=uv, cache=cache_root(),
                                   reporter=reporter)
    finally:
        reporter.close()
    _emit(args, {"lock": summary}, lambda: _render().note(
        f"{summary['path']}: {summary['packages']} packages for {', '.join(summary['platforms'])} "
        f"(install: tfgpu-install create --from-lock {summary['path']} --name N; conda-lock reads it too)"))
    return 0


def _bundle(args: argparse.Namespace) -> int:
    """``bundle``: a lock, its wheels and the tool's own wheels in one directory (one platform)."""
    from tfgpu.lock.bundle import build_bundle
    from tfgpu.lock.targets import lock_targets

    if len(set(args.platform)) != 1:
        raise UsageError("conflicting-options", "A bundle is for one platform; several --platform were given.",
                         ["Build one bundle per platform, each with its own -o DIR."])
    mode = (args.mode or "pip").lower()
    if mode not in ("pip", "conda"):
        raise UsageError("mode-not-bundlable", f"--mode {mode} cannot be bundled: system mode installs vendor "
                         "archives, not packages.", ["Use --mode pip or --mode conda."])
    if args.channel and mode != "conda":
        raise UsageError("conflicting-options", f"--channel applies to --mode conda only (got --mode {mode}).",
                         ["Add --mode conda, or drop --channel."])

    def resolve_for(os_name: str, arch: str):
        return _resolve(argparse.Namespace(**{**vars(args), "os": os_name, "arch": arch}))[0]

    [(platform, resolution, _)] = lock_targets(args.platform, os=args.os, arch=args.arch, allow_cpu=False,
                                               resolve=resolve_for)
    reporter = _render().ConsoleReporter()
    try:
        if mode == "conda":
            from tfgpu.engines.rattler import channel_urls, check_channels
            from tfgpu.lock.bundle_conda import build_conda_bundle

            channels = channel_urls(tuple(args.channel or ()))
            check_channels(channels)
            summary = build_conda_bundle(resolution, platform, Path(args.output), channels=channels,
                                         reporter=reporter)
        else:
            summary = build_bundle(resolution, platform, Path(args.output), reporter=reporter)
    finally:
        reporter.close()
    _emit(args, summary, lambda: _render().note(
        f"Bundle ready: {summary['bundle']} ({summary['files']} files, {summary['mb']} MB). Install it offline "
        f"with {summary['bundle']}/install.sh PREFIX"))
    return 0


def _create_from(args: argparse.Namespace) -> int:
    """``create --from-lock FILE`` / ``create --from-bundle DIR``: exactly what the lock pins."""
    from tfgpu.lock.install import prepare
    from tfgpu.ops import create

    selectors = {key: getattr(args, key) for key in ("tf", "mode", "python", "os", "arch", "driver", "gpu_cc")}
    reporter = None if args.dry_run else _render().ConsoleReporter()
    try:
        resolution, options, source, lock = prepare(selectors, _options(args), from_lock=args.from_lock,
                                                    from_bundle=args.from_bundle, reporter=reporter)
        name = args.name or (None if args.prefix else default_name(resolution.tensorflow))
        result = create(resolution, name=name, prefix=args.prefix, options=options, source=source,
                        reporter=reporter, dry_run=args.dry_run)
    finally:
        if reporter is not None:
            reporter.close()
    source = {"lock": str(lock.path), "lock_sha256": lock.meta["sha256"], "bundle": args.from_bundle}
    if args.dry_run:
        document = resolution.to_dict() | source | {"dry_run": True, "prefix": str(result.location.prefix),
                                                    "steps": [step.to_dict() for step in result.steps]}
        _emit(args, document, lambda: _render().dry_run(resolution, None, result))
        return 0
    document = {"prefix": str(result.location.prefix), "tensorflow": resolution.tensorflow,
                "python": resolution.python, "installed": result.outcome.installed, "log": str(result.log_path),
                "notes": result.notes, "verify": result.verify} | source
    if result.verify is not None and not result.verify.get("ok"):
        from tfgpu.verify import failure

        error = failure(result.verify)
        error.message = f"The environment is built at {result.location.prefix}, but: {error.message}"
        error.details = document
        raise error
    _emit(args, document, lambda: _render().created(result, resolution))
    return 0


# --- script (issue 6) --------------------------------------------------------------------------

def _script(args: argparse.Namespace) -> int:
    """``script --format F [-o PATH]``: a provisioning artefact for the resolution (tfgpu.export)."""
    from tfgpu import export

    if args.format in ("ansible",) and not args.output:
        raise UsageError("missing-output", "The ansible export is a directory (playbook.yml, inventory.example.ini, "
                         "README.md, files/): say where with -o DIR.", ["tfgpu-install script --format ansible "
                                                                        "-o ./tf-playbook"])
    resolution, _ = _resolve(args)
    result = export.render(resolution, args.format)
    if args.output:
        written = export.write(result, args.output)
        document = result.to_dict() | {"output": args.output, "written": [str(path) for path in written]}
        _emit(args, document, lambda: _render().note(
            f"Wrote {', '.join(str(path) for path in written)} ({args.format}, TensorFlow {resolution.tensorflow}, "
            f"{resolution.mode} mode)."))
        return 0
    if args.json:
        document = result.to_dict()
        document["files"] = [entry | {"content": item.content} for entry, item in zip(document["files"], result.files)]
        _emit(args, document, lambda: None)
    else:
        sys.stdout.write(result.main.content)
    return 0


def _options(args: argparse.Namespace):
    from tfgpu.backends.base import Options

    find_links = args.find_links
    if find_links and not re.match(r"https?://", find_links):
        if not Path(find_links).is_dir():
            raise UsageError("bad-find-links", f"--find-links {find_links!r} is not a directory.",
                             ["Give a directory of wheels, e.g. one filled by `pip download -d DIR ...`."])
        find_links = str(Path(find_links).absolute())
    return Options(engine=args.engine, find_links=find_links,
                   offline=args.offline, jupyter=args.jupyter, force=args.force, verify=not args.no_verify,
                   channels=tuple(args.channel or ()), tf_source=args.tf_source or "pypi")


def _create(args: argparse.Namespace) -> int:
    from tfgpu.ops import create as create_env

    if args.from_lock or args.from_bundle:
        return _create_from(args)
    options = _options(args)
    resolution, host = _resolve(args)
    name = args.name or (None if args.prefix else default_name(resolution.tensorflow))
    if args.dry_run:
        try:
            result = create_env(resolution, name=name, prefix=args.prefix, options=options, reporter=None,
                                dry_run=True)
        except OperationError as error:
            if error.code != "not-implemented":
                raise
            note = f"Dry run: nothing was changed. {error.message.replace('; nothing was done.', '')}: this is the plan it will follow."
            document = resolution.to_dict() | {"host": host.to_dict() if host else None, "dry_run": True, "note": note}
            _emit(args, document, lambda: _render().plan(resolution, host, note))
            return 0
        document = resolution.to_dict() | {"dry_run": True, "prefix": str(result.location.prefix),
                                           "steps": [step.to_dict() for step in result.steps]}
        _emit(args, document, lambda: _render().dry_run(resolution, host, result))
        return 0
    render = _render()
    reporter = render.ConsoleReporter()
    try:
        result = create_env(resolution, name=name, prefix=args.prefix, options=options, reporter=reporter)
    finally:
        reporter.close()
    document = {"prefix": str(result.location.prefix), "tensorflow": resolution.tensorflow,
                "python": resolution.python, "installed": result.outcome.installed, "log": str(result.log_path),
                "notes": result.notes, "verify": result.verify}
    if result.verify is not None and not result.verify.get("ok"):
        from tfgpu.verify import failure

        error = failure(result.verify)
        error.message = f"The environment is built at {result.location.prefix}, but: {error.message}"
        error.details = document
        raise error
    _emit(args, document, lambda: render.created(result, resolution))
    return 0


def _doctor(args: argparse.Namespace) -> int:
    if args.log is not None:
        from tfgpu.doctor.logs import LOG_LIMIT, match_log, read_log

        text, cut = read_log(args.log)
        matches = match_log(text)
        document = {"log": args.log, "matches": [m.to_dict() for m in matches],
                    "ok": not any(m.severity == "fail" for m in matches), "truncated": cut}

        def show() -> None:
            if cut:
                _render().note(f"Only the first {LOG_LIMIT >> 20} MiB of {args.log} were read.")
            _render().log_matches(matches)
        _emit(args, document, show)
        return 0 if document["ok"] else 1
    from tfgpu.doctor import run_doctor
    from tfgpu.envs.location import prefix_for

    root = prefix_for(args.name, args.prefix)[0] if (args.name or args.prefix) else None
    report = run_doctor(root=root, python=Path(args.python) if args.python else None)
    _emit(args, report.to_dict(), lambda: _render().doctor(report))
    return 1 if report.failed else 0


def default_name(tensorflow: str) -> str:
    """``2.13.1`` -> ``tf2.13``: one env per series unless told otherwise."""
    major, minor = tensorflow.split(".")[:2]
    return f"tf{major}.{minor}"


def _verify(args: argparse.Namespace) -> int:
    from tfgpu.envs.location import prefix_for
    from tfgpu.verify import failure, run_verify

    if not (args.name or args.prefix):
        raise UsageError("missing-location", "Say which environment to verify: --name N or --prefix P.",
                         ["`tfgpu-install verify --name tf2.21`"])
    prefix, _ = prefix_for(args.name, args.prefix)
    if not prefix.is_dir():
        raise ImpossibleError("no-such-env", f"There is no environment at {prefix}.",
                              ["Give the env's path with --prefix, or create it first."])
    if not args.json:
        _render().note(f"Checking the GPU with {prefix}/bin/python (imports TensorFlow)…")
    report = run_verify(prefix, bench=args.bench)
    if not report.get("ok"):
        error = failure(report)
        error.details = report
        if not args.json:
            _render().verify(report)
        raise error
    _emit(args, report, lambda: _render().verify(report))
    return 0


def _tolerant_streams() -> None:
    """A terminal or pipe in any locale: what it cannot show becomes a replacement character."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="replace")
        except (AttributeError, ValueError):
            pass


def main(argv: list[str] | None = None) -> int:
    """Run the tool; returns the exit code."""
    from tfgpu.proc import install_signal_handlers

    _tolerant_streams()
    install_signal_handlers()
    argv = list(sys.argv[1:] if argv is None else argv)
    want_json = "--json" in argv
    try:
        args = build_parser().parse_args(_with_default_command(argv))
        return run(args)
    except TfgpuError as error:
        if want_json:
            sys.stdout.write(json.dumps(error.to_dict(), indent=2) + "\n")
        else:
            _render().error(error)
        return error.exit_code
    except SystemExit as done:  # --help and --version
        return int(done.code or 0)
    except KeyboardInterrupt as stop:  # Ctrl-C, and SIGTERM/SIGHUP (tfgpu.proc.Interrupted)
        signum = getattr(stop, "signum", 2)
        sys.stderr.write(f"Interrupted ({'SIGINT' if signum == 2 else stop}): nothing was left half-built.\n")
        return 128 + signum


def entry() -> None:
    """Console-script entry point."""
    sys.exit(main())
