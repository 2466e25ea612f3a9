"""Every error code the tool can raise has one exit code, and the registry (``tfgpu.errors.CODES``,
which docs/exit-codes.md is generated from) lists it under that class.

Scripts match on the code and the exit status (docs/exit-codes.md), so a code raised as a usage
error in one module and as an impossibility in another, or one the registry does not name, breaks
that contract. This reads every ``UsageError/ImpossibleError/OperationError("code", ...)`` in
``tfgpu/`` (codes computed at run time, like the GPU check's, are in ``VERIFY_CODES``).
"""

from __future__ import annotations

import ast

from packagesource import PACKAGE, modules, walked

from tfgpu import errors

EXIT = {"UsageError": 2, "ImpossibleError": 3, "OperationError": 1, "CommandNotFoundError": 127}


def _sources() -> tuple:
    """Every module of the package with its nodes (tests/packagesource.py: read and walked once)."""
    return tuple((PACKAGE, path, walked(path)) for path in modules())


def raised_codes() -> dict[str, dict[int, list[str]]]:
    codes: dict[str, dict[int, list[str]]] = {}
    for package, path, found in _sources():
        for node in found:
            if not isinstance(node, ast.Call) or not node.args or not isinstance(node.args[0], ast.Constant):
                continue
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            if name in EXIT:
                where = f"{path.relative_to(package.parent)}:{node.lineno}"
                codes.setdefault(node.args[0].value, {}).setdefault(EXIT[name], []).append(where)
    return codes


def test_every_code_has_one_exit_status():
    mixed = {code: sites for code, sites in raised_codes().items() if len(sites) > 1}
    assert mixed == {}


def test_the_registry_lists_every_raised_code_under_its_exit_status():
    missing = sorted(
        f"{code} (exit {status}, {sites[0]})"
        for code, by_status in raised_codes().items()
        for status, sites in by_status.items()
        if code not in errors.CODES or errors.CODES[code][0].exit_code != status
    )
    assert missing == [], "add each to tfgpu.errors.CODES, then run `python scripts/gen_docs.py`"


def test_every_registered_code_is_one_the_tool_can_raise():
    """A code raised from data (the resolver's reasons, the GPU check's report) is a string in the
    source; one found nowhere outside the registry is a code the tool no longer has."""
    strings = set()
    for _package, path, found in _sources():
        if path.name == "errors.py" and path.parent.name == "tfgpu":
            continue
        strings |= {node.value for node in found if isinstance(node, ast.Constant)}
    strings |= {"no-gpu"}  # the GPU check's fallback, spelled in an expression with the report's code
    stale = sorted(code for code in [*errors.CODES, *errors.VERIFY_CODES] if code not in strings)
    assert stale == []


def test_every_registered_code_has_a_meaning():
    assert all(meaning.strip() for _cls, meaning in errors.CODES.values())
    assert all(meaning.strip() for meaning in errors.VERIFY_CODES.values())
