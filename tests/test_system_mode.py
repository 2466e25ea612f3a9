"""system mode, built for real against a local stand-in for NVIDIA's servers (tests/fakenvidia.py):
a real runfile-shaped script, a real cuDNN tar.xz, a real venv from a local wheelhouse.

These tests run as root on the CI machines, so "not root" is simulated by replacing
``tfgpu.installers.system_toolkit.is_root``, and the system paths (``/usr/local``, ``/etc``,
``ldconfig``) are redirected into ``tmp_path``.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest
import wheelhouse
from conftest import run_tool
from fakenvidia import Faults, serve_fake_nvidia

from tfgpu import cli
from tfgpu.engines import nvidia as vendor
from tfgpu.installers import system_toolkit
from tfgpu.resolver import make_request, resolve, tables

pytestmark = pytest.mark.skipif(not wheelhouse.have_compiler(), reason="gcc builds the fake libraries")

CUDA, CUDNN = "11.8.0", "8.6.0.163"
TARGET = ("--tf", "2.13", "--mode", "system", "--python", "3.11", "--driver", "999.99")
MAPS = "import json\nprint(json.dumps([l.split()[-1] for l in open('/proc/self/maps') if 'libcud' in l]))\n"


def clear_tables() -> None:
    """The tables are cached per process; in-process tests change TFGPU_DATA_DIR."""
    tables.clear_caches()


@pytest.fixture(scope="module")
def tf213_wheels(tmp_path_factory) -> Path:
    """A find-links directory with a stand-in ``tensorflow==2.13.1`` (plain: no CUDA wheels)."""
    directory = tmp_path_factory.mktemp("tf213-wheels")
    wheelhouse.wheel(directory, "tensorflow", "2.13.1", {"tensorflow/__init__.py": b"__version__ = '2.13.1'\n"})
    return directory


@pytest.fixture(scope="module")
def _shared_fake(tmp_path_factory):
    server = serve_fake_nvidia(tmp_path_factory.mktemp("fake-nvidia"), cuda=CUDA, cudnn=CUDNN)
    yield server
    server.close()


@pytest.fixture
def fake(_shared_fake):
    """The stand-in for NVIDIA's servers, for a test that only downloads from it: one for the
    module (its data overlay is then the same bytes for every test, parsed once), its log of
    requests emptied for the test."""
    _shared_fake.requests.clear()
    yield _shared_fake
    _shared_fake.requests.clear()


@pytest.fixture
def own_fake(tmp_path):
    """A stand-in of the test's own, for a test that changes what it serves or its overlay."""
    server = serve_fake_nvidia(tmp_path, cuda=CUDA, cudnn=CUDNN)
    yield server
    server.close()


@pytest.fixture
def env_for(tmp_path, uv_cache):
    def make(fake_server) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            fake_server.env(),
            TFGPU_CACHE_DIR=str(tmp_path / "cache"),
            TFGPU_LOG_DIR=str(tmp_path / "logs"),
            TFGPU_ENVS_DIR=str(tmp_path / "envs"),
            UV_CACHE_DIR=str(uv_cache),
            COLUMNS="160",
        )
        return env

    return make


def _in_process(monkeypatch, env_for, server, tmp_path):
    for key, value in env_for(server).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(system_toolkit, "SYSTEM_PREFIX", tmp_path / "usr" / "local")
    monkeypatch.setattr(system_toolkit, "ETC", tmp_path / "etc")
    monkeypatch.setattr(system_toolkit, "LDCONFIG", ("true",))
    clear_tables()
    yield server
    clear_tables()


@pytest.fixture
def in_process(monkeypatch, env_for, fake, tmp_path):
    """cli.main in this process, with the fake server's data and system paths under tmp_path."""
    yield from _in_process(monkeypatch, env_for, fake, tmp_path)


@pytest.fixture
def in_process_own(monkeypatch, env_for, own_fake, tmp_path):
    """``in_process`` with a stand-in of the test's own (``own_fake``)."""
    yield from _in_process(monkeypatch, env_for, own_fake, tmp_path)


def create(prefix: Path, wheels: Path, env: dict, *extra: str) -> subprocess.CompletedProcess:
    return run_tool(
        "create",
        *TARGET,
        "--prefix",
        str(prefix),
        "--find-links",
        str(wheels),
        "--offline",
        "--no-verify",
        *extra,
        env=env,
    )


def main_json(capsys, *argv: str) -> tuple[int, dict]:
    code = cli.main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if ".tfgpu-" in p.name or p.name.endswith("-tmp"))


