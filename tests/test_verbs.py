"""The everyday verbs: ``run``, ``activate``, ``shell``, env names completed after ``--name``, and
the examples every command's ``--help`` ends with.

The envs are real: a venv made by ``python -m venv`` (its own ``bin/activate`` and
``bin/activate.fish``) with the tool's CUDA activation written into it by
``tfgpu.envs.activation`` from a layout of empty library files (nothing loads them here), and the
tool's marker. The conda env is a prefix with ``conda-meta/`` and the tool's ``activate.d`` scripts,
since no conda runs on this machine; its activation is rattler's, as in use. The tool runs as a
process of its own (its terminal is the command's), the shells are the real bash, zsh and fish.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_process, run_tool, shells

SITE = "lib/python{}.{}/site-packages".format(*sys.version_info[:2])


def tool_venv(prefix: Path) -> Path:
    """A real venv with the tool's CUDA activation and marker (see the module docstring)."""
    import secrets

    from tfgpu.envs import activation, marker

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True)
    for component, soname in (("cuda_runtime", "libcudart.so.12"), ("cudnn", "libcudnn.so.9")):
        lib = prefix / SITE / "nvidia" / component / "lib"
        lib.mkdir(parents=True)
        (lib / soname).write_bytes(b"")
    activation.write_venv_activation(prefix, activation.read_layout(prefix, SITE))
    marker.write(
        prefix,
        env_id=secrets.token_hex(16),
        made_for=os.path.realpath(prefix),
        fields={"name": prefix.name, "mode": "pip", "tensorflow": "2.21.0", "python": "3.11", "engine": "uv"},
    )
    return prefix


def conda_prefix(prefix: Path) -> Path:
    """A conda prefix with the tool's activate.d scripts (conda itself cannot run here)."""
    from tfgpu.envs import activation

    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "bin").mkdir()
    (prefix / "lib").mkdir()
    (prefix / "lib" / "libcudart.so.12").write_bytes(b"")
    activation.write_conda_activation(prefix, activation.read_conda_layout(prefix, SITE))
    return prefix


