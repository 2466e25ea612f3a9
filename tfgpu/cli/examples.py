"""The examples each command's ``--help`` ends with: the first thing a newcomer copies.

Each is a command line and what it does. A test parses every ``tfgpu-install ...`` in them with the
real parser and checks that every command has some, so an example cannot name an option that is
gone or a value that is refused.
"""

from __future__ import annotations

EXAMPLES: dict[str, tuple[tuple[str, str], ...]] = {
    "create": (
        ("tfgpu-install --tf 2.21 --mode pip --name tf2.21", "a pip-mode env, verified on this GPU"),
        ("tfgpu-install create --tf 2.15 --mode conda --jupyter", "a conda env with a Jupyter kernel"),
        ("tfgpu-install create --from-lock tfgpu-lock.linux-64.txt --name team", "exactly what a lock pins"),
        ("tfgpu-install create --tf 2.21 --prefix ./env --dry-run", "every step and command; nothing changes"),
    ),
    "plan": (
        ("tfgpu-install plan", "the newest TensorFlow this machine can run, and why"),
        ("tfgpu-install plan --tf 2.13 --mode conda --json", "a release's needs, as JSON"),
        ("tfgpu-install plan --tf latest --no-detect --driver 535.104.05", "for another machine's driver"),
    ),
    "lock": (
        ("tfgpu-install lock --tf 2.21 --mode pip --platform linux-64", "a hashed lock for a team"),
        ("tfgpu-install lock --check tfgpu-lock.linux-64.txt", "CI: is the lock still what its inputs give"),
    ),
    "bundle": (
        ("tfgpu-install bundle --tf 2.21 --mode pip --platform linux-64 -o ./tf-bundle", "for a machine offline"),
    ),
    "script": (
        ("tfgpu-install script --tf 2.21 --format bash -o install-tf.sh", "a script for machines without the tool"),
        ("tfgpu-install script --tf 2.21 --format slurm -o ./tf-slurm", "an sbatch job and its modulefiles"),
    ),
    "doctor": (
        ("tfgpu-install doctor", "this machine, and the active env if there is one"),
        ("tfgpu-install doctor --name tf2.21", "an env the tool built"),
        ("tfgpu-install doctor --log train.log", "match a TensorFlow log against known failures"),
    ),
    "cache": (
        ("tfgpu-install cache info", "the caches by kind: sizes, what is linked into envs, what would be freed"),
        ("tfgpu-install cache prune --dry-run", "what no env needs, without removing it"),
        ("tfgpu-install cache clean --json", "remove the tool's cache; what was freed, as JSON"),
    ),
    "verify": (
        ("tfgpu-install verify --name tf2.21", "does TensorFlow in the env use the GPU"),
        ("tfgpu-install verify --prefix ./env --bench", "and how much faster than the CPU"),
    ),
    "matrix": (
        ("tfgpu-install matrix", "the newest patch of every TensorFlow series and what it needs"),
        ("tfgpu-install matrix --all --json", "every release, as JSON"),
    ),
    "update-data": (("tfgpu-install update-data", "learn the TensorFlow releases published since this version"),),
    "remove": (("tfgpu-install remove --name tf2.21", "delete an env the tool built (nothing else)"),),
    "repair": (
        ("tfgpu-install repair --prefix ./venv --dry-run", "what a repair of your own venv would change"),
        ("tfgpu-install repair --prefix ./venv --yes", "make its TensorFlow find the GPU"),
        ("tfgpu-install repair --prefix ./venv --undo", "put it back as it was"),
    ),
    "list": (
        ("tfgpu-install list", "the envs the tool built, with their health"),
        ("tfgpu-install list --names", "only their names"),
    ),
    "completion": (
        ('eval "$(tfgpu-install completion bash)"', "in ~/.bashrc"),
        ("tfgpu-install completion fish > ~/.config/fish/completions/tfgpu-install.fish", "fish"),
    ),
    "run": (
        ("tfgpu-install run --name tf2.21 -- python train.py --epochs 3", "one command in the env"),
        ("tfgpu-install run -n tf2.21 -- python -c 'import tensorflow as tf; print(tf.__version__)'", ""),
        ("tfgpu-install run --prefix ./env -- jupyter lab", "any program the env installed"),
    ),
    "activate": (
        ('eval "$(tfgpu-install activate --name tf2.21)"', "bash or zsh: this shell, in the env"),
        ("tfgpu-install activate --name tf2.21 --shell fish | source", "fish"),
    ),
    "shell": (("tfgpu-install shell --name tf2.21", "a new shell in the env; exit leaves it"),),
}


FIRST_STEPS: tuple[tuple[str, str], ...] = (
    ("tfgpu-install plan", "what this machine can run"),
    ("tfgpu-install --tf 2.21 --mode pip --name tf2.21", "build it (create is the bare form)"),
    ("tfgpu-install run --name tf2.21 -- python train.py", "use it"),
    ("tfgpu-install doctor --name tf2.21", "when the GPU is not found"),
)
"""The top-level help's examples: a first hour in four lines."""

NOTES = {
    verb: "The env is always named, with --name or --prefix (as for remove): with an env active, commands "
    "already run in it,\nand a default would hide which env a script or a cron job ran in."
    for verb in ("run", "activate", "shell")
}
"""What a command's help says before its examples."""


def epilog(command: str | None) -> str:
    """What ``command``'s help ends with (None: the top level's): its note, then ``Examples:``, one
    a line with what it does."""
    examples = FIRST_STEPS if command is None else EXAMPLES.get(command, ())
    lines = [f"  {line}" + (f"\n      {says}" if says else "") for line, says in examples]
    shown = "Examples:\n" + "\n".join(lines) if lines else ""
    return "\n\n".join(part for part in (NOTES.get(command or "", ""), shown) if part)
