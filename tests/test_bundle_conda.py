"""Offline conda bundles (`bundle --mode conda`), built by the real tool from the local conda channel
(tests/condachannel.py) and the local PEP 503 index (tests/localindex.py), then installed with
`create --from-bundle` after the channel is deleted and with no index reachable: the bundle alone.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_tool

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
DEAD_INDEX = "http://127.0.0.1:9/simple"


def _env(root: Path, index: str) -> dict[str, str]:
    return dict(
        os.environ,
        TFGPU_INDEX_URL=index,
        TFGPU_CACHE_DIR=str(root / "cache"),
        TFGPU_LOG_DIR=str(root / "logs"),
        HOME=str(root),
        TFGPU_BUNDLE_TOOL="0",
    )


def offline(env: dict) -> dict:
    """No index reachable and a fresh cache: uv offline, any index a closed port."""
    return {**env, "UV_OFFLINE": "1", "TFGPU_INDEX_URL": DEAD_INDEX, "UV_INDEX_URL": DEAD_INDEX}


@pytest.fixture(scope="module")
def built(tmp_path_factory, lock_channel, lock_index) -> tuple[Path, dict]:
    """A TF 2.13 linux-64 conda bundle, built from a copy of the channel that is then deleted."""
    root = tmp_path_factory.mktemp("conda-bundle")
    channel = root / "channel-copy"
    shutil.copytree(lock_channel, channel)
    out = root / "bundle"
    done = run_tool(
        "bundle",
        "--tf",
        "2.13",
        "--mode",
        "conda",
        "--python",
        PY,
        "--no-detect",
        "--platform",
        "linux-64",
        "--channel",
        str(channel),
        "-o",
        str(out),
        "--json",
        env=_env(root, lock_index),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    shutil.rmtree(channel)
    return out, json.loads(done.stdout)


@pytest.fixture
def bundle(built) -> Path:
    return built[0]


@pytest.fixture
def env(tmp_path, lock_index) -> dict[str, str]:
    return _env(tmp_path, lock_index)


def locked(bundle: Path):
    from conda_lock.lockfile import parse_conda_lock_file

    lockfile = parse_conda_lock_file(bundle / "conda-lock.yml")
    return (
        [p for p in lockfile.package if p.manager == "conda"],
        [p for p in lockfile.package if p.manager == "pip"],
        lockfile.metadata.custom_metadata,
    )


def test_bundle_holds_the_lock_a_channel_the_wheels_and_a_manifest(built):
    bundle, summary = built
    conda, pip, custom = locked(bundle)
    manifest = json.loads((bundle / "bundle.json").read_text())
    assert manifest["mode"] == "conda" and manifest["lock"] == "conda-lock.yml"
    assert manifest["lock_sha256"] == custom["tfgpu_packages_sha256"]
    assert {p.name for p in conda} == {"python", "cudatoolkit", "cudnn"}
    for package in conda:
        subdir, name = package.url.rsplit("/", 2)[-2:]
        path = bundle / "channel" / subdir / name
        assert hashlib.sha256(path.read_bytes()).hexdigest() == package.hash.sha256
        assert f"channel/{subdir}/{name}" in manifest["files"]
    assert (bundle / "channel" / "linux-64" / "repodata.json").is_file()
    assert (bundle / "channel" / "noarch" / "repodata.json").is_file()
    wheels = sorted(p.name for p in (bundle / "wheels").iterdir())
    assert len(wheels) == len(pip) == 2 and all(f"wheels/{w}" in manifest["files"] for w in wheels)
    assert {"README.md", "install.sh", "conda-lock.yml"} <= set(manifest["files"])
    assert not (bundle / ".tfgpu-bundle-partial").exists()
    assert not [p for p in bundle.rglob("*") if p.name.endswith((".part", ".verified"))]
    assert (summary["conda_packages"], summary["wheels"], summary["tool_wheels"]) == (3, 2, 0)
    assert list(summary) == [
        "bundle",
        "mode",
        "platform",
        "tensorflow",
        "python",
        "files",
        "conda_packages",
        "wheels",
        "tool_wheels",
        "bytes",
        "mb",
    ]  # the document scripts read (contract)
    assert "channel/" in (bundle / "README.md").read_text()


def test_create_from_the_bundle_alone_reproduces_the_lock(tmp_path, bundle, env):
    prefix = tmp_path / "env"
    done = run_tool(
        "create", "--from-bundle", str(bundle), "--prefix", str(prefix), "--no-verify", "--json", env=offline(env)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    conda, pip, _ = locked(bundle)
    meta = [json.loads(p.read_text()) for p in (prefix / "conda-meta").glob("*-*.json")]
    assert {(m["name"], m["version"], m["sha256"]) for m in meta} == {(p.name, p.version, p.hash.sha256) for p in conda}
    assert all(m["url"].startswith((bundle / "channel").as_uri()) for m in meta)
    marker = json.loads((prefix / "tfgpu-env.json").read_text())
    installed = set(marker["installed"].items())
    locked_pip = {(p.name, p.version) for p in pip}
    assert locked_pip <= installed and {name for name, _ in installed - locked_pip} <= {"pip"}
    assert marker["offline"] is True
    assert (prefix / "etc" / "conda" / "activate.d" / "tfgpu-cuda.sh").is_file()


def test_a_damaged_package_in_the_channel_is_refused_and_nothing_installed(tmp_path, bundle, env):
    copy = tmp_path / "bundle"
    shutil.copytree(bundle, copy)
    package = next((copy / "channel" / "linux-64").glob("cudnn-*.tar.bz2"))
    data = bytearray(package.read_bytes())
    data[len(data) // 2] ^= 0xFF
    package.write_bytes(bytes(data))
    prefix = tmp_path / "env"
    done = run_tool(
        "create", "--from-bundle", str(copy), "--prefix", str(prefix), "--no-verify", "--json", env=offline(env)
    )
    assert done.returncode == 3, done.stdout + done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "bundle-corrupt" and package.name in error["message"]
    assert not prefix.exists()
    assert not [p for p in tmp_path.iterdir() if ".tfgpu-" in p.name]


def test_selectors_that_disagree_with_the_bundle_are_a_usage_error(tmp_path, bundle, env):
    done = run_tool(
        "create",
        "--from-bundle",
        str(bundle),
        "--prefix",
        str(tmp_path / "env"),
        "--tf",
        "2.16",
        "--json",
        env=offline(env),
    )
    assert done.returncode == 2 and json.loads(done.stdout)["error"]["code"] == "conflicting-options"
    done = run_tool(
        "create",
        "--from-bundle",
        str(bundle),
        "--prefix",
        str(tmp_path / "env"),
        "--channel",
        "conda-forge",
        "--json",
        env=offline(env),
    )
    assert done.returncode == 2 and json.loads(done.stdout)["error"]["code"] == "conflicting-options"
    assert not (tmp_path / "env").exists()


def test_a_dry_run_installs_from_the_bundle_only(tmp_path, bundle, env):
    done = run_tool(
        "create",
        "--from-bundle",
        str(bundle),
        "--prefix",
        str(tmp_path / "env"),
        "--dry-run",
        "--json",
        env=offline(env),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    plan = json.loads(done.stdout)
    install = next(step for step in plan["steps"] if "--require-hashes" in (step.get("argv") or []))
    assert install["argv"][-4:] == ["--find-links", str(bundle / "wheels"), "--offline", "--no-index"]
    assert "bundle's channel" in plan["steps"][0]["title"]
    assert not (tmp_path / "env").exists()


@pytest.mark.skipif(not shutil.which("shellcheck"), reason="shellcheck is not installed")
def test_install_sh_passes_shellcheck(bundle):
    done = subprocess.run(["shellcheck", str(bundle / "install.sh")], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout


@pytest.mark.slow  # install.sh is one script for every mode (lock/bundle/files.py): the fast tier holds
# it handing over to the tool on PATH (test_bundle.py::test_install_sh_builds_the_env_offline) and
# the conda bundle installing offline (test_create_from_the_bundle_alone_reproduces_the_lock)
def test_install_sh_builds_the_conda_env_from_the_bundle_alone(tmp_path, bundle, env):
    """Without tool wheels in the bundle (TFGPU_BUNDLE_TOOL=0) install.sh uses the tfgpu-install on PATH."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "tfgpu-install").write_text(f'#!/bin/sh\nexec {sys.executable} -m tfgpu "$@"\n')
    (bindir / "tfgpu-install").chmod(0o755)
    prefix = tmp_path / "conda env"
    done = subprocess.run(
        [str(bundle / "install.sh"), str(prefix), "--no-verify"],
        capture_output=True,
        text=True,
        env={**offline(env), "PATH": f"{bindir}:{os.environ['PATH']}", "TFGPU_PYTHON": sys.executable},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    marker = json.loads((prefix / "tfgpu-env.json").read_text())
    assert marker["mode"] == "conda" and marker["installed"]["tensorflow"] == "2.13.1"
    assert (prefix / "etc" / "conda" / "activate.d" / "tfgpu-cuda.sh").is_file()


def test_channel_with_pip_mode_and_system_mode_are_refused(tmp_path, env):
    base = (
        "bundle",
        "--tf",
        "2.13",
        "--python",
        PY,
        "--no-detect",
        "--platform",
        "linux-64",
        "-o",
        str(tmp_path / "b"),
        "--json",
    )
    done = run_tool(*base, "--mode", "pip", "--channel", "conda-forge", env=env)
    assert done.returncode == 2 and json.loads(done.stdout)["error"]["code"] == "conflicting-options"
    done = run_tool(*base, "--mode", "system", env=env)
    assert done.returncode == 2 and json.loads(done.stdout)["error"]["code"] == "mode-not-bundlable"
    assert not (tmp_path / "b").exists()


def test_a_package_that_fails_its_sha256_is_not_left_in_the_bundle(tmp_path):
    from tfgpu.errors import OperationError
    from tfgpu.lock.bundle.conda_bundle import copy_package

    source = tmp_path / "src" / "linux-64" / "cudnn-1-h0_0.tar.bz2"
    source.parent.mkdir(parents=True)
    source.write_bytes(b"package bytes")
    dest = tmp_path / "bundle" / "channel" / "linux-64"
    with pytest.raises(OperationError) as caught:
        copy_package(source.as_uri(), "0" * 64, dest)
    assert caught.value.code == "checksum-mismatch" and list(dest.iterdir()) == []
    good = hashlib.sha256(b"package bytes").hexdigest()
    assert copy_package(source.as_uri(), good, dest).read_bytes() == b"package bytes"
    assert [p.name for p in dest.iterdir()] == [source.name]
