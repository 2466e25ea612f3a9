"""The one door for child processes: argv lists, a cleaned environment, a log, signals handled.

Every command the tool runs goes through a :class:`Runner` (scripts that run *inside* a target
env are started through it too). It never raises for a failing command: the caller reads
``Completed.returncode`` and decides. Tests pass a :class:`RecordingRunner` instead of patching
``subprocess``.

Signals: ``cli.main`` turns SIGTERM and SIGHUP into :class:`Interrupted` (``tfgpu.process.interrupts``),
so ``timeout``, ``systemd stop`` and a closed terminal roll back exactly like Ctrl-C. A running
child is stopped first (SIGINT, then SIGKILL), and every child is started so that the kernel kills
it when the tool dies (``PR_SET_PDEATHSIG``, without forking the tool's memory: ``tfgpu.process.spawning``),
so a SIGKILLed run leaves no uv still writing into its
staging directory. Every child is started with those signals held (``tfgpu.process.signalmask.supervised``):
one that lands during the fork is handled once the child is in hand, so the child is stopped and
reaped before anything rolls back. A stopped uv's half-written cache entries are removed, and uv's
downloads are held to the tool's floor on progress (``tfgpu.process.childwatch``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from tfgpu.doors import secrets
from tfgpu.doors.paths import log_dir
from tfgpu.errors import TfgpuError
from tfgpu.process import childpipes, spawning
from tfgpu.process.childenv import clean_environment, without_plain_proxy
from tfgpu.process.interrupts import Interrupted, tell
from tfgpu.process.signalmask import SIGNALS, shielded, supervised  # noqa: F401 - shielded: the door's, for callers
from tfgpu.records import factory, record

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: type checkers treat it alike
if TYPE_CHECKING:
    import subprocess

# subprocess, tempfile and shlex are imported where a child is started or a log opened: every
# command imports this module for its signal handlers, and `plan` starts no child.


def __getattr__(name: str):
    if name in ("PIPE", "DEVNULL"):  # subprocess's constants, without importing it for every command
        # Start-up cost: `doctor` loads this module but not subprocess.
        import subprocess

        return getattr(subprocess, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@record
class Completed:
    """A finished command: what ran, its exit status, its whole output (stdout and stderr merged
    unless asked apart), and how long it took."""

    argv: tuple[str, ...]
    returncode: int
    output: str
    seconds: float = 0.0
    stderr: str = ""
    started: bool = True
    """False when the program could not be started at all (not found, not executable)."""
    stalled: str = ""
    """Why the tool stopped a child whose downloads fell below their floor (``tfgpu.process.childwatch``)."""

    @property
    def stdout(self) -> str:
        """What :meth:`Runner.capture` read from stdout (``output`` under the name probes use)."""
        return self.output

    def tail(self, lines: int = 12) -> str:
        return "\n".join(self.output.rstrip().splitlines()[-lines:])

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def open_log(operation: str) -> tuple[Path | None, str]:
    """A new log file for ``operation`` (``create-tf2.21``) in the log directory; when that cannot
    be written (a read-only home), one in the temporary directory; else none. Returns the path and
    a note for the user ("" when the log is where docs/configuration.md says)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")  # local time, as datetime.now() gives, without importing datetime
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in operation)[:80]
    try:
        directory = log_dir()
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{safe}-{stamp}-{os.getpid()}.log"
        path.touch()
        return path, ""
    except OSError as error:
        problem = f"the log directory cannot be written ({error.strerror})"

    try:
        handle, name = tempfile.mkstemp(prefix=f"tfgpu-{safe}-", suffix=".log")
        os.close(handle)
        return Path(name), f"{problem}; this run's log is {name}"
    except OSError:
        return None, f"{problem}, nor the temporary directory: this run keeps no log"


