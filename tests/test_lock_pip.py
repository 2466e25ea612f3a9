"""pip locks: written by the real tool with real uv against a real local index (tests/localindex.py
serving tests/wheelhouse.py's wheels over HTTP), installed back with ``create --from-lock``;
the tests marked ``network`` lock real TensorFlow 2.21 against PyPI and hand the file to pip.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_tool, tool_environ

from tfgpu.lock.pip import lockfile as pip_lock
from tfgpu.lock.platforms import PLATFORMS
from tfgpu.settings import Selectors

TARGET = ("--tf", "2.21", "--mode", "pip", "--python", "3.11", "--no-detect")
LOCAL = re.compile(r"file:|/opt/|/tmp/|/work/|/root/|127\.0\.0\.1|localhost")


@pytest.fixture
def env(lock_env) -> dict[str, str]:
    return lock_env


@pytest.fixture(scope="module")
def made_lock(tmp_path_factory, uv_cache, index_url) -> Path:
    """The linux-64 lock, written once for the module by the real tool, as ``lock_env`` has it run."""
    base = tmp_path_factory.mktemp("pip-lock")
    env = tool_environ(base, uv_cache, TFGPU_INDEX_URL=index_url, TFGPU_BUNDLE_TOOL="0")
    path = base / "team.txt"
    done = run_tool("lock", *TARGET, "--platform", "linux-64", "-o", str(path), env=env)
    assert done.returncode == 0, done.stderr
    return path


@pytest.fixture
def lock_file(tmp_path, made_lock) -> Path:
    """A copy of the module's lock and the pylock.toml written beside it, for the test to read or edit
    (the lock names no directory of its own; what ``lock`` writes and says is held by the tests that
    run it)."""
    for made in (made_lock, made_lock.with_name("pylock.linux-64.toml")):
        shutil.copyfile(made, tmp_path / made.name)
    return tmp_path / made_lock.name


def resign(path: Path, edit) -> None:
    """Rewrite a lock after ``edit(meta, body) -> (meta, body)``, with a valid sha256 (a deliberate forgery)."""
    lock = pip_lock.read(path)
    meta, body = edit(dict(lock.meta), lock.body)
    meta.pop("sha256")
    path.write_text(pip_lock.render(meta, body, str(path)))


def leftovers(prefix: Path) -> list[str]:
    return sorted(p.name for p in prefix.parent.iterdir() if p.name.startswith(f".{prefix.name}."))


def test_lock_records_the_resolution_hashes_and_how_to_regenerate(lock_file, env):
    text = lock_file.read_text()
    lock = pip_lock.read(lock_file)
    assert lock.meta["format"] == pip_lock.FORMAT and lock.meta["platform"] == "linux-64"
    r = lock.resolution
    assert (r.tensorflow, r.python, r.cuda, r.cudnn, r.min_driver) == (
        "2.21.0",
        "3.11",
        "12.5",
        "9.3",
        "525.60.13",
    )
    assert len(lock.meta["inputs_sha256"]) == 64 and len(lock.meta["sha256"]) == 64
    assert lock.pins()["nvidia-cudnn-cu12"] == "9.28.0.42" and len(lock.pins()) == 7
    for block in re.split(r"\n(?=\S)", lock.body.strip()):  # every pin carries its hash
        if "==" in block:
            assert "--hash=sha256:" in block, block
    regenerate = re.search(r"^# Regenerate: (.*)$", text, re.M).group(1)
    assert "--tf 2.21.0" in regenerate and "--platform linux-64" in regenerate and "--python 3.11" in regenerate
    assert "# via -r requirements.in" in text.replace("\n    #   ", " ") or "-r requirements.in" in text
    assert not re.search(r"/tmp/|/work/", lock.body)  # uv's input path is not recorded
    pylock = lock_file.with_name("pylock.linux-64.toml")
    assert 'lock-version = "1.0"' in pylock.read_text()
    again = lock_file.with_name("again.txt")
    assert run_tool("lock", *TARGET, "--platform", "linux-64", "-o", str(again), env=env).returncode == 0
    assert pip_lock.read(again).meta["sha256"] == lock.meta["sha256"]  # deterministic: no timestamps


def test_several_platforms_get_one_file_each_and_cpu_only_is_said(tmp_path, env):
    done = run_tool(
        "lock",
        *TARGET,
        "--platform",
        "linux-64",
        "--platform",
        "linux-aarch64",
        "--allow-cpu",
        "-o",
        str(tmp_path / "team.txt"),
        "--json",
        env=env,
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert list(document) == ["locks"] and all(
        list(item) == ["platform", "path", "pylock", "tensorflow", "python", "cpu_only", "packages", "sha256"]
        for item in document["locks"]
    )  # the document scripts read
    locks = {item["platform"]: item for item in document["locks"]}
    assert Path(locks["linux-64"]["path"]).name == "team.linux-64.txt"
    assert Path(locks["linux-aarch64"]["path"]).name == "team.linux-aarch64.txt"
    assert (tmp_path / "pylock.linux-aarch64.toml").is_file()
    cpu = pip_lock.read(tmp_path / "team.linux-aarch64.txt")
    assert cpu.meta["cpu_only"] and cpu.resolution.accelerator == "cpu" and "nvidia-cudnn-cu12" not in cpu.pins()
    assert "CPU only" in (tmp_path / "team.linux-aarch64.txt").read_text().splitlines()[1]


def test_a_platform_without_gpu_build_needs_allow_cpu(tmp_path, env):
    done = run_tool("lock", *TARGET, "--platform", "linux-aarch64", "-o", str(tmp_path / "x.txt"), "--json", env=env)
    assert done.returncode == 3
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "no-gpu-build" and any("--allow-cpu" in a for a in error["alternatives"])
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("name", ["linux64", "linux_x86_64", "win64", "osx-aarch64"])
def test_a_platform_typo_lists_the_valid_names(tmp_path, env, name):
    done = run_tool("lock", *TARGET, "--platform", name, "--json", env=env)
    assert done.returncode == 2
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "bad-platform" and ", ".join(PLATFORMS) in " ".join(error["alternatives"])


def test_conflicting_os_and_a_mode_that_cannot_be_locked(tmp_path, env):
    done = run_tool("lock", *TARGET, "--os", "windows", "--platform", "linux-64", "--json", env=env)
    assert done.returncode == 2 and json.loads(done.stdout)["error"]["code"] == "conflicting-options"
    done = run_tool(
        "lock", "--tf", "2.21", "--mode", "system", "--no-detect", "--platform", "linux-64", "--json", env=env
    )
    assert done.returncode == 2 and json.loads(done.stdout)["error"]["code"] == "mode-not-lockable"


def test_create_from_lock_installs_exactly_the_lock(tmp_path, lock_file, local_wheels, env):
    prefix = tmp_path / "env"
    done = run_tool(
        "create",
        "--from-lock",
        str(lock_file),
        "--prefix",
        str(prefix),
        "--find-links",
        str(local_wheels),
        "--offline",
        "--no-verify",
        "--json",
        env={**env, "UV_OFFLINE": "1"},
    )
    assert done.returncode == 0, done.stderr
    freeze = subprocess.run(
        [sys.executable, "-m", "uv", "pip", "freeze", "--python", str(prefix / "bin" / "python")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    frozen = dict(line.split("==") for line in freeze.split())
    assert frozen == pip_lock.read(lock_file).pins()
    marker = json.loads((prefix / "tfgpu-env.json").read_text())
    assert marker["from_lock"].endswith(pip_lock.read(lock_file).meta["sha256"])
    assert (prefix / "etc" / "tfgpu" / "activate.sh").is_file()  # the same activation as `create`


def _create(tmp_path, lock_file, local_wheels, env, *extra):
    prefix = tmp_path / "env"
    done = run_tool(
        "create",
        "--from-lock",
        str(lock_file),
        "--prefix",
        str(prefix),
        "--find-links",
        str(local_wheels),
        "--offline",
        "--no-verify",
        "--json",
        *extra,
        env=env,
    )
    assert not prefix.exists() and leftovers(prefix) == [], "nothing may be installed"
    return done.returncode, json.loads(done.stdout)["error"] if done.stdout.strip() else {}


def test_an_edited_hash_is_refused_before_anything_is_installed(tmp_path, lock_file, local_wheels, env):
    text = lock_file.read_text()
    digest = re.search(r"--hash=sha256:([0-9a-f]{64})", text).group(1)
    lock_file.write_text(text.replace(digest, digest[:-1] + ("0" if digest[-1] != "0" else "1")))
    code, error = _create(tmp_path, lock_file, local_wheels, env)
    assert code == 2 and error["code"] == "lock-modified" and "Regenerate" not in error["message"]
    assert any("tfgpu-install lock --tf 2.21.0" in a for a in error["alternatives"])


def test_a_truncated_lock_is_refused(tmp_path, lock_file, local_wheels, env):
    text = lock_file.read_text()
    lock_file.write_text(text[: len(text) * 2 // 3])
    assert _create(tmp_path, lock_file, local_wheels, env)[1]["code"] == "lock-modified"
    lock_file.write_text("\n".join(text.splitlines()[:3]))
    assert _create(tmp_path, lock_file, local_wheels, env)[1]["code"] == "lock-malformed"


def test_a_forged_hash_fails_the_install_and_leaves_nothing(tmp_path, lock_file, local_wheels, env):
    """A lock re-signed after a hash was changed passes the header check; uv's hash check stops it."""

    def forge(meta, body):
        digest = re.search(r"--hash=sha256:([0-9a-f]{64})", body).group(1)
        return meta, body.replace(digest, "0" * 64)

    resign(lock_file, forge)
    code, error = _create(tmp_path, lock_file, local_wheels, env)
    assert code == 1 and error["code"] == "install-failed" and "hash" in error["message"].lower()


