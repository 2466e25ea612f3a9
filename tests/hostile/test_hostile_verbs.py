"""Attacks on the entering verbs (``run``, ``activate``, ``shell``) that broke them: each case is the
next input over from what the verbs' own tests hold. The promises: data never becomes shell code
(the ``sandbox`` fixture fails the test when a ``PWNED`` file appears), the env's variables arrive
exactly as activation sets them, no traceback and no memory exhaustion (a clear documented error).

``run`` hands the terminal to a child, so these run the tool as a child process (``tool``), or with
``subprocess`` directly where raw bytes or a memory limit are the point.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import changed, snapshot


@pytest.fixture(autouse=True)
def _no_active_env(monkeypatch):
    for name in ("VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_ENVS_PATH", "CONDA_ENVS_DIRS", "CONDA_EXE", "MAMBA_ROOT_PREFIX"):
        monkeypatch.delenv(name, raising=False)


def conda_prefix(root: Path) -> Path:
    """A bare conda prefix (conda-meta/), a plain path rattler's activation can carry."""
    prefix = root / "cenv"
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "bin").mkdir()
    return prefix


def venv_prefix(root: Path, activate: str, name: str = "venv") -> Path:
    """A hand-made venv whose bin/activate is ``activate``."""
    prefix = root / name
    (prefix / "bin").mkdir(parents=True)
    (prefix / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (prefix / "bin" / "activate").write_text(activate)
    return prefix


INJECTED_PATH_ENTRY = "/nonexistent/$(touch PWNED)`touch PWNED`"


def test_run_on_a_conda_prefix_does_not_execute_a_path_entry(tool, sandbox):
    """A directory on the user's PATH whose name holds ``$(...)``: rattler writes PATH into a
    double-quoted ``export PATH="..."`` unescaped, and ``run`` evals it in bash (tfgpu/envs/enter.py,
    ``activation_lines``/``activated_environment``). The entry must arrive as text, not run."""
    prefix = conda_prefix(sandbox)
    path = os.environ["PATH"] + ":" + INJECTED_PATH_ENTRY
    before = snapshot(sandbox)
    done = tool("run", "--prefix", str(prefix), "--", "/usr/bin/printenv", "PATH", env={"PATH": path}, timeout=60)
    assert not (sandbox / "PWNED").exists(), "a PATH entry ran as a command"
    assert done.code == 0, done.err
    assert done.out.rstrip("\n").endswith(INJECTED_PATH_ENTRY), done.out[-200:]
    assert changed(before, snapshot(sandbox), ("cache", "logs")) == []


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_activate_on_a_conda_prefix_keeps_a_path_entry_literal(tool, sandbox, shell):
    """``activate --shell S``'s lines, evaluated in the real shell, run nothing from PATH's text."""
    if not shutil.which(shell):
        pytest.skip(f"{shell} is not installed")
    prefix = conda_prefix(sandbox)
    path = os.environ["PATH"] + ":" + INJECTED_PATH_ENTRY
    done = tool("activate", "--prefix", str(prefix), "--shell", shell, env={"PATH": path}, timeout=60)
    assert done.code == 0, done.err
    script = sandbox / f"activate.{shell}"
    script.write_text(done.out)
    evaluate = f"source {script}; printenv PATH" if shell == "fish" else f". {script}; printenv PATH"
    shown = subprocess.run([shell, "-c", evaluate], cwd=sandbox, capture_output=True, text=True, timeout=30)
    assert not (sandbox / "PWNED").exists(), f"{shell} ran a PATH entry from activate's output"
    assert shown.stdout.rstrip("\n").endswith(INJECTED_PATH_ENTRY), shown.stdout[-200:] + shown.stderr[-300:]
    (sandbox / "PWNED").unlink(missing_ok=True)


def test_run_on_a_conda_prefix_keeps_env_vars_data(tool, sandbox):
    """``etc/conda/env_vars.d/*.json`` (and ``conda-meta/state``'s env_vars) are data, values as
    ``conda env config vars set`` stores them (conda exports them single-quoted). Rattler writes a
    value with ``$`` in double quotes, so ``run`` (bash) executes it."""
    prefix = conda_prefix(sandbox)
    (prefix / "etc" / "conda" / "env_vars.d").mkdir(parents=True)
    (prefix / "etc" / "conda" / "env_vars.d" / "x.json").write_text(json.dumps({"FOO": "$(touch PWNED)"}))
    done = tool("run", "--prefix", str(prefix), "--", "/usr/bin/printenv", "FOO", timeout=60)
    assert not (sandbox / "PWNED").exists(), "an env_vars.d value ran as a command"
    assert done.code == 0, done.err
    assert done.out == "$(touch PWNED)\n"


def test_run_with_an_activation_that_floods_stderr_is_a_clear_error(sandbox):
    """An activation that writes 1 GB to stderr: ``Runner.capture`` (tfgpu/process/runner.py) reads it all
    into memory and decodes it (about 3x its size) for a message that keeps 300 characters; under
    a 2 GiB address-space limit that is a MemoryError traceback, unlimited it exhausts memory."""
    prefix = venv_prefix(sandbox, "head -c 1000000000 /dev/zero >&2\n", "flood")

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 * 1024**3, 2 * 1024**3))

    done = subprocess.run(
        [sys.executable, "-m", "tfgpu", "run", "--prefix", str(prefix), "--", "/bin/true"],
        capture_output=True,
        cwd=sandbox,
        timeout=120,
        preexec_fn=limit,
    )
    err = done.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err, err[-600:]
    assert "MemoryError" not in err
    assert done.returncode in (0, 1), err[-600:]


def test_run_passes_a_non_utf8_variable_through_unchanged(sandbox):
    """A variable holding Latin-1 bytes (a file name from an old system): activation does not touch
    it, yet ``run`` hands the command U+FFFD in its place (``capture`` decodes ``env -0`` with
    errors="replace")."""
    prefix = venv_prefix(sandbox, ": an activation that sets nothing\n", "noop")
    env = {**os.environb, b"LATIN": b"caf\xe9"}
    done = subprocess.run(
        [
            sys.executable.encode(),
            b"-m",
            b"tfgpu",
            b"run",
            b"--prefix",
            bytes(prefix),
            b"--",
            b"/usr/bin/printenv",
            b"LATIN",
        ],
        capture_output=True,
        cwd=sandbox,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-400:]
    assert done.stdout == b"caf\xe9\n"


def test_run_keeps_the_users_exported_prompt_variables(tool, sandbox):
    """An activation that sets nothing: the command sees the user's environment. PS1 and PS2 are
    exported by the user, but the non-interactive bash that ``activated_environment`` runs unsets
    them (it restores only _, SHLVL, PWD, OLDPWD: tfgpu/envs/enter.py ``_BASH_OWN``)."""
    prefix = venv_prefix(sandbox, ": an activation that sets nothing\n", "noop")
    done = tool("run", "--prefix", str(prefix), "--", "/usr/bin/printenv", "PS2", env={"PS2": "more> "}, timeout=60)
    assert done.code == 0, done.err
    assert done.out == "more> \n"