class Runner:
    """Runs commands; one log file per operation (``log_path`` None: keep no log)."""

    def __init__(self, log_path: Path | None = None, extra_env: Mapping[str, str] | None = None) -> None:
        self.log_path = log_path
        self.extra_env = dict(extra_env or {})
        self.note = ""
        """Said to the user once (e.g. where the log went instead of the log directory)."""

    @classmethod
    def for_operation(cls, operation: str) -> Runner:
        """A runner logging to a new file for ``operation`` (see :func:`open_log`)."""
        path, note = open_log(operation)
        runner = cls(path)
        runner.note = note
        return runner

    def log(self, text: str) -> None:
        if self.log_path is None:
            return
        text = secrets.redact(text)  # a log is attached to bug reports and CI output: no credential in it
        try:
            with open(self.log_path, "a", encoding="utf-8", errors="replace") as log:
                log.write(text if text.endswith("\n") else text + "\n")
        except OSError:
            pass  # a log that stopped being writable costs the log, not the operation

    def record_failure(self, error: BaseException) -> None:
        """Write what failed into the log (the error's code, message and way forward), so a failed
        run's log holds its error even where no command ran; a tool error also names the log."""
        if self.log_path is None:
            return
        if isinstance(error, TfgpuError):
            self.log(f"failed: {error.code}: {error.message}" + "".join(f"\n  -> {a}" for a in error.alternatives))
            named = f"The log of this run (every command and its whole output) is {self.log_path}."
            if str(self.log_path) not in error.message + "\n".join(error.alternatives):
                error.alternatives.append(named)
        elif isinstance(error, KeyboardInterrupt):
            self.log(f"interrupted ({error})")
        else:
            self.log(f"failed: {type(error).__name__}: {error}")

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        on_line: Callable[[str], None] | None = None,
        input: str | None = None,
        timeout: float | None = None,
        cwd: str | Path | None = None,
        clean: bool = True,
        quiet: bool = False,
        screen: Callable[[str], None] | None = None,
        meanwhile: Callable[[], object] | None = None,
    ) -> Completed:
        """Run ``argv``; stdout and stderr merged, streamed line by line to ``on_line``.

        ``clean``: drop the variables that leak another environment (see ``tfgpu.process.childenv``); ``env`` is
        added on top. ``quiet``: do not log (probes whose output is not worth keeping).
        ``timeout``: the child is killed after that many seconds (return code 124).
        ``screen``: run the child on a pseudo-terminal, for a program that draws its progress only
        on a terminal (uv), and give ``screen`` everything it draws, as it comes; ``on_line``, the
        log and ``output`` then get the lines it printed, its redraws left out (``tfgpu.process.pseudoterminal``).
        On an interrupt (Ctrl-C, SIGTERM, SIGHUP) the child is stopped and reaped, what a uv left
        half-written in its cache removed (said on the interrupt: ``tfgpu.process.interrupts.tell``), and the
        interrupt propagates. A uv command that downloads and falls below the floor on progress is
        stopped: return code 124, ``stalled`` saying why.
        ``meanwhile``: the tool's own work that needs no answer from the child, done while it runs
        (its output waits in the pipe); an interrupt or error there stops and reaps the child too.
        """
        # Start-up cost: `doctor` loads this module but not shlex, subprocess.
        import shlex
        import subprocess

        argv = tuple(str(a) for a in argv)
        if not quiet:
            self.log(f"$ {shlex.join(argv)}")
        base = clean_environment(os.environ) if clean else without_plain_proxy(os.environ)
        started = time.monotonic()
        terminal = None
        # The pseudo-terminal is the tool's, so the tool says what it is (a dumb or missing TERM
        # would keep the child from drawing at all).
        if screen is not None:
            # Start-up cost: `doctor` loads this module but not tfgpu.process.pseudoterminal.
            from tfgpu.process.pseudoterminal import Printed, open_terminal, read_terminal

            terminal = open_terminal()
        # Start-up cost: `doctor` loads this module but not tfgpu.process.childwatch.
        from tfgpu.process.childwatch import Floor, Scratch

        scratch = Scratch.of(argv)

        def interrupted(child: subprocess.Popen, stop: BaseException | None = None) -> None:
            """The child stopped and reaped, and what it left half-written in its cache removed."""
            _stop(child)
            if not quiet:
                self.log("interrupted")
            removed = scratch.sweep(self.log)
            if removed and stop is not None:
                count = f"{len(removed)} temporary entr{'y' if len(removed) == 1 else 'ies'}"
                tell(stop, f"Removed what the stopped uv left half-written in its cache {scratch.cache} ({count}).")

        child_env = {**base, **self.extra_env, **(env or {}), **({"TERM": "xterm"} if terminal else {})}
        program, preexec = spawning.how(argv, child_env, cwd)
        try:
            child = supervised(
                spawning.as_asked(
                    argv,
                    program,
                    lambda: subprocess.Popen(
                        program,
                        stdout=subprocess.PIPE if terminal is None else terminal[1],
                        stderr=subprocess.STDOUT if terminal is None else terminal[1],
                        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                        env=child_env,
                        cwd=cwd,
                        text=True,
                        encoding="utf-8",
                        errors="replace",
                        bufsize=1,
                        preexec_fn=preexec,
                    ),
                ),
                interrupted,
            )
        except OSError as error:
            if terminal is not None:
                os.close(terminal[0])
            if not quiet:
                self.log(f"could not start: {error}")
            return Completed(argv, 127, f"could not start {argv[0]}: {error}", 0.0, started=False)
        except BaseException:
            if terminal is not None:
                os.close(terminal[0])
                os.close(terminal[1])
            raise
        lines: list[str] = []
        timer = floor = None
        # From here on the child is running: an interrupt anywhere below stops and reaps it before
        # it propagates (a ``uv venv`` left running would write on into a staging directory while
        # the rollback deletes it, and leave it behind with no record to prove it the tool's).
        try:
            if terminal is not None:
                os.close(terminal[1])  # the child holds it now; the reads end when the child closes it
            if timeout is not None:
                import threading  # Start-up cost: a timer's thread, for a child with a timeout only.

                timer = threading.Timer(timeout, _kill, (child,))
                timer.daemon = True
                timer.start()
            floor = Floor.start(argv, child, _kill)
            if input is not None:
                try:
                    child.stdin.write(input)
                    child.stdin.close()
                except BrokenPipeError:
                    pass
            if meanwhile is not None:
                meanwhile()
            if terminal is not None and screen is not None:  # a terminal is opened only for a screen
                read_terminal(terminal[0], screen, Printed(lines, on_line))
            else:
                for line in child.stdout:
                    lines.append(line)
                    if on_line is not None:
                        on_line(line.rstrip("\n"))
            returncode = child.wait()
        except BaseException as stop:
            interrupted(child, stop)
            raise
        finally:
            if timer is not None:
                timer.cancel()
            if floor is not None:
                floor.cancel()
        if floor is not None and floor.reason:
            scratch.sweep(self.log)  # stopped by the tool: what it left half-written goes too
            output = "".join(lines) + f"\n[stopped: {floor.reason}]"
            if not quiet:
                self.log(output)
            return Completed(argv, 124, output, time.monotonic() - started, stalled=floor.reason)
        output = "".join(lines)
        seconds = time.monotonic() - started
        if timer is not None and timeout is not None and returncode == -signal.SIGKILL and seconds >= timeout:
            returncode = 124
            output += f"\n[killed after {timeout:.0f} s]"
        if not quiet:
            self.log(output + f"[exit {returncode} after {seconds:.1f} s]")
        return Completed(argv, returncode, output, seconds)

    def capture(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        timeout: float = 30,
        input: str | None = None,
        clean: bool = True,
        errors: str = "replace",
    ) -> Completed:
        """Run a short probe with stdout and stderr kept apart (``output`` is stdout); not logged.
        For reading facts (``nvidia-smi``, an interpreter's version, a child that prints JSON).
        ``errors``: how bytes that are not UTF-8 are decoded (``surrogateescape`` keeps them)."""
        # Start-up cost: `doctor` loads this module but not subprocess.
        import subprocess

        argv = tuple(str(a) for a in argv)
        base = clean_environment(os.environ) if clean else without_plain_proxy(os.environ)
        started = time.monotonic()
        child_env = {**base, **self.extra_env, **(env or {})}
        program, preexec = spawning.how(argv, child_env, None)
        try:
            child = supervised(
                spawning.as_asked(
                    argv,
                    program,
                    lambda: subprocess.Popen(
                        program,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                        env=child_env,
                        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                        preexec_fn=preexec,
                        # Its own process group: a probe that starts a child of its own (a wrapper
                        # script, an interpreter that forks) is stopped whole when its time is up.
                        start_new_session=True,
                    ),
                ),
                _end_group,
            )
        except (OSError, ValueError) as error:
            return Completed(argv, 127, "", 0.0, f"could not start {argv[0]}: {error}", started=False)
        with child:
            # Bounded: a child that prints gigabytes, or leaves a process holding its pipes open,
            # costs a few MiB and its own time (tfgpu.process.childpipes), never the tool's memory or a
            # child that exited read as one stopped at its timeout.
            try:
                kept_out, kept_err, timed_out = childpipes.collect(child, input, timeout, _kill_group)
            except BaseException:
                _kill_group(child)
                raise
        out, err = kept_out.text(errors), kept_err.text(errors)
        if timed_out:
            return Completed(argv, 124, out, time.monotonic() - started, err)
        return Completed(argv, child.returncode, out, time.monotonic() - started, err)

    def start(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, clean: bool = True, **popen
    ) -> subprocess.Popen:
        """A child that runs beside the tool (parallel workers); the caller waits for it."""
        # Start-up cost: `doctor` loads this module but not subprocess.
        import subprocess

        base = clean_environment(os.environ) if clean else without_plain_proxy(os.environ)
        child_env = {**base, **self.extra_env, **(env or {})}
        program, preexec = spawning.how([str(a) for a in argv], child_env, popen.get("cwd"))
        return supervised(
            spawning.as_asked(
                argv, program, lambda: subprocess.Popen(program, env=child_env, preexec_fn=preexec, **popen)
            ),
            _end,
        )

    def attached(self, argv: Sequence[str], *, env: Mapping[str, str]) -> int:
        """Run ``argv`` on the tool's own terminal (stdin, stdout and stderr inherited) with exactly
        ``env``, and return its exit status as a shell reports it: a death by signal N is 128 + N.

        Like a shell waiting for its foreground job: Ctrl-C reaches the child from the terminal and
        the tool waits for it to finish rather than dying first; a SIGTERM or SIGHUP sent to the
        tool is passed on to the child, which decides."""
        # Start-up cost: `doctor` loads this module but not subprocess.
        import subprocess

        argv = tuple(str(a) for a in argv)
        # A signal during the fork: the child is asked to end as the signal would have asked it, and
        # waited for, before the tool stops too.
        program, preexec = spawning.how(argv, env, None)
        child = supervised(
            spawning.as_asked(argv, program, lambda: subprocess.Popen(program, env=dict(env), preexec_fn=preexec)),
            _stop,
        )
        old = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            while True:
                try:
                    returncode = child.wait()
                    break
                except Interrupted as stop:
                    with contextlib.suppress(ProcessLookupError):
                        child.send_signal(stop.signum)
        finally:
            signal.signal(signal.SIGINT, old)
        return 128 - returncode if returncode < 0 else returncode


