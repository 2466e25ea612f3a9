"""Every option of the command line, defined once: its flags, what it takes, its help.

A command lists the options it takes (``tfgpu.cli.parser``); it never defines one of its own, so an
option means the same thing on every command that has it (``--python`` is always a Python version,
``--interpreter`` always a path to an interpreter, ``--channel`` always a conda channel). Values
are parsed and checked by the core (``tfgpu.resolver.request``, ``tfgpu.installers.options``,
``tfgpu.doors.paths``), so an error names the flag with the project's own exit codes, not argparse's.
"""

from __future__ import annotations

from tfgpu.doors.paths import path_option
from tfgpu.records import factory, record

SHELLS = ("bash", "zsh", "fish")
"""The shells the tool writes for: completion scripts, activation lines."""
FILL = {
    "modes": "pip, conda or system",
    "force": "replace an existing env tfgpu-install built there (the old one stays until the new one is complete)",
}
"""What ``{modes}`` says in help unless a command takes fewer (lock and bundle: pip or conda)."""
PLATFORM_HELP = (
    "conda-style platform name: linux-64 (Linux x86_64, WSL2 included), linux-aarch64, win-64, "
    "osx-arm64, osx-64; repeatable"
)


@record
class Option:
    """One option: its flags and argparse's keywords (help is required: a test walks the parser)."""

    flags: tuple[str, ...]
    help: str
    keywords: dict = factory(dict)

    def add(self, group, fill: dict | None = None, **overrides) -> None:
        """``fill``: the words a command's help names that differ by command (``{modes}``)."""
        group.add_argument(*self.flags, help=self.help.format(**(FILL | (fill or {}))), **(self.keywords | overrides))


def _flag(help_text: str) -> dict:
    return {"help": help_text, "keywords": {"action": "store_true"}}


def _path(flag: str, metavar: str, help_text: str, **more) -> Option:
    """An option whose value names a file, directory or URL: ``tfgpu.doors.paths`` checks it as it is parsed."""
    return Option((flag,), help_text, {"metavar": metavar, "type": path_option(flag)} | more)


