"""The installer interface: ``plan()`` is pure and returns steps; ``apply()`` does them.

Every side effect of an install goes through a :class:`Step`, so ``--dry-run`` prints exactly
what ``apply`` would do, and tests compare lists of steps.
"""

from __future__ import annotations

import shlex
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

from tfgpu.envs.location import Location  # noqa: F401 - part of the installer interface


@dataclass(frozen=True)
class Step:
    """One thing an install does."""

    kind: str
    """What kind of work: ``requirements``, ``run``, ``lock``, ``bytecode-store``/``bytecode-reuse``,
    ``inventory``, ``activation``, ``marker``, ``relocate``, ``commit``."""
    title: str
    """One line for a person."""
    argv: tuple[str, ...] = ()
    """The command it runs, if any (never a shell string)."""
    writes: tuple[str, ...] = ()
    """Files or directories it creates."""
    content: str = ""
    """What a write step writes, where that is known in advance."""
    env: tuple[tuple[str, str], ...] = ()
    """Environment variables the command needs (e.g. ``CONDA_OVERRIDE_CUDA``)."""

    def describe(self) -> str:
        lines = [self.title]
        if self.argv:
            lines.append("  $ " + " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env) + (" " if self.env else "")
                         + shlex.join(self.argv))
        lines.extend(f"  writes {path}" for path in self.writes)
        lines.extend(f"    | {line}" for line in self.content.splitlines())
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "title": self.title, "argv": list(self.argv), "writes": list(self.writes),
                "content": self.content, "env": dict(self.env)}


@dataclass(frozen=True)
class Options:
    """How to build, from the command line."""

    engine: str | None = None
    find_links: str | None = None
    offline: bool = False
    jupyter: bool = False
    force: bool = False
    verify: bool = True
    channels: tuple[str, ...] = ()
    """conda channels (--channel), in priority order; empty means conda-forge."""
    tf_source: str = "pypi"
    """Where TensorFlow comes from in conda mode: ``pypi`` (uv into the env) or ``conda-forge``."""
    yes: bool = False


@dataclass
class Outcome:
    """What an install produced."""

    prefix: Path
    python: Path
    installed: dict[str, str] = field(default_factory=dict)
    """Every distribution in the env and its exact version."""
    notes: list[str] = field(default_factory=list)
    activate: str = ""
    """How a person activates the env (empty: ``source <prefix>/bin/activate``)."""
    kernels: list[str] = field(default_factory=list)
    """Jupyter kernels registered for the env (names under the kernels directory)."""


class Installer(ABC):
    """One install mode."""

    mode: str
    in_place = False
    """Whether envs are built at their final path (see ``Location.in_place``)."""

    def unchanged(self, name: str | None, prefix: str | None):
        """A finished ``CreateResult`` when the env is already exactly in place (re-running is then
        a no-op), else None. Modes that cannot tell return None and ``env-exists`` applies."""
        return None

    def prefix_for_name(self, name: str) -> str | None:
        """Where ``--name`` puts an env, when this mode has its own place (None: the tool's envs dir)."""
        return None

    @abstractmethod
    def plan(self, resolution, location: Location, options: Options) -> list[Step]:
        """The steps that build ``resolution`` at ``location``; touches nothing."""

    @abstractmethod
    def apply(self, steps: list[Step], runner, reporter, **context) -> Outcome:
        """Carry out ``steps`` in staging; raise ``OperationError`` on failure (the caller rolls back)."""
