"""The resolver's output: a :class:`Resolution` and what it is made of."""

from __future__ import annotations

from tfgpu.doors.requirements import MatchSpec, Requirement
from tfgpu.records import as_dict, record


@record
class Notice:
    """A warning attached to a plan that still works: a stable ``code``, what, and what to do."""

    code: str
    message: str
    fix: str = ""


@record
class Rejection:
    """Why a newer release than the chosen one was not taken."""

    tensorflow: str
    code: str
    message: str


@record
class Packages:
    """What one install mode puts into the environment."""

    pip: tuple[str, ...] = ()
    """Requirements installed from PyPI (uv or pip)."""
    conda: tuple[str, ...] = ()
    """conda match specs solved against conda-forge."""
    downloads: tuple[str, ...] = ()
    """Vendor archives (system mode): NVIDIA's runfile, the cuDNN archive."""
    notes: tuple[str, ...] = ()
    """How these packages were chosen, one sentence each."""
    cuda_extra: tuple[str, ...] = ()
    """The CUDA wheels the ``pip`` entry's extra brings, as the wheel's METADATA pins them
    (``nvidia-cudnn-cu12<10.0,>=9.10.2.21``): the pins the plan relies on, installed through the extra."""

    def __post_init__(self) -> None:
        # The door (tfgpu.doors.requirements) is the only maker of what uv, pip, rattler, locks and
        # exports are handed: a plain string here was built around it.

        for field_name, kind in (("pip", Requirement), ("cuda_extra", Requirement), ("conda", MatchSpec)):
            for item in getattr(self, field_name):
                if not isinstance(item, kind):
                    raise TypeError(
                        f"Packages.{field_name} takes {kind.__name__} values from tfgpu.doors.requirements, not {item!r}"
                    )

    def to_dict(self) -> dict:
        return {key: [str(item) for item in value] for key, value in as_dict(self).items()}


@record
class ModeOption:
    """Whether an install mode can build this release for this target, and with what."""

    available: bool
    packages: Packages = Packages()
    code: str = ""
    reason: str = ""
    warnings: tuple[Notice, ...] = ()
    """Caveats of this mode's package choice (e.g. a version whose builds are unverified)."""


@record
class Target:
    """The machine the plan is for: the request's values, else the detected host's."""

    os: str
    arch: str
    platform: str
    python: str | None
    python_given: bool
    driver: str | None
    driver_source: str
    gpu_ccs: tuple[str, ...]
    gpu_source: str
    glibc: str | None
    running_python: str | None
    allow_unsupported_gpu: bool = False
    """``--allow-unsupported-gpu``: a cannot-run architecture verdict warns instead of failing."""


@record
class Companion:
    """A framework planned next to TensorFlow (``--with``): its pinned requirement and CUDA stack."""

    requirement: str
    """Pinned, as installed: ``torch==2.10.0``, ``jax[cuda12]==0.12.0.1``."""
    framework: str
    version: str
    extra: str
    stack: str
    """``cu12``/``cu13``: the CUDA its wheels' nvidia-* requirements install."""
    cuda: str = ""
    """The CUDA its build was made with (read from the wheel)."""
    min_driver: str = ""
    """The Linux driver that build needs (cuda.toml)."""
    gpu_archs: tuple[str, ...] = ()
    """The GPU code it carries (``sm_NN``/``compute_NN``), or ``(min CC, max CC)`` where the wheel
    states only a range; () where it states nothing."""
    archs_from: str = ""
    """The wheel member that stated them."""
    sources: tuple[str, ...] = ()


@record
class CoPlan:
    """The decision for TensorFlow and its companions (``tfgpu.resolver.companions``)."""

    asked: tuple[str, ...]
    """The ``--with`` specs as given."""
    companions: tuple[Companion, ...]
    outcome: str
    """``single-stack`` or ``two-stacks`` (a conflict is an error, not a plan)."""
    two_stacks: bool
    stacks: tuple[str, ...]
    """TensorFlow's stack, then each companion's."""
    pythons: tuple[str, ...]
    """The Python versions every side has wheels for."""
    colliding: tuple[str, ...] = ()
    """Distributions of the two stacks that install the same files (``nvidia-cudnn-cu12``, ``-cu13``)."""
    colliding_paths: tuple[str, ...] = ()
    """Those files, relative to site-packages (``nvidia/cudnn/lib/libcudnn.so.9``)."""
    shared_pins: tuple[str, ...] = ()
    """The companions' pins on the CUDA wheels TensorFlow's extra names too (``nvidia-nccl-cu12==2.27.5``):
    what a repair of TensorFlow's CUDA wheels must keep meeting."""
    reasons: tuple[str, ...] = ()
    ways_forward: tuple[str, ...] = ()
    """Ranked, for a two-stack outcome: versions sharing a stack, separate envs, the two-stack env."""
    gpu_ccs: tuple[str, ...] = ()
    """The target's GPUs every companion was checked against (() = none named)."""

    def to_dict(self) -> dict:
        return {
            "asked": list(self.asked),
            "companions": [as_dict(c) for c in self.companions],
            "outcome": self.outcome,
            "two_stacks": self.two_stacks,
            "stacks": list(self.stacks),
            "pythons": list(self.pythons),
            "colliding": list(self.colliding),
            "colliding_paths": list(self.colliding_paths),
            "shared_pins": list(self.shared_pins),
            "reasons": list(self.reasons),
            "ways_forward": list(self.ways_forward),
            "gpu_ccs": list(self.gpu_ccs),
        }


