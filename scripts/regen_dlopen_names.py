"""Regenerate the ``[[dlopened]]`` rows of ``tfgpu/data/sonames.toml``: the library names NVIDIA's
CUDA wheels ``dlopen`` themselves from another wheel's directory, read from the wheels' own libraries.

cuDNN 8 and cuBLASLt 11 carry ``libnvrtc.so``, cuBLASLt 12 ``libnvrtc.so.12``, as plain strings and
pass them to ``dlopen`` at run time (cuBLASLt 11 as soon as it is loaded); the loader then searches
the *calling* library's DT_RUNPATH (``$ORIGIN`` first in these wheels), ``LD_LIBRARY_PATH`` and
``ld.so.cache`` (``man 3 dlopen``, "search order"). The file is in the NVRTC wheel's directory, and
for a name without a version no wheel ships a file of that name at all, so the system's copy answers.

For each shared library of each wheel given, the script reads its dynamic section (RUNPATH,
NEEDED) and the NUL-terminated strings ``lib*.so[.N]`` in it that are not NEEDED entries, and keeps
those another of the given wheels ships: for a name without a version, a versioned file of that
library; for a versioned one, that very file (from the wheels of the caller's CUDA, ``cu11``/``cu12``).
Left alone, and listed as comments: the driver's ``libcuda.so`` (no wheel ships it), and names
whose file sits next to the caller in its own wheel (on ``$ORIGIN`` already; for a name without a
version, e.g. cuDNN 9's ``libcudnn_ops.so``, the stem of a versioned name, since that wheel works
on its own). Input: wheel files (``pip download --no-deps nvidia-cudnn-cu11==8.6.0.163
nvidia-cuda-nvrtc-cu11==11.8.89 ...``) or directories holding a wheel's unpacked tree, named
``<distribution>-<version>``.

    python scripts/regen_dlopen_names.py WHEEL_OR_DIR... > rows.toml   # then paste into sonames.toml
"""

from __future__ import annotations

import mmap
import re
import sys
import tempfile
import zipfile
from pathlib import Path

from tfgpu.doctor.elf import read_dynamic

LIBRARY = re.compile(r"\.so(\.\d+)*$")
DLOPENED = re.compile(rb"\x00(lib[A-Za-z0-9_+-]+\.so(?:\.[0-9]+)*)(?=\x00)")


def trees(arguments: list[str], scratch: Path):
    """(distribution==version, directory holding its unpacked files) for each argument."""
    for argument in arguments:
        path = Path(argument)
        if path.is_dir():
            dist, _, version = path.name.partition("-")
            yield f"{dist.replace('_', '-')}=={version}", path
        else:
            dist, version = path.name.split("-")[:2]
            target = scratch / path.stem
            with zipfile.ZipFile(path) as wheel:
                for member in wheel.namelist():
                    if LIBRARY.search(member):
                        wheel.extract(member, target)
            yield f"{dist.replace('_', '-')}=={version}", target


def _cuda(wheel: str) -> str:
    """``cu11`` for ``nvidia-cudnn-cu11==8.6.0.163``: a caller is paired with its own CUDA's file."""
    return wheel.split("==")[0].rsplit("-", 1)[-1]


def strings(path: Path) -> set[str]:
    with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        return {match.decode() for match in DLOPENED.findall(data)}


def scan(arguments: list[str]) -> tuple[list[dict], dict[str, set[str]]]:
    rows, shipped, files, left = [], {}, {}, {}
    with tempfile.TemporaryDirectory() as scratch:
        libraries = []
        for wheel, tree in trees(arguments, Path(scratch)):
            for path in sorted(p for p in tree.rglob("lib*.so*") if LIBRARY.search(p.name)):
                relative = path.relative_to(tree).as_posix()
                shipped.setdefault(path.name.split(".so")[0], {}).setdefault(_cuda(wheel), relative)
                files.setdefault(path.name, []).append((wheel, relative))
                libraries.append((wheel, relative, path))
        for wheel, relative, path in libraries:
            dynamic = read_dynamic(str(path))
            if dynamic is None:
                continue
            for name in sorted(strings(path) - set(dynamic.needed) - {dynamic.soname}):
                base = name.split(".so")[0]
                versions = shipped.get(base, {})
                provider = versions.get(_cuda(wheel)) or next(iter(versions.values()), None)
                if not name.endswith(".so"):  # a versioned name: the wheels must ship that very file
                    provider = next((f for f in files.get(name, ()) if _cuda(f[0]) == _cuda(wheel)), (None, None))[1]
                    if provider is None:
                        if base in shipped:
                            left.setdefault(f"{name} (no wheel given ships that file)", set()).add(path.name)
                        continue
                if provider and Path(provider).parent == Path(relative).parent:
                    # On $ORIGIN already; cuDNN 9's "libcudnn_ops.so" is the stem of libcudnn_ops.so.9 (the
                    # wheel works alone).
                    left.setdefault(f"{name} (next to the caller in its own wheel)", set()).add(path.name)
                elif provider:
                    rows.append(
                        {
                            "name": name,
                            "provides": base,
                            "caller": path.name,
                            "runpath": list(dynamic.runpath),
                            "wheel": wheel,
                            "found": f"{relative}: the string {name!r}; RUNPATH "
                            f"{':'.join(dynamic.runpath) or '-'}; versioned file {provider}",
                        }
                    )
                else:
                    left.setdefault(name, set()).add(path.name)
    return rows, left


def toml_rows(rows: list[dict]) -> str:
    out = []
    for row in rows:
        runpath = ", ".join(f'"{entry}"' for entry in row["runpath"])
        out.append(
            f'[[dlopened]]\nname = "{row["name"]}"\nprovides = "{row["provides"]}"\ncaller = "{row["caller"]}"\n'
            f'runpath = [{runpath}]\nwheel = "{row["wheel"]}"\nfound = "{row["found"]}"\nsource = ["WHL-DLOPEN"]\n'
        )
    return "\n".join(out)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    rows, left = scan(argv)
    for name, callers in sorted(left.items()):
        print(f"# left alone: {name} ({', '.join(sorted(callers))})")
    print(toml_rows(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
