"""The output contract (docs/output.md): piped output is plain text, whole, never truncated;
an 80-column terminal gets tables that fold and commands that stay whole; every option has help.

``run_tool`` captures stdout and stderr, so the tool sees no terminal: that is the piped case.
``TTY_COMPATIBLE=1 COLUMNS=80`` makes rich (which decides what a terminal is) see an 80-column one.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import run_tool

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
PIP = ("--tf", "2.21", "--mode", "pip", "--python", "3.11")
SYSTEM = (
    "--tf",
    "2.21",
    "--mode",
    "system",
    "--python",
    "3.11",
    "--driver",
    "580.65.06",
    "--os",
    "linux",
    "--arch",
    "x86_64",
)


def terminal(columns: int = 80) -> dict[str, str]:
    return dict(os.environ, TTY_COMPATIBLE="1", COLUMNS=str(columns))


def piped(columns: int = 80) -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key not in ("TTY_COMPATIBLE", "FORCE_COLOR")} | {
        "COLUMNS": str(columns)
    }


def commands(text: str) -> list[list[str]]:
    """Every ``$ command`` line of a dry run, split as a shell would (environment assignments dropped)."""
    found = []
    for line in ANSI.sub("", text).splitlines():
        if line.startswith("  $ "):
            words = shlex.split(line[4:])
            while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
                words.pop(0)
            found.append(words)
    return found


def test_piped_matrix_is_plain_and_whole():
    done = run_tool("matrix", env=piped())
    assert done.returncode == 0
    assert "…" not in done.stdout and "\x1b[" not in done.stdout
    assert not any(char in done.stdout for char in "│┃━─╭")
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines()[2:]}
    assert rows["2.21.0"][1:5] == ["3.10–3.13", "12.5.1", "9.3", "525.60.13"]
    assert all(line == line.rstrip() for line in done.stdout.splitlines())


def test_an_80_column_terminal_folds_the_matrix_and_cuts_nothing():
    done = run_tool("matrix", env=terminal(80))
    text = ANSI.sub("", done.stdout)
    assert "\x1b[" in done.stdout  # it did render for a terminal
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80
    row = next(line for line in text.splitlines() if line.startswith("2.21.0"))
    assert row.split()[:5] == ["2.21.0", "3.10–3.13", "12.5.1", "9.3", "525.60.13"]  # values stay whole


@pytest.mark.parametrize("env", [piped(80), terminal(80)], ids=["piped", "terminal"])
def test_dry_run_commands_are_exactly_the_steps(tmp_path, env):
    """Each printed command, split as a shell would, is the step's argv: nothing wrapped or cut."""
    env = env | {"TFGPU_CACHE_DIR": str(tmp_path / "a cache"), "TFGPU_ENVS_DIR": str(tmp_path / "envs")}
    prefix = tmp_path / "deep" / ("a-rather-long-directory-name-" * 3) / "env"
    human = run_tool("--prefix", str(prefix), *PIP, "--dry-run", env=env)
    steps = json.loads(run_tool("--prefix", str(prefix), *PIP, "--dry-run", "--json", env=env).stdout)["steps"]
    assert human.returncode == 0, human.stderr
    assert commands(human.stdout) == [step["argv"] for step in steps if step["argv"]]
    assert "…" not in human.stdout
    written = [
        line.strip().removeprefix("writes ")
        for line in ANSI.sub("", human.stdout).splitlines()
        if line.startswith("  writes ")
    ]
    assert written == [path for step in steps for path in step["writes"]]


def test_system_dry_run_prints_every_url_whole(tmp_path):
    env = piped(80) | {"TFGPU_CACHE_DIR": str(tmp_path / "cache")}
    done = run_tool("--prefix", str(tmp_path / "env"), *SYSTEM, "--dry-run", env=env)
    plan = json.loads(run_tool("plan", *SYSTEM, "--json", env=env).stdout)
    assert done.returncode == 0, done.stderr
    assert plan["packages"]["downloads"] and "…" not in done.stdout
    for url in plan["packages"]["downloads"]:
        assert url in done.stdout.split()  # a whole word: the packages table and the download steps
    assert commands(done.stdout)[0][:2] == [
        "sh",
        str(tmp_path / "cache" / "downloads" / Path(plan["packages"]["downloads"][0]).name),
    ]


