"""The vendor files system mode downloads for a resolution: NVIDIA's CUDA runfile and the cuDNN
archive, with where they come from and the checksum each is verified against.

Pure (reads ``tfgpu/data`` only). Used by the system installer and by the exporters, so that a
generated script downloads and checks exactly what ``--mode system`` would.
"""

from __future__ import annotations

from typing import NamedTuple
from urllib.parse import urlsplit

from tfgpu.errors import ImpossibleError


class Artifact(NamedTuple):
    """One vendor download."""

    kind: str
    """``runfile`` or ``cudnn``."""
    filename: str
    url: str
    sha256: str
    """Hex digest, or "" where none is recorded."""
    md5: str
    """NVIDIA's md5 (md5sum.txt), used only where no sha256 is recorded; "" when unknown."""
    size: int
    """Bytes, or 0 when unknown."""
    version: str
    """The toolkit (``11.8.0``) or cuDNN (``8.9.7.29``) version."""

    @property
    def verifiable(self) -> bool:
        """A checksum is known, so the file may be installed."""
        return bool(self.sha256 or self.md5)


def artifacts(resolution) -> list[Artifact]:
    """The runfile and the cuDNN archive for ``resolution`` (Linux x86_64 CUDA builds).

    Raises ``ImpossibleError`` when the resolution has no CUDA build or the data records no file
    for it. Artifacts without a checksum are returned (``verifiable`` is False): the caller decides
    (the installer and the generated scripts refuse them).
    """
    from tfgpu.resolver.packages import _runfile_toolkit, cudnn_archive_for

    if not resolution.cuda or not resolution.cudnn or resolution.accelerator != "cuda":
        raise ImpossibleError("no-gpu-build", f"TF {resolution.tensorflow} has no CUDA build for "
                              f"{resolution.os}/{resolution.arch}: there is nothing for system mode to download.",
                              ["Plan for a Linux x86_64 target: --os linux --arch x86_64."])
    if resolution.platform != "linux_x86_64":
        raise ImpossibleError("mode-unsupported", "NVIDIA's CUDA runfile exists for Linux x86_64 only; this plan "
                              f"is for {resolution.platform}.", ["Use --mode pip or --mode conda."])
    cuda = resolution.cuda_build or resolution.cuda
    toolkit = _runfile_toolkit(cuda)
    if toolkit is None or not toolkit.runfile_url:
        raise ImpossibleError("no-runfile", f"No CUDA {cuda} runfile is recorded in tfgpu's data.",
                              ["Use --mode pip or --mode conda."])
    archive = cudnn_archive_for(cuda, resolution.cudnn)
    if archive is None:
        raise ImpossibleError("no-cudnn-archive", f"No cuDNN archive for cuDNN {resolution.cudnn} / CUDA {cuda} "
                              "is recorded in tfgpu's data.", ["Use --mode pip or --mode conda."])
    return [
        Artifact("runfile", _basename(toolkit.runfile_url), toolkit.runfile_url, toolkit.sha256, toolkit.md5, 0,
                 str(toolkit.version)),
        Artifact("cudnn", archive.filename, archive.url, archive.sha256, archive.md5, archive.size,
                 str(archive.version)),
    ]


def _basename(url: str) -> str:
    return urlsplit(url).path.rsplit("/", 1)[-1]


def unverifiable(items: list[Artifact]) -> ImpossibleError | None:
    """The error for downloads whose checksum no data records (None when all can be verified)."""
    missing = [item for item in items if not item.verifiable]
    if not missing:
        return None
    names = ", ".join(f"{item.filename} ({item.kind} {item.version})" for item in missing)
    return ImpossibleError(
        "unverified-download",
        f"tfgpu's data records no checksum for {names}, so it will not be installed: every download is verified "
        "before use. Missing fact: the sha256 of that file (from NVIDIA's redistrib_<version>.json manifest).",
        ["Use --mode pip or --mode conda for this release.",
         "Or put a cuda.toml / cudnn_archives.toml with the file's sha256 in a directory named by TFGPU_DATA_DIR "
         "(see the README's System mode section)."])
