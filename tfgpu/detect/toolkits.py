"""Installed CUDA toolkits: what is installed, which is not what the driver can run.

Each install is read from its ``version.json`` (CUDA 11.1-12.x), else ``version.txt`` (older),
else the ``CUDA_VERSION`` define of ``include/cuda.h`` (every toolkit; CUDA 13 ships no version
file), and only when none answers by running its ``nvcc --version``. Installs are deduplicated by real
path, so ``/usr/local/cuda`` → ``/usr/local/cuda-13.0`` is one toolkit.
"""

from __future__ import annotations

import os
import re

from tfgpu.detect.host import Toolkit
from tfgpu.detect.system import System
from tfgpu.doors import untrusted

NVCC_TIMEOUT_S = 10.0
# Patterns, compiled on first use (``re`` caches them): most runs never need them.
_VERSION_TXT = r"CUDA Version\s+(\d+(?:\.\d+)+)"
_CUDA_H = r"#define\s+CUDA_VERSION\s+(\d+)"  # 13000 -> 13.0
_NVCC_RELEASE = r"release (\d+\.\d+)"  # "release 12.4, V12.4.131"
_WRAPPER_TARGET = r"(/[^\s\"']+)/bin/nvcc\b"


def find_toolkits(system: System, os_name: str) -> tuple[Toolkit, ...]:
    """Every CUDA toolkit in the usual places, $CUDA_HOME/$CUDA_PATH, and nvcc's on PATH."""
    seen: set[str] = set()
    found: list[Toolkit] = []
    for root in candidate_roots(system, os_name):
        real = system.realpath(root)
        if real in seen or not system.is_dir(root):
            continue
        seen.add(real)
        toolkit = read_toolkit(system, root, _nvcc_in(root, os_name))
        if toolkit is not None:
            found.append(toolkit)

    nvcc = system.which("nvcc")
    if nvcc is not None:
        target = _follow_wrapper(system, system.realpath(nvcc))
        root = os.path.dirname(os.path.dirname(target))
        if system.realpath(root) not in seen:
            toolkit = read_toolkit(system, root, nvcc)
            if toolkit is not None:
                found.append(toolkit)
    return tuple(found)


def candidate_roots(system: System, os_name: str) -> list[str]:
    roots: list[str] = []
    if os_name == "windows":
        program_files = system.env("ProgramFiles") or r"C:\Program Files"
        roots += system.glob(os.path.join(program_files, "NVIDIA GPU Computing Toolkit", "CUDA", "v*"))
    else:
        roots += ["/usr/local/cuda", *system.glob("/usr/local/cuda-*"), "/opt/cuda"]
    roots += [path for path in (system.env("CUDA_HOME"), system.env("CUDA_PATH")) if path]
    return roots


def read_toolkit(system: System, root: str, nvcc: str) -> Toolkit | None:
    """The toolkit at ``root``, or None when no version file or nvcc says what it is."""
    text = system.file_text(os.path.join(root, "version.json"))
    if text is not None:
        version = parse_version_json(text)
        if version:
            return Toolkit(version, root, "version.json")
    text = system.file_text(os.path.join(root, "version.txt"))
    if text is not None:
        match = re.search(_VERSION_TXT, text)
        if match:
            return Toolkit(match.group(1), root, "version.txt")
    text = system.file_text(os.path.join(root, "include", "cuda.h"), max_bytes=65536)
    match = re.search(_CUDA_H, text) if text is not None else None
    if match:
        number = int(match.group(1))
        return Toolkit(f"{number // 1000}.{number % 1000 // 10}", root, "cuda.h")
    if not system.is_file(nvcc):
        return None
    done = system.run([nvcc, "--version"], NVCC_TIMEOUT_S)
    match = re.search(_NVCC_RELEASE, done.stdout) if done is not None and done.returncode == 0 else None
    return Toolkit(match.group(1), root, "nvcc") if match else None


def parse_version_json(text: str) -> str | None:
    """``{"cuda": {"version": "12.4.1", ...}, ...}`` → ``"12.4.1"``; None if not that shape."""
    try:
        version = untrusted.parse_json(text, untrusted.SYSTEM_FILE, "version.json")["cuda"]["version"]
    except (untrusted.Unreadable, KeyError, TypeError):
        return None
    return version if isinstance(version, str) and version else None


def _nvcc_in(root: str, os_name: str) -> str:
    return os.path.join(root, "bin", "nvcc.exe" if os_name == "windows" else "nvcc")


def _follow_wrapper(system: System, path: str) -> str:
    """The nvcc a small ``#!`` wrapper script execs (``exec /usr/local/cuda-13.0/bin/nvcc "$@"``);
    otherwise ``path`` itself. Without this, a wrapper in /usr/local/bin would pass for a
    toolkit installed in /usr/local."""
    head = system.file_text(path, max_bytes=4096)
    if head is None or not head.startswith("#!"):
        return path
    match = re.search(_WRAPPER_TARGET, head)
    return system.realpath(match.group(1) + "/bin/nvcc") if match else path
