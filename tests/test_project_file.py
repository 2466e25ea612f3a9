"""The project file (``tfgpu.toml`` or ``[tool.tfgpu]`` in ``pyproject.toml``): found from the
current directory upwards, read by plan/create/lock/bundle/script, overridden by flags, checked
(``bad-project-file``, exit 2, naming the file and the key)."""

from __future__ import annotations

import json
import os

import pytest
from conftest import run_tool

TEAM = 'tf = "2.20"\nmode = "pip"\npython = "3.12"\ndriver = "535.104.05"\nplatforms = ["linux-64"]\n'


@pytest.fixture
def env(tmp_path, monkeypatch) -> dict:
    work = tmp_path / "repo" / "src" / "deep"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    return {k: v for k, v in os.environ.items() if k != "TFGPU_PROJECT_FILE"} | {"COLUMNS": "120"}


def plan(env, *argv) -> dict:
    done = run_tool("plan", "--no-detect", "--os", "linux", "--arch", "x86_64", "--json", *argv, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_tfgpu_toml_in_a_parent_directory_is_the_target(tmp_path, env):
    (tmp_path / "repo" / "tfgpu.toml").write_text(TEAM)
    found = plan(env)
    assert (found["tensorflow"], found["mode"], found["python"], found["driver"]) == (
        "2.20.0",
        "pip",
        "3.12",
        "535.104.05",
    )
    assert plan(env, "--tf", "2.19", "--python", "3.11")["tensorflow"].startswith("2.19")  # flags override
    assert plan(env, "--no-project")["tensorflow"] != "2.20.0"
    human = run_tool("plan", "--no-detect", "--os", "linux", env=env)
    assert f"Using the project file {tmp_path / 'repo' / 'tfgpu.toml'}" in human.stderr


def test_pyproject_tool_table(tmp_path, env):
    (tmp_path / "repo" / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.tfgpu]\ntf = "2.16"\nmode = "conda"\n'
    )
    found = plan(env)
    assert found["tensorflow"].startswith("2.16") and found["mode"] == "conda"


def test_the_nearest_file_wins_and_a_pyproject_without_the_table_is_no_project(tmp_path, env):
    (tmp_path / "repo" / "tfgpu.toml").write_text(TEAM)
    (tmp_path / "repo" / "src" / "pyproject.toml").write_text('[project]\nname = "tfgpu-user"\n')
    assert plan(env)["tensorflow"] == "2.20.0"  # src/pyproject.toml has no [tool.tfgpu]: the search goes on
    (tmp_path / "repo" / "src" / "tfgpu.toml").write_text('tf = "2.18"\n')
    assert plan(env)["tensorflow"].startswith("2.18")


@pytest.mark.parametrize(
    "text,key,says",
    [
        ("tf = 2.10\n", "tf", "write it as a string"),
        ('python = "3"\n', "python", "3"),
        ('mode = "docker"\n', "mode", "docker"),
        ('driver = "latest"\n', "driver", "latest"),
        ('platforms = ["linux64"]\n', "platforms", "linux64"),
        ('platforms = "linux-64"\n', "platforms", "list of strings"),
        ('pre = "yes"\n', "pre", "true or false"),
        ('tensorflow = "2.21"\n', "tensorflow", "not a setting"),
        ('mode = "pip"\nchannels = ["conda-forge"]\n', "channels", "conda mode"),
        ('tf = "2.21\n', "", "not valid TOML"),
    ],
)
def test_a_bad_value_names_the_file_and_the_key(tmp_path, env, text, key, says):
    path = tmp_path / "repo" / "tfgpu.toml"
    path.write_text(text)
    done = run_tool("plan", "--no-detect", "--json", env=env)
    error = json.loads(done.stdout)["error"]
    assert done.returncode == 2 and error["code"] == "bad-project-file"
    assert str(path) in error["message"] and key in error["message"] and says in error["message"]
    assert error["alternatives"]