def test_from_lock_offline_installs_the_directorys_wheel_where_uvs_cache_remembers_a_better_one(
    tmp_path, lock_file, local_wheels, env
):
    """A lock names every file of each version, the index's too. uv's cache remembers the index's page
    of nvidia-cudnn-cu12, whose wheel of the locked version ranks higher for Python 3.11 than the
    directory's, and not that file: offline, the directory's wheel is installed."""
    import hashlib

    from localindex import remembered_index

    url = remembered_index(tmp_path, tmp_path / "cache" / "uv", "nvidia-cudnn-cu12", "9.28.0.42", "3.11")
    index_wheel = next((tmp_path / "remembered-wheels").glob("nvidia_cudnn_cu12-9.28.0.42-py311-*.whl"))
    digest = hashlib.sha256(index_wheel.read_bytes()).hexdigest()
    pin = "nvidia-cudnn-cu12==9.28.0.42 \\\n"

    def also_the_index_file(meta, body):
        assert pin in body
        return meta, body.replace(pin, f"{pin}    --hash=sha256:{digest} \\\n")

    resign(lock_file, also_the_index_file)
    prefix = tmp_path / "env"
    done = run_tool(
        "create",
        "--from-lock",
        str(lock_file),
        "--prefix",
        str(prefix),
        "--find-links",
        str(local_wheels),
        "--offline",
        "--no-verify",
        "--json",
        env={**env, "TFGPU_CACHE_DIR": str(tmp_path / "cache"), "UV_DEFAULT_INDEX": url},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["installed"]["nvidia-cudnn-cu12"] == "9.28.0.42"
    assert list(prefix.glob("lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.9"))  # the directory's


def test_a_lock_of_another_format_is_refused(tmp_path, lock_file, local_wheels, env):
    resign(lock_file, lambda meta, body: ({**meta, "format": 99, "tool_version": "9.0"}, body))
    code, error = _create(tmp_path, lock_file, local_wheels, env)
    assert code == 3 and error["code"] == "lock-format-unsupported" and "9.0" in error["message"]


def test_selectors_must_agree_with_the_lock(tmp_path, lock_file, local_wheels, env):
    code, error = _create(tmp_path, lock_file, local_wheels, env, "--python", "3.12", "--driver", "535.104.05")
    assert code == 2 and error["code"] == "conflicting-options"
    assert "--python 3.12" in error["message"] and "--driver" in error["message"]
    done = run_tool(
        "create",
        "--from-lock",
        str(lock_file),
        "--tf",
        "2.21",
        "--python",
        "3.11",
        "--prefix",
        str(tmp_path / "env"),
        "--dry-run",
        "--json",
        env=env,
    )
    assert done.returncode == 0, done.stderr
    steps = json.loads(done.stdout)["steps"]
    assert steps[0]["kind"] == "locked-requirements" and not any(s["kind"] == "lock" for s in steps)
    assert "--require-hashes" in next(s for s in steps if "install" in s["argv"])["argv"]


def test_a_cpu_only_lock_is_not_installed_as_a_gpu_env(tmp_path, env, local_wheels):
    path = tmp_path / "cpu.txt"
    assert (
        run_tool("lock", *TARGET, "--platform", "linux-aarch64", "--allow-cpu", "-o", str(path), env=env).returncode
        == 0
    )
    code, error = _create(tmp_path, path, local_wheels, env)
    assert code == 3 and error["code"] == "lock-cpu-only"


@pytest.fixture(scope="module")
def real_lock(tmp_path_factory) -> Path:
    """TF 2.21 for linux-64, Python 3.11 (this machine's Python, so its own pip can check it), from PyPI."""
    root = tmp_path_factory.mktemp("real-lock")
    env = {**os.environ, "TFGPU_LOG_DIR": str(root / "logs")}
    env.pop("TFGPU_INDEX_URL", None)
    done = run_tool(
        "lock",
        "--tf",
        "2.21",
        "--mode",
        "pip",
        "--python",
        "3.11",
        "--platform",
        "linux-64",
        "--no-detect",
        "-o",
        str(root / "tf221.txt"),
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return root / "tf221.txt"


@pytest.mark.network
def test_real_lock_has_no_machine_local_location(real_lock):
    """This machine's pip config adds file:// indexes and /opt/wheels; none of it may leak in."""
    lock = pip_lock.read(real_lock)
    assert lock.meta["index"] == "https://pypi.org/simple"
    assert lock.pins()["tensorflow"] == "2.21.0" and "nvidia-cudnn-cu12" in lock.pins()
    for path in (real_lock, real_lock.with_name("pylock.linux-64.toml")):
        assert not LOCAL.search(path.read_text().split("# Regenerate:")[-1].split("\n", 1)[-1]), path


@pytest.mark.network
@pytest.mark.slow
def test_stock_pip_accepts_the_real_lock(real_lock, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")} | {
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_CACHE_DIR": os.environ["PIP_CACHE_DIR"],
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "--isolated",
            "--dry-run",
            "--require-hashes",
            "--index-url",
            "https://pypi.org/simple",
            "-r",
            str(real_lock),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=1200,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Would install" in done.stdout and "tensorflow-2.21.0" in done.stdout


UNKNOWN = {"platforms": ["linux-64"], "selectors": Selectors(tf="9.99"), "output": "out"}
"""A lock or bundle of a TensorFlow that does not exist: only the resolver refuses it."""


@pytest.mark.parametrize(
    "call, code",
    [
        (lambda lock, bundle: lock.write(mode="system", **UNKNOWN), "mode-not-lockable"),
        (lambda lock, bundle: lock.write(mode="pip", channels=["conda-forge"], **UNKNOWN), "conflicting-options"),
        (lambda lock, bundle: bundle.build(mode="system", **UNKNOWN), "mode-not-bundlable"),
        (lambda lock, bundle: bundle.build(mode="pip", channels=["conda-forge"], **UNKNOWN), "conflicting-options"),
        (
            lambda lock, bundle: bundle.build(mode="pip", **{**UNKNOWN, "platforms": ["linux-64", "win-64"]}),
            "conflicting-options",
        ),
        (lambda lock, bundle: lock.write(mode="pip", **UNKNOWN), "unknown-tf-version"),
    ],
)
def test_the_lock_faces_refuse_before_anything_is_resolved(tmp_path, monkeypatch, call, code):
    """tfgpu.lock.write and tfgpu.lock.bundle.build hold the mode policy (what can be locked or
    bundled, --channel with conda only, one platform per bundle), and refuse before resolving: the
    TensorFlow asked for does not exist, so only the last case, which passes every rule, reaches
    the resolver."""
    from tfgpu import lock
    from tfgpu.errors import TfgpuError
    from tfgpu.lock import bundle

    monkeypatch.chdir(tmp_path)
    with pytest.raises(TfgpuError) as refused:
        call(lock, bundle)
    assert refused.value.code == code
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_the_tools_source_checkout_is_found_from_the_package():
    """A bundle rebuilds the tool's own wheel from its checkout when the running code is one (an
    editable install), else from the installed files: the checkout is found from the package, so
    it survives moving the module that asks."""
    import tfgpu
    from tfgpu.lock.bundle.files import source_checkout

    repo = Path(__file__).resolve().parents[1]
    if (repo / "tfgpu").resolve() == Path(tfgpu.__file__).resolve().parent:
        assert source_checkout() == repo
    else:  # the installed wheel, tested from outside the checkout
        assert source_checkout() is None


def test_a_lock_asked_again_runs_no_uv_after_the_index_answers(tmp_path, env):
    """A lock asks the index once. While uv asks it, the hashed requirements and the pylock.toml are
    resolved from uv's cache alone (``--offline``); where those requirements are what the index
    answered, the pylock is kept and no uv runs after the index's answer. A first lock (a cold
    cache) resolves the pylock from the answers its own run fetched. Both files pin the same versions."""
    path = tmp_path / "team.txt"
    logs = Path(env["TFGPU_LOG_DIR"])
    for _ in ("first", "again"):
        for log in logs.glob("lock-*.log"):
            log.unlink()
        done = run_tool("lock", *TARGET, "--platform", "linux-64", "-o", str(path), env=env)
        assert done.returncode == 0, done.stderr
    [log] = logs.glob("lock-*.log")
    commands = [line for line in log.read_text().splitlines() if line.startswith("$ ")]
    assert len(commands) == 3, commands  # the index's run and the cache's two: no pylock run after them
    assert "--generate-hashes" in commands[0] and "--offline" not in commands[0]
    assert "--generate-hashes" in commands[1] and "--offline" in commands[1]
    assert "--format pylock.toml" in commands[2] and "--offline" in commands[2]
    pylock = (tmp_path / "pylock.linux-64.toml").read_text()
    pins = pip_lock.read(path).pins()
    assert pins and all(f'name = "{name}"\nversion = "{version}"' in pylock for name, version in pins.items())


_NOT_BEFORE_UV = (
    "rich",
    "rattler",
    "tfgpu.lock.pip.lockfile",
    "packaging",
    "logging",
    "typing",
    "datetime",
    "difflib",
    "platform",
    "secrets",
    "hmac",
)
"""What a pip lock loads only once uv is running (or never): the renderers, the install engine, the
lock format with packaging's parsers; packaging's wheel tags (logging, platform) are a bundle's;
``typing``, ``datetime`` and the stdlib ``secrets`` (hmac, hashlib) were loaded for a record's type,
a log's time stamp and a random name, which cost nothing without them."""

_LOADED_AT_UV = """
import json, re, sys
from tfgpu.process import runner

def run(self, argv, **kwargs):
    loaded = sorted(name for name in sys.argv[1].split(",") if name in sys.modules)
    controls = sys.modules["tfgpu.doors.controls"]
    compiled = sorted(
        f"{name}.{attribute}" for name, module in list(sys.modules.items()) if name.startswith("tfgpu.")
        for attribute, value in vars(module).items() if isinstance(value, re.Pattern)
    )
    print(json.dumps([loaded, "CHARACTERS" in vars(controls), compiled]))
    sys.exit(0)

runner.Runner.run = run
from tfgpu import cli
cli.main(sys.argv[2:])
"""

_COMPILED_AT_UV = {
    "tfgpu.cache.uvdir._UV_ENTRY",
    "tfgpu.envs.location.NAME",
    "tfgpu.lock.resolving._LOCAL",
    "tfgpu.lock.resolving._PIN",
}
"""The tool's patterns compiled when uv starts: small ones a lock reads (or a module's public name).
uv's output readers, the prefix check and the URL door's control check are compiled or built when
first used, which a lock that succeeds never does."""


def test_a_lock_starts_uv_before_loading_its_renderers_and_the_install_engine(tmp_path, env):
    """uv's run against the index is most of a lock's time, so it starts first: rich (the
    renderers), rattler (the install engine) and the lock format load while it runs, not before;
    what only a failure or a bundle reads is not built at all (the set of control characters, the
    patterns that read uv's failures). A fresh interpreter, as a user's, locking against PyPI as a
    user does (a named index is asked once before uv starts, through the HTTP transport); the runner
    stands in for uv only to say what was loaded, so nothing reaches the network."""
    env = {name: value for name, value in env.items() if name != "TFGPU_INDEX_URL"}
    env["TFGPU_CACHE_DIR"] = str(tmp_path / "cache")  # a fresh one, this test's to fill and read
    argv = [sys.executable, "-c", _LOADED_AT_UV, ",".join(_NOT_BEFORE_UV), "lock", *TARGET, "--platform", "linux-64"]
    for _run in ("first", "cached"):  # the first run parses the tables and writes the parsed-data cache
        done = subprocess.run(
            [*argv, "-o", str(tmp_path / "a.txt")], capture_output=True, text=True, env=env, timeout=300
        )
        assert done.returncode == 0, done.stderr
    loaded, controls_built, compiled = json.loads(done.stdout)
    assert loaded == []
    assert not controls_built
    assert set(compiled) <= _COMPILED_AT_UV, sorted(set(compiled) - _COMPILED_AT_UV)


def test_a_pylock_from_a_cache_behind_the_index_is_not_kept(tmp_path):
    """The pylock resolved from uv's cache while the index is asked is kept only where the cache's
    hashed requirements are byte for byte the index's: a cache one file behind (a wheel uploaded
    since) gives way to a pylock resolved after the index's answer. The runner stands in for uv:
    which answer a live index gives mid-run is no test's to order."""
    from tfgpu.doors.requirements import requirement
    from tfgpu.lock import resolving
    from tfgpu.lock.platforms import PLATFORMS

    fresh = "absl-py==2.5.1 \\\n    --hash=sha256:" + "1" * 64 + " \\\n    --hash=sha256:" + "2" * 64 + "\n"
    behind = "absl-py==2.5.1 \\\n    --hash=sha256:" + "1" * 64 + "\n"
    from_cache = '[[packages]]\nname = "absl-py"\nversion = "2.5.1"\n# the cache\'s\n'
    after = '[[packages]]\nname = "absl-py"\nversion = "2.5.1"\n# after the index\n'

    class Runner:
        log_path = tmp_path / "lock.log"

        def __init__(self, cached_requirements):
            self.cached_requirements, self.asked, self.logged = cached_requirements, [], []

        def log(self, text):
            self.logged.append(text)

        def run(self, argv, env=None, meanwhile=None):
            offline, pylock = "--offline" in argv, "pylock.toml" in argv
            self.asked.append(("pylock" if pylock else "hashes", "offline" if offline else "online"))
            if meanwhile is not None:
                meanwhile()
            output = Path(argv[argv.index("-o") + 1])
            if pylock:
                output.write_text(from_cache if "cached" in str(output) else after)
            else:
                output.write_text(self.cached_requirements if offline else fresh)
            return type("Done", (), {"returncode": 0, "output": ""})()

    def lock(runner):
        return resolving.compile_pins(
            [requirement("absl-py", what="a test's requirement")],
            PLATFORMS["linux-64"],
            "3.12",
            runner=runner,
            uv="uv",
            cache_dir=tmp_path / "uv",
            index=resolving.DEFAULT_INDEX,
        )

    level = Runner(fresh)
    assert lock(level) == (fresh, from_cache)
    assert level.asked == [("hashes", "online"), ("hashes", "offline"), ("pylock", "offline")]
    behind_runner = Runner(behind)
    assert lock(behind_runner) == (fresh, after)
    assert behind_runner.asked[-1] == ("pylock", "offline") and len(behind_runner.asked) == 4
    assert any("behind the index" in line for line in behind_runner.logged)


def test_the_callers_work_is_done_while_the_index_and_the_cache_both_answer(tmp_path):
    """While uv asks the index, uv's cache is asked at once, and the caller's own work (loading
    the renderers and the lock format) is done while both run: none of the three waits for another.
    Where the cache's run cannot start, the caller's work is still done, once. The runner stands in
    for uv, to record what runs while what."""
    from tfgpu.doors.requirements import requirement
    from tfgpu.lock import resolving
    from tfgpu.lock.platforms import PLATFORMS

    body = "absl-py==2.5.1 \\\n    --hash=sha256:" + "1" * 64 + "\n"
    pylock = '[[packages]]\nname = "absl-py"\nversion = "2.5.1"\n'

    class Runner:
        log_path = tmp_path / "lock.log"

        def __init__(self, cache_starts=True):
            self.running, self.seen, self.cache_starts = [], [], cache_starts

        def log(self, text):
            pass

        def run(self, argv, env=None, meanwhile=None):
            kind = ("cache" if "--offline" in argv else "index") + (" pylock" if "pylock.toml" in argv else "")
            if kind == "cache" and not self.cache_starts:
                return type("Done", (), {"returncode": 127, "output": "could not start"})()
            self.running.append(kind)
            if meanwhile is not None:
                meanwhile()
            output = Path(argv[argv.index("-o") + 1])
            output.write_text(pylock if "pylock.toml" in argv else body)
            self.running.remove(kind)
            return type("Done", (), {"returncode": 0, "output": ""})()

    def lock(runner):
        return resolving.compile_pins(
            [requirement("absl-py", what="a test's requirement")],
            PLATFORMS["linux-64"],
            "3.12",
            runner=runner,
            uv="uv",
            cache_dir=tmp_path / "uv",
            index=resolving.DEFAULT_INDEX,
            meanwhile=lambda: runner.seen.append(sorted(runner.running)),
        )

    both = Runner()
    assert lock(both) == (body, pylock)
    assert both.seen == [["cache", "index"]]
    alone = Runner(cache_starts=False)
    assert lock(alone)[0] == body
    assert alone.seen == [["index"]]


def test_a_pylock_the_cache_cannot_answer_is_asked_of_the_index(tmp_path, monkeypatch):
    """Where uv's cache cannot answer the pylock's run (another uv process cleaned it meanwhile) or
    answers other versions, the index is asked again; versions that still differ are ``lock-failed``,
    never two files of one lock pinning different things. The runner stands in for uv here: another
    process cleaning uv's cache between the two runs is a race no test can order."""
    from tfgpu.errors import OperationError
    from tfgpu.lock import resolving

    body = "absl-py==2.5.1 \\\n    --hash=sha256:" + "0" * 64 + "\n"
    output = tmp_path / "pylock.toml"
    asked = []

    class Runner:
        log_path = tmp_path / "lock.log"

        def __init__(self, answers):
            self.answers = list(answers)

        def run(self, argv, env=None):
            asked.append(argv[0])
            returncode, text = self.answers.pop(0)
            output.write_text(text)
            return type("Done", (), {"returncode": returncode, "output": ""})()

    good = '[[packages]]\nname = "absl-py"\nversion = "2.5.1"\n'
    other = '[[packages]]\nname = "absl-py"\nversion = "2.6.0"\n'
    refuse = lambda failed: OperationError("lock-failed", "uv failed", [])  # noqa: E731
    assert resolving._pylock_of(body, ("offline",), ("online",), output, Runner([(0, good)]), {}, refuse) == good
    assert asked == ["offline"]
    asked.clear()
    assert (
        resolving._pylock_of(body, ("offline",), ("online",), output, Runner([(2, ""), (0, good)]), {}, refuse) == good
    )
    assert asked == ["offline", "online"]
    asked.clear()
    with pytest.raises(OperationError) as raised:
        resolving._pylock_of(body, ("offline",), ("online",), output, Runner([(0, other), (0, other)]), {}, refuse)
    assert raised.value.code == "lock-failed" and "different versions" in str(raised.value)


def test_the_local_location_check_finds_what_the_whole_pattern_finds():
    """The words looked for first are in every match of the pattern: texts around each of them (and
    a real lock's shape, hashes and URLs, with none) get the pattern's own answer."""
    import random

    from tfgpu.lock import resolving

    pieces = [*resolving._LOCAL_WORDS, "x/tmp/", "-/home/", "/opt", "file", "127.0.0.", "local", "host", " ", "\n"]
    pieces += ["--hash=sha256:" + "0a" * 32, "https://files.pythonhosted.org/packages/ab/cd/x.whl", "absl-py==2.3.1"]
    chooser = random.Random(20261206)
    for _ in range(3000):
        text = "".join(chooser.choice(pieces) for _ in range(chooser.randrange(1, 12)))
        found, whole = resolving._local_location(text), resolving._LOCAL.search(text)
        assert (found and found.span()) == (whole and whole.span()), repr(text)
