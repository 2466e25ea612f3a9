"""One run's inputs, built once and frozen: what every operation takes what it needs from.

``tfgpu.cli.inputs`` builds a :class:`Settings` from the command line, the project file and the
environment variables, in this order of precedence (documented in docs/configuration.md, "Where settings come
from"):

1. a flag on the command line;
2. the project file (``--project FILE``, else ``TFGPU_PROJECT_FILE``, else the nearest
   ``tfgpu.toml`` / ``[tool.tfgpu]``; ``--no-project`` or ``TFGPU_PROJECT_FILE=none`` for none),
   for the commands that resolve (plan, create, lock, bundle, script) and only for the keys the
   command has;
3. the tool's default.

Hosts that plain HTTP may reach add up from all three (``--insecure-host``, the project's
``insecure-hosts``, ``TFGPU_INSECURE_HOSTS``). The active environment (``VIRTUAL_ENV``, then
``CONDA_PREFIX``) is read here too, once, for the commands that default to it.

Nothing below the command line sees argparse: operations get a ``Settings`` (or the fields of it
they need), never a namespace.
"""

from __future__ import annotations

from tfgpu.records import as_dict, factory, record


@record
class Selectors:
    """What to resolve: the target machine as the user described it (None: detect or default)."""

    tf: str | None = None
    mode: str | None = None
    python: str | None = None
    os: str | None = None
    arch: str | None = None
    driver: str | None = None
    gpu_cc: str | None = None
    pre: bool = False
    tf_source: str | None = None
    allow_unsupported_gpu: bool = False
    companions: tuple[str, ...] = ()
    """``--with`` specs as given (``torch==2.15.0``); checked by ``tfgpu.resolver.request``."""

    def as_dict(self) -> dict:
        return as_dict(self)

    def given(self) -> dict:
        """The selectors the user set, by name."""
        return {key: value for key, value in as_dict(self).items() if value not in (None, False, ())}


@record
class Settings:
    """Everything one run of the tool was asked, after precedence was applied. Fields a command
    does not have keep their defaults."""

    command: str
    json: bool = False
    selectors: Selectors = factory(Selectors)
    detect: bool = True
    # The project file that applied, the keys it supplied, and why a file seen was not used.
    project_file: str | None = None
    project_keys: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    platforms: tuple[str, ...] = ()
    channels: tuple[str, ...] = ()
    channels_from: str = "--channel"
    insecure_hosts: tuple[str, ...] = ()
    # Which env: at most one of these is set by the user; the active env is the fallback.
    name: str | None = None
    prefix: str | None = None
    interpreter: str | None = None
    active_env: tuple[tuple[str, str], ...] = ()
    # Where packages come from, and how.
    engine: str | None = None
    find_links: str | None = None
    offline: bool = False
    index: str | None = None
    from_lock: str | None = None
    from_bundle: str | None = None
    jupyter: bool = False
    dry_run: bool = False
    force: bool = False
    yes: bool = False
    verify: bool = True
    require_gpu: bool = False  # a GPU-less machine fails the build's GPU check instead of noting it
    # What to write or check.
    output: str | None = None
    format: str | None = None
    allow_cpu: bool = False
    check: str | bool | None = None  # lock --check FILE; True: --check with no FILE (the project's locks)
    log: str | None = None
    bench: bool = False
    workers: int | None = None
    all_releases: bool = False
    undo: bool = False
    forget_journal: bool = False
    allow_changes: bool = False
    shell: str | None = None
    cache_action: str | None = None
    # Entering an env: the command to run in it, and the user's login shell ($SHELL).
    command_argv: tuple[str, ...] = ()
    user_shell: str = ""
    names: bool = False

    @property
    def where_given(self) -> bool:
        """Whether the user named an env (``--name``, ``--prefix`` or ``--interpreter``)."""
        return bool(self.name or self.prefix or self.interpreter)

    @property
    def from_project(self) -> tuple[str, ...]:
        """The keys the project file supplied, each saying where from (for ``lock --check``)."""
        return tuple(f"{key} (from {self.project_file})" for key in self.project_keys)
