"""Hostile locks whose checksum is right (anyone can recompute it) and whose record or body is not:
every recorded field is parsed like the user's own selectors (``lock-malformed``), and every body
line is one pin through the requirement door (``lock-has-options``). Nothing recorded ever reaches
uv as a program, an option or a file name.
"""

from __future__ import annotations

from .conftest import changed, snapshot

HUGE = "1" * 5000
HASH = "    --hash=sha256:" + "a" * 64


def forged_pip_lock(
    path, *, record_python: str = "3.11", resolution_python: str = "3.11", tensorflow: str = "2.15.1"
) -> None:
    """A pip lock whose checksum is right (anyone can recompute it) and whose record is hostile."""
    from tfgpu.lock.pip import lockfile as pip_lock

    resolution = {
        "tensorflow": tensorflow,
        "package": "tensorflow",
        "python": resolution_python,
        "mode": "pip",
        "os": "linux",
        "arch": "x86_64",
        "platform": "linux-64",
        "accelerator": "cuda",
        "cuda": "12.2",
        "cuda_build": "12.2",
        "cudnn": "8.9",
        "min_driver": "525.60.13",
        "toolkit_driver": "535",
        "compute_capabilities": ["sm_80"],
        "requirements": ["tensorflow[and-cuda]==2.15.1"],
    }
    meta = {
        "format": pip_lock.FORMAT,
        "tool": "tfgpu-install",
        "tool_version": "0",
        "mode": "pip",
        "platform": "linux-64",
        "python_platform": "x86_64-manylinux_2_28",
        "python": record_python,
        "index": "https://pypi.org/simple",
        "cpu_only": False,
        "resolution": resolution,
        "inputs_sha256": "0" * 64,
    }
    body = f"six==1.16.0 \\\n{HASH}\n"
    path.write_text(pip_lock.render(meta, body, str(path)), encoding="utf-8")


def test_a_lock_records_python_that_is_a_path_is_never_run(cli, sandbox):
    """The record's resolution.python reaches `uv venv --python VALUE` unchecked: uv runs the
    program at that path to inspect it. A lock is data; its Python must be an X.Y version."""
    evil = sandbox / "evil"
    evil.write_text(f"#!/bin/sh\ntouch {sandbox / 'PWNED'}\n")
    evil.chmod(0o755)
    lock = sandbox / "tfgpu-lock.linux-64.txt"
    forged_pip_lock(lock, resolution_python=str(evil))
    before = snapshot(sandbox)
    done = cli(
        "create", "--from-lock", str(lock), "--prefix", str(sandbox / "E"), "--no-verify", "--no-detect", "--json"
    )
    assert not (sandbox / "PWNED").exists(), "the lock's python ran"
    assert (done.code, done.error) == (2, "lock-malformed"), done.out
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []


def test_lock_check_never_hands_a_records_python_to_uv_as_an_option(cli, sandbox):
    lock = sandbox / "tfgpu-lock.linux-64.txt"
    forged_pip_lock(lock, record_python="--index-url=http://10.9.9.9/simple")
    done = cli("lock", "--check", str(lock), "--json")
    logged = "".join(p.read_text(errors="replace") for p in (sandbox / "logs").rglob("*") if p.is_file())
    assert "--index-url=http://10.9.9.9" not in logged, "the record's text reached uv's argv"
    assert (done.code, done.error) == (2, "lock-malformed"), done.out