def test_user_prefix_install_works_and_a_rerun_is_a_noop(tmp_path, fake, env_for, tf213_wheels):
    prefix, env = tmp_path / "env", env_for(fake)
    done = create(prefix, tf213_wheels, env, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["installed"]["tensorflow"] == "2.13.1"
    cuda = prefix / "cuda"
    assert (cuda / "bin" / "nvcc").is_file() and (cuda / "include" / "cudnn_version.h").is_file()
    assert (cuda / "lib64" / "libcudnn.so.8").exists() and (cuda / "nvvm" / "libdevice" / "libdevice.10.bc").is_file()
    marker = json.loads((prefix / "tfgpu-env.json").read_text())
    assert marker["mode"] == "system" and marker["toolkit"] == str(cuda)
    assert marker["toolkit_files"]["cudnn_sha256"] == fake.cudnn_sha256
    assert leftovers(tmp_path) == []
    cached = tmp_path / "cache" / "downloads"
    assert {p.name for p in cached.iterdir()} >= {fake.runfile.name, fake.cudnn.name}
    assert not list(cached.glob("*.part"))

    # activated in real bash: the prefix's CUDA first, ptxas from the toolkit, the loader finds libcudart there
    loader = (
        "import ctypes, json; ctypes.CDLL('libcudart.so.11.0'); print('MAPS=' + json.dumps("
        "[l.split()[-1] for l in open('/proc/self/maps') if 'libcud' in l]))"
    )
    script = (
        f'export LD_LIBRARY_PATH=/opt/other\n. "{prefix}/bin/activate"\necho "LD=$LD_LIBRARY_PATH"\n'
        'echo "PTXAS=$(readlink -f "$(command -v ptxas)")"\necho "XLA=$XLA_FLAGS"\n'
        f"TFGPU_NO_PRELOAD=1 python -c {shlex.quote(loader)}\n"
        'deactivate\necho "AFTER=$LD_LIBRARY_PATH"\n'
    )
    shell = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    assert shell.returncode == 0, shell.stderr
    out = dict(line.split("=", 1) for line in shell.stdout.splitlines() if "=" in line)
    assert out["LD"].split(":") == [f"{cuda}/lib64", "/opt/other"]
    assert out["PTXAS"] == str(cuda / "bin" / "ptxas")
    assert out["XLA"] == f"--xla_gpu_cuda_data_dir={cuda}"
    assert out["MAPS"] and all(p.startswith(f"{cuda}/lib64/") for p in json.loads(out["MAPS"]))
    assert out["AFTER"] == "/opt/other"

    # the user-level twin of /etc/profile.d: nvcc and CUDA_HOME for a shell or a build
    toolkit_sh = prefix / "etc" / "tfgpu" / "cuda-toolkit.sh"
    twice = f'unset LD_LIBRARY_PATH; . "{toolkit_sh}"; . "{toolkit_sh}"; '  # sourcing again adds nothing
    shell = subprocess.run(
        ["bash", "-c", twice + 'command -v nvcc; echo "$CUDA_HOME"; echo "$LD_LIBRARY_PATH"; nvcc --version'],
        capture_output=True,
        text=True,
    )
    assert shell.returncode == 0, shell.stderr
    assert shell.stdout.splitlines()[:3] == [str(cuda / "bin" / "nvcc"), str(cuda), f"{cuda}/lib64"]
    assert f"release {CUDA}" in shell.stdout

    # unactivated (IDE, cron): the load hook loads the prefix's libraries when tensorflow is imported
    bare = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "XLA_FLAGS", "VIRTUAL_ENV")}
    run = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", "import os, tensorflow\n" + MAPS + "print(os.environ['XLA_FLAGS'])"],
        capture_output=True,
        text=True,
        env=bare,
    )
    assert run.returncode == 0, run.stderr
    loaded, xla = run.stdout.splitlines()
    names = {Path(p).name for p in json.loads(loaded)}
    assert {"libcudart.so.11.8.0", "libcudnn.so.8.6.0"} <= names
    assert all(p.startswith(f"{cuda}/lib64/") for p in json.loads(loaded))
    assert xla == f"--xla_gpu_cuda_data_dir={cuda}"

    # a second run: everything is in place -> nothing downloaded, nothing rebuilt
    requests, stamp = len(fake.requests), (prefix / "tfgpu-env.json").stat().st_mtime_ns
    again = create(prefix, tf213_wheels, env)
    assert again.returncode == 0, again.stderr
    assert "Already in place" in again.stdout
    assert len(fake.requests) == requests and (prefix / "tfgpu-env.json").stat().st_mtime_ns == stamp
    # what it reports installed is what the marker recorded: the first run's
    again = create(prefix, tf213_wheels, env, "--json")
    assert json.loads(again.stdout)["installed"] == json.loads(done.stdout)["installed"]


