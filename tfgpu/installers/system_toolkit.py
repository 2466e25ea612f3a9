"""The CUDA toolkit half of system mode: where it goes, the marker that proves the tool installed it
there (and makes a re-run a no-op), its staging and commit, and the root-only files
(``/etc/profile.d``, ``/etc/ld.so.conf.d``). NVIDIA's files themselves (runfile command, cuDNN
archive, the completeness check) are ``tfgpu.engines.nvidia``'s.

Root installs go to ``/usr/local/cuda-X.Y``; user installs to ``<env>/cuda`` (see docs/modes.md's
"System mode" section). ``is_root`` and ``SYSTEM_PREFIX``/``ETC`` are module attributes so tests
can simulate a non-root user or a different root without being one.
"""

from __future__ import annotations

import os
from pathlib import Path

from tfgpu.doors import quoting, untrusted
from tfgpu.envs import txn, writes
from tfgpu.errors import ImpossibleError
from tfgpu.process.runner import shielded
from tfgpu.records import record

TOOLKIT_MARKER = "tfgpu-toolkit.json"
SYSTEM_PREFIX = Path("/usr/local")
ETC = Path("/etc")
LDCONFIG = ("ldconfig",)
"""Refreshes the loader cache after ``ETC/ld.so.conf.d`` changed (tests point ETC elsewhere and
replace this with a harmless command)."""


def is_root() -> bool:
    """Whether we may write system paths (effective uid 0). Tests monkeypatch this function to
    simulate an ordinary user, since the test machines run as root."""
    return os.geteuid() == 0


@record
class ToolkitPlace:
    """Where the toolkit goes and how the env refers to it."""

    final: Path
    staging: Path
    ref: str
    """``cuda`` (relative to the env: a user prefix) or the absolute system path."""
    system: bool
    reuse: bool = False
    """A complete toolkit with the same files is already at ``final``: nothing to install."""

    @property
    def tmpdir(self) -> Path:
        """The runfile's ``--tmpdir``: beside the toolkit (same disk), not a small /tmp."""
        return self.staging.with_name(self.staging.name + "-tmp")

    @property
    def current(self) -> Path:
        """Where the toolkit's files are once installed, before the env is committed."""
        return self.final if (self.system or self.reuse) else self.staging


def expected_marker(items) -> dict:
    """What ``TOOLKIT_MARKER`` records: the exact files the toolkit was built from."""
    return {
        "tool": "tfgpu-install",
        **{
            f"{a.kind}_{key}": value
            for a in items
            for key, value in (("version", a.version), ("file", a.filename), ("sha256", a.sha256), ("md5", a.md5))
        },
    }


def toolkit_record(items, final: Path) -> dict:
    """What a toolkit's marker holds: the files it was built from and the real path it was made for."""
    return {**expected_marker(items), "prefix": os.path.realpath(final)}


def read_toolkit_marker(toolkit: Path) -> dict | None:
    """The files a toolkit was built from, if its marker proves tfgpu-install made it at that very
    path (a marker copied into another toolkit, or hand-written, proves nothing)."""
    if toolkit.is_symlink():
        return None
    found = untrusted.json_or_none(toolkit / TOOLKIT_MARKER, untrusted.MARKER)
    if (
        not isinstance(found, dict)
        or found.get("tool") != "tfgpu-install"
        or found.get("prefix") != os.path.realpath(toolkit)
    ):
        return None
    return {key: value for key, value in found.items() if key != "prefix"}


def place_toolkit(cuda: str, location, system: bool, items, force: bool) -> ToolkitPlace:
    """Decide where the toolkit goes; refuse (before any download) what cannot be done."""
    if not system:
        return ToolkitPlace(final=location.prefix / "cuda", staging=location.staging / "cuda", ref="cuda", system=False)
    final = SYSTEM_PREFIX / f"cuda-{cuda}"
    staging = final.with_name(f".{final.name}.tfgpu-staging")
    marker = read_toolkit_marker(final)
    if marker is not None and marker == expected_marker(items) and not force:
        return ToolkitPlace(final, staging, str(final), system=True, reuse=True)
    if (final.exists() or final.is_symlink()) and marker is None:
        raise ImpossibleError(
            "toolkit-exists",
            f"{final} exists and tfgpu-install cannot prove it installed it there; it is left untouched.",
            [
                "Install into a user prefix instead: --prefix DIR (the toolkit goes to DIR/cuda).",
                f"Or remove {final} yourself and run the same command again.",
            ],
        )
    if final.exists() and not force:
        raise ImpossibleError(
            "toolkit-differs",
            f"{final} was installed by tfgpu-install from other files "
            f"(cuDNN {(marker or {}).get('cudnn_version')}); it is left untouched.",
            [
                "Add --force to rebuild it (the old one stays until the new one is complete).",
                "Or use a user prefix: --prefix DIR.",
            ],
        )
    if not is_root():
        raise ImpossibleError(
            "needs-root",
            f"Installing the CUDA toolkit into {final} and writing {ETC}/profile.d and "
            f"{ETC}/ld.so.conf.d needs root; nothing was downloaded.",
            [
                "Install everything under a directory you own: --prefix DIR (toolkit in DIR/cuda, venv at DIR).",
                "Or run the same command with sudo.",
            ],
        )
    return ToolkitPlace(final, staging, str(final), system=True)


