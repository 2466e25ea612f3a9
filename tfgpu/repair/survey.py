"""What an existing environment holds, read as files: its kind (venv or conda prefix), Python,
TensorFlow and its build, every installed distribution and conda package, and whether it is one
repair may touch at all (a venv or a conda prefix; never a system or externally managed Python).
"""

from __future__ import annotations

import re
from pathlib import Path

from tfgpu.doctor.envfacts import read_env
from tfgpu.doors import untrusted
from tfgpu.envs.txn import read_record
from tfgpu.errors import ImpossibleError
from tfgpu.process.runner import Runner
from tfgpu.records import factory, record

JOURNAL = Path("etc") / "tfgpu" / "repair.json"
"""Inside the env: what a repair added and the original bytes of what it edited (``--undo`` reads it)."""


def canonical(name: str) -> str:
    """PEP 503 name: ``nvidia_cudnn_cu12`` and ``nvidia-cudnn-cu12`` are one distribution."""
    return re.sub(r"[-_.]+", "-", name).lower()


@record(frozen=False)
class EnvSurvey:
    """An env as repair sees it."""

    prefix: Path
    kind: str
    """``venv`` or ``conda``."""
    python: Path
    python_version: str
    site_packages: Path
    tf_version: str | None
    tf_distribution: str | None
    cuda_build: bool
    build_info: dict
    distributions: dict[str, str] = factory(dict)
    """Every installed distribution (PEP 503 name) and its version."""
    conda: dict[str, str] = factory(dict)
    """conda packages (name -> version), for conda prefixes."""
    journal: dict | None = None

    @property
    def site_relative(self) -> str:
        return self.site_packages.relative_to(self.prefix).as_posix()

    def to_dict(self) -> dict:
        return {
            "prefix": str(self.prefix),
            "kind": self.kind,
            "python": str(self.python),
            "python_version": self.python_version,
            "tensorflow": self.tf_version,
            "distribution": self.tf_distribution,
            "cuda_build": self.cuda_build,
            "nvidia": {n: v for n, v in sorted(self.distributions.items()) if n.startswith("nvidia-")},
            "conda": dict(sorted(self.conda.items())),
            "repaired_before": self.journal is not None,
        }


def distributions(site: Path) -> dict[str, str]:
    """``{name: version}`` of every ``*.dist-info`` in ``site`` (read from METADATA, not the file name)."""
    found = {}
    for dist_info in sorted(site.glob("*.dist-info")):
        try:
            text = untrusted.read_text(dist_info / "METADATA", untrusted.ENV_FILE, errors="replace")
        except untrusted.Unreadable:
            continue
        name = re.search(r"^Name:\s*(\S+)", text, re.M)
        version = re.search(r"^Version:\s*(\S+)", text, re.M)
        if name and version:
            found[canonical(name.group(1))] = version.group(1)
    return found


def conda_packages(prefix: Path) -> dict[str, str]:
    found = {}
    for path in sorted((prefix / "conda-meta").glob("*.json")):
        try:
            record = untrusted.load_json(path, untrusted.ENV_FILE)
        except untrusted.Unreadable:
            continue
        if isinstance(record, dict) and isinstance(record.get("name"), str):
            found[record["name"]] = str(record.get("version", ""))
    return found


def survey(prefix: Path | None = None, python: Path | None = None) -> EnvSurvey:
    """Read the env at ``prefix`` (or of the interpreter ``python``); refuse what repair must not touch."""
    facts = read_env(prefix, python)
    root = facts.root
    if python is not None:
        _refuse_managed(python)
    if (root / "conda-meta").is_dir():  # before pyvenv.cfg: a conda prefix may hold one too
        kind = "conda"
    elif (root / "pyvenv.cfg").is_file():
        kind = "venv"
    else:
        raise ImpossibleError(
            "not-an-env-prefix",
            f"{root} is neither a virtual environment (no pyvenv.cfg) nor a conda prefix (no "
            "conda-meta/): repairing it would change a Python that other programs share.",
            [
                "Make a venv for the project (`python3 -m venv ENV`), install TensorFlow there, then `tfgpu-install "
                "repair --prefix ENV`.",
                "Or let tfgpu-install build one: `tfgpu-install --tf X.Y --mode pip --name N`.",
            ],
        )
    if facts.site_packages is None or not facts.site_packages.is_dir():
        raise ImpossibleError(
            "no-tensorflow",
            f"{root} has no site-packages directory, so no TensorFlow to repair.",
            ["Install TensorFlow into it first, or build a new env: `tfgpu-install --tf X.Y`."],
        )
    if not facts.tf_version:
        raise ImpossibleError(
            "no-tensorflow",
            f"There is no TensorFlow in {root} ({facts.site_packages}).",
            [
                f"Install it first (`uv pip install --python {facts.python} tensorflow[and-cuda]`), "
                "then repair; or build a new env: `tfgpu-install --tf X.Y --mode pip --name N`."
            ],
        )
    journal = read_journal(root)
    return EnvSurvey(
        prefix=root,
        kind=kind,
        python=facts.python,
        python_version=facts.python_version or "",
        site_packages=facts.site_packages,
        tf_version=facts.tf_version,
        tf_distribution=facts.tf_distribution,
        cuda_build=bool(facts.build_info.get("is_cuda_build")),
        build_info=facts.build_info,
        distributions=distributions(facts.site_packages),
        conda=conda_packages(root) if kind == "conda" else {},
        journal=journal,
    )


JOURNAL_LIMIT = 16 << 20
"""A repair journal holds a few activation scripts; anything larger is not one of ours."""
UNREADABLE = {"unreadable": True}
"""What a journal that exists but cannot be read becomes: refused by ``check_journal``, never taken
for "not repaired" (which would make the next repair journal the repaired state as the original)."""


def read_journal(root: Path) -> dict | None:
    path = root / JOURNAL
    if not (path.exists() or path.is_symlink()):
        return None
    journal = read_record(path, untrusted.JOURNAL)
    return journal if journal is not None else UNREADABLE


def _refuse_managed(python: Path) -> None:
    """PEP 668: an interpreter whose stdlib holds ``EXTERNALLY-MANAGED`` belongs to the system."""

    done = Runner().capture(
        [
            str(python),
            "-I",
            "-B",
            "-c",
            "import json, sys, sysconfig; print(json.dumps("
            "[sys.prefix != sys.base_prefix, sysconfig.get_path('stdlib')]))",
        ],
        timeout=30,
    )
    try:
        in_venv, stdlib = untrusted.parse_json(done.output, untrusted.CHILD_OUTPUT, str(python))
    except (untrusted.Unreadable, ValueError, TypeError):
        return  # read_env already refused an interpreter that does not run
    # The marker governs the base interpreter only; a venv made from it is the user's own (PEP 668).
    if not in_venv and stdlib and (Path(stdlib) / "EXTERNALLY-MANAGED").is_file():
        raise ImpossibleError(
            "externally-managed",
            f"{python} is managed by the operating system (PEP 668: "
            f"{stdlib}/EXTERNALLY-MANAGED); tfgpu-install will not change it.",
            [
                "Make a venv for the project (`python3 -m venv ENV`), install TensorFlow there, then "
                "`tfgpu-install repair --prefix ENV`."
            ],
        )
