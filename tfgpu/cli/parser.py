"""The command line's grammar: every command, every option, and its help text.

A test walks this parser and fails on any option without help. Values are parsed and checked by
the core (``tfgpu.resolver.request``, ``tfgpu.installers.options``), so an error names the flag and
the accepted values with the project's own exit codes, not argparse's.
"""

from __future__ import annotations

import argparse

from tfgpu import __version__
from tfgpu.errors import UsageError
from tfgpu.paths import path_option as _path

COMMANDS = ("create", "plan", "lock", "bundle", "script", "doctor", "verify", "matrix", "update-data", "remove", "repair",
            "list", "completion")
SHELLS = ("bash", "zsh", "fish")
PLATFORM_HELP = ("conda-style platform name: linux-64 (Linux x86_64, WSL2 included), linux-aarch64, win-64, "
                 "osx-arm64, osx-64; repeatable")


INTERPRETER_COMMANDS = ("doctor", "repair")
"""The commands that take an interpreter path (``--interpreter``); ``--python`` is a version elsewhere."""


class Parser(argparse.ArgumentParser):
    """argparse that raises a UsageError (exit 2, JSON-renderable) instead of exiting."""

    def parse_known_args(self, args=None, namespace=None):  # noqa: D102 - kept for error()
        self.argv = list(args) if args is not None else []
        return super().parse_known_args(args, namespace)

    def error(self, message: str):  # noqa: D102 - argparse hook
        argv = getattr(self, "argv", [])
        if (argv and argv[0] in INTERPRETER_COMMANDS and message.startswith("unrecognized arguments")
                and any(word == "--python" or word.startswith("--python=") for word in argv)):
            # The one option whose meaning changed: say where the old spelling went.
            raise UsageError("bad-arguments", f"tfgpu-install {argv[0]}: --python is a Python version elsewhere; give "
                             "an interpreter with --interpreter PATH.",
                             [f"`tfgpu-install {argv[0]} --interpreter ./env/bin/python`"])
        raise UsageError("bad-arguments", f"{self.prog}: {message}.",
                         [f"Run `{self.prog} --help` for the accepted options."])


def _selectors(parser: argparse.ArgumentParser, modes: str = "pip, conda or system") -> None:
    group = parser.add_argument_group("what to resolve (values describe the target machine)")
    group.add_argument("--tf", metavar="SPEC", help="2.13, 2.13.1, latest, or a range such as '>=2.15,<2.18' "
                                                     "(default: the newest that fits)")
    group.add_argument("--mode", help=f"{modes} (default: pip)")
    group.add_argument("--python", metavar="X.Y", help="Python version (default: per mode)")
    group.add_argument("--os", help="linux, wsl2, windows or macos (default: this machine's)")
    group.add_argument("--arch", help="x86_64 or aarch64 (default: this machine's)")
    group.add_argument("--driver", metavar="VER", help="NVIDIA driver version, e.g. 535.104.05 (default: detected)")
    group.add_argument("--gpu-cc", metavar="X.Y", help="GPU compute capability, e.g. 8.6 (default: detected)")
    group.add_argument("--pre", action="store_true", help="let latest and ranges choose pre-releases (an exact "
                                                          "one such as 2.22.0rc0 always resolves)")
    group.add_argument("--no-detect", action="store_true", help="do not look at this machine at all")
    project = group.add_mutually_exclusive_group()
    project.add_argument("--project", metavar="FILE", type=_path("--project"), help="read the target from this tfgpu.toml or pyproject.toml "
                         "(default: the nearest one in this directory or a parent; flags override it)")
    project.add_argument("--no-project", action="store_true", help="ignore any project file")
    _json(parser)


def insecure_host(parser: argparse.ArgumentParser) -> None:
    """``--insecure-host``: where the tool fetches, the one way to allow plain HTTP (``tfgpu.urls``)."""
    parser.add_argument("--insecure-host", action="append", metavar="HOST",
                        help="allow plain HTTP to HOST, loopback included (repeatable; also "
                             "TFGPU_INSECURE_HOSTS=a,b); everything else is fetched over HTTPS only")


def _json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON document on stdout, nothing else there")


def _env_location(parser: argparse.ArgumentParser, required: bool = False) -> argparse._MutuallyExclusiveGroup:
    where = parser.add_mutually_exclusive_group(required=required)
    where.add_argument("--name", "-n", help="environment name, in tfgpu-install's envs directory (conda mode: the "
                                            "conda installation's)")
    where.add_argument("--prefix", "-p", help="environment path")
    return where


