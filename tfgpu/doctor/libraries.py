"""Would each CUDA library TensorFlow needs load, from which file, at which version?

TensorFlow asks the loader for sonames (``dlopen("libcusolver.so.11")``). The loader answers, in
order: an object already loaded with that soname (what the env's load hook preloads), the
``LD_LIBRARY_PATH`` directories, the RUNPATH of the calling library
(``libtensorflow_framework.so.2``), then ``ld.so.cache`` and the default directories. doctor
walks that order with files only, then loads the chosen files in a child process to prove they
load and to read their versions.
"""

from __future__ import annotations

import ast
import json
import os
import re
import sys
from collections.abc import Sequence
from importlib.resources import as_file, files
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from tfgpu.doors import pysource, untrusted
from tfgpu.process.runner import Runner
from tfgpu.records import factory, record
from tfgpu.resolver import tables

DEFAULT_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib")


@record(frozen=False)
class Resolved:
    name: str
    soname: str
    path: str | None
    via: str
    """``load hook``, ``LD_LIBRARY_PATH``, ``RUNPATH``, ``ld.so.cache``, ``default dirs`` or ``missing``."""
    version_symbol: str | None = None
    loaded: bool = False
    version: str | None = None
    error: str | None = None
    shadowed: str | None = None
    """Another copy earlier on LD_LIBRARY_PATH that the load hook makes irrelevant, or that wins."""
    own: str | None = None
    """The file found for TensorFlow when another copy of the SONAME answers its lookups instead
    (``path``): the other CUDA stack's, which the load hook loaded first."""


def needed_libraries(build_info: dict) -> list[tuple[str, str, str | None]]:
    """(name, soname, version symbol) TensorFlow will ask for, from its build_info."""
    cuda = str(build_info.get("cuda_version", "")).strip()
    cudnn = str(build_info.get("cudnn_version", "")).strip()
    if not cuda or not cudnn:
        return []
    cuda_version = Version(cuda if "." in cuda else cuda + ".0")
    for row in tables.load_toml("sonames.toml")["cuda"]:
        if cuda_version in SpecifierSet(row["versions"]):
            fill = {"cudnn_major": cudnn.split(".")[0], "cuda_major_minor": ".".join(cuda.split(".")[:2])}
            return [(lib["name"], lib["soname"].format(**fill), lib.get("version_symbol")) for lib in row["libraries"]]
    return []


def hook_preloads(hook: Path | None) -> dict[str, str]:
    """soname -> absolute path for what the env's load hook preloads."""
    if hook is None:
        return {}

    tree = pysource.parse(untrusted.text_or_none(hook, untrusted.ENV_FILE, errors="replace") or "")
    for node in tree.body if isinstance(tree, ast.Module) else ():
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "LIBRARIES":
            relative = pysource.literal(node.value)
            if not isinstance(relative, (list, tuple)):
                return {}  # a hook this tool did not write: it preloads nothing doctor can name
            return {
                Path(r).name: str(hook.parent / r)
                for r in relative
                if isinstance(r, str) and "\0" not in r and (hook.parent / r).is_file()
            }
    return {}


def hook_other_first(hook: Path | None, environ: dict[str, str]) -> list[str]:
    """The absolute paths the env's load hook loads before TensorFlow's own libraries (its
    OTHER_FIRST, in an env with two CUDA stacks), as the hook reads ``TFGPU_OTHER_STACK_FIRST``."""
    if hook is None:
        return []
    setting = environ.get("TFGPU_OTHER_STACK_FIRST", "")
    if setting.strip().lower() in ("0", "off", "false", "no"):
        return []
    if "/" in setting:
        return [path for path in setting.split(":") if path]
    tree = pysource.parse(untrusted.text_or_none(hook, untrusted.ENV_FILE) or "")
    for node in tree.body if isinstance(tree, ast.Module) else ():
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "OTHER_FIRST":
            relative = pysource.literal(node.value)
            if not isinstance(relative, (list, tuple)):
                return []  # a hook that says nothing readable loads nothing first, as far as doctor can tell
            return [os.path.normpath(hook.parent / r) for r in relative if isinstance(r, str)]
    return []


