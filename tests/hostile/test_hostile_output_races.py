"""A directory export (``script -o DIR``) never writes out of ``DIR`` when a directory below it is
swapped for a symbolic link after the export checked the tree and before it wrote.

The checks (no link below ``-o``, no file of the user's replaced) look at paths; a process racing
the export can swap ``modulefiles/tf2.21`` for a link to a directory of the user's in between, and
a write by path then renames the new file over the user's own there. The swap is made at that
exact moment (after the checks return) rather than by a racing loop, so the case is the same on
every run; the file system, the link and the writes are real.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from tfgpu import export


def _tree(root):
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }


def test_a_directory_swapped_for_a_link_after_the_checks_is_never_written_through(cli, sandbox, monkeypatch):
    first = cli("script", "--tf", "2.21", "--format", "slurm", "-o", "out", "--json")
    assert first.code == 0, first.out
    out = sandbox / "out"
    mine = sandbox / "mine"
    mine.mkdir()
    (mine / "2.21.0.lua").write_text("-- my own module file\n")
    before = _tree(out)
    checked = export._check_ours

    def check_then_swap(*args, **kwargs):
        found = checked(*args, **kwargs)
        shutil.rmtree(out / "modulefiles" / "tf2.21")
        os.symlink(mine, out / "modulefiles" / "tf2.21")
        return found

    monkeypatch.setattr(export, "_check_ours", check_then_swap)
    done = cli("script", "--tf", "2.21", "--format", "slurm", "-o", "out", "--json", "--force")
    assert done.code == 3 and done.error == "bad-output", done.out
    assert "nothing was replaced" in json.loads(done.out)["error"]["message"]
    assert [path.name for path in mine.iterdir()] == ["2.21.0.lua"]
    assert (mine / "2.21.0.lua").read_text() == "-- my own module file\n"
    after = _tree(out)
    assert {name: data for name, data in after.items() if not name.startswith("modulefiles/")} == {
        name: data for name, data in before.items() if not name.startswith("modulefiles/")
    }
    assert not [path for path in out.rglob(".*.tmp")]


def test_a_forged_export_record_makes_the_export_read_only_its_own_files(cli, sandbox, monkeypatch):
    """``.tfgpu-export.json`` is the user's to edit: one naming files outside -o, or the same big
    file a thousand times, is never read through; only the files this export writes are."""
    first = cli("script", "--tf", "2.21", "--format", "slurm", "-o", "out", "--json")
    assert first.code == 0, first.out
    out = sandbox / "out"
    (sandbox / "big").write_bytes(b"b" * 1024 * 1024)
    record = json.loads((out / ".tfgpu-export.json").read_text())
    forged = {f"{'./' * i}../big": "0" * 64 for i in range(1000)}
    forged[str(sandbox / "big")] = "0" * 64
    record["files"].update(forged)
    (out / ".tfgpu-export.json").write_text(json.dumps(record))
    read = []
    now = export._now
    monkeypatch.setattr(export, "_now", lambda path: read.append(path) or now(path))
    done = cli("script", "--tf", "2.21", "--format", "slurm", "-o", "out", "--json")
    assert done.code == 0, done.out
    written = {Path("out") / name for name in json.loads((out / ".tfgpu-export.json").read_text())["files"]}
    assert read and set(read) <= written
    assert not any("big" in name for name in json.loads((out / ".tfgpu-export.json").read_text())["files"])
    (out / "README.md").write_text("mine\n")  # and a file changed since is still refused
    again = cli("script", "--tf", "2.21", "--format", "kubernetes", "-o", "out", "--json")
    assert again.code == 3 and again.error == "output-not-ours", again.out
    assert (out / "README.md").read_text() == "mine\n"


def test_an_export_into_a_directory_another_one_is_writing_waits_and_then_gives_up(cli, sandbox, monkeypatch):
    """Two exports into one -o DIR take turns (a lock on the directory itself): each would otherwise
    read the record before the other wrote it, and the last record would leave the other's files
    out. Here the other is this test holding the lock; the wait is cut short so the case is quick."""
    import fcntl

    out = sandbox / "out"
    out.mkdir()
    monkeypatch.setattr(export, "WAIT_SECONDS", 0.2)
    fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        done = cli("script", "--tf", "2.21", "--format", "slurm", "-o", "out", "--json")
        assert done.code == 1 and done.error == "output-busy", done.out
        assert list(out.iterdir()) == []
    finally:
        os.close(fd)
    again = cli("script", "--tf", "2.21", "--format", "slurm", "-o", "out", "--json")
    assert again.code == 0, again.out
    also = cli("script", "--tf", "2.21", "--format", "kubernetes", "-o", "out", "--json")
    assert also.code == 0, also.out
    recorded = json.loads((out / ".tfgpu-export.json").read_text())["files"]
    assert {"tfgpu-job.sbatch", "tfgpu-job.yaml", "Dockerfile", "install-tf.sh"} <= set(recorded)


KILLED_AT_THE_THIRD_RENAME = """
import os, signal, sys
real, calls = os.replace, []
def replace(*args, **kwargs):
    calls.append(args)
    if len(calls) == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    return real(*args, **kwargs)
os.replace = replace
from tfgpu import cli
sys.exit(cli.main(sys.argv[1:]))
"""


def test_an_export_killed_between_two_renames_leaves_files_the_next_one_knows(tool, sandbox):
    """SIGKILL half-way through the renames: some files are the killed run's, some the earlier run's,
    and the next export (with the earlier run's options) takes all of them for its own."""
    import subprocess
    import sys

    assert tool("script", "--tf", "2.16.1", "--format", "slurm", "-o", "out").code == 0
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_AT_THE_THIRD_RENAME, "script", "--tf", "2.21", "--format", "slurm", "-o", "out"],
        cwd=sandbox,
        capture_output=True,
        timeout=300,
    )
    assert killed.returncode == -9
    again = tool("script", "--tf", "2.16.1", "--format", "slurm", "-o", "out", "--json")
    assert again.code == 0, again.out
