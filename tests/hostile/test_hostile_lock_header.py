"""A forged pip lock header (its checksum recomputed, as anyone can): a number where the recorded
TensorFlow version goes is ``lock-malformed`` at the lock's one record check, never a traceback."""

from __future__ import annotations

import sys

import pytest

from tfgpu.lock.pip import lockfile as pip_lock

from .conftest import changed, no_traceback, snapshot

PY = f"{sys.version_info.major}.{sys.version_info.minor}"


# -- 4. a pip lock's resolution values: the shape check allows numbers where strings go -----------
# pip_lock._check_shape accepts (str, int, float, None) for every resolution key; lock --check then
# hands resolution["tensorflow"] to make_request, which calls .strip() on it.


@pytest.mark.parametrize("value", [2.21, 10**30, float("inf")], ids=["float", "int", "inf"])
def test_a_pip_lock_whose_tensorflow_is_a_number_is_lock_malformed(cli, sandbox, value):
    meta = {
        "format": pip_lock.FORMAT,
        "tool": "tfgpu-install",
        "tool_version": "0",
        "mode": "pip",
        "platform": "linux-64",
        "python_platform": "x86_64-manylinux_2_28",
        "python": PY,
        "index": "https://pypi.org/simple",
        "cpu_only": False,
        "inputs_sha256": "0" * 64,
        "resolution": {
            "tensorflow": value,
            "package": "tensorflow",
            "python": PY,
            "mode": "pip",
            "os": "linux",
            "arch": "x86_64",
            "platform": "linux_x86_64",
            "accelerator": "cuda",
            "cuda": "12.5",
            "cuda_build": "12.5.1",
            "cudnn": "9.3",
            "min_driver": "525.60.13",
            "toolkit_driver": "555.42.02",
            "compute_capabilities": [],
            "requirements": ["tensorflow"],
        },
    }
    body = "tensorflow==2.21.0 \\\n    --hash=sha256:" + "a" * 64 + "\n"
    record = dict(meta, sha256=pip_lock._digest(meta, body))  # anyone can recompute it
    lock = sandbox / "tfgpu-lock.linux-64.txt"
    lock.write_text("# a forged lock\n" + pip_lock.MARK + pip_lock._canonical(record) + "\n" + body)
    before = snapshot(sandbox)
    done = no_traceback(cli, "lock", "--check", str(lock), "--json")
    assert (done.code, done.error) == (2, "lock-malformed"), done.out
    assert changed(before, snapshot(sandbox), ("logs", "cache")) == []