def _kill(child: subprocess.Popen) -> None:
    with contextlib.suppress(OSError):
        child.kill()


def _kill_group(child: subprocess.Popen) -> None:
    """Kill a child started in its own session, and everything it started."""
    with contextlib.suppress(OSError):
        os.killpg(child.pid, signal.SIGKILL)
    _kill(child)


def _end(child: subprocess.Popen) -> None:
    """Kill a child and reap it (its pipes, if any, closed)."""
    _kill(child)
    _reap(child)


def _end_group(child: subprocess.Popen) -> None:
    """Kill a child started in its own session, everything it started, and reap it."""
    _kill_group(child)
    _reap(child)


def _reap(child: subprocess.Popen) -> None:
    for stream in (child.stdin, child.stdout, child.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
    child.wait()


def _stop(child: subprocess.Popen) -> None:
    """After an interrupt: a terminal sent the child SIGINT too, a ``kill`` of our pid did not."""
    # Start-up cost: `doctor` loads this module but not subprocess.
    import subprocess

    try:
        child.send_signal(signal.SIGINT)
        child.wait(timeout=5)
    except (subprocess.TimeoutExpired, KeyboardInterrupt):
        child.kill()
        child.wait()
    except ProcessLookupError:
        pass


@record(frozen=False)
class RecordingRunner(Runner):
    """A runner for tests: records every argv and answers from ``results`` (argv[0]'s basename or
    the whole argv joined, to a :class:`Completed` or a callable taking the argv), else exit 0.

    It stands in for the process boundary only: everything before and after runs for real."""

    results: dict = factory(dict)
    calls: list = factory(list)

    def __post_init__(self) -> None:
        Runner.__init__(self, None)

    def _answer(self, argv: tuple[str, ...]) -> Completed:
        # Start-up cost: `doctor` loads this module but not shlex.
        import shlex

        self.calls.append(argv)
        for key in (shlex.join(argv), Path(argv[0]).name):
            if key in self.results:
                found = self.results[key]
                return found(argv) if callable(found) else found
        return Completed(argv, 0, "")

    def run(self, argv, **kwargs) -> Completed:  # noqa: D102 - see Runner.run
        if kwargs.get("meanwhile"):
            kwargs["meanwhile"]()
        done = self._answer(tuple(str(a) for a in argv))
        if kwargs.get("on_line"):
            for line in done.output.splitlines():
                kwargs["on_line"](line)
        return done

    def capture(self, argv, **kwargs) -> Completed:  # noqa: D102 - see Runner.capture
        return self._answer(tuple(str(a) for a in argv))
