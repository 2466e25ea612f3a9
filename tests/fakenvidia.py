"""Stand-ins for NVIDIA's downloads, served from a real local HTTP server with injectable faults.

* a fake CUDA runfile: a POSIX shell script taking the real flags (``--silent --toolkit
  --toolkitpath=DIR --override --no-man-page --tmpdir=DIR``) that lays out ``bin/nvcc``,
  ``bin/ptxas``, ``lib64/libcudart.so.*`` (real ELF libraries with the real sonames, built with
  gcc), ``nvvm/libdevice/libdevice.10.bc`` and ``version.json``;
* a fake cuDNN archive (``tar.xz`` shaped like NVIDIA's redist archive: ``include/cudnn_version.h``,
  ``lib/libcudnn.so.N``);
* a threaded ``http.server`` with Range support and faults (cut the first transfer after N
  bytes, corrupt bytes, answer 503 N times, trickle slowly);
* a ``TFGPU_DATA_DIR`` overlay whose ``cuda.toml`` and ``cudnn_archives.toml`` point at the server
  with the fake files' checksums.

Usage::

    with serve_fake_nvidia(tmp_path, cuda="11.8.0", cudnn="8.6.0.163") as fake:
        env = {**os.environ, **fake.env()}        # TFGPU_DATA_DIR=fake.overlay_dir
        ...                                       # fake.requests: what the server saw
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import random
import re
import tarfile
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.resources import files
from pathlib import Path

import wheelhouse

# CUDA libraries the fake toolkit ships: base name -> soname per CUDA major ("{mm}": CUDA 10's
# libcudart soname carries the minor too).
TOOLKIT_LIBS = {
    10: {
        "libcudart": "libcudart.so.{mm}",
        "libcublasLt": "libcublasLt.so.10",
        "libcublas": "libcublas.so.10",
        "libcusolver": "libcusolver.so.10",
    },
    11: {
        "libcudart": "libcudart.so.11.0",
        "libcublasLt": "libcublasLt.so.11",
        "libcublas": "libcublas.so.11",
        "libcusolver": "libcusolver.so.11",
    },
    12: {
        "libcudart": "libcudart.so.12",
        "libcublasLt": "libcublasLt.so.12",
        "libcublas": "libcublas.so.12",
        "libnvJitLink": "libnvJitLink.so.12",
        "libcusolver": "libcusolver.so.11",
    },
}

RUNFILE = r"""#!/bin/sh
# Fake NVIDIA CUDA runfile (tfgpu-install tests). Toolkit-only, silent installs only.
set -e
silent= toolkit= toolkitpath= tmpdir=
for arg in "$@"; do
    case "$arg" in
        --silent) silent=1 ;;
        --toolkit) toolkit=1 ;;
        --toolkitpath=*) toolkitpath="${arg#--toolkitpath=}" ;;
        --tmpdir=*) tmpdir="${arg#--tmpdir=}" ;;
        --override|--no-man-page|--no-opengl-libs|--no-drm|--nox11) ;;
        --driver) echo "fake runfile: refusing --driver (tests never install a driver)" >&2; exit 3 ;;
        *) echo "fake runfile: unknown option $arg" >&2; exit 2 ;;
    esac
done
[ -n "$silent" ] && [ -n "$toolkit" ] && [ -n "$toolkitpath" ] || {
    echo "fake runfile: needs --silent --toolkit --toolkitpath=DIR" >&2; exit 2; }
[ -z "$tmpdir" ] || [ -d "$tmpdir" ] || { echo "fake runfile: --tmpdir $tmpdir does not exist" >&2; exit 2; }
echo "Installing CUDA @VERSION@ toolkit to $toolkitpath"
mkdir -p "$toolkitpath"
sed '1,/^__PAYLOAD__$/d' "$0" | base64 -d | tar -xzf - -C "$toolkitpath"
@FAIL@
echo "***WARNING: Incomplete installation! This installation did not install the CUDA Driver."
exit 0
__PAYLOAD__
"""


@dataclass
class Faults:
    """What the server does wrong. ``only`` limits the faults to file names containing it."""

    truncate_after: int = 0
    """Cut the first transfer of each file after this many bytes (0: never)."""
    corrupt: bool = False
    """Serve every file with some bytes changed."""
    status_503: int = 0
    """Answer this many requests with HTTP 503 first."""
    trickle: float = 0.0
    """Seconds to sleep between 4 KiB pieces."""
    only: str = ""
    runfile_fails: bool = False
    """The runfile installs half the toolkit, then exits 1."""
    redirect_to: str = ""
    """Answer with a 302 to this URL (absolute, or a path on this server)."""
    endless: bool = False
    """Send the file, then zeros for ever, with no Content-Length (the connection never ends it)."""
    announce: int = 0
    """Announce this Content-Length (and send that many bytes) instead of the file's."""
    drip: float = 0.0
    """Send one byte, then sleep this many seconds, and so on (a server that never stops sending)."""
    no_ranges: bool = False
    """Ignore Range requests and send no Accept-Ranges header."""


