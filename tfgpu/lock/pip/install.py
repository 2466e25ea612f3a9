"""``create --from-lock FILE`` of a pip lock, and the pip lock inside a bundle: the lock decides
TensorFlow, Python and every pin, selectors given alongside must agree with it
(``tfgpu.lock.selectors``), and installers get a ``Source`` (they never read lock files).
"""

from __future__ import annotations

from pathlib import Path

from tfgpu.doors.requirements import canonical
from tfgpu.installers.base import Source
from tfgpu.lock.selectors import check_platform, check_selectors
from tfgpu.resolver.model import Packages, Resolution


def prepare(lock, options, selectors, bundle: Path | None = None):
    """(resolution, options, source, lock) for a pip lock read by ``tfgpu.lock.pip.lockfile.read``;
    ``bundle``: the bundle directory it came from (its wheels are the only source)."""
    header = lock.header
    check_selectors(
        lock.resolution,
        mode="pip",
        python=header.python,
        platform=header.platform,
        selectors=selectors,
        path=lock.path,
    )
    check_platform(lock)
    source = Source(
        kind="bundle" if bundle else "lock",
        requirements=lock.body,
        index=header.index,
        bundle=bundle,
        label=f"{lock.path} sha256:{header.sha256}",
        lock_path=str(lock.path),
    )
    return lock_resolution(lock), options, source, lock


def lock_resolution(lock) -> Resolution:
    """The :class:`Resolution` a lock recorded (nothing is re-resolved)."""
    r = lock.resolution
    where = f"the lock {lock.path} (sha256 {lock.sha256}, tfgpu-install {lock.header.tool_version})"
    return Resolution(
        tensorflow=r.tensorflow,
        package=r.package,
        python=r.python,
        mode="pip",
        os=r.os,
        arch=r.arch,
        platform=r.platform,
        accelerator=r.accelerator,
        cuda=r.cuda,
        cuda_build=r.cuda_build,
        cudnn=r.cudnn,
        min_driver=r.min_driver,
        toolkit_driver=r.toolkit_driver,
        driver=None,
        compute_capabilities=r.compute_capabilities,
        packages=Packages(
            pip=tuple(canonical(text, what=f"The lock {lock.path}") for text in r.requirements),
            notes=(f"Exactly as pinned in {where}.",),
        ),
        modes={},
        warnings=(),
        reasons=(f"Installed from {where}.",),
        rejected=(),
    )
