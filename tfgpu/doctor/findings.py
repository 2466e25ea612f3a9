"""What doctor reports: findings with a stable id, a status, the evidence, and the fix."""

from __future__ import annotations

from tfgpu.records import as_dict, factory, record

STATUSES = ("fail", "warn", "ok", "skip")


@record
class Finding:
    """One check's result. ``id`` is stable (scripts match on it); ``evidence`` says what was read
    and from where; ``fix`` is a command or a concrete step ("" when nothing is to be done)."""

    id: str
    title: str
    status: str
    evidence: tuple[str, ...] = ()
    fix: str = ""

    def to_dict(self) -> dict:
        data = as_dict(self)
        data["evidence"] = list(self.evidence)
        return data


def ok(id: str, title: str, *evidence: str) -> Finding:
    return Finding(id, title, "ok", evidence)


def warn(id: str, title: str, fix: str, *evidence: str) -> Finding:
    return Finding(id, title, "warn", evidence, fix)


def fail(id: str, title: str, fix: str, *evidence: str) -> Finding:
    return Finding(id, title, "fail", evidence, fix)


def skip(id: str, title: str, *evidence: str) -> Finding:
    return Finding(id, title, "skip", evidence)


@record(frozen=False)
class Report:
    """Every finding, in the order the checks ran, plus what was examined."""

    target: dict
    findings: list[Finding] = factory(list)

    @property
    def failed(self) -> bool:
        return any(f.status == "fail" for f in self.findings)

    def summary(self) -> dict[str, int]:
        return {status: sum(f.status == status for f in self.findings) for status in STATUSES}

    def to_dict(self) -> dict:
        return {
            "target": self.target,
            "summary": self.summary(),
            "ok": not self.failed,
            "findings": [f.to_dict() for f in self.findings],
        }
