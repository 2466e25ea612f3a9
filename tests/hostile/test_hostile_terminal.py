"""Names and paths read from disk reach the terminal through one door, ``controls.shown``: a
directory named with a terminal escape sequence or a newline is shown escaped, never interpreted,
by ``list``, ``doctor`` and ``remove`` (``--json`` escapes it as JSON does); and a part of an env
the user cannot read is a listing line or a doctor finding, never a traceback.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.hostile.conftest import changed, snapshot

HOSTILE = "evil\x1b[31m\nname\x1b]0;pwned\x07"
SHOWN = "evil\\x1b[31m\\nname\\x1b]0;pwned\\x07"


def fake_env(root: Path) -> Path:
    """An env the tool's marker proves it built at ``root``: bin/python and TensorFlow's dist-info."""
    from tfgpu.envs import marker

    site = root / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    (site / "tensorflow-2.21.0.dist-info").mkdir(parents=True)
    (site / "tensorflow-2.21.0.dist-info" / "METADATA").write_text("Name: tensorflow\nVersion: 2.21.0\n")
    (root / "bin").mkdir()
    os.symlink(sys.executable, root / "bin" / "python")
    marker.write(
        root,
        env_id="0" * 32,
        made_for=os.path.realpath(root),
        fields={"mode": "pip", "tensorflow": "2.21.0", "python": f"{sys.version_info[0]}.{sys.version_info[1]}"},
    )
    return root


@pytest.fixture
def hostile_env(sandbox, monkeypatch) -> Path:
    monkeypatch.setenv("CONDA_ENVS_PATH", str(sandbox / "no-conda"))
    return fake_env(sandbox / "envs" / HOSTILE)


def no_raw_controls(*texts: str) -> None:
    for text in texts:
        assert "\x1b" not in text and "\x07" not in text, repr(text)
        assert "\nname" not in text, repr(text)  # the newline in the name forged no line


def test_shown_escapes_every_control_character():
    from tfgpu.doors.controls import defused, shown

    controls = "".join(map(chr, [*range(0x20), 0x7F, *range(0x80, 0xA0), 0x202E, 0x2066]))
    escaped = shown(f"a{controls}b")
    assert escaped.isprintable() and escaped.startswith("a\\x00") and escaped.endswith("\\u2066b")
    assert shown("plain/path é ü") == "plain/path é ü"
    assert defused("line\n\tnext\x1b[2J") == "line\n\tnext\\x1b[2J"


def test_list_shows_a_hostile_env_name_escaped(cli, hostile_env, sandbox):
    before = snapshot(sandbox)
    done = cli("list")
    assert done.code == 0
    no_raw_controls(done.out, done.err)
    assert SHOWN in done.out and "2.21.0" in done.out
    assert changed(before, snapshot(sandbox), ("logs",)) == []


def test_list_on_a_terminal_shows_a_hostile_env_name_escaped(cli, hostile_env):
    done = cli("list", env={"TTY_COMPATIBLE": "1", "FORCE_COLOR": "1", "COLUMNS": "300"})
    assert done.code == 0
    assert "evil\x1b" not in done.out and "\x1b]0;" not in done.out and "\x07" not in done.out
    assert "evil\\x1b[31m" in done.out


def test_list_json_keeps_the_name_and_escapes_it_as_json(cli, hostile_env):
    done = cli("list", "--json")
    assert done.code == 0 and "\x1b" not in done.out
    assert [row["name"] for row in json.loads(done.out)["envs"]] == [HOSTILE]


def test_doctor_on_a_hostile_env_name_shows_it_escaped(cli, hostile_env, sandbox):
    before = snapshot(sandbox)
    refused = cli("doctor", "--prefix", str(hostile_env))  # a prefix no activation script can carry
    assert refused.code == 2 and "error: bad-prefix" in refused.err
    assert "\x1b" not in refused.out + refused.err and "\x07" not in refused.out + refused.err
    done = cli("doctor", "--interpreter", str(hostile_env / "bin" / "python"))  # the interpreter names its env
    assert done.code in (0, 1), done.err
    no_raw_controls(done.out, done.err)
    assert changed(before, snapshot(sandbox), ("logs",)) == []


def test_remove_of_a_hostile_prefix_says_so_escaped(cli, hostile_env, sandbox):
    before = snapshot(sandbox)
    for target in (hostile_env / "inner", hostile_env):
        done = cli("remove", "--prefix", str(target))
        assert done.code in (2, 3), done.err
        assert "\x1b" not in done.out + done.err and "\x07" not in done.out + done.err
    assert hostile_env.is_dir()
    assert changed(before, snapshot(sandbox), ("logs",)) == []


def test_stray_escapes_in_any_message_are_defused(capsys):
    """The backstop: whatever reaches the output streams (a log line in doctor's evidence, an error
    message naming a path) has its control characters escaped; the layout's newlines stay."""
    from tfgpu.cli.render import results as render
    from tfgpu.errors import OperationError

    render.note("read \x1b[2Jfrom a log")
    render.error(OperationError("install-failed", "first line\nsecond \x1b]0;title\x07line", ["fix \x9b1m"]))
    captured = capsys.readouterr()
    assert "\x1b" not in captured.err and "\x07" not in captured.err and "\x9b" not in captured.err
    assert "read \\x1b[2Jfrom a log" in captured.err and "second \\x1b]0;title\\x07line" in captured.err
    assert "first line\nsecond" in captured.err


