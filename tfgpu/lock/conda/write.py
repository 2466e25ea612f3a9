"""conda-lock.yml for teams: one rattler solve per platform, in conda-lock's own file format.

Each platform is solved with the virtual packages of the *target*, never a silent default:
``__cuda`` from the resolution (the target driver's CUDA, else the CUDA TensorFlow was built
with), ``__glibc`` 2.28 for Linux (the floor the pip side locks for), ``__osx`` 14.0 for macOS.
The PyPI part (TensorFlow and its dependencies, resolved by uv against the public index with
hashes) goes into the same file as ``manager: pip`` entries, one wheel URL and sha256 each.
``tfgpu.lock.conda.read`` reads it back with conda-lock's own parser.

``custom_metadata`` records the format, the tool version, each platform's resolution, and a
sha256 over every package entry, so an edited lock is refused before anything is installed;
conda-lock itself reads the file (``conda-lock render -k explicit`` works on it).

A channel given with a credential (``/t/<token>/``) is solved as given and recorded without it,
channels and package URLs alike (``tfgpu.doors.secrets.strip``): a lock is committed and copied. The
header then says where the credential comes from at install time (the engine's own authentication).
"""

from __future__ import annotations

import hashlib
import json
import textwrap
from pathlib import Path

import yaml

from tfgpu import __version__
from tfgpu.doors import secrets, untrusted
from tfgpu.doors.paths import cache_root, output_dir, write_output
from tfgpu.doors.quoting import one_line
from tfgpu.engines import rattler_engine
from tfgpu.engines.channels import channel_urls, check_channels
from tfgpu.errors import ImpossibleError
from tfgpu.lock.recorded import planned
from tfgpu.lock.resolving import compile_pylock
from tfgpu.lock.tools import tools
from tfgpu.records import record

FORMAT = "2"
"""Format 2 binds channels, platforms and resolutions as well as the packages (:func:`lock_digest`)."""


def pip_entries(pylock_text: str, platform, python: str) -> list[dict]:
    """One wheel per locked distribution (the best for the platform), from uv's pylock.toml."""
    entries = []
    for package in untrusted.parse_toml(pylock_text, untrusted.PIP_LOCK, "uv's pylock.toml").get("packages", []):
        wheels = [(platform.wheel_rank(w["url"].rsplit("/", 1)[-1], python), w) for w in package.get("wheels", [])]
        wheels = [(rank, w) for rank, w in wheels if rank is not None]
        if not wheels:
            raise ImpossibleError(
                "lock-unsatisfiable",
                f"{package['name']} {package['version']} has no wheel for "
                f"{platform.name} with Python {python}; a lock installs wheels only.",
                ["Choose another --python or --tf."],
            )
        wheel = min(wheels, key=lambda pair: pair[0])[1]
        entries.append(
            {
                "name": package["name"],
                "version": package["version"],
                "url": wheel["url"],
                "sha256": wheel["hashes"]["sha256"],
            }
        )
    return entries


DIGEST = "tfgpu_packages_sha256"
"""The ``custom_metadata`` key of :func:`lock_digest`."""


def lock_digest(channels, platforms, custom: dict, rows) -> str:
    """sha256 over everything in a lock that decides what is installed: its channels, platforms,
    resolutions (``custom_metadata``, this digest aside) and every package entry as ``(platform,
    manager, name, version, url, sha256, md5)``. A lock that points a channel or a package at another
    server is as edited as one with another hash. (``content_hash`` records the inputs for ``lock
    --check``, which reports it when it no longer matches; it decides nothing that is installed.)"""
    bound = {
        "channels": [str(c) for c in channels],
        "platforms": [str(p) for p in platforms],
        "custom": {k: v for k, v in custom.items() if k != DIGEST},
        "packages": sorted([str(v) for v in row] for row in rows),
    }
    return hashlib.sha256(json.dumps(bound, sort_keys=True).encode()).hexdigest()


def model_digest(lockfile) -> str:
    """:func:`lock_digest` of a lock conda-lock's parser read back."""
    metadata = lockfile.metadata
    return lock_digest(
        [c.url for c in metadata.channels],
        metadata.platforms,
        metadata.custom_metadata or {},
        model_rows(lockfile.package),
    )


def model_rows(packages) -> list[tuple]:
    """Digest rows of the entries conda-lock's parser read back."""
    return [(p.platform, p.manager, p.name, p.version, p.url, p.hash.sha256 or "", p.hash.md5 or "") for p in packages]