def test_the_printed_dry_run_builds_the_env(tmp_path, local_wheels, tool_env):
    """Copy and paste: the files the dry run shows, then its commands, one by one, each exit 0."""
    env = tool_env | {"COLUMNS": "80"}
    prefix = tmp_path / "env"
    done = run_tool("--prefix", str(prefix), *PIP, "--find-links", str(local_wheels), "--offline", "--dry-run", env=env)
    assert done.returncode == 0, done.stderr
    ran, target, content = 0, None, []

    def write() -> None:
        if target is not None and content:
            Path(target).parent.mkdir(parents=True, exist_ok=True)
            Path(target).write_text("\n".join(content) + "\n")

    for line in done.stdout.splitlines():
        if re.match(r"^\s*\d+\. ", line):
            write()
            target, content = None, []
        elif line.startswith("  writes ") and target is None:
            target = line.removeprefix("  writes ")
        elif line.startswith("    | "):
            content.append(line.removeprefix("    | "))
        elif line.startswith("  $ "):
            write()
            target, content = None, []
            argv = shlex.split(line[4:])
            result = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
            assert result.returncode == 0, (argv, result.stderr[-2000:])
            ran += 1
    assert ran == 4  # uv venv, uv pip compile, uv pip install, uv pip list
    staging = prefix.parent / f".{prefix.name}.tfgpu-staging"
    assert (staging / "lib" / "python3.11" / "site-packages" / "tensorflow" / "__init__.py").is_file()
    shutil.rmtree(staging)


def test_errors_keep_their_commands_whole_on_a_narrow_terminal(tmp_path):
    long = tmp_path / ("x" * 70) / "env"
    long.mkdir(parents=True)
    (long / "file").write_text("")
    done = run_tool("create", *PIP, "--prefix", str(long), "--no-detect", "--os", "linux", env=terminal(60))
    text = ANSI.sub("", done.stderr)
    assert done.returncode == 3 and "error: target-not-empty" in text
    assert str(long) in text  # one line, not broken at 60 columns


def test_the_machine_panel_is_shown_only_for_this_machine():
    here = run_tool("plan", "--tf", "2.21", env=piped())
    mac = run_tool("plan", "--tf", "2.16", "--os", "macos", "--arch", "aarch64", env=piped())
    windows = run_tool("plan", "--tf", "2.10", "--mode", "conda", "--os", "windows", "--arch", "x86_64", env=piped())
    assert here.stdout.startswith("this machine")
    for done in (mac, windows):
        assert done.returncode == 0, done.stderr
        assert "this machine" not in done.stdout and done.stdout.startswith("tfgpu-install plan")


def _options(parser: argparse.ArgumentParser, path: str = "tfgpu-install"):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _options(sub, f"{path} {name}")
        elif not isinstance(action, argparse._HelpAction):
            yield path, "/".join(action.option_strings) or action.dest, action


def test_every_option_of_every_command_has_help():
    from tfgpu.cli.parser import build_parser

    found = list(_options(build_parser()))
    assert len(found) > 60
    missing = [
        f"{path} {name}"
        for path, name, action in found
        if action.option_strings and (not action.help or action.help == argparse.SUPPRESS)
    ]
    assert missing == []


def test_help_offers_only_the_modes_a_command_takes():
    from tfgpu.cli.parser import build_parser

    for command in ("lock", "bundle"):
        [mode] = [
            action
            for path, name, action in _options(build_parser())
            if path == f"tfgpu-install {command}" and name == "--mode"
        ]
        assert "system" not in mode.help and "pip or conda" in mode.help
        refused = run_tool(
            command,
            "--tf",
            "2.21",
            "--mode",
            "system",
            "--platform",
            "linux-64",
            "-o",
            "/nonexistent/out",
            "--no-detect",
        )
        assert refused.returncode == 2 and "system" in refused.stderr
    helps = {action.help for path, name, action in _options(build_parser()) if name == "--yes/-y"}
    assert len(helps) == 1 and "never asks" in helps.pop()  # one definition: the same words on every command


