"""Write the module → tests map at the end of docs/maintainers/tests.md: for each module under
``tfgpu/``, the test files that import it or name it.

    python scripts/gen_test_map.py                              # rewrite the map
    python scripts/gen_test_map.py --check                      # exit 1 when the committed map is stale
    python scripts/gen_test_map.py --tests tfgpu/doctor/reads.py  # the test files of one module, a line each

Everything is derived from the tree, so the map follows the package when modules move: the modules
are the ``*.py`` files under ``tfgpu/``; a test file covers a module when it imports it (anywhere in
the file, ``from tfgpu.x import y`` counting ``tfgpu/x/y.py`` when that is a module and
``tfgpu/x/__init__.py`` otherwise) or names it in its text (``tfgpu/x/y.py``, ``tfgpu.x.y.name``:
a docstring saying what it holds, a ``monkeypatch.setattr`` target), directly or through a helper
module of ``tests/`` it imports (``wheelhouse``, ``repairhelpers`` …). The tier markers after a test
file (those pyproject.toml declares) are those it uses anywhere (some of its tests, or all). ``tests/test_docs.py`` regenerates the map
in memory and fails when the committed page differs.

The page above the map's heading is written by hand and kept as it is.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The checkout's package, or the installed one where the tests run from outside a checkout (.ci/run's
# step 3 copies tests/, scripts/ and docs/ beside the installed wheel).
PACKAGE = ROOT / "tfgpu" if (ROOT / "tfgpu").is_dir() else Path(importlib.util.find_spec("tfgpu").origin).parent
PAGE = ROOT / "docs" / "maintainers" / "tests.md"
HEADING = "## Which tests cover a module"
NAMED = re.compile(r"\btfgpu(?:[./][A-Za-z_][A-Za-z0-9_]*)+")


def modules(package: Path) -> dict[str, Path]:
    """Dotted name -> file of every module under ``package`` (a package is its ``__init__.py``)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        if "__pycache__" in parts:
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _longest(dotted: str, known: dict[str, Path]) -> str | None:
    """The longest prefix of ``dotted`` that is a module."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        name = ".".join(parts[:end])
        if name in known:
            return name
    return None


def _reads(path: Path, known: dict[str, Path], helpers: set[str]) -> tuple[set[str], set[str], set[str]]:
    """What one file of tests/ imports or names: (modules, helper modules of tests/, markers)."""
    text = path.read_text(encoding="utf-8")
    found, local, markers = set(), set(), set()
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if (name := _longest(alias.name, known)) is not None:
                    found.add(name)
                elif alias.name in helpers:
                    local.add(alias.name)
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.level == 0 and (base := _longest(node.module, known)) is not None:
                for alias in node.names:
                    found.add(f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in known else base)
            elif node.module.split(".")[-1] in helpers:
                local.add(node.module.split(".")[-1])
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute):
            inner = node.value
            if isinstance(inner.value, ast.Name) and (inner.value.id, inner.attr) == ("pytest", "mark"):
                markers.add(node.attr)
    for match in NAMED.finditer(text):
        dotted = match.group(0).replace("/", ".").removesuffix(".py")
        # The package itself only by import: ``tfgpu.toml`` (the project file) names no module.
        if (name := _longest(dotted, known)) is not None and "." in name:
            found.add(name)
    return found, local, markers


def coverage(package: Path, tests: Path) -> tuple[dict[str, list[str]], dict[str, set[str]]]:
    """``({module: [test file, …]}, {test file: markers})``, paths relative to ``tests``'s parent."""
    known = modules(package)
    helpers = {p.stem for p in tests.rglob("*.py") if not p.name.startswith("test_") and p.stem != "conftest"}
    read = {p.stem: _reads(p, known, helpers) for p in tests.rglob("*.py") if p.stem in helpers}
    covered: dict[str, list[str]] = {name: [] for name in known}
    markers: dict[str, set[str]] = {}
    for path in sorted(tests.rglob("test_*.py")):
        name = path.relative_to(tests.parent).as_posix()
        found, local, marks = _reads(path, known, helpers)
        seen: set[str] = set()
        while local - seen:  # helpers importing helpers
            helper = sorted(local - seen)[0]
            seen.add(helper)
            found |= read[helper][0]
            local |= read[helper][1]
        for module in found:
            covered[module].append(name)
        markers[name] = marks
    return covered, markers