def _dict_rows(packages: list[dict]) -> list[tuple]:
    return [
        (
            p["platform"],
            p["manager"],
            p["name"],
            p["version"],
            p["url"],
            p["hash"].get("sha256", ""),
            p["hash"].get("md5", ""),
        )
        for p in packages
    ]


def _inputs_digest(inputs: dict) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def _entry(
    platform: str,
    manager: str,
    name: str,
    version: str,
    url: str,
    *,
    sha256: str,
    md5: str = "",
    dependencies: dict | None = None,
    build: str = "",
) -> dict:
    """One ``package:`` entry of conda-lock's v1 format (the shape its own writer produces)."""
    entry = {
        "name": name,
        "version": version,
        "manager": manager,
        "platform": platform,
        "dependencies": dependencies or {},
        "url": url,
        "hash": {**({"md5": md5} if md5 else {}), "sha256": sha256},
    }
    if build:
        entry["build"] = build
    return entry | {"category": "main", "optional": False}


@record
class Written:
    """The conda-lock.yml ``lock --mode conda`` wrote: one file for every platform."""

    path: str
    platforms: tuple[str, ...]
    packages: int
    sha256: str

    def to_dict(self) -> dict:
        """The ``lock --json`` document (contract): ``{"lock": {path, platforms, packages, sha256}}``."""
        lock = {"path": self.path, "platforms": list(self.platforms), "packages": self.packages, "sha256": self.sha256}
        return {"lock": lock}

    def notes(self) -> list[str]:
        """What ``lock`` shows a person."""
        return [
            f"{self.path}: {self.packages} packages for {', '.join(self.platforms)} (install: tfgpu-install "
            f"create --from-lock {self.path} --name N; conda-lock reads it too)"
        ]


def channel_list(channels, channel_from: str = "--channel") -> list[str]:
    """The channels a conda lock records: ``--channel`` values (conda-forge when none) as URLs,
    each checked to exist and answer where the URL door allows. ``channel_from``: where they came
    from (a flag, a project file's key), for the messages."""
    urls = channel_urls(tuple(channels or ()), channel_from)
    check_channels(urls)
    return urls


def write_lock(targets, output: str | None, *, channels=(), channel_from: str = "--channel", reporter=None) -> Written:
    """``lock --mode conda``: one conda-lock.yml for every ``(platform, resolution, cpu_only)``."""

    urls = channel_list(channels, channel_from)
    runner, uv, _ = tools("lock")
    return write(targets, output, channels=urls, runner=runner, uv=uv, cache=cache_root(), reporter=reporter)


HEADER = """\
# conda-lock.yml written by tfgpu-install {version} (conda-lock's lockfile format, version 1): the same
# environment on every machine. Install it with:
#     tfgpu-install create --from-lock {name} --name ENV   (hashes checked before anything is installed)
#     conda-lock install -n ENV {name}                      (conda-lock reads it too)
# Regenerate it rather than editing it: an edited package entry is refused.
"""


def header(path: Path, channels=()) -> str:
    """:data:`HEADER` for the lock written at ``path``: its name is comment text (tfgpu.doors.quoting), as
    a line break in it would end the comment and a bidirectional control show another line.
    ``channels``: the channels as given; each given with a credential gets a line saying it is
    recorded without it, and where the credential comes from at install time."""

    text = HEADER.format(version=__version__, name=one_line(path.name) or "conda-lock.yml")
    for channel in channels:
        if secrets.forms(channel):
            text += (
                f"# {one_line(secrets.strip(channel))} was given with a credential and is recorded without it;\n"
                + "".join(f"#   {line}\n" for line in _wrapped(secrets.WHERE_FROM))
            )
    return text


def _wrapped(text: str) -> list[str]:
    return textwrap.wrap(text, 96, break_on_hyphens=False, break_long_words=False)


def output_path(output: str | None, base: Path | None = None) -> Path:
    """Where the lock goes: ``-o FILE``, else conda-lock.yml, relative to ``base`` (default: here)."""
    return (base or Path.cwd()) / Path(output or "conda-lock.yml").expanduser()


