"""Data never becomes code: a path, a name or a data table's text that reaches an activation
script, an export or a uv argument stays data."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from importlib.resources import files

import packagesource
import pytest
import yaml

from .conftest import changed, snapshot
from .test_hostile_environment import a_later_run, parsed_tables  # noqa: F401 - fixtures

UNSAFE_PREFIXES = {
    "command-substitution": "x/$(touch PWNED)",
    "backticks": "x/`touch PWNED`",
    "double-quote": 'x/a"b',
    "variable": "x/$HOME",
    "backslash": "x/a\\b",
    "newline": "x/a\nb",
    "tab": "x/a\tb",
    "bang": "x/a!b",
    "escape-sequence": "x/\x1b[31mred",
}


@pytest.mark.parametrize("text", UNSAFE_PREFIXES.values(), ids=list(UNSAFE_PREFIXES))
@pytest.mark.parametrize("command", ["create", "remove", "doctor", "verify"])
def test_unsafe_prefix_text_is_refused_before_anything_runs(cli, sandbox, text, command, local_wheels):
    before = snapshot(sandbox)
    argv = {
        "create": [
            "create",
            "--tf",
            "2.21",
            "--mode",
            "pip",
            "--no-verify",
            "--find-links",
            str(local_wheels),
            "--offline",
        ],
        "remove": ["remove"],
        "doctor": ["doctor"],
        "verify": ["verify"],
    }[command]
    done = cli(*argv, "--prefix", str(sandbox / text), "--json")
    assert (done.code, done.error) == (2, "bad-prefix")
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []


def test_a_prefix_that_is_not_utf8_is_refused(tool, sandbox, a_later_run):  # noqa: F811 - a fixture
    raw = os.fsencode(str(sandbox)) + b"/caf\xe9"
    done = subprocess.run(
        [sys.executable, "-m", "tfgpu", "create", "--tf", "2.21", "--prefix", raw, "--no-verify", "--json"],
        capture_output=True,
        cwd=sandbox,
        env=os.environ,
    )
    assert done.returncode == 2 and json.loads(done.stdout)["error"]["code"] == "bad-prefix"
    assert b"Traceback" not in done.stderr and not (sandbox / "caf\udce9").exists()


def test_tfgpu_envs_dir_with_shell_text_is_refused(cli, sandbox):
    done = cli(
        "create",
        "--tf",
        "2.21",
        "--name",
        "tf",
        "--no-verify",
        "--json",
        env={"TFGPU_ENVS_DIR": str(sandbox / "$(touch PWNED)")},
    )
    assert (done.code, done.error) == (2, "bad-prefix")


@pytest.mark.parametrize("prefix", ["-leading-dash", "it's a dir", "sp ace", "uni\u00e7ode", "x=y,z@w+%~"])
def test_odd_but_safe_prefixes_build_and_activate_cleanly(build, sandbox, prefix):
    """The prompt is the tool's own label, passed as --prompt=...: a leading '-' is no uv option and
    a quote cannot break the activate script."""
    target = sandbox / prefix
    done = build(target)
    assert done.code == 0, done.out + done.err
    for shell in ("bash", "zsh"):
        if subprocess.run(["which", shell], capture_output=True).returncode:
            continue
        ran = subprocess.run(
            [
                shell,
                "-c",
                'source "$1/bin/activate" && printf "%s|%s" "$VIRTUAL_ENV_PROMPT" "$VIRTUAL_ENV"',
                "x",
                str(target),
            ],
            capture_output=True,
            text=True,
            cwd=sandbox,
        )
        assert ran.returncode == 0, ran.stderr
        label, env = ran.stdout.split("|")
        assert re.fullmatch(r"\(?[A-Za-z0-9._-]+\)? ?", label), label
        assert env == str(target)


# --- data overlays (a team mirror) reaching generated files -----------------------------------

FORMATS = ["bash", "dockerfile", "ansible", "cloud-init", "slurm", "kubernetes"]


def _overlay(sandbox, name: str, edit) -> str:
    directory = sandbox / "overlay"
    directory.mkdir(exist_ok=True)
    text = files("tfgpu.data").joinpath(name).read_text(encoding="utf-8")
    (directory / name).write_text(edit(text), encoding="utf-8")
    return str(directory)


def _script(cli, sandbox, fmt: str, overlay: str, *extra: str):
    out = sandbox / "out"
    return cli(
        "script",
        "--tf",
        "2.16.1",
        "--format",
        fmt,
        "-o",
        str(out),
        "--no-detect",
        "--json",
        *extra,
        env={"TFGPU_DATA_DIR": overlay},
    ), out


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_newline_in_a_quirk_message_is_refused(cli, sandbox, fmt):
    overlay = _overlay(sandbox, "quirks.toml", lambda t: t.replace('message = "', 'message = "x\\nrm -rf / #', 1))
    done, out = _script(cli, sandbox, fmt, overlay)
    assert (done.code, done.error) == (2, "bad-data") and "quirks.toml" in done.out and not out.exists()


@pytest.mark.parametrize("fmt", FORMATS)
def test_shell_text_in_data_stays_a_comment(cli, sandbox, fmt):
    """A one-line quirk message with ``$(touch PWNED)`` is valid data: it must reach the files only
    as comment text (or a quoted string), never as something that runs."""
    overlay = _overlay(
        sandbox,
        "quirks.toml",
        lambda t: t.replace(
            'message = "',
            'message = "$(touch PWNED) `touch PWNED` ',
        ),
    )
    done, out = _script(cli, sandbox, fmt, overlay)
    assert done.code == 0, done.out
    paths = [out] if out.is_file() else [p for p in out.rglob("*") if p.is_file()]
    for path in paths:
        text = path.read_text()
        mark = "--" if path.suffix == ".lua" else "#"
        for line in text.splitlines():
            if "PWNED" in line:
                assert line.lstrip().startswith(mark), (path.name, line)
        if path.suffix in (".yml", ".yaml"):
            list(yaml.safe_load_all(text))
        if path.suffix in (".sh", ".sbatch") or path.name == "out" and fmt == "bash":
            subprocess.run(["bash", "-n", str(path)], check=True)
    if fmt == "bash":  # run the header part for real: nothing in a comment runs
        head = out.read_text().split("set -euo pipefail")[0]
        subprocess.run(["bash", "-c", head], check=True, cwd=sandbox)


def test_a_docker_tag_with_a_run_line_is_refused(cli, sandbox):
    overlay = _overlay(
        sandbox,
        "docker_images.toml",
        lambda t: re.sub(r'^tag = "(.*)"$', r'tag = "\1\\nRUN touch PWNED"', t, count=0, flags=re.M),
    )
    done, out = _script(cli, sandbox, "dockerfile", overlay, "--mode", "system", "--tf", "2.13")
    assert (done.code, done.error) == (2, "bad-data") and not out.exists()


def test_a_docker_tag_with_a_space_is_refused(cli, sandbox):
    overlay = _overlay(
        sandbox, "docker_images.toml", lambda t: re.sub(r'^tag = "(.*)"$', r'tag = "\1 AS x"', t, flags=re.M)
    )
    done, out = _script(cli, sandbox, "dockerfile", overlay, "--mode", "system", "--tf", "2.13")
    assert (done.code, done.error) == (2, "bad-data")


@pytest.mark.parametrize(
    "table,edit",
    [
        (
            "pip_cuda.toml",
            lambda t: t.replace(
                '"nvidia-cuda-runtime-cu11', '"nvidia-cuda-runtime-cu11==1\\n--index-url=http://evil/ #', 1
            ),
        ),
        (
            "pip_cuda.toml",
            lambda t: t.replace(
                '"nvidia-cuda-runtime-cu11', '"--index-url=http://evil/simple nvidia-cuda-runtime-cu11', 1
            ),
        ),
        ("cuda.toml", lambda t: t.replace('linux = "525.60.13"', 'linux = "525.60.13$(touch PWNED)"', 1)),
        ("cuda.toml", lambda t: t.replace('runfile_url = "https://', 'runfile_url = "https://x y/', 1)),
        ("tensorflow.toml", lambda t: t.replace('version = "2.13.1"', 'version = "2.13.1;touch PWNED"', 1)),
        ("conda_forge.toml", lambda t: t.replace('versions = ["', 'versions = ["11.8 ; touch PWNED", "', 1)),
        ("log_signatures.toml", lambda t: t.replace("pattern = '", "pattern = '(unclosed", 1)),
    ],
    ids=[
        "requirement-newline",
        "requirement-option",
        "driver-shell",
        "url-space",
        "version-shell",
        "conda-version",
        "bad-regex",
    ],
)
def test_malformed_values_in_a_data_overlay_are_bad_data(cli, sandbox, table, edit):
    overlay = _overlay(sandbox, table, edit)
    done = cli("plan", "--tf", "2.13", "--no-detect", "--json", env={"TFGPU_DATA_DIR": overlay})
    assert (done.code, done.error) == (2, "bad-data") and table in done.out


# --- the cluster formats: sbatch, modulefiles (Tcl, Lua), Apptainer definition, Kubernetes YAML ----

HOSTILE_VALUES = {
    "command-substitution": "$(touch PWNED)",
    "backticks": "`touch PWNED`",
    "tcl-command": "[exec touch PWNED]",
    "lua-long-bracket-end": "]] os.execute('touch PWNED') --[[",
    "double-quote": 'a"b; os.execute("touch PWNED")',
    "backslash-newline": "a\\\nputs PWNED",
    "newline": "x\nexec touch PWNED",
    "braces": "} ; exec touch PWNED ; {",
    "percent-section": "x\n%post\ntouch PWNED",
}


@pytest.mark.parametrize("value", HOSTILE_VALUES.values(), ids=list(HOSTILE_VALUES))
def test_tcl_and_lua_strings_are_data_to_the_real_interpreters(sandbox, value):
    """What tfgpu.doors.quoting writes into a modulefile reads back as exactly the value, and runs nothing."""
    from tfgpu.doors import quoting

    for binary, program in (
        ("tclsh", f"puts -nonewline [set v {quoting.tcl_string(value)}]\n"),
        ("lua", f"io.write({quoting.lua_string(value)})\n"),
    ):
        if subprocess.run(["which", binary], capture_output=True).returncode:
            continue
        script = sandbox / f"probe.{binary}"
        script.write_text(program)
        done = subprocess.run([binary, str(script)], capture_output=True, text=True, cwd=sandbox, timeout=30)
        assert done.returncode == 0 and done.stdout == value, (binary, done.stdout, done.stderr)
    assert not (sandbox / "PWNED").exists()


@pytest.mark.parametrize("value", [v for v in HOSTILE_VALUES.values() if "\n" in v])
def test_a_line_break_never_reaches_an_apptainer_section(value):
    from tfgpu.doors import quoting
    from tfgpu.errors import UsageError

    with pytest.raises(UsageError) as raised:
        quoting.def_word(value, "A requirement")
    assert raised.value.code == "bad-data"


def _hostile_quirk(sandbox) -> str:
    message = "$(touch PWNED) `touch PWNED` [exec touch PWNED] ]] \\\" } { ; os.execute('touch PWNED') \\\\"
    return _overlay(sandbox, "quirks.toml", lambda t: t.replace('message = "', f'message = "{message} ', 1))


def test_hostile_data_in_the_slurm_export_runs_nowhere(cli, sandbox):
    """A data value with shell, Tcl and Lua syntax in it: the sbatch script parses, the modulefiles
    load under the real module systems, the definition's sections stay shell, and nothing runs."""
    overlay = _hostile_quirk(sandbox)
    done, out = _script(cli, sandbox, "slurm", overlay, "--tf", "2.13")
    assert done.code == 0, done.out
    subprocess.run(["bash", "-n", str(out / "tfgpu-job.sbatch")], check=True)
    head = (out / "tfgpu-job.sbatch").read_text().split("set -euo pipefail")[0]
    subprocess.run(["bash", "-c", head], check=True, cwd=sandbox)
    from tfgpu.export.apptainer import sections

    parts = sections((out / "tfgpu-env.def").read_text())
    assert not any("PWNED" in parts[name] for name in ("post", "environment", "runscript", "test", "labels"))
    lmod = "/usr/share/lmod/lmod/libexec/lmod"
    if os.path.exists(lmod):
        env = sandbox / "env"
        for tree in ("modulefiles", "modulefiles-tcl"):
            for path in (out / tree).rglob("*"):
                if path.is_file():
                    target = env / path.relative_to(out)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_text(path.read_text())
            ran = subprocess.run(
                ["bash", "-c", f'eval "$({lmod} bash load tf2.13)" && printf %s "$VIRTUAL_ENV"'],
                capture_output=True,
                text=True,
                cwd=sandbox,
                timeout=60,
                env={"PATH": "/usr/bin:/bin", "HOME": str(sandbox), "MODULEPATH": str(env / tree)},
            )
            assert ran.returncode == 0 and ran.stdout == str(env), (tree, ran.stderr)
    assert not (sandbox / "PWNED").exists()