def ld_cache() -> dict[str, str]:
    """soname -> path from ``ldconfig -p`` (x86-64 entries), or {} without ldconfig."""

    for ldconfig in ("/sbin/ldconfig", "/usr/sbin/ldconfig", "ldconfig"):
        done = Runner().capture([ldconfig, "-p"], timeout=10, clean=False)
        if not done.started or done.returncode == 124:
            continue
        cache: dict[str, str] = {}
        for line in done.stdout.splitlines()[1:]:
            name, _, rest = line.strip().partition(" (")
            if "=>" in rest and ("x86-64" in rest or "AArch64" in rest or "64bit" in rest):
                cache.setdefault(name, rest.split("=>", 1)[1].strip())
        return cache
    return {}


def ld_library_path(environ: dict[str, str]) -> list[str]:
    """LD_LIBRARY_PATH's directories as glibc's loader splits them (elf/dl-load.c): ':' and ';' both
    separate, and an empty entry (``:x``, ``x:``, ``a::b``) is the current directory."""
    value = environ.get("LD_LIBRARY_PATH", "")
    return [directory or "." for directory in re.split("[:;]", value)] if value else []


def resolve_libraries(
    build_info: dict, runpath: tuple[str, ...], hook: Path | None, environ: dict[str, str]
) -> list[Resolved]:
    """Where the loader would find each library TensorFlow needs (files only)."""
    preloaded = hook_preloads(hook)
    ld_path = ld_library_path(environ)
    cache = None
    out = []
    for name, soname, symbol in needed_libraries(build_info):
        in_ld = next((str(Path(d) / soname) for d in ld_path if (Path(d) / soname).exists()), None)
        if soname in preloaded:
            entry = Resolved(name, soname, preloaded[soname], "load hook", symbol)
            if in_ld and Path(in_ld).resolve() != Path(preloaded[soname]).resolve():
                entry.shadowed = in_ld
        elif in_ld:
            entry = Resolved(name, soname, in_ld, "LD_LIBRARY_PATH", symbol)
            in_runpath = next((str(Path(d) / soname) for d in runpath if (Path(d) / soname).exists()), None)
            if in_runpath and Path(in_runpath).resolve() != Path(in_ld).resolve():
                entry.shadowed = in_runpath  # here the env's copy is the one that loses
        else:
            in_runpath = next((str(Path(d) / soname) for d in runpath if (Path(d) / soname).exists()), None)
            if in_runpath:
                entry = Resolved(name, soname, in_runpath, "RUNPATH", symbol)
            else:
                cache = ld_cache() if cache is None else cache
                default = next((str(Path(d) / soname) for d in DEFAULT_DIRS if (Path(d) / soname).exists()), None)
                if soname in cache:
                    entry = Resolved(name, soname, cache[soname], "ld.so.cache", symbol)
                elif default:
                    entry = Resolved(name, soname, default, "default dirs", symbol)
                else:
                    entry = Resolved(name, soname, None, "missing", symbol)
        out.append(entry)
    return out


@record(frozen=False)
class Dlopened:
    """Where a name a CUDA library dlopens itself (``libnvrtc.so``) resolved in the probe."""

    name: str
    caller: str
    runpath: tuple[str, ...]
    path: str | None = None
    via: str | None = None
    """``already loaded``, ``LD_LIBRARY_PATH``, ``RUNPATH of <caller>``, ``ld.so.cache`` or ``missing``."""
    error: str | None = None
    found: str | None = None
    """The name where the search found it, links not followed (``<dir>/libnvrtc.so``): a link of the
    env's that leads out of it is named by this, the file it maps by ``path``."""


@record(frozen=False)
class Probe:
    """What the probe process loaded: the dlopened names, and every shared object it mapped."""

    dlopened: list[Dlopened] = factory(list)
    mapped: list[str] = factory(list)
    ran: bool = False
    uses: dict = factory(dict)
    """soname -> {"path", "version", "package", "copies"}: the copy the loader gives by name."""


