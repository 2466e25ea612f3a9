"""The cache people can see and trust: ``cache info|prune|clean``, which uv cache installs use, and
bytecode shared between envs whose files came from two copies of the same wheel.

Envs are real (uv from the local wheelhouse of tests/wheelhouse.py, no network); so are the uv
caches, hard links and symbolic links. Only the file-system device check is injected where two
file systems are the subject: making a second one (a tmpfs) needs root.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_tool

from tfgpu.cache import uv_cache
from tfgpu.cache.cleaning import remove_files
from tfgpu.cache.survey import usage
from tfgpu.envs import bytecode
from tfgpu.errors import UsageError
from tfgpu.process.runner import Runner

TARGET = ("--tf", "2.21", "--mode", "pip", "--python", "3.11")
SITE = "lib/python3.11/site-packages"


@pytest.fixture
def cache_env(tmp_path, tool_env) -> dict[str, str]:
    """A fresh tool cache of this test's own, and the tool's own uv cache inside it."""
    return {**tool_env, "TFGPU_CACHE_DIR": str(tmp_path / "cache"), "TFGPU_UV_CACHE": "own"}


def create(prefix: Path, local_wheels: Path, env: dict) -> None:
    done = run_tool(
        "create",
        *TARGET,
        "--prefix",
        str(prefix),
        "--find-links",
        str(local_wheels),
        "--offline",
        "--no-verify",
        env=env,
    )
    assert done.returncode == 0, done.stderr


def cache(env: dict, *argv: str) -> dict:
    done = run_tool("cache", *argv, "--json", env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def kinds(document: dict) -> dict[str, dict]:
    return {(kind["kind"] + (":user" if kind["shared"] else "")): kind for kind in document["kinds"]}


def test_info_sizes_each_kind_of_a_real_envs_cache(tmp_path, local_wheels, cache_env):
    create(tmp_path / "env", local_wheels, cache_env)
    found = kinds(cache(cache_env, "info"))
    assert set(found) == {"uv", "pyc", "data", "pypi", "downloads", "conda"}
    uv, pyc = found["uv"], found["pyc"]
    assert uv["path"] == str(tmp_path / "cache" / "uv") and uv["files"] > 0
    # Every installed file is a hard link into the env: it stays on disk while the env exists.
    assert 0 < uv["linked_bytes"] <= uv["bytes"] and uv["clean_frees"] == uv["bytes"] - uv["linked_bytes"]
    assert pyc["files"] > 0 and pyc["linked_bytes"] > 0
    assert found["downloads"]["bytes"] == 0 and not found["downloads"]["exists"]


def test_prune_removes_what_no_env_holds_and_keeps_the_rest(tmp_path, local_wheels, cache_env):
    first, second = tmp_path / "first", tmp_path / "second"
    create(first, local_wheels, cache_env)
    create(second, local_wheels, cache_env)
    downloads = tmp_path / "cache" / "downloads"
    downloads.mkdir()
    (downloads / "cudnn.tar.xz.part").write_bytes(b"x" * 10000)
    (downloads / "cudnn.tar.xz").write_bytes(b"y" * 10000)
    assert run_tool("remove", "--prefix", str(first), env=cache_env).returncode == 0
    before = kinds(cache(cache_env, "info"))
    assert before["downloads"]["prune_frees"] > 0
    pruned = cache(cache_env, "prune")
    assert pruned["action"] == "prune" and not pruned["dry_run"]
    assert not (downloads / "cudnn.tar.xz.part").exists() and (downloads / "cudnn.tar.xz").exists()
    after = kinds(cache(cache_env, "info"))
    # The second env still links every stored .pyc it uses: none of those went.
    site = next(second.glob("lib/python3*/site-packages"))
    assert all(p.stat().st_nlink > 1 for p in site.rglob("__pycache__/*.pyc") if "tensorflow" in p.parts)
    assert after["pyc"]["bytes"] <= before["pyc"]["bytes"] and after["pyc"]["prune_frees"] == 0
    assert after["uv"]["files"] > 0  # uv's prune keeps what installs refer to


def test_prune_frees_the_bytecode_of_envs_that_are_gone(tmp_path, local_wheels, cache_env):
    """The store keeps each file under two names (inode and content keys): neither is an env's."""
    create(tmp_path / "env", local_wheels, cache_env)
    assert run_tool("remove", "--prefix", str(tmp_path / "env"), env=cache_env).returncode == 0
    pyc = kinds(cache(cache_env, "info"))["pyc"]
    assert pyc["files"] > 0 and pyc["linked_bytes"] == 0 and pyc["prune_frees"] == pyc["bytes"]
    pruned = next(kind for kind in cache(cache_env, "prune")["kinds"] if kind["kind"] == "pyc")
    assert pruned["freed"] == pyc["bytes"]
    assert kinds(cache(cache_env, "info"))["pyc"]["files"] == 0  # the release markers went too


