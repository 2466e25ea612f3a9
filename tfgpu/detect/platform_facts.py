"""Operating system, WSL2, architecture, distribution, glibc and the Pythons on PATH."""

from __future__ import annotations

from tfgpu.detect.system import System
from tfgpu.records import record

WSL_LIB = "/usr/lib/wsl/lib"
"""Where WSL2 mounts the Windows driver's libcuda.so.1 and nvidia-smi."""

_ARCH = {
    "x86_64": "x86_64",
    "amd64": "x86_64",
    "x64": "x86_64",
    "aarch64": "aarch64",
    "arm64": "aarch64",
}
_OS = {"Linux": "linux", "Windows": "windows", "Darwin": "macos"}
PYTHON_MINORS = range(6, 16)
"""``python3.6`` … ``python3.15`` are looked for on PATH."""


@record
class PlatformSummary:
    """The non-GPU facts of a host."""

    os: str
    arch: str
    os_release: str
    glibc: str | None
    python: str
    pythons: tuple[str, ...]
    notes: tuple[str, ...]


def detect_platform(system: System) -> PlatformSummary:
    facts = system.platform()
    os_name, notes = detect_os(system, facts.system)
    linux_like = os_name in ("linux", "wsl2")
    return PlatformSummary(
        os=os_name,
        arch=normalize_arch(facts.machine),
        os_release=read_os_release(system) if linux_like else facts.description,
        glibc=facts.glibc if linux_like else None,
        python=facts.python,
        pythons=pythons_on_path(system),
        notes=notes,
    )


def detect_os(system: System, platform_system: str) -> tuple[str, tuple[str, ...]]:
    """``"linux"``, ``"wsl2"``, ``"windows"``, ``"macos"`` (or the lower-cased system name), and
    notes. WSL1 counts as ``"linux"`` with a note: it has no GPU support at all."""
    if platform_system != "Linux":
        return _OS.get(platform_system, platform_system.lower() or "unknown"), ()
    kernel = (system.file_text("/proc/sys/kernel/osrelease") or "").strip()
    lowered = kernel.lower()
    if "wsl2" in lowered or "microsoft-standard" in lowered:
        return "wsl2", ()
    if "microsoft" in lowered:  # WSL1 kernels say "4.4.0-19041-Microsoft"
        return "linux", (
            f"WSL1 detected (kernel {kernel}): WSL1 has no GPU support; convert the distribution "
            "with 'wsl --set-version <distro> 2'.",
        )
    if system.env("WSL_DISTRO_NAME"):  # WSL2 running a custom kernel
        return "wsl2", ()
    return "linux", ()


def normalize_arch(machine: str) -> str:
    """``amd64``/``x64`` → ``x86_64``, ``arm64`` → ``aarch64``; others lower-cased as given."""
    return _ARCH.get(machine.lower(), machine.lower())


def read_os_release(system: System) -> str:
    """PRETTY_NAME from /etc/os-release (or /usr/lib/os-release); ``""`` when there is none."""
    text = system.file_text("/etc/os-release") or system.file_text("/usr/lib/os-release") or ""
    fields = parse_os_release(text)
    if fields.get("PRETTY_NAME"):
        return fields["PRETTY_NAME"]
    return " ".join(part for part in (fields.get("NAME"), fields.get("VERSION")) if part)


def parse_os_release(text: str) -> dict[str, str]:
    """The KEY=value pairs of an os-release file, quotes removed."""
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if not sep or key.startswith("#"):
            continue
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
        fields[key.strip()] = value
    return fields


def pythons_on_path(system: System) -> tuple[str, ...]:
    """``"3.N"`` for each Python 3.N interpreter found (see :func:`find_interpreters`)."""
    return tuple(find_interpreters(system))


def find_interpreters(system: System) -> dict[str, str]:
    """``{"3.N": path}``: ``python3.N`` on PATH, then pyenv's and uv's installed versions.

    Found, never run, so probing stays fast; callers that need certainty run the path. A pyenv
    shim is not an interpreter: ``~/.pyenv/shims/python3.12`` fails ("command not found") unless
    that version is selected, so shims are looked through to ``$PYENV_ROOT/versions``.
    """
    home = system.env("HOME") or ""
    pyenv_root = system.env("PYENV_ROOT") or (f"{home}/.pyenv" if home else "")
    uv_root = system.env("UV_PYTHON_INSTALL_DIR") or (f"{home}/.local/share/uv/python" if home else "")
    # One glob per root, sorted out by minor below: a glob pattern is compiled on each call, and
    # twenty of them were most of a probe's time.
    pyenv = system.glob(f"{pyenv_root}/versions/3.*/bin/python3.*") if pyenv_root else []
    uv = system.glob(f"{uv_root}/cpython-3.*/bin/python3.*") if uv_root else []
    found: dict[str, str] = {}
    for minor in PYTHON_MINORS:
        name = f"python3.{minor}"
        candidates = [system.which(name)]
        candidates += sorted(_installed(pyenv, f"3.{minor}.", name), reverse=True)
        candidates += sorted(_installed(uv, f"cpython-3.{minor}.", name), reverse=True)
        for path in candidates:
            if path and "/shims/" not in path.replace("\\", "/"):
                found[f"3.{minor}"] = path
                break
    return found


def _installed(paths: list[str], version_prefix: str, name: str) -> list[str]:
    """The ``<root>/<version>/bin/<name>`` among ``paths`` whose version directory starts with
    ``version_prefix`` (what the glob ``<root>/<prefix>*/bin/<name>`` would have found)."""
    chosen = []
    for path in paths:
        head, _, base = path.rpartition("/")
        version = head.removesuffix("/bin").rpartition("/")[2]
        if base == name and head.endswith("/bin") and version.startswith(version_prefix):
            chosen.append(path)
    return chosen
