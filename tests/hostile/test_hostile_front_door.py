"""Attacks on the rebuilt front door (options, inputs, which-env) that broke it: each case is the
next input over from what ``test_which_env.py`` and the other hostile tests hold. Every case asserts
the documented exit code and error code, no traceback (``cli`` runs in-process: an exception fails
the test) and, where it matters, that nothing outside what was asked changed.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

import pytest

from .conftest import changed, snapshot

NOBODY = "~tfgpu-no-such-user-x9"
"""A ``~user`` that no system has: ``Path.expanduser`` raises RuntimeError on it."""


@pytest.fixture(autouse=True)
def _no_active_env(monkeypatch):
    for name in (
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "CONDA_ENVS_PATH",
        "CONDA_ENVS_DIRS",
        "CONDA_EXE",
        "MAMBA_ROOT_PREFIX",
        "TFGPU_PROJECT_FILE",
        "TFGPU_INSECURE_HOSTS",
    ):
        monkeypatch.delenv(name, raising=False)


def fake_env(prefix: Path, kind: str = "venv") -> Path:
    """An env tfgpu-install's marker says it built there (a stub bin/python that fails)."""
    from tfgpu.envs import marker

    (prefix / "bin").mkdir(parents=True)
    (prefix / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    if kind == "conda":
        (prefix / "conda-meta").mkdir()
        (prefix / "conda-meta" / "history").write_text("")
    else:
        (prefix / "pyvenv.cfg").write_text("home = /usr/bin\n")
    python = prefix / "bin" / "python"
    python.write_text("#!/bin/sh\nexit 1\n")
    python.chmod(0o755)
    marker.write(
        prefix,
        env_id=secrets.token_hex(16),
        made_for=os.path.realpath(prefix),
        fields={"name": prefix.name, "mode": "pip", "tensorflow": "2.13.1", "python": "3.11", "engine": "uv"},
    )
    return prefix


def clean_error(done, status: int, *codes: str) -> None:
    """One JSON error document on stdout with the documented exit code and one of ``codes``."""
    assert "Traceback" not in done.err, done.err
    assert done.code == status, (done.code, done.out[-500:], done.err[-500:])
    if codes:
        assert done.error in codes, (done.error, done.out[-500:])


# --- 1. a `~user` that does not exist: Path.expanduser raises RuntimeError -> traceback, exit 1 ----------


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(("doctor", "--interpreter", f"{NOBODY}/bin/python"), id="doctor-interpreter"),
        pytest.param(
            ("repair", "--interpreter", f"{NOBODY}/bin/python", "--dry-run", "--no-detect"), id="repair-interpreter"
        ),
        pytest.param(("plan", "--project", f"{NOBODY}/tfgpu.toml", "--no-detect"), id="plan-project"),
        pytest.param(
            ("create", "--from-lock", f"{NOBODY}/tfgpu-lock.linux-64.txt", "--prefix", "env", "--dry-run"),
            id="create-from-lock",
        ),
        pytest.param(
            ("create", "--from-bundle", f"{NOBODY}/bundle", "--prefix", "env", "--dry-run"), id="create-from-bundle"
        ),
        pytest.param(("lock", "--check", f"{NOBODY}/tfgpu-lock.linux-64.txt"), id="lock-check"),
        pytest.param(
            ("script", "--format", "bash", "--tf", "2.21", "--no-detect", "-o", f"{NOBODY}/install.sh"),
            id="script-output",
        ),
    ],
)
def test_an_unknown_user_home_in_a_path_option_is_a_clean_error(cli, sandbox, argv):
    before = snapshot(sandbox)
    done = cli(*argv, "--json")
    assert done.code in (2, 3) and done.error, (done.code, done.out[-400:])
    assert not changed(before, snapshot(sandbox), ("cache", "logs"))


@pytest.mark.parametrize(
    "variable,argv",
    [
        pytest.param("TFGPU_PROJECT_FILE", ("plan", "--no-detect"), id="TFGPU_PROJECT_FILE"),
        pytest.param("CONDA_ENVS_PATH", ("list",), id="CONDA_ENVS_PATH-list"),
        pytest.param("CONDA_ENVS_PATH", ("remove", "--name", "foo"), id="CONDA_ENVS_PATH-remove"),
    ],
)
def test_an_unknown_user_home_in_a_variable_is_a_clean_error(cli, variable, argv):
    done = cli(*argv, "--json", env={variable: f"{NOBODY}/x"})
    assert done.code in (0, 2, 3), (done.code, done.out[-400:])
    if done.code:
        assert done.error and variable in json.loads(done.out)["error"]["message"]