@record
class Resolution:
    """The chosen combination, the packages for each mode, and the reasons."""

    tensorflow: str
    package: str
    python: str
    mode: str
    os: str
    arch: str
    platform: str
    accelerator: str
    """``cuda`` for NVIDIA GPUs, ``metal`` for tensorflow-metal on macOS."""
    cuda: str | None
    cuda_build: str | None
    cudnn: str | None
    min_driver: str | None
    toolkit_driver: str | None
    driver: str | None
    compute_capabilities: tuple[str, ...]
    packages: Packages
    modes: dict[str, ModeOption]
    warnings: tuple[Notice, ...]
    reasons: tuple[str, ...]
    rejected: tuple[Rejection, ...]
    sources: tuple[str, ...] = ()
    prerelease: bool = False
    """The chosen release is a pre-release (``2.22.0rc0``)."""
    tensorflow_source: str = "pypi"
    """Where TensorFlow comes from: ``pypi``, or ``conda-forge`` (its CUDA build, conda mode only);
    decided by the resolver (``tfgpu.resolver.tfsource``), the reason is in ``reasons``."""
    architecture: tuple = ()
    """Per judged GPU compute capability: ``tfgpu.resolver.archtruth.Truth`` (kernels, xla, verdict,
    why, source)."""
    coplan: CoPlan | None = None
    """The companions asked for with ``--with`` and the CUDA-stack decision (None: none asked)."""
    channels: tuple[str, ...] = ()
    """Conda mode: the channels named for the plan or export, in priority order (names or URLs,
    ``tfgpu.engines.channels.planned``); empty means conda-forge (:attr:`conda_channels`)."""

    @property
    def conda_channels(self) -> tuple[str, ...]:
        """The channels the conda packages come from: none outside conda mode."""
        if self.mode != "conda":
            return ()
        return self.channels or ("conda-forge",)

    @property
    def companions(self) -> tuple[str, ...]:
        """The companions' pinned requirements (``torch==2.10.0``)."""
        return tuple(c.requirement for c in self.coplan.companions) if self.coplan else ()

    @property
    def two_stacks(self) -> bool:
        """TensorFlow and a companion install two CUDA stacks into one env."""
        return bool(self.coplan and self.coplan.two_stacks)

    @property
    def colliding(self) -> tuple[str, ...]:
        """The distributions whose files the two stacks both install."""
        return self.coplan.colliding if self.coplan else ()

    def to_dict(self) -> dict:
        """The ``plan --json`` document (contract: docs/output.md)."""
        return {
            "tensorflow": self.tensorflow,
            "prerelease": self.prerelease,
            "package": self.package,
            "tensorflow_source": self.tensorflow_source,
            "python": self.python,
            "cuda": self.cuda,
            "cuda_build": self.cuda_build,
            "cudnn": self.cudnn,
            "min_driver": self.min_driver,
            "toolkit_driver": self.toolkit_driver,
            "driver": self.driver,
            "mode": self.mode,
            "os": self.os,
            "arch": self.arch,
            "platform": self.platform,
            "accelerator": self.accelerator,
            "compute_capabilities": list(self.compute_capabilities),
            "packages": self.packages.to_dict(),
            "modes": {
                name: {
                    "available": opt.available,
                    "packages": opt.packages.to_dict(),
                    "code": opt.code or None,
                    "reason": opt.reason or None,
                }
                for name, opt in self.modes.items()
            },
            "warnings": [as_dict(w) for w in self.warnings],
            "reasons": list(self.reasons),
            "rejected": [as_dict(r) for r in self.rejected],
            "sources": list(self.sources),
            "architecture": [dict(as_dict(t), source=list(t.source)) for t in self.architecture],
            "companions": list(self.companions),
            "two_stacks": self.two_stacks,
            "coplan": self.coplan.to_dict() if self.coplan else None,
            "channels": list(self.conda_channels),
        }