def test_hostile_data_in_the_kubernetes_manifests_stays_a_comment(cli, sandbox):
    overlay = _hostile_quirk(sandbox)
    done, out = _script(cli, sandbox, "kubernetes", overlay, "--tf", "2.13")
    assert done.code == 0, done.out
    text = (out / "tfgpu-job.yaml").read_text()
    documents = [doc for doc in yaml.safe_load_all(text) if doc]
    assert [doc["kind"] for doc in documents] == ["Service", "ConfigMap", "Job"]
    assert "PWNED" not in json.dumps(documents)  # only in the comment header, which YAML drops
    assert not (sandbox / "PWNED").exists()


# -- one way to write a shell word ------------------------------------------------------------

QUOTING_DOOR = "doors/quoting.py"
"""The one rendering function per format (``sh``, ``sh_join``, ``fish_word``, ...)."""
QUOTES_FOR_ITSELF = {
    "process/runner.py": "the run log's ``$ argv`` line (a record for the user to read, never run or "
    "written into a generated file) and the fake runner's lookup key, which test tables spell as "
    "``shlex.join`` does",
}
"""Modules that quote a command line themselves, each with the reason it may."""
SHELL_QUOTERS = {("shlex", "quote"), ("shlex", "join"), ("pipes", "quote")}


