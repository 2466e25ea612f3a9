"""The project's one error family.

Library code raises a :class:`TfgpuError` subclass; only ``cli.main`` catches it, renders it and
turns it into an exit code. Unexpected exceptions are not caught and keep their traceback.
"""

from __future__ import annotations

from tfgpu.records import factory, record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import ClassVar


@record(frozen=False)
class TfgpuError(Exception):
    """A failure the user can act on.

    ``code`` is a stable string that scripts may match on (``CODES`` below; docs/exit-codes.md);
    ``message`` says what was asked, what was found and why it cannot work; ``alternatives``
    are concrete ways forward, one sentence each.
    """

    code: str
    message: str
    alternatives: list[str] = factory(list)
    details: dict | None = None
    """Machine-readable context (e.g. the verify report), added to the ``--json`` document."""

    exit_code: ClassVar[int] = 1

    def __post_init__(self) -> None:
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message

    def to_dict(self) -> dict:
        """The ``{"error": ...}`` document printed by ``--json``."""
        document = {
            "error": {
                "code": self.code,
                "message": self.message,
                "alternatives": list(self.alternatives),
                "exit_code": self.exit_code,
            }
        }
        if self.details is not None:
            document["details"] = self.details
        return document


class UsageError(TfgpuError):
    """Malformed input: an unparseable version, an unknown flag, conflicting options (exit 2)."""

    exit_code: ClassVar[int] = 2


class ImpossibleError(TfgpuError):
    """Well-formed but impossible: no such release, no compatible combination (exit 3)."""

    exit_code: ClassVar[int] = 3


class OperationError(TfgpuError):
    """The operation itself failed, or is not available yet (exit 1)."""

    exit_code: ClassVar[int] = 1


class CommandNotFoundError(TfgpuError):
    """The command to run in an env is not there (exit 127, what a shell answers)."""

    exit_code: ClassVar[int] = 127


