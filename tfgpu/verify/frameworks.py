"""``verify --with torch|jax``: TensorFlow and another framework computing on the GPU in one
process, in both import orders, with the library files each framework's import mapped.

Each order runs ``frameworks_env.py`` in a process of its own with the env's Python: TensorFlow
first, then each other framework first. A crash (a signal) ends that order's report after the last
step that finished, and the check fails naming the order and the signal.
"""

from __future__ import annotations

import re
from importlib.resources import as_file, files
from pathlib import Path

from tfgpu.doors import untrusted
from tfgpu.errors import OperationError, UsageError
from tfgpu.process.runner import Runner
from tfgpu.verify import NO_BYTECODE, _env_python
from tfgpu.verify.ending import ended, stderr_tail, stopped_at_timeout

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: type checkers treat it alike
if TYPE_CHECKING:
    from typing import Any

FRAMEWORKS = ("torch", "jax")


def frameworks_of(specs: tuple[str, ...]) -> tuple[str, ...]:
    """The frameworks ``--with`` names (``torch``, ``torch==2.11.0`` and ``jax[cuda12]`` name torch
    and jax); anything else is ``bad-option-value``."""
    chosen = []
    for spec in specs:
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", spec)
        name = re.sub(r"[-_.]+", "-", match.group(1)).lower() if match else ""
        if name not in FRAMEWORKS:
            raise UsageError(
                "bad-option-value",
                f"verify --with {spec[:80]!r}: verify checks TensorFlow next to {' or '.join(FRAMEWORKS)}.",
                ["`tfgpu-install verify --prefix ENV --with torch`", "`tfgpu-install verify --prefix ENV --with jax`"],
            )
        if name not in chosen:
            chosen.append(name)
    return tuple(chosen)


def orders(frameworks: tuple[str, ...]) -> list[list[str]]:
    """TensorFlow first, then each other framework first (the others after it, TensorFlow last)."""
    result = [["tensorflow", *frameworks]]
    for first in frameworks:
        result.append([first, *(f for f in frameworks if f != first), "tensorflow"])
    return result


def run_frameworks(prefix: Path, frameworks: tuple[str, ...], timeout: float = 600, runner=None) -> dict:
    """The report: for each import order, its steps (framework, ok, device, the files it mapped)
    and how the process ended; ``ok`` when every order ran every step on the GPU and exited 0."""

    python = _env_python(prefix)
    runner = runner or Runner()
    report: dict[str, Any] = {"prefix": str(prefix), "with": list(frameworks), "orders": []}
    with as_file(files("tfgpu.verify").joinpath("frameworks_env.py")) as script:
        for order in orders(frameworks):
            done = runner.capture(
                [str(python), "-I", "-B", str(script), ",".join(order)], timeout=timeout, clean=False, env=NO_BYTECODE
            )
            runner.log(f"$ {python} -I frameworks_env.py {','.join(order)}  (exit {done.returncode})\n{done.stderr}")
            steps = []
            for line in done.output.splitlines():
                try:
                    step = untrusted.expect(
                        untrusted.parse_json(line, untrusted.CHILD_OUTPUT, str(python)),
                        dict,
                        untrusted.CHILD_OUTPUT,
                        str(python),
                    )
                except untrusted.Unreadable:
                    continue
                steps.append(step)
            finished = [step.get("framework") for step in steps]
            ok = done.returncode == 0 and finished == order and all(step.get("ok") for step in steps)
            how = ended(done, timeout)
            entry = {"order": order, "ok": ok, "exit": how, "steps": steps}
            if not ok:
                missing = [name for name in order if name not in finished]
                failed = [
                    f"{s.get('framework')}: {s.get('error') or 'not on the GPU'}" for s in steps if not s.get("ok")
                ]
                tail = "" if stopped_at_timeout(done, timeout) else stderr_tail(done)
                if tail:
                    entry["stderr_tail"] = tail
                said = f"{how} before {missing[0]} finished" if missing else ""
                said += f" (its stderr ends: {tail})" if said and tail else ""
                entry["reason"] = "; ".join(failed + ([said] if said else [])) or how
            report["orders"].append(entry)
    report["ok"] = all(entry["ok"] for entry in report["orders"])
    return report


def frameworks_failure(report: dict) -> OperationError:
    """The error for ``verify --with`` when an order did not compute everywhere (exit 1)."""
    bad = [entry for entry in report["orders"] if not entry["ok"]]
    said = "; ".join(f"{' then '.join(entry['order'])}: {entry.get('reason')}" for entry in bad)
    return OperationError(
        "frameworks-failed",
        f"TensorFlow next to {', '.join(report['with'])} in {report['prefix']} did not compute on the GPU in every "
        f"import order: {said}",
        [
            f"`tfgpu-install doctor --prefix {report['prefix']}` names what the env holds twice and what loads "
            "from outside it (mixed.*, libs.closed).",
            f"`tfgpu-install repair --prefix {report['prefix']}` writes a load hook that loads the other CUDA stack's "
            "libraries first, so either import order works (docs/modes.md, two CUDA stacks).",
        ],
        details=report,
    )