def tool_environment(tmp_path: Path) -> dict[str, str]:
    """The tool's directories under ``tmp_path``, and a ``tfgpu-install`` on PATH (for the shells)."""
    bin_dir = tmp_path / "tool-bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "tfgpu-install"
    wrapper.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m tfgpu "$@"\n')
    wrapper.chmod(0o755)
    env = {key: value for key, value in os.environ.items() if key not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env.update(
        PATH=f"{bin_dir}:/usr/bin:/bin",
        TFGPU_ENVS_DIR=str(tmp_path / "envs"),
        TFGPU_LOG_DIR=str(tmp_path / "logs"),
        TFGPU_CACHE_DIR=str(tmp_path / "cache"),
        CONDA_ENVS_PATH=str(tmp_path / "conda-envs"),
        SHELL="/bin/bash",
    )
    env.pop("PYTHONPATH", None)
    return env


@pytest.fixture
def verbs_env(tmp_path) -> dict[str, str]:
    """``tool_environment`` of the test's own, for a test that makes its own envs."""
    return tool_environment(tmp_path)


@pytest.fixture(scope="module")
def _shared_envs(tmp_path_factory) -> Path:
    """One envs dir holding the venv ``tf2.21`` and a directory that is no env (``plain-dir``):
    what every test using ``venv`` needs, and only reads (``run`` and ``shell`` hold the env while
    the command runs, and leave nothing behind)."""
    envs = Path(tool_environment(tmp_path_factory.mktemp("verbs"))["TFGPU_ENVS_DIR"])
    tool_venv(envs / "tf2.21")
    (envs / "plain-dir").mkdir()
    return envs


@pytest.fixture
def venv(_shared_envs, verbs_env) -> Path:
    """The shared venv ``tf2.21``; ``verbs_env`` names its envs dir (the test's other directories
    stay its own: its logs, its cache)."""
    verbs_env["TFGPU_ENVS_DIR"] = str(_shared_envs)
    return _shared_envs / "tf2.21"


def environment(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.split("\0") if "=" in line)


# --- run ------------------------------------------------------------------------------------------


def test_run_gives_the_command_exactly_what_activation_sets(venv, verbs_env):
    ran = subprocess.run(
        [sys.executable, "-m", "tfgpu", "run", "--name", "tf2.21", "--", "env", "-0"],
        env=verbs_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0 and ran.stderr == ""  # no word of the tool's own on success
    by_hand = subprocess.run(
        ["bash", "-c", f". {shlex.quote(str(venv / 'bin' / 'activate'))} && exec env -0"],
        env=verbs_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    got, wanted = environment(ran.stdout), environment(by_hand.stdout)
    # bash's own, and the prompts: a non-interactive bash has none, so activation's "(env) " would
    # replace the user's exported prompt; run keeps the user's (tests/hostile/test_hostile_verbs.py).
    for name in ("_", "SHLVL", "PS1", "PS2"):
        got.pop(name, None), wanted.pop(name, None)
    assert got == wanted
    assert got["VIRTUAL_ENV"] == str(venv) and got["PATH"].startswith(f"{venv}/bin:")
    assert got["LD_LIBRARY_PATH"].startswith(f"{venv}/{SITE}/nvidia/cuda_runtime/lib:")  # the tool's activate.sh
    assert "LD_LIBRARY_PATH" not in verbs_env


def test_run_passes_the_exit_code_stdin_and_a_signal_death_through(venv, verbs_env):
    def run(*argv, stdin=None):
        return subprocess.run(
            [sys.executable, "-m", "tfgpu", "run", "--prefix", str(venv), "--", *argv],
            env=verbs_env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
        )

    assert run("sh", "-c", "exit 7").returncode == 7
    echoed = run("python", "-c", "import sys; print(sys.prefix, sys.stdin.read())", stdin="from stdin")
    assert echoed.returncode == 0 and echoed.stdout == f"{venv} from stdin\n" and echoed.stderr == ""
    assert run("sh", "-c", "echo to-stderr >&2; exit 0").stderr == "to-stderr\n"
    assert run("sh", "-c", "kill -TERM $$").returncode == 128 + 15  # as a shell says it


def test_run_passes_a_sigterm_to_the_command_and_waits_for_it(venv, verbs_env, tmp_path):
    """``timeout`` or ``systemd stop`` signal the tool: the command gets the signal and decides."""
    import signal
    import time

    started = tmp_path / "started"
    script = f"trap 'echo cleaned-up; exit 42' TERM; touch {shlex.quote(str(started))}; while :; do sleep 0.1; done"
    tool = subprocess.Popen(
        [sys.executable, "-m", "tfgpu", "run", "--name", "tf2.21", "--", "bash", "-c", script],
        env=verbs_env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        for _ in range(600):  # the command is running once it has made the file
            if started.exists():
                break
            time.sleep(0.1)
        tool.send_signal(signal.SIGTERM)
        out, _ = tool.communicate(timeout=60)
    finally:
        tool.kill()
    assert tool.returncode == 42 and out == "cleaned-up\n"


def test_run_does_not_source_bash_env(venv, verbs_env, tmp_path):
    """``$BASH_ENV`` is a file any non-interactive bash would source; activation is not that file."""
    startup = tmp_path / "startup.sh"
    startup.write_text("export FROM_BASH_ENV=1\n")
    ran = run_process("run", "--name", "tf2.21", "--", "env", env=verbs_env | {"BASH_ENV": str(startup)})
    assert ran.returncode == 0 and "FROM_BASH_ENV" not in ran.stdout and f"BASH_ENV={startup}" in ran.stdout


def test_run_a_conda_prefix_through_its_activate_d_scripts(tmp_path, verbs_env):
    prefix = conda_prefix(tmp_path / "conda-env")
    ran = run_process("run", "--prefix", str(prefix), "--", "env", "-0", env=verbs_env)
    assert ran.returncode == 0, ran.stderr
    got = environment(ran.stdout)
    assert got["CONDA_PREFIX"] == str(prefix) and got["PATH"] == f"{prefix}/bin:{verbs_env['PATH']}"
    assert got["LD_LIBRARY_PATH"].split(":")[0] == f"{prefix}/lib"  # etc/conda/activate.d/tfgpu-cuda.sh


@pytest.mark.parametrize("shell", shells())
def test_a_conda_prefix_that_needs_quoting_is_activated_quoted(shell, tmp_path, verbs_env):
    """rattler writes a prefix into its lines unquoted or quoted by turns; a path with spaces (the
    one character a prefix may have that a shell splits on: ``bad-prefix`` refuses quotes and ``$``)
    is activated as itself."""
    prefix = conda_prefix(tmp_path / "team envs" / "tf 2.21  @cuda")
    tool = f"tfgpu-install activate --prefix {shlex.quote(str(prefix))}"
    probe = 'echo "$CONDA_PREFIX|$LD_LIBRARY_PATH|$PATH"'
    line = {
        "bash": f'eval "$({tool})" && {probe}',
        "zsh": f'eval "$({tool})" && {probe}',
        "fish": f"{tool} --shell fish | source; and {probe}",
    }[shell]
    done = subprocess.run(
        [shell, "-c", line],
        env=verbs_env | {"SHELL": f"/bin/{shell}"},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("|") == 2, (done.stdout, done.stderr)
    conda_prefix_value, libraries, path = done.stdout.strip().split("|")
    assert conda_prefix_value == str(prefix)
    assert libraries.split(":")[0] == f"{prefix}/lib"  # its activate.d script was found and sourced
    assert path.startswith(f"{prefix}/bin:")
    assert "tfgpu-activate-" not in done.stdout  # the link rattler was given is gone from every value
    ran = run_process("run", "--prefix", str(prefix), "--", "env", "-0", env=verbs_env)
    assert ran.returncode == 0 and environment(ran.stdout)["CONDA_PREFIX"] == str(prefix), ran.stderr


@pytest.mark.parametrize(
    ("argv", "status", "code"),
    [
        (("run", "--name", "tf2.21", "--", "no-such-program"), 127, "command-not-found"),
        (("run", "--name", "tf2.21"), 2, "no-command-to-run"),
        (("run", "--", "python"), 2, "bad-arguments"),  # an env is always named
        (("run", "--name", "gone", "--", "python"), 3, "no-such-env"),
        (("run", "--name", "plain-dir", "--", "python"), 3, "not-activatable"),
        (("run", "--prefix", "/nonexistent/env", "--", "python"), 3, "no-such-env"),
        (("shell", "--name", "gone"), 3, "no-such-env"),
        (("activate", "--name", "plain-dir"), 3, "not-activatable"),
    ],
)
def test_run_refuses_with_a_reason(venv, verbs_env, argv, status, code):
    """Each refusal comes before anything is started (the command is looked up on the activated
    PATH, not run), so the tool runs in this process; its exit code is ``cli.main``'s."""
    done = run_tool(*argv, env=verbs_env)
    assert done.returncode == status and f"error: {code}" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


# --- activate and shell ---------------------------------------------------------------------------

PROBE = 'echo "$VIRTUAL_ENV|$LD_LIBRARY_PATH|$(command -v python)"'


@pytest.mark.parametrize("shell", shells())
def test_activate_prints_what_the_shell_evaluates(shell, tmp_path, verbs_env):
    # A path with a space and a quote: the printed line quotes it for that shell.
    prefix = tool_venv(tmp_path / "team's envs" / "tf 2.21")
    tool = f"tfgpu-install activate --prefix {shlex.quote(str(prefix))}"
    line = {
        "bash": f'eval "$({tool})"; {PROBE}',
        "zsh": f'eval "$({tool})"; {PROBE}',
        "fish": f'{tool} --shell fish | source; echo "$VIRTUAL_ENV|$LD_LIBRARY_PATH|"(command -v python)',
    }[shell]
    done = subprocess.run(
        [shell, "-c", line], env=verbs_env | {"SHELL": f"/bin/{shell}"}, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    virtual_env, libraries, python = done.stdout.strip().split("|")
    assert virtual_env == str(prefix) and python == f"{prefix}/bin/python"
    assert libraries.split(":")[0] == f"{prefix}/{SITE}/nvidia/cuda_runtime/lib"


def test_activate_needs_a_shell_it_knows(venv, verbs_env):
    """``activate`` only prints lines (the shells evaluating them are the tests above): in this process."""
    done = run_tool("activate", "--name", "tf2.21", env=verbs_env | {"SHELL": "/bin/tcsh"})
    assert done.returncode == 2 and "error: unknown-shell" in done.stderr and "--shell" in done.stderr
    fish = run_tool("activate", "--name", "tf2.21", env=verbs_env | {"SHELL": "/usr/bin/fish"})
    assert fish.stdout == f'source "{venv}/bin/activate.fish"\n'


@pytest.mark.parametrize("shell", shells())
def test_shell_starts_the_users_shell_inside_the_env(shell, venv, verbs_env):
    done = subprocess.run(
        [sys.executable, "-m", "tfgpu", "shell", "--name", "tf2.21"],
        env=verbs_env | {"SHELL": shutil.which(shell)},
        input='echo "in:$VIRTUAL_ENV"; exit 5\n',
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 5 and f"in:{venv}" in done.stdout, done.stderr


@pytest.mark.parametrize("shell", shells())
def test_deactivate_works_in_the_shell_and_the_users_startup_files_ran(shell, venv, verbs_env, tmp_path):
    """The venv's own ``deactivate`` (a shell function, which no environment carries) is defined in
    the entered bash, zsh and fish: it puts PATH and LD_LIBRARY_PATH back and the shell goes on.
    The user's start-up file ran first (its variable is there)."""
    home = tmp_path / "home"
    (home / ".config" / "fish").mkdir(parents=True)
    for rc in (".bashrc", ".zshrc", ".config/fish/config.fish"):
        (home / rc).write_text("set -gx FROM_RC yes\n" if rc.endswith("fish") else "export FROM_RC=yes\n")
    env = verbs_env | {"SHELL": shutil.which(shell), "HOME": str(home), "LD_LIBRARY_PATH": "/opt/user/lib"}
    env.pop("ZDOTDIR", None)
    env.pop("XDG_CONFIG_HOME", None)
    probe = 'echo "{}:$VIRTUAL_ENV|$LD_LIBRARY_PATH|$PATH|$FROM_RC"'
    done = subprocess.run(
        [sys.executable, "-m", "tfgpu", "shell", "--name", "tf2.21"],
        env=env,
        input=f"{probe.format('in')}\ndeactivate\n{probe.format('out')}\nexit 5\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 5, done.stderr
    said = {line.split(":", 1)[0]: line.split(":", 1)[1].split("|") for line in done.stdout.splitlines() if "|" in line}
    virtual_env, libraries, path, from_rc = said["in"]
    assert virtual_env == str(venv) and path.startswith(f"{venv}/bin:") and from_rc == "yes", done.stdout
    assert libraries.split(":")[0] == f"{venv}/{SITE}/nvidia/cuda_runtime/lib"
    assert said["out"] == ["", "/opt/user/lib", verbs_env["PATH"], "yes"], (done.stdout, done.stderr)
    assert "`deactivate` leaves the env" in done.stderr


# --- env names after --name ----------------------------------------------------------------------

HOSTILE = ("$(touch PWNED)", "x;touch PWNED", "`touch PWNED`", "a\nb", "-rf", ".hidden", "x y")


def _completion_cases(shell: str) -> list[str]:
    return ["tfgpu-install run --name ", "tfgpu-install verify --name tf", "tfgpu-install remove -n "]


@pytest.mark.parametrize("shell", shells())
def test_env_names_are_completed_after_name_and_stay_data(shell, tmp_path, verbs_env):
    from test_completion_and_list import offered

    envs = Path(verbs_env["TFGPU_ENVS_DIR"])
    tool_venv(envs / "tf2.21")
    tool_venv(envs / "tf2.13")
    conda_prefix(Path(verbs_env["CONDA_ENVS_PATH"]) / "team-conda")
    for name in HOSTILE:  # directories named to become code if a script ever evaluated a name
        (envs / name).mkdir()
        (envs / name / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (envs / "not-an-env").mkdir()
    assert run_tool("list", "--names", env=verbs_env).stdout == "team-conda\ntf2.13\ntf2.21\n"
    assert json.loads(run_tool("list", "--names", "--json", env=verbs_env).stdout) == {
        "names": ["team-conda", "tf2.13", "tf2.21"]
    }
    path = tmp_path / f"completion.{shell}"
    path.write_text(run_tool("completion", shell).stdout)
    found = offered(shell, path, _completion_cases(shell), extra=verbs_env, cwd=tmp_path)
    assert found == [{"team-conda", "tf2.13", "tf2.21"}, {"tf2.13", "tf2.21"}, {"team-conda", "tf2.13", "tf2.21"}]
    assert not list(tmp_path.rglob("PWNED"))


@pytest.mark.parametrize("shell", shells())
def test_a_hostile_name_from_the_lister_is_never_run(shell, tmp_path, verbs_env):
    """Whatever ``list --names`` prints, the script offers it as text: here a stand-in ``tfgpu-install``
    prints names that are shell code (the real one never lists them; this holds the scripts alone)."""
    from test_completion_and_list import offered

    stand_in = tmp_path / "hostile-bin" / "tfgpu-install"
    stand_in.parent.mkdir()
    stand_in.write_text("#!/bin/sh\nprintf '%s\\n' 'x$(touch PWNED)' 'x`touch PWNED`' 'x;touch PWNED' 'xok'\n")
    stand_in.chmod(0o755)
    path = tmp_path / f"completion.{shell}"
    path.write_text(run_tool("completion", shell).stdout)
    env = verbs_env | {"PATH": f"{stand_in.parent}:/usr/bin:/bin"}
    [found] = offered(shell, path, ["tfgpu-install run --name x"], extra=env, cwd=tmp_path)
    assert "xok" in found
    assert not list(tmp_path.rglob("PWNED"))


# --- examples in --help --------------------------------------------------------------------------


def test_every_command_has_examples_and_each_one_parses():
    from tfgpu.cli.examples import EXAMPLES, FIRST_STEPS
    from tfgpu.cli.parser import COMMANDS, build_parser, with_default_command

    assert set(EXAMPLES) == set(COMMANDS) and all(EXAMPLES[command] for command in COMMANDS)
    parser = build_parser()
    first = {}
    for line, says in FIRST_STEPS:
        first.setdefault(with_default_command(shlex.split(line)[1:])[0], []).append((line, says))
    for command, examples in [*EXAMPLES.items(), *first.items()]:
        for line, _ in examples:
            # The tool's own words: inside `eval "$(...)"`, or up to a pipe or a redirection.
            wrapped = re.fullmatch(r'eval "\$\((tfgpu-install .*)\)"', line)
            lexer = shlex.shlex(wrapped.group(1) if wrapped else line, posix=True, punctuation_chars="|>")
            lexer.whitespace_split = True
            words = []
            for token in lexer:
                if token in ("|", ">"):
                    break
                words.append(token)
            assert words[0] == "tfgpu-install", line
            argv = with_default_command(words[1:])
            assert argv[0] == command, line
            parser.parse_args(argv)  # a UsageError here names the example that rotted


def test_help_ends_with_the_examples():
    done = run_tool("run", "--help")
    assert done.returncode == 0
    assert "Examples:\n  tfgpu-install run --name tf2.21 -- python train.py --epochs 3\n" in done.stdout
    assert "always named" in done.stdout  # why run has no default env
    top = run_tool("--help")
    assert "Examples:\n  tfgpu-install plan\n" in top.stdout
