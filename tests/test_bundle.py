"""Offline bundles, built by the real tool from a real local index (tests/localindex.py) and
installed with no index at all; the test marked ``network`` checks the tool's own wheels.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_tool, tool_environ
from test_lock_pip import leftovers

from tfgpu.lock.pip import lockfile as pip_lock

TARGET = ("--tf", "2.21", "--mode", "pip", "--python", "3.11", "--no-detect", "--platform", "linux-64")
DEAD_INDEX = "http://127.0.0.1:9/simple"


@pytest.fixture
def env(lock_env) -> dict[str, str]:
    return lock_env


@pytest.fixture(scope="module")
def built(tmp_path_factory, uv_cache, index_url) -> Path:
    """The bundle, built once for the module by the real tool, as ``lock_env`` has it run."""
    base = tmp_path_factory.mktemp("pip-bundle")
    env = tool_environ(base, uv_cache, TFGPU_INDEX_URL=index_url, TFGPU_BUNDLE_TOOL="0")
    out = base / "bundle"
    done = run_tool("bundle", *TARGET, "-o", str(out), "--json", env=env)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["wheels"] == 7 and summary["files"] == 12 and summary["bytes"] > 0
    # The document scripts read (contract), key for key in this order.
    assert list(summary) == [
        "bundle",
        "platform",
        "tensorflow",
        "python",
        "files",
        "wheels",
        "tool_wheels",
        "bytes",
        "mb",
    ]
    return out


@pytest.fixture
def bundle(tmp_path, built) -> Path:
    """The module's bundle, copied (not linked: tests damage its files) for the test to use or break."""
    return Path(shutil.copytree(built, tmp_path / "bundle"))


def offline(env: dict) -> dict:
    """No index reachable: uv offline, and any index it might try is a closed port."""
    return {**env, "UV_OFFLINE": "1", "TFGPU_INDEX_URL": DEAD_INDEX, "UV_INDEX_URL": DEAD_INDEX}


def test_bundle_holds_the_lock_every_wheel_and_a_manifest(bundle):
    manifest = json.loads((bundle / "bundle.json").read_text())
    lock = pip_lock.read(bundle / manifest["lock"])
    assert manifest["lock_sha256"] == lock.meta["sha256"]
    wheels = sorted(p.name for p in (bundle / "wheels").iterdir())
    assert len(wheels) == len(lock.pins()) == 7 and all(w.endswith(".whl") for w in wheels)
    assert {f"wheels/{w}" for w in wheels} <= set(manifest["files"])
    assert {"README.md", "install.sh", "pylock.linux-64.toml", manifest["lock"]} <= set(manifest["files"])
    assert not (bundle / ".tfgpu-bundle-partial").exists()
    assert "install.sh" in (bundle / "README.md").read_text()