# The registry: every code the tool raises, its class (which fixes the exit status) and what it
# means. Scripts match on the code and the exit status, so `tests/test_error_codes.py` fails when
# a raised code is missing here or is raised with another class; `scripts/gen_docs.py` writes
# docs/exit-codes.md from it.
CODES: dict[str, tuple[type[TfgpuError], str]] = {
    # exit 1: the operation failed
    "install-failed": (OperationError, "The installer (uv, pip or rattler) failed; its log is named."),
    "files-owned-twice": (
        OperationError,
        "After the install, two distributions own the same file with different bytes (two CUDA stacks); "
        "the build is rolled back.",
    ),
    "gpu-required": (
        OperationError,
        "`--require-gpu` on a machine with no NVIDIA driver: the env is built, its GPU could not be checked.",
    ),
    "cache-busy": (OperationError, "`cache prune|clean` while a create, repair or remove holds an env's lock."),
    "cache-overlap": (
        ImpossibleError,
        "`cache prune|clean` where a kind of cache holds an env, the envs or data directory, the working "
        "directory or home, or lies inside one of them; nothing is removed.",
    ),
    "undo-failed": (OperationError, "`repair --undo` could not put a changed env back as it was."),
    "disk-full": (
        OperationError,
        "Writing a lock, bundle, export or the tool's record failed: no space or quota left; the file "
        "already there is kept.",
    ),
    "write-failed": (
        OperationError,
        "Writing a lock, bundle, export or the tool's record failed: a read-only file system or a refused "
        "permission; the file already there is kept.",
    ),
    "bundle-busy": (OperationError, "Another `bundle` run is writing into the same `-o DIR`; nothing was written."),
    "output-busy": (
        OperationError,
        "Another `script` run kept writing into the same `-o DIR` for a minute; nothing was written.",
    ),
    "target-busy": (OperationError, "Another tfgpu-install run holds the target's lock."),
    "env-in-use": (
        OperationError,
        "`remove` of an env a `run` or `shell` is using (their pids are named); nothing was removed.",
    ),
    "hold-not-a-file": (
        OperationError,
        "`run`, `shell` or `remove` found a symlink, directory or FIFO where the env's in-use file goes.",
    ),
    "env-busy": (OperationError, "`run` or `shell` of an env another tfgpu-install is removing right now."),
    "update-failed": (OperationError, "`update-data` got an answer it cannot use (shape, deadline); nothing written."),
    "update-incomplete": (
        OperationError,
        "`update-data` kept the releases it read, but some request failed; run it again to resume.",
    ),
    "offline-no-cache": (OperationError, "`--offline` and no cached answer or package for what was asked."),
    "data-overlay-corrupt": (OperationError, "The user data overlay (tensorflow-updates.toml) does not load."),
    "download-failed": (OperationError, "A download ended early or with an HTTP error."),
    "download-unreachable": (OperationError, "A download's host cannot be reached."),
    "channel-unreachable": (OperationError, "A conda channel cannot be reached."),
    "lock-failed": (OperationError, "Resolving the lock failed (uv's or rattler's answer is shown)."),
    "bundle-tool-wheel": (OperationError, "The bundle cannot build or find tfgpu-install's own wheel."),
    "multiworker-failed": (OperationError, "`verify --workers N`: the MultiWorkerMirroredStrategy step failed."),
    "frameworks-failed": (
        OperationError,
        "`verify --with torch|jax`: TensorFlow and the other framework did not both compute on the GPU in every import order.",
    ),
    "checksum-mismatch": (OperationError, "A downloaded file's SHA-256 is not the one recorded."),
    "cudnn-archive-corrupt": (OperationError, "The cuDNN archive does not unpack."),
    "cudnn-archive-empty": (OperationError, "The cuDNN archive holds no libraries."),
    "cudnn-archive-unsafe": (OperationError, "The cuDNN archive has a member that would land outside its directory."),
    "download-too-large": (OperationError, "A download is larger than its bound; it was stopped."),
    "lock-has-local-paths": (OperationError, "The resolution took a local file; a lock for a team cannot name it."),
    "offline-download-missing": (OperationError, "`--offline` and a system-mode download is not in the cache."),
    "remove-failed": (OperationError, "`remove` could not delete everything it made."),
    "env-write-failed": (OperationError, "Writing a file into the env failed (disk full, permissions)."),
    "runfile-failed": (OperationError, "NVIDIA's CUDA runfile installer failed (system mode)."),
    "size-mismatch": (OperationError, "A downloaded file's size is not the one recorded."),
    "toolkit-incomplete": (OperationError, "The installed CUDA toolkit lacks a library TensorFlow loads."),
    "update-not-written": (OperationError, "`update-data` built new rows but could not write them."),
    "verify-crashed": (OperationError, "The GPU check's child process died without a report."),
    "verify-timeout": (OperationError, "The GPU check did not finish within its time."),
    "engine-crashed": (OperationError, "The conda engine (rattler) failed unexpectedly."),
    "index-failed": (OperationError, "A package index or channel answered with an error."),
    "activation-failed": (OperationError, "The env's own activation script failed when `run`/`shell` ran it."),
    "command-not-started": (
        OperationError,
        "`run`: the command was found but could not be started (permissions, format).",
    ),
    # exit 2: malformed input
    "bad-arguments": (UsageError, "An option argparse rejects, or one a command does not take."),
    "missing-command": (UsageError, "No command and no `--tf`."),
    "bad-tf-spec": (UsageError, "`--tf` is not a version, a series, `latest` or a PEP 440 range."),
    "bad-driver-version": (UsageError, "`--driver` is not a driver version (e.g. 535.104.05)."),
    "bad-python-version": (UsageError, "`--python` is not a Python version (e.g. 3.11)."),
    "bad-compute-capability": (UsageError, "`--gpu-cc` is not a compute capability (e.g. 8.6)."),
    "bad-option-value": (UsageError, "An option's value is not one it accepts."),
    "bad-env-name": (UsageError, "`--name` is empty or not a plain directory name."),
    "bad-prefix": (UsageError, "A prefix is empty, relative, or holds characters activation scripts cannot carry."),
    "bad-path": (UsageError, "A path no file system can hold (a NUL byte, too long)."),
    "bad-data": (UsageError, "A data table (shipped or from the TFGPU_DATA_DIR overlay) does not parse."),
    "bad-requirement": (UsageError, "A requirement is not PEP 508."),
    "bad-project-file": (UsageError, "tfgpu.toml or [tool.tfgpu] has an unknown key or a bad value."),
    "lock-has-options": (
        UsageError,
        "A lock entry is not a plain pin with hashes (an option, a URL, an index that is not HTTPS).",
    ),
    "lock-platform-ambiguous": (UsageError, "The lock holds several platforms; `--platform` says which one to export."),
    "lock-modified": (UsageError, "The lock was edited after it was written (its recorded checksum differs)."),
    "lock-url-outside-channel": (
        UsageError,
        "A conda lock's package URL lies outside every channel it records (same host, channel path, /<subdir>/).",
    ),
    "secret-in-lock": (
        UsageError,
        "A lock holds a credential in a URL (/t/<token>/, user:password@, ?token=); regenerate it.",
    ),
    "secret-in-url": (
        UsageError,
        "A URL the tool would record (TFGPU_INDEX_URL for a lock) carries a credential; ~/.netrc holds it instead.",
    ),
    "secret-in-output": (
        UsageError,
        "A file the tool would write (lock, export, bundle) would hold a credential; nothing was written.",
    ),
    "conflicting-options": (UsageError, "Two options that cannot be given together."),
    "unknown-command": (UsageError, "The first word is not a tfgpu-install command."),
    "missing-location": (UsageError, "No `--name`/`--prefix` and no active env."),
    "ambiguous-env-name": (UsageError, "`--name` is found in two envs directories; say which with `--prefix`."),
    "missing-output": (UsageError, "A command that writes a file was given no `--output`."),
    "repair-needs-yes": (UsageError, "`repair` would change an env and no terminal can ask: give `--yes`."),
    "bad-find-links": (UsageError, "`--find-links` is not a directory or URL."),
    "bad-log-file": (UsageError, "`doctor --log` is not a readable regular file."),
    "bad-platform": (UsageError, "`--platform` is not a platform (linux-64, linux-aarch64, ...)."),
    "bundle-platform": (UsageError, "Bundles build Linux GPU envs; the platform given is not Linux."),
    "lock-malformed": (UsageError, "The lock file is not a lock of the format it claims."),
    "lock-unreadable": (UsageError, "The lock file cannot be read."),
    "mode-not-bundlable": (UsageError, "System mode cannot be bundled."),
    "mode-not-lockable": (UsageError, "System mode cannot be locked."),
    "insecure-url": (UsageError, "Plain HTTP to a host not named with `--insecure-host`."),
    "bad-url": (UsageError, "A malformed URL."),
    "bad-channel": (UsageError, "A conda channel that is neither a name nor a URL."),
    "export-local-channel": (UsageError, "An export names a local channel, which the target machine does not have."),
    "bad-uv-cache": (UsageError, "`TFGPU_UV_CACHE` is not one of own, user, auto."),
    "no-command-to-run": (UsageError, "`run` was given no command after `--`."),
    "unknown-shell": (UsageError, "`activate`: the shell (`--shell`, else `$SHELL`) is not bash, zsh or fish."),
    # exit 3: well-formed but impossible
    "unknown-tf-version": (ImpossibleError, "No such TensorFlow release in the data (`update-data` fetches newer)."),
    "windows-native-gpu-unsupported": (ImpossibleError, "Native Windows has no GPU TensorFlow after 2.10: WSL2."),
    "no-gpu-build": (ImpossibleError, "The release has no GPU build for this OS and arch."),
    "driver-too-old": (ImpossibleError, "The driver is older than the release's CUDA needs."),
    "gpu-too-old": (ImpossibleError, "The GPU's compute capability is below the release's minimum."),
    "gpu-arch-unsupported": (ImpossibleError, "The release carries neither SASS nor PTX this GPU can run."),
    "gpu-arch-cannot-run": (
        ImpossibleError,
        "The sources say the release cannot run on the GPU's architecture (kernels or XLA); "
        "--allow-unsupported-gpu proceeds anyway.",
    ),
    "python-unsupported": (ImpossibleError, "The release has no wheel for this Python."),
    "glibc-too-old": (ImpossibleError, "The host's glibc is older than the wheels need."),
    "no-pip-cuda-wheels": (ImpossibleError, "No NVIDIA pip wheels exist for this release's CUDA (pip mode)."),
    "no-conda-cuda-packages": (ImpossibleError, "conda-forge has no CUDA packages for this release's CUDA."),
    "mode-unsupported": (ImpossibleError, "The mode cannot build this release on this target."),
    "no-runfile": (ImpossibleError, "NVIDIA publishes no CUDA runfile for this target (system mode)."),
    "no-such-env": (ImpossibleError, "`--name` is in none of the envs directories; they are named."),
    "not-an-env": (ImpossibleError, "The path is not a Python environment."),
    "cpu-only-build": (ImpossibleError, "The env's TensorFlow is a CPU-only build; repair cannot give it a GPU."),
    "not-an-env-prefix": (ImpossibleError, "`repair`: the path is neither a venv nor a conda prefix."),
    "externally-managed": (ImpossibleError, "`repair`: the env is a system Python (PEP 668); it is not changed."),
    "no-tensorflow": (ImpossibleError, "`repair`: the env has no TensorFlow."),
    "repair-needs-changes": (ImpossibleError, "The fix changes installed packages: `--allow-changes` permits it."),
    "repair-conflict": (ImpossibleError, "The fix conflicts with the env's other requirements."),
    "repair-journal-foreign": (ImpossibleError, "The repair journal cannot be read (not a file, damaged, too large)."),
    "repair-path-outside": (ImpossibleError, "A write would land outside the env; nothing was written."),
    "env-path-blocked": (
        ImpossibleError,
        "A path the tool writes in the env is taken by a directory or something else.",
    ),
    "nothing-to-undo": (ImpossibleError, "`repair --undo` and no journal."),
    "bad-output": (ImpossibleError, "The `--output` directory cannot be created."),
    "output-not-ours": (
        ImpossibleError,
        "`script -o DIR` would replace files tfgpu-install did not write there (or that were changed "
        "since); nothing is written unless `--force`. `lock`: the `pylock.<platform>.toml` beside the lock "
        "is the user's or another lock's.",
    ),
    "bundle-corrupt": (ImpossibleError, "A bundle file's hash is not the manifest's."),
    "bundle-format-unsupported": (ImpossibleError, "The bundle was written by a newer format."),
    "bundle-incomplete": (ImpossibleError, "A file the bundle's manifest lists is missing."),
    "driver-missing": (ImpossibleError, "System mode needs a driver and none is installed."),
    "engine-cannot-install-lock": (ImpossibleError, "The chosen engine cannot install this lock."),
    "engine-not-found": (ImpossibleError, "The chosen engine (conda, mamba, micromamba) is not on PATH."),
    "env-exists": (ImpossibleError, "The env exists; `--force` replaces it."),
    "export-unsupported": (ImpossibleError, "The export builds Linux CUDA envs; the plan is for another OS."),
    "foreign-leftover": (
        ImpossibleError,
        "The target looks like an unfinished env, but nothing proves this tool made it.",
    ),
    "jupyter-dir-unusable": (ImpossibleError, "The Jupyter kernels directory cannot be written."),
    "two-cuda-stacks": (
        ImpossibleError,
        "Two CUDA stacks whose wheels own the same files, where the tool cannot keep them apart (neither is "
        "TensorFlow's, conda mode, a repair); nothing is changed.",
    ),
    "lock-corrupt": (ImpossibleError, "The lock does not parse as its format."),
    "lock-cpu-only": (ImpossibleError, "The lock holds a CPU-only environment; the tool builds GPU environments."),
    "lock-format-unsupported": (ImpossibleError, "The lock's format version is not one this tool reads."),
    "lock-hash-mismatch": (ImpossibleError, "A package's hash is not the lock's."),
    "lock-unsatisfiable": (ImpossibleError, "No set of packages satisfies the lock's request."),
    "lock-wrong-platform": (ImpossibleError, "The lock is for another platform."),
    "locked-package-missing": (ImpossibleError, "A locked package is no longer on the index or channel."),
    "mode-unsupported-here": (ImpossibleError, "Conda envs are built for Linux and WSL2; the plan is for another OS."),
    "needs-root": (ImpossibleError, "System mode writes the CUDA toolkit and /etc files: run as root."),
    "no-conda-forge-build": (ImpossibleError, "conda-forge has no CUDA build of this release (`--tf-source`)."),
    "no-cudnn-archive": (ImpossibleError, "NVIDIA publishes no cuDNN archive for this target."),
    "no-docker-image": (ImpossibleError, "No nvidia/cuda image matches this resolution."),
    "no-wheel-for-platform": (ImpossibleError, "A locked package has no wheel for the bundle's platform."),
    "not-a-python": (ImpossibleError, "`--interpreter` is not a Python interpreter."),
    "not-a-tfgpu-env": (ImpossibleError, "`remove`: the env was not made by tfgpu-install."),
    "platform-not-in-lock": (ImpossibleError, "The lock has no entry for this platform."),
    "prefix-is-symlink": (ImpossibleError, "The prefix is a symbolic link."),
    "python-not-found": (ImpossibleError, "No interpreter of the asked version is found."),
    "target-not-a-directory": (ImpossibleError, "The prefix exists and is not a directory."),
    "target-not-empty": (ImpossibleError, "The prefix holds files that are not an env this tool made."),
    "target-not-writable": (ImpossibleError, "The prefix's parent cannot be written."),
    "toolkit-differs": (ImpossibleError, "System mode: a different CUDA toolkit is installed there."),
    "toolkit-exists": (
        ImpossibleError,
        "System mode: the toolkit's directory exists and this tool cannot prove it made it.",
    ),
    "unknown-channel": (ImpossibleError, "A local conda channel that does not exist."),
    "unsolvable": (ImpossibleError, "The conda solver found no solution."),
    "unverified-download": (ImpossibleError, "The data records no checksum for a download, so it is not installed."),
    "unverified-package": (ImpossibleError, "A conda package's hash is not recorded."),
    "uv-missing": (ImpossibleError, "uv is not installed."),
    "env-has-mount": (ImpossibleError, "The env holds a mount point; it is not deleted across it."),
    "cache-not-ours": (
        ImpossibleError,
        "The cache root holds names tfgpu-install never writes; nothing is removed there.",
    ),
    "companion-unsupported": (
        UsageError,
        "`--with` names something other than torch or jax (or an extra other than jax's cuda12/cuda13).",
    ),
    "companion-unknown-version": (ImpossibleError, "`--with`: no torch or jax release in the data matches the spec."),
    "companion-conflict": (
        ImpossibleError,
        "`--with`: TensorFlow and the companion cannot share an env (nvidia-* pins, Python or numpy conflict).",
    ),
    "companion-cannot-run": (
        ImpossibleError,
        "`--with`: no companion version the spec admits runs on the target's driver or GPU (its CUDA build, its GPU code).",
    ),
    "companion-two-stacks": (
        ImpossibleError,
        "`--with`: the only plan puts two CUDA stacks into one env; this command does not build such an env.",
    ),
    "cache-unreadable": (ImpossibleError, "The cache root cannot be read (permissions, not a directory)."),
    "not-activatable": (ImpossibleError, "The env has no activation this tool can run (or its path cannot be quoted)."),
    # exit 127: what a shell answers for a command it cannot find
    "command-not-found": (CommandNotFoundError, "`run`: the command is not on the activated env's PATH."),
}

VERIFY_CODES: dict[str, str] = {
    "no-driver": "libcuda.so.1 cannot be loaded: no NVIDIA driver.",
    "driver-too-old": "The driver's CUDA is older than the one TensorFlow was built with.",
    "cuda-init-failed": "The driver loads but CUDA does not initialise.",
    "library-not-loadable": "A CUDA library in the env does not load.",
    "no-gpu-registered": "TensorFlow registered no GPU; its log says why.",
    "gpu-op-failed": "A matmul on a GPU disagrees with the CPU's.",
    "cpu-only-build": "The TensorFlow wheel is not a CUDA build.",
    "tensorflow-import-failed": "`import tensorflow` failed.",
    "no-gpu": "The check listed no GPU and gave no other cause.",
}
"""The codes of a failed GPU check (``verify``, and ``create``/``repair`` when they check): always
exit 1 (``OperationError``), the code read from the check's report."""
