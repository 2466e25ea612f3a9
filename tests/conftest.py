"""Shared fixtures: an isolated tool environment and a local wheelhouse."""

from __future__ import annotations

import atexit
import fcntl
import gc
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import toolbytecode
import wheelhouse

# Where the suite keeps what is worth keeping between runs (docs/maintainers/tests.md): one directory,
# TFGPU_TEST_CACHE, default ~/.cache/tfgpu-install-tests. It holds the uv cache of the network tests
# (real TensorFlow and CUDA wheels from PyPI), the tool's own cache for tests that do not set one,
# and the tensorflow-cpu env of the benchmark test. Everything else lives in pytest's temporary
# directories (tmp_path; kept only for a run with a failure, see pyproject.toml) or in this
# session's directory below, deleted when the run ends.
TEST_CACHE = Path(os.environ.get("TFGPU_TEST_CACHE") or Path.home() / ".cache" / "tfgpu-install-tests")


# A worker holds about 600,000 objects once every test module, the tool and py-rattler are imported,
# and each of CPython's full collections walks them all again: 37 of them, 7.5 of the fast tier's
# CPU-seconds, measured with gc.callbacks. What survives a full collection lives as long as the
# worker (modules, session fixtures), so it is frozen there and later full collections walk only
# what came after (0.6 CPU-seconds). A cycle among frozen objects that dies later is not reclaimed:
# a worker's memory, for a process that ends with the run. (The tool does the same for its own
# start-up: tfgpu.cli._started.)
def _freeze_survivors(phase: str, info: dict) -> None:
    if phase == "stop" and info["generation"] == 2:
        gc.freeze()


gc.callbacks.append(_freeze_survivors)


def suite_cache(*parts: str) -> Path:
    """A directory under TFGPU_TEST_CACHE (created)."""
    path = TEST_CACHE.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


_SESSION = Path(tempfile.mkdtemp(prefix="tfgpu-tests-"))
atexit.register(shutil.rmtree, _SESSION, True)
# The user's own tfgpu-install directories are never touched: every plan reads the release rows
# `update-data` stored in the user's data dir, and a test that names no cache, log or envs directory
# gets these (subprocesses inherit them), whatever the shell that runs pytest exported.
os.environ["TFGPU_USER_DATA_DIR"] = str(_SESSION / "user-data")
os.environ["TFGPU_CACHE_DIR"] = str(suite_cache("tool-cache"))
# uv's package cache: the tool's own (under TFGPU_CACHE_DIR), never the user's, which it would
# otherwise reuse; tests/test_cache.py sets it back to `auto` where the reuse is the subject.
os.environ["TFGPU_UV_CACHE"] = "own"
os.environ["TFGPU_LOG_DIR"] = str(_SESSION / "logs")
os.environ["TFGPU_ENVS_DIR"] = str(_SESSION / "envs")
# pip's downloads for the tests that run pip (the installed-tool bundle test, stock pip on a real lock).
os.environ["PIP_CACHE_DIR"] = str(suite_cache("pip"))
# Every uv and pip a test starts itself (a user's venv made for repair, a lock compiled by hand) and
# every program that keeps a cache or data of its own: the suite's places, never the user's, even
# where the user's shell names its own (UV_CACHE_DIR exported, say). Without this, uv put the
# suite's stand-in wheels (a fake tensorflow among them) into ~/.cache/uv and its credentials lock
# into ~/.local/share/uv. A test that sets its own keeps it (monkeypatch, or an env it passes).
# tests/test_test_command.py runs the heaviest files with a home of their own and finds it unchanged.
_USER_PYTHONS = os.environ.get("UV_PYTHON_INSTALL_DIR") or str(
    Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "uv" / "python"
)
os.environ["UV_CACHE_DIR"] = str(_SESSION / "uv-cache")
os.environ["XDG_CACHE_HOME"] = str(_SESSION / "xdg-cache")
os.environ["XDG_DATA_HOME"] = str(_SESSION / "xdg-data")
os.environ["XDG_STATE_HOME"] = str(_SESSION / "xdg-state")
os.environ["JUPYTER_DATA_DIR"] = str(_SESSION / "jupyter")
# The Pythons uv installed for the user stay findable (a test asking for 3.12 finds the same one);
# nothing installs one there: the tool passes --no-python-downloads, and so does this.
os.environ.setdefault("UV_PYTHON_INSTALL_DIR", _USER_PYTHONS)
os.environ["UV_PYTHON_DOWNLOADS"] = "never"
# Nor a tfgpu.toml above the directory the tests run in (tests/test_project_file.py sets its own).
os.environ.setdefault("TFGPU_PROJECT_FILE", "none")
# The suite's servers (an index, a channel, a fake NVIDIA) answer plain HTTP on loopback, which the
# tool reaches only when the host is named (docs/safety.md): the suite names it, as a user would.
LOOPBACK_HOSTS = "127.0.0.1,localhost"
os.environ.setdefault("TFGPU_INSECURE_HOSTS", LOOPBACK_HOSTS)
# verify, doctor and repair take the active env when none is named (tfgpu.envs.which): the suite runs
# as from a shell with none active, whichever venv or conda env runs pytest; a test that wants one
# active sets VIRTUAL_ENV or CONDA_PREFIX itself.
for _active in ("VIRTUAL_ENV", "CONDA_PREFIX"):
    os.environ.pop(_active, None)