def shell_quoting(source: str) -> list[str]:
    """Each use in ``source`` of a shell quoter other than the door's: a call, an alias
    (``q = shlex.quote``) or an import of the function itself."""
    found = []
    for node in packagesource.nodes(source):
        if isinstance(node, ast.ImportFrom) and node.module in ("shlex", "pipes"):
            found += [
                f"line {node.lineno}: from {node.module} import {a.name}"
                for a in node.names
                if (node.module, a.name) in SHELL_QUOTERS
            ]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if (node.value.id, node.attr) in SHELL_QUOTERS:
                found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_shell_words_are_written_only_through_the_quoting_door():
    """A value reaches a generated script, a lock's command, a completion script or a command the
    user is told to paste through ``tfgpu.doors.quoting``, never ``shlex`` directly: the door writes
    a ``$`` so that shellcheck passes the script, and a fish word as fish reads it (``shlex.quote``'s
    single quotes end early in fish at a backslash)."""
    package = packagesource.PACKAGE
    offenders = {}
    for path in packagesource.modules():
        relative = path.relative_to(package).as_posix()
        if relative == QUOTING_DOOR or relative in QUOTES_FOR_ITSELF:
            continue
        found = shell_quoting(packagesource.text(path))
        if found:
            offenders[relative] = found
    assert offenders == {}
    for relative in QUOTES_FOR_ITSELF:  # an entry that no longer needs it goes
        assert shell_quoting(packagesource.text(package / relative)), relative


