"""Attack on ``cache info|prune|clean`` and the uv cache choice (tfgpu/cache/).

Every case here broke a promise when an outside attack wrote it, and holds it now: docs/everyday.md
"The cache" (removes only inside the cache root, never follows a symbolic link, never empties the
user's own uv cache — ``UV_CACHE_DIR=$HOME`` once had ``uv cache prune`` empty a home directory) and
docs/safety.md (untrusted text reaches the terminal through ``controls.shown``; never a hang, a
traceback or memory exhaustion).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.hostile.conftest import changed, snapshot

# tests/conftest.py sets TFGPU_UV_CACHE=own for the suite; a user's default is auto, set here.

pytestmark = pytest.mark.skipif(
    not (Path(sys.executable).parent / "uv").exists() and not shutil.which("uv"),
    reason="uv is needed: the shared uv cache is pruned by uv itself",
)


def _home(sandbox: Path) -> Path:
    """A user's home: files the tool never made."""
    home = sandbox / "home"
    (home / "Documents").mkdir(parents=True)
    (home / "Documents" / "thesis.txt").write_text("four years of work\n")
    (home / "projects" / "app").mkdir(parents=True)
    (home / "projects" / "app" / "main.py").write_text("print('hi')\n")
    (home / "notes.txt").write_text("keep me\n")
    return home


# -- 1. UV_CACHE_DIR names a directory that is not a uv cache: `cache prune` hands it to uv ------
# tfgpu/cache/uvdir.py:uv_cache takes UV_CACHE_DIR as "your own uv cache" when it is on the envs'
# file system, without asking whether it looks like one; tfgpu/cache/cleaning.py:_one then runs
# `uv cache prune --cache-dir <it>` (cleaning.py:_uv), and uv's prune removes every top-level
# entry it does not know: the whole of $HOME, outside the cache root, exit 0.


def test_prune_with_uv_cache_dir_at_home_leaves_the_users_files(cli, sandbox):
    home = _home(sandbox)
    before = snapshot(sandbox)
    done = cli("cache", "prune", "--json", env={"UV_CACHE_DIR": str(home), "TFGPU_UV_CACHE": "auto"})
    assert (home / "Documents" / "thesis.txt").exists(), "cache prune emptied UV_CACHE_DIR=$HOME"
    assert done.code in (0, 2, 3), done.out
    assert changed(before, snapshot(sandbox), ("cache", "logs")) == []


def test_prune_with_uv_cache_dir_above_the_envs_and_cache_leaves_them(cli, sandbox, tmp_path, monkeypatch):
    """UV_CACHE_DIR at a directory holding the envs directory and the tool's cache root (as
    ``~/.cache`` holds ``~/.cache/tfgpu-install``): prune removes the envs and the conda packages
    the docs say are kept because conda envs link them."""
    env = sandbox / "envs" / "work"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").write_text("an env's file\n")
    (sandbox / "cache" / "conda" / "pkgs").mkdir(parents=True)
    (sandbox / "cache" / "conda" / "pkgs" / "cudnn.tar.bz2").write_text("a package an env links\n")
    monkeypatch.chdir(tmp_path)  # uv refuses a cache holding the working directory
    before = snapshot(sandbox)
    cli("cache", "prune", env={"UV_CACHE_DIR": str(sandbox), "TFGPU_UV_CACHE": "auto"})
    assert (env / "bin" / "python").exists(), "cache prune removed an env"
    assert (sandbox / "cache" / "conda" / "pkgs" / "cudnn.tar.bz2").exists(), "prune removed kept conda packages"
    assert changed(before, snapshot(sandbox), ("cache", "logs")) == []


# -- 2. the same door: UV_CACHE_DIR=/ makes `cache info` walk the whole file system --------------
# tfgpu/cache/survey.py:survey sizes the "user's uv cache" with usage() -> _files(), which keeps a
# list of every file under it (and walks it twice more for held_outside/unpacked_twice): with
# UV_CACHE_DIR=/ it ran past 60 s at 930 MB of memory and still growing (no error, no bound).