def _create(sub) -> None:
    create = sub.add_parser("create", help="build an environment (the default command)")
    _selectors(create)
    _env_location(create)
    create.add_argument("--engine", help="uv or pip (pip mode); rattler (default), conda, mamba or micromamba "
                                         "(conda mode)")
    create.add_argument("--channel", action="append", metavar="URL", type=_path("--channel"),
                        help="conda channel: URL, name or local directory (repeatable; --mode conda; default "
                             "conda-forge)")
    create.add_argument("--tf-source", choices=("pypi", "conda-forge"),
                        help="conda mode: TensorFlow from PyPI (default) or conda-forge's CUDA build")
    create.add_argument("--find-links", metavar="DIR", type=_path("--find-links"),
                        help="a directory (or URL) of wheels to install from")
    insecure_host(create)
    create.add_argument("--offline", action="store_true",
                        help="use no network: --find-links, local channels and the caches only")
    source = create.add_mutually_exclusive_group()
    source.add_argument("--from-lock", metavar="FILE", type=_path("--from-lock"),
                        help="install exactly this lock (tfgpu-lock.*.txt or "
                                                            "conda-lock.yml), every hash checked first")
    source.add_argument("--from-bundle", metavar="DIR", type=_path("--from-bundle"),
                        help="install from an offline bundle made by "
                                                             "`tfgpu-install bundle`, every file checked first")
    for flag, text in (("--jupyter", "register a Jupyter kernel for the env"),
                       ("--dry-run", "print every step and command; change nothing"),
                       ("--force", "replace an existing env tfgpu-install built there (the old one stays until "
                                   "the new one is complete)"),
                       ("--yes", "accepted for scripts; create never asks a question"),
                       ("--no-verify", "skip the GPU check at the end")):
        create.add_argument(flag, action="store_true", help=text)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="tfgpu-install",
                    description="Get TensorFlow running on NVIDIA GPUs. The bare form is `create`: "
                                "tfgpu-install --tf 2.13 --mode conda")
    parser.add_argument("--version", action="version", version=f"tfgpu-install {__version__}",
                        help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    _create(sub)

    plan = sub.add_parser("plan", help="print the resolution: versions, packages, reasons")
    _selectors(plan)

    for name, text in (("lock", "write a lockfile for a team"), ("bundle", "write an offline bundle")):
        cmd = sub.add_parser(name, help=text)
        _selectors(cmd, modes="pip or conda")
        cmd.add_argument("--platform", action="append", metavar="PLAT",
                         help=PLATFORM_HELP + " (required unless the project file lists platforms)")
        cmd.add_argument("-o", "--output", required=(name == "bundle"), metavar="PATH", type=_path("-o"),
                         help="the bundle directory" if name == "bundle" else
                         "the lock file (several platforms: the platform goes before its extension)")
        if name == "lock":
            cmd.add_argument("--allow-cpu", action="store_true",
                             help="lock TensorFlow's CPU package for platforms with no GPU build (the lock says so)")
            cmd.add_argument("--check", metavar="FILE", type=_path("--check"),
                             help="write nothing: exit 0 if FILE is what its recorded inputs resolve to today, 1 "
                                  "with what changed (for CI)")
        cmd.add_argument("--channel", action="append", metavar="URL", type=_path("--channel"), help="conda channel (repeatable; "
                         "--mode conda; default conda-forge)")
        insecure_host(cmd)

    script = sub.add_parser("script", help="export a provisioning script")
    _selectors(script)
    script.add_argument("--format", required=True, choices=("bash", "dockerfile", "ansible", "cloud-init", "slurm", "kubernetes"),
                        help="what to write")
    script.add_argument("-o", "--output", metavar="PATH", type=_path("-o"), help="a file (a directory for ansible, slurm and kubernetes); default stdout")

    doctor = sub.add_parser("doctor", help="explain what is broken and how to fix it")
    where = _env_location(doctor)
    where.add_argument("--interpreter", metavar="PATH", type=_path("--interpreter"),
                       help="the environment of this Python interpreter")
    doctor.add_argument("--log", metavar="FILE", type=_path("--log"), help="match a TensorFlow log against known failures (- for stdin)")
    _json(doctor)

    verify = sub.add_parser("verify", help="prove the GPU works inside an environment")
    _env_location(verify)
    verify.add_argument("--bench", action="store_true", help="add CPU-vs-GPU numbers (synced, repeated, median)")
    verify.add_argument("--workers", type=int, metavar="N", help="instead: one MultiWorkerMirroredStrategy training "
                        "step across N local worker processes (one GPU each, N sharing one GPU, or the CPU)")
    _json(verify)

    matrix = sub.add_parser("matrix", help="every TensorFlow release and what it needs")
    matrix.add_argument("--all", action="store_true", help="every patch release, not only the newest per series")
    _json(matrix)

    update = sub.add_parser("update-data", help="fetch TensorFlow releases published since this tool's data")
    update.add_argument("--offline", action="store_true", help="use only cached answers; never fetch")
    update.add_argument("--index", metavar="URL", help="PyPI JSON API root (default: https://pypi.org/pypi)")
    insecure_host(update)
    _json(update)

    remove = sub.add_parser("remove", help="delete an environment tfgpu-install created")
    _env_location(remove, required=True)
    _json(remove)

    from tfgpu.cli.repair import add_parser as add_repair

    add_repair(sub)
    insecure_host(sub.choices["repair"])

    listing = sub.add_parser("list", help="the environments tfgpu-install built, with TF, CUDA, mode and health")
    _json(listing)

    completion = sub.add_parser("completion", help="print a shell completion script: eval \"$(tfgpu-install "
                                "completion bash)\"")
    completion.add_argument("shell", choices=SHELLS, help="bash, zsh or fish")
    return parser


def with_default_command(argv: list[str]) -> list[str]:
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