def test_the_modes_page_lists_the_steps_a_dry_run_prints():
    page = (Path(__file__).resolve().parents[1] / "docs" / "modes.md").read_text()
    section = page.split("## pip mode", 1)[1].split("## System mode", 1)[0]
    listed = re.findall(r"^\s*\d+\. \*\*([^*]+)\*\*", section, re.M)
    done = run_tool(
        "--tf",
        "2.21",
        "--mode",
        "pip",
        "--python",
        "3.11",
        "--prefix",
        "/tmp/tfgpu-readme-env",
        "--dry-run",
        "--json",
        "--no-detect",
        "--os",
        "linux",
    )
    titles = [step["title"] for step in json.loads(done.stdout)["steps"]]
    assert len(listed) == len(titles) == 10
    assert all(title.startswith(name.rstrip(".")) for name, title in zip(listed, titles, strict=True)), (listed, titles)


def test_no_printed_line_ends_in_an_ellipsis():
    """'…' reads as "cut here": no output uses it, not even for a range of releases."""
    for argv in (
        ("plan", "--driver", "470.82.01", "--no-detect", "--os", "linux", "--arch", "x86_64"),
        ("plan", "--tf", "2.21", "--mode", "system", "--driver", "580.65.06", "--no-detect", "--os", "linux"),
        ("matrix", "--all"),
    ):
        for env in (piped(), terminal(80)):
            done = run_tool(*argv, env=env)
            assert done.returncode == 0 and "…" not in done.stdout + done.stderr, argv


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "--tf", "2.13", "--mode", "conda", "--json"],
        ["create", "--tf", "2.15", "--name", "x", "--no-verify", "--channel", "conda-forge"],
        ["lock", "--platform", "linux-64", "--output", "l.yml"],
        ["repair", "--undo", "--json"],
        ["completion", "zsh"],
        ["matrix", "--all"],
    ],
)
def test_a_run_builds_only_its_command_and_reads_the_same(argv):
    """One run builds its own command's parser only (or reads the line without argparse,
    ``tfgpu.cli.grammar.quick``); it must read argv exactly as the whole grammar does, and refuse
    what the whole grammar refuses with the same words."""
    from tfgpu.cli.grammar import quick
    from tfgpu.cli.parser import build_parser, parse
    from tfgpu.errors import UsageError

    whole = build_parser()
    assert vars(parse(argv)) == vars(whole.parse_args(argv))
    assert quick(argv) in (None, vars(whole.parse_args(argv)))
    refused = []
    for run in (parse, whole.parse_args):
        with pytest.raises(UsageError) as error:
            run([*argv, "--no-such-option"])
        refused.append(error.value.message)
    assert refused[0] == refused[1]
    assert quick([*argv, "--no-such-option"]) is None


@pytest.mark.parametrize("columns", [None, "100", "0", "-3", "wide", "40"])
def test_help_is_as_wide_as_argparse_makes_it(monkeypatch, columns):
    """The parser's formatter measures the terminal without shutil, and gets shutil's answer."""
    import shutil

    from tfgpu.cli.parser import _columns

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert _columns() == shutil.get_terminal_size().columns


PLAN_WITH_WARNINGS = ("plan", "--tf", "2.21", "--mode", "pip", "--driver", "580.0", "--gpu-cc", "8.6", "--no-detect")


def test_warnings_wrap_at_spaces_on_an_80_column_terminal_and_keep_commands_whole():
    """A warning is prose: on a terminal it is wrapped between words (the terminal would cut a word
    in two), a `command` in it stays on one line; piped, each warning is one line as before."""
    done = run_tool(*PLAN_WITH_WARNINGS, env=terminal(80))
    lines = ANSI.sub("", done.stdout).splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("warning runpath-missing-cusolver: "))
    block = lines[first : next(i for i in range(first + 1, len(lines)) if not lines[i].startswith("  "))]
    assert len(block) > 3 and all(len(line) < 80 for line in block), block
    words = " ".join(line.strip() for line in block).split()
    assert "libtensorflow_framework.so.2)" in words and "libcusolver.so.11')." in words  # no word cut in two
    assert any("`pip install tensorflow[and-cuda]==2.21.0`" in line for line in block)
    piped_lines = run_tool(*PLAN_WITH_WARNINGS, env=piped(80)).stdout.splitlines()
    warning = next(line for line in piped_lines if line.startswith("warning runpath-missing-cusolver: "))
    assert warning.endswith("libcusolver.so.11').")