@dataclass
class FakeNvidia:
    base_url: str
    overlay_dir: Path
    runfile: Path
    runfile_url: str
    runfile_sha256: str
    cudnn: Path
    cudnn_url: str
    cudnn_sha256: str
    cuda: str
    cudnn_version: str
    faults: Faults
    requests: list[tuple[str, str, int]] = field(default_factory=list)
    """(path, Range header, status) of every request, in order."""
    server: ThreadingHTTPServer | None = None

    def env(self) -> dict[str, str]:
        """Environment variables that point tfgpu-install at this server."""
        return {"TFGPU_DATA_DIR": str(self.overlay_dir)}

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def __enter__(self) -> FakeNvidia:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def driver_that_fails(directory: Path) -> str:
    """A directory to put first on PATH: an ``nvidia-smi`` that says it cannot reach the driver, as
    one does after a kernel update. No driver can be installed on a test machine; to detection this
    is a driver that is here and fails, so a GPU check goes on to ask the env (tests whose env's
    stand-in Python prints the report). Returns the directory."""
    directory.mkdir(parents=True, exist_ok=True)
    smi = directory / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.'\nexit 9\n"
    )
    smi.chmod(0o755)
    return str(directory)


def _tar_gz(root: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for path in sorted(root.rglob("*")):
            archive.add(path, arcname=str(path.relative_to(root)), recursive=False)
    return buffer.getvalue()


def fake_runfile(directory: Path, cuda: str, *, fails: bool = False, pad: int = 300_000) -> Path:
    """``cuda_<cuda>_000.00.00_linux.run``-shaped shell script that lays out a small toolkit."""
    major = int(cuda.split(".")[0])
    tree = directory / f"runfile-tree-{cuda}"
    (tree / "bin").mkdir(parents=True, exist_ok=True)
    for tool, banner in (("nvcc", "Cuda compilation tools"), ("ptxas", "Ptx optimizing assembler")):
        script = tree / "bin" / tool
        script.write_text(f"#!/bin/sh\necho '{tool}: NVIDIA (R) {banner}, release {cuda} (tfgpu test stand-in)'\n")
        script.chmod(0o755)
    mm = ".".join(cuda.split(".")[:2])
    for base, soname in TOOLKIT_LIBS[major].items():
        soname = soname.format(mm=mm)
        real = tree / "lib64" / f"{base}.so.{cuda}"
        wheelhouse.shared_library(real, soname)
        (tree / "lib64" / soname).symlink_to(real.name)
        (tree / "lib64" / f"{base}.so").symlink_to(soname)
    (tree / "nvvm" / "libdevice").mkdir(parents=True, exist_ok=True)
    (tree / "nvvm" / "libdevice" / "libdevice.10.bc").write_bytes(b"BC\xc0\xde fake libdevice")
    (tree / "version.json").write_text(json.dumps({"cuda": {"name": "CUDA SDK", "version": cuda}}, indent=2))
    payload = base64.encodebytes(_tar_gz(tree)).decode()
    fail = 'echo "fake runfile: failing on purpose after a partial install" >&2; exit 1' if fails else ""
    # Padding (shell comments) so the file is big enough to be cut mid-transfer and resumed.
    padding = "".join(
        f"# {line}\n" for line in base64.encodebytes(random.Random(cuda).randbytes(pad)).decode().splitlines()
    )
    text = RUNFILE.replace("@VERSION@", cuda).replace("@FAIL@", fail + "\n" + padding) + payload
    path = directory / f"cuda_{cuda}_000.00.00_linux.run"
    path.write_text(text)
    return path


def fake_cudnn_archive(directory: Path, version: str, cuda_major: int, legacy_cuda: str = "") -> Path:
    """``cudnn-linux-x86_64-<version>_cuda<NN>-archive.tar.xz`` with a header and libcudnn; with
    ``legacy_cuda`` (``10.1``) the tarball layout NVIDIA used up to 8.2.4 instead:
    ``cudnn-<legacy_cuda>-linux-x64-v<version>.tgz`` holding ``cuda/include``, ``cuda/lib64``."""
    if legacy_cuda:
        stem, top, libdir, suffix, mode = (f"cudnn-{legacy_cuda}-linux-x64-v{version}", "cuda", "lib64", ".tgz", "w:gz")
    else:
        stem = f"cudnn-linux-x86_64-{version}_cuda{cuda_major}-archive"
        top, libdir, suffix, mode = stem, "lib", ".tar.xz", "w:xz"
    tree = directory / "cudnn-tree" / stem
    major, minor, patch = version.split(".")[:3]
    (tree / "include").mkdir(parents=True, exist_ok=True)
    # cuDNN 7 keeps its version macros in cudnn.h; cuDNN 8 moved them to cudnn_version.h.
    (tree / "include" / ("cudnn.h" if int(major) < 8 else "cudnn_version.h")).write_text(
        f"#define CUDNN_MAJOR {major}\n#define CUDNN_MINOR {minor}\n#define CUDNN_PATCHLEVEL {patch}\n"
    )
    real = tree / libdir / f"libcudnn.so.{major}.{minor}.{patch}"
    wheelhouse.shared_library(real, f"libcudnn.so.{major}")
    (tree / libdir / f"libcudnn.so.{major}").symlink_to(real.name)
    (tree / libdir / "libcudnn.so").symlink_to(f"libcudnn.so.{major}")
    (tree / "LICENSE").write_text("fake cuDNN for tests\n")
    path = directory / f"{stem}{suffix}"
    with tarfile.open(path, mode) as archive:
        archive.add(tree, arcname=top)
    return path


def _handler(fake: FakeNvidia, served: dict[str, bytes]):
    counts: dict[str, int] = {}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # keep pytest output clean
            pass

        def _status(self, code: int, body: bytes = b"") -> None:
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            name = self.path.lstrip("/")
            faults = fake.faults
            applies = not faults.only or faults.only in name
            with lock:
                counts[name] = counts.get(name, 0) + 1
                seen = counts[name]
                failing_503 = applies and faults.status_503 > 0
                if failing_503:
                    faults.status_503 -= 1
            rng = self.headers.get("Range", "")
            if name not in served:
                fake.requests.append((name, rng, 404))
                return self._status(404, b"not found")
            if failing_503:
                fake.requests.append((name, rng, 503))
                return self._status(503, b"busy")
            if applies and faults.redirect_to and not name.startswith("redirected/"):
                fake.requests.append((name, rng, 302))
                self.send_response(302)
                self.send_header("Location", faults.redirect_to)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            name = name.removeprefix("redirected/")
            if applies and (faults.endless or faults.drip or faults.announce):
                return self._hostile_body(name, served[name], rng)
            if applies and faults.no_ranges:
                rng = ""
            data = served[name]
            if applies and faults.corrupt:
                data = data[:100] + bytes(b ^ 0xFF for b in data[100:164]) + data[164:]
            start = int(re.match(r"bytes=(\d+)-", rng).group(1)) if re.match(r"bytes=(\d+)-", rng) else 0
            if start >= len(data) and rng:
                fake.requests.append((name, rng, 416))
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            code = 206 if rng else 200
            fake.requests.append((name, rng, code))
            body = data[start:]
            self.send_response(code)
            if rng:
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            self.send_header("Content-Length", str(len(body)))
            if not (applies and faults.no_ranges):
                self.send_header("Accept-Ranges", "bytes")
            self.end_headers()
            if applies and faults.truncate_after and seen == 1:
                self.wfile.write(body[: faults.truncate_after])
                self.wfile.flush()
                self.close_connection = True
                return
            piece = 4096 if applies and faults.trickle else len(body) or 1
            for offset in range(0, len(body), piece):
                self.wfile.write(body[offset : offset + piece])
                if applies and faults.trickle:
                    self.wfile.flush()
                    time.sleep(faults.trickle)

        def _hostile_body(self, name: str, data: bytes, rng: str) -> None:
            """The endless, lying or dripping answers (see :class:`Faults`)."""
            faults = fake.faults
            fake.requests.append((name, rng, 200))
            self.send_response(200)
            if faults.announce:
                self.send_header("Content-Length", str(faults.announce))
            self.end_headers()
            self.close_connection = True
            try:
                if faults.drip:
                    for index in range(len(data)):
                        self.wfile.write(data[index : index + 1])
                        self.wfile.flush()
                        time.sleep(faults.drip)
                    return
                if faults.announce:
                    body = (data * (faults.announce // max(len(data), 1) + 1))[: faults.announce]
                    self.wfile.write(body)
                    return
                self.wfile.write(data)
                zeros = bytes(1 << 16)
                while True:
                    self.wfile.write(zeros)
            except (BrokenPipeError, ConnectionResetError):
                return

    return Handler


def _overlay_cuda_toml(cuda: str, url: str, sha256: str) -> str:
    """The shipped cuda.toml with the ``cuda`` toolkit row pointing at the fake runfile."""
    text = files("tfgpu.data").joinpath("cuda.toml").read_text(encoding="utf-8")
    blocks = text.split("\n[[")
    for index, block in enumerate(blocks):
        if block.startswith("toolkit]]") and re.search(rf'^version = "{re.escape(cuda)}"$', block, re.MULTILINE):
            block = re.sub(r'^runfile_url = ".*"$', f'runfile_url = "{url}"', block, flags=re.MULTILINE)
            block = re.sub(r'^runfile = ".*"$', f'runfile = "{url.rsplit("/", 1)[-1]}"', block, flags=re.MULTILINE)
            block = re.sub(r'^sha256 = ".*"$', f'sha256 = "{sha256}"', block, flags=re.MULTILINE)
            blocks[index] = re.sub(r'^md5 = ".*"$', 'md5 = ""', block, flags=re.MULTILINE)
            return "\n[[".join(blocks)
    raise ValueError(f"cuda.toml has no toolkit row {cuda}")


def serve_fake_nvidia(
    tmp_path: Path,
    cuda: str = "12.2.2",
    cudnn: str = "8.9.7.29",
    faults: Faults | None = None,
    legacy_cudnn: bool = False,
) -> FakeNvidia:
    """Build the fake files, start the server on 127.0.0.1, write the overlay; close() when done.
    ``legacy_cudnn``: serve cuDNN as a legacy tarball (as NVIDIA does for cuDNN 7 and CUDA 10)."""
    work = tmp_path / "fakenvidia"
    work.mkdir(parents=True, exist_ok=True)
    faults = faults or Faults()
    cuda_major = int(cuda.split(".")[0])
    runfile = fake_runfile(work, cuda, fails=faults.runfile_fails)
    archive = fake_cudnn_archive(work, cudnn, cuda_major, ".".join(cuda.split(".")[:2]) if legacy_cudnn else "")
    served = {runfile.name: runfile.read_bytes(), archive.name: archive.read_bytes()}
    served[f"redirected/{runfile.name}"] = served[runfile.name]
    fake = FakeNvidia(
        base_url="",
        overlay_dir=work / "overlay",
        runfile=runfile,
        runfile_url="",
        runfile_sha256=hashlib.sha256(served[runfile.name]).hexdigest(),
        cudnn=archive,
        cudnn_url="",
        cudnn_sha256=hashlib.sha256(served[archive.name]).hexdigest(),
        cuda=cuda,
        cudnn_version=cudnn,
        faults=faults,
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake, served))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    fake.server = server
    fake.base_url = f"http://127.0.0.1:{server.server_address[1]}"
    fake.runfile_url = f"{fake.base_url}/{runfile.name}"
    fake.cudnn_url = f"{fake.base_url}/{archive.name}"
    fake.overlay_dir.mkdir(exist_ok=True)
    (fake.overlay_dir / "cuda.toml").write_text(_overlay_cuda_toml(cuda, fake.runfile_url, fake.runfile_sha256))
    mm = ".".join(cuda.split(".")[:2])
    (fake.overlay_dir / "cudnn_archives.toml").write_text(
        "# Test overlay: the fake cuDNN archive served by tests/fakenvidia.py\n\n[[archive]]\n"
        f'version = "{cudnn}"\ncuda_major = {cuda_major}\ncuda_min = "{mm}"\ncuda_max = "{mm}"\n'
        f'platform = "linux_x86_64"\nfilename = "{archive.name}"\nurl = "{fake.cudnn_url}"\n'
        f'sha256 = "{fake.cudnn_sha256}"\nsize = {len(served[archive.name])}\nmanifest = ""\n'
        "source = []\nunverified = []\n"
    )
    return fake
