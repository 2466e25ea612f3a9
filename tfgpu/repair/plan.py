"""The smallest change that makes an existing env's TensorFlow find its GPU, worked out without
touching anything: the CUDA packages the resolution needs that are missing (added), those present
at a version that cannot work (changed, only with ``--allow-changes``), and the activation files
(load hook, activate scripts, ptxas and libdevice set-up) that differ from what they should be.

Pure apart from reading the env: the files are rendered into a scratch directory and compared.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version
from rattler import MatchSpec, PrefixRecord

from tfgpu.doctor.ownership import other_stack_first
from tfgpu.doctor.reads import RunReads, unfinished_lines
from tfgpu.doors import untrusted
from tfgpu.envs import activation, writes
from tfgpu.installers.stacks import refuse_into_other_stack
from tfgpu.records import factory, record, replace
from tfgpu.repair.survey import EnvSurvey, canonical
from tfgpu.resolver import tables

CONDA_CUDA = ("cudatoolkit", "cuda-cudart", "cuda-version", "cudnn", "libcublas")
"""conda packages whose presence makes a conda prefix's CUDA conda's (not PyPI wheels')."""


@record
class PackageChange:
    name: str
    wanted: str
    """The requirement (pip) or match spec (conda) installed."""
    installed: str | None = None
    """The version there now (None: missing)."""
    reason: str = ""

    def to_dict(self) -> dict:
        return {"name": self.name, "wanted": self.wanted, "installed": self.installed, "reason": self.reason}


@record(frozen=False)
class RepairPlan:
    survey: EnvSurvey
    resolution: object
    manager: str
    """``pip`` (CUDA wheels in site-packages) or ``conda`` (the prefix's conda CUDA packages)."""
    add: list[PackageChange] = factory(list)
    change: list[PackageChange] = factory(list)
    files: dict[str, object] = factory(dict)
    """Files to write (env-relative path -> ("file", bytes, mode) or ("link", target)), after the packages."""
    left_open: tuple[tuple[str, str], ...] = ()
    """(env-relative path, where it links): links out of the env that make a dlopened name load from
    outside and that the repair cannot replace (``tfgpu.envs.activation.dlopen_left_out``)."""
    not_fully_read: tuple[str, ...] = ()
    """"path: why" of each library the load hook's planning did not fully read (a crafted or damaged
    one past the read budget): what the hook loads first may miss it, which the plan says."""

    @property
    def nothing_to_do(self) -> bool:
        return not (self.add or self.change or self.files)

    def to_dict(self) -> dict:
        return {
            "manager": self.manager,
            "add": [p.to_dict() for p in self.add],
            "change": [p.to_dict() for p in self.change],
            "files": sorted(self.files),
            "nothing_to_do": self.nothing_to_do,
            "left_open": [{"path": path, "links_to": target} for path, target in self.left_open],
            "not_fully_read": list(self.not_fully_read),
        }


def manager_of(survey: EnvSurvey) -> str:
    if survey.kind == "conda" and any(name in survey.conda for name in CONDA_CUDA):
        return "conda"
    return "pip"


def cuda_requirements(resolution) -> list[str]:
    """The CUDA wheels a pip-mode env of ``resolution`` holds, TensorFlow itself excluded: the explicit
    pins (releases without ``and-cuda``), the extra's pins, and the extra tools (``nvidia-cuda-nvcc``).
    ``--with`` companions (torch, jax) are never installed or changed by a repair; their pins on the
    CUDA wheels TensorFlow shares with them are kept (a wheel named twice must meet both)."""
    companions = {canonical(Requirement(r).name) for r in getattr(resolution, "companions", ())}
    wanted = [
        r
        for r in resolution.packages.pip
        if not canonical(Requirement(r).name).startswith("tensorflow")
        and canonical(Requirement(r).name) not in companions
    ]
    coplan = getattr(resolution, "coplan", None)
    return [*wanted, *getattr(resolution.packages, "cuda_extra", ()), *(coplan.shared_pins if coplan else ())]


def _marker_applies(requirement: Requirement, python: str) -> bool:
    if requirement.marker is None:
        return True
    return requirement.marker.evaluate(
        {
            "python_version": python,
            "platform_system": "Linux",
            "sys_platform": "linux",
            "platform_machine": "x86_64",
            "extra": "",
        }
    )


def pip_changes(survey: EnvSurvey, resolution) -> tuple[list[PackageChange], list[PackageChange]]:
    """(missing, wrong) CUDA wheels for ``resolution`` in ``survey``'s env. A wheel named twice (an
    explicit floor and the extra's range, as ``nvidia-cuda-nvcc`` is) must meet both."""
    merged: dict[str, Requirement] = {}
    for text in cuda_requirements(resolution):
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        if not _marker_applies(requirement, survey.python_version):
            continue
        name = canonical(requirement.name)
        if name in merged:
            merged[name].specifier &= requirement.specifier
        else:
            requirement.marker = None
            merged[name] = requirement
    add, change = [], []
    for name, requirement in merged.items():
        wanted = f"{name}{requirement.specifier}"
        installed = survey.distributions.get(name)
        if installed is None:
            add.append(PackageChange(name, wanted, None, "missing"))
            continue
        reason = _wrong_version(name, installed, requirement, resolution)
        if reason:
            change.append(PackageChange(name, _with_floor(name, wanted, resolution), installed, reason))
    return add, change


def _wrong_version(name: str, installed: str, requirement: Requirement, resolution) -> str:
    try:
        version = Version(installed)
    except InvalidVersion:
        return f"{installed} is not a version this tool can compare"
    if requirement.specifier and not requirement.specifier.contains(version, prereleases=True):
        return f"{installed} does not satisfy {requirement.specifier} (TensorFlow {resolution.tensorflow} needs it)"
    floor = _cudnn_floor(name, resolution)
    if floor is not None and version.release[:2] < floor.release[:2]:
        return (
            f"cuDNN {installed} is older than the {floor} TensorFlow {resolution.tensorflow} was compiled "
            "against: TensorFlow refuses it when it loads"
        )
    return ""


def _cudnn_floor(name: str, resolution) -> Version | None:
    if not name.startswith("nvidia-cudnn") or not resolution.cudnn:
        return None
    try:
        return Version(resolution.cudnn)
    except InvalidVersion:
        return None


def _with_floor(name: str, wanted: str, resolution) -> str:
    floor = _cudnn_floor(name, resolution)
    return f"{wanted},>={floor}" if floor is not None and ">=" not in wanted else wanted


def conda_changes(survey: EnvSurvey, resolution) -> tuple[list[PackageChange], list[PackageChange]]:
    """(missing, wrong) conda CUDA packages for ``resolution`` in a conda prefix."""
    add, change = [], []
    for spec in resolution.packages.conda:
        name = spec.split(" ", 1)[0].split("=", 1)[0]
        if name == "python":
            continue
        installed = survey.conda.get(name)
        if installed is None:
            add.append(PackageChange(name, spec, None, "missing"))
            continue
        record = _prefix_record(survey.prefix, name)
        if record is not None and not MatchSpec(spec).matches(record):
            change.append(PackageChange(name, spec, installed, f"{installed} does not match `{spec}`"))
    return add, change


def _prefix_record(prefix: Path, name: str):
    for path in (prefix / "conda-meta").glob(f"{name}-*.json"):
        try:
            record = PrefixRecord.from_path(path)
        except Exception:  # noqa: BLE001 - a damaged conda-meta entry: treat the package as unknown
            continue
        if record.name.normalized == name:
            return record
    return None


def render_activation(survey: EnvSurvey, manager: str, scratch: Path, reads=None) -> dict[str, object]:
    """What the activation set-up writes into ``survey``'s env, rendered into ``scratch`` (a copy of
    the scripts it edits): env-relative path -> ("file", bytes, mode) or ("link", target). ``reads``:
    a :class:`tfgpu.doctor.reads.RunReads` whose ``unfinished`` then names what was not fully read."""
    prefix = survey.prefix
    (scratch / "bin").mkdir()
    for script in ("bin/activate", "bin/activate.fish"):
        found = writes.read_own(prefix / script, prefix)  # a link out of the env: repair-path-outside
        if found is not None:
            writes.put_bytes(scratch / script, found[0], found[1])
    (scratch / survey.site_relative).mkdir(parents=True, exist_ok=True)
    if manager == "conda":
        layout = activation.read_conda_layout(prefix, survey.site_relative, tables.dlopened_names())
        written = activation.write_conda_activation(scratch, layout)
    else:
        layout = activation.read_layout(prefix, survey.site_relative, tables.dlopened_names())
        layout = replace(layout, other_first=other_stack_first(prefix / survey.site_relative, reads))
        written = activation.write_venv_activation(scratch, layout)
    rendered: dict[str, object] = {}
    for path in written:
        if not (path.exists() or path.is_symlink()):
            continue  # e.g. bin/activate.fish where the env has none
        relative = path.relative_to(scratch).as_posix()
        rendered[relative] = (
            ("link", os.readlink(path))
            if path.is_symlink()
            else ("file", untrusted.read_bytes(path, untrusted.ENV_FILE), path.stat().st_mode & 0o777)
        )
    return rendered


def state_of(path: Path) -> object:
    """A path's state in the form :func:`render_activation` uses (None: absent)."""
    if path.is_symlink():
        return ("link", os.readlink(path))
    if path.is_file():
        return ("file", untrusted.read_bytes(path, untrusted.ENV_FILE), path.stat().st_mode & 0o777)
    return None


def differing_files(survey: EnvSurvey, manager: str, reads=None) -> dict[str, object]:
    """The activation files whose rendering differs from what the env holds now."""
    with tempfile.TemporaryDirectory(prefix="tfgpu-repair-") as tmp:
        rendered = render_activation(survey, manager, Path(tmp), reads)
    return {path: want for path, want in rendered.items() if state_of(survey.prefix / path) != want}


def plan_repair(survey: EnvSurvey, resolution) -> RepairPlan:
    """Everything the repair would do (nothing is touched)."""
    manager = manager_of(survey)
    add, change = (conda_changes if manager == "conda" else pip_changes)(survey, resolution)
    if manager != "conda":
        refuse_into_other_stack(survey.site_packages, [p.name for p in [*add, *change]], str(survey.prefix))
    plan = RepairPlan(survey=survey, resolution=resolution, manager=manager, add=add, change=change)

    reads = RunReads()  # one budget for every library the plan reads
    plan.files = differing_files(survey, manager, reads)
    plan.not_fully_read = tuple(unfinished_lines(reads, survey.prefix))
    plan.left_open = left_open(survey, manager)
    return plan


def left_open(survey: EnvSurvey, manager: str) -> tuple[tuple[str, str], ...]:
    """What keeps a dlopened name loading from outside the env that no repair write can change (the
    env's own file of that library is itself a link out of it): said, never "nothing to do"."""
    rows = tables.dlopened_names()
    if manager == "conda":
        return activation.dlopen_left_out(survey.prefix, ("lib",), rows)
    layout = activation.read_layout(survey.prefix, survey.site_relative, rows)
    return activation.dlopen_left_out(survey.prefix, layout.lib_dirs, rows)
