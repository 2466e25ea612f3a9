"""The command line, the tool's front door: parse, build the settings, run, show, return an exit code.

``options`` defines every option once, ``grammar`` says which command takes which (and reads a
run's options; ``parser``'s argparse answers the rest), ``inputs``
builds the one frozen ``tfgpu.settings.Settings`` of a run (options, project file, environment),
``commands`` is the command table (each command's module, imported only when that command runs:
the start-up budget's one seam) whose functions return a typed result, and ``output`` shows a result
by its type. This module runs them and is the one place that turns an error into an exit code. Exit codes (contract): 0 success; 1 the
operation failed; 2 malformed input; 3 well-formed but impossible; 128+N a signal (Ctrl-C: 130);
``run`` and ``shell``: the command's own status, 127 when ``run``'s command is not there.
"""

from __future__ import annotations

import atexit
import errno
import gc
import os
import sys
from types import SimpleNamespace

from tfgpu.cli import inputs, output
from tfgpu.cli.commands import handler
from tfgpu.cli.grammar import quick, with_default_command
from tfgpu.cli.output import note, show
from tfgpu.doors.paths import write_failure
from tfgpu.doors.secrets import redacted_json
from tfgpu.errors import TfgpuError, UsageError
from tfgpu.process.interrupts import install_signal_handlers, left


def _tolerant_streams() -> None:
    """A terminal or pipe in any locale: what it cannot show becomes a replacement character. A
    stream closed before the start (``>&-``, ``2>&-``: Python makes it None) is /dev/null's: nothing
    can read what goes there, and every write and the flush at the exit still work (a None stderr
    failed that flush, a None stdout the first write: exit 1, or a traceback, for a command that
    succeeded)."""
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115 (the process's to its end)
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)  # a TextIOWrapper's; a replaced stream may lack it
        try:
            if reconfigure is not None:
                reconfigure(errors="replace")
        except ValueError:
            pass


def main(argv: list[str] | None = None, *, whole_process: bool = False) -> int:
    """Run the tool; returns the exit code. ``whole_process``: this run is the process (:func:`entry`),
    whose start-up the collector may leave alone (:func:`_started`)."""
    _tolerant_streams()
    install_signal_handlers()
    argv = list(sys.argv[1:] if argv is None else argv)
    want_json = "--json" in argv
    try:
        argv = with_default_command(argv)
        settings = inputs.build(_parsed(argv))
        inputs.trust(settings)
        for line in settings.notes:
            note(line)  # stderr, also under --json
        run = handler(settings.command)
        if whole_process:
            _started()
        return show(settings, run(settings))
    except OSError as error:
        if error.errno == errno.EPIPE:
            # The reader of stdout left (``| head -1``): nothing more can reach it. Ended as the text
            # output ends then (rich's console: exit 1, nothing said), not by a traceback.
            _stdout_gone()
            return 1
        # A path derived from one the user gave (a lock beside -o, a platform's file name, a bundle's
        # member) can still be too long for the file system; any stat() anywhere then raises
        # ENAMETOOLONG. It is the same bad input as an over-long option, so it gets the same answer.
        if error.errno != errno.ENAMETOOLONG:
            # A full disk, a read-only file system or a refused permission met by a write that has
            # no door of its own (a download's .part in -o DIR, say) ends as a typed error too.
            failure = write_failure(error)
            if failure is None:
                raise
            return _report(failure, want_json)
        return _report(
            UsageError(
                "bad-path",
                f"A path is too long for the file system (it starts {str(error.filename)[:80]!r}) "
                "(a name over 255 bytes, or a path over 4095).",
                ["Give the options that name files and directories shorter paths."],
            ),
            want_json,
        )
    except TfgpuError as error:
        return _report(error, want_json)
    except SystemExit as done:  # --help and --version
        return int(done.code or 0)
    except KeyboardInterrupt as stop:  # Ctrl-C, and SIGTERM/SIGHUP (tfgpu.process.interrupts.Interrupted)
        signum = getattr(stop, "signum", 2)
        remains, cleaned = left(stop)
        # A command that knows better (a repair rolled back) says what is left and where.
        outcome = getattr(stop, "outcome", None)
        if outcome:
            remains = [f"{outcome}.", *remains]
        what = " ".join(remains) if remains else "nothing was left half-built."
        sys.stderr.write(f"Interrupted ({'SIGINT' if signum == 2 else stop}): {what}\n")
        sys.stderr.writelines(f"  {line}\n" for line in cleaned)
        return 128 + signum