def test_create_from_bundle_offline_reproduces_the_lock(tmp_path, bundle, env):
    prefix = tmp_path / "env"
    done = run_tool(
        "create", "--from-bundle", str(bundle), "--prefix", str(prefix), "--no-verify", "--json", env=offline(env)
    )
    assert done.returncode == 0, done.stderr
    freeze = subprocess.run(
        [sys.executable, "-m", "uv", "pip", "freeze", "--python", str(prefix / "bin" / "python")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    lock = pip_lock.read(bundle / json.loads((bundle / "bundle.json").read_text())["lock"])
    assert dict(line.split("==") for line in freeze.split()) == lock.pins()
    assert json.loads((prefix / "tfgpu-env.json").read_text())["offline"] is True


@pytest.mark.parametrize("damage", ["corrupt-wheel", "missing-wheel", "edited-lock", "no-manifest"])
def test_a_damaged_bundle_is_refused_and_nothing_installed(tmp_path, bundle, env, damage):
    wheel = sorted((bundle / "wheels").iterdir())[0]
    if damage == "corrupt-wheel":
        data = bytearray(wheel.read_bytes())
        data[len(data) // 2] ^= 0xFF
        wheel.write_bytes(bytes(data))
    elif damage == "missing-wheel":
        wheel.unlink()
    elif damage == "edited-lock":
        lock = next(bundle.glob("tfgpu-lock.*.txt"))
        lock.write_text(lock.read_text().replace("nvidia-cudnn-cu12==9.28.0.42", "nvidia-cudnn-cu12==9.28.0.43"))
    else:
        (bundle / "bundle.json").unlink()
    prefix = tmp_path / "env"
    done = run_tool(
        "create", "--from-bundle", str(bundle), "--prefix", str(prefix), "--no-verify", "--json", env=offline(env)
    )
    assert done.returncode == 3, done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["code"] == ("bundle-incomplete" if damage == "no-manifest" else "bundle-corrupt")
    if damage in ("corrupt-wheel", "missing-wheel"):
        assert wheel.name in error["message"]
    assert not prefix.exists() and leftovers(prefix) == []


@pytest.mark.skipif(not shutil.which("shellcheck"), reason="shellcheck is not installed")
def test_install_sh_passes_shellcheck(bundle):
    done = subprocess.run(["shellcheck", str(bundle / "install.sh")], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


def test_install_sh_builds_the_env_offline(tmp_path, bundle, env):
    """Without tool wheels (TFGPU_BUNDLE_TOOL=0) install.sh uses the tfgpu-install on PATH."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "tfgpu-install").write_text(f'#!/bin/sh\nexec {sys.executable} -m tfgpu "$@"\n')
    (bindir / "tfgpu-install").chmod(0o755)
    prefix = tmp_path / "my env"
    done = subprocess.run(
        [str(bundle / "install.sh"), str(prefix), "--no-verify"],
        capture_output=True,
        text=True,
        env={**offline(env), "PATH": f"{bindir}:{os.environ['PATH']}", "TFGPU_PYTHON": sys.executable},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (prefix / "tfgpu-env.json").is_file()
    wrong = subprocess.run(
        [str(bundle / "install.sh"), str(tmp_path / "other")],
        capture_output=True,
        text=True,
        env={**os.environ, "TFGPU_PYTHON": "/usr/bin/false"},
    )
    assert wrong.returncode != 0 and not (tmp_path / "other").exists()


def test_rebuilding_resumes_and_reuses_local_wheels(tmp_path, bundle, env, local_wheels):
    wheels = sorted((bundle / "wheels").iterdir())
    wheels[0].unlink()
    wheels[1].write_bytes(wheels[1].read_bytes()[:100])  # a damaged leftover is fetched again
    (bundle / "bundle.json").unlink()  # as a run interrupted mid-download leaves it
    (bundle / ".tfgpu-bundle-partial").write_text("")
    done = run_tool("bundle", *TARGET, "-o", str(bundle), "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert (
        run_tool(
            "create", "--from-bundle", str(bundle), "--prefix", str(tmp_path / "e"), "--dry-run", env=offline(env)
        ).returncode
        == 0
    )
    fresh = tmp_path / "reused"
    done = run_tool("bundle", *TARGET, "-o", str(fresh), env={**env, "TFGPU_WHEEL_DIRS": str(local_wheels)})
    assert done.returncode == 0, done.stderr
    tf = next((fresh / "wheels").glob("tensorflow-*.whl"))
    assert tf.stat().st_ino == (local_wheels / tf.name).stat().st_ino  # hard-linked, not downloaded


def test_bundle_refuses_a_foreign_directory_and_several_platforms(tmp_path, env):
    foreign = tmp_path / "data"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("x")
    done = run_tool("bundle", *TARGET, "-o", str(foreign), "--json", env=env)
    assert done.returncode == 3 and json.loads(done.stdout)["error"]["code"] == "target-not-empty"
    assert [p.name for p in foreign.iterdir()] == ["keep.txt"]
    done = run_tool("bundle", *TARGET, "--platform", "win-64", "-o", str(tmp_path / "b"), "--json", env=env)
    assert done.returncode == 2


@pytest.mark.network
@pytest.mark.slow
def test_the_tools_own_wheels_install_with_no_index(tmp_path):
    """The tool part of a bundle for this machine's Python: a venv gets tfgpu-install from it alone."""
    from tfgpu.lock.bundle.steps import add_tool
    from tfgpu.lock.platforms import PLATFORMS

    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    names = add_tool(tmp_path / "tool", PLATFORMS["linux-64"], python)
    assert names[0].startswith("tfgpu_install-") and any(n.startswith("uv-") for n in names)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")} | {
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_CACHE_DIR": os.environ["PIP_CACHE_DIR"],
    }
    done = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--isolated",
            "--no-index",
            "--find-links",
            str(tmp_path / "tool"),
            "tfgpu-install",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    version = subprocess.run([str(venv / "bin" / "tfgpu-install"), "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and "tfgpu-install" in version.stdout
    # install.sh makes the tool's venv with the bundle's own uv (no pip, no ensurepip, no index), then
    # hands over to `create --from-bundle`, which finds this half-bundle incomplete: exit 3.
    from tfgpu import __version__
    from tfgpu.lock.bundle.files import install_script

    (tmp_path / "install.sh").write_text(install_script(python, __version__, "2.21.0", "linux-64"))
    (tmp_path / "install.sh").chmod(0o755)
    tool_env = tmp_path / "tool-env"
    done = subprocess.run(
        [str(tmp_path / "install.sh"), str(tmp_path / "env")],
        capture_output=True,
        text=True,
        env=env
        | {
            "TFGPU_PYTHON": sys.executable,
            "TFGPU_TOOL_ENV": str(tool_env),
            "UV_OFFLINE": "1",
            "UV_INDEX_URL": "http://127.0.0.1:9/simple",
        },
        timeout=600,
    )
    assert done.returncode == 3 and "bundle-incomplete" in done.stdout + done.stderr, done.stderr[-2000:]
    assert (tool_env / "bin" / "tfgpu-install").is_file() and not (tool_env / "bin" / "pip").exists()


@pytest.mark.parametrize("companion", ["torch", "torch>=2.10"])
def test_a_bundle_whose_lock_records_an_unpinned_companion_is_refused(tmp_path, bundle, env, companion):
    """The bundle's lock edited to record a ``--with`` companion by name or range, its checksum and
    the manifest resealed (anyone can): a lock pins, so the bundle is refused as ``lock-malformed``
    (exit 2) before anything is installed."""
    import hashlib

    manifest_path = bundle / "bundle.json"
    manifest = json.loads(manifest_path.read_text())
    lock_path = bundle / manifest["lock"]
    parsed = pip_lock.read(lock_path)
    meta = {key: value for key, value in parsed.meta.items() if key != "sha256"}
    meta["resolution"] = {**meta["resolution"], "companions": [companion]}
    lock_path.write_text(pip_lock.render(meta, parsed.body, str(lock_path)), encoding="utf-8")
    data = lock_path.read_bytes()
    manifest["files"][manifest["lock"]] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    manifest["lock_sha256"] = pip_lock._digest(meta, parsed.body)
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")
    prefix = tmp_path / "env"
    done = run_tool(
        "create", "--from-bundle", str(bundle), "--prefix", str(prefix), "--no-verify", "--json", env=offline(env)
    )
    assert done.returncode == 2, done.stdout + done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "lock-malformed" and repr(companion) in error["message"]
    assert not prefix.exists() and leftovers(prefix) == []