def test_dry_run_lists_every_command_and_touches_nothing(tmp_path, in_process, capsys):
    prefix = tmp_path / "env"
    code, document = main_json(capsys, "create", *TARGET, "--prefix", str(prefix), "--dry-run")
    assert code == 0
    steps = document["steps"]
    runfile = next(s for s in steps if s["kind"] == "runfile")
    staging = tmp_path / ".env.tfgpu-staging"
    assert runfile["argv"][0] == "sh" and runfile["argv"][1].endswith(in_process.runfile.name)
    assert runfile["argv"][2:] == [
        "--silent",
        "--toolkit",
        f"--toolkitpath={staging}/cuda",
        "--override",
        "--no-man-page",
        f"--tmpdir={staging}/cuda-tmp",
    ]
    downloads = [s for s in steps if s["kind"] == "download"]
    assert [in_process.runfile_url in d["content"] for d in downloads] == [True, False]
    assert in_process.cudnn_sha256 in downloads[1]["content"]
    assert [s["argv"][1] for s in steps if s["kind"] in ("run", "lock", "inventory")][:3] == ["venv", "pip", "pip"]
    assert steps[-1]["kind"] == "commit"
    assert not prefix.exists() and not staging.exists() and in_process.requests == []


def test_system_paths_without_root_are_refused_before_any_download(tmp_path, in_process, capsys, monkeypatch):
    monkeypatch.setattr(system_toolkit, "is_root", lambda: False)
    code, document = main_json(capsys, "create", *TARGET, "--name", "tf213")
    assert code == 3
    error = document["error"]
    assert error["code"] == "needs-root" and "cuda-11.8" in error["message"]
    assert any("--prefix" in way for way in error["alternatives"])
    assert in_process.requests == [] and not (tmp_path / "envs").exists()
    assert not (tmp_path / "cache" / "downloads").exists()


def test_root_install_writes_system_files_and_a_second_env_reuses_the_toolkit(
    tmp_path, in_process, capsys, tf213_wheels, monkeypatch
):
    monkeypatch.setattr(system_toolkit, "is_root", lambda: True)  # as when the suite runs as a normal user
    common = (*TARGET, "--find-links", str(tf213_wheels), "--offline", "--no-verify")
    code, document = main_json(capsys, "create", *common, "--name", "one")
    assert code == 0, document
    toolkit = tmp_path / "usr" / "local" / "cuda-11.8"
    assert (toolkit / "lib64" / "libcudnn.so.8").exists()
    assert f"{toolkit}/bin" in (tmp_path / "etc" / "profile.d" / "tfgpu-cuda-11.8.sh").read_text()
    assert f"{toolkit}/lib64" in (tmp_path / "etc" / "ld.so.conf.d" / "tfgpu-cuda-11.8.conf").read_text()
    hook = (tmp_path / "envs" / "one" / "lib" / "python3.11" / "site-packages" / "_tfgpu_cuda_hook.py").read_text()
    assert f'"{toolkit}/lib64/libcudart.so.11.0"' in hook
    assert leftovers(tmp_path / "usr" / "local") == []
    served = len(in_process.requests)

    code, document = main_json(capsys, "create", *common, "--name", "two", "--dry-run")
    kinds = [step["kind"] for step in document["steps"]]
    assert kinds[0] == "toolkit-reuse" and "download" not in kinds and "runfile" not in kinds
    code, document = main_json(capsys, "create", *common, "--name", "two")
    assert code == 0 and len(in_process.requests) == served


def test_corrupt_archive_is_refused_and_nothing_is_installed(tmp_path, own_fake, env_for, tf213_wheels):
    fake = own_fake
    fake.faults.corrupt, fake.faults.only = True, "cudnn"
    prefix = tmp_path / "env"
    done = create(prefix, tf213_wheels, env_for(fake), "--json")
    assert done.returncode == 1, done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "checksum-mismatch" and fake.cudnn.name in error["message"]
    assert not prefix.exists() and leftovers(tmp_path) == []
    assert not (tmp_path / "cache" / "downloads" / fake.cudnn.name).exists()
    assert not list((tmp_path / "cache" / "downloads").glob("*.part"))