def profile_script(final: Path) -> str:
    """``/etc/profile.d`` entry: the toolkit's ``bin`` on PATH for login shells (once)."""

    bin_dir = quoting.sh(f"{final}/bin")
    return (
        f"# Written by tfgpu-install: the CUDA toolkit in {quoting.one_line(final)} for login shells.\n"
        f'case ":${{PATH}}:" in\n    *:{bin_dir}:*) ;;\n    *) PATH={bin_dir}":${{PATH}}"; export PATH ;;\n'
        "esac\n"
    )


def user_profile(final: Path) -> str:
    """``<env>/etc/tfgpu/cuda-toolkit.sh``: the user-level twin of the ``/etc/profile.d`` entry
    (``nvcc`` on PATH, ``CUDA_HOME``, the libraries for the loader) for a ``--prefix`` toolkit."""
    bin_dir, lib_dir = quoting.sh(f"{final}/bin"), quoting.sh(f"{final}/lib64")
    return (
        f"# Written by tfgpu-install: the CUDA toolkit for a shell or a build (`. <this file>`).\n"
        "# The env's bin/activate already puts its libraries first; this adds nvcc and CUDA_HOME.\n"
        f"CUDA_HOME={quoting.sh(final)}\nexport CUDA_HOME\n"
        f'case ":${{PATH}}:" in\n    *:{bin_dir}:*) ;;\n    *) PATH={bin_dir}":${{PATH}}"; export PATH ;;\nesac\n'
        f'case ":${{LD_LIBRARY_PATH:-}}:" in\n    *:{lib_dir}:*) ;;\n'
        f'    *) LD_LIBRARY_PATH={lib_dir}"${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"; export LD_LIBRARY_PATH ;;\n'
        "esac\n"
    )


def ld_conf(final: Path) -> str:
    """``/etc/ld.so.conf.d`` entry: the toolkit's libraries (and cuDNN) for the dynamic loader (one
    directory per line, so the path must be one line)."""

    return (
        f"# Written by tfgpu-install: CUDA toolkit and cuDNN libraries.\n"
        f"{quoting.single_line(f'{final}/lib64', 'The toolkit path')}\n"
    )


def prepare_staging(place: ToolkitPlace) -> None:
    """An empty staging directory for the runfile, with a record naming the toolkit it is for; one
    left by a killed run is deleted only when its record says it is that toolkit's (under the lock)."""
    staging = place.staging
    if staging.exists() or staging.is_symlink():
        record = txn.read_record(staging / txn.STAGING_RECORD) if txn.is_real_dir(staging) else None
        if place.system and (record is None or record.get("target") != os.path.realpath(place.final)):
            raise txn.foreign_leftover(staging, "an interrupted toolkit install's staging directory")
        writes.remove_tree(staging)
    staging.mkdir(parents=True)
    txn.write_record(staging / txn.STAGING_RECORD, {"tool": "tfgpu-install", "target": os.path.realpath(place.final)})


def commit_toolkit(place: ToolkitPlace) -> None:
    """Move a finished system toolkit into place; an old one (--force, proved ours by its marker
    when the plan was made) goes only afterwards."""

    old = place.final.with_name(f".{place.final.name}.tfgpu-old")
    with shielded():
        if old.exists() and read_toolkit_marker_for(old, place.final) is not None:
            writes.remove_tree(old)
        if place.final.exists():
            writes.move(place.final, old)
        writes.move(place.staging, place.final)
        writes.delete(place.final / txn.STAGING_RECORD)
    if old.exists():
        writes.remove_tree(old)


def read_toolkit_marker_for(directory: Path, made_for: Path) -> dict | None:
    """A toolkit moved aside keeps the marker of the place it was made for."""
    found = untrusted.json_or_none(directory / TOOLKIT_MARKER, untrusted.MARKER)
    return found if isinstance(found, dict) and found.get("prefix") == os.path.realpath(made_for) else None


def clean(place: ToolkitPlace) -> None:
    """After a failure: the system toolkit's staging (made by this run) and every runfile temp directory go."""
    writes.discard_tree(place.tmpdir)
    if place.system and not place.reuse and (place.staging / ".tfgpu-staging.json").is_file():
        writes.discard_tree(place.staging)
