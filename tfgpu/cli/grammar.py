"""The command line's grammar, read without argparse: which command takes which options
(``tfgpu.cli.options`` defines each once), and the quick reading of a run's command line.

``tfgpu.cli.parser`` builds argparse parsers from :data:`GRAMMAR`; that is the grammar's authority,
and what ``--help``, completion, the docs and every error read. A run reads its options here first
(:func:`quick`): a command line made only of options the command takes, each spelled whole
(``--tf 2.21``, ``--tf=2.21``, ``-n NAME``, a flag), is read into the namespace argparse would give
(a test holds the two equal); any other form (a positional word, ``--``, ``-h``, an unknown or
abbreviated option, a value that starts with ``-`` or that its check refuses, a choice not offered,
two options of one exclusive group, a required option left out, an option with an optional value)
is left to argparse, which answers it as it always has. Importing argparse and building a
command's parser was 16M instructions of a ``plan --json`` (callgrind; a bare ``python -c pass``
is 39M).
"""

from __future__ import annotations

from tfgpu.cli.options import SHELLS, add, add_exclusive
from tfgpu.errors import UsageError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: type checkers treat it alike
if TYPE_CHECKING:
    import argparse  # what GRAMMAR's functions are handed (or a _Recorder, which answers the same calls)

COMMANDS = (
    "create",
    "plan",
    "lock",
    "bundle",
    "script",
    "doctor",
    "verify",
    "matrix",
    "update-data",
    "remove",
    "repair",
    "list",
    "completion",
    "cache",
    "run",
    "activate",
    "shell",
)


INTERPRETER_COMMANDS = ("doctor", "repair")
"""The commands that take an interpreter path (``--interpreter``); ``--python`` is a version elsewhere."""


def _selectors(parser: argparse.ArgumentParser, modes: str = "pip, conda or system") -> None:
    group = parser.add_argument_group("what to resolve (values describe the target machine)")
    add(group, "tf", "mode", "python", fill={"modes": modes})
    add(group, "os", "arch", "driver", "gpu_cc", "allow_unsupported_gpu", "pre", "tf_source", "companions", "no_detect")
    add_exclusive(group, "project", "no_project")
    add(parser, "json")


def _create(create: argparse.ArgumentParser) -> None:
    _selectors(create)
    add_exclusive(create, "name", "prefix")
    add(create, "engine", "channel", "find_links", "insecure_host", "offline")
    add_exclusive(create, "from_lock", "from_bundle")
    add(create, "jupyter", "dry_run", "force", "yes", "no_verify", "require_gpu")


def _plan(plan: argparse.ArgumentParser) -> None:
    _selectors(plan)
    add(plan, "channel")


def _lock(lock: argparse.ArgumentParser) -> None:
    _selectors(lock, modes="pip or conda")
    add(lock, "platform", "output", "allow_cpu", "check", "channel", "insecure_host")


def _bundle(bundle: argparse.ArgumentParser) -> None:
    _selectors(bundle, modes="pip or conda")
    add(bundle, "platform")
    add(bundle, "output", required=True)
    add(bundle, "channel", "insecure_host")


def _script(script: argparse.ArgumentParser) -> None:
    _selectors(script)
    add(script, "format", required=True)
    add(script, "output", "from_lock", "platform", "channel")
    add(script, "force", fill={"force": "replace files in -o DIR that tfgpu-install did not write (refused otherwise)"})


def _doctor(doctor: argparse.ArgumentParser) -> None:
    add_exclusive(doctor, "name", "prefix", "interpreter")
    add(doctor, "log", "json")


def _verify(verify: argparse.ArgumentParser) -> None:
    add_exclusive(verify, "name", "prefix")
    add(verify, "bench", "workers", "companions", "json")


def _remove(remove: argparse.ArgumentParser) -> None:
    add_exclusive(remove, "name", "prefix", required=True)
    add(remove, "json")


