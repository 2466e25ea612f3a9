"""Every error code the tool can raise has one exit code, and the README's table lists it there.

Scripts match on the code and the exit status (README, Exit codes), so a code raised as a usage
error in one module and as an impossibility in another, or one the table does not name, breaks
that contract. This reads every ``UsageError/ImpossibleError/OperationError("code", ...)`` in
``tfgpu/`` (codes computed at run time, like the verify report's, are named by the table as "the
verify codes").
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXIT = {"UsageError": 2, "ImpossibleError": 3, "OperationError": 1, "CommandNotFoundError": 127}


def raised_codes() -> dict[str, dict[int, list[str]]]:
    import tfgpu

    codes: dict[str, dict[int, list[str]]] = {}
    package = Path(tfgpu.__file__).resolve().parent
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not isinstance(node, ast.Call) or not node.args or not isinstance(node.args[0], ast.Constant):
                continue
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            if name in EXIT:
                where = f"{path.relative_to(package.parent)}:{node.lineno}"
                codes.setdefault(node.args[0].value, {}).setdefault(EXIT[name], []).append(where)
    return codes


def readme_rows() -> dict[int, set[str]]:
    text = (ROOT / "README.md").read_text()
    table = text[text.index("| code | meaning |") :]
    rows = {}
    for line in table.splitlines()[2:]:
        if not line.startswith("|"):
            break
        status, meaning = line.strip("|").split("|", 1)
        rows[int(status)] = set(re.findall(r"`([a-z0-9-]+)`", meaning))
    return rows


def test_every_code_has_one_exit_status():
    mixed = {code: sites for code, sites in raised_codes().items() if len(sites) > 1}
    assert mixed == {}


def test_the_readme_table_lists_every_code_under_its_exit_status():
    rows = readme_rows()
    missing = sorted(
        f"{code} (exit {status})"
        for code, sites in raised_codes().items()
        for status in sites
        if code not in rows.get(status, set())
    )
    assert missing == []


def test_the_readme_table_lists_no_code_the_tool_does_not_raise_under_another_status():
    codes = raised_codes()
    misplaced = sorted(
        f"{code} (table: {status}, raised: {sorted(codes[code])})"
        for status, listed in readme_rows().items()
        for code in listed
        if code in codes and status not in codes[code]
    )
    assert misplaced == []
