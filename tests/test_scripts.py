"""The scripts under scripts/ keep up with the package they drive.

They are run by hand (benchmarks) or on a release (data regeneration), not by the suite, so a name
that moved or a keyword that changed in ``tfgpu`` would break them silently. This reads each
script's imports from ``tfgpu`` and its calls of what it imported, and holds them against the real
modules: every imported name exists, and every call binds to the function's signature.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

SCRIPTS = sorted((Path(__file__).resolve().parents[1] / "scripts").glob("*.py"))


def _imports(tree: ast.AST) -> tuple[dict[str, object], dict[str, object]]:
    """(names bound to tfgpu functions/classes, names bound to tfgpu modules) in ``tree``."""
    objects, modules = {}, {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "tfgpu" and not node.level:
            module = importlib.import_module(node.module)
            for alias in node.names:
                if not hasattr(module, alias.name):  # a submodule not imported yet
                    try:
                        importlib.import_module(f"{node.module}.{alias.name}")
                    except ModuleNotFoundError:
                        pass
                assert hasattr(module, alias.name), f"{node.module} has no {alias.name}"
                value = getattr(module, alias.name)
                (modules if inspect.ismodule(value) else objects)[alias.asname or alias.name] = value
    return objects, modules


def _called(node: ast.Call, objects: dict, modules: dict):
    if isinstance(node.func, ast.Name):
        return objects.get(node.func.id)
    if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) and node.func.value.id in modules:
        module = modules[node.func.value.id]
        assert hasattr(module, node.func.attr), f"{module.__name__} has no {node.func.attr}"
        return getattr(module, node.func.attr)
    return None


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_every_name_a_script_takes_from_tfgpu_exists_and_every_call_binds(script):
    tree = ast.parse(script.read_text(), filename=str(script))
    objects, modules = _imports(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        function = _called(node, objects, modules)
        if (
            function is None
            or not callable(function)
            or any(isinstance(a, ast.Starred) for a in node.args)
            or any(k.arg is None for k in node.keywords)
        ):
            continue
        try:
            signature = inspect.signature(function)
        except (TypeError, ValueError):  # a builtin without one
            continue
        try:
            signature.bind(*node.args, **{k.arg: k.value for k in node.keywords})
        except TypeError as error:
            pytest.fail(
                f"{script.name}:{node.lineno}: {ast.unparse(node.func)}(...) does not fit "
                f"{function.__qualname__}{signature}: {error}"
            )