def test_info_with_uv_cache_dir_at_root_finishes(tool):
    try:
        done = tool("cache", "info", "--json", env={"UV_CACHE_DIR": "/", "TFGPU_UV_CACHE": "auto"}, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("cache info with UV_CACHE_DIR=/ walked the whole file system (no answer in 30 s)")
    assert done.code in (0, 2, 3)


# -- 3. clean unlinks through a directory swapped for a symbolic link while it walks -------------
# tfgpu/cache/cleaning.py:remove_files lists a directory (os.walk), then unlinks each name by its
# full path (path.lstat(); path.unlink()): a directory of the cache replaced by a symbolic link
# between the two has the unlink resolve through it, and a file outside the cache is removed.
# (Simulated deterministically: the swap is done right after os.walk lists the directory.)


def test_clean_never_unlinks_through_a_directory_swapped_for_a_link(cli, sandbox, monkeypatch):
    victim = sandbox / "victim"
    victim.mkdir()
    (victim / "a.whl").write_text("the user's file\n")
    store = sandbox / "cache" / "downloads" / "cuda"
    store.mkdir(parents=True)
    (store / "a.whl").write_text("a cached download\n")

    from tfgpu.cache import cleaning

    real_walk = os.walk

    def racing_walk(top, *args, **kwargs):
        for directory, subdirectories, names in real_walk(top, *args, **kwargs):
            if Path(directory) == store:  # listed: now another process swaps the directory
                os.rename(store, store.with_name("cuda.old"))
                os.symlink(victim, store)
            yield directory, subdirectories, names

    monkeypatch.setattr(cleaning.os, "walk", racing_walk)
    cli("cache", "clean", env={"TFGPU_UV_CACHE": "own"})
    assert (victim / "a.whl").exists(), "clean followed a symbolic link swapped in for a cache directory"


# -- 4. untrusted names reach the terminal without controls.shown -------------------------------
# tfgpu/cli/render/cache.py:63 prints a kind's note (it holds os.readlink of a symbolic link in the
# cache) with escape() only; render_cache.py:55 prints the dist-info names found in uv's cache the
# same way; tfgpu/cache/cleaning.py:137 puts the cache root's foreign names raw into the
# cache-not-ours message. A newline in any of them forges a line of the tool's own output
# ("Freed 999 GB in all by `cache clean`.").

FORGED = "\nFreed 999 GB in all by `cache clean`."


def _forged_line(text: str) -> bool:
    return any(line.startswith("Freed 999 GB") for line in text.splitlines())


def test_info_shows_a_link_target_with_a_newline_escaped(cli, sandbox):
    (sandbox / "cache").mkdir()
    os.symlink("/nowhere" + FORGED, sandbox / "cache" / "conda")
    done = cli("cache", "info", env={"TFGPU_UV_CACHE": "own"})
    assert done.code == 0
    assert not _forged_line(done.out + done.err), done.out


def test_info_shows_a_wheel_name_with_a_newline_escaped(cli, sandbox):
    for copy in ("a", "b"):
        record = sandbox / "cache" / "uv" / "archive-v0" / copy / f"evil{FORGED}.dist-info" / "RECORD"
        record.parent.mkdir(parents=True)
        record.write_text("same\n")
    done = cli("cache", "info", env={"TFGPU_UV_CACHE": "own"})
    assert done.code == 0
    assert not _forged_line(done.out + done.err), done.out


def test_cache_not_ours_shows_a_foreign_name_with_a_newline_escaped(cli, sandbox):
    (sandbox / "cache" / f"x{FORGED}").mkdir(parents=True)
    done = cli("cache", "clean", env={"TFGPU_UV_CACHE": "own"})
    assert done.code == 3
    assert not _forged_line(done.out + done.err), done.out + done.err
    assert json.loads(cli("cache", "clean", "--json", env={"TFGPU_UV_CACHE": "own"}).out)["error"]["code"] == (
        "cache-not-ours"
    )


# -- 5. the cache's own lock file, made a link or a directory: a traceback -----------------------
# tfgpu/cache/cleaning.py:46 (held) opens root/.tfgpu-cache.lock with O_NOFOLLOW and lets the
# OSError escape: ELOOP for a symbolic link, EISDIR for a directory (EACCES for a read-only root
# would go the same way). A traceback, exit 1, instead of a documented error.


@pytest.mark.parametrize("shape", ["link", "directory"])
@pytest.mark.parametrize("verb", ["clean", "prune"])
def test_a_hostile_cache_lock_is_an_error_not_a_traceback(cli, sandbox, shape, verb):
    root = sandbox / "cache"
    root.mkdir()
    if shape == "link":
        os.symlink(sandbox / "victim", root / ".tfgpu-cache.lock")
    else:
        (root / ".tfgpu-cache.lock").mkdir()
    before = snapshot(sandbox)
    try:
        done = cli("cache", verb, "--json", env={"TFGPU_UV_CACHE": "own"})
    except OSError as error:
        pytest.fail(f"traceback: {type(error).__name__}: {error}")
    assert done.code in (3, 4) and done.error, done.out
    assert not (sandbox / "victim").exists()
    assert changed(before, snapshot(sandbox), ("logs",)) == []


# -- 6. a directory that holds only names the tool writes is taken for its cache ----------------
# tfgpu/cache/cleaning.py:check_root decides "ours" by the top-level names alone (KINDS), and the
# tool writes no mark of its own at the root: TFGPU_CACHE_DIR at a project whose only entry is
# `data/` (or `downloads/`, `conda/`...) passes, and `cache prune` removes every file in data/
# not named like the current parsed table ("prunable('data')"), `cache clean` all of them.


@pytest.mark.parametrize("verb", ["prune", "clean"])
def test_a_project_with_a_data_directory_is_not_taken_for_the_cache(cli, sandbox, verb):
    project = sandbox / "project"
    (project / "data").mkdir(parents=True)
    (project / "data" / "train.csv").write_text("x,label\n1,0\n")
    before = snapshot(sandbox)
    cli("cache", verb, env={"TFGPU_CACHE_DIR": str(project), "TFGPU_UV_CACHE": "own"})
    assert (project / "data" / "train.csv").exists(), f"cache {verb} removed a project's data file"
    assert changed(before, snapshot(sandbox), ("logs", "project/.tfgpu-cache.lock")) == []


# -- 7. `cache info` follows symbolic links in uv's cache (unpacked_twice) -----------------------
# tfgpu/cache/survey.py:unpacked_twice globs archive-v*/*/*.dist-info/RECORD (pathlib's glob
# follows a link at `*`) and sizes each copy with usage(copy), whose _files() scandirs the root it
# is given, a link included: two links to a directory outside the cache are sized as "unpacked
# twice" (and two links to a site-packages made `cache info` run past 60 s, every dist-info
# walking the whole directory again).


def test_info_never_follows_a_link_in_uvs_cache(cli, sandbox):
    outside = sandbox / "outside"
    (outside / "x-1.dist-info").mkdir(parents=True)
    (outside / "x-1.dist-info" / "RECORD").write_text("r\n")
    (outside / "big.bin").write_bytes(b"\0" * 1_000_000)
    archive = sandbox / "cache" / "uv" / "archive-v0"
    archive.mkdir(parents=True)
    os.symlink(outside, archive / "a")
    os.symlink(outside, archive / "b")
    done = cli("cache", "info", "--json", env={"TFGPU_UV_CACHE": "own"})
    assert done.code == 0
    (uv,) = [kind for kind in json.loads(done.out)["kinds"] if kind["kind"] == "uv"]
    assert uv["unpacked_twice"] == {}, f"sized a directory outside the cache through a link: {uv['unpacked_twice']}"


# -- 6b. the same check by name: an env called like a kind, in a cache root that is the envs dir --
# With TFGPU_CACHE_DIR and TFGPU_ENVS_DIR the same directory, `create -n conda` makes an env whose
# name is a kind's: check_root (cleaning.py:37) finds only kind names, and `cache clean` removes
# every regular file of the env (73 of them, its marker tfgpu-env.json included), leaving bin/ and
# lib64 links: a working env destroyed by a cache command, with no lock held and no refusal.


def test_cache_clean_never_empties_an_env_named_like_a_kind(cli, local_wheels, sandbox, monkeypatch):
    shared = sandbox / "shared"
    monkeypatch.setenv("TFGPU_ENVS_DIR", str(shared))
    monkeypatch.setenv("TFGPU_CACHE_DIR", str(shared))
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    made = cli(
        "create", "--tf", "2.21", "--mode", "pip", "--python", python, "-n", "conda",
        "--find-links", str(local_wheels), "--offline", "--no-verify", "--json",
    )  # fmt: skip
    assert made.code == 0, made.out
    env = shared / "conda"
    files = sorted(str(p.relative_to(env)) for p in env.rglob("*") if p.is_file() and not p.is_symlink())
    cli("cache", "clean", env={"TFGPU_UV_CACHE": "own"})
    left = sorted(str(p.relative_to(env)) for p in env.rglob("*") if p.is_file() and not p.is_symlink())
    assert left == files, f"cache clean removed {len(set(files) - set(left))} files of the env {env}"
