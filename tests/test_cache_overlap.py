"""``cache clean`` and ``cache prune`` never delete a file of an env, whatever the settings say.

``TFGPU_ENVS_DIR`` inside ``TFGPU_CACHE_DIR`` under a kind's own name (both documented settings)
puts the envs where a clean deletes every file and ``uv cache clean`` empties the ``uv`` directory
whole; so both commands are refused before anything is removed (``tfgpu.cache.guard``), for every
kind, and the env's tree hashes the same after. The envs are real: a venv made by Python's
``venv``, the layout and real ELF libraries of tests/envtree.py, the tool's activation and a
marker written for its real path. uv is the real one. A chain of directories deeper than Python's
recursion limit and PATH_MAX (``DEEP``) is cleaned without recursion.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import run_tool

from tfgpu.cache.survey import KINDS

SITE = "lib/python3.11/site-packages"


@pytest.fixture(scope="module")
def env_template(tmp_path_factory) -> Path:
    """One real env, copied into each place a test needs (a venv is cheap, the ELF libraries are not)."""
    import envtree
    import wheelhouse

    if not wheelhouse.have_compiler():
        pytest.skip("gcc is needed to build the test shared libraries")
    prefix = tmp_path_factory.mktemp("template") / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True)
    envtree.make_env(prefix, python="3.11")
    return prefix


def place_env(template: Path, prefix: Path) -> Path:
    """A copy of the template env at ``prefix``, with the tool's marker made for that very path."""
    from tfgpu.envs import marker

    shutil.copytree(template, prefix, symlinks=True)
    marker.write(
        prefix,
        env_id=secrets.token_hex(16),
        made_for=os.path.realpath(prefix),
        fields={"name": prefix.name, "mode": "pip", "tensorflow": "2.21.0", "python": "3.11", "engine": "uv"},
    )
    return prefix


