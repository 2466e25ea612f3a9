"""What a lock records about its resolution, one record for both formats: a pip lock's header line
(``resolution``, with the header's ``cpu_only``) and a conda lock's ``tfgpu_resolution.<platform>``
entry of ``custom_metadata``.

A :class:`Recorded` is made in two places only: from a :class:`tfgpu.resolver.model.Resolution` when
a lock is written (:func:`planned`), and from a lock file's parsed data by the readers' one check,
``tfgpu.lock.selectors.check_record``, which parses every field first (:meth:`Recorded.from_file`
trusts what it is given). :meth:`Recorded.to_dict` is the one place it becomes the file's form
again. Everything between (``lock --check``, ``create --from-lock``, bundles, exports, the command
line) reads its attributes.
"""

from __future__ import annotations

from tfgpu.records import record, replace

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: type checkers treat it alike
if TYPE_CHECKING:
    from tfgpu.resolver.model import Resolution


@record
class Recorded:
    """A lock's recorded resolution (``mode`` says which format's: ``pip`` or ``conda``)."""

    tensorflow: str
    package: str
    python: str
    mode: str
    os: str
    arch: str
    accelerator: str | None
    cuda: str | None
    cudnn: str | None
    min_driver: str | None
    cpu_only: bool
    """Locked with ``--allow-cpu`` for a platform TensorFlow has no GPU build for (a pip lock
    records it in its header, a conda lock in each platform's entry)."""
    requirements: tuple[str, ...]
    """The PyPI requirements the lock was resolved from (a conda lock's PyPI part)."""
    platform: str | None = None
    """A pip lock's: the resolution's wheel platform (``linux_x86_64``), not the lock's ``linux-64``."""
    cuda_build: str | None = None
    """A pip lock's."""
    toolkit_driver: str | None = None
    """A pip lock's."""
    compute_capabilities: tuple[str, ...] = ()
    """A pip lock's, as the wheel lists them (``sm_80``)."""
    companions: tuple[str, ...] = ()
    """A pip lock's: the ``--with`` companions, each pinned (``jax[cuda12]==0.4.34``)."""
    virtual_cuda: str | None = None
    """A conda lock's: the ``__cuda`` its platform was solved with (None: none, a CPU-only platform)."""
    conda_specs: tuple[str, ...] = ()
    """A conda lock's: the conda specs its platform was solved from."""

    @classmethod
    def from_file(cls, recorded: dict, *, cpu_only: bool) -> Recorded:
        """The record of a file's entry whose every field ``check_record`` has parsed already."""
        get = recorded.get  # a conda lock's entry need not hold a CPU-only platform's CUDA fields
        return cls(
            tensorflow=recorded["tensorflow"],
            package=recorded["package"],
            python=recorded["python"],
            mode=recorded["mode"],
            os=recorded["os"],
            arch=recorded["arch"],
            accelerator=get("accelerator"),
            cuda=get("cuda"),
            cudnn=get("cudnn"),
            min_driver=get("min_driver"),
            cpu_only=cpu_only,
            requirements=tuple(recorded["requirements"]),
            platform=get("platform"),
            cuda_build=get("cuda_build"),
            toolkit_driver=get("toolkit_driver"),
            compute_capabilities=tuple(get("compute_capabilities") or ()),
            companions=tuple(get("companions") or ()),
            virtual_cuda=get("virtual_cuda"),
            conda_specs=tuple(get("conda_specs") or ()),
        )

    def to_dict(self) -> dict:
        """The entry as the lock file holds it, byte for byte what this version writes (the keys of
        :attr:`mode`'s format; a pip lock's ``cpu_only`` goes in its header, not here)."""
        common = {
            "tensorflow": self.tensorflow,
            "package": self.package,
            "python": self.python,
            "mode": self.mode,
            "os": self.os,
            "arch": self.arch,
            "accelerator": self.accelerator,
            "cuda": self.cuda,
            "cudnn": self.cudnn,
            "min_driver": self.min_driver,
            "requirements": list(self.requirements),
        }
        if self.mode == "conda":
            return common | {
                "virtual_cuda": self.virtual_cuda,
                "cpu_only": self.cpu_only,
                "conda_specs": list(self.conda_specs),
            }
        pip = common | {
            "platform": self.platform,
            "cuda_build": self.cuda_build,
            "toolkit_driver": self.toolkit_driver,
            "compute_capabilities": list(self.compute_capabilities),
        }
        if self.companions:  # only locks made with --with record companions
            pip["companions"] = list(self.companions)
        return pip


def planned(
    resolution: Resolution,
    *,
    cpu_only: bool,
    requirements: list[str],
    virtual_cuda: str | None = None,
    conda_specs: list[str] | tuple[str, ...] = (),
) -> Recorded:
    """What a lock of ``resolution`` records (its ``mode`` decides the format's fields): for a conda
    lock, the ``__cuda`` and the conda specs its platform was solved with."""
    common = Recorded(
        tensorflow=resolution.tensorflow,
        package=resolution.package,
        python=resolution.python,
        mode=resolution.mode,
        os=resolution.os,
        arch=resolution.arch,
        accelerator=resolution.accelerator,
        cuda=resolution.cuda,
        cudnn=resolution.cudnn,
        min_driver=resolution.min_driver,
        cpu_only=cpu_only,
        requirements=tuple(requirements),
    )
    if resolution.mode == "conda":
        return replace(common, virtual_cuda=virtual_cuda, conda_specs=tuple(conda_specs))
    return replace(
        common,
        platform=resolution.platform,
        cuda_build=resolution.cuda_build,
        toolkit_driver=resolution.toolkit_driver,
        compute_capabilities=tuple(resolution.compute_capabilities),
        companions=tuple(resolution.companions),
    )
