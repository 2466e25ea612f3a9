"""The one door between detection and the machine.

Every fact :func:`tfgpu.detect.probe` learns comes through a :class:`System`: files, PATH,
environment variables, child processes, NVML and libcuda. Tests pass a
:class:`~tfgpu.detect.recorded.RecordedSystem` built from recorded outputs instead. No method
raises: a missing file, tool or library is an answer (None, or a short error string).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

from tfgpu.doors import untrusted
from tfgpu.records import record

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: type checkers treat it alike
if TYPE_CHECKING:
    from typing import TypeVar

    _T = TypeVar("_T")


@record
class NvmlDevice:
    """One GPU as NVML describes it."""

    index: int
    name: str
    compute_capability: tuple[int, int] | None
    memory_total_bytes: int | None
    uuid: str | None


@record
class NvmlSnapshot:
    """What NVML answered during one nvmlInit/nvmlShutdown session."""

    driver_version: str
    cuda_driver_version: int | None
    """``nvmlSystemGetCudaDriverVersion_v2``: 13000 means CUDA 13.0."""
    devices: tuple[NvmlDevice, ...] = ()
    device_errors: tuple[str, ...] = ()
    """One line per GPU NVML could not read (e.g. ``"GPU 3: GPU is lost"``)."""


@record
class PlatformFacts:
    """What the interpreter knows about the platform without touching the filesystem."""

    system: str
    """``platform.system()``: ``"Linux"``, ``"Windows"``, ``"Darwin"``."""
    machine: str
    """``platform.machine()``: ``"x86_64"``, ``"AMD64"``, ``"arm64"``, ``"aarch64"``."""
    python: str
    """The running interpreter, ``"3.11"``."""
    glibc: str | None
    """``"2.36"``, or None without glibc."""
    description: str = ""
    """A readable platform string for systems without /etc/os-release (Windows, macOS)."""


class System:
    """The real machine."""

    def file_text(self, path: str, max_bytes: int = 1 << 20) -> str | None:
        """The file's text (at most ``max_bytes``, undecodable bytes replaced), or None (missing,
        or not a regular file: a FIFO here would block detection forever)."""
        try:
            return untrusted.read_head(path, untrusted.SYSTEM_FILE, max_bytes).decode("utf-8", "replace")
        except untrusted.Unreadable:
            return None

    def is_file(self, path: str) -> bool:
        return os.path.isfile(path)

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(path)

    def realpath(self, path: str) -> str:
        return os.path.realpath(path)

    def glob(self, pattern: str) -> list[str]:
        return sorted(_prefix_glob(pattern))

    def env(self, name: str) -> str | None:
        return os.environ.get(name)

    def which(self, name: str) -> str | None:
        return which(name)

    def run(self, argv: Sequence[str], timeout: float = 10.0):
        """Run ``argv`` (no shell) through ``tfgpu.process.runner`` and capture its output (a
        ``proc.Completed``: ``returncode``, ``stdout``, ``stderr``; a timeout reads as 124);
        None when it cannot be started."""
        from tfgpu.process.runner import Runner  # only paid for when a tool is actually run

        done = Runner().capture(list(argv), env={"LC_ALL": "C"}, timeout=timeout, clean=False)
        if not done.started:
            return None
        if done.returncode == 124:
            return done.__class__(done.argv, 124, done.output, done.seconds, f"timed out after {timeout:g} s")
        return done

    def platform(self) -> PlatformFacts:
        if hasattr(os, "uname"):  # POSIX: no need to import `platform` (plan's start-up is budgeted)
            uname = os.uname()
            system, machine = uname.sysname, uname.machine
        else:
            # Start-up cost: `plan --json` loads this module but not platform.
            import platform

            system, machine = platform.system(), platform.machine()
        glibc = None
        description = ""
        if system == "Linux":
            glibc = _glibc_version()
        elif system == "Darwin":
            # Start-up cost: `plan --json` loads this module but not platform.
            import platform

            release = platform.mac_ver()[0]
            description = f"macOS {release}" if release else "macOS"
        else:
            # Start-up cost: `plan --json` loads this module but not platform.
            import platform

            description = platform.platform(terse=True)
        return PlatformFacts(
            system=system,
            machine=machine,
            python=f"{sys.version_info.major}.{sys.version_info.minor}",
            glibc=glibc,
            description=description,
        )

    def nvml(self) -> NvmlSnapshot | str:
        """Ask NVML through nvidia-ml-py; a short error string when it cannot answer."""
        # Importing pynvml costs 30-130 ms; do not pay it where the library is absent.
        if sys.platform.startswith("linux") and isinstance(_loads("libnvidia-ml.so.1"), str):
            return "libnvidia-ml.so.1 not found"
        try:
            import pynvml
        except ImportError:
            return "nvidia-ml-py is not installed"
        try:
            pynvml.nvmlInit()
        except Exception as exc:  # noqa: BLE001 - any NVML failure is an answer, not a crash
            return _short(exc)
        try:
            return _nvml_snapshot(pynvml)
        except Exception as exc:  # noqa: BLE001
            return _short(exc)
        finally:
            try:
                pynvml.nvmlShutdown()
            except Exception:  # noqa: BLE001
                pass

    def libcuda_driver_version(self, library: str) -> int | str:
        """``cuDriverGetVersion`` from ``library`` (12040 means CUDA 12.4), or a short error.

        No ``cuInit``: the version call does not need it, and cuInit costs ~220 ms.
        """
        missing = _loads(library)
        if isinstance(missing, str):
            return missing
        import ctypes  # Start-up cost: see _loads.

        try:
            lib = ctypes.CDLL(library)
            get_version = lib.cuDriverGetVersion
        except (OSError, AttributeError) as exc:
            return _short(exc)
        get_version.argtypes = [ctypes.POINTER(ctypes.c_int)]
        get_version.restype = ctypes.c_int
        version = ctypes.c_int(0)
        result = get_version(ctypes.byref(version))
        if result != 0:
            return f"cuDriverGetVersion failed with CUresult {result}"
        return version.value


def _prefix_glob(pattern: str) -> list[str]:
    """``glob.glob(pattern)`` for the patterns a probe uses, whose only wildcard is a ``*`` ending a
    component (``/usr/local/cuda-*``, ``.../versions/3.*/bin/python3.*``), walked with ``scandir``;
    any other pattern goes to ``glob`` itself. The probe runs on every command, and ``glob`` compiles
    a regular expression for each component of each call."""
    parts = pattern.split("/")
    if os.sep != "/" or any(c in part for part in parts for c in "?[") or any("*" in part[:-1] for part in parts):
        # Start-up cost: `plan --json` loads this module but not glob.
        import glob

        return glob.glob(pattern)
    found = ["/" if pattern.startswith("/") else ""]
    for index, part in enumerate(parts[1:] if pattern.startswith("/") else parts):
        last = index == len(parts) - (2 if pattern.startswith("/") else 1)
        step = []
        for base in found:
            if not part.endswith("*"):
                path = os.path.join(base, part) if base else part
                if os.path.lexists(path) if last else os.path.isdir(path):
                    step.append(path)
                continue
            prefix = part[:-1]
            try:
                entries = list(os.scandir(base or "."))
            except OSError:
                continue
            for entry in entries:
                if entry.name.startswith(prefix) and (prefix.startswith(".") or not entry.name.startswith(".")):
                    if last or entry.is_dir():
                        step.append(os.path.join(base, entry.name) if base else entry.name)
        found = step
    return found


def _loads(library: str) -> None | str:
    """None when the dynamic loader finds ``library`` (by name, as ``dlopen`` searches), else why
    not. The library is left open, as ``ctypes.CDLL`` leaves it."""
    # Start-up cost: importing ctypes is 7.0M instructions (callgrind; a bare `python -c pass` is 39M),
    # paid here by a probe that asks the loader, not by every command that imports this module.
    import ctypes

    try:
        ctypes.CDLL(library, os.RTLD_NOW | os.RTLD_LOCAL)
    except OSError as exc:
        return _short(exc)
    return None


def which(name: str) -> str | None:
    """``shutil.which(name)`` without importing ``shutil`` (and the compression modules it loads)
    on POSIX, where it is a walk of ``PATH``; elsewhere (``PATHEXT``) ``shutil``'s own."""
    if os.name != "posix":
        import shutil  # Start-up cost: see above; only where PATHEXT applies.

        return shutil.which(name)
    if os.path.dirname(name):
        return name if _executable(name) else None
    path = os.environ.get("PATH")
    if path is None:
        try:
            path = os.confstr("CS_PATH")
        except (AttributeError, ValueError):
            path = os.defpath
    seen = set()
    for directory in path.split(os.pathsep) if path else ():
        if directory not in seen:
            seen.add(directory)
            candidate = os.path.join(directory, name)
            if _executable(candidate):
                return candidate
    return None