def _parsed(argv: list[str]):
    """The parsed command line: read quickly where its form allows (``tfgpu.cli.grammar.quick``),
    else by argparse, which answers ``--help``, ``--version`` and every mistake."""
    values = quick(argv)
    if values is not None:
        return SimpleNamespace(**values)
    # Start-up cost: argparse and a command's parser (16M instructions; a bare start is 39M), only
    # for what the quick reading leaves to it.
    from tfgpu.cli.parser import parse

    return parse(argv)


def _report(error: TfgpuError, want_json: bool) -> int:
    if want_json:
        try:
            sys.stdout.write(redacted_json(error.to_dict()) + "\n")
            sys.stdout.flush()
            return error.exit_code
        except OSError:
            # stdout cannot take the document (a full disk, a closed pipe: often what failed the
            # command itself): the error is said on stderr instead, as without --json.
            _stdout_gone()
    # output.render, not a bare `render`: importing tfgpu.cli.render.* binds that name in this
    # package's namespace to the subpackage.
    output.render().error(error)
    return error.exit_code


def _stdout_gone() -> None:
    """stdout refused a write: what is still buffered for it goes to /dev/null instead, so the flush
    at the process's exit does not fail again (an interpreter whose last flush fails exits 120)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)
    except (OSError, ValueError, AttributeError):  # a replaced stdout (a test's capture) has no file
        pass


def _started() -> None:
    """The start-up is over (the options read, the command's modules imported): what it made (the
    modules, their tables, the settings) lives until the process ends, so the cycle collector, paused
    since :func:`entry`, is let run again over what the command makes from now on, and never over that
    (``gc.freeze``), at the interpreter's exit included. Walking it cost a plan 20M instructions of
    its 245M (callgrind), a bare ``python -c pass`` being 39M. Before the command runs, so a long one
    (``create``, ``repair``, ``lock``) is collected as any program is."""
    gc.freeze()
    gc.enable()


def entry() -> None:
    """Console-script entry point: the process's one run (in-process callers, the tests among them,
    call :func:`main`, which leaves their collector as it is)."""
    gc.disable()  # until _started: start-up makes no garbage worth the walks
    _exit(main(whole_process=True))


def _exit(code: int) -> None:
    """End the process as the interpreter would, less its teardown. After the exit handlers and the
    flush of stdout and stderr, the interpreter's exit frees every module, class and table one by
    one: 13-30 ms of a lock (its 275 modules; ``python -c pass`` is 11 ms whole),
    spent on memory the kernel takes back at once. So the exit handlers run here (every one, in
    their order: a ``sitecustomize``'s, coverage's), the streams are flushed, and the process ends
    (``os._exit``, as ``tfgpu.engines.rattler_child`` and multiprocessing's children end). A thread
    still running, or a stream that cannot be flushed (a closed pipe, a full disk), takes the
    interpreter's own exit instead, which joins the thread and says what it always said."""
    threading = sys.modules.get("threading")
    if threading is not None and threading.active_count() > 1:
        sys.exit(code)
    atexit._run_exitfuncs()  # clears them: sys.exit below does not run them twice
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:  # None under pythonw, or when the embedder closed it
                stream.flush()
    except (OSError, ValueError, AttributeError):  # a closed pipe, a full disk; a stand-in without flush
        sys.exit(code)
    os._exit(code & 0xFF)
