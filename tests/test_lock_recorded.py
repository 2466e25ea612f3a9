"""What a lock records about its resolution is one typed record (``tfgpu.lock.recorded.Recorded``) for
both formats: made from the resolution when a lock is written, turned into the file's form in one
place, and read back by the readers' one check into the same record. The resolver is the real one
(pure); no uv, rattler or index is needed to make or read a record.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tfgpu.engines import rattler_engine
from tfgpu.errors import TfgpuError
from tfgpu.lock.conda.read import CondaLock
from tfgpu.lock.recorded import Recorded, planned
from tfgpu.lock.selectors import check_record
from tfgpu.lock.targets import lock_targets
from tfgpu.settings import Selectors

TARGETS = [
    ("2.21", "3.11", ("linux-64", "linux-aarch64"), ()),
    ("2.16", "3.11", ("linux-64", "osx-arm64"), ()),
    ("2.13", "3.10", ("linux-64",), ()),
    ("2.20", "3.11", ("linux-64",), ("jax",)),
]


def _recorded(mode: str, tf: str, python: str, platforms, companions) -> list[tuple[str, Recorded]]:
    """(platform, record) as ``lock --mode MODE`` records each platform (a conda lock: with the
    ``__cuda`` and the specs its platform is solved with)."""
    targets = lock_targets(
        list(platforms), Selectors(tf=tf, python=python, mode=mode, companions=companions), allow_cpu=True
    )
    found = []
    for platform, resolution, cpu_only in targets:
        requirements = list(resolution.packages.pip)
        if mode == "conda":
            cuda = None if cpu_only or resolution.accelerator != "cuda" else rattler_engine.virtual_cuda(resolution)
            specs, _ = rattler_engine.conda_specs(resolution, cpu_only=cpu_only)
            record = planned(
                resolution, cpu_only=cpu_only, requirements=requirements, virtual_cuda=cuda, conda_specs=specs
            )
        else:
            record = planned(resolution, cpu_only=cpu_only, requirements=requirements)
        found.append((platform.name, record))
    return found


@pytest.mark.parametrize(("tf", "python", "platforms", "companions"), TARGETS)
def test_a_pip_record_reads_back_as_the_record_written(tf, python, platforms, companions):
    for _, written in _recorded("pip", tf, python, platforms, companions):
        entry = json.loads(json.dumps(written.to_dict()))  # the header line's form
        assert "cpu_only" not in entry  # a pip lock keeps it in its header
        assert ("companions" in entry) == bool(companions)
        assert check_record(entry, path="lock.txt", mode="pip", cpu_only=written.cpu_only) == written


@pytest.mark.parametrize(("tf", "python", "platforms", "companions"), [t for t in TARGETS if not t[3]])
def test_a_conda_record_reads_back_through_the_lock_as_the_record_written(tf, python, platforms, companions):
    """Each platform, a CPU-only one (``--allow-cpu``) and Apple silicon's Metal one included: both are
    solved without ``__cuda`` and record none, which the reader takes (it refused them as corrupt)."""
    written = dict(_recorded("conda", tf, python, platforms, companions))
    custom = {
        f"tfgpu_resolution.{name}": json.dumps(record.to_dict(), sort_keys=True) for name, record in written.items()
    }
    lock = CondaLock(path=Path("conda-lock.yml"), lockfile=None, custom=custom)
    for name, record in written.items():
        assert lock.resolution(name) == record
    assert any(record.virtual_cuda is None for record in written.values()) == (len(platforms) > 1)


def _conda_lock_with(**changes) -> CondaLock:
    [(name, record)] = _recorded("conda", "2.13", "3.10", ("linux-64",), ())
    entry = record.to_dict() | changes
    custom = {f"tfgpu_resolution.{name}": json.dumps({k: v for k, v in entry.items() if v is not ...})}
    return CondaLock(path=Path("conda-lock.yml"), lockfile=None, custom=custom)


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        # One code for a record field of the wrong type or form, in a conda lock as in a pip lock.
        ({"virtual_cuda": ...}, "lock-malformed"),  # left out: a record this tool never writes
        ({"virtual_cuda": ["12.2"]}, "lock-malformed"),
        ({"virtual_cuda": 12.2}, "lock-malformed"),
        ({"virtual_cuda": "12.2/../x"}, "lock-malformed"),
        ({"cpu_only": "no"}, "lock-malformed"),
        ({"cpu_only": ...}, "lock-malformed"),
        ({"conda_specs": "python 3.10.*"}, "lock-malformed"),
        ({"conda_specs": None}, "lock-malformed"),
        ({"conda_specs": ...}, "lock-malformed"),
        ({"requirements": None}, "lock-malformed"),
        ({"tensorflow": 2.13}, "lock-malformed"),
        ({"tensorflow": "2.13.1; rm -rf /"}, "lock-malformed"),
    ],
)
def test_a_conda_record_of_another_shape_is_refused(changes, code):
    with pytest.raises(TfgpuError) as refused:
        _conda_lock_with(**changes).resolution("linux-64")
    assert refused.value.code == code


@pytest.mark.parametrize(
    ("flags", "platforms"), [((), ("linux-64", "osx-arm64")), (("--allow-cpu",), ("linux-64", "linux-aarch64"))]
)
def test_the_tools_own_conda_lock_with_a_platform_without_cuda_is_checked(
    tmp_path, lock_channel, lock_index, flags, platforms
):
    """For real: rattler against tests/condachannel.py's channel, uv against a local index. A platform
    solved without ``__cuda`` (Metal, or CPU-only) records none; ``lock --check`` reads it and finds it current."""
    import os
    import sys

    from conftest import run_tool

    env = dict(
        os.environ,
        TFGPU_INDEX_URL=lock_index,
        TFGPU_CACHE_DIR=str(tmp_path / "cache"),
        TFGPU_LOG_DIR=str(tmp_path / "logs"),
        HOME=str(tmp_path),
    )
    path = tmp_path / "conda-lock.yml"
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    argv = ["lock", "--tf", "2.13", "--mode", "conda", "--python", python, "--no-detect"]
    argv += ["--channel", str(lock_channel), "-o", str(path), *flags]
    made = run_tool(*argv, *(f for name in platforms for f in ("--platform", name)), env=env)
    assert made.returncode == 0, made.stderr
    done = run_tool("lock", "--check", str(path), "--json", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["current"] and report["platforms"] == list(platforms)


@pytest.mark.parametrize(
    "text",
    ['{"tensorflow": "2.13.1"', "[]", '"2.13"', "", "{" * 100_000, "x" * (2 * 1024 * 1024)],
    ids=["cut-short", "a-list", "a-string", "empty", "deep", "huge"],
)
def test_a_conda_record_that_is_no_json_table_is_malformed_as_a_pip_header_is(text):
    """A conda lock that parsed, whose record for a platform is not a JSON table (cut short, another
    JSON type, nested past the limit, megabytes): malformed input (exit 2), as a pip lock's header
    line that does not parse is, and said on one line."""
    lock = CondaLock(path=Path("conda-lock.yml"), lockfile=None, custom={"tfgpu_resolution.linux-64": text})
    with pytest.raises(TfgpuError) as refused:
        lock.resolution("linux-64")
    assert (refused.value.code, refused.value.exit_code) == ("lock-malformed", 2)
    assert "\n" not in refused.value.message and len(refused.value.message) < 1_000
