"""The shape of the package, held by tests: no import cycle (between subpackages, or between any
two modules), one door for child processes (``tfgpu/proc.py``), no module over 400 lines, no
backend reading lock files. Imports inside functions count: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import tfgpu

ROOT = Path(tfgpu.__file__).parent
# Code that runs inside the *target* env's Python (or is embedded into a generated script), not in
# the tool's process: it cannot import tfgpu, so it starts its own children.
IN_TARGET_ENV = {"verify/check_env.py", "verify/gpu_checks.py", "verify/probe_libs.py", "verify/multiworker.py"}
TEMPLATE_DIRS = ("envs/templates/", "export/templates/")


def modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith(TEMPLATE_DIRS):
            continue
        name = "tfgpu." + relative.removesuffix(".py").replace("/", ".").removesuffix(".__init__")
        found[name.removesuffix(".__init__")] = path
    return found


def imports(path: Path, known: set[str]) -> set[str]:
    """The tfgpu modules ``path`` imports (``from tfgpu.x import y`` names tfgpu.x.y when that is a module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("tfgpu")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tfgpu") and node.level == 0:
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                found.add(candidate if candidate in known else node.module)
    return {name for name in found if name in known}


def unit(module: str) -> str:
    """The subpackage (or top-level module) a module belongs to: tfgpu.backends.pip -> backends."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "tfgpu"


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index, low, stack, on_stack, result, counter = {}, {}, [], set(), [], [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for other in graph.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return result


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports(path, set(found)) - {name} for name, path in found.items()}


def test_no_import_cycle_between_subpackages(graph):
    units: dict[str, set[str]] = {}
    for module, targets in graph.items():
        units.setdefault(unit(module), set()).update(unit(t) for t in targets if unit(t) != unit(module))
    units.pop("tfgpu", None)  # tfgpu/__init__.py holds only the version
    for targets in units.values():
        targets.discard("tfgpu")
    assert cycles(units) == []


def test_no_import_cycle_between_modules(graph):
    assert cycles(graph) == []


def test_backends_never_read_lock_files(graph):
    """Locks and bundles are read and checked by tfgpu.lock, which hands backends a Source."""
    offenders = sorted(m for m, targets in graph.items() if unit(m) == "backends" and any(unit(t) == "lock" for t in targets))
    assert offenders == []


def test_the_resolver_imports_no_engine_backend_or_process_door(graph):
    """resolver/ is pure: it reads tables (through tfgpu.data) and the Host it is given, and makes its
    requirements through the requirement door (tfgpu.requirements, itself pure)."""
    allowed = {"resolver", "data", "errors", "detect", "requirements"}
    offenders = {m: sorted(t for t in targets if unit(t) not in allowed) for m, targets in graph.items()
                 if unit(m) == "resolver"}
    assert {m: t for m, t in offenders.items() if t} == {}


def test_child_processes_start_only_in_the_door():
    offenders = []
    for path in ROOT.rglob("*.py"):
        relative = path.relative_to(ROOT).as_posix()
        if relative == "proc.py" or relative in IN_TARGET_ENV or relative.startswith(TEMPLATE_DIRS):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import) and any(a.name in ("subprocess", "multiprocessing") for a in node.names):
                offenders.append(relative)
            elif isinstance(node, ast.ImportFrom) and node.module in ("subprocess", "multiprocessing"):
                offenders.append(relative)
            elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os"
                  and node.attr in ("system", "popen", "execv", "execvp", "spawnv", "fork", "posix_spawn")):
                offenders.append(relative)
    assert sorted(set(offenders)) == []


def test_no_module_over_400_lines():
    sizes = {path.relative_to(ROOT).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
             for path in ROOT.rglob("*.py")}
    assert {name: size for name, size in sizes.items() if size > 400} == {}
