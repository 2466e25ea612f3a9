"""Where an environment lives: names and paths checked the same way for every command.

``--name N`` is a plain name (letters, digits, ``.``, ``_``, ``-``) under an envs directory;
``--prefix P`` is a path whose text cannot break a script that embeds it: no control characters,
no ``" $ ` \\ !`` (third-party activate scripts put the env's path inside double quotes), valid
UTF-8. A prefix that is itself a symbolic link is refused by every command that changes it
(create, ``--force``, remove): the tool works on real directories only, and says where the link
points. Parents that are links are fine: the marker records the real path.
"""

from __future__ import annotations

import os
import re
from functools import cache
from pathlib import Path

from tfgpu.doors import untrusted
from tfgpu.doors.controls import character_class
from tfgpu.doors.paths import user_path
from tfgpu.errors import ImpossibleError, UsageError
from tfgpu.records import factory, record

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@cache
def _unsafe() -> re.Pattern[str]:
    """What a prefix may not hold: shell text activation scripts put in double quotes would expand, and
    the characters no generated file or terminal shows as themselves (tfgpu.doors.controls). Built
    when first used: a lock imports this module (through the cache's) and never checks a prefix."""
    return re.compile(r'["$`\\!]|' + character_class())


@record
class Location:
    """Where an env goes: the final prefix, the staging directory it is built in, its name."""

    prefix: Path
    staging: Path
    name: str
    existing: bool = False
    """The prefix exists already (only allowed with --force: it is replaced at the end)."""
    in_place: bool = False
    """Built at the final path (``staging == prefix``): for engines whose envs cannot be moved
    (conda, mamba, micromamba). An old env is moved aside first and put back on failure."""
    id: str = factory(lambda: os.urandom(16).hex())  # secrets.token_hex without importing it (hmac, hashlib)
    """This build's identity, written into its marker (and its Jupyter kernel's name)."""

    @property
    def real(self) -> str:
        """The real path the env is made for (parent links resolved): what its marker records."""
        return real_path(self.prefix)

    @property
    def prompt(self) -> str:
        """The shell prompt label: the name with anything but ``[A-Za-z0-9._-]`` replaced."""
        return safe_label(self.name)


def safe_label(text: str) -> str:
    """``text`` reduced to ``[A-Za-z0-9._-]`` (for prompts, kernel and log file names)."""
    label = re.sub(r"[^A-Za-z0-9._-]", "_", text).lstrip("-.") or "env"
    return label[:64]


def real_path(path: Path) -> str:
    """``os.path.realpath``: the path with every link in it resolved (also for one that does not exist yet)."""
    return os.path.realpath(path)


def check_name(name: str, flag: str = "--name") -> str:
    """A valid env name, or ``bad-env-name`` (exit 2)."""
    if not NAME.fullmatch(name):
        raise UsageError(
            "bad-env-name",
            f"{flag} {name!r} is not a valid environment name.",
            [
                "Use letters, digits, '.', '_' and '-' (up to 64, starting with a letter or digit), "
                "or give a path with --prefix."
            ],
        )
    return name