GB = 1_000_000_000
NETWORK_CACHE_GB = 20
"""What a cold network tier leaves in TFGPU_TEST_CACHE (docs/maintainers/tests.md, "Cost"): real
TensorFlow 2.21, 2.16.1 and 2.13 with their CUDA wheels, in uv's cache, unpacked."""
NETWORK_TEMP_GB = 5
"""What the envs those tests build from it take in temporary directories while they run (about
25 GB in all, cold)."""


def _existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _held(root: Path) -> int:
    """Bytes already in ``root`` (each file's blocks, hard links counted once)."""
    seen, total = set(), 0
    for directory, _, files in os.walk(root):
        for name in files:
            info = os.lstat(os.path.join(directory, name))
            if (info.st_dev, info.st_ino) not in seen:
                seen.add((info.st_dev, info.st_ino))
                total += info.st_blocks * 512
    return total


def network_disk_shortfall(cache: Path, temporary: Path, *, free=None, device=None, held=None) -> str | None:
    """Why the network tier cannot start here (a disk without the space its downloads and envs
    need), or None. ``cache``: TFGPU_TEST_CACHE, whose contents count as already downloaded;
    ``temporary``: where pytest's temporary directories go. ``free``, ``device`` and ``held`` read
    the disk (tests give their own)."""
    free = free or (lambda path: shutil.disk_usage(_existing(path)).free)
    device = device or (lambda path: _existing(path).stat().st_dev)
    held = held or _held

    def short(cached: int) -> tuple[int, Path, int] | None:
        needs: dict[int, list] = {}
        for path, amount in ((cache, max(0, NETWORK_CACHE_GB * GB - cached)), (temporary, NETWORK_TEMP_GB * GB)):
            needs.setdefault(device(path), [0, path])[0] += amount
        for amount, path in needs.values():
            if free(path) < amount:
                return amount, path, free(path)
        return None

    found = short(0) and short(held(cache))  # a warm cache is walked only when the disk looks short
    if found is None:
        return None
    amount, path, have = found
    return (
        f"the network tests need about {amount / GB:.0f} GB free under {_existing(path)} "
        f"({NETWORK_CACHE_GB} GB of real TensorFlow and CUDA wheels kept in TFGPU_TEST_CACHE={cache}, "
        f"{NETWORK_TEMP_GB} GB of envs in temporary directories while they run, less what the cache already "
        f"holds) and {have / GB:.1f} GB is free: free some, or point TFGPU_TEST_CACHE (and --basetemp) "
        "at a larger disk"
    )


@pytest.hookimpl(trylast=True)  # after -m and -k have deselected what will not run
def pytest_collection_modifyitems(config, items) -> None:
    """Before the network tier downloads anything: is there the disk it needs? Its tests are
    skipped, with how much is needed and where, when there is not."""
    network = [item for item in items if item.get_closest_marker("network")]
    if not network:
        return
    temporary = Path(config.option.basetemp) if config.option.basetemp else Path(tempfile.gettempdir())
    problem = network_disk_shortfall(TEST_CACHE, temporary)
    if problem is not None:
        for item in network:
            item.add_marker(pytest.mark.skip(reason=problem))


