"""A :class:`~tfgpu.detect.system.System` that answers from recorded facts.

Tests build one from recorded ``nvidia-smi`` outputs, ``/proc`` files and NVML/libcuda answers,
and other parts of the project use one to probe a machine they are not running on. It touches
nothing on the real machine.
"""

from __future__ import annotations

import fnmatch
import posixpath
from collections.abc import Mapping, Sequence

from tfgpu.detect.system import NvmlSnapshot, PlatformFacts
from tfgpu.process.runner import Completed
from tfgpu.records import factory, record

LINUX_X86_64 = PlatformFacts(system="Linux", machine="x86_64", python="3.11", glibc="2.36")


@record(frozen=False)
class RecordedSystem:
    """Answers every :class:`System` question from the mappings given.

    ``commands`` maps an argv tuple to ``(returncode, stdout, stderr)``; an unrecorded command
    cannot be started (``run`` returns None). ``executables`` maps a name to its path for
    ``which``. ``links`` maps a path to what it resolves to. ``libcuda`` maps a library name to
    ``cuDriverGetVersion``'s value or an error string; an unlisted library is not found. Every
    ``run`` call is appended to ``ran``.
    """

    files: Mapping[str, str] = factory(dict)
    dirs: Sequence[str] = ()
    executables: Mapping[str, str] = factory(dict)
    commands: Mapping[tuple[str, ...], tuple[int, str, str]] = factory(dict)
    environ: Mapping[str, str] = factory(dict)
    links: Mapping[str, str] = factory(dict)
    nvml_answer: NvmlSnapshot | str = "libnvidia-ml.so.1 not found"
    libcuda: Mapping[str, int | str] = factory(dict)
    facts: PlatformFacts = LINUX_X86_64
    ran: list[tuple[str, ...]] = factory(list)

    def _paths(self) -> set[str]:
        paths = set(self.files) | set(self.dirs) | set(self.executables.values())
        for path in list(paths):
            parent = posixpath.dirname(path)
            while parent not in ("", "/"):
                paths.add(parent)
                parent = posixpath.dirname(parent)
        return paths

    def file_text(self, path: str, max_bytes: int = 1 << 20) -> str | None:
        text = self.files.get(self.realpath(path), self.files.get(path))
        return None if text is None else text[:max_bytes]

    def is_file(self, path: str) -> bool:
        real = self.realpath(path)
        return real in self.files or real in self.executables.values()

    def is_dir(self, path: str) -> bool:
        real = self.realpath(path)
        return real in self._paths() and not self.is_file(real)

    def realpath(self, path: str) -> str:
        for _ in range(40):
            for link, target in self.links.items():
                if path == link or path.startswith(link + "/"):
                    path = target + path[len(link) :]
                    break
            else:
                return path
        return path

    def glob(self, pattern: str) -> list[str]:
        depth = pattern.count("/")  # like glob, "*" never crosses a "/"
        return sorted(
            path
            for path in self._paths() | set(self.links)
            if path.count("/") == depth and fnmatch.fnmatchcase(path, pattern)
        )

    def env(self, name: str) -> str | None:
        return self.environ.get(name)

    def which(self, name: str) -> str | None:
        return self.executables.get(name)

    def run(self, argv: Sequence[str], timeout: float = 10.0):

        self.ran.append(tuple(argv))
        answer = self.commands.get(tuple(argv))
        if answer is None:
            return None
        returncode, stdout, stderr = answer
        return Completed(tuple(argv), returncode, stdout, 0.0, stderr)

    def platform(self) -> PlatformFacts:
        return self.facts

    def nvml(self) -> NvmlSnapshot | str:
        return self.nvml_answer

    def libcuda_driver_version(self, library: str) -> int | str:
        return self.libcuda.get(library, f"{library}: cannot open shared object file: No such file or directory")