OPTIONS: dict[str, Option] = {
    # What to resolve: these describe the target machine, and a project file may supply them.
    "tf": Option(
        ("--tf",),
        "2.13, 2.13.1, latest, or a range such as '>=2.15,<2.18' (default: the newest that fits)",
        {"metavar": "SPEC"},
    ),
    "mode": Option(("--mode",), "{modes} (default: pip)"),
    "python": Option(("--python",), "Python version of the env (default: per mode)", {"metavar": "X.Y"}),
    "os": Option(("--os",), "linux, wsl2, windows or macos (default: this machine's)"),
    "arch": Option(("--arch",), "x86_64 or aarch64 (default: this machine's)"),
    "driver": Option(("--driver",), "NVIDIA driver version, e.g. 535.104.05 (default: detected)", {"metavar": "VER"}),
    "gpu_cc": Option(("--gpu-cc",), "GPU compute capability, e.g. 8.6 (default: detected)", {"metavar": "X.Y"}),
    "pre": Option(
        ("--pre",),
        **_flag("let latest and ranges choose pre-releases (an exact one such as 2.22.0rc0 always resolves)"),
    ),
    "tf_source": Option(
        ("--tf-source",),
        "conda mode: TensorFlow from PyPI (default) or conda-forge's CUDA build",
        {"choices": ("pypi", "conda-forge")},
    ),
    "allow_unsupported_gpu": Option(
        ("--allow-unsupported-gpu",),
        **_flag(
            "plan or install a release the sources say cannot run on the GPU's architecture "
            "(docs/planning.md); the plan warns what will fail"
        ),
    ),
    "companions": Option(
        ("--with",),
        "plan torch or jax in the same env (PEP 508: torch, torch==2.10.0, 'jax[cuda12]'); repeatable",
        {"action": "append", "metavar": "SPEC", "dest": "companions"},
    ),
    "no_detect": Option(("--no-detect",), **_flag("do not look at this machine at all")),
    "project": _path(
        "--project",
        "FILE",
        "read the target from this tfgpu.toml or pyproject.toml (default: the "
        "nearest one in this directory or a parent, or TFGPU_PROJECT_FILE; flags override it)",
    ),
    "no_project": Option(("--no-project",), **_flag("ignore any project file (and TFGPU_PROJECT_FILE)")),
    "platform": Option(
        ("--platform",),
        PLATFORM_HELP + " (lock, bundle: required unless the project file lists platforms; "
        "script --from-lock: which of the lock's platforms)",
        {"action": "append", "metavar": "PLAT"},
    ),
    # Where: an env, or an interpreter whose env is meant.
    "name": Option(
        ("--name", "-n"), "environment name: tfgpu-install's envs directory, then the conda installation's envs"
    ),
    "prefix": Option(("--prefix", "-p"), "environment path (a venv or a conda prefix)"),
    "interpreter": _path("--interpreter", "PATH", "the environment of this Python interpreter"),
    # Where packages come from.
    "engine": Option(("--engine",), "uv or pip (pip mode); rattler (default), conda, mamba or micromamba (conda mode)"),
    "channel": _path(
        "--channel",
        "URL",
        "conda channel: URL, name or local directory (repeatable; conda mode; default conda-forge)",
        action="append",
    ),
    "find_links": _path("--find-links", "DIR", "a directory (or URL) of wheels to install from"),
    "insecure_host": Option(
        ("--insecure-host",),
        "allow plain HTTP to HOST, loopback included (repeatable; also "
        "TFGPU_INSECURE_HOSTS=a,b); everything else is fetched over HTTPS only",
        {"action": "append", "metavar": "HOST"},
    ),
    "offline": Option(("--offline",), **_flag("use no network: local wheels and channels and the caches only")),
    "index": Option(("--index",), "PyPI JSON API root (default: https://pypi.org/pypi)", {"metavar": "URL"}),
    "from_lock": _path(
        "--from-lock",
        "FILE",
        "install exactly this lock (tfgpu-lock.*.txt or conda-lock.yml), every hash checked first; "
        "with script, export exactly its pins",
    ),
    "from_bundle": _path(
        "--from-bundle",
        "DIR",
        "install from an offline bundle made by `tfgpu-install bundle`, every file checked first",
    ),
    # What to write.
    "output": Option(
        ("-o", "--output"),
        "where to write: the lock file (several platforms: the platform goes "
        "before its extension), the bundle directory, or the script (a directory for ansible, slurm "
        "and kubernetes; default stdout)",
        {"metavar": "PATH", "type": path_option("-o")},
    ),
    "format": Option(
        ("--format",),
        "what to write",
        {"choices": ("bash", "dockerfile", "ansible", "cloud-init", "slurm", "kubernetes")},
    ),
    "allow_cpu": Option(
        ("--allow-cpu",), **_flag("lock TensorFlow's CPU package for platforms with no GPU build (the lock says so)")
    ),
    "check": _path(
        "--check",
        "FILE",
        "write nothing: exit 0 if FILE (without FILE: every lock the project file describes) is what its "
        "recorded inputs resolve to today, 1 with what changed and the command that writes the new lock (for CI)",
        nargs="?",
        const=True,
    ),
    # How.
    "jupyter": Option(("--jupyter",), **_flag("register a Jupyter kernel for the env")),
    "dry_run": Option(("--dry-run",), **_flag("print every step and command; change nothing")),
    "force": Option(
        ("--force",),
        **_flag("{force}"),
    ),
    "yes": Option(("--yes", "-y"), **_flag("do not ask (repair needs it when not on a terminal; create never asks)")),
    "no_verify": Option(("--no-verify",), **_flag("skip the GPU check at the end")),
    "require_gpu": Option(
        ("--require-gpu",),
        **_flag(
            "fail (exit 1, gpu-required) when this machine has no NVIDIA driver to check the GPU with; "
            "without it such a build ends with exit 0 and a notice (for CI on GPU hosts)"
        ),
    ),
    "undo": Option(("--undo",), **_flag("put the env back exactly as the first repair found it")),
    "forget_journal": Option(
        ("--forget-journal",),
        **_flag("with --undo: set aside a repair journal the tool cannot apply (kept, renamed), changing nothing else"),
    ),
    "allow_changes": Option(
        ("--allow-changes",),
        **_flag(
            "let the repair change the versions of CUDA packages the "
            "env already holds (listed first; --undo puts them back)"
        ),
    ),
    "log": _path("--log", "FILE", "match a TensorFlow log against known failures (- for stdin)"),
    "bench": Option(("--bench",), **_flag("add CPU-vs-GPU numbers (synced, repeated, median)")),
    "workers": Option(
        ("--workers",),
        "instead: one MultiWorkerMirroredStrategy training step across N local worker "
        "processes (one GPU each, N sharing one GPU, or the CPU)",
        {"type": int, "metavar": "N"},
    ),
    "all": Option(("--all",), **_flag("every patch release, not only the newest per series")),
    "json": Option(("--json",), **_flag("print one JSON document on stdout, nothing else there")),
    "cache_action": Option(
        ("cache_action",),
        "info: sizes by kind and what prune and clean would free; prune: remove what no env needs; "
        "clean: remove the tool's cache (your own uv cache is only ever pruned)",
        {"choices": ("info", "prune", "clean"), "metavar": "{info,prune,clean}"},
    ),
    # Entering an env.
    "command_argv": Option(
        ("command_argv",),
        "the command to run and its arguments, after -- (found on the activated env's PATH)",
        {"nargs": "*", "metavar": "CMD"},
    ),
    "shell": Option(("--shell",), "the shell to write for (default: the one $SHELL names)", {"choices": SHELLS}),
    "names": Option(("--names",), **_flag("only the env names, one a line (for scripts and shell completion)")),
}

SELECTORS = ("tf", "mode", "python", "os", "arch", "driver", "gpu_cc", "pre", "companions")
"""The options that describe the target; ``tfgpu.settings.Selectors`` carries them."""


def add(parser, *names: str, fill: dict | None = None, **overrides) -> None:
    """Add the named options to ``parser`` (or a group of it)."""
    for name in names:
        OPTIONS[name].add(parser, fill, **overrides)


def add_exclusive(parser, *names: str, required: bool = False) -> None:
    """Add the named options as a group of which at most one (exactly one: ``required``) is given."""
    group = parser.add_mutually_exclusive_group(required=required)
    add(group, *names)
