"""conda mode against a real local conda channel (tests/condachannel.py), solved and linked by the
real rattler engine, with TensorFlow's wheels installed by the real uv into the env's real Python.

Stand-ins, at the boundaries only: the channel replaces conda-forge (no conda channel is reachable
here), its CUDA libraries are small gcc-built ELF objects with the real sonames, TensorFlow's wheel
comes from tests/wheelhouse.py, and the external engines (conda, mamba, micromamba cannot be
installed here) are a script that records its argv.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import condachannel
import pytest
import wheelhouse
from conftest import run_tool, shells

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
DRIVER = "535.104.05"  # a CUDA 12.2 driver: __cuda=12.2


@pytest.fixture(scope="session")
def channel(lock_channel) -> Path:
    """The suite's local conda channel (conftest's ``lock_channel``, built once for the whole run):
    ``condachannel.default_packages()``, which solves this module's TF 2.13 and 2.16.1 specs, and
    beside them only what a solve for linux-64 with this Python never takes (a Python 3.10 and the
    CUDA 11.2 set of TF 2.10; other platforms' Pythons). Each test only reads it."""
    return lock_channel


@pytest.fixture(scope="session")
def tf_wheels(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("tf-wheels")
    for version in ("2.13.1", "2.16.1"):
        wheelhouse.wheel(
            directory,
            "tensorflow",
            version,
            {
                "tensorflow/__init__.py": f"__version__ = {version!r}\ndef main():\n    print('tb')\n".encode(),
                f"tensorflow-{version}.dist-info/entry_points.txt": b"[console_scripts]\ntensorboard = tensorflow:main\n",
            },
        )
    return directory


def create(prefix: Path, channel: Path, wheels: Path, env: dict, *extra: str, tf: str = "2.13"):
    return run_tool(
        "--tf",
        tf,
        "--mode",
        "conda",
        "--python",
        PY,
        "--prefix",
        str(prefix),
        "--channel",
        str(channel),
        "--driver",
        DRIVER,
        "--find-links",
        str(wheels),
        "--offline",
        "--no-verify",
        *extra,
        env=env,
    )


@pytest.fixture(scope="module")
def env213(tmp_path_factory, channel, tf_wheels) -> Path:
    home = tmp_path_factory.mktemp("conda213")
    env = dict(os.environ, TFGPU_CACHE_DIR=str(home / "cache"), TFGPU_LOG_DIR=str(home / "logs"), HOME=str(home))
    done = create(home / "env", channel, tf_wheels, env)
    assert done.returncode == 0, done.stdout + done.stderr
    return home / "env"


@pytest.fixture(scope="module")
def env216(tmp_path_factory, channel, tf_wheels) -> Path:
    home = tmp_path_factory.mktemp("conda216")
    env = dict(os.environ, TFGPU_CACHE_DIR=str(home / "cache"), TFGPU_LOG_DIR=str(home / "logs"), HOME=str(home))
    done = create(home / "env", channel, tf_wheels, env, tf="2.16.1")
    assert done.returncode == 0, done.stdout + done.stderr
    return home / "env"


def conda_packages(prefix: Path) -> dict[str, str]:
    rows = [json.loads(p.read_text()) for p in (prefix / "conda-meta").glob("*.json")]
    return {row["name"]: row["version"] for row in rows}


def leftovers(prefix: Path) -> list[str]:
    return sorted(p.name for p in prefix.parent.iterdir() if ".tfgpu-" in p.name)


def test_cuda11_env_holds_cudatoolkit_cudnn_python_and_tensorflow_from_pypi(env213):
    packages = conda_packages(env213)
    assert packages["cudatoolkit"] == "11.8.0" and packages["cudnn"] == "8.9.7.29"
    assert packages["python"].startswith(PY)
    assert "tensorflow" not in packages  # from PyPI, not conda
    marker = json.loads((env213 / "tfgpu-env.json").read_text())
    assert marker["mode"] == "conda" and marker["engine"] == "rattler" and marker["virtual_cuda"] == "12.2"
    assert marker["installed"]["tensorflow"] == "2.13.1"
    assert not (env213 / "CACHEDIR.TAG").exists()
    assert leftovers(env213) == []


def test_scripts_uv_wrote_in_staging_point_at_the_final_env(env213):
    """uv writes entry points with the staging Python in their shebang; the env is moved afterwards."""
    script = env213 / "bin" / "tensorboard"
    assert script.read_text().splitlines()[0] == f"#!{env213}/bin/python"
    done = subprocess.run([str(script)], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "tb", done.stderr


def test_rattler_hard_links_from_its_package_cache(env213):
    cache = env213.parent / "cache" / "conda" / "verified-pkgs"
    linked = env213 / "lib" / "libcusolver.so.11"
    twins = [p for p in cache.rglob("libcusolver.so.11") if p.stat().st_ino == linked.stat().st_ino]
    assert twins, "the env's file is not a hard link into the package cache"


def test_unactivated_python_loads_the_envs_cuda_libraries(env213):
    code = (
        "import tensorflow, _tfgpu_cuda_hook as h, os; print(json.dumps({'loaded': h.loaded, 'errors': h.errors,"
        " 'xla': os.environ.get('XLA_FLAGS')}))"
    )
    done = subprocess.run(
        [str(env213 / "bin" / "python"), "-c", "import json; " + code],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert not report["errors"]
    names = [Path(p).name for p in report["loaded"]]
    assert {"libcudart.so.11.0", "libcusolver.so.11", "libcudnn.so.8", "libcublasLt.so.11"} <= set(names)
    assert all(Path(p).parent == env213 / "lib" for p in report["loaded"])
    assert names.index("libcublasLt.so.11") < names.index("libcublas.so.11")
    assert names.index("libcudnn_ops_infer.so.8") < names.index("libcudnn.so.8")
    # cudatoolkit 11 ships lib/libdevice.10.bc; XLA wants <dir>/nvvm/libdevice: a link provides it.
    data_dir = Path(report["xla"].split("=", 1)[1])
    assert data_dir == env213 / "etc" / "tfgpu" / "cuda"
    assert (data_dir / "nvvm" / "libdevice" / "libdevice.10.bc").read_bytes().startswith(b"BC")


def test_cuda12_env_uses_cuda_version_and_the_split_packages(env216):
    packages = conda_packages(env216)
    assert packages["cuda-version"] == "12.3"
    assert {"cuda-cudart", "libcublas", "libcusolver", "libnvjitlink", "cuda-nvcc-tools", "cudnn"} <= set(packages)
    assert "cudatoolkit" not in packages
    layout = json.loads((env216 / "etc" / "tfgpu" / "layout.json").read_text())
    assert layout["cuda_data_dir"] == "." and layout["ptxas"] == "bin/ptxas"
    assert [Path(p).name for p in layout["preload"]][0] == "libnvJitLink.so.12"


# The activation conda-family tools run: rattler's own activation script (which sources
# etc/conda/activate.d/*), then the deactivate.d script and conda's own undo of PATH/CONDA_*.
def _script(shell: str, env: Path, setup: str) -> str:
    from rattler.shell import ActivationVariables, Shell, activate

    conda = activate(env, ActivationVariables(None, []), getattr(Shell, shell)).script
    check = (
        "TFGPU_NO_PRELOAD=1 python -c \"import ctypes; ctypes.CDLL('libcusolver.so.11'); "
        "print('SONAME=' + [l.split()[-1] for l in open('/proc/self/maps') if 'libcusolver' in l][0])\""
    )
    if shell == "fish":
        return (
            f"{setup}\nenv | sort > $DUMP.before\nset -l saved_path $PATH\n{conda}\n"
            f'echo "LD=$LD_LIBRARY_PATH"\necho "XLA=$XLA_FLAGS"\n{check}\n'
            f"source {env}/etc/conda/deactivate.d/tfgpu-cuda.fish\n"
            "set -gx PATH $saved_path; set -e CONDA_PREFIX; set -e CONDA_SHLVL\nenv | sort > $DUMP.after\n"
        )
    return (
        f'{setup}\nenv | sort > "$DUMP.before"\nsaved_path=$PATH\n{conda}\n'
        f'echo "LD=$LD_LIBRARY_PATH"\necho "XLA=$XLA_FLAGS"\n{check}\n'
        f". {env}/etc/conda/deactivate.d/tfgpu-cuda.sh\n"
        'PATH=$saved_path; unset CONDA_PREFIX CONDA_SHLVL\nenv | sort > "$DUMP.after"\n'
    )


STATES = {
    "unset": ("unset LD_LIBRARY_PATH XLA_FLAGS", "set -e LD_LIBRARY_PATH; set -e XLA_FLAGS"),
    "empty": ("export LD_LIBRARY_PATH= XLA_FLAGS=", "set -gx LD_LIBRARY_PATH ''; set -gx XLA_FLAGS ''"),
    "set": (
        "export LD_LIBRARY_PATH=/opt/a:/opt/b XLA_FLAGS=--xla_dump_to=/tmp/x",
        "set -gx LD_LIBRARY_PATH /opt/a /opt/b; set -gx XLA_FLAGS --xla_dump_to=/tmp/x",
    ),
}


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("shell", shells())
def test_conda_activation_puts_env_lib_first_and_deactivation_restores_every_byte(env213, shell, state, tmp_path):
    setup = STATES[state][1 if shell == "fish" else 0]
    dump = tmp_path / "env"
    done = subprocess.run(
        [shell, "-c", _script(shell, env213, setup)],
        capture_output=True,
        text=True,
        env=dict(os.environ, DUMP=str(dump)),
    )
    assert done.returncode == 0, done.stderr
    out = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    assert out["LD"].split(":")[0] == f"{env213}/lib"
    if state == "set":
        assert out["LD"].endswith(":/opt/a:/opt/b") and out["XLA"].startswith("--xla_dump_to=/tmp/x ")
    assert out["XLA"].endswith(f"--xla_gpu_cuda_data_dir={env213}/etc/tfgpu/cuda")
    assert out["SONAME"] == f"{env213}/lib/libcusolver.so.11"
    before, after = (Path(f"{dump}.{when}").read_bytes() for when in ("before", "after"))
    strip = (b"_=", b"SHLVL=")
    assert [line for line in before.splitlines() if not line.startswith(strip)] == [
        line for line in after.splitlines() if not line.startswith(strip)
    ]


@pytest.mark.skipif(not shutil.which("shellcheck"), reason="shellcheck is not installed")
def test_conda_activation_scripts_pass_shellcheck(env213):
    scripts = [str(p) for p in (env213 / "etc" / "conda").glob("*.d/*.sh")]
    assert len(scripts) == 2
    done = subprocess.run(["shellcheck", *scripts], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


def test_windows_envs_get_bat_scripts(tmp_path):
    """Native Windows (TF <= 2.10) activation, written here and read as text (no cmd.exe here)."""
    from tfgpu.envs.activation import CudaLayout, write_conda_activation

    (tmp_path / "lib" / "site-packages").mkdir(parents=True)
    layout = CudaLayout("lib/site-packages", ("lib",), (), None, None)
    write_conda_activation(tmp_path, layout, windows=True)
    on = (tmp_path / "etc/conda/activate.d/tfgpu-cuda.bat").read_bytes()
    off = (tmp_path / "etc/conda/deactivate.d/tfgpu-cuda.bat").read_bytes()
    assert b"\r\n" in on and b'set "PATH=%CONDA_PREFIX%\\Library\\bin;%PATH%"' in on
    assert b'set "PATH=%_TFGPU_OLD_PATH%"' in off


def test_tensorflow_from_conda_forge_skips_pypi(tmp_path, channel, tf_wheels):
    env = dict(
        os.environ, TFGPU_CACHE_DIR=str(tmp_path / "cache"), TFGPU_LOG_DIR=str(tmp_path / "logs"), HOME=str(tmp_path)
    )
    done = create(tmp_path / "env", channel, tf_wheels, env, "--tf-source", "conda-forge")
    assert done.returncode == 0, done.stdout + done.stderr
    packages = conda_packages(tmp_path / "env")
    assert packages["tensorflow"] == "2.13.1" and packages["cudatoolkit"] == "11.8.0"
    assert "requirements.txt" not in [p.name for p in (tmp_path / "env").rglob("requirements.txt")]
    assert json.loads((tmp_path / "env" / "tfgpu-env.json").read_text())["tf_source"] == "conda-forge"


def test_tf_source_conda_forge_for_a_release_it_lacks_names_its_newest(tmp_path, channel, tf_wheels):
    env = dict(os.environ, TFGPU_CACHE_DIR=str(tmp_path / "cache"), TFGPU_LOG_DIR=str(tmp_path / "logs"))
    done = create(tmp_path / "env", channel, tf_wheels, env, "--tf-source", "conda-forge", "--json", tf="2.21")
    assert done.returncode == 3
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "no-conda-forge-build" and "2.19.1" in error["message"]
    assert not (tmp_path / "env").exists()


FAKE_CONDA = """#!{python}
\"\"\"A stand-in for conda/mamba/micromamba: records argv and CONDA_OVERRIDE_CUDA, lays out an env
around this machine's Python (so the pip step runs for real), or fails when told to.\"\"\"
import json, os, sys
from pathlib import Path
log = Path(os.environ["FAKE_CONDA_LOG"])
log.write_text(json.dumps({{"argv": sys.argv, "override": os.environ.get("CONDA_OVERRIDE_CUDA")}}))
if os.environ.get("FAKE_CONDA_FAIL"):
    print("PackagesNotFoundError: cudnn==8.9.7.29", file=sys.stderr); sys.exit(1)
prefix = Path(sys.argv[sys.argv.index("-p") + 1])
(prefix / "bin").mkdir(parents=True)
(prefix / "conda-meta").mkdir()
(prefix / "conda-meta" / "history").write_text("")
(prefix / "lib" / "python{py}" / "site-packages").mkdir(parents=True)
(prefix / "pyvenv.cfg").write_text("home = {home}\\ninclude-system-site-packages = false\\n")
(prefix / "bin" / "python").symlink_to("{real}")
"""


@pytest.fixture
def fake_engine(tmp_path):
    bindir = tmp_path / "fakebin"
    bindir.mkdir()
    real = os.path.realpath(sys.executable)
    for name in ("conda", "mamba", "micromamba"):
        exe = bindir / name
        exe.write_text(FAKE_CONDA.format(python=sys.executable, py=PY, home=str(Path(real).parent), real=real))
        exe.chmod(0o755)
    return bindir


# The three engines take one branch of the installer (the same argv, asserted below; only the executable
# found on PATH differs): conda holds it in the fast tier (and mamba, with the same argv, is driven there by
# test_external_engine_failure_restores_the_old_env); mamba and micromamba run here in the full tier.
@pytest.mark.parametrize(
    "engine",
    ["conda", pytest.param("mamba", marks=pytest.mark.slow), pytest.param("micromamba", marks=pytest.mark.slow)],
)
def test_external_engines_get_the_right_command(tmp_path, channel, tf_wheels, fake_engine, engine):
    log = tmp_path / "argv.json"
    env = dict(
        os.environ,
        TFGPU_CACHE_DIR=str(tmp_path / "cache"),
        TFGPU_LOG_DIR=str(tmp_path / "logs"),
        HOME=str(tmp_path),
        PATH=f"{fake_engine}:{os.environ['PATH']}",
        FAKE_CONDA_LOG=str(log),
    )
    prefix = tmp_path / "env"
    done = run_tool(
        "--tf",
        "2.13",
        "--mode",
        "conda",
        "--python",
        PY,
        "--prefix",
        str(prefix),
        "--engine",
        engine,
        "--find-links",
        str(tf_wheels),
        "--offline",
        "--no-verify",
        "--no-detect",
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    seen = json.loads(log.read_text())
    assert seen["argv"][1:] == [
        "create",
        "-y",
        "-p",
        str(prefix),
        "--override-channels",
        "--offline",
        "-c",
        "https://conda.anaconda.org/conda-forge",
        f"python {PY}.*",
        "cudatoolkit 11.8.*",
        "cudnn ==8.9.7.29",
    ]
    assert seen["override"] == "11.8"  # no driver known: __cuda from the build, never conda's silent default
    assert json.loads((prefix / "tfgpu-env.json").read_text())["installed"]["tensorflow"] == "2.13.1"
    assert (prefix / "etc" / "conda" / "activate.d" / "tfgpu-cuda.sh").is_file()


def test_external_engine_failure_restores_the_old_env(tmp_path, channel, tf_wheels, fake_engine):
    log = tmp_path / "argv.json"
    env = dict(
        os.environ,
        TFGPU_CACHE_DIR=str(tmp_path / "cache"),
        TFGPU_LOG_DIR=str(tmp_path / "logs"),
        HOME=str(tmp_path),
        PATH=f"{fake_engine}:{os.environ['PATH']}",
        FAKE_CONDA_LOG=str(log),
    )
    prefix = tmp_path / "env"
    args = (
        "--tf",
        "2.13",
        "--mode",
        "conda",
        "--python",
        PY,
        "--prefix",
        str(prefix),
        "--engine",
        "mamba",
        "--driver",
        DRIVER,
        "--find-links",
        str(tf_wheels),
        "--offline",
        "--no-verify",
        "--no-detect",
    )
    assert run_tool(*args, env=env).returncode == 0
    assert json.loads(log.read_text())["override"] is None  # a driver is known: no override
    before = (prefix / "tfgpu-env.json").read_text()
    done = run_tool(*args, "--force", "--json", env=env | {"FAKE_CONDA_FAIL": "1"})
    assert done.returncode == 1
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "install-failed" and "PackagesNotFoundError" in error["message"]
    assert (prefix / "tfgpu-env.json").read_text() == before
    assert leftovers(prefix) == []


def test_missing_engine_binary_is_refused_before_anything(tmp_path):
    env = dict(os.environ, PATH="/usr/bin:/bin", TFGPU_LOG_DIR=str(tmp_path / "logs"))
    env.pop("CONDA_EXE", None), env.pop("MAMBA_EXE", None)
    done = run_tool(
        "--tf",
        "2.13",
        "--mode",
        "conda",
        "--prefix",
        str(tmp_path / "env"),
        "--engine",
        "micromamba",
        "--no-detect",
        "--json",
        env=env,
    )
    assert done.returncode == 3
    assert json.loads(done.stdout)["error"]["code"] == "engine-not-found"
    assert not (tmp_path / "env").exists()


def test_unknown_local_channel(tmp_path, tf_wheels):
    done = create(tmp_path / "env", tmp_path / "no-such-channel", tf_wheels, dict(os.environ), "--json")
    assert done.returncode == 3
    assert json.loads(done.stdout)["error"]["code"] == "unknown-channel"
    assert not (tmp_path / "env").exists()


def test_unsolvable_spec_shows_the_solvers_explanation(tmp_path, tf_wheels):
    """A channel without cudnn: the solver's own words, exit 3, nothing left."""
    packages = [p for p in condachannel.default_packages() if p.name != "cudnn"]
    channel = condachannel.build_channel(tmp_path / "channel", packages)
    env = dict(os.environ, TFGPU_CACHE_DIR=str(tmp_path / "cache"), TFGPU_LOG_DIR=str(tmp_path / "logs"))
    done = create(tmp_path / "env", channel, tf_wheels, env, "--json")
    assert done.returncode == 3
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "unsolvable" and "cudnn" in error["message"] and "__cuda=12.2" in error["message"]
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "env").exists() and leftovers(tmp_path / "env") == []


def test_offline_with_an_empty_cache(tmp_path, tf_wheels):
    env = dict(os.environ, TFGPU_CACHE_DIR=str(tmp_path / "cache"), TFGPU_LOG_DIR=str(tmp_path / "logs"))
    done = run_tool(
        "--tf",
        "2.13",
        "--mode",
        "conda",
        "--python",
        PY,
        "--prefix",
        str(tmp_path / "env"),
        "--driver",
        DRIVER,
        "--offline",
        "--no-verify",
        "--json",
        env=env,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert json.loads(done.stdout)["error"]["code"] == "offline-no-cache"
    assert not (tmp_path / "env").exists() and leftovers(tmp_path / "env") == []


def test_offline_the_wheel_directory_wins_over_what_uvs_cache_remembers_of_the_index(tmp_path, channel, tf_wheels):
    """TensorFlow's PyPI part resolves offline from the --find-links directory, even where uv's cache
    remembers an index page that offers a wheel of the same version ranking higher (and not its file)."""
    from localindex import remembered_index

    url = remembered_index(tmp_path, tmp_path / "cache" / "uv", "tensorflow", "2.13.1", PY)
    env = dict(
        os.environ,
        TFGPU_CACHE_DIR=str(tmp_path / "cache"),
        TFGPU_LOG_DIR=str(tmp_path / "logs"),
        TFGPU_UV_CACHE="own",
        UV_DEFAULT_INDEX=url,
    )
    done = create(tmp_path / "env", channel, tf_wheels, env, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["installed"]["tensorflow"] == "2.13.1"


def test_a_name_already_taken_is_kept(env213, channel, tf_wheels):
    env = dict(os.environ, TFGPU_CACHE_DIR=str(env213.parent / "cache"), TFGPU_LOG_DIR=str(env213.parent / "logs"))
    done = create(env213, channel, tf_wheels, env, "--json")
    assert done.returncode == 3
    assert json.loads(done.stdout)["error"]["code"] == "env-exists"


def test_a_failing_pip_step_leaves_nothing(tmp_path, channel):
    """TensorFlow's wheel is missing offline: the conda part was linked, and is removed again."""
    env = dict(os.environ, TFGPU_CACHE_DIR=str(tmp_path / "cache"), TFGPU_LOG_DIR=str(tmp_path / "logs"))
    (tmp_path / "empty").mkdir()
    done = create(tmp_path / "env", channel, tmp_path / "empty", env, "--json")
    assert done.returncode == 1
    assert json.loads(done.stdout)["error"]["code"] == "install-failed"
    assert not (tmp_path / "env").exists() and leftovers(tmp_path / "env") == []


def test_name_goes_to_the_conda_installations_envs_dir(tmp_path, channel, tf_wheels):
    root = tmp_path / "miniforge"
    (root / "conda-meta").mkdir(parents=True)
    (root / "bin").mkdir()
    (root / "bin" / "conda").write_text("#!/bin/sh\nexit 0\n")
    env = dict(
        os.environ,
        TFGPU_CACHE_DIR=str(tmp_path / "cache"),
        TFGPU_LOG_DIR=str(tmp_path / "logs"),
        HOME=str(tmp_path),
        CONDA_EXE=str(root / "bin" / "conda"),
    )
    env.pop("CONDA_ENVS_PATH", None)
    done = run_tool(
        "--tf",
        "2.13",
        "--mode",
        "conda",
        "--python",
        PY,
        "--name",
        "tf213",
        "--channel",
        str(channel),
        "--driver",
        DRIVER,
        "--find-links",
        str(tf_wheels),
        "--offline",
        "--no-verify",
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (root / "envs" / "tf213" / "tfgpu-env.json").is_file()
    assert str(root / "envs" / "tf213") in (tmp_path / ".conda" / "environments.txt").read_text().splitlines()
    assert "conda activate" in done.stdout


@pytest.mark.parametrize("tf", ["2.13", "2.16.1"])
def test_dry_run_lists_every_step_and_touches_nothing(tmp_path, channel, tf):
    done = run_tool(
        "--tf",
        tf,
        "--mode",
        "conda",
        "--python",
        PY,
        "--prefix",
        str(tmp_path / "env"),
        "--channel",
        str(channel),
        "--driver",
        DRIVER,
        "--dry-run",
        "--json",
        env=dict(os.environ),
    )
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    kinds = [step["kind"] for step in plan["steps"]]
    assert kinds[:2] == ["solve", "conda-install"] and kinds[-1] == "commit"
    assert plan["steps"][0]["content"].splitlines() == plan["packages"]["conda"]
    assert not (tmp_path / "env").exists()


def _linux_gpu_releases():
    from tfgpu.resolver import tables

    return [r for r in tables.releases() if r.wheels.get("linux_x86_64") and r.wheels["linux_x86_64"].cuda_build]


@pytest.mark.parametrize("release", _linux_gpu_releases(), ids=lambda r: str(r.version))
def test_every_releases_dry_run_solves_only_conda_forge_packages_with_the_cudnn_rule(release, tmp_path):
    """Generated from the data: what the solve step of ``create --dry-run`` sends, for every release."""
    from packaging.version import Version

    from tfgpu.installers.base import Options
    from tfgpu.ops import create
    from tfgpu.resolver import make_request, resolve, tables

    resolution = resolve(make_request(tf=str(release.version), mode="conda", os="linux", arch="x86_64"), None)
    result = create(resolution, name=None, prefix=str(tmp_path / "env"), options=Options(), dry_run=True)
    specs = dict(s.split(" ", 1) if " " in s else (s, "") for s in result.steps[0].content.splitlines())
    forge = tables.conda_forge()
    known = set(forge.cuda12_packages) | {"python", "cudatoolkit", "cudnn", "cuda-version"}
    assert set(specs) <= known
    cudnn, wanted = Version(specs["cudnn"].removeprefix("==")), Version(resolution.cudnn)
    assert cudnn in {row.version for row in forge.cudnn}
    assert cudnn.major == wanted.major and cudnn.release[:2] >= wanted.release[:2]
    mm = ".".join(resolution.cuda.split(".")[:2])
    assert mm in (forge.cuda_version if "cuda-version" in specs else forge.cudatoolkit)
    assert not (tmp_path / "env").exists()
