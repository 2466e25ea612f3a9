"""scripts/regen_nvidia_data.py against the manifest copies in tests/fixtures/nvidia/: the shipped
runfile and cuDNN rows agree with them (the independent check against primary sources run on every
release), the script regenerates those rows exactly, and it fails loudly on a difference.

The script's ``main`` runs in this process (its output captured, its exit code what ``main``
returns or argparse exits with); one test runs it as the command a maintainer types, which is all
its ``if __name__ == "__main__"`` adds."""

from __future__ import annotations

import contextlib
import hashlib
import io
import re
import shutil
import subprocess
import sys
import tomllib
from importlib.resources import files
from pathlib import Path

import pytest
import scriptmodule

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "regen_nvidia_data.py"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "nvidia"
DATA = Path(str(files("tfgpu.data")))  # what the installed package ships
MANIFESTS = sorted(p for p in FIXTURES.iterdir() if p.name != "README.md")
SOURCES = tomllib.loads((DATA / "sources.toml").read_text(encoding="utf-8"))["sources"]
FIXTURE_KEYS = {key: entry for key, entry in SOURCES.items() if entry.get("fixture")}


scriptmodule.load("nvidia_manifests")  # what the script imports by its bare name, from its own directory
SCRIPT_MODULE = scriptmodule.load("regen_nvidia_data")


def regen(*args: str | Path, data: Path = DATA) -> subprocess.CompletedProcess:
    """The script's ``main`` in this process, as :func:`regen_process` would run it."""
    argv = ["--data", str(data), *map(str, args)]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = SCRIPT_MODULE.main(argv)
        except SystemExit as exit:  # argparse's usage errors
            code = exit.code if isinstance(exit.code, int) else 1
    return subprocess.CompletedProcess([str(SCRIPT), *argv], code, out.getvalue(), err.getvalue())


def regen_process(*args: str | Path, data: Path = DATA) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--data", str(data), *map(str, args)], capture_output=True, text=True, timeout=120
    )


def test_the_data_agrees_with_every_manifest_and_each_checksum_is_confirmed():
    done = regen("--check", "--complete", *MANIFESTS)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^\d+ data row\(s\) matched; 0 difference\(s\)$", done.stdout, re.MULTILINE), done.stdout
    matched = int(re.search(r"^(\d+) data row", done.stdout, re.MULTILINE).group(1))
    runfiles = [r for r in tomllib.loads((DATA / "cuda.toml").read_text())["toolkit"] if r["runfile"]]
    archives = tomllib.loads((DATA / "cudnn_archives.toml").read_text())["archive"]
    assert matched == len(runfiles) + len(archives)  # every row is backed by at least one manifest


def test_every_fixture_is_a_source_key_and_nvidias_copies_are_byte_exact():
    assert {FIXTURES / Path(entry["fixture"]).name for entry in FIXTURE_KEYS.values()} == set(MANIFESTS)
    for key, entry in FIXTURE_KEYS.items():
        assert entry["repository"] and re.fullmatch(r"[0-9a-f]{40}", entry["commit"]) and entry["path"], key
        assert isinstance(entry["primary"], bool), key
        if "fixture_sha256" in entry:
            data = (ROOT / entry["fixture"]).read_bytes()
            assert hashlib.sha256(data).hexdigest() == entry["fixture_sha256"], key
    pinned = [key for key, entry in FIXTURE_KEYS.items() if entry.get("fixture_sha256")]
    assert len(pinned) >= 3


def test_a_row_citing_a_manifest_that_lacks_its_file_is_reported(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(DATA, data, ignore=shutil.ignore_patterns("__pycache__", "*.py"))
    archives = data / "cudnn_archives.toml"
    text = archives.read_text()
    legacy = next(r for r in tomllib.loads(text)["archive"] if r["filename"].endswith(".tgz"))
    cited = 'source = ["NIX-CUDNN-93e47e5", "SPACK-CUDNN"]'
    assert cited in text
    archives.write_text(text.replace(cited, 'source = ["NIX-CUDNN-93e47e5", "SPACK-CUDNN", "NV-CUDNN-9.3.0"]', 1))
    done = regen("--check", "--complete", *MANIFESTS, data=data)
    assert done.returncode == 1
    problem = f"unconfirmed: {legacy['filename']}: cites NV-CUDNN-9.3.0, whose manifest does not list the file"
    assert problem in done.stdout


def test_update_regenerates_the_checksum_fields_exactly(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(DATA, data, ignore=shutil.ignore_patterns("__pycache__", "*.py"))
    for name in ("cuda.toml", "cudnn_archives.toml"):
        text = (data / name).read_text(encoding="utf-8")
        text = re.sub(r'^(sha256|md5) = "[0-9a-f]+"$', r'\1 = ""', text, flags=re.MULTILINE)
        text = re.sub(r"^size = [0-9]+$", "size = 0", text, flags=re.MULTILINE)
        (data / name).write_text(text, encoding="utf-8")
    assert regen("--check", *MANIFESTS, data=data).returncode == 1
    done = regen("--update", *MANIFESTS, data=data)
    assert done.returncode == 0, done.stdout + done.stderr
    for name in ("cuda.toml", "cudnn_archives.toml"):
        assert (data / name).read_text(encoding="utf-8") == (DATA / name).read_text(encoding="utf-8"), name


def test_check_fails_on_a_checksum_that_differs(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(DATA, data, ignore=shutil.ignore_patterns("__pycache__", "*.py"))
    archives = data / "cudnn_archives.toml"
    row = next(r for r in tomllib.loads(archives.read_text())["archive"] if r["md5"])
    archives.write_text(archives.read_text().replace(row["sha256"], "0" * 64, 1))
    done = regen("--check", *MANIFESTS, data=data)
    assert done.returncode == 1 and f"differs: {row['filename']}: sha256" in done.stdout
    update = regen("--update", *MANIFESTS, data=data)  # never overwritten: a person looks first
    assert update.returncode == 2 and "conflict" in update.stderr and archives.read_text().count("0" * 64) == 1


def test_manifests_that_contradict_each_other_are_an_error(tmp_path):
    original = FIXTURES / "redistrib_8.6.0.json"
    sha256 = re.search(r'"sha256": "([0-9a-f]{64})"', original.read_text().split("cuda11", 1)[1]).group(1)
    forged = tmp_path / "redistrib_8.6.0.json"
    forged.write_text(original.read_text().replace(sha256, "f" * 64))
    done = regen_process("--check", forged, FIXTURES / "spack-cudnn-versions.py.txt")  # the command itself
    assert done.returncode == 2 and "manifests disagree on sha256" in done.stderr


def test_md5sum_txt_in_nvidias_format(tmp_path):
    toolkit = next(r for r in tomllib.loads((DATA / "cuda.toml").read_text())["toolkit"] if r["md5"])
    listing = tmp_path / "md5sum.txt"
    listing.write_text(f"{toolkit['md5']}  {toolkit['runfile']}\n{'1' * 32}  cuda_{toolkit['version']}_win10.exe\n")
    done = regen("--check", listing)
    assert done.returncode == 0 and "NVIDIA md5sum.txt" in done.stdout and "1 data row(s) matched" in done.stdout
    listing.write_text(f"{'2' * 32}  {toolkit['runfile']}\n")
    assert regen("--check", listing).returncode == 1


@pytest.mark.parametrize("text", ["not a manifest\n", "{}\n"])
def test_unknown_files_are_refused(tmp_path, text):
    path = tmp_path / ("x.json" if text.startswith("{") else "x.txt")
    path.write_text(text)
    done = regen("--check", path)
    assert done.returncode == 2 and "error:" in done.stderr
