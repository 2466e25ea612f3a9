"""``completion bash|zsh|fish`` (sourced and driven in the real shells) and ``list``."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import run_tool, shells

TARGET = ("--tf", "2.21", "--mode", "pip", "--python", "3.11")
# zsh: report every match the completion adds (to the terminal, where zpty reads it); after
# zsh-completion-testing practice: compadd calls that only compute (-O/-A/-D) pass through.
ZSH_CAPTURE = r"""
compadd () {
    if [[ " $* " == *" -O "* || " $* " == *" -A "* || " $* " == *" -D "* ]]; then
        builtin compadd "$@"; return $?
    fi
    local -a __hits
    builtin compadd -A __hits "$@"
    builtin compadd "$@"
    local ret=$?
    print -rn -- $'\n'"<<HITS>> ${__hits[*]} <<END>>"$'\n' > /dev/tty
    return $ret
}
"""
# (command line typed so far, completions that must be offered, completions that must not)
CASES = [
    ("tfgpu-install pl", {"plan"}, {"lock"}),
    ("tfgpu-install lock --mode ", {"pip", "conda"}, {"system"}),
    ("tfgpu-install plan --mode ", {"pip", "conda", "system"}, set()),
    ("tfgpu-install --tf 2.13 --mo", {"--mode"}, set()),  # the bare form is create
    ("tfgpu-install script --format ", {"bash", "dockerfile", "ansible", "cloud-init"}, set()),
    ("tfgpu-install completion ", {"bash", "zsh", "fish"}, set()),
    ("tfgpu-install lock --platform linux-", {"linux-64", "linux-aarch64"}, {"win-64"}),
    ("tfgpu-install plan --tf 2.2", {"2.21", "2.20", "2.22"}, {"2.13"}),
    ("tfgpu-install doctor --int", {"--interpreter"}, {"--python"}),
    ("tfgpu-install repair --int", {"--interpreter"}, {"--python"}),
]


def script(shell: str, tmp_path: Path) -> Path:
    done = run_tool("completion", shell)
    assert done.returncode == 0 and done.stdout
    path = tmp_path / f"completion.{shell}"
    path.write_text(done.stdout)
    return path


def offered(
    shell: str, path: Path, lines: list[str], extra: dict | None = None, cwd: Path | None = None
) -> list[set[str]]:
    """What the real shell offers for each command line (one shell session for all of them);
    ``extra``: more of the environment (the tool's directories and PATH, for env names)."""
    env = {"PATH": "/usr/bin:/bin", **(extra or {})}
    env.update(HOME=str(path.parent), TERM="dumb", TYPED="\n".join(lines))
    if shell == "bash":
        driver = (
            f"source {path}\n"
            'while IFS= read -r LINE; do read -ra COMP_WORDS <<< "$LINE"; [[ "$LINE" == *" " ]] && COMP_WORDS+=("");'
            ' COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=(); _tfgpu_install; echo "--case--";'
            ' printf "%s\\n" "${COMPREPLY[@]}"; done <<< "$TYPED"'
        )
        done = subprocess.run(
            ["bash", "--norc", "-c", driver], capture_output=True, text=True, env=env, timeout=60, cwd=cwd
        )
    elif shell == "fish":
        driver = f"source {path}; for line in (string split \\n -- $TYPED); echo -- --case--; complete -C $line; end"
        done = subprocess.run(
            ["fish", "--no-config", "-c", driver], capture_output=True, text=True, env=env, timeout=60, cwd=cwd
        )
    else:  # a real interactive zsh on a pseudo-terminal (zpty), compinit loaded, TAB pressed
        (path.parent / "capture.zsh").write_text(ZSH_CAPTURE)
        driver = f"""
zmodload zsh/zpty
zpty z "zsh -f -i"
zpty -w z "PS1='> '; autoload -Uz compinit; compinit -u -D; source {path}; source {path.parent / "capture.zsh"}; print -- RE\\"\\"ADY"
zpty -r z out '*READY*'
integer n=0
for line in "${{(@f)TYPED}}"; do
    (( n++ ))
    # TAB; once the first matches are reported, clear the line and run a command whose output
    # marks the end of this case (so later reports of the same TAB are still in this case)
    zpty -w -n z "$line"$'\\t'
    zpty -r z first "*<<END>>*"
    zpty -w -n z $'\\x15'"print -- MA\\"\\"RK$n"$'\\n'
    zpty -r z out "*MARK$n*"
    print -r -- "--case--"; print -r -- "$first$out"
done
zpty -d z
"""
        done = subprocess.run(
            ["zsh", "-f", "-c", driver], capture_output=True, text=True, env=env, timeout=120, cwd=cwd
        )
        chunks = done.stdout.split("--case--")[1:]
        assert done.returncode == 0 and len(chunks) == len(lines), done.stdout + done.stderr
        return [
            {word for hits in re.findall(r"<<HITS>>(.*?)<<END>>", chunk) for word in hits.split()} for chunk in chunks
        ]
    assert done.returncode == 0, done.stderr
    chunks = done.stdout.split("--case--")[1:]
    assert len(chunks) == len(lines), done.stdout
    return [
        {row.split("\t")[0] for row in chunk.split("\n") if row.strip()} if shell == "fish" else set(chunk.split())
        for chunk in chunks
    ]


@pytest.mark.parametrize("shell", shells())
def test_completion_offers_what_the_parser_accepts(shell, tmp_path):
    path = script(shell, tmp_path)
    for (line, wanted, unwanted), found in zip(CASES, offered(shell, path, [case[0] for case in CASES]), strict=True):
        assert wanted <= found, (shell, line, found)
        assert not unwanted & found, (shell, line, found)


def test_every_command_and_option_is_in_every_script(tmp_path):
    from tfgpu.cli.completion import model
    from tfgpu.cli.parser import build_parser

    commands = model(build_parser())
    for shell in ("bash", "zsh", "fish"):
        text = run_tool("completion", shell).stdout
        for name, command in commands.items():
            assert name in text
            for option in command["options"]:
                assert all((flag if shell != "fish" else flag.lstrip("-")) in text for flag in option.flags), (
                    shell,
                    name,
                    option.flags,
                )


def test_completion_rejects_an_unknown_shell():
    done = run_tool("completion", "tcsh")
    assert done.returncode == 2 and "error: bad-arguments" in done.stderr


def _create(name: str, local_wheels: Path, env: dict) -> Path:
    done = run_tool(
        "create", *TARGET, "--name", name, "--find-links", str(local_wheels), "--offline", "--no-verify", env=env
    )
    assert done.returncode == 0, done.stderr
    return Path(env["TFGPU_ENVS_DIR"]) / name


def test_list_shows_the_envs_the_tool_built_and_their_health(tmp_path, local_wheels, tool_env):
    env = {**tool_env, "CONDA_ENVS_PATH": str(tmp_path / "conda-envs")}
    good = _create("good", local_wheels, env)
    broken = _create("broken", local_wheels, env)
    for info in (broken / "lib" / "python3.11" / "site-packages").glob("tensorflow-*.dist-info"):
        shutil.rmtree(info)
    (Path(env["TFGPU_ENVS_DIR"]) / "someone-elses").mkdir()  # no marker: not ours, not listed
    shutil.copytree(good, Path(env["TFGPU_ENVS_DIR"]) / "copied", symlinks=True)  # a marker made for another path
    listed = json.loads(run_tool("list", "--json", env=env).stdout)
    assert listed["searched"] == [env["TFGPU_ENVS_DIR"], env["CONDA_ENVS_PATH"]]
    rows = {row["name"]: row for row in listed["envs"]}
    assert set(rows) == {"good", "broken"}
    assert rows["good"]["healthy"] and rows["good"]["tensorflow"] == "2.21.0" and rows["good"]["mode"] == "pip"
    assert rows["good"]["cuda"] == "12.5" and rows["good"]["prefix"] == str(good)
    assert not rows["broken"]["healthy"] and rows["broken"]["problems"] == ["TensorFlow 2.21.0 is not installed"]
    human = run_tool("list", env=env | {"COLUMNS": "80"})
    assert human.returncode == 0 and str(good) in human.stdout.split()
    assert "broken: TensorFlow 2.21.0 is not installed" in human.stdout


def test_list_with_no_envs_says_where_it_looked(tmp_path, tool_env):
    done = run_tool("list", env={**tool_env, "CONDA_ENVS_PATH": str(tmp_path / "none")})
    assert done.returncode == 0 and "No environment built by tfgpu-install in" in done.stdout