def test_clean_empties_the_cache_but_leaves_a_link_out_and_its_target(tmp_path, local_wheels, cache_env):
    create(tmp_path / "env", local_wheels, cache_env)
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    (tmp_path / "cache" / "pyc" / "link-out").symlink_to(outside)
    (tmp_path / "cache" / "data" / "file-link").symlink_to(outside / "keep.txt")
    dry = cache(cache_env, "clean", "--dry-run")
    assert dry["dry_run"] and dry["freed_bytes"] > 0 and (tmp_path / "cache" / "uv").is_dir()
    done = cache(cache_env, "clean")
    assert done["freed_bytes"] > 0
    assert (outside / "keep.txt").read_text() == "mine"
    assert (tmp_path / "cache" / "pyc" / "link-out").is_symlink()
    assert (tmp_path / "cache" / "data" / "file-link").is_symlink()
    assert not list((tmp_path / "cache" / "pyc").rglob("*.pyc"))
    assert kinds(cache(cache_env, "info"))["uv"]["bytes"] < 10000  # uv keeps its lock file
    # The env still works: its files were hard links, not the cache's only copy.
    python = tmp_path / "env" / "bin" / "python"
    assert subprocess.run([python, "-c", "import tensorflow"], capture_output=True).returncode == 0


def test_a_cache_link_to_elsewhere_is_never_entered(tmp_path, cache_env):
    """``TFGPU_CACHE_DIR/uv`` a link to another uv cache (a trial reusing one): clean does not run
    uv's clean on it, and says so."""
    other = tmp_path / "other-uv"
    (other / "archive-v0").mkdir(parents=True)
    (other / "archive-v0" / "wheel.py").write_text("x = 1\n")
    from tfgpu.doors.paths import tag_cache

    tag_cache(tmp_path / "cache")  # the tool's cache, as any command leaves it
    (tmp_path / "cache" / "uv").symlink_to(other)
    found = kinds(cache(cache_env, "info"))["uv"]
    assert "not the tool's" in found["note"] and found["clean_frees"] == 0
    done = cache(cache_env, "clean")
    assert (other / "archive-v0" / "wheel.py").exists()
    assert "not the tool's" in next(kind["said"] for kind in done["kinds"] if kind["kind"] == "uv")


def test_a_directory_that_is_not_the_tools_cache_is_refused(tmp_path, cache_env):
    root = tmp_path / "cache"
    (root / "data").mkdir(parents=True)
    (root / "Documents").mkdir()
    (root / "thesis.tex").write_text("...")
    done = run_tool("cache", "clean", "--json", env=cache_env)
    assert done.returncode == 3 and json.loads(done.stdout)["error"]["code"] == "cache-not-ours"
    assert (root / "thesis.tex").exists() and (root / "Documents").is_dir()