def write(targets, output: str | None, *, channels: list[str], runner, uv: str, cache: Path, reporter=None) -> Written:
    """Solve every ``(platform, resolution, cpu_only)`` and write one conda-lock.yml; returns what it wrote.

    The file is conda-lock's own v1 format, written directly (importing conda-lock costs ~2 s, which
    would dominate a sub-second lock); the tests read it back with conda-lock's parser and check
    it equals what conda-lock's own models and writer make of the same entries.
    """

    path = output_path(output)
    if path.is_dir():
        raise ImpossibleError(
            "bad-output", f"-o {output} is a directory; give the lock's file name.", [f"-o {path / 'conda-lock.yml'}"]
        )
    output_dir(path.parent, output or str(path))
    packages, content_hash, custom = [], {}, {"tfgpu_format": FORMAT, "tfgpu_tool_version": __version__}
    for platform, resolution, cpu_only in targets:
        try:
            entries, inputs = lock_platform(
                platform, resolution, cpu_only, channels, runner=runner, uv=uv, cache=cache, reporter=reporter
            )
        except BaseException as error:
            runner.record_failure(error)  # the log holds what failed, and the message names the log
            raise
        packages += entries
        content_hash[platform.name] = _inputs_digest(inputs)
        recorded = planned(
            resolution,
            cpu_only=cpu_only,
            requirements=inputs["pip"],
            virtual_cuda=inputs["cuda"],
            conda_specs=inputs["specs"],
        )
        custom[f"tfgpu_resolution.{platform.name}"] = json.dumps(recorded.to_dict(), sort_keys=True)
    recorded_channels = [secrets.strip(c) for c in channels]  # the credential comes from the engine's auth
    custom[DIGEST] = lock_digest(recorded_channels, [p.name for p, _, _ in targets], custom, _dict_rows(packages))
    # No time_metadata (optional in conda-lock's format): the same inputs give the same bytes, and
    # version control already says when a lock changed.
    document = {
        "version": 1,
        "metadata": {
            "content_hash": content_hash,
            "channels": [{"url": c, "used_env_vars": []} for c in recorded_channels],
            "platforms": [p.name for p, _, _ in targets],
            "sources": ["tfgpu-install"],
            "custom_metadata": custom,
        },
        "package": packages,
    }
    write_output(path, header(path, channels) + yaml.safe_dump(document, sort_keys=False, width=120))
    return Written(str(path), tuple(p.name for p, _, _ in targets), len(packages), custom[DIGEST])


_DRIVER_CUDA = object()


def lock_platform(
    platform,
    resolution,
    cpu_only: bool,
    channels: list[str],
    *,
    runner,
    uv: str,
    cache: Path,
    reporter=None,
    cuda=_DRIVER_CUDA,
) -> tuple[list[dict], dict]:
    """One platform's package entries (conda, then pip) and the inputs they were solved from (what
    ``content_hash`` digests). ``cuda``: the ``__cuda`` to solve with (default: the resolution's)."""
    if cuda is _DRIVER_CUDA:
        cuda = None if cpu_only or resolution.accelerator != "cuda" else rattler_engine.virtual_cuda(resolution)
    specs, _ = rattler_engine.conda_specs(resolution, cpu_only=cpu_only)
    if reporter is not None:
        reporter.note(f"solving {platform.name}: {' | '.join(specs)} (__cuda={cuda or 'none'})")
    records = rattler_engine.solve(
        specs,
        channels,
        platform=platform.name,
        cuda=cuda,
        this_host=False,
        repodata_cache=cache / "conda" / "repodata",
        offline=False,
        runner=runner,
    )
    entries = []
    for solved in sorted(records, key=lambda r: r.name.normalized):
        entries.append(
            _entry(
                platform.name,
                "conda",
                solved.name.normalized,
                str(solved.version),
                secrets.strip(str(solved.url)),
                sha256=solved.sha256.hex() if solved.sha256 else "",
                md5=solved.md5.hex() if solved.md5 else "",
                dependencies=_depends(solved.depends),
                build=str(solved.build),
            )
        )
    pip = list(resolution.packages.pip)
    if pip:
        pylock = compile_pylock(pip, platform, resolution.python, runner=runner, uv=uv, cache_dir=cache / "uv")
        for entry in pip_entries(pylock, platform, resolution.python):
            entries.append(
                _entry(
                    platform.name,
                    "pip",
                    entry["name"],
                    entry["version"],
                    secrets.strip(entry["url"]),
                    sha256=entry["sha256"],
                )
            )
    inputs = {
        "format": FORMAT,
        "specs": specs,
        "pip": pip,
        "channels": [secrets.strip(c) for c in channels],
        "cuda": cuda,
        "glibc": rattler_engine.GLIBC if platform.name.startswith("linux") else None,
    }
    return entries, inputs


def inputs_digest(inputs: dict) -> str:
    """``content_hash`` of one platform's inputs."""
    return _inputs_digest(inputs)


def _depends(depends: list[str]) -> dict[str, str]:
    found = {}
    for spec in depends:
        name, _, rest = spec.partition(" ")
        found[name] = rest.strip() or "*"
    return found