@pytest.fixture(params=["vfork", "fork"])
def way(request, monkeypatch):
    """A child-start test on both ways the runner starts a child (``tfgpu.process.spawning``):
    through setpriv with ``vfork`` (skipped where no setpriv with ``--pdeathsig`` is here), and
    with ``fork`` and the ``preexec_fn``, as where there is none."""
    from tfgpu.process import spawning

    if request.param == "vfork" and spawning._wrapper() is None:
        pytest.skip("no setpriv with --pdeathsig on this machine")
    if request.param == "fork":
        monkeypatch.setitem(spawning._found, "wrapper", None)
    return request.param


def pytest_report_header(config) -> list[str]:
    """Up front, the system programs whose absence turns tests into skips, and how to install them."""
    import systemprograms

    return systemprograms.header([p for p in systemprograms.PROGRAMS if not systemprograms.present(p)])


def _keep_bytecode() -> None:
    """The suite's test modules and the tool's own, compiled once and kept, not on every run.

    Where PYTHONDONTWRITEBYTECODE is set (this machine's shells set it, to keep ``__pycache__`` out
    of checkouts), every pytest process compiled the tool from source and, worse, ran pytest's
    assertion rewriting over every test module again: about 6 s of CPU per process, paid by each
    xdist worker, before the first test ran. The compiled files go under TFGPU_TEST_CACHE/bytecode
    (PYTHONPYCACHEPREFIX's layout), never beside the sources, for this process only: the
    environment the tool and its children see is left as it was (a test of what a child writes
    meets the same PYTHONDONTWRITEBYTECODE as before). A prefix the user set is kept; a run that
    writes bytecode anyway (no PYTHONDONTWRITEBYTECODE) is left to do it as always."""
    if sys.dont_write_bytecode and not sys.pycache_prefix:
        sys.pycache_prefix = str(suite_cache("bytecode"))
        sys.dont_write_bytecode = False


_keep_bytecode()
toolbytecode.compile_once()  # for every `python -m tfgpu` a test starts (tests/toolbytecode.py)


def _name_loopback() -> None:
    from tfgpu.doors import urls

    urls.trust(os.environ.get("TFGPU_INSECURE_HOSTS", "").split(","))


_name_loopback()  # for code called directly, module and session fixtures included


def _parse_the_tables_once() -> None:
    """The shipped tables parsed and validated once per test process, not once per command.

    The tool keeps its parse of the tables in a cache file under TFGPU_CACHE_DIR; most tests give it
    a fresh cache directory and run commands in this process (``run_tool``, the hostile tests'
    ``cli``), each of which forgets the tables first, so every such command parsed and validated the
    same shipped bytes again: about 140 ms of CPU each, over a third of what those tests cost. Here
    the first parse of a set of tables (keyed as the tool keys its cache file: each shipped table's
    size, times and inode, each TFGPU_DATA_DIR overlay table's bytes) is kept, and a later command
    whose cache misses gets a copy of it and writes its cache file as the tool would; the reading,
    rejecting and writing of cache files are the tool's own. A parse that fails is not kept (each
    bad overlay is refused afresh), nor one made with a schema or parser a test has replaced;
    tests/test_data_tables.py validates the shipped tables themselves.

    A set not seen yet (an overlay of one table, good or bad) parses only what it does not share
    with one seen before: each table's parse is kept by its name, bytes and path, so the shipped
    tables beside an overlay are not parsed again for each overlay a test writes (the tool's
    ``parse`` still runs on every table it has not met, the overlay's included)."""
    import marshal

    from tfgpu import data
    from tfgpu.data import schema

    parse_all, validate, kept, kept_tables = data._parse_all, schema.validate, {}, {}

    def parse_table_once(name: str, raw: bytes, where: str):
        key = (name, raw, where)
        if key not in kept_tables:
            kept_tables[key] = marshal.dumps(parse(name, raw, where))
        return marshal.loads(kept_tables[key])  # a copy a test may change

    def parse_once(overlay=None):
        if overlay is None:
            overlay = data._overlay(set(data._shipped_files()))
        if schema.validate is not validate or data.parse is not parse:
            return parse_all(overlay)
        key = os.path.basename(data._cache_file(overlay))
        if key not in kept:
            data.parse = parse_table_once
            try:
                tables = parse_all(overlay)
            finally:
                data.parse = parse
            kept[key] = {name: marshal.dumps(table) for name, table in tables.items()}
            return tables
        tables = {name: marshal.loads(table) for name, table in kept[key].items()}  # a copy a test may change
        data._write_cache(data._cache_file(overlay), tables)
        return tables

    parse = data.parse
    data._parse_all = parse_once