def _repair(repair: argparse.ArgumentParser) -> None:
    add_exclusive(repair, "name", "prefix", "interpreter")
    add(
        repair,
        "undo",
        "forget_journal",
        "allow_changes",
        "dry_run",
        "yes",
        "driver",
        "gpu_cc",
        "companions",
        "no_detect",
        "find_links",
        "offline",
        "channel",
        "insecure_host",
        "no_verify",
        "require_gpu",
        "json",
    )


def _completion(completion: argparse.ArgumentParser) -> None:
    completion.add_argument("shell", choices=SHELLS, help="bash, zsh or fish")


def _cache(cache: argparse.ArgumentParser) -> None:
    add(cache, "cache_action")
    add(cache, "dry_run", "json")


def _run(run: argparse.ArgumentParser) -> None:
    add_exclusive(run, "name", "prefix", required=True)
    add(run, "command_argv")


def _activate(activate: argparse.ArgumentParser) -> None:
    add_exclusive(activate, "name", "prefix", required=True)
    add(activate, "shell")


def _shell(shell: argparse.ArgumentParser) -> None:
    add_exclusive(shell, "name", "prefix", required=True)


GRAMMAR = {
    "create": ("build an environment (the default command)", _create),
    "plan": ("print the resolution: versions, packages, reasons", _plan),
    "lock": ("write a lockfile for a team", _lock),
    "bundle": ("write an offline bundle", _bundle),
    "script": ("export a provisioning script", _script),
    "doctor": ("explain what is broken and how to fix it (default: the active env)", _doctor),
    "verify": ("prove the GPU works inside an environment (default: the active env)", _verify),
    "matrix": ("every TensorFlow release and what it needs", lambda matrix: add(matrix, "all", "json")),
    "update-data": (
        "fetch TensorFlow releases published since this tool's data",
        lambda update: add(update, "offline", "index", "insecure_host", "json"),
    ),
    "remove": ("delete an environment tfgpu-install created", _remove),
    "repair": (
        "make an existing env's TensorFlow find the GPU, in place (undoable; default: the active env)",
        _repair,
    ),
    "list": (
        "the environments tfgpu-install built, with TF, CUDA, mode and health",
        lambda env: add(env, "names", "json"),
    ),
    "completion": ('print a shell completion script: eval "$(tfgpu-install completion bash)"', _completion),
    "cache": ("see the cache by kind, prune it, or clean it", _cache),
    # An env is always named (as for remove): with one active, its commands already run in it, and
    # a default would hide, in a script or a cron job, which env a command ran in.
    "run": ("run one command in an environment, as its activation would (its exit code is the tool's)", _run),
    "activate": (
        'print the lines that activate an env in your shell: eval "$(tfgpu-install activate -n N)"',
        _activate,
    ),
    "shell": ("start your $SHELL inside an environment (exit leaves it; its exit code is the tool's)", _shell),
}
"""Each command: its help line (listed by ``--help``) and what adds its options, in ``COMMANDS``' order."""


def with_default_command(argv: list[str]) -> list[str]:
    """``tfgpu-install --tf 2.13 --mode conda`` means ``tfgpu-install create --tf 2.13 --mode conda``."""
    if not argv or argv == ["--json"]:
        raise UsageError(
            "missing-command",
            "Say what to do: no command and no --tf were given.",
            [
                "`tfgpu-install plan` shows what this machine can run.",
                "`tfgpu-install --tf 2.21 --mode pip --name tf2.21` builds an environment.",
                "`tfgpu-install --help` lists every command.",
            ],
        )
    if argv[0] in COMMANDS or argv[0] in ("-h", "--help", "--version"):
        return argv
    if not argv[0].startswith("-"):
        # Start-up cost: `plan --json --no-detect` loads this module but not tfgpu.cli.typos.
        from tfgpu.cli.typos import closest

        near = closest(argv[0], COMMANDS)
        raise UsageError(
            "unknown-command",
            f"{argv[0]!r} is not a tfgpu-install command." + (f" Did you mean {near}?" if near else ""),
            [
                *([f"`tfgpu-install {near} --help` shows what {near} does and takes."] if near else []),
                f"Commands: {', '.join(COMMANDS)}; or the bare form `tfgpu-install --tf 2.13 --mode conda`.",
            ],
        )
    return ["create", *argv]