def tree(root: Path) -> dict[str, str]:
    """Every entry under ``root``: a file's sha256, a link's target, a directory's mark."""
    found = {}
    for directory, names, files in os.walk(root):
        for name in names:
            path = Path(directory, name)
            found[str(path.relative_to(root))] = f"link:{os.readlink(path)}" if path.is_symlink() else "dir"
        for name in files:
            path = Path(directory, name)
            if path.is_symlink():
                found[str(path.relative_to(root))] = f"link:{os.readlink(path)}"
            else:
                found[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def filled_cache(root: Path) -> None:
    """The tool's cache (tagged) with something in every kind a clean would remove."""
    from tfgpu.doors.paths import tag_cache

    tag_cache(root)
    for kind in KINDS:
        (root / kind).mkdir(exist_ok=True)
    (root / "data" / "tables-old.bin").write_bytes(b"x" * 4096)
    (root / "downloads" / "cudnn.tar.xz.part").write_bytes(b"y" * 4096)


@pytest.mark.parametrize("verb", ["clean", "prune"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_envs_dir_under_a_kind_is_refused_and_every_env_file_stays(tmp_path, tool_env, env_template, kind, verb):
    cache = tmp_path / "cache"
    filled_cache(cache)
    envs = cache / kind
    prefix = place_env(env_template, envs / "work")
    env = {**tool_env, "TFGPU_CACHE_DIR": str(cache), "TFGPU_ENVS_DIR": str(envs), "TFGPU_UV_CACHE": "own"}
    before = tree(prefix)
    assert len(before) > 50
    done = run_tool("cache", verb, "--json", env=env)
    error = json.loads(done.stdout)["error"]
    assert done.returncode == 3 and error["code"] == "cache-overlap", done.stdout
    assert f"the {kind} cache" in error["message"] and "nothing was removed" in error["message"]
    assert str(envs) in error["message"] or str(prefix) in error["message"]
    assert error["alternatives"]
    assert tree(prefix) == before
    assert (cache / "data" / "tables-old.bin").exists()  # refused before any kind was touched
    text = run_tool("cache", verb, "--dry-run", env=env)
    assert text.returncode == 3 and "Traceback" not in text.stderr and tree(prefix) == before


@pytest.mark.parametrize("kind", ["uv", "pyc", "conda"])
def test_an_env_made_by_prefix_inside_a_kind_is_refused(tmp_path, tool_env, env_template, kind):
    """No envs directory involved: an env placed with --prefix inside the cache is found by its marks."""
    cache = tmp_path / "cache"
    filled_cache(cache)
    prefix = place_env(env_template, cache / kind / "deep" / "er" / "env")
    before = tree(prefix)
    env = {**tool_env, "TFGPU_CACHE_DIR": str(cache), "TFGPU_UV_CACHE": "own"}
    done = run_tool("cache", "clean", "--json", env=env)
    assert done.returncode == 3 and json.loads(done.stdout)["error"]["code"] == "cache-overlap"
    assert "tfgpu-env.json" in json.loads(done.stdout)["error"]["message"]
    assert tree(prefix) == before


def test_a_conda_prefix_without_marker_is_an_env_too(tmp_path, tool_env):
    cache = tmp_path / "cache"
    filled_cache(cache)
    prefix = cache / "pyc" / "mine"
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "conda-meta" / "history").write_text("==> 2026 <==\n")
    (prefix / "lib").mkdir()
    (prefix / "lib" / "libcudnn.so.9").write_bytes(b"\x7fELF")
    env = {**tool_env, "TFGPU_CACHE_DIR": str(cache), "TFGPU_UV_CACHE": "own"}
    done = run_tool("cache", "prune", "--json", env=env)
    assert done.returncode == 3 and "conda-meta" in json.loads(done.stdout)["error"]["message"]
    assert (prefix / "lib" / "libcudnn.so.9").exists()


@pytest.mark.parametrize("place", ["data", "cwd", "overlay"])
def test_a_kind_holding_the_data_or_the_project_is_refused(tmp_path, tool_env, monkeypatch, place):
    cache = tmp_path / "cache"
    filled_cache(cache)
    inside = cache / "downloads" / "mine"
    inside.mkdir()
    (inside / "notes.txt").write_text("keep\n")
    env = {**tool_env, "TFGPU_CACHE_DIR": str(cache), "TFGPU_UV_CACHE": "own"}
    if place == "data":
        env["TFGPU_USER_DATA_DIR"] = str(inside)
    elif place == "overlay":
        env["TFGPU_DATA_DIR"] = str(inside)
    else:
        monkeypatch.chdir(inside)
    done = run_tool("cache", "clean", "--json", env=env)
    error = json.loads(done.stdout)["error"]
    assert done.returncode == 3 and error["code"] == "cache-overlap", error
    assert (inside / "notes.txt").read_text() == "keep\n"


def test_a_kind_inside_the_envs_directory_is_refused(tmp_path, tool_env):
    """The cache inside the envs directory (``TFGPU_CACHE_DIR`` under ``TFGPU_ENVS_DIR``)."""
    envs = tmp_path / "envs"
    cache = envs / "cache"
    filled_cache(cache)
    env = {**tool_env, "TFGPU_CACHE_DIR": str(cache), "TFGPU_ENVS_DIR": str(envs), "TFGPU_UV_CACHE": "own"}
    done = run_tool("cache", "clean", "--json", env=env)
    assert done.returncode == 3 and "lies inside the envs directory" in json.loads(done.stdout)["error"]["message"]
    assert (cache / "data" / "tables-old.bin").exists()


def test_the_users_uv_cache_holding_an_env_is_not_pruned(tmp_path, tool_env, env_template):
    """The user's own uv cache (reused by the tool) with a venv of the user's at its top."""
    users = tmp_path / "users-uv"
    users.mkdir()
    (users / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n")
    (users / "archive-v0").mkdir()
    cache = tmp_path / "cache"
    filled_cache(cache)
    env = {**tool_env, "TFGPU_CACHE_DIR": str(cache), "TFGPU_UV_CACHE": "auto", "UV_CACHE_DIR": str(users)}
    # A venv uv keeps inside its own bucket (uvx's tools) is uv's: prune goes ahead.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(users / "archive-v0" / "tool")], check=True)
    done = run_tool("cache", "prune", "--json", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    prefix = place_env(env_template, tmp_path / "elsewhere")
    shutil.move(prefix, users / "archive-v0" / "mine")  # the tool's marker in a bucket is not uv's
    before = tree(users / "archive-v0" / "mine")
    done = run_tool("cache", "prune", "--json", env=env)
    assert done.returncode == 3 and json.loads(done.stdout)["error"]["code"] == "cache-overlap"
    assert tree(users / "archive-v0" / "mine") == before


DEEP = 2100
"""Levels of a deep chain: past Python's recursion limit (1,000 frames) and, at two bytes a level
(``d/``), past PATH_MAX (4,096 bytes): no walk by recursion or by path reaches its bottom. Deeper
costs a system call or two a level and proves nothing more."""


def chain(top: Path, depth: int, leaf: str, every: int | None = None, mode: int | None = None) -> None:
    """``top/d/d/…`` ``depth`` levels deep (past PATH_MAX: made one level at a time from an open
    directory), a file ``leaf`` at the bottom and every ``every`` levels; ``mode`` for the last one."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for level in range(depth):
            os.mkdir("d", dir_fd=fd)
            below = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = below
            if level == depth - 1 or (every and level % every == every - 1):
                os.close(os.open(leaf, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
        if mode is not None:
            os.chmod(fd, mode)
    finally:
        os.close(fd)


SHM = Path("/dev/shm")


@pytest.fixture
def deep(tmp_path):
    """A directory of the test's own for a deep chain, deleted whatever happens (pytest's own
    clean-up recurses once per level). In memory (``/dev/shm``) where the system has it: each level
    is a directory made and removed, which costs a journalled disk file system ten to twenty times
    the system time; what the chains prove (no recursion, no path past PATH_MAX, a directory made
    writable on the way) holds on any file system. Else ``tmp_path``."""
    from tfgpu.doors import trees

    memory = SHM.is_dir() and os.access(SHM, os.W_OK | os.X_OK)
    directory = Path(tempfile.mkdtemp(prefix="tfgpu-deep-", dir=SHM)) if memory else tmp_path
    try:
        yield directory
    finally:
        trees.delete(directory)


def test_clean_empties_a_chain_thousands_of_directories_deep(deep, tool_env):
    tmp_path = deep
    cache = tmp_path / "cache"
    filled_cache(cache)
    chain(cache / "downloads", DEEP, "cudnn.tar.xz", every=1000)
    env = {**tool_env, "TFGPU_CACHE_DIR": str(cache), "TFGPU_UV_CACHE": "own"}
    pruned = run_tool("cache", "prune", "--json", env=env)
    assert pruned.returncode == 0, pruned.stderr[-2000:]
    assert (cache / "downloads" / "d").is_dir()  # prune keeps a download that is whole
    done = run_tool("cache", "clean", "--json", env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "RecursionError" not in done.stderr
    assert os.listdir(cache / "downloads") == []


def test_env_removal_deletes_a_chain_thousands_of_directories_deep(deep):
    from tfgpu.envs import writes

    tmp_path = deep
    top = tmp_path / "tree"
    top.mkdir()
    chain(top, DEEP, "leaf", mode=0o500)  # read-only at the bottom: made writable on the way, as before
    writes.remove_tree(top)
    assert not top.exists()
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    chain(scratch, 1100, "leaf")  # past Python's recursion limit (1,000), as the chain above
    writes.discard_tree(scratch)
    assert not scratch.exists()


def test_info_says_conda_packages_are_linked_only_when_an_env_links_them(tmp_path, tool_env):
    cache = tmp_path / "cache"
    filled_cache(cache)
    package = cache / "conda" / "pkgs" / "cudnn-9" / "lib" / "libcudnn.so.9"
    package.parent.mkdir(parents=True)
    package.write_bytes(b"\x7fELF" * 1000)
    env = {**tool_env, "TFGPU_CACHE_DIR": str(cache), "TFGPU_UV_CACHE": "own"}

    def conda_says() -> str:
        done = run_tool("cache", "info", "--json", env=env)
        return next(k for k in json.loads(done.stdout)["kinds"] if k["kind"] == "conda")["prune_removes"]

    assert "conda envs link" not in conda_says()
    said = run_tool("cache", "prune", env=env)
    assert said.returncode == 0 and "conda envs link" not in said.stdout
    linked = tmp_path / "conda-env" / "lib" / "libcudnn.so.9"
    linked.parent.mkdir(parents=True)
    os.link(package, linked)
    assert conda_says() == "kept: conda envs link these packages"


def test_an_env_deeper_than_a_path_can_name_is_found(deep, tool_env):
    """The search for envs opens each directory from the one above: no depth hides one."""
    cache = deep / "cache"
    filled_cache(cache)
    chain(cache / "pyc", DEEP, "pyvenv.cfg")  # a venv's mark at the bottom, past PATH_MAX (4,096 bytes)
    env = {**tool_env, "TFGPU_CACHE_DIR": str(cache), "TFGPU_UV_CACHE": "own"}
    done = run_tool("cache", "clean", "--json", env=env)
    assert done.returncode == 3 and "pyvenv.cfg" in json.loads(done.stdout)["error"]["message"]
    assert (cache / "pyc" / "d").is_dir() and (cache / "data" / "tables-old.bin").exists()


def test_a_directory_swapped_for_a_link_mid_clean_is_never_entered(tmp_path, tool_env, monkeypatch):
    """The swap made at the worst moment: after the walk saw a directory, before it opens it."""
    from tfgpu.doors import trees

    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "a.whl").write_text("the user's file\n")
    cache = tmp_path / "cache"
    filled_cache(cache)
    store = cache / "downloads" / "cuda"
    store.mkdir()
    (store / "a.whl").write_text("a cached download\n")
    real = trees._open_below

    def racing(parent, name, listed, writable):
        if name == "cuda" and not store.is_symlink():
            os.rename(store, store.with_name("cuda.old"))
            os.symlink(victim, store)
        return real(parent, name, listed, writable)

    monkeypatch.setattr(trees, "_open_below", racing)
    done = run_tool(
        "cache", "clean", "--json", env={**tool_env, "TFGPU_CACHE_DIR": str(cache), "TFGPU_UV_CACHE": "own"}
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (victim / "a.whl").read_text() == "the user's file\n" and store.is_symlink()
