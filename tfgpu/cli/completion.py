"""``tfgpu-install completion bash|zsh|fish``: shell completion generated from the parser itself.

The scripts are written from ``tfgpu.cli.parser.build_parser()`` at the moment they are asked for,
so every command and option (and its help, in zsh and fish) is there and nothing else. Values are
completed where the set is known: modes (``lock``/``bundle``: pip and conda only), OSes,
architectures, engines, ``--format``, ``--tf-source``, platforms, the TensorFlow series this
tool's data knows, Pythons; paths for options that take a file or directory; and after ``--name``
the env names there are *now*, asked of the tool at completion time (``list --names``: fast,
nothing written). Those names are data in every shell, never code: bash reads them line by line
into the reply (``compgen -W`` would expand ``$(...)`` in them), zsh adds them with ``compadd -a``,
fish takes a command substitution's lines as candidates; and the tool offers only valid names.

Install: ``eval "$(tfgpu-install completion bash)"`` in ``~/.bashrc``; zsh:
``tfgpu-install completion zsh > "${fpath[1]}/_tfgpu-install"`` (or ``source <(...)`` after
``compinit``); fish: ``tfgpu-install completion fish > ~/.config/fish/completions/tfgpu-install.fish``.
"""

from __future__ import annotations

import argparse
import re
from functools import lru_cache

from tfgpu import results
from tfgpu.cli.parser import build_parser
from tfgpu.doors import quoting
from tfgpu.installers.options import ENGINES
from tfgpu.lock.platforms import PLATFORMS
from tfgpu.records import record
from tfgpu.resolver.matrix import matrix
from tfgpu.resolver.request import ARCHES, MODES, OSES
from tfgpu.settings import Settings

PROG = "tfgpu-install"
PATH_METAVARS = ("FILE", "DIR", "PATH")


@record
class Option:
    flags: tuple[str, ...]
    help: str
    takes_value: bool
    values: tuple[str, ...] = ()
    paths: bool = False
    names: bool = False
    """Its value is an env name: the tool lists them at completion time."""


def _values(command: str, action: argparse.Action) -> tuple[tuple[str, ...], bool]:
    """(the values an option takes, whether it takes a path)."""
    if action.choices:
        return tuple(action.choices), False
    known = {
        "mode": ("pip", "conda") if command in ("lock", "bundle") else MODES,
        "os": OSES,
        "arch": ARCHES,
        "engine": tuple(ENGINES),
        "platform": tuple(PLATFORMS),
        "tf": _series(),
    }
    if action.dest in known:
        return known[action.dest], False
    if action.dest == "python":  # a version everywhere (an interpreter path is --interpreter, a PATH)
        return _pythons(), False
    return (), (action.metavar or "") in PATH_METAVARS or action.dest in ("prefix", "output")


@lru_cache(maxsize=1)
def _releases() -> tuple[dict, ...]:
    return tuple(matrix())


def _series() -> tuple[str, ...]:
    return ("latest", *dict.fromkeys(".".join(row["tensorflow"].split(".")[:2]) for row in _releases()))


def _pythons() -> tuple[str, ...]:
    found = {python for row in _releases() for python in row["python"]}
    return tuple(sorted(found, key=lambda version: tuple(int(part) for part in version.split("."))))


