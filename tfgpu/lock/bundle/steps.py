"""Building offline bundles, the steps every bundle shares: the directory (resumable, refusing a
foreign one), wheels collected sha256-checked, tfgpu-install's own wheels, the README and
``install.sh``, and the summary a build returns. A bundle holds a lock, every package it names and
the tool, so a machine with Python and no network builds the same environment; the pip bundle is
``pip_bundle.py``'s, the conda bundle ``conda_bundle.py``'s.

Layout of a pip bundle (contract)::

    DIR/bundle.json                 manifest: format, resolution, every file's sha256 and size
    DIR/tfgpu-lock.<platform>.txt   the lock (hashes required), DIR/pylock.<platform>.toml beside it
    DIR/wheels/                     every wheel the lock names, for that platform and Python
    DIR/tool/                       tfgpu-install's wheel and its dependencies' wheels
    DIR/README.md, DIR/install.sh   what it is; ``./install.sh PREFIX`` installs it

Downloads go through ``tfgpu.engines.download.fetch`` (resumable, hash-checked), so running the same
``bundle`` command again after a broken transfer continues where it stopped. Wheels already on
this machine are reused from the directories in ``TFGPU_WHEEL_DIRS`` (matched by file name,
then checked against the lock's sha256). ``TFGPU_BUNDLE_TOOL=0`` leaves the tool's wheels out
(``install.sh`` then uses a ``tfgpu-install`` on PATH).
"""

from __future__ import annotations

import contextlib
import contextvars
import fcntl
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from tfgpu import __version__
from tfgpu.doors import trees, untrusted, urls
from tfgpu.doors.paths import output_dir, user_path, write_output
from tfgpu.doors.requirements import canonical
from tfgpu.engines.download import fetch
from tfgpu.errors import ImpossibleError, OperationError, UsageError
from tfgpu.lock.bundle.files import install_script, tool_wheel
from tfgpu.lock.platforms import Platform
from tfgpu.lock.resolving import compile_pins
from tfgpu.lock.tools import tools
from tfgpu.progress import Combined
from tfgpu.records import record

_DIRECTORY = untrusted.Kind("the bundle directory", 0, None, links=False)
MANIFEST = "bundle.json"
PARTIAL = ".tfgpu-bundle-partial"
FORMAT = 1


@record
class Built:
    """A bundle built: where, for what, and how big. ``conda_packages`` is None for a pip bundle."""

    bundle: str
    mode: str
    platform: str
    tensorflow: str
    python: str
    files: int
    wheels: int
    tool_wheels: int
    bytes: int
    conda_packages: int | None = None

    @property
    def mb(self) -> float:
        return round(self.bytes / 1e6, 1)

    def to_dict(self) -> dict:
        """The ``bundle --json`` document (contract; a conda bundle's also names its mode and its
        conda packages)."""
        conda = self.conda_packages is not None
        return (
            {"bundle": self.bundle}
            | ({"mode": self.mode} if conda else {})
            | {"platform": self.platform, "tensorflow": self.tensorflow, "python": self.python, "files": self.files}
            | ({"conda_packages": self.conda_packages} if conda else {})
            | {"wheels": self.wheels, "tool_wheels": self.tool_wheels, "bytes": self.bytes, "mb": self.mb}
        )


@record
class Wheel:
    """One wheel a bundle needs: where it comes from and what it must hash to."""

    filename: str
    url: str
    sha256: str
    size: int


def wheels_from_pylock(text: str, platform: Platform, python: str) -> list[Wheel]:
    """The best wheel of every package of a PEP 751 lock for ``platform``/``python``."""
    chosen = []
    for package in untrusted.parse_toml(text, untrusted.PIP_LOCK, "pylock.toml").get("packages", []):
        ranked = []
        for entry in package.get("wheels", []):
            url = entry.get("url") or entry.get("path", "")
            filename = entry.get("name") or urls.filename(url)
            rank = platform.wheel_rank(filename, python)
            if rank is not None and entry.get("hashes", {}).get("sha256"):
                ranked.append((rank, Wheel(filename, url, entry["hashes"]["sha256"], int(entry.get("size") or 0))))
        if not ranked:
            raise ImpossibleError(
                "no-wheel-for-platform",
                f"{package['name']} {package.get('version', '')} has no wheel for {platform.name} "
                f"with Python {python}, so it cannot go into an offline bundle.",
                ["Choose another --python, or lock instead (`tfgpu-install lock`) and install with network."],
            )
        chosen.append(min(ranked, key=lambda item: item[0])[1])
    return chosen


