"""Conda-mode exports install from the channels the team named (``--channel``, a project file's
``channels``), in their order and no other: every format, every artefact in it, each channel
rendered by its format's quoting. A local channel is refused (the target does not have it), and
``plan --json`` names the channels the plan would use."""

from __future__ import annotations

import json
import re
import shlex
import subprocess

import pytest
from exporthelpers import need, shellcheck

from tfgpu import cli
from tfgpu.export import DIRECTORY_FORMATS, FORMATS
from tfgpu.export.cloudinit import embedded_script

TARGET = ("--no-detect", "--os", "linux", "--arch", "x86_64", "--tf", "2.21", "--mode", "conda")
MIRROR = "https://mirror.example.org/cf-mirror"
SECOND = "https://mirror.example.org/extra"
# A URL the door accepts that is full of what a shell, a Dockerfile or a definition file would read.
HOSTILE = 'https://mirror.example.org/it\'s/$(id)/`id`/a;b&c|d*e/"q"/%24HOME'


def main(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def export(capsys, tmp_path, fmt: str, *argv: str) -> dict[str, str]:
    """The export's files, by path under -o (one file: its name)."""
    out = tmp_path / ("out" if fmt in DIRECTORY_FORMATS else "out.file")
    code, _, err = main(capsys, "script", *TARGET, "--format", fmt, "-o", str(out), *argv)
    assert code == 0, err
    if fmt not in DIRECTORY_FORMATS:
        return {fmt: out.read_text()}
    return {p.relative_to(out).as_posix(): p.read_text() for p in sorted(out.rglob("*")) if p.is_file()}


def words(shell: str, expression: str) -> list[str]:
    """The words ``expression`` stands for after ``shell`` (lines of shell), as bash itself reads them."""
    done = subprocess.run(
        ["bash", "-c", f"{shell}\nprintf '%s\\0' {expression}"], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split("\0")[:-1]


def bash_channels(script: str) -> list[str]:
    """``CONDA_CHANNELS`` as bash itself reads the script's assignment."""
    line = re.search(r"^CONDA_CHANNELS=\(.*?\)$", script, re.M | re.S).group(0)
    return words(line, '"${CONDA_CHANNELS[@]}"')


def image_channels(text: str) -> list[str]:
    """The ``-c`` values of the micromamba install of a Dockerfile or an Apptainer definition."""
    start = text.index("micromamba install --yes")
    line = text[start:].split("\n")[0].removesuffix("\\")
    argv = words(f"set -- {line}", '"$@"')
    assert "--override-channels" in argv
    return [argv[i + 1] for i, word in enumerate(argv) if word == "-c"]


def installs(files: dict[str, str]) -> dict[str, list[str]]:
    """Every artefact that installs conda packages, and the channels it installs from."""
    found = {}
    for name, text in files.items():
        if name == "cloud-init":
            found[name] = bash_channels(embedded_script(text))
        elif name == "bash" or name.endswith(".sh"):
            found[name] = bash_channels(text)
        elif name in ("dockerfile", "Dockerfile") or name.endswith(".def"):
            found[name] = image_channels(text)
    return found


EXPECTED_ARTEFACTS = {
    "bash": {"bash"},
    "dockerfile": {"dockerfile"},
    "ansible": {"files/install-tf.sh"},
    "cloud-init": {"cloud-init"},
    "slurm": {"install-tf.sh", "tfgpu-env.def"},
    "kubernetes": {"Dockerfile"},
}


def check(files: dict[str, str], fmt: str, channels: list[str]) -> None:
    found = installs(files)
    assert set(found) == EXPECTED_ARTEFACTS[fmt]
    assert all(value == channels for value in found.values()), found
    for name, text in files.items():  # no fallback to the default channel anywhere
        assert "conda-forge" in channels or not re.search(r"-c '?conda-forge'?(\s|$)", text), name
    listed = "".join(f"\n# - {c}" for c in channels)
    for name in found:
        assert "no other is read):" + listed in files[name], name  # the header names them


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_project_files_channels(capsys, tmp_path, fmt):
    project = tmp_path / "pyproject.toml"
    project.write_text(f'[tool.tfgpu]\ntf = "2.21"\nmode = "conda"\nchannels = ["{MIRROR}"]\n')
    check(export(capsys, tmp_path, fmt, "--project", str(project)), fmt, [MIRROR])


@pytest.mark.parametrize("fmt", FORMATS)
def test_channel_flags_in_their_order(capsys, tmp_path, fmt):
    files = export(capsys, tmp_path, fmt, "--channel", SECOND, "--channel", "nvidia", "--channel", MIRROR)
    check(files, fmt, [SECOND, "nvidia", MIRROR])


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_hostile_url_is_one_word_everywhere(capsys, tmp_path, fmt):
    files = export(capsys, tmp_path, fmt, "--channel", HOSTILE, "--channel", "conda-forge/label/x")
    check(files, fmt, [HOSTILE, "conda-forge/label/x"])
    for name, text in files.items():
        if name in ("bash", "install-tf.sh", "files/install-tf.sh"):
            assert shellcheck(text, tmp_path).stdout == ""
        if name in ("dockerfile", "Dockerfile"):  # hadolint runs shellcheck on each RUN line
            done = subprocess.run([need("hadolint"), "--no-color", "-"], input=text, capture_output=True, text=True)
            assert done.returncode == 0 and done.stdout == "", done.stdout


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(
    "channel, code",
    [
        ("https://mirror.example.org/a\nb", "bad-url"),
        ("https://mirror.example.org/a\x1bb", "bad-url"),
        ("conda-forge;touch x", "bad-channel"),
        ("$(id)", "bad-channel"),
        ("file:///srv/channel", "export-local-channel"),
        ("./channel", "export-local-channel"),
    ],
)
def test_a_bad_or_local_channel_is_refused_and_nothing_written(capsys, tmp_path, fmt, channel, code):
    out = tmp_path / "out"
    done, stdout, _ = main(capsys, "script", *TARGET, "--format", fmt, "-o", str(out), "--channel", channel, "--json")
    error = json.loads(stdout)["error"]
    assert (done, error["code"]) == (2, code) and not out.exists()
    if code == "export-local-channel":
        assert "HTTP" in error["alternatives"][0] and "--channel https://" in error["alternatives"][1]


def test_a_local_channel_in_the_project_file_is_refused_naming_the_file(capsys, tmp_path):
    project = tmp_path / "tfgpu.toml"
    project.write_text(f'mode = "conda"\nchannels = ["{(tmp_path / "channel").as_uri()}"]\n')
    code, out, _ = main(capsys, "script", *TARGET, "--format", "bash", "--project", str(project), "--json")
    error = json.loads(out)["error"]
    assert code == 2 and error["code"] == "export-local-channel" and str(project) in error["message"]


def test_the_project_file_found_by_the_walk_applies(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("TFGPU_PROJECT_FILE", raising=False)
    (tmp_path / "pyproject.toml").write_text(f'[tool.tfgpu]\ntf = "2.13"\nmode = "conda"\nchannels = ["{MIRROR}"]\n')
    monkeypatch.chdir(tmp_path)
    code, out, err = main(capsys, "script", "--format", "bash", "--no-detect")
    assert code == 0, err
    assert bash_channels(out) == [MIRROR] and "-c conda-forge" not in out


def test_no_channel_named_is_conda_forge(capsys, tmp_path):
    check(export(capsys, tmp_path, "bash", "--no-project"), "bash", ["conda-forge"])


def test_channel_is_for_conda_mode(capsys):
    code, out, _ = main(capsys, "script", *TARGET[:-1], "pip", "--format", "bash", "--channel", MIRROR, "--json")
    assert code == 2 and json.loads(out)["error"]["code"] == "conflicting-options"


def test_channel_does_not_go_with_from_lock(capsys, tmp_path):
    lock = tmp_path / "conda-lock.yml"
    lock.write_text("not read: the options are refused first\n")
    code, out, _ = main(capsys, "script", "--format", "bash", "--from-lock", str(lock), "--channel", MIRROR, "--json")
    error = json.loads(out)["error"]
    assert code == 2 and error["code"] == "conflicting-options" and "--from-lock" in error["message"]


def test_the_conda_script_creates_from_exactly_those_channels(capsys, tmp_path):
    """The script run with a stand-in conda on PATH: the argv it is given."""
    need("bash")
    files = export(capsys, tmp_path, "bash", "--channel", HOSTILE, "--channel", "nvidia")
    script = tmp_path / "install.sh"
    script.write_text(files["bash"])
    fake = tmp_path / "bin"
    fake.mkdir()
    record = tmp_path / "argv"
    (fake / "micromamba").write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >> {shlex.quote(str(record))}\nexit 1\n')
    (fake / "micromamba").chmod(0o755)
    env = {"PATH": f"{fake}:/usr/bin:/bin", "HOME": str(tmp_path), "TFGPU_PREFIX": str(tmp_path / "env")}
    env["CONDA_OVERRIDE_CUDA"] = "12.5"
    (fake / "nvidia-smi").write_text("#!/bin/sh\necho 999.99\n")
    (fake / "nvidia-smi").chmod(0o755)
    subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
    argv = record.read_text().splitlines()
    assert argv[:4] == ["create", "--yes", "--prefix", str(tmp_path / "env")]
    assert argv[4:9] == ["--override-channels", "-c", HOSTILE, "-c", "nvidia"]


def test_plan_json_names_the_channels(capsys, tmp_path):
    base = ("plan", *TARGET, "--no-project", "--json")
    assert json.loads(main(capsys, *base)[1])["channels"] == ["conda-forge"]
    code, out, _ = main(capsys, *base, "--channel", MIRROR, "--channel", "nvidia")
    assert code == 0 and json.loads(out)["channels"] == [MIRROR, "nvidia"]
    (tmp_path / "channel").mkdir()
    code, out, _ = main(capsys, *base, "--channel", str(tmp_path / "channel"))
    assert json.loads(out)["channels"] == [(tmp_path / "channel").as_uri()]  # create reads it here
    pip = ("plan", *TARGET[:-1], "pip", "--no-project", "--json")
    assert json.loads(main(capsys, *pip)[1])["channels"] == []
    code, out, _ = main(capsys, *pip, "--channel", MIRROR)
    assert code == 2 and json.loads(out)["error"]["code"] == "conflicting-options"


@pytest.mark.parametrize("value", [HOSTILE, "$HOME", "`id`", "a'$b\"c\\d"])
def test_a_shell_word_with_an_expansion_character_is_exact_and_shellcheck_clean(tmp_path, value):
    """The one shell-word function (``tfgpu.doors.quoting.sh``): bash reads back the very value, and
    shellcheck has nothing to say (single quotes around ``$`` would be SC2016)."""
    from tfgpu.doors import quoting

    line = f"VALUE={quoting.sh(value)}"
    assert words(line, '"$VALUE"') == [value]
    assert shellcheck(f'#!/usr/bin/env bash\n{line}\necho "$VALUE"\n', tmp_path).stdout == ""
