"""The command line: parse, build objects, call the core, render, return an exit code.

``parser`` holds the grammar, ``commands`` one function per command; this module runs them and is
the one place that turns an error into an exit code. Exit codes (contract): 0 success; 1 the
operation failed; 2 malformed input; 3 well-formed but impossible; 128+N a signal (Ctrl-C: 130).
"""

from __future__ import annotations

import json
import sys

from tfgpu.errors import TfgpuError


def _tolerant_streams() -> None:
    """A terminal or pipe in any locale: what it cannot show becomes a replacement character."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="replace")
        except (AttributeError, ValueError):
            pass


def main(argv: list[str] | None = None) -> int:
    """Run the tool; returns the exit code."""
    from tfgpu.cli import repair
    from tfgpu.cli.commands import HANDLERS, trust_hosts
    from tfgpu.cli.output import render
    from tfgpu.cli.parser import build_parser, with_default_command
    from tfgpu.proc import install_signal_handlers

    _tolerant_streams()
    install_signal_handlers()
    argv = list(sys.argv[1:] if argv is None else argv)
    want_json = "--json" in argv
    try:
        args = build_parser().parse_args(with_default_command(argv))
        trust_hosts(args)
        handlers = HANDLERS | {"repair": repair.cmd_repair}
        return handlers[args.command or "create"](args)
    except TfgpuError as error:
        if want_json:
            sys.stdout.write(json.dumps(error.to_dict(), indent=2) + "\n")
        else:
            render().error(error)
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