_HELD: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("tfgpu_bundle_dirs_held", default=None)
"""The bundle directories this build holds locked (their descriptors), let go by :func:`one_writer`."""


@contextlib.contextmanager
def one_writer() -> Iterator[None]:
    """Around a bundle build: the lock :func:`prepare_dir` takes on ``-o DIR`` is held until the
    build ends, so a second ``bundle`` into the same directory is refused (``bundle-busy``) rather
    than both downloading into the same ``.part`` files."""
    held: list[int] = []
    token = _HELD.set(held)
    try:
        yield
    finally:
        _HELD.reset(token)
        for fd in held:
            os.close(fd)


def _hold(out: Path) -> None:
    """Lock the directory ``out`` itself (``flock`` on it: nothing is added to the bundle) for this build."""
    held = _HELD.get()
    if held is None:
        raise RuntimeError("a bundle directory is prepared only inside steps.one_writer()")
    try:
        fd = untrusted.open_directory(out, _DIRECTORY)
    except untrusted.Unreadable as error:
        raise ImpossibleError(
            "bad-output", f"-o {out}: {error.reason}", ["Give a new or empty directory with -o."]
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise OperationError(
            "bundle-busy",
            f"Another tfgpu-install bundle is writing into {out} right now; nothing was written.",
            ["Wait for it to finish (running the same command again then resumes or confirms it), or give another -o."],
        ) from None
    held.append(fd)


def prepare_dir(out: Path) -> None:
    """Make ``out`` a bundle directory in progress (refusing a foreign, non-empty one, and one another
    run is writing into)."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise ImpossibleError(
            "bad-output",
            f"-o {out}: that path exists and is not a directory (a bundle is a "
            "directory of files); it is left untouched.",
            ["Give a new or empty directory with -o."],
        )
    output_dir(out, str(out))
    _hold(out)  # before it is looked at: a run in progress has files there that are not yet a bundle
    if out.exists() and any(out.iterdir()) and not (out / PARTIAL).exists() and not _ours(out / MANIFEST):
        raise ImpossibleError(
            "target-not-empty",
            f"{out} is not empty and is not a tfgpu-install bundle; it is left untouched.",
            ["Give a new or empty directory with -o."],
        )
    _refuse_links(out)
    trees.unlink(out / MANIFEST)  # rewritten last: a bundle without it is incomplete
    write_output(out / PARTIAL, "tfgpu-install bundle in progress; run the same command again to resume.\n")


_EARLIER = untrusted.Kind("an earlier bundle's bundle.json", 64 * 1024 * 1024, None, links=False)


def _ours(manifest: Path) -> bool:
    """Whether ``manifest`` is the record an earlier bundle wrote: a file of the user's that happens
    to be named ``bundle.json`` (a web project's, say) does not make the directory a bundle, whose
    README.md and install.sh a run would replace."""
    found = untrusted.json_or_none(manifest, _EARLIER)
    return isinstance(found, dict) and found.get("tool") == "tfgpu-install" and isinstance(found.get("files"), dict)


def _refuse_links(out: Path) -> None:
    """A bundle holds real files and directories only (wheels reused from elsewhere are hard links).
    A symbolic link in a bundle being resumed, planted or left by hand, would carry the wheels or the
    installer somewhere else, or put another file into the bundle's manifest."""
    for root, _, _, links in trees.walk(out):  # no recursion on depth
        for name in links:
            path = Path(root) / name
            try:
                to = f" (to {os.readlink(path)})"
            except OSError:
                to = ""  # deeper than a path may name: the link is named without its target
            raise ImpossibleError(
                "bad-output",
                f"-o {out}: {path} is a symbolic link{to}; "
                "a bundle holds real files only, so nothing more was written.",
                ["Give a new or empty directory with -o, or remove the link."],
            )


def collect(wheels: list[Wheel], dest: Path, reporter) -> None:
    """Every wheel of ``wheels`` in ``dest``, sha256-checked (reused from ``TFGPU_WHEEL_DIRS`` first)."""

    reuse = [
        Path(user_path(d, "TFGPU_WHEEL_DIRS")) for d in os.environ.get("TFGPU_WHEEL_DIRS", "").split(os.pathsep) if d
    ]
    dest.mkdir(parents=True, exist_ok=True)
    # One transfer for all the wheels (their sizes come from the lock; a conda lock's pip part has
    # none, and then only the bytes so far are known), not one line per file.
    sizes = [wheel.size for wheel in wheels]
    combined = Combined(reporter, f"{len(wheels)} wheels", sum(sizes) if all(sizes) else None) if reporter else None
    for wheel in wheels:
        target = dest / wheel.filename
        for directory in reuse:
            candidate = directory / wheel.filename
            if (
                not target.exists()
                and candidate.is_file()
                and (not wheel.size or candidate.stat().st_size == wheel.size)
            ):
                try:
                    trees.hard_link(os.path.realpath(candidate), target)  # the wheel a link leads to
                except OSError:
                    shutil.copy2(candidate, target)
        got = fetch(wheel.url, dest, sha256=wheel.sha256, size=wheel.size, reporter=combined)
        trees.unlink(got.with_name(got.name + ".verified"))
        if got != target:  # a percent-encoded URL name: keep the wheel's real file name
            trees.replace(got, target)
        if combined is not None:
            combined.next_file(target.stat().st_size)


def add_tool(dest: Path, platform: Platform, python: str, *, reporter=None) -> list[str]:
    """tfgpu-install's wheel and its dependencies' wheels for ``platform``/``python`` in ``dest``;
    returns their file names (``pip install --no-index --find-links dest tfgpu-install`` then works)."""
    runner, uv, cache = tools("bundle-tool")
    own, requires = tool_wheel(dest, runner=runner, uv=uv, cache_dir=cache)
    requires = [canonical(text, what=f"{own}'s Requires-Dist", markers=True) for text in requires]
    _, tool_pylock = compile_pins(requires, platform, python, runner=runner, uv=uv, cache_dir=cache, only_binary=True)
    deps = wheels_from_pylock(tool_pylock, platform, python)
    collect(deps, dest, reporter)
    return [own.name, *(w.filename for w in deps)]


def start(resolution, platform: Platform, out: Path, reporter):
    """What every bundle build begins with: a Linux GPU target, the tools, ``out`` ready for
    (resumed) writing; returns (runner, uv, uv cache dir, a note function)."""
    if platform.os != "linux" or resolution.accelerator != "cuda":
        raise UsageError(
            "bundle-platform",
            f"Bundles build GPU environments for Linux; {platform.name} is not one.",
            ["Use --platform linux-64; for other platforms write a lock (`tfgpu-install lock`)."],
        )
    runner, uv, cache = tools("bundle")
    prepare_dir(out.absolute())
    return runner, uv, cache, (reporter.note if reporter is not None else (lambda message: None))


def add_tool_and_installer(out: Path, resolution, platform: Platform, readme_text: str, say, reporter) -> list[str]:
    """What every bundle ends with: the tool's own wheels (unless ``TFGPU_BUNDLE_TOOL=0``), its
    README and ``install.sh``; returns the tool's wheel file names."""
    tool_files: list[str] = []
    if os.environ.get("TFGPU_BUNDLE_TOOL", "1") != "0":
        say("adding tfgpu-install's own wheel and its dependencies")
        tool_files = add_tool(out / "tool", platform, resolution.python, reporter=reporter)
    write_output(out / "README.md", readme_text)
    write_output(
        out / "install.sh", install_script(resolution.python, __version__, resolution.tensorflow, platform.name), 0o755
    )
    return tool_files
