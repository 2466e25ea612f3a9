"""Tests that fail when code goes around a door for option values, lock records and versions:
every option that names a file or directory is read through ``tfgpu.doors.paths.user_path``, both lock
readers hand their record to ``check_record``, and the version parsers that take outside text are
the bounded ones of ``tfgpu.versions``.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import pytest

import tfgpu
from tfgpu.cli.parser import build_parser
from tfgpu.errors import UsageError

ROOT = Path(tfgpu.__file__).parent


def _options(parser: argparse.ArgumentParser, prog: str = "tfgpu-install"):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _options(sub, f"{prog} {name}")
        elif action.option_strings:
            yield prog, action


def test_every_option_that_names_a_path_is_read_through_user_path():
    """An option whose value is a FILE, DIR, PATH (or a channel, which may be a directory) has the
    path door as its ``type``: a 300-byte name is ``bad-path`` when the option is read."""
    pathlike = [
        (prog, action)
        for prog, action in _options(build_parser())
        if action.metavar in ("FILE", "DIR", "PATH") or "--channel" in action.option_strings
    ]
    assert len(pathlike) >= 8
    for prog, action in pathlike:
        assert action.type is not None, f"{prog} {action.option_strings[0]} is read without the path door"
        with pytest.raises(UsageError) as refused:
            action.type("x" * 300)
        assert refused.value.code == "bad-path"


def test_both_lock_readers_check_their_record(monkeypatch, tmp_path):
    """A pip lock's read and a conda lock's resolution go through lock.selectors.check_record."""
    for relative, caller in (("lock/pip/lockfile.py", "_check_shape"), ("lock/conda/read.py", "resolution")):
        tree = ast.parse((ROOT / relative).read_text(encoding="utf-8"))
        function = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == caller)
        calls = {n.func.id for n in ast.walk(function) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        assert "check_record" in calls, f"{relative}:{caller} uses a lock's record without check_record"


OUTSIDE_TEXT = (
    "resolver/request.py",
    "data/schema.py",
    "lock/selectors.py",
    "lock/pip/lockfile.py",
    "lock/check.py",
    "lock/pip/check.py",
    "lock/conda/check.py",
    "lock/conda/read.py",
)


@pytest.mark.parametrize("relative", OUTSIDE_TEXT)
def test_outside_versions_are_parsed_by_the_bounded_parser(relative):
    """Where outside text (options, project files, overlays, lock records) becomes a version, it is
    ``tfgpu.versions``' job: ``packaging``'s own classes raise ValueError on 4300+ digit numbers."""
    source = (ROOT / relative).read_text(encoding="utf-8")
    assert "InvalidVersion" not in source and "InvalidSpecifier" not in source, relative


def test_the_version_parser_is_bounded():
    from tfgpu import versions

    assert versions.version("2." + "1" * 5000) is None
    assert versions.specifier(">=2." + "1" * 5000) is None
    assert versions.version("2.15.1") is not None and versions.specifier(">=2.15,<2.18") is not None
    assert not versions.is_canonical_release("2.21.0/../x")
