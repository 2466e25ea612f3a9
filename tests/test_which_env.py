"""One answer to "which env": ``--name``, ``--prefix``, ``--interpreter`` and the active env, the
same for verify, doctor, repair, remove and list (``tfgpu/envs/which.py``).

No conda runs on this machine, so the conda installation is **fake**: a directory with
``conda-meta/``, ``envs/`` and a ``bin/conda`` that only exits 0, named by ``CONDA_EXE`` (what
``conda activate`` sets), as ``tests/test_conda_mode.py`` does. The conda-mode env in it is fake
too, because building a real one needs a channel and minutes: ``conda-meta/``, the tool's real
marker written by ``tfgpu.envs.marker.write`` for its real path, an empty site-packages, and a
``bin/python`` that is a **stub** printing the JSON report ``verify``'s check prints (no TensorFlow
runs here), with an ``nvidia-smi`` on PATH that fails (tests/fakenvidia.py), so that verify asks
the env instead of saying at once that this machine has no driver. Everything else — the lookup, the marker proof, doctor's file reading, repair's survey,
remove's transaction, list's scan — is the real code, run through the command line.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

import fakenvidia
import pytest
from conftest import run_tool

REPORT = {"ok": True, "python": "3.11.7", "tensorflow": "2.13.1", "gpus": [], "build_info": {}}


def cli(*argv, env):
    """The tool run in-process; an exception escaping it (a traceback a user would see) fails the test."""
    try:
        return run_tool(*argv, env=env)
    except BaseException as error:  # noqa: BLE001 - the point of the helper
        pytest.fail(f"traceback: {type(error).__name__}: {str(error)[:200]}")


def fake_env(prefix: Path, *, kind: str = "conda", built: bool = True) -> Path:
    """An env directory the lookup can find: conda-meta/ or pyvenv.cfg, a stub bin/python that prints
    the verify report, an empty site-packages and (``built``) the tool's own marker for this path."""
    from tfgpu.envs import marker

    (prefix / "bin").mkdir(parents=True)
    (prefix / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    if kind == "conda":
        (prefix / "conda-meta").mkdir()
        (prefix / "conda-meta" / "history").write_text("")
    else:
        (prefix / "pyvenv.cfg").write_text("home = /usr/bin\n")
    python = prefix / "bin" / "python"
    python.write_text(f"#!/bin/sh\nprintf '%s\\n' '{json.dumps(REPORT)}'\n")
    python.chmod(0o755)
    if built:
        marker.write(
            prefix,
            env_id=secrets.token_hex(16),
            made_for=os.path.realpath(prefix),
            fields={
                "name": prefix.name,
                "mode": "conda" if kind == "conda" else "pip",
                "tensorflow": "2.13.1",
                "python": "3.11",
                "engine": "rattler",
            },
        )
    return prefix


@pytest.fixture
def conda_root(tmp_path) -> Path:
    """The fake conda installation (see the module docstring)."""
    root = tmp_path / "miniforge"
    (root / "conda-meta").mkdir(parents=True)
    (root / "envs").mkdir()
    (root / "bin").mkdir()
    (root / "bin" / "conda").write_text("#!/bin/sh\nexit 0\n")
    (root / "bin" / "conda").chmod(0o755)
    return root


@pytest.fixture
def env(tmp_path, conda_root) -> dict[str, str]:
    found = {
        key: value
        for key, value in os.environ.items()
        if key not in ("CONDA_ENVS_PATH", "CONDA_ENVS_DIRS", "MAMBA_ROOT_PREFIX", "MAMBA_EXE")
    }
    # The stand-in envs' Python prints a passing GPU check: a driver must seem to be here, or verify
    # says no-driver without asking the env.
    path = f"{fakenvidia.driver_that_fails(tmp_path / 'driver')}{os.pathsep}{found.get('PATH', os.defpath)}"
    return found | {
        "PATH": path,
        "TFGPU_ENVS_DIR": str(tmp_path / "envs"),
        "TFGPU_LOG_DIR": str(tmp_path / "logs"),
        "JUPYTER_DATA_DIR": str(tmp_path / "jupyter"),
        "HOME": str(tmp_path),
        "CONDA_EXE": str(conda_root / "bin" / "conda"),
        "COLUMNS": "160",
    }


# --- (a) a tool-built conda-mode env in the conda installation's envs dir -------------------------


def test_verify_name_finds_a_conda_mode_env(conda_root, env):
    prefix = fake_env(conda_root / "envs" / "tf213")
    done = cli("verify", "--name", "tf213", "--json", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["prefix"] == str(prefix) and report["ok"] is True
    assert report["which_env"] == {
        "prefix": str(prefix),
        "chosen_by": "--name",
        "kind": "conda",
        "built_by_tool": True,
        "interpreter": None,
    }
    text = cli("verify", "--name", "tf213", env=env)
    assert text.returncode == 0 and f"Using {prefix} (--name tf213)." in text.stderr


def test_doctor_name_finds_a_conda_mode_env(conda_root, env):
    prefix = fake_env(conda_root / "envs" / "tf213")
    done = cli("doctor", "--name", "tf213", "--json", env=env)
    document = json.loads(done.stdout)
    assert "error" not in document, document
    assert document["target"]["env"]["root"] == str(prefix)
    assert document["which_env"]["chosen_by"] == "--name" and document["which_env"]["kind"] == "conda"


def test_repair_name_gets_past_the_lookup_to_the_env(conda_root, env):
    """The fake env holds no TensorFlow: repair's survey of *that* prefix says so (not no-such-env)."""
    prefix = fake_env(conda_root / "envs" / "tf213")
    done = cli("repair", "--name", "tf213", "--dry-run", "--no-detect", "--json", env=env)
    error = json.loads(done.stdout)["error"]
    assert done.returncode == 3 and error["code"] == "no-tensorflow" and str(prefix) in error["message"]


def test_list_shows_and_remove_name_deletes_a_conda_mode_env(conda_root, env):
    prefix = fake_env(conda_root / "envs" / "tf213")
    listed = json.loads(cli("list", "--json", env=env).stdout)
    assert listed["searched"] == [env["TFGPU_ENVS_DIR"], str(conda_root / "envs")]
    assert [(row["name"], row["prefix"], row["mode"]) for row in listed["envs"]] == [("tf213", str(prefix), "conda")]
    done = cli("remove", "--name", "tf213", "--json", env=env)
    assert done.returncode == 0, done.stdout
    removed = json.loads(done.stdout)
    assert removed["removed"] == str(prefix) and removed["which_env"]["chosen_by"] == "--name"
    assert not prefix.exists()


def test_a_name_in_two_places_is_an_error_naming_both(conda_root, env):
    ours = fake_env(Path(env["TFGPU_ENVS_DIR"]) / "tf213", kind="venv")
    theirs = fake_env(conda_root / "envs" / "tf213")
    for argv in (("verify",), ("doctor",), ("repair", "--dry-run"), ("remove",)):
        done = cli(*argv, "--name", "tf213", "--json", env=env)
        error = json.loads(done.stdout)["error"]
        assert done.returncode == 2 and error["code"] == "ambiguous-env-name", argv
        assert str(ours) in error["message"] and str(theirs) in error["message"]
    assert ours.exists() and theirs.exists()


def test_a_name_in_no_place_says_where_it_looked(conda_root, env):
    done = cli("verify", "--name", "nowhere", "--json", env=env)
    error = json.loads(done.stdout)["error"]
    assert done.returncode == 3 and error["code"] == "no-such-env"
    assert env["TFGPU_ENVS_DIR"] in error["message"] and str(conda_root / "envs") in error["message"]


# --- (b) no location: the active env, VIRTUAL_ENV then CONDA_PREFIX, said ---------------------------


@pytest.mark.parametrize("active", [("VIRTUAL_ENV",), ("CONDA_PREFIX",), ("VIRTUAL_ENV", "CONDA_PREFIX")])
def test_verify_doctor_and_repair_default_to_the_active_env(tmp_path, env, active):
    venv = fake_env(tmp_path / "venv", kind="venv", built=False)
    conda = fake_env(tmp_path / "conda-env", kind="conda", built=False)
    paths = {"VIRTUAL_ENV": venv, "CONDA_PREFIX": conda}
    env = env | {name: str(paths[name]) for name in active}
    chosen = active[0]  # VIRTUAL_ENV first
    said = f"Using the active environment {paths[chosen]} ({chosen})."

    verified = cli("verify", env=env)
    assert verified.returncode == 0 and said in verified.stderr, verified.stderr
    document = json.loads(cli("verify", "--json", env=env).stdout)
    assert document["prefix"] == str(paths[chosen]) and document["which_env"]["chosen_by"] == chosen
    assert document["which_env"]["built_by_tool"] is False

    doctor = cli("doctor", env=env)
    assert said in doctor.stderr and "Traceback" not in doctor.stderr
    document = json.loads(cli("doctor", "--json", env=env).stdout)
    assert document["target"]["env"]["root"] == str(paths[chosen]) and document["which_env"]["chosen_by"] == chosen

    repaired = cli("repair", "--dry-run", "--no-detect", env=env)
    assert said in repaired.stderr and "error: no-tensorflow" in repaired.stderr


def test_with_no_env_active_verify_and_repair_ask_and_doctor_checks_the_machine(env):
    assert "VIRTUAL_ENV" not in env and "CONDA_PREFIX" not in env
    for argv in (("verify",), ("repair", "--dry-run")):
        done = cli(*argv, "--json", env=env)
        assert done.returncode == 2 and json.loads(done.stdout)["error"]["code"] == "missing-location", argv
    document = json.loads(cli("doctor", "--json", env=env).stdout)
    assert "which_env" not in document and "env" not in document["target"]
    assert any(finding["id"] == "env.given" for finding in document["findings"])


def test_remove_never_takes_the_active_env(tmp_path, env):
    venv = fake_env(tmp_path / "venv", kind="venv")
    done = cli("remove", "--json", env=env | {"VIRTUAL_ENV": str(venv)})
    assert done.returncode == 2 and json.loads(done.stdout)["error"]["code"] == "bad-arguments"
    assert venv.exists()


# --- (c) a hostile VIRTUAL_ENV: a clean error with the documented code ------------------------------


def _hostile(kind: str, tmp_path: Path) -> str:
    if kind == "file":
        (tmp_path / "a-file").write_text("not an env\n")
        return str(tmp_path / "a-file")
    if kind == "fifo":
        os.mkfifo(tmp_path / "a-fifo")
        return str(tmp_path / "a-fifo")
    if kind == "link-loop":
        os.symlink(tmp_path / "loop-b", tmp_path / "loop-a")
        os.symlink(tmp_path / "loop-a", tmp_path / "loop-b")
        return str(tmp_path / "loop-a")
    if kind == "nonexistent":
        return str(tmp_path / "gone")
    if kind == "relative":
        return "venv"
    if kind == "huge":
        return "/" + "a" * 200_000
    if kind == "long-name":
        return "/tmp/" + "b" * 300
    if kind == "quote":
        return str(tmp_path / 'a"b')
    raise AssertionError(kind)


HOSTILE = [
    ("file", 3, "no-such-env"),
    ("fifo", 3, "no-such-env"),
    ("link-loop", 3, "no-such-env"),
    ("nonexistent", 3, "no-such-env"),
    ("relative", 2, "bad-prefix"),
    ("huge", 2, "bad-path"),
    ("long-name", 2, "bad-path"),
    ("quote", 2, "bad-prefix"),
]


@pytest.mark.parametrize("kind,status,code", HOSTILE, ids=[case[0] for case in HOSTILE])
@pytest.mark.parametrize(
    "command", [("verify",), ("doctor",), ("repair", "--dry-run", "--no-detect")], ids=["verify", "doctor", "repair"]
)
def test_a_hostile_virtual_env_is_a_clean_error(tmp_path, env, kind, status, code, command):
    env = env | {"VIRTUAL_ENV": _hostile(kind, tmp_path), "CONDA_PREFIX": str(tmp_path)}
    done = cli(*command, "--json", env=env)
    error = json.loads(done.stdout)["error"]  # one JSON document, nothing else on stdout
    assert (done.returncode, error["code"]) == (status, code), error
    assert "VIRTUAL_ENV" in error["message"] and error["alternatives"]
    text = cli(*command, env=env)
    assert text.returncode == status and f"error: {code}" in text.stderr and "Traceback" not in text.stderr
    assert len(text.stderr) < 2000  # a huge value is cut in the message, not echoed whole


# --- (d) --python is a version; an interpreter is --interpreter -------------------------------------


@pytest.mark.parametrize("command", ["doctor", "repair"])
@pytest.mark.parametrize("form", [("--python", "/usr/bin/python3"), ("--python=3.11",)])
def test_python_on_doctor_and_repair_points_to_interpreter(env, command, form):
    done = cli(command, *form, "--json", env=env)
    error = json.loads(done.stdout)["error"]
    assert done.returncode == 2 and error["code"] == "bad-arguments"
    assert "--python is a Python version elsewhere; give an interpreter with --interpreter PATH" in error["message"]


def test_interpreter_names_the_env_of_that_python(tmp_path, env):
    venv = fake_env(tmp_path / "venv", kind="venv", built=False)
    done = cli("repair", "--interpreter", str(venv / "bin" / "python"), "--dry-run", "--no-detect", "--json", env=env)
    # The stub interpreter does not answer as Python: repair says so about that interpreter.
    error = json.loads(done.stdout)["error"]
    assert done.returncode == 3 and error["code"] == "not-a-python" and str(venv / "bin" / "python") in error["message"]


# --- the function itself -------------------------------------------------------------------------------


def test_which_env_is_one_frozen_answer(tmp_path, monkeypatch):
    from tfgpu.envs.which import which_env
    from tfgpu.records import FrozenInstanceError

    monkeypatch.setenv("TFGPU_ENVS_DIR", str(tmp_path / "envs"))
    venv = fake_env(tmp_path / "venv", kind="venv", built=False)
    target = which_env(environ={"VIRTUAL_ENV": str(venv), "CONDA_PREFIX": "/nowhere"}, purpose="doctor")
    assert (target.prefix, target.chosen_by, target.kind, target.built_by_tool) == (venv, "VIRTUAL_ENV", "venv", False)
    assert target.describe() == f"Using the active environment {venv} (VIRTUAL_ENV)."
    with pytest.raises(FrozenInstanceError):
        target.prefix = tmp_path  # type: ignore[misc]
    assert which_env(environ={}, purpose="doctor") is None
    explicit = which_env(prefix=str(venv), environ={"VIRTUAL_ENV": "/elsewhere"}, purpose="remove")
    assert explicit.chosen_by == "--prefix" and not explicit.implicit
