# tfgpu-install: this env's CUDA libraries first on the loader path, XLA's libdevice, and an exact
# restore on deactivate. Sourced at the end of bin/activate (bash, zsh). Generated; do not edit.
# shellcheck shell=bash

# @LAYOUT@  (sets _tfgpu_libs and _tfgpu_cuda_data_dir, relative to $VIRTUAL_ENV)

if [ -n "${LD_LIBRARY_PATH+set}" ]; then
    _TFGPU_OLD_LD_LIBRARY_PATH="$LD_LIBRARY_PATH"
    _TFGPU_HAD_LD_LIBRARY_PATH=1
else
    unset _TFGPU_OLD_LD_LIBRARY_PATH _TFGPU_HAD_LD_LIBRARY_PATH
fi
if [ -n "${XLA_FLAGS+set}" ]; then
    _TFGPU_OLD_XLA_FLAGS="$XLA_FLAGS"
    _TFGPU_HAD_XLA_FLAGS=1
else
    unset _TFGPU_OLD_XLA_FLAGS _TFGPU_HAD_XLA_FLAGS
fi

if [ -n "$_tfgpu_libs" ]; then
    LD_LIBRARY_PATH="$_tfgpu_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export LD_LIBRARY_PATH
fi
if [ -n "$_tfgpu_cuda_data_dir" ]; then
    case " ${XLA_FLAGS:-} " in
        *--xla_gpu_cuda_data_dir=*) ;;  # the user chose one: keep it
        *) XLA_FLAGS="${XLA_FLAGS:+$XLA_FLAGS }--xla_gpu_cuda_data_dir=$_tfgpu_cuda_data_dir"
           export XLA_FLAGS ;;
    esac
fi
unset _tfgpu_libs _tfgpu_cuda_data_dir

# @RESTORE@ (conda: deactivate.d runs this part)
_tfgpu_restore () {
    if [ -n "${_TFGPU_HAD_LD_LIBRARY_PATH:-}" ]; then
        LD_LIBRARY_PATH="$_TFGPU_OLD_LD_LIBRARY_PATH"
        export LD_LIBRARY_PATH
    else
        unset LD_LIBRARY_PATH
    fi
    if [ -n "${_TFGPU_HAD_XLA_FLAGS:-}" ]; then
        XLA_FLAGS="$_TFGPU_OLD_XLA_FLAGS"
        export XLA_FLAGS
    else
        unset XLA_FLAGS
    fi
    unset _TFGPU_OLD_LD_LIBRARY_PATH _TFGPU_HAD_LD_LIBRARY_PATH _TFGPU_OLD_XLA_FLAGS _TFGPU_HAD_XLA_FLAGS
}

# @VENV@ (venvs only)
# Wrap the venv's own deactivate so ours runs first; it removes the wrapper as it always does.
eval "_tfgpu_venv_$(declare -f deactivate)"
deactivate () {
    _tfgpu_restore
    _tfgpu_venv_deactivate "$@"
    if [ "${1:-}" != "nondestructive" ]; then
        unset -f _tfgpu_venv_deactivate _tfgpu_restore
    fi
}