_parse_the_tables_once()


@pytest.fixture(autouse=True)
def _named_loopback():
    """Code called directly (not through the command line, which names the hosts at start-up)
    trusts what the suite names; each test starts and ends with that, whatever it set itself."""
    _name_loopback()
    yield
    _name_loopback()


_BUILDERS = ("conftest.py", "wheelhouse.py", "condachannel.py", "localindex.py", "repairhelpers.py")


def built_once(tmp_path_factory, name: str, build) -> Path:
    """``build(directory)``'s result, built once for the whole run: under xdist, by the first worker
    that asks, into a directory beside the workers' own, and read by every other worker as it is
    (the suite's session fixtures are read-only: a test that changes one works on a copy). Each
    worker built its own before, the same bytes with the same gcc and rattler runs.

    The directory is named by ``name`` and a digest of the sources that build it (this file and the
    helpers it calls, the interpreter's version), so a stale tree is never taken for a current
    one; a file lock makes the other workers wait for the first one's build, which is recorded
    as done only once it is whole. Without xdist it is the session's own temporary directory,
    as before."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return build(tmp_path_factory.mktemp(name))
    digest = hashlib.sha256(sys.version.encode())
    for helper in _BUILDERS:
        digest.update((Path(__file__).parent / helper).read_bytes())
    place = tmp_path_factory.getbasetemp().parent / "built-once" / f"{name}-{digest.hexdigest()[:16]}"
    place.parent.mkdir(parents=True, exist_ok=True)
    done = place.with_name(place.name + ".done")  # the built directory, relative to place
    with open(place.with_name(place.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also by a worker that dies
        if not done.is_file():
            shutil.rmtree(place, ignore_errors=True)  # what a worker that failed half-way left
            place.mkdir()
            built = build(place)
            done.write_text(str(Path(built).absolute().relative_to(place.absolute())))
    return place / done.read_text()


@pytest.fixture(scope="session")
def local_wheels(tmp_path_factory) -> Path:
    """A find-links directory standing in for PyPI (see tests/wheelhouse.py)."""
    if not wheelhouse.have_compiler():
        pytest.skip("gcc is needed to build the test shared libraries")
    return built_once(tmp_path_factory, "wheels", wheelhouse.tensorflow_wheelhouse)


@pytest.fixture(scope="session")
def no_gpu_wheels(tmp_path_factory) -> Path:
    """The wheelhouse of ``local_wheels`` with a TensorFlow that imports and lists no GPU: what
    ``verify`` meets on a machine without a driver (see ``wheelhouse.NO_GPU_TENSORFLOW``)."""
    if not wheelhouse.have_compiler():
        pytest.skip("gcc is needed to build the test shared libraries")
    return built_once(
        tmp_path_factory, "no-gpu-wheels", lambda directory: wheelhouse.tensorflow_wheelhouse(directory, no_gpu=True)
    )


@pytest.fixture(scope="session")
def uv_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("uv-cache")


def tool_environ(base: Path, uv_cache: Path, **extra: str) -> dict[str, str]:
    """Environment for running tfgpu-install: ``uv_cache`` as its cache, its logs, envs dir and
    Jupyter dir under ``base``, 160 columns; ``extra`` on top. What ``tool_env`` gives a test, and
    what a module-scoped build (an env, a lock, a bundle made once for a module) runs under."""
    return {
        **os.environ,
        "TFGPU_CACHE_DIR": str(uv_cache),
        "TFGPU_LOG_DIR": str(base / "logs"),
        "TFGPU_ENVS_DIR": str(base / "envs"),
        "JUPYTER_DATA_DIR": str(base / "jupyter"),
        "COLUMNS": "160",
        **extra,
    }


@pytest.fixture
def tool_env(tmp_path, uv_cache) -> dict[str, str]:
    """Environment for running tfgpu-install: its own cache, logs, envs dir and Jupyter dir."""
    return tool_environ(tmp_path, uv_cache)


@pytest.fixture(scope="session")
def index_url(local_wheels, tmp_path_factory):
    """A real PEP 503 index on 127.0.0.1 serving the local wheelhouse (tests/localindex.py)."""
    import localindex

    root = built_once(tmp_path_factory, "index", lambda directory: localindex.build_index(local_wheels, directory))
    with localindex.Server(root) as url:  # each worker serves it: a server lives as long as its process
        yield url


@pytest.fixture
def lock_env(tool_env, index_url) -> dict[str, str]:
    """tool_env resolving locks against the local index, bundles without the tool's own wheels."""
    return {**tool_env, "TFGPU_INDEX_URL": index_url, "TFGPU_BUNDLE_TOOL": "0"}