@pytest.mark.parametrize(
    "source",
    [
        "import shlex\nshlex.quote(p)",
        "import shlex\nshlex.join(argv)",
        "import shlex\nq = shlex.quote",
        "from shlex import quote",
        "from shlex import join as joined",
        "def f():\n    import pipes\n    return pipes.quote(p)",
    ],
)
def test_the_quoting_check_sees_each_spelling(source):
    assert shell_quoting(source)


@pytest.mark.parametrize(
    "source",
    ["import shlex\nshlex.split(line)", "from tfgpu.doors import quoting\nquoting.sh(p)", "text.quote"],
)
def test_the_quoting_check_lets_the_rest_through(source):
    assert shell_quoting(source) == []


@pytest.mark.parametrize(
    "argv",
    [["tfgpu-install", "lock", "-o", "x/$(touch PWNED)"], ["a b", "it's", "x/`id`", "back\\slash", "", "$HOME"]],
)
def test_a_joined_command_line_runs_as_exactly_its_arguments(tmp_path, argv):
    from tfgpu.doors import quoting

    ran = subprocess.run(
        ["sh", "-c", f"printf '%s\\0' {quoting.sh_join(argv)}"], capture_output=True, cwd=tmp_path, timeout=60
    )
    assert ran.stdout.split(b"\0")[:-1] == [word.encode() for word in argv]
    assert not (tmp_path / "PWNED").exists()