# --- a part of an env this user cannot read: only a non-root user is stopped by permissions ---


def _as_nobody() -> list[str] | None:
    """The argv prefix that runs a command as ``nobody`` (root drops to it with setpriv), or None."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return None
    argv = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
    probe = subprocess.run([*argv, sys.executable, "-c", "import tfgpu.cli"], capture_output=True, timeout=60, cwd="/")
    return argv if probe.returncode == 0 else None


@pytest.fixture
def closed_envs():
    """An envs dir readable by everyone, with one env whose lib/ nobody may search and whose
    bin/python points into a directory nobody may enter."""
    as_nobody = _as_nobody()
    if as_nobody is None:
        pytest.skip("needs root and setpriv to run the tool as a user that permissions stop")
    top = Path(tempfile.mkdtemp(prefix="tfgpu-closed-"))
    try:
        top.chmod(0o755)
        envs = top / "envs"
        envs.mkdir()
        env = fake_env(envs / "closed")
        private = top / "private"
        private.mkdir(mode=0o700)
        (private / "python").symlink_to(sys.executable)
        (env / "bin" / "python").unlink()
        (env / "bin" / "python").symlink_to(private / "python")
        (env / "lib").chmod(0o000)
        yield as_nobody, top, env
    finally:
        for path in (top / "envs" / "closed" / "lib", top / "private"):
            if path.exists():
                path.chmod(0o755)
        shutil.rmtree(top, ignore_errors=True)


def _run_as(as_nobody: list[str], top: Path, *argv: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "HOME": str(top),
        "TFGPU_ENVS_DIR": str(top / "envs"),
        "TFGPU_LOG_DIR": str(top / "logs"),
        "TFGPU_CACHE_DIR": str(top / "cache"),
        "CONDA_ENVS_PATH": str(top / "no-conda"),
    }
    return subprocess.run(
        [*as_nobody, sys.executable, "-m", "tfgpu", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(top),
        timeout=300,
    )


def test_list_over_an_env_this_user_cannot_read_lists_it_as_unreadable(closed_envs):
    as_nobody, top, env = closed_envs
    done = _run_as(as_nobody, top, "list", "--json")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    rows = json.loads(done.stdout)["envs"]
    assert [row["name"] for row in rows] == ["closed"] and not rows[0]["healthy"]
    assert "cannot be read by this user" in rows[0]["problems"][0]
    human = _run_as(as_nobody, top, "list")
    assert human.returncode == 0 and "Traceback" not in human.stderr and "cannot be read" in human.stdout


def test_doctor_over_an_env_this_user_cannot_read_is_a_finding(closed_envs):
    as_nobody, top, env = closed_envs
    done = _run_as(as_nobody, top, "doctor", "--prefix", str(env), "--json")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    findings = {f["id"]: f for f in json.loads(done.stdout)["findings"]}
    assert findings["env.readable"]["status"] == "fail"
    assert "Permission denied" in findings["env.readable"]["evidence"][0]
    human = _run_as(as_nobody, top, "doctor", "--prefix", str(env))
    assert "Traceback" not in human.stderr and "env.readable" in human.stdout
