"""Malformed and impossible input: the documented exit code, a one-paragraph message, a way
forward, no traceback, and with --json exactly one JSON document on stdout.

Runs the real console script in a subprocess (no detection: --no-detect where selectors apply).
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

BASE = ["--no-detect"]
# (argv, exit code, error code)
CASES = [
    # malformed: exit 2
    (["plan", "--tf", "2.x"], 2, "bad-tf-spec"),
    (["plan", "--tf", "two.thirteen"], 2, "bad-tf-spec"),
    (["plan", "--tf", "2..13"], 2, "bad-tf-spec"),
    (["plan", "--tf", ">=2.15,<"], 2, "bad-tf-spec"),
    (["plan", "--tf", "tensorflow==2.13"], 2, "bad-tf-spec"),
    (["plan", "--tf", ""], 2, "bad-tf-spec"),
    (["plan", "--driver", "12.2"], 2, "bad-driver-version"),
    (["plan", "--driver", "latest"], 2, "bad-driver-version"),
    (["plan", "--driver", "535.104.05.1"], 2, "bad-driver-version"),
    (["plan", "--driver", "-1"], 2, "bad-driver-version"),
    (["plan", "--gpu-cc", "ampere"], 2, "bad-compute-capability"),
    (["plan", "--gpu-cc", "99.0"], 2, "bad-compute-capability"),
    (["plan", "--python", "3"], 2, "bad-python-version"),
    (["plan", "--python", "4.0"], 2, "bad-python-version"),
    (["plan", "--python", "latest"], 2, "bad-python-version"),
    (["plan", "--mode", "docker"], 2, "bad-option-value"),
    (["plan", "--os", "solaris"], 2, "bad-option-value"),
    (["plan", "--arch", "riscv64"], 2, "bad-option-value"),
    (["plan", "--frobnicate"], 2, "bad-arguments"),
    (["plan", "--os", "macos", "--driver", "535.104.05"], 2, "conflicting-options"),
    (["frobnicate"], 2, "unknown-command"),
    ([], 2, "missing-command"),
    (["create", "--tf", "2.13", "--name", "a", "--prefix", "/tmp/x"], 2, "bad-arguments"),
    (["create", "--tf", "2.13", "--name", "../evil"], 2, "bad-env-name"),
    (["create", "--tf", "2.13", "--mode", "pip", "--engine", "micromamba"], 2, "conflicting-options"),
    (["create", "--tf", "2.13", "--mode", "conda", "--engine", "docker"], 2, "bad-option-value"),
    (["create", "--tf", "2.13", "--mode", "pip", "--channel", "https://x"], 2, "conflicting-options"),
    (["create", "--from-lock", "a", "--from-bundle", "b"], 2, "bad-arguments"),
    (["script", "--tf", "2.13"], 2, "bad-arguments"),
    (["lock", "--tf", "2.13"], 2, "bad-arguments"),
    (["remove"], 2, "bad-arguments"),
    # impossible: exit 3
    (["plan", "--tf", "2.16.0"], 3, "unknown-tf-version"),
    (["plan", "--tf", "2.22"], 3, "unknown-tf-version"),
    (["plan", "--tf", "1.15"], 3, "unknown-tf-version"),
    (["plan", "--tf", ">=3"], 3, "unknown-tf-version"),
    (["plan", "--tf", "2.13", "--os", "windows", "--arch", "x86_64"], 3, "windows-native-gpu-unsupported"),
    (["plan", "--tf", "2.17", "--os", "linux", "--arch", "aarch64"], 3, "no-gpu-build"),
    (["plan", "--os", "windows", "--arch", "aarch64"], 3, "no-gpu-build"),
    (["plan", "--tf", "2.21", "--os", "linux", "--arch", "x86_64", "--driver", "470.82.01"], 3, "driver-too-old"),
    (["plan", "--driver", "390.48", "--os", "linux", "--arch", "x86_64"], 3, "driver-too-old"),
    (["plan", "--tf", "2.17", "--os", "linux", "--arch", "x86_64", "--gpu-cc", "3.5"], 3, "gpu-too-old"),
    (["plan", "--tf", "2.21", "--os", "linux", "--arch", "x86_64", "--python", "3.8"], 3, "python-unsupported"),
    (["plan", "--os", "linux", "--arch", "x86_64", "--python", "3.14"], 3, "python-unsupported"),
    (["plan", "--tf", "2.9", "--mode", "pip", "--os", "linux", "--arch", "x86_64"], 3, "no-pip-cuda-wheels"),
    (["plan", "--tf", "2.16", "--mode", "system", "--os", "macos", "--arch", "aarch64"], 3, "mode-unsupported"),
    (["create", "--tf", "2.30", "--mode", "conda", "--dry-run"], 3, "unknown-tf-version"),
    # conda, locks, bundles, exports
    (
        [
            "create",
            "--tf",
            "2.21",
            "--mode",
            "conda",
            "--tf-source",
            "conda-forge",
            "--os",
            "linux",
            "--arch",
            "x86_64",
            "--dry-run",
        ],
        3,
        "no-conda-forge-build",
    ),
    (
        ["create", "--tf", "2.13", "--mode", "conda", "--channel", "/nonexistent/channel", "--dry-run"],
        3,
        "unknown-channel",
    ),
    (["lock", "--tf", "2.13", "--platform", "linux64"], 2, "bad-platform"),
    (["lock", "--tf", "2.13", "--platform", "linux-64", "-o", "/proc/x/team.txt"], 3, "bad-output"),
    (
        ["lock", "--tf", "2.13", "--mode", "conda", "--platform", "linux-64", "-o", "/proc/x/conda-lock.yml"],
        3,
        "bad-output",
    ),
    (["bundle", "--tf", "2.13", "--platform", "linux-64", "-o", "/proc/x/bundle"], 3, "bad-output"),
    (["lock", "--tf", "2.13", "--platform", "linux-64", "--channel", "conda-forge"], 2, "conflicting-options"),
    (["create", "--from-lock", "/nonexistent/team.txt", "--prefix", "/tmp/x"], 2, "lock-unreadable"),
    (["create", "--from-bundle", "/nonexistent/bundle", "--prefix", "/tmp/x"], 3, "bundle-incomplete"),
    (
        [
            "script",
            "--tf",
            "2.13",
            "--format",
            "bash",
            "--os",
            "linux",
            "--arch",
            "x86_64",
            "-o",
            "/nonexistent/dir/x.sh",
        ],
        3,
        "bad-output",
    ),
    # environments that are not there
    (["doctor", "--prefix", "/nonexistent/env"], 3, "no-such-env"),
    (["doctor", "--log", "/nonexistent/train.log"], 2, "bad-log-file"),
    (["verify", "--prefix", "/nonexistent/env"], 3, "no-such-env"),
    (["verify"], 2, "missing-location"),
    (["remove", "--prefix", "/nonexistent/env"], 3, "no-such-env"),
    (["create", "--tf", "2.21", "--mode", "pip", "--find-links", "/nonexistent/wheels"], 2, "bad-find-links"),
]


def tfgpu(*argv: str) -> subprocess.CompletedProcess:
    from conftest import run_tool

    return run_tool(*argv, env=dict(os.environ, COLUMNS="120"))


def _argv(argv: list[str]) -> list[str]:
    takes_selectors = bool(argv) and argv[0] in ("plan", "create", "lock", "bundle", "script")
    return [*argv, *BASE] if takes_selectors and "--frobnicate" not in argv else argv


@pytest.mark.parametrize("argv,exit_code,code", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_error_text(argv, exit_code, code):
    done = tfgpu(*_argv(argv))
    assert done.returncode == exit_code, done.stderr
    assert "Traceback" not in done.stderr
    assert f"error: {code}" in done.stderr
    assert "→" in done.stderr, "the message names a way forward"


@pytest.mark.parametrize("argv,exit_code,code", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_error_json(argv, exit_code, code):
    done = tfgpu(*_argv(argv), "--json")
    assert done.returncode == exit_code, done.stderr
    document = json.loads(done.stdout)
    assert document["error"]["code"] == code
    assert document["error"]["message"]
    assert document["error"]["alternatives"]
    assert document["error"]["exit_code"] == exit_code


def test_help_and_version():
    assert tfgpu("--help").returncode == 0
    assert "tfgpu-install" in tfgpu("--version").stdout


# A typo is answered with the word the parser knows (its own option strings and command names),
# and an unknown option names the help of the command that was given, which lists its options.
TYPOS = [
    (["--tf", "2.21", "--mod", "pip"], "Did you mean --mode?", "`tfgpu-install create --help`"),
    (["plan", "--mod=pip"], "Did you mean --mode?", "`tfgpu-install plan --help`"),
    (["plan", "--jsn"], "Did you mean --json?", "`tfgpu-install plan --help`"),
    (["verify", "--nme", "x"], "Did you mean --name?", "`tfgpu-install verify --help`"),
    (["plan", "--name", "x"], "--name is an option of create,", "`tfgpu-install plan --help`"),
    (["verfy"], "Did you mean verify?", "`tfgpu-install verify --help`"),
    (["cache", "prnue"], "Did you mean prune?", "`tfgpu-install cache --help`"),
]


@pytest.mark.parametrize("argv,meant,help_line", TYPOS, ids=[" ".join(t[0]) for t in TYPOS])
def test_a_typo_is_answered_with_the_word_meant(argv, meant, help_line):
    done = tfgpu(*argv)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert meant in done.stderr
    assert help_line in done.stderr
    error = json.loads(tfgpu(*argv, "--json").stdout)["error"]
    assert meant in error["message"] and any(help_line in line for line in error["alternatives"])


def test_each_unknown_word_is_answered_once_and_named_when_there_are_several():
    done = tfgpu("plan", "--tf", "2.21", "--drvier", "1", "--drvier", "2", "--drvier=3")
    assert done.returncode == 2
    assert done.stderr.count("Did you mean --driver?") == 1, done.stderr
    done = tfgpu("plan", "--tf", "2.21", "--drvier", "1", "--jsn", "--drvier", "2")
    assert done.returncode == 2
    assert done.stderr.count("--drvier: did you mean --driver?") == 1, done.stderr
    assert done.stderr.count("--jsn: did you mean --json?") == 1, done.stderr


def test_a_word_far_from_every_option_gets_no_guess():
    done = tfgpu("plan", "--frobnicate")
    assert done.returncode == 2
    assert "Did you mean" not in done.stderr
    assert "`tfgpu-install plan --help`" in done.stderr
    done = tfgpu("instal")
    assert done.returncode == 2 and "error: unknown-command" in done.stderr
    assert "Did you mean" not in done.stderr


def test_the_suggestions_come_from_the_parser():
    """Every option any command takes, misspelt by one dropped letter, is suggested back as itself
    (or as an option no farther from the typo), and every command likewise."""
    from tfgpu.cli import typos
    from tfgpu.cli.parser import COMMANDS, build_parser

    commands = build_parser().commands.choices
    for name, parser in commands.items():
        taken = typos.option_strings(parser)
        for option in (o for o in taken if o.startswith("--") and len(o) > 5):
            typo = option[:-2] + option[-1]
            assert typos.closest(typo, taken) is not None, (name, typo)
    for command in COMMANDS:
        if len(command) > 3:
            assert typos.closest(command[:-2] + command[-1], COMMANDS) == command