# --- 2. CONDA_EXE a symbolic-link loop: Path.resolve raises RuntimeError (Python < 3.13) ------------------


@pytest.mark.parametrize("argv", [("list",), ("verify", "--name", "foo"), ("remove", "--name", "foo")])
def test_conda_exe_in_a_link_loop_is_not_a_traceback(cli, sandbox, argv):
    os.symlink(sandbox / "loop-b", sandbox / "loop-a")
    os.symlink(sandbox / "loop-a", sandbox / "loop-b")
    done = cli(*argv, "--json", env={"CONDA_EXE": str(sandbox / "loop-a")})
    assert done.code in (0, 2, 3), (done.code, done.out[-400:])
    if done.code:
        assert done.error


# --- 3. an empty --name / --prefix / --interpreter / --project silently means something else -----------


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(("verify", "--name", ""), id="verify-name-empty"),
        pytest.param(("verify", "--prefix="), id="verify-prefix-empty"),
        pytest.param(("doctor", "--interpreter", ""), id="doctor-interpreter-empty"),
        pytest.param(("repair", "--prefix", "", "--dry-run", "--no-detect"), id="repair-prefix-empty"),
        pytest.param(("repair", "--name=", "--dry-run", "--no-detect"), id="repair-name-empty"),
    ],
)
def test_an_empty_location_is_refused_not_taken_for_the_active_env(cli, sandbox, argv):
    active = fake_env(sandbox / "active")
    done = cli(*argv, "--json", env={"VIRTUAL_ENV": str(active)})
    clean_error(done, 2, "bad-env-name", "bad-prefix", "bad-path", "bad-arguments", "missing-location")
    assert str(active) not in done.out  # the active env was not what the command worked on


def test_create_with_an_empty_prefix_does_not_go_to_the_default_name(cli, sandbox):
    existing = fake_env(sandbox / "envs" / "tf2.21")
    before = snapshot(existing)
    done = cli(
        "create", "--prefix", "", "--force", "--dry-run", "--no-detect", "--tf", "2.21", "--mode", "pip", "--json"
    )
    clean_error(done, 2, "bad-prefix", "bad-path", "missing-location")
    assert str(existing) not in done.out
    assert not changed(before, snapshot(existing))


def test_remove_with_an_empty_name_is_bad_env_name_as_the_readme_says(cli):
    clean_error(cli("remove", "--name", "", "--json"), 2, "bad-env-name")


def test_an_empty_project_option_does_not_fall_back_to_the_nearest_file(cli, sandbox):
    (sandbox / "tfgpu.toml").write_text('mode = "conda"\n')
    done = cli("plan", "--project", "", "--no-detect", "--json")
    clean_error(done, 2, "bad-project-file", "bad-path")


# --- 4. --json abbreviated (argparse accepts --js): success is JSON, a failure is not -------------------


def test_an_abbreviated_json_flag_gives_a_json_failure_too(cli):
    done = cli("plan", "--js", "--tf", "9.9", "--no-detect")
    assert "Traceback" not in done.err
    assert done.code in (2, 3)
    assert done.error or "bad-arguments" in done.err, (done.out[-300:], done.err[-300:])


# --- 5. doctor --interpreter a program whose child keeps stdout open: the probe's timeout never ends ---


@pytest.mark.slow  # waits out a timeout or compares a large sample: the full run keeps it
def test_doctor_interpreter_that_forks_and_hangs_is_bounded(tool, sandbox):
    hang = sandbox / "python"
    hang.write_text("#!/bin/sh\nsleep 150\n")  # sh is killed at the timeout; sleep keeps the pipe
    hang.chmod(0o755)
    done = tool("doctor", "--interpreter", str(hang), "--json", timeout=120)
    assert done.code in (1, 3), (done.code, done.out[-300:])


# --- 6. one directory listed twice (an alias) is "2 environments" ----------------------------------------


def test_the_same_envs_directory_by_two_spellings_is_not_ambiguous(cli, sandbox):
    fake_env(sandbox / "envs" / "dup")
    alias = f"{sandbox}/cache/../envs"
    (sandbox / "cache").mkdir(exist_ok=True)
    done = cli("verify", "--name", "dup", "--json", env={"CONDA_ENVS_PATH": alias})
    assert done.error != "ambiguous-env-name", done.out[-400:]
    listed = cli("list", "--json", env={"CONDA_ENVS_PATH": alias})
    assert [env["name"] for env in json.loads(listed.out)["envs"]].count("dup") == 1