def test_clean_waits_for_a_create_in_progress(tmp_path, cache_env):
    """A create holds its target's lock (``tfgpu.envs.txn.TargetLock``); clean refuses meanwhile."""
    envs = Path(cache_env["TFGPU_ENVS_DIR"])
    envs.mkdir(parents=True)
    (tmp_path / "cache" / "data").mkdir(parents=True)
    (tmp_path / "cache" / "data" / "tables-x.bin").write_bytes(b"x")
    lock = os.open(envs / ".tf2.21.tfgpu-lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        done = run_tool("cache", "clean", "--json", env=cache_env)
    finally:
        os.close(lock)
    assert done.returncode == 1 and json.loads(done.stdout)["error"]["code"] == "cache-busy"
    assert "tf2.21" in json.loads(done.stdout)["error"]["message"]
    assert (tmp_path / "cache" / "data" / "tables-x.bin").exists()


def test_the_users_own_uv_cache_is_reused_and_never_cleaned(tmp_path, local_wheels, cache_env):
    users = tmp_path / "users-uv"
    env = {**cache_env, "TFGPU_UV_CACHE": "auto", "UV_CACHE_DIR": str(users)}
    create(tmp_path / "env", local_wheels, env)
    assert list(users.glob("archive-v*/*")) and not (tmp_path / "cache" / "uv").exists()
    logs = "".join(p.read_text() for p in Path(env["TFGPU_LOG_DIR"]).glob("create-*.log"))
    assert f"uv cache: {users} (your own uv cache" in logs
    info = cache(env, "info")
    assert info["uv_cache"] == {"path": str(users), "shared": True, "why": info["uv_cache"]["why"]}
    assert kinds(info)["uv:user"]["files"] > 0 and kinds(info)["uv:user"]["clean_frees"] == 0
    done = cache(env, "clean")
    said = next(kind["said"] for kind in done["kinds"] if kind["shared"])
    assert "left as it is" in said and "uv cache clean" in said
    assert list(users.glob("archive-v*/*"))
    text = run_tool("cache", "info", env=env)
    assert "your own uv cache" in text.stdout


def test_uv_cache_choice(tmp_path, monkeypatch):
    monkeypatch.setenv("TFGPU_CACHE_DIR", str(tmp_path / "tool"))
    users, envs = tmp_path / "users-uv", tmp_path / "envs"
    environ = {"UV_CACHE_DIR": str(users)}
    same = uv_cache("uv", environ=environ, envs=envs)
    assert same.shared and same.path == users
    # Another file system (a tmpfs needs root to mount, so the device is injected): the tool's own.
    other = uv_cache("uv", environ=environ, envs=envs, device=lambda path: 1 if path == envs else 2)
    assert not other.shared and other.path == tmp_path / "tool" / "uv" and "another file system" in other.why
    own = uv_cache("uv", environ={**environ, "TFGPU_UV_CACHE": "own"}, envs=envs)
    assert not own.shared and own.path == tmp_path / "tool" / "uv"
    with pytest.raises(UsageError) as raised:
        uv_cache("uv", environ={"TFGPU_UV_CACHE": "mine"}, envs=envs)
    assert raised.value.code == "bad-uv-cache"


def test_uv_cache_asks_uv_where_its_default_is(tmp_path, monkeypatch):
    from tfgpu.engines.uv import find_uv

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("UV_CACHE_DIR", raising=False)  # uv's default, not the suite's (tests/conftest.py)
    found = uv_cache(find_uv(), environ={"XDG_CACHE_HOME": str(tmp_path / "xdg")}, envs=tmp_path)
    assert found.path == tmp_path / "xdg" / "uv" and found.shared


def test_sizes_count_each_inode_once_and_never_follow_links(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "a").write_bytes(b"a" * 8192)
    os.link(root / "a", root / "b")
    (tmp_path / "big").write_bytes(b"z" * 100000)
    (root / "link").symlink_to(tmp_path / "big")
    found = usage(root)
    # Two names inside the directory: not held from outside, so removing both frees it.
    assert found.files == 1 and found.linked == 0 and found.links_out == [root / "link"]
    (root / "c").write_bytes(b"c" * 4096)
    os.link(root / "c", tmp_path / "an-env-holds-this")
    found = usage(root)
    assert found.files == 2 and found.linked == 4096
    assert remove_files(root) == (3, 8192)  # every name gone; freed: what had no name left elsewhere
    assert (root / "link").is_symlink() and (tmp_path / "big").stat().st_size == 100000


def test_bytecode_is_shared_with_an_env_from_another_copy_of_the_same_wheel(tmp_path):
    """Two copies of one package (as uv unpacks a wheel twice): the second gets the stored bytecode
    with its own mtime in the header, and Python loads it as it is, compiling nothing."""
    first, second, store = tmp_path / "first", tmp_path / "second", tmp_path / "store"
    for site in (first, second):
        (site / "pkg").mkdir(parents=True)
        (site / "pkg" / "__init__.py").write_text("VALUE = 41 + 1\n")
        (site / "pkg" / "mod.py").write_text("def f():\n    return 'shared'\n")
    os.utime(second / "pkg" / "mod.py", (1_600_000_000, 1_600_000_000))
    runner = Runner()
    assert bytecode.compile_site(runner, sys.executable, first, store) == (2, 0)
    assert bytecode.compile_site(runner, sys.executable, second, store) == (0, 2)
    loaded = subprocess.run(
        [
            sys.executable,
            "-I",
            "-v",
            "-c",
            f"import sys; sys.path.insert(0, {str(second)!r}); import pkg.mod; print(pkg.mod.f(), pkg.VALUE)",
        ],
        capture_output=True,
        text=True,
    )
    assert loaded.stdout.strip() == "shared 42"
    assert "bytecode is stale" not in loaded.stderr and "mod.cpython" in loaded.stderr
    # A third env from the second copy links the file the second one got.
    third = tmp_path / "third"
    subprocess.run(["cp", "-al", str(second), str(third)], check=True)
    for pyc in third.rglob("*.pyc"):
        pyc.unlink()
    assert bytecode.compile_site(runner, sys.executable, third, store) == (0, 2)
    assert (third / "pkg" / "__pycache__").iterdir()
    assert all(p.stat().st_nlink > 1 for p in (third / "pkg" / "__pycache__").iterdir())


def test_a_second_find_links_source_is_kept_once_in_the_tools_cache(tmp_path, local_wheels, cache_env):
    """The same wheels from two --find-links directories (a bundle unpacked in two places): uv
    unpacks them once per directory; the build then keeps one copy (``tfgpu.cache.dedupe``), so the
    cache grows by uv's metadata only and both envs share the files."""
    import shutil

    again = tmp_path / "same-wheels-elsewhere"
    shutil.copytree(local_wheels, again)
    create(tmp_path / "first", local_wheels, cache_env)
    before = kinds(cache(cache_env, "info"))["uv"]
    assert before["unpacked_twice"] == {}
    create(tmp_path / "second", again, cache_env)
    after = kinds(cache(cache_env, "info"))["uv"]
    assert after["unpacked_twice"] == {}
    # A second copy would double what the unpacked wheels take; uv's own records of the second
    # source (its index entries, small next to real wheels, not to these stubs) are all that is added.
    assert after["bytes"] - before["bytes"] < 0.2 * before["bytes"], (before["bytes"], after["bytes"])
    inodes = [
        {p.relative_to(env).as_posix(): p.stat().st_ino for p in (env / SITE / "tensorflow").rglob("*.py")}
        for env in (tmp_path / "first", tmp_path / "second")
    ]
    assert inodes[0] and inodes[0] == inodes[1]


def test_info_names_the_wheels_uv_unpacked_twice_in_the_users_cache(tmp_path, local_wheels, cache_env):
    """The user's own uv cache is never relinked by the tool: info says what is there twice."""
    import shutil

    again = tmp_path / "same-wheels-elsewhere"
    shutil.copytree(local_wheels, again)
    users = {**cache_env, "TFGPU_UV_CACHE": "user", "UV_CACHE_DIR": str(tmp_path / "users-uv")}
    create(tmp_path / "first", local_wheels, users)
    create(tmp_path / "second", again, users)
    twice = kinds(cache(users, "info"))["uv:user"]["unpacked_twice"]
    assert "tensorflow-2.21.0" in twice and all(size > 0 for size in twice.values())
    text = run_tool("cache", "info", env={**users, "COLUMNS": "300"}).stdout
    assert "wheels unpacked twice" in text and "uv cache clean" in text


def test_the_tools_cache_is_tagged_and_an_earlier_versions_is_adopted(tmp_path, cache_env):
    """The cache root the tool makes carries its CACHEDIR.TAG (backup tools skip it; ``cache prune|clean``
    act only where it is); an untagged root an earlier version made (only the tool's kinds, its parsed
    tables in data/) is adopted, one with anything else in data/ is not."""
    from tfgpu.doors.paths import is_tagged

    root = tmp_path / "cache"
    assert run_tool("plan", "--no-detect", "--json", env=cache_env).returncode == 0
    assert is_tagged(root)
    (root / "CACHEDIR.TAG").unlink()
    done = cache(cache_env, "prune")
    assert is_tagged(root) and done["action"] == "prune"
    (root / "CACHEDIR.TAG").unlink()
    (root / "data" / "train.csv").write_text("x\n")
    refused = run_tool("cache", "clean", "--json", env=cache_env)
    assert refused.returncode == 3 and json.loads(refused.stdout)["error"]["code"] == "cache-not-ours"
    assert (root / "data" / "train.csv").exists()


def _disk(*roots: Path) -> int:
    """Bytes of the files under ``roots``, each inode once (what the disk holds for them)."""
    seen, total = set(), 0
    for path in (path for root in roots for path in root.rglob("*")):
        info = path.lstat()
        if path.is_file() and not path.is_symlink() and (info.st_dev, info.st_ino) not in seen:
            seen.add((info.st_dev, info.st_ino))
            total += info.st_size
    return total


def test_a_wheel_from_the_index_and_from_find_links_is_kept_once(tmp_path):
    """Real uv: one 4 MiB wheel installed from a local index, then from a --find-links directory,
    takes twice its size in uv's cache (uv keeps each source's copy); one_copy brings the cache and
    the envs back to one copy, uv still installs from both entries, and a copy whose bytes differ
    from its RECORD is left as it is."""
    import wheelhouse
    from localindex import Server, build_index

    from tfgpu.cache.dedupe import one_copy
    from tfgpu.cache.survey import unpacked_twice
    from tfgpu.engines.uv import find_uv

    uv = find_uv()
    wheels, uv_dir = tmp_path / "wheels", tmp_path / "uv"
    wheelhouse.wheel(wheels, "bigpkg", "1.0", {"bigpkg/data.bin": os.urandom(4 << 20)})
    build_index(wheels, tmp_path / "root")

    def install(env: str, *source: str) -> Path:
        subprocess.run([uv, "venv", str(tmp_path / env), "--python", sys.executable, "--no-config", "-q"], check=True)
        python = str(tmp_path / env / "bin" / "python")
        argv = [uv, "pip", "install", "-q", "--no-config", "--python", python, "--cache-dir", str(uv_dir), *source]
        subprocess.run([*argv, "bigpkg"], check=True)
        return next((tmp_path / env).rglob("data.bin"))

    with Server(tmp_path / "root") as url:
        from_index = install("a", "--default-index", url)
    one = _disk(uv_dir)
    from_dir = install("b", "--find-links", str(wheels), "--offline")
    assert _disk(uv_dir) > one + (4 << 20) - 4096  # measured: the second source's copy is a second 4 MiB
    assert unpacked_twice(uv_dir)
    everything = (uv_dir, tmp_path / "a", tmp_path / "b")
    before = _disk(*everything)

    done = one_copy(uv_dir, tmp_path / "b")
    assert done.files >= 3 and done.bytes >= 4 << 20
    assert _disk(uv_dir) < one + 64 * 1024 and unpacked_twice(uv_dir) == {}
    assert from_dir.stat().st_ino == from_index.stat().st_ino  # the env built from the second copy too
    assert _disk(*everything) < before - (4 << 20) + 64 * 1024  # one copy for both envs and both entries
    assert install("c", "--find-links", str(wheels), "--offline").stat().st_ino == from_index.stat().st_ino

    # A copy that differs from its RECORD is not a twin: left alone.
    again = tmp_path / "again"
    again.mkdir()
    (again / "bigpkg-1.0-py3-none-any.whl").write_bytes(next(wheels.glob("*.whl")).read_bytes())
    tampered = install("d", "--find-links", str(again), "--offline")
    tampered.unlink()
    tampered.write_bytes(b"x" * (4 << 20))
    archived = [p for p in uv_dir.rglob("data.bin") if p.stat().st_ino != from_index.stat().st_ino]
    for path in archived:  # the fresh copy in the cache, made different from its RECORD
        path.chmod(0o644)
        path.write_bytes(b"y" * (4 << 20))
    assert archived and one_copy(uv_dir).files == 0
    assert all(p.read_bytes()[:1] == b"y" for p in archived)
