"""``remove`` (and every env deletion that counts its progress: ``tfgpu.envs.removal``) of an env
holding a chain of thousands of nested directories, which any package or user can make inside an
env: the survey and the deletion go through without recursion, so the env goes whole instead of a
``RecursionError`` leaving it half-removed. A directory with many files at the bottom of the chain
(past the system's path length) is deleted too. Real directories, the real removal code."""

from __future__ import annotations

import os

from hangguard import hang_guard

from tfgpu.doors import trees
from tfgpu.envs import removal

DEPTH = 3000


def _chain(top, depth: int, files_at_bottom: int) -> None:
    fd = os.open(top, os.O_RDONLY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            below = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = below
        for index in range(files_at_bottom):
            os.close(os.open(f"f{index}", os.O_CREAT | os.O_WRONLY, dir_fd=fd))
    finally:
        os.close(fd)


def test_an_env_with_a_deep_chain_of_directories_is_removed_whole(tmp_path):
    env = tmp_path / "env"
    (env / "lib").mkdir(parents=True)
    (env / "marker").write_text("kept")
    _chain(env / "lib", DEPTH, removal.PART + 20)
    (env / "bin").mkdir()
    (env / "bin" / "python").write_text("x")
    seen = []
    try:
        with hang_guard("removing a deep env"):
            removal.delete_counted(env, "marker", lambda *counts: seen.append(counts))
        assert sorted(os.listdir(env)) == ["marker"]
        files, total = seen[-1][0], seen[-1][1]
        assert files == total and total == removal.PART + 21
    finally:
        trees.delete(env)  # pytest's own clean-up of tmp_path recurses (shutil.rmtree before 3.13)
