"""The project's one error family.

Library code raises a :class:`TfgpuError` subclass; only ``cli.main`` catches it, renders it and
turns it into an exit code. Unexpected exceptions are not caught and keep their traceback.
"""

from __future__ import annotations

from tfgpu.records import factory, record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import ClassVar


@record(frozen=False)
class TfgpuError(Exception):
    """A failure the user can act on.

    ``code`` is a stable string that scripts may match on (see the README's error table);
    ``message`` says what was asked, what was found and why it cannot work; ``alternatives``
    are concrete ways forward, one sentence each.
    """

    code: str
    message: str
    alternatives: list[str] = factory(list)
    details: dict | None = None
    """Machine-readable context (e.g. the verify report), added to the ``--json`` document."""

    exit_code: ClassVar[int] = 1

    def __post_init__(self) -> None:
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message

    def to_dict(self) -> dict:
        """The ``{"error": ...}`` document printed by ``--json``."""
        document = {
            "error": {
                "code": self.code,
                "message": self.message,
                "alternatives": list(self.alternatives),
                "exit_code": self.exit_code,
            }
        }
        if self.details is not None:
            document["details"] = self.details
        return document


class UsageError(TfgpuError):
    """Malformed input: an unparseable version, an unknown flag, conflicting options (exit 2)."""

    exit_code: ClassVar[int] = 2


class ImpossibleError(TfgpuError):
    """Well-formed but impossible: no such release, no compatible combination (exit 3)."""

    exit_code: ClassVar[int] = 3


class OperationError(TfgpuError):
    """The operation itself failed, or is not available yet (exit 1)."""

    exit_code: ClassVar[int] = 1


class CommandNotFoundError(TfgpuError):
    """The command to run in an env is not there (exit 127, what a shell answers)."""

    exit_code: ClassVar[int] = 127
