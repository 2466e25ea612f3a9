"""A check installs nothing, so no ``lock --check`` output says "Nothing was installed." — while a
``create --from-lock`` refused for the same file still does. Every ``lock --check`` failure these
tests can produce, on real locks written by the tool from a real local index and a local conda
channel (tests/localindex.py, tests/condachannel.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import localindex
import pytest
from conftest import run_tool

from tfgpu.lock.pip import lockfile as pip_lock

SENTENCE = "nothing was installed"
TARGET = ("--tf", "2.21", "--mode", "pip", "--python", "3.11", "--platform", "linux-64", "--no-detect")


@pytest.fixture(scope="module")
def pip_env(local_wheels, tmp_path_factory):
    """(environment, a pip lock) from a local index that stays up for the module."""
    base = tmp_path_factory.mktemp("said")
    root = localindex.build_index(local_wheels, base / "index")
    with localindex.Server(root) as url:
        env = dict(os.environ, TFGPU_INDEX_URL=url, TFGPU_CACHE_DIR=str(base / "cache"))
        lock = base / "team.txt"
        done = run_tool("lock", *TARGET, "-o", str(lock), env=env)
        assert done.returncode == 0, done.stderr
        yield env, lock


def _resigned(path: Path, meta_change=None, body_change=None) -> None:
    """Edit a lock and sign it again, as someone who knows the format would (the checksum proves nothing)."""
    lock = pip_lock.read(path)
    meta = {key: value for key, value in lock.meta.items() if key != "sha256"}
    meta = meta_change(meta) if meta_change else meta
    body = body_change(lock.body) if body_change else lock.body
    path.write_text(pip_lock.render(meta, body, str(path)))


def _pip_cases(original: Path, directory: Path) -> dict[str, Path]:
    """One broken copy of the lock per failure a reader or a check can raise."""
    text = original.read_text()
    cases = {}

    def case(name: str, content: str) -> Path:
        path = directory / f"{name}.txt"
        path.write_text(content)
        cases[name] = path
        return path

    case("modified", text.replace("9.28.0.42", "9.28.0.43"))
    case("no-header", "numpy==2.0.0\n")
    case("other-format", text.replace('"format":', '"format_":', 1))
    _resigned(case("option-line", text), body_change=lambda body: "--index-url http://example.invalid/\n" + body)
    _resigned(
        case("bad-record", text),
        meta_change=lambda meta: meta | {"resolution": meta["resolution"] | {"python": "3.11; rm -rf /"}},
    )
    _resigned(
        case("bad-index", text),
        meta_change=lambda meta: meta | {"index": "http://203.0.113.9/simple"},
    )
    _resigned(case("another-platform", text), meta_change=lambda meta: meta | {"platform": "linux-aarch64"})
    cases["absent"] = directory / "absent.txt"
    return cases


def test_no_pip_lock_check_failure_says_nothing_was_installed(pip_env, tmp_path):
    env, original = pip_env
    cases = _pip_cases(original, tmp_path)
    codes = {}
    for name, path in cases.items():
        for json_flag in ((), ("--json",)):
            done = run_tool("lock", "--check", str(path), *json_flag, env=env)
            assert done.returncode != 0, (name, done.stdout)
            said = (done.stdout + done.stderr).lower()
            assert SENTENCE not in said, (name, done.stdout, done.stderr)
            if json_flag:
                document = json.loads(done.stdout)
                codes[name] = document.get("error", {}).get("code", "not current")
    # The failures are the ones meant (a case that failed some other way would prove little).
    assert codes["modified"] == "lock-modified" and codes["no-header"] == "lock-malformed"
    assert codes["option-line"] == "lock-has-options" and codes["bad-record"] == "lock-malformed"
    assert codes["absent"] == "lock-unreadable" and codes["bad-index"] == "insecure-url"


def test_a_stale_check_and_a_project_check_do_not_say_it_either(pip_env, tmp_path, monkeypatch):
    env, original = pip_env
    monkeypatch.chdir(tmp_path)
    project = tmp_path / "tfgpu.toml"
    project.write_text('tf = "2.20"\nplatforms = ["linux-64", "linux-aarch64"]\n')
    walk = {key: value for key, value in env.items() if key != "TFGPU_PROJECT_FILE"}
    runs = [
        run_tool("lock", "--check", str(original), "--tf", "2.20", env=env),  # wanted: exit 1
        run_tool("lock", "--check", env=walk),  # no lock the project describes: exit 2
        run_tool("lock", "--check", env=env),  # no file, no project: exit 2
    ]
    (tmp_path / "tfgpu-lock.linux-64.txt").write_text(original.read_text())
    runs.append(run_tool("lock", "--check", env=walk))  # stale and one missing: exit 1
    assert [done.returncode for done in runs] == [1, 2, 2, 1]
    for done in runs:
        assert SENTENCE not in (done.stdout + done.stderr).lower(), done.stdout + done.stderr


def test_an_install_refused_for_the_same_lock_still_says_it(pip_env, tmp_path):
    env, original = pip_env
    cases = _pip_cases(original, tmp_path)
    for name in ("modified", "option-line", "bad-record", "another-platform"):
        done = run_tool("create", "--from-lock", str(cases[name]), "--prefix", str(tmp_path / name), env=env)
        assert done.returncode in (2, 3), (name, done.stderr)
        assert done.stderr.count("Nothing was installed.") == 1, (name, done.stderr)
        assert not (tmp_path / name).exists()


def test_no_conda_lock_check_failure_says_nothing_was_installed(tmp_path, tmp_path_factory, lock_channel, lock_index):
    import madelocks

    env = dict(os.environ, TFGPU_INDEX_URL=lock_index, TFGPU_CACHE_DIR=str(tmp_path / "cache"), HOME=str(tmp_path))
    # The real lock, made once a session (tests/madelocks.py): its checks are the subject here.
    path = madelocks.conda_lock(tmp_path_factory, tmp_path / "conda-lock.yml", lock_channel, lock_index)
    text = path.read_text()
    broken = {
        "corrupt.yml": "version: 1\nmetadata: {}\npackage: 3\n",
        "edited.yml": text.replace("sha256: ", "sha256: 0", 1),
        "foreign.yml": text.replace("tfgpu_format", "tfgpu_format_"),
        "stale.yml": text.replace(text.split("content_hash:")[1].split("linux-64:")[1].split()[0], "f" * 64),
        "absent.yml": None,
    }
    codes = {}
    for name, content in broken.items():
        target = tmp_path / name
        if content is not None:
            target.write_text(content)
        done = run_tool("lock", "--check", str(target), "--json", env=env)
        assert done.returncode != 0, name
        codes[name] = json.loads(done.stdout).get("error", {}).get("code", "not current")
        human = run_tool("lock", "--check", str(target), env=env)
        for said in (done, human):
            assert SENTENCE not in (said.stdout + said.stderr).lower(), (name, said.stdout, said.stderr)
    assert codes == {
        "corrupt.yml": "lock-corrupt",
        "edited.yml": "lock-modified",
        "foreign.yml": "lock-format-unsupported",
        "stale.yml": "not current",
        "absent.yml": "lock-unreadable",
    }
    refused = run_tool("create", "--from-lock", str(tmp_path / "edited.yml"), "--prefix", str(tmp_path / "e"), env=env)
    assert refused.returncode == 2 and refused.stderr.count("Nothing was installed.") == 1, refused.stderr
