"""`lock --mode conda` and `create --from-lock conda-lock.yml`, for real: rattler solves against the
local conda channel of tests/condachannel.py, uv locks the PyPI part against a local PEP 503 index
(tests/localindex.py) standing in for PyPI, conda-lock's own parser and CLI read the result, and
the install goes through rattler and uv. Only the channel and the index are stand-ins (no conda
channel or PyPI at test time).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_tool

PY = f"{sys.version_info.major}.{sys.version_info.minor}"


@pytest.fixture(scope="module")
def channel(lock_channel) -> Path:
    return lock_channel


@pytest.fixture(scope="module")
def index(lock_index) -> str:
    return lock_index


@pytest.fixture
def env(tmp_path, index) -> dict[str, str]:
    return dict(
        os.environ,
        TFGPU_INDEX_URL=index,
        TFGPU_CACHE_DIR=str(tmp_path / "cache"),
        TFGPU_LOG_DIR=str(tmp_path / "logs"),
        HOME=str(tmp_path),
    )


def lock(tmp_path, channel, env, *extra, tf="2.13", platforms=("linux-64",), python=PY):
    out = tmp_path / "conda-lock.yml"
    argv = [
        "lock",
        "--tf",
        tf,
        "--mode",
        "conda",
        "--python",
        python,
        "--no-detect",
        "--channel",
        str(channel),
        "-o",
        str(out),
        *extra,
    ]
    for platform in platforms:
        argv += ["--platform", platform]
    return run_tool(*argv, env=env), out


@pytest.fixture
def default_lock(tmp_path, tmp_path_factory, channel, index) -> Path:
    """The default lock (TF 2.13, linux-64), made once a session by the real tool (tests/madelocks.py)
    and copied here: the tests that read, install or edit it are not about making it (what a lock
    run says and writes is held by ``test_what_a_conda_lock_run_says_it_wrote``, other targets and
    options by the tests that lock them)."""
    import madelocks

    return madelocks.conda_lock(tmp_path_factory, tmp_path / "conda-lock.yml", channel, index)


def parsed(path: Path):
    from conda_lock.lockfile import parse_conda_lock_file

    return parse_conda_lock_file(path)


def test_what_a_conda_lock_run_says_it_wrote(tmp_path, channel, env):
    """``lock --json`` gives one document for the one file (contract); without it, one line says
    where the file is and how to install it."""
    done, out = lock(tmp_path, channel, env, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(done.stdout)
    assert list(document) == ["lock"] and list(document["lock"]) == ["path", "platforms", "packages", "sha256"]
    assert document["lock"]["path"] == str(out) and document["lock"]["platforms"] == ["linux-64"]
    assert document["lock"]["packages"] == 5
    done, out = lock(tmp_path, channel, env)
    assert done.returncode == 0 and done.stdout == ""
    said = " ".join(done.stderr.split())
    assert (
        f"{out}: 5 packages for linux-64 (install: tfgpu-install create --from-lock {out} --name N; "
        "conda-lock reads it too)"
    ) in said


def test_conda_locks_own_parser_reads_it_and_its_cli_renders_it(tmp_path, env, default_lock):
    out = default_lock
    lockfile = parsed(out)
    conda = {p.name: p for p in lockfile.package if p.manager == "conda"}
    pip = {p.name: p for p in lockfile.package if p.manager == "pip"}
    assert set(conda) == {"python", "cudatoolkit", "cudnn"} and conda["cudnn"].version == "8.9.7.29"
    assert set(pip) == {"tensorflow", "numpy-stub"} and pip["tensorflow"].version == "2.13.1"
    assert all(p.hash.sha256 for p in lockfile.package)
    meta = json.loads(lockfile.metadata.custom_metadata["tfgpu_resolution.linux-64"])
    assert (meta["tensorflow"], meta["cuda"], meta["cudnn"], meta["min_driver"]) == (
        "2.13.1",
        "11.8",
        "8.6",
        "450.80.02",
    )
    rendered = subprocess.run(
        [
            str(Path(sys.executable).parent / "conda-lock"),
            "render",
            "-k",
            "explicit",
            "--platform",
            "linux-64",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert rendered.returncode == 0, rendered.stderr
    explicit = (tmp_path / "conda-linux-64.lock").read_text()
    assert "@EXPLICIT" in explicit and conda["cudatoolkit"].url in explicit


def test_tf_source_conda_forge_locks_tensorflow_from_the_channel_and_nothing_from_pypi(tmp_path, channel, env):
    """The lock takes the resolver's decision, as plan and create do: TensorFlow's conda build."""
    done, out = lock(tmp_path, channel, env, "--tf-source", "conda-forge")
    assert done.returncode == 0, done.stdout + done.stderr
    lockfile = parsed(out)
    assert {p.name for p in lockfile.package if p.manager == "pip"} == set()
    conda = {p.name: p for p in lockfile.package if p.manager == "conda"}
    assert conda["tensorflow"].version == "2.13.1" and "cudatoolkit" in conda
    meta = json.loads(lockfile.metadata.custom_metadata["tfgpu_resolution.linux-64"])
    assert meta["conda_specs"][-1] == "tensorflow ==2.13.1 cuda*" and meta["requirements"] == []
    prefix = tmp_path / "env"
    done = run_tool("create", "--from-lock", str(out), "--prefix", str(prefix), "--no-verify", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    marker = json.loads((prefix / "tfgpu-env.json").read_text())
    assert marker["tf_source"] == "conda-forge" and any(p.startswith("tensorflow=2.13.1=") for p in marker["conda"])
    checked = run_tool("lock", "--check", str(out), "--json", env=env)
    assert checked.returncode == 0 and json.loads(checked.stdout)["current"], checked.stdout + checked.stderr


def test_conda_locks_own_models_and_writer_agree_with_our_file(tmp_path, env, default_lock):
    """Written directly in conda-lock's v1 format (importing conda-lock costs ~2 s): its parser reads
    the file into its models, its own writer writes those models again, and the result reads back
    equal — field for field, metadata included (package order aside)."""
    from conda_lock.lockfile import write_conda_lock_file

    out = default_lock
    ours = parsed(out)
    again = tmp_path / "rewritten.yml"
    write_conda_lock_file(ours, again, metadata_choices=set())
    theirs = parsed(again)

    def normal(lockfile) -> dict:  # conda-lock's writer orders packages its own way
        dump = lockfile.model_dump()
        dump["package"].sort(key=lambda p: (p["platform"], p["manager"], p["name"]))
        return dump

    assert normal(theirs) == normal(ours)
    assert len(ours.package) == out.read_text().count("\n- name: ")


def test_a_lock_made_without_a_gpu_targets_the_requested_cuda(tmp_path, channel, env, default_lock):
    """No driver here: __cuda is the build's CUDA (11.8; 12.3 for TF 2.16.1), or the --driver's — never a default."""
    assert (
        json.loads(parsed(default_lock).metadata.custom_metadata["tfgpu_resolution.linux-64"])["virtual_cuda"] == "11.8"
    )
    done, out = lock(tmp_path, channel, env, "--driver", "535.104.05", tf="2.16.1")
    assert done.returncode == 0, done.stderr
    lockfile = parsed(out)
    assert json.loads(lockfile.metadata.custom_metadata["tfgpu_resolution.linux-64"])["virtual_cuda"] == "12.2"
    assert {p.name: p.version for p in lockfile.package}["cuda-version"] == "12.3"


def test_create_from_the_lock_reproduces_exactly_the_locked_set(tmp_path, env, default_lock):
    out = default_lock
    prefix = tmp_path / "env"
    done = run_tool("create", "--from-lock", str(out), "--prefix", str(prefix), "--no-verify", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    lockfile = parsed(out)
    locked_conda = {(p.name, p.version, p.url) for p in lockfile.package if p.manager == "conda"}
    meta = [json.loads(p.read_text()) for p in (prefix / "conda-meta").glob("*-*.json")]
    assert {(m["name"], m["version"], m["url"]) for m in meta} == locked_conda
    locked_pip = {(p.name, p.version) for p in lockfile.package if p.manager == "pip"}
    marker = json.loads((prefix / "tfgpu-env.json").read_text())
    installed = {(name, version) for name, version in marker["installed"].items()}
    assert locked_pip <= installed and installed - locked_pip <= {("pip", v) for _, v in installed}
    assert (prefix / "etc" / "conda" / "activate.d" / "tfgpu-cuda.sh").is_file()


def test_an_edited_lock_is_refused_before_anything_is_installed(tmp_path, env, default_lock):
    out = default_lock
    text = out.read_text()
    sha = next(p.hash.sha256 for p in parsed(out).package if p.name == "cudnn")
    out.write_text(text.replace(sha, "ab" * 32))
    done = run_tool("create", "--from-lock", str(out), "--prefix", str(tmp_path / "env"), "--json", env=env)
    assert done.returncode == 2
    assert json.loads(done.stdout)["error"]["code"] == "lock-modified"
    assert not (tmp_path / "env").exists()


def test_a_tampered_hash_with_a_forged_checksum_is_caught_against_the_channel(tmp_path, env, default_lock):
    """Edit a package's sha256 and recompute the lock's own checksum: the channel's record disagrees."""
    from conda_lock.lockfile import write_conda_lock_file

    from tfgpu.lock.conda.write import model_digest

    out = default_lock
    lockfile = parsed(out)
    for package in lockfile.package:
        if package.name == "cudatoolkit":
            package.hash.sha256 = "1" * 64
    lockfile.metadata.custom_metadata["tfgpu_packages_sha256"] = model_digest(lockfile)
    write_conda_lock_file(lockfile, out, metadata_choices=set())
    done = run_tool("create", "--from-lock", str(out), "--prefix", str(tmp_path / "env"), "--json", env=env)
    assert done.returncode == 3, done.stdout + done.stderr
    assert json.loads(done.stdout)["error"]["code"] == "lock-hash-mismatch"
    assert not (tmp_path / "env").exists()
    assert not [p for p in tmp_path.iterdir() if ".tfgpu-" in p.name]


