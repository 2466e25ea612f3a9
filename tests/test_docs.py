"""The docs a newcomer reads stay true to the code: the generated references are current, every
script a figure names exists, every relative link lands, and the README keeps the blocks CI runs.

docs/cli.md and docs/exit-codes.md are regenerated here in memory (``scripts/gen_docs.py``) and
compared with the committed files. Links are checked as GitHub renders them: a path relative to the
page, and an anchor that is the slug of one of the target page's headings.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import scriptmodule

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
SCRIPT = re.compile(r"\bscripts/[A-Za-z0-9_./-]+\.(?:py|sh)\b")


def _gen_docs():
    return scriptmodule.load("gen_docs")


def _prose(text: str) -> str:
    """The page without its fenced code blocks (a link-shaped string in a console example is not a link)."""
    return FENCE.sub("", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|<[^>]+>", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found, seen = set(), {}
    for line in _prose(path.read_text()).splitlines():
        match = re.match(r"#{1,6} (.+)", line)
        if match:
            base = slug(match.group(1))
            count = seen.get(base, 0)
            found.add(base if count == 0 else f"{base}-{count}")
            seen[base] = count + 1
    return found


@pytest.mark.parametrize("name", ["cli.md", "exit-codes.md"])
def test_the_generated_references_are_current(name):
    gen = _gen_docs()
    path = ROOT / "docs" / name
    build = {"cli.md": gen.cli_page, "exit-codes.md": gen.exit_codes_page}[name]
    assert path.exists(), f"docs/{name} is missing: run `python scripts/gen_docs.py`"
    assert path.read_text() == build(), f"docs/{name} is stale: run `python scripts/gen_docs.py`"


def test_the_generator_does_not_depend_on_the_terminal(monkeypatch):
    gen = _gen_docs()
    first = gen.cli_page()
    monkeypatch.setenv("COLUMNS", "37")
    assert gen.cli_page() == first


def test_the_cli_reference_names_every_command_and_option():
    from tfgpu.cli.parser import COMMANDS, build_parser

    page = (ROOT / "docs" / "cli.md").read_text()
    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    for name in COMMANDS:
        assert f"\n## {name}\n" in page
        for action in sub.choices[name]._actions:
            for flag in action.option_strings:
                if flag in ("-h", "--help"):
                    continue
                assert f"`{flag}" in page, (name, flag)


def test_every_script_the_docs_name_exists():
    missing = sorted(
        f"{page.relative_to(ROOT)}: {name}"
        for page in PAGES
        for name in set(SCRIPT.findall(page.read_text()))
        if not (ROOT / name).is_file()
    )
    assert missing == []


def test_every_relative_link_lands_on_a_file_and_heading():
    broken = []
    for page in PAGES:
        for target in LINK.findall(_prose(page.read_text())):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            destination = (page.parent / file).resolve() if file else page
            if not destination.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert broken == []


def test_the_readme_is_short_and_keeps_the_blocks_ci_runs():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 260
    for block in ("<!-- setup-command -->\n```bash\n", "<!-- test-command -->\n```bash\n"):
        assert block in text
    assert "pip install -e '.[test]' && python -m pytest" in text


def test_every_docs_page_is_linked_from_the_readme():
    readme = (ROOT / "README.md").read_text()
    unlinked = sorted(
        str(page.relative_to(ROOT))
        for page in (ROOT / "docs").rglob("*.md")
        if f"({page.relative_to(ROOT)}" not in readme
    )
    assert unlinked == []


def test_sub_commands_and_epilogs_get_their_own_sections():
    """Commands other branches add (``cache info|clean|prune``, examples in an epilog) are walked
    the same way: a sub-command of a command is a section of its own, an epilog is kept whole."""
    import argparse

    gen = _gen_docs()
    parser = argparse.ArgumentParser(prog="tfgpu-install")
    commands = parser.add_subparsers()
    cache = commands.add_parser(
        "cache",
        help="the cache",
        epilog="Examples:\n  tfgpu-install cache info\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    info = cache.add_subparsers().add_parser("info", help="sizes by kind")
    info.add_argument("--json", action="store_true", help="one JSON document")
    text = "\n".join(gen._command("cache", cache, "the cache", 2))
    assert "\n## cache\n" in text and "\n### cache info\n" in text
    assert "```text\nExamples:\n  tfgpu-install cache info\n```" in text
    assert "| `--json` | one JSON document |  |" in text


def test_the_exit_code_page_lists_every_registered_code():
    from tfgpu import errors

    page = (ROOT / "docs" / "exit-codes.md").read_text()
    assert all(f"| `{code}` |" in page for code in [*errors.CODES, *errors.VERIFY_CODES])


def _gen_test_map():
    return scriptmodule.load("gen_test_map")


def test_the_module_to_tests_map_is_current():
    gen = _gen_test_map()
    page = ROOT / "docs" / "maintainers" / "tests.md"
    current = page.read_text(encoding="utf-8")
    assert gen.HEADING in current, "docs/maintainers/tests.md has no map: run `python scripts/gen_test_map.py`"
    assert gen.page(current) == current, (
        "docs/maintainers/tests.md's map is stale: run `python scripts/gen_test_map.py`"
    )


def test_the_module_to_tests_map_reads_imports_names_and_helpers(tmp_path):
    """The map is derived from a tree, not from a list: a package and tests made here, with each way a
    test file covers a module (an import, a name in its text, a helper it imports, a module imported
    from its package), and a tier marker."""
    gen = _gen_test_map()
    package, tests = tmp_path / "tfgpu", tmp_path / "tests"
    for name in ("__init__.py", "alone.py", "named.py", "room/__init__.py", "room/part.py", "room/other.py"):
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text("")
    tests.mkdir()
    (tests / "helper.py").write_text("from tfgpu.room import other\n")
    (tests / "test_one.py").write_text(
        'import pytest\nimport helper\nfrom tfgpu.room import part, thing\n\n\n@pytest.mark.slow\ndef test_x():\n    """Holds tfgpu/named.py (and tfgpu.toml, the project file, which is no module)."""\n'
    )
    (tests / "test_two.py").write_text("def test_y():\n    from tfgpu import __version__\n")
    covered, markers = gen.coverage(package, tests)
    assert covered == {
        "tfgpu": ["tests/test_two.py"],
        "tfgpu.alone": [],
        "tfgpu.named": ["tests/test_one.py"],
        "tfgpu.room": ["tests/test_one.py"],
        "tfgpu.room.part": ["tests/test_one.py"],
        "tfgpu.room.other": ["tests/test_one.py"],
    }
    assert "slow" in markers["tests/test_one.py"]
    assert gen.tests_of("tfgpu/room/part.py", package, tests) == ["tests/test_one.py"]
    section = gen.section(package, tests)
    assert "| `tfgpu/alone.py` | none names it |" in section
    assert "| `tfgpu/room/part.py` | `test_one.py` (slow) |" in section


def test_every_test_the_design_page_names_exists():
    """docs/maintainers/design.md says which test holds each door and rule: every test file and test
    it names is there, so a rename that leaves the page behind fails here."""
    text = (ROOT / "docs" / "maintainers" / "design.md").read_text(encoding="utf-8")
    named = re.findall(r"`(?:tests/)?((?:hostile/)?test_\w+\.py)(?:::(\w+))?`", text)
    assert len(named) >= 10
    for file, test in named:
        found = [p for p in (ROOT / "tests" / file, ROOT / "tests" / "hostile" / file) if p.exists()]
        assert found, f"design.md names {file}, which is not in tests/"
        if test:
            source = found[0].read_text(encoding="utf-8")
            assert re.search(rf"^def {test}\(", source, re.M), f"design.md names {file}::{test}, which is not there"