# --- 7. a relative CONDA_ENVS_PATH entry: the env --name means depends on the working directory ---------


def test_a_relative_conda_envs_path_entry_does_not_make_a_relative_prefix(cli, sandbox):
    fake_env(sandbox / "rel" / "foo")
    done = cli("remove", "--name", "foo", "--json", env={"CONDA_ENVS_PATH": "rel"})
    if done.code == 0:
        found = json.loads(done.out)
        assert os.path.isabs(found["removed"]) and os.path.isabs(found["which_env"]["prefix"]), found
    else:
        clean_error(done, done.code)
        assert done.error


# --- 8. --name through CONDA_ENVS_PATH skips the prefix text check --prefix gets ------------------------


def test_name_found_under_a_conda_envs_dir_is_checked_as_prefix_is(cli, sandbox):
    root = sandbox / 'con"da'
    fake_env(root / "zz")
    by_prefix = cli("repair", "--prefix", str(root / "zz"), "--dry-run", "--no-detect", "--json")
    clean_error(by_prefix, 2, "bad-prefix")
    by_name = cli("repair", "--name", "zz", "--dry-run", "--no-detect", "--json", env={"CONDA_ENVS_PATH": str(root)})
    clean_error(by_name, 2, "bad-prefix")


# --- 9. --driver takes non-ASCII digits (\d) and writes them into every exported file ------------------


def test_driver_with_fullwidth_digits_is_refused_or_normalised(cli):
    done = cli("plan", "--driver", "\uff15\uff13\uff15.104.05", "--no-detect", "--json")
    assert "Traceback" not in done.err
    if done.code == 0:
        assert json.loads(done.out)["driver"] == "535.104.05"
    else:
        clean_error(done, 2, "bad-driver-version")


# --- 10. where a bad insecure host came from is misnamed -------------------------------------------------


def test_a_bad_tfgpu_insecure_hosts_is_named_as_the_variable(cli):
    done = cli("plan", "--no-detect", "--json", env={"TFGPU_INSECURE_HOSTS": "bad host"})
    clean_error(done, 2, "bad-url")
    assert "TFGPU_INSECURE_HOSTS" in json.loads(done.out)["error"]["message"]


def test_a_bad_insecure_host_in_the_project_file_is_bad_project_file_naming_it(cli, sandbox):
    (sandbox / "tfgpu.toml").write_text('insecure-hosts = ["bad host"]\n')
    done = cli("plan", "--no-detect", "--json")
    clean_error(done, 2, "bad-project-file")
    assert "tfgpu.toml" in json.loads(done.out)["error"]["message"]


# --- 12. a huge project-file value is echoed whole (twice): 1 MB of message -----------------------------


def test_a_huge_project_file_value_is_cut_in_the_message(cli, sandbox):
    (sandbox / "tfgpu.toml").write_text(f"tf = '{'1' * 500_000}'\n")
    done = cli("plan", "--no-detect", "--json")
    clean_error(done, 2, "bad-project-file")
    assert len(done.out) < 5000, len(done.out)


# --- 13. list shows a link in the envs directory as a second env that remove then refuses ---------------


def test_list_does_not_show_a_link_to_an_env_as_another_env(cli, sandbox):
    fake_env(sandbox / "envs" / "real")
    os.symlink(sandbox / "envs" / "real", sandbox / "envs" / "alias")
    names = [env["name"] for env in json.loads(cli("list", "--json").out)["envs"]]
    assert names == ["real"], names


# --- 11. repair --undo --dry-run undoes for real: --dry-run is dropped on the --undo path ----------------


def test_repair_undo_dry_run_changes_nothing(cli, sandbox, repair_wheels, uv_cache, monkeypatch):
    import repairhelpers as rh

    monkeypatch.setenv("TFGPU_CACHE_DIR", str(uv_cache))
    env = rh.user_venv(sandbox / "env", repair_wheels, "tensorflow==2.21.0")
    first = cli(
        "repair", "--prefix", str(env), "--find-links", str(repair_wheels), "--offline",
        "--no-detect", "--yes", "--no-verify", "--json",
    )  # fmt: skip
    assert first.code == 0, first.out[-500:] + first.err[-500:]
    before = snapshot(env)
    done = cli("repair", "--undo", "--dry-run", "--prefix", str(env), "--find-links", str(repair_wheels), "--offline")
    assert "Traceback" not in done.err
    assert not changed(before, snapshot(env)), "repair --undo --dry-run changed the env"
    assert (env / "etc" / "tfgpu" / "repair.json").is_file()
