"""Closed envs, attacked: the links create/repair write so the names CUDA libraries dlopen
themselves resolve inside the env, the probe that resolves those names as the loader does, and
doctor's libs.closed.

Real components: gcc-built libraries with a real RUNPATH, glibc's own loader as the reference for
every lookup, uv-built envs and ``tfgpu-install repair`` / ``doctor`` run for real.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import builtenvs
import pytest
import repairhelpers as rh
from conftest import run_tool
from test_closed_env import CALLER_RUNPATH, ORIGIN, SHIM, closed_wheels, gcc  # noqa: F401 - a fixture

import tfgpu.verify

PROBE = Path(tfgpu.verify.__file__).parent / "probe_libs.py"


def _no_ld_path() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "VIRTUAL_ENV")}


@pytest.fixture(scope="module")
def staged(tmp_path_factory) -> Path:
    """An 'env' lib directory with a caller that dlopens libnvrtc.so on its own RUNPATH ($ORIGIN,
    which holds the env's libnvrtc.so), and two copies from outside: one in a working directory,
    one in a directory named after a ';'."""
    if subprocess.run(["gcc", "--version"], capture_output=True).returncode != 0:
        pytest.skip("gcc is needed to build the test shared libraries")
    top = tmp_path_factory.mktemp("probe")
    gcc(top / "env" / "lib" / "libcudnn_graph.so.9", "libcudnn_graph.so.9", SHIM, "$ORIGIN")
    gcc(top / "env" / "lib" / "libnvrtc.so", "libnvrtc.so.12")
    gcc(top / "cwd" / "libnvrtc.so", "libnvrtc.so.12")
    gcc(top / "system" / "libnvrtc.so", "libnvrtc.so.12")
    return top


@pytest.mark.parametrize(
    "ld_path",
    [":", "{missing}:", "{missing}::{missing}", "{system};{missing}", "{missing};{system}"],
    ids=["lone-colon", "trailing-empty", "empty-in-the-middle", "semicolon-first", "semicolon-second"],
)
def test_the_probe_splits_ld_library_path_as_the_loader_does(staged, ld_path):
    """Attack: LD_LIBRARY_PATH with an empty entry (glibc: the current directory) or a ';' (glibc
    splits on ':' and ';'), so the real dlopen('libnvrtc.so') of cuDNN takes a copy from outside the
    env. Must hold: the probe names the very file the loader maps (not the env's copy on the
    caller's RUNPATH), so doctor's libs.closed cannot say 'closed' while it is not."""
    value = ld_path.format(missing=staged / "nowhere", system=staged / "system")
    env = {**_no_ld_path(), "LD_LIBRARY_PATH": value}
    caller = staged / "env" / "lib" / "libcudnn_graph.so.9"
    real = subprocess.run(
        [sys.executable, "-c", ORIGIN, str(caller)], cwd=staged / "cwd", env=env, capture_output=True, text=True
    )
    assert real.returncode == 0, real.stderr
    loader = real.stdout.strip()
    assert not loader.startswith(str(staged / "env")), "the staging no longer shows the loader leaving the env"
    names = [{"name": "libnvrtc.so", "caller": str(caller), "runpath": [str(staged / "env" / "lib")]}]
    done = subprocess.run(
        [sys.executable, "-I", str(PROBE), "[]", json.dumps(names)],
        cwd=staged / "cwd",
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout.splitlines()[-1])["dlopened"][0]
    assert answer["path"] == loader, answer
    assert answer["via"] == "LD_LIBRARY_PATH"


def test_doctor_names_an_empty_ld_library_path_entry_as_the_way_out(tmp_path, staged):
    """Attack: LD_LIBRARY_PATH=':' with a libnvrtc.so in the working directory. Must hold: doctor's
    fix names that entry (the current directory) as what to remove from LD_LIBRARY_PATH."""
    from types import SimpleNamespace

    from tfgpu.doctor import closed

    env = SimpleNamespace(root=tmp_path, site_packages=None)
    leak = str(Path.cwd() / "libnvrtc.so")
    fix = closed._fix(env, [(leak, "dlopen('libnvrtc.so')")], {"LD_LIBRARY_PATH": "/nowhere:"})
    assert fix.startswith("Remove . from LD_LIBRARY_PATH"), fix


def test_a_provider_linking_out_of_the_env_is_never_linked_to(tmp_path, closed_wheels, tool_env):  # noqa: F811
    """Attack: the env's libnvrtc.so.12 is a symbolic link to a system toolkit's copy outside the
    env (a user 'fixed' it by hand). Must hold: repair writes no libnvrtc.so link that resolves out
    of the env (the caller would load the outside copy through the env's own link), nothing
    outside the env changes, and the run ends without a traceback."""
    prefix = builtenvs.user_venv(
        tmp_path / "env",
        closed_wheels,
        "tensorflow==2.21.0",
        "nvidia-cudnn-cu12==9.28.0.43",
        "nvidia-cuda-nvrtc-cu12==12.5.83",
        "nvidia-curand-cu12==10.3.7.78",
    )
    outside = gcc(tmp_path / "system" / "libnvrtc.so.12", "libnvrtc.so.12")
    before = outside.read_bytes()
    provider = next(prefix.glob("lib/python3*/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12"))
    provider.unlink()
    provider.symlink_to(outside)
    done = run_tool(
        "repair",
        "--prefix",
        str(prefix),
        "--find-links",
        str(closed_wheels),
        "--no-detect",
        "--yes",
        "--no-verify",
        "--offline",
        env=tool_env,
    )
    assert "Traceback" not in done.stdout + done.stderr
    # the env's own NVRTC is itself a link out: no write can close that, so repair says so and fails
    assert done.returncode == 1, done.stdout + done.stderr
    assert "left open" in done.stdout and "cuda_nvrtc/lib/libnvrtc.so.12 links out of the env" in done.stdout
    site = provider.parents[3]
    for link in site.glob("nvidia/*/lib/libnvrtc.so*"):
        if link.is_symlink() and link != provider:
            assert os.path.realpath(link).startswith(os.path.realpath(prefix) + os.sep), link
    assert outside.read_bytes() == before
    assert sorted(p.name for p in outside.parent.iterdir()) == ["libnvrtc.so.12"]


def _overlay(directory: Path, *rows: dict) -> Path:
    """A TFGPU_DATA_DIR with sonames.toml: the shipped table, less its [[dlopened]] rows for the same
    caller and name (one caller and name has one meaning, or the table is bad-data), plus ``rows``."""
    from importlib.resources import files

    directory.mkdir(parents=True, exist_ok=True)
    text = files("tfgpu.data").joinpath("sonames.toml").read_text(encoding="utf-8")
    replaced = {(row["caller"], row["name"]) for row in rows}
    head, *blocks = text.split("\n[[dlopened]]\n")
    kept = [
        block
        for block in blocks
        if not any(f'name = "{name}"\n' in block and f'caller = "{caller}"\n' in block for caller, name in replaced)
    ]
    text = "\n[[dlopened]]\n".join([head, *kept])
    for row in rows:
        text += (
            f'\n[[dlopened]]\nname = "{row["name"]}"\nprovides = "libnvrtc"\ncaller = "{row["caller"]}"\n'
            f'runpath = {json.dumps(row["runpath"])}\nwheel = "x"\nfound = "x"\nsource = []\n'
        )
    (directory / "sonames.toml").write_text(text, encoding="utf-8")
    return directory


def _doctor(prefix: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """``doctor --prefix <prefix> --json`` in this process, with ``env`` as its whole environment.
    The loader's view is what these tests are about, and doctor reads it from a probe process of
    its own, which gets ``env`` (LD_LIBRARY_PATH included) as a child of the tool always does; the
    tool's own interpreter loads nothing the answer depends on, so it need not be a new one."""
    return run_tool("doctor", "--prefix", str(prefix), "--json", env=env)


@pytest.fixture(scope="module")
def closed_env(tmp_path_factory, closed_wheels) -> Path:  # noqa: F811
    """One user env (``_env``) for the tests that only name it."""
    return _env(tmp_path_factory.mktemp("closed-env"), closed_wheels)


def _env(tmp_path: Path, wheels: Path) -> Path:
    return builtenvs.user_venv(
        tmp_path / "env",
        wheels,
        "tensorflow==2.21.0",
        "nvidia-cudnn-cu12==9.28.0.43",
        "nvidia-cuda-nvrtc-cu12==12.5.83",
        "nvidia-curand-cu12==10.3.7.78",
    )


def test_a_huge_runpath_list_still_lets_the_probe_run(tmp_path, closed_wheels, tool_env):  # noqa: F811
    """Attack: an overlay [[dlopened]] row whose RUNPATH list has 20,000 entries (about 1 MB of
    JSON, past the kernel's 128 KiB limit on one argument). Must hold: doctor's probe still runs
    (libs.closed is decided, not skipped as 'the probe did not run'), the name is reported found
    nowhere by libs.dlopen, and no traceback."""
    prefix = _env(tmp_path, closed_wheels)
    runpath = [f"$ORIGIN/../nowhere{i:05d}/lib" for i in range(20000)]
    overlay = _overlay(
        tmp_path / "data", {"name": "libnvrtc.so.12", "caller": "libcudnn_graph.so.9", "runpath": runpath}
    )
    env = {**tool_env, "TFGPU_DATA_DIR": str(overlay)}
    env.pop("LD_LIBRARY_PATH", None)
    done = run_tool("doctor", "--prefix", str(prefix), "--json", env=env)
    assert "Traceback" not in done.stdout + done.stderr
    findings = {f["id"]: f for f in json.loads(done.stdout)["findings"]}
    assert findings["libs.closed"]["status"] != "skip", findings["libs.closed"]


@pytest.mark.parametrize(
    "runpath",
    [
        ["/usr/lib", "{outside}"],
        ["$ORIGIN/../../../../../../../../../../../{outside}"],
        ["${ORIGIN}/../../../../../../../../../../../{outside}"],
        ["$LIB", "$PLATFORM", "$ORIGIN/$LIB"],
        ["$ORIGIN/../../../../../.."],
    ],
    ids=["absolute", "origin-dotdot", "braced-origin-dotdot", "lib-platform", "env-root-and-above"],
)
def test_a_runpath_leading_out_of_the_env_gets_no_link(tmp_path, closed_wheels, tool_env, runpath):  # noqa: F811
    """Attack: overlay [[dlopened]] rows whose RUNPATH points out of the env (absolute, $ORIGIN/..
    climbing out, ${ORIGIN}, $LIB/$PLATFORM). Must hold: repair writes nothing outside the env
    (the 'outside' directory stays byte for byte), every libnvrtc link it makes resolves inside the
    env, and --undo takes them back; never a traceback."""
    prefix = _env(tmp_path, closed_wheels)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("x")
    entries = [e.replace("{outside}", str(outside).lstrip("/") if e.startswith("$") else str(outside)) for e in runpath]
    rows = [
        {"name": name, "caller": "libcudnn_graph.so.9", "runpath": entries}
        for name in ("libnvrtc.so", "libnvrtc.so.12")
    ]
    env = {**tool_env, "TFGPU_DATA_DIR": str(_overlay(tmp_path / "data", *rows))}
    done = run_tool(
        "repair",
        "--prefix",
        str(prefix),
        "--find-links",
        str(closed_wheels),
        "--no-detect",
        "--yes",
        "--no-verify",
        "--offline",
        env=env,
    )
    assert "Traceback" not in done.stdout + done.stderr
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(p.name for p in outside.iterdir()) == ["keep"]
    top = os.path.realpath(prefix) + os.sep
    for link in prefix.rglob("libnvrtc.so*"):
        if link.is_symlink():
            assert os.path.realpath(link).startswith(top), link
    undone = run_tool("repair", "--undo", "--prefix", str(prefix), "--offline", "--json", env=env)
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert not [p for p in prefix.rglob("libnvrtc.so") if p.is_symlink()]


@pytest.mark.parametrize("what", ["dangling", "loop", "link-out", "fifo", "directory", "link-to-dir"])
def test_whatever_holds_the_link_name_repair_ends_cleanly(tmp_path, closed_wheels, tool_env, what):  # noqa: F811
    """Attack: where repair puts cuDNN's libnvrtc.so link there is already a dangling link, a link
    loop, a link to a system copy outside the env, a FIFO, a directory, or a link to a directory.
    Must hold: a link (dangling, loop, out, to a directory) is replaced by the env's own and nothing
    it pointed to changes; a FIFO or directory stops the repair with env-path-blocked, a way
    forward, the env as it was (the FIFO still a FIFO) and never a hang or a traceback."""
    import stat

    prefix = _env(tmp_path, closed_wheels)
    lib = next(prefix.glob("lib/python3*/site-packages/nvidia/cudnn/lib"))
    spot = lib / "libnvrtc.so"
    outside = gcc(tmp_path / "system" / "libnvrtc.so", "libnvrtc.so.13")
    before = outside.read_bytes()
    if what == "dangling":
        spot.symlink_to("libnvrtc.so.gone")
    elif what == "loop":
        spot.symlink_to("libnvrtc.so")
    elif what == "link-out":
        spot.symlink_to(outside)
    elif what == "fifo":
        os.mkfifo(spot)
    elif what == "directory":
        spot.mkdir()
    else:
        spot.symlink_to(".")
    done = run_tool(
        "repair",
        "--prefix",
        str(prefix),
        "--find-links",
        str(closed_wheels),
        "--no-detect",
        "--yes",
        "--no-verify",
        "--offline",
        "--json",
        env=tool_env,
        timeout=600,
    )
    assert "Traceback" not in done.stdout + done.stderr
    assert outside.read_bytes() == before
    if what in ("fifo", "directory"):
        assert done.returncode != 0
        error = json.loads(done.stdout)["error"]
        assert error["code"] == "env-path-blocked", error
        assert stat.S_ISFIFO(spot.lstat().st_mode) if what == "fifo" else spot.is_dir()
        assert not (prefix / ".tfgpu-repair.json").exists()
    else:
        assert done.returncode == 0, done.stdout + done.stderr
        assert os.readlink(spot) == "../../cuda_nvrtc/lib/libnvrtc.so.12"


KILL_AT_LINK = """
import os, signal
from tfgpu.envs import writes

_put_state = writes.put_state


def put_state(path, state, root=None):
    _put_state(path, state, root)
    if os.path.basename(str(path)) == "libnvrtc.so":  # the dlopened name's link: killed right after it
        os.kill(os.getpid(), signal.SIGKILL)


writes.put_state = put_state
"""


@pytest.mark.parametrize("then", ["undo", "repair-again"])
def test_sigkill_right_after_the_link_is_written_then_undo_or_repair(tmp_path, closed_wheels, tool_env, then):  # noqa: F811
    """Attack: the repair process is SIGKILLed the moment it has written cuDNN's libnvrtc.so link
    (packages in, some activation files written, others not). Must hold: ``repair --undo`` puts
    the env back exactly as it was (the link gone, every file and package as before); or a second
    ``repair`` finishes the job, leaving the link pointing inside the env; never a traceback."""
    prefix = _env(tmp_path, closed_wheels)
    before, frozen = rh.snapshot(prefix), rh.freeze(prefix)
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(KILL_AT_LINK)
    env = {**tool_env, "PYTHONPATH": str(hook)}
    argv = [
        sys.executable,
        "-m",
        "tfgpu",
        "repair",
        "--prefix",
        str(prefix),
        "--find-links",
        str(closed_wheels),
        "--no-detect",
        "--yes",
        "--no-verify",
        "--offline",
        "--json",
    ]
    killed = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    assert killed.returncode == -9, killed.stdout + killed.stderr
    link = next(prefix.glob("lib/python3*/site-packages/nvidia/cudnn/lib/libnvrtc.so"))
    assert link.is_symlink()
    journal = json.loads((prefix / "etc" / "tfgpu" / "repair.json").read_text())
    assert journal["state"] == "applying"
    if then == "undo":
        done = run_tool("repair", "--undo", "--prefix", str(prefix), "--offline", "--json", env=tool_env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert rh.snapshot(prefix) == before
        assert rh.freeze(prefix) == frozen
    else:
        done = run_tool(*argv[3:], env=tool_env)
        assert "Traceback" not in done.stdout + done.stderr
        assert done.returncode == 0, done.stdout + done.stderr
        assert os.readlink(link) == "../../cuda_nvrtc/lib/libnvrtc.so.12"
        assert json.loads((prefix / "etc" / "tfgpu" / "repair.json").read_text())["state"] == "done"


def test_repair_then_undo_leaves_no_directory_the_link_held(tmp_path, closed_wheels, tool_env):  # noqa: F811
    """Attack: repair installs cuBLAS 12 (its ``nvidia/cublas/lib`` is new) and puts the link for
    the ``libnvrtc.so.12`` cuBLASLt dlopens into it; undo uninstalls cuBLAS while the link still
    holds that directory. Must hold: after ``--undo`` the env is exactly as before, with no empty
    ``nvidia/cublas/lib`` left behind."""
    prefix = _env(tmp_path, closed_wheels)
    before, frozen = rh.snapshot(prefix), rh.freeze(prefix)
    done = run_tool(
        "repair",
        "--prefix",
        str(prefix),
        "--find-links",
        str(closed_wheels),
        "--no-detect",
        "--yes",
        "--no-verify",
        "--offline",
        "--json",
        env=tool_env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    cublas = next(prefix.glob("lib/python3*/site-packages/nvidia/cublas/lib"))
    assert os.readlink(cublas / "libnvrtc.so.12") == "../../cuda_nvrtc/lib/libnvrtc.so.12"
    done = run_tool("repair", "--undo", "--prefix", str(prefix), "--offline", "--json", env=tool_env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not cublas.parent.exists()
    assert rh.snapshot(prefix) == before and rh.freeze(prefix) == frozen


@pytest.mark.parametrize("what", ["directory", "fifo", "temporary-is-a-directory"])
def test_the_exported_scripts_activation_stops_cleanly_at_something_in_the_way(tmp_path, what):
    """Attack: in the env an exported pip script sets up, a directory or a FIFO sits where the
    libnvrtc.so link goes (or a directory where its temporary goes). Must hold: activate_env.py
    ends with a message naming the path and a way forward (move it aside), not a Python
    traceback, never blocks on the FIFO, and the thing in the way is left as it was."""
    import stat

    from tfgpu.export import embed

    root = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    site = next(root.glob("lib/python3*/site-packages"))
    for relative in ("nvidia/cudnn/lib/libcudnn_cnn_infer.so.8", "nvidia/cuda_nvrtc/lib/libnvrtc.so.11.2"):
        (site / relative).parent.mkdir(parents=True, exist_ok=True)
        (site / relative).write_bytes(b"\x7fELF")
    spot = site / "nvidia/cudnn/lib/libnvrtc.so"
    if what == "directory":
        spot.mkdir()
    elif what == "fifo":
        os.mkfifo(spot)
    else:
        spot = site / "nvidia/cudnn/lib/libnvrtc.so.tfgpu-tmp"
        spot.mkdir()
    files = tmp_path / "files"
    files.mkdir()
    for name, text in embed.activation_files():
        (files / name).write_text(text, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(files / "activate_env.py"), str(root), str(files)],
        capture_output=True,
        text=True,
        env={"PATH": os.environ.get("PATH", ""), "PYTHONNOUSERSITE": "1"},
        cwd=tmp_path,
        timeout=60,
    )
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode != 0
    assert f"{spot} is in the way" in done.stderr and "Move it aside" in done.stderr
    assert stat.S_IFMT(spot.lstat().st_mode) == (stat.S_IFIFO if what == "fifo" else stat.S_IFDIR)


def _check_env_outside(prefix: Path, env: dict) -> subprocess.CompletedProcess:
    """check_env.py's ``outside_env`` in the env's own Python, once cuDNN's stand-in has called dlopen."""
    caller = next(prefix.glob("lib/python3*/site-packages/nvidia/cudnn/lib/libcudnn_graph.so.9"))
    code = (
        "import ctypes, json, sys\n"
        f"sys.path.insert(0, {str(PROBE.parent)!r})\n"
        "import check_env\n"
        f"ctypes.CDLL({str(caller)!r}).tfgpu_test_nvrtc_origin()\n"
        "print(json.dumps(check_env.outside_env(check_env.loaded_cuda_libraries())))\n"
    )
    return subprocess.run([str(prefix / "bin" / "python"), "-c", code], capture_output=True, text=True, env=env)


@pytest.mark.parametrize("lib_dirs", [["/"], ["/tmp", "/usr"], "{system}/.."], ids=["root", "wide", "parent"])
def test_a_layout_naming_a_wide_directory_does_not_make_the_system_the_envs(tmp_path, closed_wheels, lib_dirs):  # noqa: F811
    """Attack: the env's etc/tfgpu/layout.json (a marker in the env, damaged or written by someone
    else) names '/' or another wide directory as a system-mode toolkit's library directory, while
    cuDNN's dlopen('libnvrtc.so') takes a copy outside the env (LD_LIBRARY_PATH). Must hold:
    doctor's libs.closed fails naming that copy, and verify's outside_env lists it: a toolkit
    directory named by the layout covers the files directly in it, nothing under or beside it."""
    prefix = _env(tmp_path, closed_wheels)
    system = tmp_path / "system"
    leak = gcc(system / "libnvrtc.so", "libnvrtc.so.13")
    named = [lib_dirs.format(system=system)] if isinstance(lib_dirs, str) else lib_dirs
    layout = prefix / "etc" / "tfgpu" / "layout.json"
    layout.parent.mkdir(parents=True, exist_ok=True)
    layout.write_text(json.dumps({"lib_dirs": named}))
    env = {**_no_ld_path(), "LD_LIBRARY_PATH": str(system)}
    done = _doctor(prefix, env)
    assert "Traceback" not in done.stderr, done.stderr
    findings = {f["id"]: f for f in json.loads(done.stdout)["findings"]}
    assert findings["libs.closed"]["status"] == "fail", findings["libs.closed"]
    assert any(str(leak) in line for line in findings["libs.closed"]["evidence"])
    checked = _check_env_outside(prefix, env)
    assert checked.returncode == 0, checked.stderr
    assert json.loads(checked.stdout) == [str(leak)]


@pytest.mark.parametrize("layout", ['{"lib_dirs": 5}', '{"lib_dirs": null}', "[1, 2]", '"text"', "{"])
def test_a_damaged_layout_never_crashes_verifys_check(tmp_path, closed_wheels, layout):  # noqa: F811
    """Attack: the env's etc/tfgpu/layout.json holds a number, null, a list, a string or broken JSON
    where lib_dirs goes. Must hold: verify's check script (check_env.outside_env, run in the env's
    own Python) still answers, listing the copy from outside, never a traceback."""
    prefix = _env(tmp_path, closed_wheels)
    system = tmp_path / "system"
    leak = gcc(system / "libnvrtc.so", "libnvrtc.so.13")
    (prefix / "etc" / "tfgpu").mkdir(parents=True, exist_ok=True)
    (prefix / "etc" / "tfgpu" / "layout.json").write_text(layout)
    checked = _check_env_outside(prefix, {**_no_ld_path(), "LD_LIBRARY_PATH": str(system)})
    assert checked.returncode == 0, checked.stderr
    assert json.loads(checked.stdout) == [str(leak)]


def test_doctor_reads_a_semicolon_in_ld_library_path_as_the_loader_does(tmp_path, closed_wheels):  # noqa: F811
    """Attack: LD_LIBRARY_PATH='<missing>;<system>' (glibc splits on ';' too) with a system
    libcurand.so.10 and libnvrtc.so there. Must hold: doctor sees what the loader does: TensorFlow's
    libcurand.so.10 and cuDNN's libnvrtc.so load from outside the env (libs.curand and libs.closed
    fail, naming the files), and the fix names the directory to remove, as it does for ':'."""
    prefix = _env(tmp_path, closed_wheels)
    system = tmp_path / "system"
    nvrtc = gcc(system / "libnvrtc.so", "libnvrtc.so.13")
    curand = gcc(system / "libcurand.so.10", "libcurand.so.10")
    env = {**_no_ld_path(), "LD_LIBRARY_PATH": f"{tmp_path / 'missing'};{system}"}
    real = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", ORIGIN, str(next(prefix.rglob("libcudnn_graph.so.9")))],
        capture_output=True,
        text=True,
        env=env,
    )
    assert real.stdout.strip() == str(nvrtc), real.stderr
    done = _doctor(prefix, env)
    assert "Traceback" not in done.stderr, done.stderr
    findings = {f["id"]: f for f in json.loads(done.stdout)["findings"]}
    assert findings["libs.curand"]["status"] == "fail", findings["libs.curand"]
    closed = findings["libs.closed"]
    assert closed["status"] == "fail", closed
    evidence = "\n".join(closed["evidence"])
    assert str(nvrtc) in evidence and str(curand) in evidence
    assert f"Remove {system} from LD_LIBRARY_PATH" in closed["fix"]


@pytest.mark.parametrize(
    "row",
    [
        {"name": "libnvrtc.so/../../../../etc/passwd", "caller": "libcudnn_graph.so.9", "runpath": ["$ORIGIN"]},
        {"name": "..", "caller": "libcudnn_graph.so.9", "runpath": ["$ORIGIN"]},
        {"name": "libnvrtc.so\u0000x", "caller": "libcudnn_graph.so.9", "runpath": ["$ORIGIN"]},
        {"name": "libnvrtc.so", "caller": "../../../../bin/sh", "runpath": ["$ORIGIN"]},
        {"name": "libnvrtc.so", "caller": "libcudnn_graph.so.9", "runpath": ["$ORIGIN:/usr/lib"]},
        {"name": "libnvrtc.so", "caller": "libcudnn_graph.so.9", "runpath": ["$ORIGIN\nrm -rf ~"]},
    ],
    ids=["slashes", "dotdot", "nul", "caller-path", "colon-in-entry", "newline"],
)
def test_hostile_overlay_rows_are_bad_data(tmp_path, closed_env, row):
    """Attack: a TFGPU_DATA_DIR overlay whose [[dlopened]] row has a name with slashes, '..', a NUL,
    a caller that is a path, or a RUNPATH entry with ':' or a newline. Must hold: every command
    that reads the rows refuses the overlay as bad-data (exit 2) naming the file, no traceback.
    The env is only named (the overlay is refused before it is read): one env serves every row."""
    overlay = tmp_path / "data"
    overlay.mkdir()
    from importlib.resources import files

    text = files("tfgpu.data").joinpath("sonames.toml").read_text(encoding="utf-8")
    text += (
        f'\n[[dlopened]]\nname = {json.dumps(row["name"])}\nprovides = "libnvrtc"\ncaller = {json.dumps(row["caller"])}\n'
        f'runpath = {json.dumps(row["runpath"])}\nwheel = "x"\nfound = "x"\nsource = []\n'
    )
    (overlay / "sonames.toml").write_text(text, encoding="utf-8")
    done = _doctor(closed_env, {**_no_ld_path(), "TFGPU_DATA_DIR": str(overlay)})
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 2, done.stdout + done.stderr
    assert json.loads(done.stdout)["error"]["code"] == "bad-data"
    assert "sonames.toml" in done.stdout
