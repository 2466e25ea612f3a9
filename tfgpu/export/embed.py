"""The tool's own files inside a generated shell script, as quoted heredocs a reviewer can read.

A generated script that needs a program or a template of tfgpu-install on the target (the pip
mode's activation module and the load hook it writes, the verification snippet, the Slurm
preflight) carries it line for line in a quoted heredoc (``<<'DELIM'``: the shell expands
nothing inside). The delimiter is chosen per file so that no line of the content is the
delimiter: a line equal to it would end the heredoc early and run the rest as shell commands.
Only package data of tfgpu-install goes through here (``tfgpu.doors.untrusted.package_text``); values
from users or data tables are quoted by ``tfgpu.doors.quoting`` instead.
"""

from __future__ import annotations

import json
import re

from tfgpu.doors import untrusted
from tfgpu.resolver import tables

_DELIMITER = re.compile(r"[A-Z][A-Z0-9_]*")

ACTIVATION_FILES = (
    ("tfgpu.envs", "activation.py"),
    ("tfgpu.envs", "templates", "activate.sh"),
    ("tfgpu.envs", "templates", "activate.fish"),
    ("tfgpu.envs", "templates", "cuda_hook.py"),
    ("tfgpu.export", "templates", "activate_env.py"),
)
"""What the pip-mode script writes into a temporary directory to set up the env's activation:
tfgpu-install's activation module, the templates it fills, and the program that runs it."""


def delimiter(text: str, base: str) -> str:
    """``base``, or ``base_2``, ``base_3``...: the first that occurs nowhere in ``text``.

    Not only no line equal to it (what would end the heredoc) but no occurrence at all, so that a
    reader never wonders which line ends the heredoc."""
    if not _DELIMITER.fullmatch(base):
        raise ValueError(f"heredoc delimiter {base!r} is not an upper-case word")
    candidate, number = base, 1
    while candidate in text:
        number += 1
        candidate = f"{base}_{number}"
    return candidate


def heredoc(text: str, base: str) -> str:
    """``<<'DELIM'`` + newline + ``text`` + newline + ``DELIM``, with a delimiter absent from ``text``."""
    end = delimiter(text, base)
    return f"<<'{end}'\n{text.rstrip()}\n{end}"


def file_heredoc(path_expr: str, text: str, base: str) -> str:
    """A ``cat >PATH <<'DELIM'`` command that writes ``text`` to ``path_expr`` (a shell expression)."""
    return f"cat >{path_expr} {heredoc(text, base)}"


def activation_files() -> list[tuple[str, str]]:
    """(file name, text) of :data:`ACTIVATION_FILES`, read from this installation of tfgpu-install,
    and ``dlopened.json``: the names CUDA libraries dlopen without a version (sonames.toml), so the
    exported env gets the same links inside it as one ``create`` builds (a closed env)."""
    rows = [{key: row[key] for key in ("name", "provides", "caller", "runpath")} for row in tables.dlopened_names()]
    files = [(parts[-1], untrusted.package_text(*parts)) for parts in ACTIVATION_FILES]
    return files + [("dlopened.json", json.dumps(rows, indent=1, sort_keys=True))]


def write_activation_function() -> str:
    """The bash function ``write_activation PYTHON PREFIX``: writes :data:`ACTIVATION_FILES` into a
    temporary directory, runs ``activate_env.py`` with the env's Python, removes the directory, and
    prints the program's one-line JSON report (which files changed)."""
    lines = [
        "# write_activation PYTHON PREFIX: tfgpu-install's own activation module and templates, below",
        "# as written when this script was generated, run with the env's Python (idempotent).",
        "write_activation() {",
        "    local files status=0",
        '    files="$(mktemp -d)"',
    ]
    for name, text in activation_files():
        base = "TFGPU_" + re.sub(r"[^A-Z0-9]+", "_", name.upper())
        lines.append("    " + file_heredoc(f'"$files/{name}"', text, base))
    lines += [
        '    "$1" "$files/activate_env.py" "$2" "$files" || status=$?',
        '    rm -rf "$files"',
        '    return "$status"',
        "}",
    ]
    return "\n".join(lines)
