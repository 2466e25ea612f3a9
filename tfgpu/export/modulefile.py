"""Modulefiles for an env built by the bash export: Lua for Lmod, Tcl for Environment Modules
(Lmod reads both).

``module load tf2.13`` does what the env's activation does: the env's ``bin`` first on PATH, its
CUDA libraries first on LD_LIBRARY_PATH, XLA's libdevice, ``CUDA_HOME`` in system mode; ``module
unload`` undoes it (``pushenv`` restores a previous XLA_FLAGS). A modulefile holds no absolute
path: it finds the env from where it is installed, ``<env>/modulefiles/<name>/<version>.lua`` (or
``<env>/modulefiles-tcl/<name>/<version>``), so the same bytes serve any prefix and ``module use
<env>/modulefiles`` is the whole set-up. Every value is written through ``tfgpu.doors.quoting``'s Lua
or Tcl string function.
"""

from __future__ import annotations

from tfgpu.doors import quoting
from tfgpu.envs.activation import wheel_dirs
from tfgpu.export.bash import default_env_name

LUA_DIR, TCL_DIR = "modulefiles", "modulefiles-tcl"


def names(resolution) -> tuple[str, str]:
    """(module name, version): ``tf2.13``, ``2.13.1``."""
    name = quoting.token(default_env_name(resolution), quoting.NAME, "The module name")
    return name, quoting.token(resolution.tensorflow, quoting.VERSION, "The TensorFlow version")


def paths(resolution) -> tuple[str, str]:
    """Where the two files go, relative to the export's directory (and to the env once copied)."""
    name, version = names(resolution)
    return f"{LUA_DIR}/{name}/{version}.lua", f"{TCL_DIR}/{name}/{version}"


def _layout(resolution) -> tuple[list[str], list[str], str | None, list[tuple[str, str]]]:
    """(PATH dirs, LD_LIBRARY_PATH dirs, XLA data dir, variables) relative to the env root; a
    library directory is added only where it exists (the env decides which CUDA wheels it has)."""
    python = quoting.token(resolution.python, r"3\.[0-9]{1,2}", "The Python version")
    if resolution.mode == "pip":
        site = f"lib/python{python}/site-packages"
        lib_dirs, data_dir, _ = wheel_dirs(resolution.cuda, site)
        return ["bin"], lib_dirs, data_dir, []
    if resolution.mode == "conda":
        data = "." if (resolution.cuda or "0").split(".")[0] not in ("10", "11") else "lib"
        return ["bin"], ["lib"], data, []
    # system mode: the bash export links the toolkit and cuDNN it installed into the env.
    return (
        ["etc/tfgpu/cuda/bin", "bin"],
        ["etc/tfgpu/cuda/lib64", "etc/tfgpu/cudnn/lib"],
        "etc/tfgpu/cuda",
        [("CUDA_HOME", "etc/tfgpu/cuda")],
    )


def _description(resolution) -> str:
    return quoting.one_line(
        f"TensorFlow {resolution.tensorflow} ({resolution.mode} mode, Python {resolution.python}, "
        f"CUDA {resolution.cuda_build or resolution.cuda}, cuDNN {resolution.cudnn}; NVIDIA "
        f"driver >= {resolution.min_driver})"
    )


def render_lua(resolution, header: list[str]) -> str:
    name, version = names(resolution)
    bins, libs, data, variables = _layout(resolution)
    q = quoting.lua_string
    lines = [
        quoting.comment(header, mark="--"),
        quoting.comment(
            [
                f"Install: copy this directory tree into the env, then `module use <env>/{LUA_DIR}` and "
                f"`module load {name}`."
            ],
            mark="--",
        ),
        f"whatis({q('Name: ' + name)})",
        f"whatis({q('Version: ' + version)})",
        f"whatis({q('Description: ' + _description(resolution))})",
        f"help({q(_description(resolution))})",
        'family("tensorflow")',
        "-- The env is three directories up: <env>/" + LUA_DIR + "/<name>/<version>.lua",
        'local root = myFileName():match("^(.*)/[^/]+/[^/]+/[^/]+$")',
        'local function under(relative) if relative == "." then return root end return pathJoin(root, relative) end',
        'setenv("VIRTUAL_ENV", root)',
        'setenv("TFGPU_ENV", root)',
    ]
    lines += [f"setenv({q(var)}, under({q(rel)}))" for var, rel in variables]
    lines += [f'prepend_path("PATH", under({q(rel)}))' for rel in reversed(bins)]
    for rel in reversed(libs):
        lines += [f"if isDir(under({q(rel)})) then", f'    prepend_path("LD_LIBRARY_PATH", under({q(rel)}))', "end"]
    if data:
        lines += [
            f'if isDir(pathJoin(under({q(data)}), "nvvm/libdevice")) then',
            f'    pushenv("XLA_FLAGS", "--xla_gpu_cuda_data_dir=" .. under({q(data)}))',
            "end",
        ]
    return "\n".join(lines) + "\n"


def render_tcl(resolution, header: list[str]) -> str:
    name, version = names(resolution)
    bins, libs, data, variables = _layout(resolution)
    q = quoting.tcl_string
    lines = [
        "#%Module1.0",
        quoting.tcl_comment(header),
        quoting.tcl_comment(
            [
                f"Install: copy this directory tree into the env, then `module use <env>/{TCL_DIR}` and "
                f"`module load {name}`."
            ]
        ),
        f"module-whatis {q(_description(resolution))}",
        f"proc ModulesHelp {{}} {{ puts stderr {q(_description(resolution))} }}",
        f"conflict {q(name)}",
        "# The env is three directories up: <env>/" + TCL_DIR + "/<name>/<version>",
        "set root [file dirname [file dirname [file dirname [file normalize $ModulesCurrentModulefile]]]]",
        'proc tfgpu_under {root relative} { if {$relative eq "."} { return $root }; return "$root/$relative" }',
        "setenv VIRTUAL_ENV $root",
        "setenv TFGPU_ENV $root",
    ]
    lines += [f"setenv {q(var)} [tfgpu_under $root {q(rel)}]" for var, rel in variables]
    lines += [f"prepend-path PATH [tfgpu_under $root {q(rel)}]" for rel in reversed(bins)]
    for rel in reversed(libs):
        lines += [
            f"if {{[file isdirectory [tfgpu_under $root {q(rel)}]]}} {{",
            f"    prepend-path LD_LIBRARY_PATH [tfgpu_under $root {q(rel)}]",
            "}",
        ]
    if data:
        lines += [
            f"if {{[file isdirectory [tfgpu_under $root {q(data)}]/nvvm/libdevice]}} {{",
            f'    pushenv XLA_FLAGS "--xla_gpu_cuda_data_dir=[tfgpu_under $root {q(data)}]"',
            "}",
        ]
    return "\n".join(lines) + "\n"