def test_a_lock_records_tensorflow_version_never_names_a_path(cli, sandbox, local_wheels, uv_cache, monkeypatch):
    """The record's resolution.tensorflow reaches ``bytecode.mark_stored`` as a file name part:
    ``py3.11-tensorflow-<value>`` under the store, so ``../`` in it touches a file anywhere."""
    import hashlib
    import re
    import sys

    from tfgpu.lock.pip import lockfile as pip_lock

    monkeypatch.setenv("TFGPU_CACHE_DIR", str(uv_cache))
    body = ""
    for whl in sorted(local_wheels.glob("*.whl")):
        name, version = re.match(r"([^-]+)-([^-]+)-", whl.name).groups()
        body += f"{name.replace('_', '-')}=={version} \\\n    --hash=sha256:{hashlib.sha256(whl.read_bytes()).hexdigest()}\n"
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    escape = "2.21.0/" + "../" * 12 + str(sandbox / "ESCAPED").lstrip("/")
    resolution = {
        "tensorflow": escape,
        "package": "tensorflow",
        "python": python,
        "mode": "pip",
        "os": "linux",
        "arch": "x86_64",
        "platform": "linux-64",
        "accelerator": "cuda",
        "cuda": "12.5",
        "cuda_build": "12.5",
        "cudnn": "9",
        "min_driver": "525.60.13",
        "toolkit_driver": "555",
        "compute_capabilities": ["sm_80"],
        "requirements": ["tensorflow[and-cuda]==2.21.0"],
    }
    meta = {
        "format": pip_lock.FORMAT,
        "tool": "tfgpu-install",
        "tool_version": "0",
        "mode": "pip",
        "platform": "linux-64",
        "python_platform": "x86_64-manylinux_2_28",
        "python": python,
        "index": "https://pypi.org/simple",
        "cpu_only": False,
        "resolution": resolution,
        "inputs_sha256": "0" * 64,
    }
    lock = sandbox / "tfgpu-lock.linux-64.txt"
    lock.write_text(pip_lock.render(meta, body, str(lock)), encoding="utf-8")
    done = cli(
        "create",
        "--from-lock",
        str(lock),
        "--prefix",
        str(sandbox / "E"),
        "--find-links",
        str(local_wheels),
        "--offline",
        "--no-verify",
        "--no-detect",
        "--json",
    )
    assert not (sandbox / "ESCAPED").exists(), (
        "the lock's tensorflow version named a file outside the store",
        done.out[:600],
    )
    assert (done.code, done.error) == (2, "lock-malformed"), done.out


def test_lock_check_of_a_record_with_a_thousand_digit_tensorflow_is_a_clear_error(cli, sandbox):
    lock = sandbox / "tfgpu-lock.linux-64.txt"
    forged_pip_lock(lock, tensorflow=f"2.15.{HUGE}")
    done = cli("lock", "--check", str(lock), "--json")
    assert done.code in (1, 2, 3) and done.error, done.out


def test_option_text_after_a_pins_marker_is_refused(cli, sandbox):
    """``name==1 ; marker --index-url=...``: the marker's tail is an option pip would obey."""
    from tfgpu.lock.pip import lockfile as pip_lock

    lock = sandbox / "tfgpu-lock.linux-64.txt"
    forged_pip_lock(lock)
    meta = pip_lock.read(lock).meta
    meta.pop("sha256")
    body = f'six==1.16.0 ; python_version > "0" --index-url=http://10.9.9.9/simple \\\n{HASH}\n'
    lock.write_text(pip_lock.render(meta, body, str(lock)), encoding="utf-8")
    before = snapshot(sandbox)
    done = cli(
        "create", "--from-lock", str(lock), "--prefix", str(sandbox / "E"), "--no-verify", "--no-detect", "--json"
    )
    assert (done.code, done.error) == (2, "lock-has-options"), done.out
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []


def test_a_records_cuda_that_is_not_a_version_is_malformed(cli, sandbox):
    from tfgpu.lock.pip import lockfile as pip_lock

    lock = sandbox / "tfgpu-lock.linux-64.txt"
    forged_pip_lock(lock)
    meta = pip_lock.read(lock).meta
    meta.pop("sha256")
    meta["resolution"]["cuda"] = "12.2/../../x"
    lock.write_text(pip_lock.render(meta, f"six==1.16.0 \\\n{HASH}\n", str(lock)), encoding="utf-8")
    done = cli("lock", "--check", str(lock), "--json")
    assert (done.code, done.error) == (2, "lock-malformed"), done.out
