"""``tfgpu-install lock``: one hashed lock per --platform (pip), or one conda-lock.yml for all
(conda); and ``lock --check``, whether a lock is what its recorded inputs resolve to today."""

from __future__ import annotations

from pathlib import Path

from tfgpu import lock, results
from tfgpu.cli.commands.plan import host_of
from tfgpu.cli.output import render
from tfgpu.errors import UsageError
from tfgpu.progress import Reporter
from tfgpu.project import Project
from tfgpu.settings import Settings


def needs_platforms(settings: Settings) -> None:
    if not settings.platforms:
        raise UsageError(
            "bad-arguments",
            f"tfgpu-install {settings.command}: say which platforms with --platform "
            "(e.g. --platform linux-64), or list them in the project file (platforms = [...]).",
            [f"tfgpu-install {settings.command} --platform linux-64 ..."],
        )


class Deferred(Reporter):
    """The console reporter, made when something is first reported: a pip lock reports only once
    uv is resolving, so the renderers (rich) load while uv works instead of before it starts."""

    def __init__(self) -> None:
        self._reporter: Reporter | None = None

    def _made(self) -> Reporter:
        if self._reporter is None:
            self._reporter = render().ConsoleReporter()
        return self._reporter

    def step(self, index, total, title):
        self._made().step(index, total, title)

    def output(self, line):
        self._made().output(line)

    def done(self, index, total, title, seconds):
        self._made().done(index, total, title, seconds)

    def note(self, message):
        self._made().note(message)

    def transfer(self, label, done, total):
        self._made().transfer(label, done, total)

    def close(self):
        if self._reporter is not None:
            self._reporter.close()


def cmd_lock(settings: Settings) -> results.Result:
    """``lock``: one hashed lock per --platform (pip), or one conda-lock.yml for all (conda)."""
    if settings.check:
        return lock_check(settings)
    needs_platforms(settings)
    reporter = Deferred()
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
            found = lock.check_project(
                mode=settings.selectors.mode,
                platforms=list(settings.platforms),
                output=settings.output,
                wanted=wanted,
                reporter=reporter,
            )
        else:
            assert isinstance(settings.check, str)  # lock --check FILE
            found = lock.check_lock(settings.check, wanted, reporter=reporter)
    finally:
        if reporter is not None:
            reporter.close()
    return results.LockChecked(found)


def _given_flags(settings: Settings) -> list[str]:
    """What ``tfgpu-install lock`` needs besides the project file to write the lock this check
    wants: the selectors given on the command line, and ``--project`` where the directory walk
    would not find the file from here."""
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