class _Recorder:
    """Stands in for an argparse parser, group or exclusive group while a command's options are
    added (:data:`GRAMMAR`'s functions), and keeps what argparse would be told, in its order."""

    def __init__(self, into: list | None = None, group: int | None = None, required: bool = False) -> None:
        self.added: list = [] if into is None else into
        self.group, self.required = group, required

    def add_argument(self, *flags: str, **keywords) -> None:
        self.added.append((flags, keywords, self.group, self.required))

    def add_argument_group(self, *_args, **_keywords) -> _Recorder:
        return self

    def add_mutually_exclusive_group(self, required: bool = False) -> _Recorder:
        return _Recorder(self.added, len(self.added), required)


def _dest(flags: tuple[str, ...], keywords: dict) -> str:
    """argparse's destination for an option: ``dest=``, else its first long flag, else its first."""
    if "dest" in keywords:
        return keywords["dest"]
    long = next((flag for flag in flags if flag.startswith("--")), flags[0])
    return long.lstrip("-").replace("-", "_")


def _options(command: str) -> tuple[list, dict, dict] | None:
    """``command``'s options as (dest, keywords, group, required) in argparse's order, by flag, and
    its exclusive groups (by group: required or not); None where it takes a positional word."""
    recorder = _Recorder()
    GRAMMAR[command][1](recorder)  # type: ignore[arg-type]  # it answers the calls the grammar makes
    actions, by_flag, groups = [], {}, {}
    for flags, keywords, group, required in recorder.added:
        if not flags[0].startswith("-"):
            return None
        entry = (_dest(flags, keywords), keywords, group)
        actions.append(entry)
        by_flag.update(dict.fromkeys(flags, entry))
        if group is not None:
            groups[group] = required
    return actions, by_flag, groups


_SIMPLE = (None, "store_true", "append")


def quick(argv: list[str]) -> dict | None:
    """``argv`` (the command first) as the namespace's values argparse would give, or None: the form
    is one for argparse to read (see the module docstring)."""
    options = _options(argv[0]) if argv and argv[0] in COMMANDS else None
    if options is None:
        return None
    actions, by_flag, groups = options
    given: dict[str, object] = {}
    seen_groups: dict[int, str] = {}
    words = iter(argv[1:])
    for word in words:
        flag, equals, value = word.partition("=") if word.startswith("--") else (word, "", "")
        entry = by_flag.get(flag)
        if entry is None:
            return None
        dest, keywords, group = entry
        action = keywords.get("action")
        if action not in _SIMPLE or "nargs" in keywords or "const" in keywords or "default" in keywords:
            return None
        if action == "store_true":
            if equals:
                return None
            converted: object = True
        else:
            if not equals:
                following = next(words, None)
                if following is None or following.startswith("-"):
                    return None
                value = following
            try:
                converted = keywords["type"](value) if "type" in keywords else value
            except (UsageError, ValueError, TypeError):
                return None
            if "choices" in keywords and converted not in keywords["choices"]:
                return None
        if group is not None:
            if seen_groups.setdefault(group, dest) != dest:
                return None
        if action == "append":
            given.setdefault(dest, [])
            given[dest].append(converted)  # type: ignore[attr-defined]
        else:
            given[dest] = converted
    if any(keywords.get("required") and dest not in given for dest, keywords, _group in actions):
        return None
    if any(required and group not in seen_groups for group, required in groups.items()):
        return None
    values: dict[str, object] = {"command": argv[0]}
    for dest, keywords, _group in actions:
        values[dest] = given.get(dest, False if keywords.get("action") == "store_true" else None)
    return values