def env_library_dirs(root: Path, site: Path | None) -> list[Path]:
    """Where an env keeps CUDA libraries: each ``nvidia/*/lib`` of its site-packages and of a CUDA stack
    kept apart (``lib/tfgpu/cuda<major>/``, an env with two stacks), and ``lib/`` (conda)."""
    found = sorted(p for p in (site / "nvidia").glob("*/lib") if p.is_dir()) if site else []
    found += sorted(p for p in root.glob("lib/tfgpu/cuda[0-9]*/nvidia/*/lib") if p.is_dir())
    return [*found, root / "lib"] if (root / "lib").is_dir() else found


def dlopen_callers(root: Path, site: Path | None) -> list[Dlopened]:
    """The names the env's CUDA libraries dlopen themselves (sonames.toml, read from the
    wheels), one per caller file the env holds, with the caller's RUNPATH expanded."""
    out, seen = [], set()
    dirs = env_library_dirs(root, site)
    for row in tables.dlopened_names():  # the rows create and repair link, read the same way
        for directory in dirs:
            caller = directory / row["caller"]
            if caller.is_file() and (row["name"], str(caller)) not in seen:
                seen.add((row["name"], str(caller)))
                runpath = tuple(
                    os.path.normpath(entry.replace("${ORIGIN}", str(directory)).replace("$ORIGIN", str(directory)))
                    for entry in row["runpath"]
                )
                out.append(Dlopened(row["name"], str(caller), runpath))
    return out


def load_in_child(
    resolved: list[Resolved], dlopened: Sequence[Dlopened] = (), timeout: float = 60, first: Sequence[str] = ()
) -> Probe:
    """Load ``first`` (what the load hook loads before TensorFlow's libraries), then every found
    library in a child process, in order; fill ``loaded``/``version``/``error`` from the copy a
    lookup by SONAME gets; then resolve the dlopened names as their callers' ``dlopen`` would
    (``probe_libs.py``)."""
    todo = [{"soname": r.soname, "path": r.path, "version_symbol": r.version_symbol} for r in resolved if r.path]
    names = [{"name": u.name, "caller": u.caller, "runpath": list(u.runpath)} for u in dlopened]
    probe = Probe(dlopened=list(dlopened))
    if not todo and not names:
        return probe
    first = [path for path in first if os.path.isfile(path)]

    with as_file(files("tfgpu.verify").joinpath("probe_libs.py")) as script:
        # The user's environment as it is (LD_LIBRARY_PATH included): that is what TensorFlow's loader sees.
        # The lists go on stdin: as arguments, a long RUNPATH list would pass the kernel's 128 KiB
        # limit on one argument (E2BIG) and the probe would not start at all.
        argv = [sys.executable, "-I", str(script)]
        done = Runner().capture(argv, timeout=timeout, clean=False, input=json.dumps([todo, names, first]))
        try:
            document = untrusted.parse_json(
                done.output.strip().splitlines()[-1], untrusted.CHILD_OUTPUT, "the library probe"
            )
            results = {r["soname"]: r for r in document["libraries"]}
            for use, answer in zip(probe.dlopened, document["dlopened"], strict=True):
                use.path, use.via, use.error = answer["path"], answer["via"], answer["error"]
                use.found = answer.get("found") if isinstance(answer.get("found"), str) else None
            probe.mapped = [str(path) for path in document["mapped"]]
            probe.uses = document["uses"] if isinstance(document.get("uses"), dict) else {}
            probe.ran = True
        except (untrusted.Unreadable, IndexError, TypeError, KeyError, AttributeError, ValueError):
            results = {}
    for entry in resolved:
        result = results.get(entry.soname)
        if result:
            entry.loaded, entry.version, entry.error = result["loaded"], result["version"], result["error"]
            entry.path = result["mapped"] or entry.path
            own = result.get("own")
            if isinstance(own, str) and entry.path and os.path.realpath(own) != os.path.realpath(entry.path):
                entry.own = own
        elif entry.path and done.returncode == 124:
            # A load that blocks (a dependency that is a FIFO or a device: the loader reads it) is
            # not a crash, and the libraries before it may have loaded: say what happened.
            entry.error = (
                f"the library probe did not finish within {timeout:.0f} s (a library or one it needs "
                "blocked the loader: a FIFO or device named like a library?), so whether it loads is unknown"
            )
        elif entry.path:
            entry.error = "the library probe crashed while loading it"
    return probe
