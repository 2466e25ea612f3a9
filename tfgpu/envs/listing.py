"""``tfgpu-install list``: the environments this tool built, and whether each still looks whole.

Only directories whose marker *proves* the tool made them there (``tfgpu.envs.marker.proof``) are
listed, from the directories ``--name`` is looked up in (``tfgpu.envs.which.search_dirs``: the
tool's envs directory, then the conda installation's), so ``list`` shows what ``--name`` finds; an
env built with ``--prefix`` elsewhere is not found (nothing records it outside the env). The health check is
cheap on purpose — no Python is started, TensorFlow is not imported: ``bin/python`` must be there
and the TensorFlow the marker records must be installed. ``verify`` and ``doctor`` go further.
"""

from __future__ import annotations

import os
from pathlib import Path

from tfgpu.envs.location import NAME
from tfgpu.envs.which import search_dirs

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: type checkers treat it alike
if TYPE_CHECKING:
    from tfgpu.envs.marker import Marker

TF_DISTRIBUTIONS = ("tensorflow", "tensorflow_cpu", "tensorflow_gpu", "tensorflow_macos")


def health(prefix: Path, recorded: Marker) -> list[str]:
    """What is wrong with the env at ``prefix`` on a cheap look (empty: it looks whole); a part this
    user cannot read (permissions) is said as a problem, not raised."""
    try:
        return _health(prefix, recorded)
    except OSError as error:
        return [f"cannot be read by this user ({error.strerror or error}: {error.filename})"]


def _health(prefix: Path, recorded: Marker) -> list[str]:
    problems = []
    python = prefix / "bin" / "python"
    if not python.exists():  # exists() follows the link: a venv whose base interpreter is gone fails too
        problems.append(
            "bin/python is missing"
            if not python.is_symlink()
            else f"bin/python points to {os.readlink(python)}, which is gone"
        )
    wanted = recorded.tensorflow
    if wanted:
        found = installed_tensorflow(prefix)
        if not found:
            problems.append(f"TensorFlow {wanted} is not installed")
        elif wanted not in found:
            problems.append(f"TensorFlow {wanted} was installed; the env now has {', '.join(sorted(found))}")
    return problems


def installed_tensorflow(prefix: Path) -> set[str]:
    """The versions of TensorFlow distributions in the env's site-packages (their dist-info names)."""
    found = set()
    for site in prefix.glob("lib/python3*/site-packages"):
        for info in site.glob("*.dist-info"):
            name, _, rest = info.name.removesuffix(".dist-info").partition("-")
            if name.lower() in TF_DISTRIBUTIONS and (info / "METADATA").is_file():
                found.add(rest)
    return found


def list_envs(dirs: list[Path] | None = None) -> list[dict]:
    """Every env the tool provably built in ``dirs`` (default ``which.search_dirs()``), sorted by name."""
    # Start-up cost: `list --names` (completion) loads this module but not tfgpu.envs.marker.
    from tfgpu.envs import marker

    envs = []
    for root in dirs or search_dirs():
        try:
            # A link to an env is not another env (and remove refuses it): only real directories.
            children = sorted(
                p for p in root.iterdir() if _is_dir(p) and not p.is_symlink() and not p.name.startswith(".")
            )
        except OSError:
            continue
        for prefix in children:
            try:
                recorded = marker.proof(prefix)
            except OSError:  # an env this user cannot enter proves nothing to them
                recorded = None
            if recorded is None:
                continue
            problems = health(prefix, recorded)
            envs.append(
                {
                    "name": prefix.name,
                    "prefix": str(prefix),
                    "mode": recorded.mode,
                    "tensorflow": recorded.tensorflow,
                    "python": recorded.python,
                    "cuda": recorded.cuda,
                    "cudnn": recorded.cudnn,
                    "engine": recorded.engine,
                    "created": recorded.created,
                    "tool_version": recorded.tool_version,
                    "from_lock": recorded.from_lock,
                    "healthy": not problems,
                    "problems": problems,
                }
            )
    return envs


def leftovers(dirs: list[Path] | None = None) -> list[dict]:
    """What an interrupted ``remove`` left in ``dirs`` (``.NAME.tfgpu-removing``, its marker still
    naming the env it was): where, how many files and bytes, and the command that frees them."""
    # Start-up cost: `list --names` (completion) loads this module but not tfgpu.envs.txn.
    # Looked up at each call: tests stand a fake in for survey().
    # Start-up cost: `list --names` (completion) loads this module but not tfgpu.doors.quoting.
    from tfgpu.doors.quoting import sh
    from tfgpu.envs import marker, txn
    from tfgpu.envs.removal import survey

    found = []
    for root in dirs or search_dirs():
        try:
            entries = sorted(p for p in root.iterdir() if p.name.startswith(".") and "tfgpu-removing" in p.name)
        except OSError:
            continue
        for path in entries:
            try:
                if path.is_symlink() or not path.is_dir():
                    continue
                recorded = marker.read(path)
                prefix = recorded.prefix if recorded is not None else None
                if prefix is None or txn.removing_of(Path(prefix)) != path:
                    continue
                if marker.proof(path, prefix) is None:
                    continue
                _, files, size = survey(path)
            except OSError:
                continue
            name = Path(prefix).name
            by_name = Path(prefix).parent == root and not Path(prefix).exists()
            found.append(
                {
                    "name": name,
                    "prefix": prefix,
                    "path": str(path),
                    "files": files,
                    "bytes": size,
                    "what": "an interrupted remove",
                    "command": f"tfgpu-install remove {f'--name {sh(name)}' if by_name else f'--prefix {sh(prefix)}'}",
                }
            )
    return found


def env_names(dirs: list[Path]) -> list[str]:
    """The names ``--name`` can take in ``dirs``, sorted, each once: directories holding a venv or a
    conda env whose name is a valid env name (``tfgpu.envs.location.NAME``). Reads no marker and
    nothing inside an env but those two entries: shell completion runs this on every TAB, and a name
    that is not valid (a newline, a quote, ``$(...)``) is never offered, so never becomes shell code."""
    found = set()
    for root in dirs:
        try:
            entries = list(root.iterdir())
        except OSError:
            continue
        for prefix in entries:
            if not NAME.fullmatch(prefix.name) or not _is_dir(prefix):
                continue
            try:
                if (prefix / "pyvenv.cfg").is_file() or (prefix / "conda-meta").is_dir():
                    found.add(prefix.name)
            except OSError:
                continue
    return sorted(found)


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False
