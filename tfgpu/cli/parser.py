"""The command line's grammar: every command and the options it takes (``tfgpu.cli.options``).

A test walks this parser and fails on any option without help. The parsed namespace never leaves
``tfgpu.cli``: ``tfgpu.cli.inputs`` turns it into the one frozen ``tfgpu.settings.Settings``.
"""

from __future__ import annotations

import argparse

from tfgpu import __version__
from tfgpu.cli.options import add, add_exclusive
from tfgpu.errors import UsageError

COMMANDS = (
    "create",
    "plan",
    "lock",
    "bundle",
    "script",
    "doctor",
    "verify",
    "matrix",
    "update-data",
    "remove",
    "repair",
    "list",
    "completion",
)
SHELLS = ("bash", "zsh", "fish")


INTERPRETER_COMMANDS = ("doctor", "repair")
"""The commands that take an interpreter path (``--interpreter``); ``--python`` is a version elsewhere."""


class Parser(argparse.ArgumentParser):
    """argparse that raises a UsageError (exit 2, JSON-renderable) instead of exiting. Options are
    spelled whole: an abbreviation (``--js``) would be accepted by argparse but not seen by the
    front door's early check for ``--json``, so a failure would come back as text."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **{"allow_abbrev": False} | kwargs)

    def parse_known_args(self, args=None, namespace=None):  # noqa: D102 - kept for error()
        self.argv = list(args) if args is not None else []
        return super().parse_known_args(args, namespace)

    def error(self, message: str):  # noqa: D102 - argparse hook
        argv = getattr(self, "argv", [])
        if (
            argv
            and argv[0] in INTERPRETER_COMMANDS
            and message.startswith("unrecognized arguments")
            and any(word == "--python" or word.startswith("--python=") for word in argv)
        ):
            # The one option whose meaning changed: say where the old spelling went.
            raise UsageError(
                "bad-arguments",
                f"tfgpu-install {argv[0]}: --python is a Python version elsewhere; give "
                "an interpreter with --interpreter PATH.",
                [f"`tfgpu-install {argv[0]} --interpreter ./env/bin/python`"],
            )
        raise UsageError(
            "bad-arguments", f"{self.prog}: {message}.", [f"Run `{self.prog} --help` for the accepted options."]
        )


def _selectors(parser: argparse.ArgumentParser, modes: str = "pip, conda or system") -> None:
    group = parser.add_argument_group("what to resolve (values describe the target machine)")
    add(group, "tf", "mode", "python", fill={"modes": modes})
    add(group, "os", "arch", "driver", "gpu_cc", "pre", "tf_source", "no_detect")
    add_exclusive(group, "project", "no_project")
    add(parser, "json")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="tfgpu-install",
        description="Get TensorFlow running on NVIDIA GPUs. The bare form is `create`: "
        "tfgpu-install --tf 2.13 --mode conda",
    )
    parser.add_argument(
        "--version", action="version", version=f"tfgpu-install {__version__}", help="print the version and exit"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)

    create = sub.add_parser("create", help="build an environment (the default command)")
    _selectors(create)
    add_exclusive(create, "name", "prefix")
    add(create, "engine", "channel", "find_links", "insecure_host", "offline")
    add_exclusive(create, "from_lock", "from_bundle")
    add(create, "jupyter", "dry_run", "force", "yes", "no_verify")

    _selectors(sub.add_parser("plan", help="print the resolution: versions, packages, reasons"))

    lock = sub.add_parser("lock", help="write a lockfile for a team")
    _selectors(lock, modes="pip or conda")
    add(lock, "platform", "output", "allow_cpu", "check", "channel", "insecure_host")
    bundle = sub.add_parser("bundle", help="write an offline bundle")
    _selectors(bundle, modes="pip or conda")
    add(bundle, "platform")
    add(bundle, "output", required=True)
    add(bundle, "channel", "insecure_host")

    script = sub.add_parser("script", help="export a provisioning script")
    _selectors(script)
    add(script, "format", required=True)
    add(script, "output")

    doctor = sub.add_parser("doctor", help="explain what is broken and how to fix it (default: the active env)")
    add_exclusive(doctor, "name", "prefix", "interpreter")
    add(doctor, "log", "json")

    verify = sub.add_parser("verify", help="prove the GPU works inside an environment (default: the active env)")
    add_exclusive(verify, "name", "prefix")
    add(verify, "bench", "workers", "json")

    add(sub.add_parser("matrix", help="every TensorFlow release and what it needs"), "all", "json")
    update = sub.add_parser("update-data", help="fetch TensorFlow releases published since this tool's data")
    add(update, "offline", "index", "insecure_host", "json")

    remove = sub.add_parser("remove", help="delete an environment tfgpu-install created")
    add_exclusive(remove, "name", "prefix", required=True)
    add(remove, "json")

    repair = sub.add_parser(
        "repair", help="make an existing env's TensorFlow find the GPU, in place (undoable; default: the active env)"
    )
    add_exclusive(repair, "name", "prefix", "interpreter")
    add(
        repair,
        "undo",
        "forget_journal",
        "allow_changes",
        "dry_run",
        "yes",
        "driver",
        "gpu_cc",
        "no_detect",
        "find_links",
        "offline",
        "channel",
        "insecure_host",
        "no_verify",
        "json",
    )

    add(sub.add_parser("list", help="the environments tfgpu-install built, with TF, CUDA, mode and health"), "json")
    completion = sub.add_parser(
        "completion", help='print a shell completion script: eval "$(tfgpu-install completion bash)"'
    )
    completion.add_argument("shell", choices=SHELLS, help="bash, zsh or fish")
    return parser


def with_default_command(argv: list[str]) -> list[str]:
    """``tfgpu-install --tf 2.13 --mode conda`` means ``tfgpu-install create --tf 2.13 --mode conda``."""
    if not argv or argv == ["--json"]:
        raise UsageError(
            "missing-command",
            "Say what to do: no command and no --tf were given.",
            [
                "`tfgpu-install plan` shows what this machine can run.",
                "`tfgpu-install --tf 2.21 --mode pip --name tf2.21` builds an environment.",
                "`tfgpu-install --help` lists every command.",
            ],
        )
    if argv[0] in COMMANDS or argv[0] in ("-h", "--help", "--version"):
        return argv
    if not argv[0].startswith("-"):
        raise UsageError(
            "unknown-command",
            f"{argv[0]!r} is not a tfgpu-install command.",
            [f"Commands: {', '.join(COMMANDS)}; or the bare form `tfgpu-install --tf 2.13 --mode conda`."],
        )
    return ["create", *argv]
