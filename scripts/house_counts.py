"""Count the shapes a maintainer pays for, from the source tree alone (nothing is imported).

    python scripts/house_counts.py [--json]

- root modules: the ``.py`` files directly under ``tfgpu/``;
- dict-returning functions: annotated ``-> dict``/``-> dict[...]``/``-> Dict[...]``, or unannotated
  and ending in ``return {...}`` / ``return dict(...)``; of them, the public ones (a name without a
  leading underscore: what another module may call), leaving out the ``to_dict`` renderers of typed
  results and the scripts that run in the target env (``verify/``'s, ``export/templates/``: they
  speak JSON to the tool across a process boundary);
- function-level imports: ``import``/``from`` statements inside a function body;
- private standard-library imports: modules whose name starts with ``_`` (``_signal``, ``_ctypes``).
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "tfgpu"


def _returns_dict(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    ann = node.returns
    if ann is not None:
        text = ast.unparse(ann).replace('"', "").replace("'", "")
        return text == "dict" or text.startswith(("dict[", "Dict[", "typing.Dict"))
    for child in ast.walk(node):
        if isinstance(child, ast.Return) and child.value is not None:
            value = child.value
            if isinstance(value, ast.Dict | ast.DictComp):
                return True
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "dict":
                return True
    return False


def _private(name: str) -> bool:
    return name.startswith("_") and name != "__future__"


def counts(package: Path = PACKAGE) -> dict[str, object]:
    root = sorted(p.name for p in package.glob("*.py"))
    dict_returning: list[str] = []
    local_imports = 0
    private: list[str] = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        rel = path.relative_to(package.parent).as_posix()
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                if _returns_dict(node):
                    dict_returning.append(f"{rel}:{node.name}")
                for child in ast.walk(node):
                    if isinstance(child, ast.Import | ast.ImportFrom):
                        local_imports += 1
            if isinstance(node, ast.Import):
                private += [f"{rel}:{a.name}" for a in node.names if _private(a.name)]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and _private(node.module or ""):
                private.append(f"{rel}:{node.module}")
    in_target = ("tfgpu/verify/", "tfgpu/export/templates/", "tfgpu/envs/templates/")
    crossing = [
        name
        for name in dict_returning
        if not name.rsplit(":", 1)[1].startswith("_")
        and name.rsplit(":", 1)[1] not in ("to_dict", "as_dict", "head")
        and not name.startswith(in_target)
    ]
    return {
        "root_modules": root,
        "dict_returning_functions": len(dict_returning),
        "public_dict_returning_functions": len(crossing),
        "public_dict_returning": crossing,
        "function_level_imports": local_imports,
        "private_stdlib_imports": sorted(set(private)),
        "dict_returning": dict_returning,
    }


def main(argv: list[str]) -> int:
    result = counts()
    if "--json" in argv:
        print(json.dumps(result, indent=1))
        return 0
    print(f"root modules: {len(result['root_modules'])}: {' '.join(result['root_modules'])}")
    print(
        f"dict-returning functions: {result['dict_returning_functions']} "
        f"(public, outside to_dict and the target env's scripts: {result['public_dict_returning_functions']})"
    )
    print(f"function-level imports: {result['function_level_imports']}")
    print(f"private standard-library imports: {', '.join(result['private_stdlib_imports']) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