@pytest.fixture(scope="session")
def lock_channel(tmp_path_factory) -> Path:
    """A local conda channel (tests/condachannel.py) for conda locks and bundles: TF 2.13/2.16 on linux-64,
    plus a Python for linux-aarch64/osx-arm64 and a TF 2.10 set for linux-64/win-64."""
    if not wheelhouse.have_compiler():
        pytest.skip("gcc is needed to build the test shared libraries")
    return built_once(tmp_path_factory, "lock-channel", _lock_channel)


def _lock_channel(directory: Path) -> Path:
    import condachannel

    packages = condachannel.default_packages()
    version = ".".join(str(part) for part in sys.version_info[:3])
    for subdir in ("linux-aarch64", "osx-arm64"):  # a Python to lock CPU-only / metal platforms with
        packages.append(
            condachannel.Package(
                "python", version, "h0000000_0", subdir=subdir, files={"README.python": b"python for a lock test\n"}
            )
        )
    for subdir in ("linux-64", "win-64"):  # TF 2.10 (CUDA 11.2, the last native Windows GPU build)
        metadata_only = {"README.txt": f"{subdir} package for a lock test\n".encode()}
        packages += [
            condachannel.Package("python", "3.10.13", "h0000000_0", subdir=subdir, files=metadata_only),
            condachannel.Package(
                "cudatoolkit", "11.2.2", "h0000000_13", subdir=subdir, constrains=["__cuda >=11"], files=metadata_only
            ),
            # conda-forge's newest cudnn with a CUDA 11.2 build (cudnn-feedstock history: conda_cudnn.toml)
            condachannel.Package(
                "cudnn",
                "8.8.0.121",
                "cuda112h0000000_0",
                subdir=subdir,
                depends=["cudatoolkit 11.*"],
                files=metadata_only,
            ),
        ]
    return condachannel.build_channel(directory, packages)


@pytest.fixture(scope="session")
def lock_index(tmp_path_factory):
    """A local PEP 503 index (tests/localindex.py) with stub tensorflow/numpy-stub wheels for conda locks."""
    import localindex

    root = built_once(tmp_path_factory, "lock-index", _lock_index)
    with localindex.Server(root) as url:
        yield url


def _lock_index(directory: Path) -> Path:
    import localindex

    wheels = directory / "wheels"
    for version in ("2.10.1", "2.13.1", "2.16.1"):
        wheelhouse.wheel(
            wheels,
            "tensorflow",
            version,
            {"tensorflow/__init__.py": f"__version__ = {version!r}\n".encode()},
            requires=["numpy-stub>=1"],
        )
    wheelhouse.wheel(wheels, "tensorflow-metal", "1.0.0", {"tensorflow_metal/__init__.py": b""})
    wheelhouse.wheel(wheels, "numpy-stub", "1.2.3", {"numpy_stub/__init__.py": b""})
    return localindex.build_index(wheels, directory / "index")


@pytest.fixture(scope="session")
def repair_wheels(tmp_path_factory) -> Path:
    """TensorFlow 2.21.0 (a CUDA build) and every CUDA wheel its resolution names, plus an old cuDNN
    (tests/repairhelpers.py): what users' own envs are made from in the repair tests."""
    if not wheelhouse.have_compiler():
        pytest.skip("gcc is needed to build the test shared libraries")
    return built_once(tmp_path_factory, "repair-wheels", _repair_wheels)