def model(parser: argparse.ArgumentParser) -> dict[str, dict]:
    """``{command: {"help", "options": [Option], "positional": (values...)}}`` from the parser."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: choice.help or "" for choice in sub._choices_actions}
    commands = {}
    for name, command in sub.choices.items():
        options, positional = [], ()
        for action in command._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            if not action.option_strings:
                positional = tuple(action.choices or ())
                continue
            values, paths = _values(name, action)
            options.append(
                Option(
                    tuple(action.option_strings),
                    " ".join((action.help or "").split()),
                    action.nargs != 0,
                    values,
                    paths,
                    action.dest == "name" and name != "create",  # create names a new env
                )
            )
        commands[name] = {"help": helps.get(name, ""), "options": options, "positional": positional}
    return commands


def cmd_completion(settings: Settings) -> results.Result:
    """``completion SHELL``: the completion script, generated from the parser."""
    assert settings.shell is not None  # completion's SHELL is positional
    return results.Text(script(settings.shell))


def script(shell: str, parser: argparse.ArgumentParser | None = None) -> str:
    _releases.cache_clear()  # the data as it is now (update-data may have added releases)
    found = model(parser or build_parser())
    return {"bash": _bash, "zsh": _zsh, "fish": _fish}[shell](found)


def _words(items) -> str:
    return " ".join(items)


def _bash(commands: dict) -> str:
    names = list(commands)
    lines = [
        f'# {PROG} completion for bash, generated from its parser: eval "$({PROG} completion bash)"',
        "_tfgpu_install_names() {",
        "    local name",
        "    COMPREPLY=()",
        '    while IFS= read -r name; do [[ "$name" == "$cur"* ]] && COMPREPLY+=("$name"); done \\',
        f"        < <(command {PROG} list --names 2>/dev/null)",
        "}",
        "_tfgpu_install() {",
        '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}" cmd="" i',
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        '        case "${COMP_WORDS[i]}" in',
        f"            {'|'.join(names)}) cmd=${{COMP_WORDS[i]}}; break ;;",
        "        esac",
        "    done",
        '    local key="${cmd:-create}"',
        '    case "$key $prev" in',
    ]
    for name, command in commands.items():
        for option in command["options"]:
            if not option.takes_value:
                continue
            pattern = "|".join(quoting.sh(f"{name} {flag}") for flag in option.flags)
            if option.names:
                action = "_tfgpu_install_names"
            elif option.values:
                action = f'COMPREPLY=($(compgen -W {quoting.sh(_words(option.values))} -- "$cur"))'
            elif option.paths:
                action = 'COMPREPLY=($(compgen -f -- "$cur"))'
            else:
                action = "COMPREPLY=()"
            lines.append(f"        {pattern}) {action}; return ;;")
    lines += ["    esac", '    case "$key" in']
    for name, command in commands.items():
        flags = [flag for option in command["options"] for flag in option.flags] + ["--help"]
        lines.append(f"        {name}) opts={quoting.sh(_words([*command['positional'], *flags]))} ;;")
    lines += [
        "    esac",
        f'    if [ "$COMP_CWORD" -eq 1 ] && [[ "$cur" != -* ]]; then opts={quoting.sh(_words(names))}; fi',
        '    if [ "$COMP_CWORD" -eq 1 ] && [[ "$cur" == -* ]]; then opts="$opts --version"; fi',
        '    COMPREPLY=($(compgen -W "$opts" -- "$cur"))',
        "}",
        f"complete -o default -F _tfgpu_install {PROG}",
        "",
    ]
    return "\n".join(lines)


def _zsh_text(text: str) -> str:
    """Help text inside a zsh ``_arguments`` spec: no brackets or colons, quotes escaped."""
    text = re.sub(r"[\[\]]", "", text).replace(":", " -").replace("\\", "")
    return text.replace("'", "'\\''")


def _zsh_spec(option: Option) -> str:
    described = f"[{_zsh_text(option.help)}]"
    if option.takes_value:
        action = f"({' '.join(option.values)})" if option.values else ("_files" if option.paths else " ")
        if option.names:
            action = "_tfgpu_install_names"
        described += f":{option.flags[-1].lstrip('-')}:{action}"
    if len(option.flags) == 1:
        return f"'{option.flags[0]}{described}'"
    exclusive = f"({' '.join(option.flags)})"
    return f"'{exclusive}'{{{','.join(option.flags)}}}'{described}'"


def _zsh(commands: dict) -> str:
    lines = [
        f"#compdef {PROG}",
        f"# {PROG} completion for zsh, generated from its parser.",
        "_tfgpu_install_names() {",
        "    local -a names",
        f'    names=(${{(f)"$(command {PROG} list --names 2>/dev/null)"}})',
        "    compadd -a names",
        "}",
        "_tfgpu_install() {",
        "    local -a commands",
        "    commands=(" + " ".join(f"'{name}:{_zsh_text(c['help'])}'" for name, c in commands.items()) + ")",
        "    local cmd=${words[2]}",
        "    if (( CURRENT == 2 )) && [[ ${words[CURRENT]} != -* ]]; then",
        "        _describe -t commands command commands",
        "        return",
        "    fi",
        "    if (( ${commands[(I)${cmd}:*]} )); then",
        "        shift words",
        "        (( CURRENT-- ))",
        "    else",
        "        cmd=create",
        "    fi",
        "    case $cmd in",
    ]
    for name, command in commands.items():
        specs = [_zsh_spec(option) for option in command["options"]]
        if command["positional"]:
            specs.append(f"':{name}:({' '.join(command['positional'])})'")
        lines.append(f"        {name}) _arguments -s " + " \\\n            ".join(specs) + " ;;")
    lines += ["    esac", "}", f"compdef _tfgpu_install {PROG}", ""]
    return "\n".join(lines)


def _fish(commands: dict) -> str:
    names = " ".join(commands)
    lines = [
        f"# {PROG} completion for fish, generated from its parser.",
        f"complete -c {PROG} -f",
        f"complete -c {PROG} -n 'not __fish_seen_subcommand_from {names}' -l version -d 'print the version'",
    ]
    for name, command in commands.items():
        lines.append(
            f"complete -c {PROG} -n 'not __fish_seen_subcommand_from {names}' -a {name} "
            f"-d {quoting.fish_word(command['help'])}"
        )
    for name, command in commands.items():
        when = f"__fish_seen_subcommand_from {name}"
        if name == "create":  # the bare form: `tfgpu-install --tf 2.13 --mode conda` is create
            when = f"__fish_seen_subcommand_from create; or not __fish_seen_subcommand_from {names}"
        for option in command["options"]:
            words = []
            for flag in option.flags:
                words += ["-l", flag[2:]] if flag.startswith("--") else ["-s", flag[1:]]
            if option.takes_value:  # -x: a value, never a file name; -r -F: a path
                words += ["-r", "-F"] if option.paths else ["-x"]
                if option.names:
                    words += ["-a", quoting.fish_word(f"(command {PROG} list --names 2>/dev/null)")]
                elif option.values:
                    words += ["-a", quoting.fish_word(" ".join(option.values))]
            lines.append(
                f"complete -c {PROG} -n {quoting.fish_word(when)} {' '.join(words)} -d {quoting.fish_word(option.help[:80])}"
            )
        if command["positional"]:
            lines.append(
                f"complete -c {PROG} -n {quoting.fish_word(when)} -a {quoting.fish_word(' '.join(command['positional']))}"
            )
    return "\n".join(lines) + "\n"