def test_a_pyproject_key_is_named_with_its_table(tmp_path, env):
    path = tmp_path / "repo" / "pyproject.toml"
    path.write_text('[tool.tfgpu]\ngpu-cc = "ampere"\n')
    done = run_tool("plan", "--no-detect", env=env)
    assert done.returncode == 2 and "error: bad-project-file" in done.stderr
    assert f"{path}: tool.tfgpu.gpu-cc" in done.stderr


def test_two_project_files_in_one_directory_are_refused(tmp_path, env):
    (tmp_path / "repo" / "tfgpu.toml").write_text(TEAM)
    (tmp_path / "repo" / "pyproject.toml").write_text('[tool.tfgpu]\ntf = "2.21"\n')
    done = run_tool("plan", "--no-detect", env=env)
    assert done.returncode == 2 and "error: bad-project-file" in done.stderr and "both" in done.stderr


def test_lock_takes_its_platforms_from_the_project(tmp_path, env):
    """Without --platform a lock needs the project's list; with it, it goes on (here to a bad -o)."""
    without = run_tool("lock", "--tf", "2.21", "--no-detect", "-o", "/proc/x/team.txt", env=env)
    assert without.returncode == 2 and "--platform" in without.stderr
    (tmp_path / "repo" / "tfgpu.toml").write_text(TEAM)
    done = run_tool("lock", "--tf", "2.21", "--no-detect", "-o", "/proc/x/team.txt", env=env)
    assert done.returncode == 3 and "error: bad-output" in done.stderr


def test_create_and_script_read_it_too(tmp_path, env):
    (tmp_path / "repo" / "tfgpu.toml").write_text('tf = "2.13"\nmode = "conda"\n')
    dry = run_tool("--prefix", str(tmp_path / "env"), "--dry-run", "--json", "--no-detect", "--os", "linux", env=env)
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["mode"] == "conda" and json.loads(dry.stdout)["tensorflow"] == "2.13.1"
    script = run_tool("script", "--format", "bash", "--no-detect", "--os", "linux", env=env)
    assert script.returncode == 0 and "2.13.1" in script.stdout and "conda" in script.stdout


def test_the_environment_variable_names_or_disables_the_file(tmp_path, env):
    other = tmp_path / "elsewhere.toml"
    other.write_text('tf = "2.17"\n')
    (tmp_path / "repo" / "tfgpu.toml").write_text(TEAM)
    assert plan(env | {"TFGPU_PROJECT_FILE": str(other)})["tensorflow"].startswith("2.17")
    assert plan(env | {"TFGPU_PROJECT_FILE": "none"})["tensorflow"] != "2.20.0"
    assert plan(env, "--project", str(other))["tensorflow"].startswith("2.17")


@pytest.mark.parametrize("table", ["tfgpu-install", "tfgpu_install", "tfgpuinstall", "tf-gpu", "TFGPU"])
def test_a_misspelled_tool_table_is_said_and_not_applied(tmp_path, env, table):
    (tmp_path / "repo" / "pyproject.toml").write_text(f'[project]\nname = "x"\n\n[tool.{table}]\ntf = "2.16"\n')
    human = run_tool("plan", "--no-detect", "--os", "linux", "--arch", "x86_64", "--json", env=env)
    assert human.returncode == 0, human.stderr
    assert json.loads(human.stdout)["tensorflow"] != "2.16.1"  # not applied
    said = f"{tmp_path / 'repo' / 'pyproject.toml'} has [tool.{table}]: the table tfgpu-install reads is [tool.tfgpu]"
    assert said in human.stderr.replace("\n", " ")
    named = run_tool("plan", "--no-detect", "--project", str(tmp_path / "repo" / "pyproject.toml"), "--json", env=env)
    error = json.loads(named.stdout)["error"]
    assert error["code"] == "bad-project-file" and any(said in a for a in error["alternatives"])


def test_other_tools_tables_are_no_near_miss(tmp_path, env):
    (tmp_path / "repo" / "pyproject.toml").write_text(
        '[project]\nname = "tfgpu-user"\n\n[tool.ruff]\nline-length = 1\n'
    )
    human = run_tool("plan", "--no-detect", "--os", "linux", "--arch", "x86_64", "--json", env=env)
    assert human.returncode == 0 and "[tool." not in human.stderr
