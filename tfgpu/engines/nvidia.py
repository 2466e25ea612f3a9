"""NVIDIA's own files: which runfile and cuDNN archive a resolution needs (with where they come
from and the checksum each is verified against), the runfile's command line, unpacking the cuDNN
archive safely, and checking that a toolkit is complete.

``artifacts`` is pure (reads ``tfgpu/data`` only); it is shared by system mode and the exporters,
so a generated script downloads and checks exactly what ``--mode system`` would.
"""

from __future__ import annotations

import tarfile
from pathlib import Path, PurePosixPath
from typing import NamedTuple

from tfgpu.doors import untrusted, urls
from tfgpu.errors import ImpossibleError, OperationError
from tfgpu.resolver.packages import _runfile_toolkit, cudnn_archive_for


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
    if not resolution.cuda or not resolution.cudnn or resolution.accelerator != "cuda":
        raise ImpossibleError(
            "no-gpu-build",
            f"TF {resolution.tensorflow} has no CUDA build for "
            f"{resolution.os}/{resolution.arch}: there is nothing for system mode to download.",
            ["Plan for a Linux x86_64 target: --os linux --arch x86_64."],
        )
    if resolution.platform != "linux_x86_64":
        raise ImpossibleError(
            "mode-unsupported",
            f"NVIDIA's CUDA runfile exists for Linux x86_64 only; this plan is for {resolution.platform}.",
            ["Use --mode pip or --mode conda."],
        )
    cuda = resolution.cuda_build or resolution.cuda
    toolkit = _runfile_toolkit(cuda)
    if toolkit is None or not toolkit.runfile_url:
        raise ImpossibleError(
            "no-runfile", f"No CUDA {cuda} runfile is recorded in tfgpu's data.", ["Use --mode pip or --mode conda."]
        )
    archive = cudnn_archive_for(cuda, resolution.cudnn)
    if archive is None:
        raise ImpossibleError(
            "no-cudnn-archive",
            f"No cuDNN archive for cuDNN {resolution.cudnn} / CUDA {cuda} is recorded in tfgpu's data.",
            ["Use --mode pip or --mode conda."],
        )
    # The data (an overlay included) names these URLs: through the door before anything is built.
    runfile = urls.checked(toolkit.runfile_url, f"the CUDA {cuda} runfile's URL in tfgpu's data")
    tarball = urls.checked(archive.url, f"the cuDNN {archive.version} archive's URL in tfgpu's data")
    return [
        Artifact("runfile", _basename(runfile), runfile, toolkit.sha256, toolkit.md5, 0, str(toolkit.version)),
        Artifact("cudnn", archive.filename, tarball, archive.sha256, archive.md5, archive.size, str(archive.version)),
    ]


def _basename(url: str) -> str:
    return urls.filename(url)


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
        [
            "Use --mode pip or --mode conda for this release.",
            "Or put a cuda.toml / cudnn_archives.toml with the file's sha256 in a directory named by TFGPU_DATA_DIR "
            "(docs/modes.md, System mode).",
        ],
    )


def runfile_argv(runfile: Path, place) -> tuple[str, ...]:
    """NVIDIA's runfile, toolkit only (never the driver), silent [CF-CTK], [ISS-RUNFLAGS]."""
    return (
        "sh",
        str(runfile),
        "--silent",
        "--toolkit",
        f"--toolkitpath={place.staging}",
        "--override",
        "--no-man-page",
        f"--tmpdir={place.tmpdir}",
    )


def _unsafe(archive: Path, member, why: str) -> OperationError:
    return OperationError(
        "cudnn-archive-unsafe",
        f"{archive.name} holds {member.name!r}, {why}; nothing was installed.",
        [
            "The archive is not the one NVIDIA publishes (its checksum passed, so the data that "
            "names it is wrong): report it, and do not install it by hand."
        ],
    )