def test_a_truncated_lock_and_another_tools_lock_are_refused(tmp_path, env, default_lock):
    out = default_lock
    text = out.read_text()
    out.write_text(text[: len(text) // 2])
    done = run_tool("create", "--from-lock", str(out), "--prefix", str(tmp_path / "env"), "--json", env=env)
    assert (done.returncode, json.loads(done.stdout)["error"]["code"]) in ((3, "lock-corrupt"), (2, "lock-modified"))
    out.write_text(text.replace("tfgpu_format: '2'", "tfgpu_format: '999'"))
    done = run_tool("create", "--from-lock", str(out), "--prefix", str(tmp_path / "env"), "--json", env=env)
    assert done.returncode == 3 and json.loads(done.stdout)["error"]["code"] == "lock-format-unsupported"
    assert not (tmp_path / "env").exists()


def test_several_platforms_in_one_file_and_cpu_only_needs_allow_cpu(tmp_path, channel, env):
    done, _ = lock(tmp_path, channel, env, platforms=("linux-64", "linux-aarch64"))
    assert done.returncode == 3
    assert "no-gpu-build" in done.stdout + done.stderr
    done, out = lock(tmp_path, channel, env, "--allow-cpu", platforms=("linux-64", "linux-aarch64"))
    assert done.returncode == 0, done.stdout + done.stderr
    lockfile = parsed(out)
    assert lockfile.metadata.platforms == ["linux-64", "linux-aarch64"]
    cpu = json.loads(lockfile.metadata.custom_metadata["tfgpu_resolution.linux-aarch64"])
    assert cpu["cpu_only"] is True and cpu["virtual_cuda"] is None
    assert {p.name for p in lockfile.package if p.platform == "linux-aarch64" and p.manager == "conda"} == {"python"}


def test_a_platform_typo_is_a_usage_error(tmp_path, channel, env):
    done, out = lock(tmp_path, channel, env, "--json", platforms=("linux64",))
    assert done.returncode == 2
    assert "linux-64" in json.loads(done.stdout)["error"]["message"] + " ".join(
        json.loads(done.stdout)["error"]["alternatives"]
    )
    assert not out.exists()


def test_linux_and_native_windows_in_one_file(tmp_path, channel, env):
    """TF 2.10, the last native Windows GPU build: win-64 is solved with __win and the build's __cuda."""
    done, out = lock(tmp_path, channel, env, tf="2.10", platforms=("linux-64", "win-64"), python="3.10")
    assert done.returncode == 0, done.stdout + done.stderr
    lockfile = parsed(out)
    assert lockfile.metadata.platforms == ["linux-64", "win-64"]
    for platform, os_name in (("linux-64", "linux"), ("win-64", "windows")):
        conda = {p.name: p for p in lockfile.package if p.platform == platform and p.manager == "conda"}
        assert conda["cudatoolkit"].version == "11.2.2" and f"/{platform}/" in conda["cudnn"].url
        meta = json.loads(lockfile.metadata.custom_metadata[f"tfgpu_resolution.{platform}"])
        assert (meta["tensorflow"], meta["virtual_cuda"], meta["os"]) == ("2.10.1", "11.2", os_name)


def test_linux_and_apple_silicon_with_tensorflow_metal(tmp_path, channel, env):
    done, out = lock(tmp_path, channel, env, platforms=("linux-64", "osx-arm64"))
    assert done.returncode == 0, done.stdout + done.stderr
    lockfile = parsed(out)
    mac = {(p.manager, p.name) for p in lockfile.package if p.platform == "osx-arm64"}
    assert mac == {("conda", "python"), ("pip", "tensorflow"), ("pip", "tensorflow-metal"), ("pip", "numpy-stub")}
    meta = json.loads(lockfile.metadata.custom_metadata["tfgpu_resolution.osx-arm64"])
    assert meta["accelerator"] == "metal" and meta["virtual_cuda"] is None