def _executable(path: str) -> bool:
    return os.path.exists(path) and os.access(path, os.F_OK | os.X_OK) and not os.path.isdir(path)


def in_background(function: Callable[..., _T], *args: object) -> Callable[[], _T]:
    """Start ``function(*args)`` in a thread; the callable returned waits for it and returns its
    result (or raises its exception). Used to overlap nvidia-smi's ~25 ms runs with NVML."""
    outcome: list = []

    def target() -> None:
        try:
            outcome.append((True, function(*args)))
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            outcome.append((False, exc))

    import threading  # only when there is something to overlap

    thread = threading.Thread(target=target, name=f"tfgpu-{getattr(function, '__name__', 'task')}")
    thread.daemon = True
    thread.start()

    def wait() -> _T:
        thread.join()
        ok, value = outcome[0]
        if not ok:
            raise value
        return value

    return wait


def _nvml_snapshot(pynvml) -> NvmlSnapshot:
    driver = _text(pynvml.nvmlSystemGetDriverVersion())
    try:
        cuda = int(pynvml.nvmlSystemGetCudaDriverVersion_v2())
    except Exception:  # noqa: BLE001 - older drivers lack the call; the version still counts
        cuda = None
    devices, errors = [], []
    for index in range(pynvml.nvmlDeviceGetCount()):
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = _text(pynvml.nvmlDeviceGetName(handle))
        except Exception as exc:  # noqa: BLE001
            errors.append(f"GPU {index}: {_short(exc)}")
            continue
        devices.append(
            NvmlDevice(
                index=index,
                name=name,
                compute_capability=_optional(pynvml.nvmlDeviceGetCudaComputeCapability, handle),
                memory_total_bytes=_optional(lambda h: int(pynvml.nvmlDeviceGetMemoryInfo(h).total), handle),
                uuid=_optional(lambda h: _text(pynvml.nvmlDeviceGetUUID(h)), handle),
            )
        )
    return NvmlSnapshot(driver, cuda, tuple(devices), tuple(errors))


def _optional(call, handle):
    try:
        value = call(handle)
    except Exception:  # noqa: BLE001 - one unreadable attribute must not hide the GPU
        return None
    return tuple(value) if isinstance(value, list) else value


def _text(value: str | bytes) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _short(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def _glibc_version() -> str | None:
    try:
        libc = os.confstr("CS_GNU_LIBC_VERSION") or ""  # "glibc 2.36"
    except (ValueError, OSError):
        libc = ""
    name, _, version = libc.partition(" ")
    if name == "glibc" and version:
        return version
    # Start-up cost: `plan --json` loads this module but not platform.
    import platform

    name, version = platform.libc_ver()
    return version if name == "glibc" and version else None