def _repair_wheels(directory: Path) -> Path:
    import repairhelpers

    from tfgpu.resolver import make_request, resolve

    repairhelpers.tensorflow_wheel(directory, "2.21.0", cuda=True)
    resolution = resolve(
        make_request(tf="2.21.0", mode="pip", python=f"{sys.version_info[0]}.{sys.version_info[1]}"), None
    )
    return repairhelpers.cuda_wheelhouse(directory, resolution)


@pytest.fixture(scope="session")
def cpu_wheels(tmp_path_factory) -> Path:
    """A CPU-only TensorFlow 2.21.0 wheel (build_info says is_cuda_build False)."""
    import repairhelpers

    def build(directory: Path) -> Path:
        repairhelpers.tensorflow_wheel(directory, "2.21.0", cuda=False)
        return directory

    return built_once(tmp_path_factory, "cpu-wheels", build)


def run_tool(*argv: str, env: dict[str, str] | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    """tfgpu-install run in this process, as ``python -m tfgpu`` would run it: ``os.environ`` is
    ``env`` for the call, stdout and stderr are captured, the exit code is ``cli.main``'s. The tools
    it starts (uv, rattler's work, the runfile, bash) are real processes as always; only the Python
    start-up of the tool itself is saved. Tests that need the tool as a process of its own (signals,
    raw argv bytes, locales) run ``run_process``."""
    import contextlib
    import io
    import signal

    from tfgpu import cli
    from tfgpu.resolver import tables

    saved, handlers = dict(os.environ), {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    out, err = io.StringIO(), io.StringIO()
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        tables.clear_caches()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main([str(arg) for arg in argv])
    finally:
        os.environ.clear()
        os.environ.update(saved)
        tables.clear_caches()
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    return subprocess.CompletedProcess([sys.executable, "-m", "tfgpu", *argv], code, out.getvalue(), err.getvalue())


def run_process(*argv: str, env: dict[str, str] | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    """tfgpu-install as a process of its own (``python -m tfgpu``)."""
    return subprocess.run(
        [sys.executable, "-m", "tfgpu", *argv], capture_output=True, text=True, env=env, timeout=timeout
    )


SHELLS = ("bash", "zsh", "fish")


def shells() -> list:
    """Every shell the tool supports, as parameters; one that is not installed is a visible skip
    (``SKIPPED ... zsh is not installed``), never a silently missing test."""
    return [
        pytest.param(
            shell,
            marks=pytest.mark.skipif(
                shutil.which(shell) is None, reason=f"{shell} is not installed: its tests cannot run"
            ),
        )
        for shell in SHELLS
    ]


TF_CPU = "tensorflow-cpu==2.21.0"  # the CPU wheel: ~250 MB instead of the CUDA wheels' ~3 GB


@pytest.fixture(scope="session")
def shared_cache() -> Path:
    """The network tests' persistent tfgpu-install cache (TFGPU_TEST_CACHE/e2e; its uv cache in uv/),
    so re-runs on one machine do not download the TensorFlow and CUDA wheels again."""
    return suite_cache("e2e")


@pytest.fixture(scope="session")
def real_tf_env() -> Path:
    """A venv with real TensorFlow (CPU wheel) from PyPI, built once with uv and kept under the
    tests' persistent cache (like tests/test_pip_e2e.py's), so later runs reuse it. Network tests only."""
    from tfgpu.engines.uv import find_uv

    cache = TEST_CACHE
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    env = cache / "envs" / f"{TF_CPU.replace('==', '-')}-py{python}"
    if (env / ".complete").is_file():
        return env
    uv = find_uv()
    if uv is None:
        pytest.skip("uv is not installed")
    shutil.rmtree(env, ignore_errors=True)
    env.parent.mkdir(parents=True, exist_ok=True)
    common = {**os.environ, "UV_CACHE_DIR": str(suite_cache("e2e", "uv"))}
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(env)], check=True, env=common, timeout=300)
    subprocess.run(
        [uv, "pip", "install", "-q", "--python", str(env / "bin" / "python"), TF_CPU],
        check=True,
        env=common,
        timeout=1800,
    )
    (env / ".complete").write_text(TF_CPU + "\n")
    return env