def _declared_markers() -> list[tuple[str, str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    declared = config["tool"]["pytest"]["ini_options"].get("markers", [])
    return [tuple(part.strip() for part in line.split(":", 1)) for line in declared]


def section(package: Path = PACKAGE, tests: Path = ROOT / "tests") -> str:
    """The map's section of the page, from its heading to the end."""
    covered, markers = coverage(package, tests)
    known = modules(package)
    declared = _declared_markers()
    tiers = ", ".join(f"`{name}` ({what})" for name, what in declared)
    markers = {test: marks & {name for name, _ in declared} for test, marks in markers.items()}
    lines = [
        HEADING,
        "",
        "<!-- Generated by scripts/gen_test_map.py from the imports and names in tests/; do not edit: "
        "run `python scripts/gen_test_map.py`. -->",
        "",
        f"Tiers are markers: {tiers}. The fast tier is everything else: "
        '`python -m pytest -m "not network and not slow"`. What the tests keep between runs lives under '
        "`TFGPU_TEST_CACHE` (see [what the suite keeps](#running-them)); the rest in pytest's temporary "
        "directories. To run one module's tests (here the fast ones):",
        "",
        "```console",
        '$ python -m pytest -q -m "not network and not slow" $(python scripts/gen_test_map.py --tests tfgpu/doctor/reads.py)',
        "```",
        "",
        "A test file covers a module when it imports it or names it (`tfgpu/x/y.py`, `tfgpu.x.y`), itself or "
        "through a helper of `tests/` it imports. Tests that run the tool whole (`cli.main`, `python -m tfgpu`) "
        "cover more than they name: a module with few files here is reached through the commands. After a "
        "file's name, the markers some of its tests carry.",
        "",
        "| module | test files |",
        "|---|---|",
    ]
    for name in sorted(covered, key=lambda n: known[n].relative_to(package.parent).as_posix()):
        shown = [
            f"`{t.removeprefix('tests/')}`" + (f" ({', '.join(sorted(markers[t]))})" if markers[t] else "")
            for t in covered[name]
        ]
        lines.append(
            f"| `{known[name].relative_to(package.parent).as_posix()}` | {', '.join(shown) or 'none names it'} |"
        )
    return "\n".join(lines) + "\n"


def page(current: str, package: Path = PACKAGE, tests: Path = ROOT / "tests") -> str:
    """``current`` with its map section (from the heading to the end) written anew, or added."""
    head = current.split("\n" + HEADING + "\n", 1)[0].rstrip("\n")
    return head + "\n\n" + section(package, tests)


def tests_of(module: str, package: Path = PACKAGE, tests: Path = ROOT / "tests") -> list[str]:
    """The test files of ``module``: a path (``tfgpu/doctor/reads.py``) or a dotted name."""
    dotted = module.removesuffix(".py").replace("/", ".").removesuffix(".__init__")
    covered, _ = coverage(package, tests)
    if dotted not in covered:
        raise SystemExit(f"{module}: no such module under {package.name}/")
    return covered[dotted]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the committed map is stale")
    parser.add_argument("--tests", metavar="MODULE", help="print the test files of MODULE, one a line")
    args = parser.parse_args(argv)
    if args.tests:
        print("\n".join(tests_of(args.tests)))
        return 0
    current = PAGE.read_text(encoding="utf-8")
    wanted = page(current)
    if args.check:
        if wanted != current:
            print(f"{PAGE.relative_to(ROOT)} is stale: run `python scripts/gen_test_map.py`", file=sys.stderr)
            return 1
        return 0
    if wanted != current:
        PAGE.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