def unpack_cudnn(archive: Path, toolkit: Path) -> int:
    """Unpack NVIDIA's cuDNN archive into the toolkit: ``include/`` -> ``include/``, ``lib/`` or
    ``lib64/`` -> ``lib64/`` (the archive's top directory dropped); returns the files unpacked.

    Only regular files, directories and links that stay inside the toolkit are unpacked: an
    absolute or escaping name or link, a device node or a FIFO is ``cudnn-archive-unsafe``, and a
    damaged archive is ``cudnn-archive-corrupt`` — checked for every member before anything is written."""
    try:
        with untrusted.open_stream(archive, untrusted.ARTIFACT) as raw, tarfile.open(fileobj=raw, mode="r:*") as tar:
            members = []
            for member in tar.getmembers():
                parts = PurePosixPath(member.name).parts
                if member.name.startswith("/") or ".." in parts:
                    raise _unsafe(archive, member, "a path out of the archive")
                if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
                    raise _unsafe(archive, member, "a device node or FIFO")
                if len(parts) < 3 or parts[1] not in ("include", "lib", "lib64"):
                    continue  # the top directory, LICENSE, anything else
                target = PurePosixPath("include" if parts[1] == "include" else "lib64", *parts[2:])
                if member.issym() or member.islnk():
                    link = PurePosixPath(member.linkname)
                    base = target.parent if member.issym() else PurePosixPath()
                    if link.is_absolute() or not _inside(base / link if member.issym() else _renamed(link)):
                        raise _unsafe(archive, member, f"a link to {member.linkname!r}, outside the toolkit")
                    if member.islnk():
                        member.linkname = str(_renamed(link))
                member.name = str(target)
                members.append(member)
            if not members:
                raise OperationError(
                    "cudnn-archive-empty",
                    f"{archive.name} has no include/ or lib/ inside; nothing was installed.",
                    ["Report it: the archive layout is unexpected."],
                )
            if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4: a second check of the same rules
                tar.extractall(toolkit, members=members, filter="data")
            else:
                tar.extractall(toolkit, members=members)  # every name and link was checked above
    except (tarfile.TarError, EOFError, OSError) as error:
        if isinstance(error, getattr(tarfile, "FilterError", ())):
            raise OperationError(
                "cudnn-archive-unsafe", f"{archive.name}: {error}; nothing was installed.", ["Report it."]
            ) from None
        if isinstance(error, OSError) and not isinstance(error, tarfile.TarError):
            raise
        raise OperationError(
            "cudnn-archive-corrupt",
            f"{archive.name} cannot be unpacked ({error}); nothing was installed.",
            ["Delete it from the download cache and run again."],
        ) from None
    return len(members)


def _inside(path: PurePosixPath) -> bool:
    """Whether a relative path stays under its root once ``..`` is applied."""
    depth = 0
    for part in path.parts:
        depth += -1 if part == ".." else (0 if part == "." else 1)
        if depth < 0:
            return False
    return True


def _renamed(name: PurePosixPath) -> PurePosixPath:
    """A member name as it is unpacked (``top/lib/x`` -> ``lib64/x``), for hard-link targets."""
    parts = name.parts
    if len(parts) < 3 or parts[1] not in ("include", "lib", "lib64"):
        return PurePosixPath("..", "outside")
    return PurePosixPath("include" if parts[1] == "include" else "lib64", *parts[2:])


def check_toolkit(toolkit: Path, cudnn_major: int) -> list[str]:
    """What a complete toolkit has; raises ``OperationError`` naming what is missing."""
    lib = toolkit / "lib64"
    wanted = {
        "lib64/libcudart.so.*": any(lib.glob("libcudart.so.*")),
        f"lib64/libcudnn.so.{cudnn_major}": (lib / f"libcudnn.so.{cudnn_major}").exists(),
        "bin/ptxas": (toolkit / "bin" / "ptxas").is_file(),
        "nvvm/libdevice": (toolkit / "nvvm" / "libdevice").is_dir(),
    }
    missing = [name for name, present in wanted.items() if not present]
    if missing:
        raise OperationError(
            "toolkit-incomplete",
            f"The toolkit in {toolkit} lacks {', '.join(missing)}; nothing was installed.",
            ["The log has the runfile's whole output."],
        )
    return sorted(wanted)