def test_failing_runfile_leaves_nothing_behind(tmp_path, env_for, tf213_wheels):
    with serve_fake_nvidia(tmp_path, cuda=CUDA, cudnn=CUDNN, faults=Faults(runfile_fails=True)) as fake:
        prefix = tmp_path / "env"
        done = create(prefix, tf213_wheels, env_for(fake), "--json")
    assert done.returncode == 1
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "runfile-failed" and "failing on purpose" in error["message"]
    assert not prefix.exists() and leftovers(tmp_path) == []


def test_driver_too_old_or_missing_stops_first(tmp_path, in_process, capsys):
    code, document = main_json(
        capsys,
        "create",
        "--tf",
        "2.13",
        "--mode",
        "system",
        "--python",
        "3.11",
        "--driver",
        "400.1",
        "--prefix",
        str(tmp_path / "env"),
    )
    assert code == 3 and document["error"]["code"] == "driver-too-old"
    assert "450.80.02" in document["error"]["message"]
    code, document = main_json(
        capsys,
        "create",
        "--tf",
        "2.13",
        "--mode",
        "system",
        "--python",
        "3.11",
        "--os",
        "linux",
        "--arch",
        "x86_64",
        "--no-detect",
        "--prefix",
        str(tmp_path / "env"),
    )
    assert code == 3 and document["error"]["code"] == "driver-missing"
    assert "450.80.02" in document["error"]["message"]
    assert in_process.requests == [] and not (tmp_path / "env").exists()


def test_a_dry_run_without_a_driver_shows_every_step_and_the_driver_they_need(tmp_path, in_process, capsys):
    """The login node where an admin looks first has no driver: a dry run shows the whole build
    (the runfile, cuDNN, the venv) and says which driver it needs, where a real run refuses."""
    argv = ("create", "--tf", "2.13", "--mode", "system", "--python", "3.11", "--os", "linux", "--arch", "x86_64")
    argv += ("--no-detect", "--prefix", str(tmp_path / "env"), "--dry-run")
    code, document = main_json(capsys, *argv)
    assert code == 0, document
    kinds = [step["kind"] for step in document["steps"]]
    assert {"download", "runfile", "unpack", "commit"} <= set(kinds), kinds
    (note,) = document["notes"]
    assert "no NVIDIA driver detected here" in note and ">= 450.80.02" in note and "driver-missing" in note
    assert cli.main(list(argv)) == 0
    shown = capsys.readouterr().out
    assert "driver-missing" in shown and "Steps (dry run" in shown
    assert shown.index(">= 450.80.02") < shown.index("Steps (dry run")
    assert in_process.requests == [] and not (tmp_path / "env").exists()
    code, document = main_json(capsys, *argv[:-1])  # the same, for real: refused before anything
    assert code == 3 and document["error"]["code"] == "driver-missing"
    assert in_process.requests == [] and not (tmp_path / "env").exists()


def test_archives_without_a_known_checksum_are_refused(tmp_path, monkeypatch, capsys):
    """A file whose checksum the data lacks is never installed. The shipped data has one for every
    archive TF needs, so an overlay (an incomplete site mirror, say) takes the checksums away from
    every cuDNN 8 archive for CUDA 11."""
    import re
    from importlib.resources import files

    from tfgpu.resolver.packages import cudnn_archive_for

    blocks = files("tfgpu.data").joinpath("cudnn_archives.toml").read_text(encoding="utf-8").split("\n[[archive]]\n")
    for index, block in enumerate(blocks):
        if re.search(r'^version = "8\.', block, re.MULTILINE) and re.search(r"^cuda_major = 11$", block, re.MULTILINE):
            blocks[index] = re.sub(r'^(sha256|md5) = ".*"$', r'\1 = ""', block, flags=re.MULTILINE)
    overlay = tmp_path / "mirror-data"
    overlay.mkdir()
    (overlay / "cudnn_archives.toml").write_text("\n[[archive]]\n".join(blocks), encoding="utf-8")
    monkeypatch.setenv("TFGPU_DATA_DIR", str(overlay))
    monkeypatch.setenv("TFGPU_CACHE_DIR", str(tmp_path / "cache"))
    clear_tables()
    try:
        chosen = cudnn_archive_for("11.8", "8.6")
        assert not chosen.sha256
        code, document = main_json(capsys, "create", *TARGET, "--prefix", str(tmp_path / "env"))
    finally:
        monkeypatch.delenv("TFGPU_DATA_DIR")
        clear_tables()
    assert code == 3 and document["error"]["code"] == "unverified-download"
    assert chosen.filename in document["error"]["message"]
    assert not (tmp_path / "env").exists() and not (tmp_path / "cache" / "downloads").exists()