def check_path_text(text: str, flag: str = "--prefix") -> str:
    """A path whose text scripts can embed safely, or ``bad-prefix`` (exit 2)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError(
            "bad-prefix",
            f"{flag} {text.encode('utf-8', 'surrogateescape')!r} is not valid UTF-8.",
            ["Use a path whose name is UTF-8 text."],
        ) from None
    bad = _unsafe().search(text)
    if bad:
        shown = repr(bad.group(0))
        raise UsageError(
            "bad-prefix",
            f"{flag} {text!r} contains {shown}, which activation scripts cannot carry "
            "safely (they put the path in double quotes).",
            ["Choose a path of letters, digits, spaces and '/._-+@:,=%~' (or use --name)."],
        )
    long = next((part for part in text.split("/") if len(part.encode("utf-8")) > 255), None)
    if long is not None:
        raise UsageError(
            "bad-prefix",
            f"{flag} has a component of {len(long.encode('utf-8'))} bytes (it starts {long[:40]!r}); "
            "no file system takes a name longer than 255.",
            ["Choose a shorter name."],
        )
    return text


def normalize(text: str, flag: str = "--prefix") -> Path:
    """An absolute path, ``..`` and ``.`` resolved textually (links are kept, see the module docstring)."""
    check_path_text(text, flag)
    return Path(os.path.abspath(os.path.expanduser(text)))


def envs_dir() -> Path:
    """Where ``--name`` envs live (pip and system mode): the platformdirs data dir."""

    override = os.environ.get("TFGPU_ENVS_DIR")
    if override:
        return normalize(user_path(override, "TFGPU_ENVS_DIR"), "TFGPU_ENVS_DIR")
    # Start-up cost: `doctor` loads this module but not platformdirs.
    from platformdirs import user_data_dir

    return Path(user_data_dir("tfgpu-install")) / "envs"


def prefix_for(name: str | None, prefix: str | None) -> tuple[Path, str]:
    """The env's path and display name from ``--name``/``--prefix``."""
    if prefix:
        path = normalize(prefix)
        return path, path.name or "env"
    if name:
        return envs_dir() / check_name(name), name
    raise UsageError(
        "missing-location",
        "Say where the environment goes: --name N or --prefix P.",
        ["--name tf213 puts it in tfgpu-install's envs directory; --prefix ./env anywhere."],
    )


def refuse_link(path: Path) -> None:
    """``prefix-is-symlink`` (exit 3) for a prefix that is a symbolic link."""
    if path.is_symlink():
        target = real_path(path)
        raise ImpossibleError(
            "prefix-is-symlink",
            f"{path} is a symbolic link (to {target}); tfgpu-install changes "
            "real directories only, so it is left untouched.",
            [f"Give the real directory: --prefix {target}"],
        )


def locate(name: str | None, prefix: str | None, force: bool, in_place: bool = False) -> Location:
    """Check the target before anything is downloaded or written (reads only)."""
    # Start-up cost: `list --names` (completion) loads this module but not tfgpu.envs.marker.
    from tfgpu.envs import marker

    final, display = prefix_for(name, prefix)
    refuse_link(final)
    existing = False
    if final.exists():
        if not final.is_dir():
            raise ImpossibleError(
                "target-not-a-directory",
                f"{final} exists and is not a directory.",
                ["Choose another --prefix or --name."],
            )
        if any(final.iterdir()):
            proof = marker.proof(final)
            if proof is None:
                raise ImpossibleError(
                    "target-not-empty",
                    f"{final} is not empty and tfgpu-install cannot prove it built it "
                    f"({marker.why_not(final)}); it is left untouched (--force replaces only environments "
                    "tfgpu-install built there).",
                    ["Choose another --prefix or --name, or empty that directory yourself."],
                )
            if not force:
                raise ImpossibleError(
                    "env-exists",
                    f"An environment already exists at {final}; it is left untouched.",
                    [
                        "Add --force to rebuild it (the old one stays until the new one is complete).",
                        f"Or `tfgpu-install remove --prefix {final}` first, or choose another --name.",
                    ],
                )
            existing = True
    parent = _nearest_existing(final.parent)
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise ImpossibleError(
            "target-not-writable",
            f"Cannot create {final}: {parent} is not a writable directory.",
            ["Choose a --prefix in a directory you can write, or use --name (your own data directory)."],
        )
    staging = final if in_place else final.parent / f".{final.name}.tfgpu-staging"
    return Location(prefix=final, staging=staging, name=display, existing=existing, in_place=in_place)


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def relocate_venv(staging: Path, final: Path) -> None:
    """Rewrite the staging path to the final one in a venv's scripts and ``pyvenv.cfg``.

    ``python -m venv`` writes absolute paths (activate scripts, entry-point shebangs); uv's
    ``--relocatable`` venvs need none of this, and it is harmless for them.
    """
    old, new = str(staging).encode(), str(final).encode()
    bin_dir = staging / "bin"
    for path in [*(sorted(bin_dir.iterdir()) if bin_dir.is_dir() else []), staging / "pyvenv.cfg"]:
        if path.is_symlink() or not path.is_file():
            continue
        data = untrusted.read_bytes(path, untrusted.LIBRARY)
        if old in data and b"\0" not in data[:1024]:
            path.write_bytes(data.replace(old, new))