def test_vendor_artifacts_for_exporters():
    clear_tables()
    request = make_request(
        tf="2.18", mode="system", python=None, os="linux", arch="x86_64", driver="999.99", gpu_cc=None
    )
    runfile, cudnn = vendor.artifacts(resolve(request, None))
    assert runfile.kind == "runfile" and runfile.filename == "cuda_12.5.1_555.42.06_linux.run"
    assert runfile.sha256 == "b5e0a779e089c86610051141c4cf498beef431858ec63398107391727ecbdb04"
    assert cudnn.kind == "cudnn" and cudnn.version == "9.3.0.75" and cudnn.size == 756509380
    assert cudnn.url.startswith("https://developer.download.nvidia.com/") and cudnn.verifiable


def test_cudnn_archive_table_is_well_formed():
    """cudnn_archives.toml: sources exist, URLs are HTTPS and end in the file name, a row without a
    sha256 says so in ``unverified``, and every TF CUDA build finds an archive."""
    import tomllib
    from importlib.resources import files

    data = files("tfgpu.data")
    sources = tomllib.loads(data.joinpath("sources.toml").read_text())["sources"]
    rows = tomllib.loads(data.joinpath("cudnn_archives.toml").read_text())["archive"]
    assert rows
    for row in rows:
        assert row["source"] and all(key in sources for key in row["source"]), row["filename"]
        assert row["url"].startswith("https://") and row["url"].endswith("/" + row["filename"])
        assert row["sha256"] == "" or (len(row["sha256"]) == 64 and int(row["sha256"], 16) >= 0)
        assert row["sha256"] or "sha256" in row["unverified"], row["filename"]
        assert set(row["unverified"]) <= set(row), row["filename"]
        # NVIDIA's names: the redist archives carry the CUDA variant, the legacy tarballs the CUDA X.Y.
        redist = f"-{row['version']}_cuda{row['cuda_major']}" in row["filename"]
        legacy = row["filename"].startswith(f"cudnn-{row['cuda_major']}.") and row["filename"].endswith(
            f"-linux-x64-v{row['version']}.tgz"
        )
        assert row["platform"] == "linux_x86_64" and (redist or legacy), row["filename"]
    from tfgpu.resolver.packages import cudnn_archive_for

    clear_tables()
    for cuda, cudnn, expected in (
        ("10.0", "7.4", "cudnn-10.0-linux-x64-v7.6.5.32.tgz"),
        ("10.1", "7.6", "cudnn-10.1-linux-x64-v7.6.5.32.tgz"),
        ("11.0", "8.0", "cudnn-linux-x86_64-8.9.7.29_cuda11-archive.tar.xz"),
        ("11.2", "8.1", "cudnn-linux-x86_64-8.9.7.29_cuda11-archive.tar.xz"),
        ("11.8", "8.6", "cudnn-linux-x86_64-8.9.7.29_cuda11-archive.tar.xz"),
        ("12.3", "8.9", "cudnn-linux-x86_64-8.9.7.29_cuda12-archive.tar.xz"),
        ("12.5.1", "9.3", "cudnn-linux-x86_64-9.3.0.75_cuda12-archive.tar.xz"),
        ("12.5.1", "9.10", "cudnn-linux-x86_64-9.10.2.21_cuda12-archive.tar.xz"),
    ):
        assert cudnn_archive_for(cuda, cudnn).filename == expected, (cuda, cudnn)
    assert cudnn_archive_for("12.5", "10.0") is None


def test_offline_uses_files_copied_into_the_cache(tmp_path, in_process_own, capsys, tf213_wheels):
    """Air-gapped: NVIDIA's URL is not reachable; the archive copied into the cache is verified and used."""
    in_process = in_process_own
    overlay = in_process.overlay_dir / "cudnn_archives.toml"
    overlay.write_text(overlay.read_text().replace(in_process.base_url, "https://nvidia.invalid/cudnn"))
    clear_tables()
    argv = (
        "create",
        *TARGET,
        "--prefix",
        str(tmp_path / "env"),
        "--find-links",
        str(tf213_wheels),
        "--offline",
        "--no-verify",
    )
    code, document = main_json(capsys, *argv)
    assert code == 1 and document["error"]["code"] == "offline-download-missing"
    assert in_process.cudnn.name in document["error"]["message"] and not (tmp_path / "env").exists()
    downloads = tmp_path / "cache" / "downloads"
    (downloads / in_process.cudnn.name).write_bytes(in_process.cudnn.read_bytes())
    code, document = main_json(capsys, *argv)
    assert code == 0, document
    assert (tmp_path / "env" / "cuda" / "lib64" / "libcudnn.so.8").exists()
    assert not any("cudnn" in path for path, _, _ in in_process.requests)
