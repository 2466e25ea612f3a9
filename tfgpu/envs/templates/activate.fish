# tfgpu-install: this env's CUDA libraries first on the loader path, XLA's libdevice, and an exact
# restore on deactivate. Sourced at the end of bin/activate.fish. Generated; do not edit.

# @LAYOUT@  (sets _tfgpu_libs and _tfgpu_cuda_data_dir, relative to $VIRTUAL_ENV)

if set -q LD_LIBRARY_PATH
    set -gx _TFGPU_OLD_LD_LIBRARY_PATH $LD_LIBRARY_PATH
    set -gx _TFGPU_HAD_LD_LIBRARY_PATH 1
else
    set -e _TFGPU_OLD_LD_LIBRARY_PATH
    set -e _TFGPU_HAD_LD_LIBRARY_PATH
end
if set -q XLA_FLAGS
    set -gx _TFGPU_OLD_XLA_FLAGS $XLA_FLAGS
    set -gx _TFGPU_HAD_XLA_FLAGS 1
else
    set -e _TFGPU_OLD_XLA_FLAGS
    set -e _TFGPU_HAD_XLA_FLAGS
end

if test (count $_tfgpu_libs) -gt 0
    set -gx LD_LIBRARY_PATH $_tfgpu_libs $LD_LIBRARY_PATH
end
if test -n "$_tfgpu_cuda_data_dir"; and not string match -q -- '*--xla_gpu_cuda_data_dir=*' "$XLA_FLAGS"
    set -gx XLA_FLAGS (string trim -- "$XLA_FLAGS --xla_gpu_cuda_data_dir=$_tfgpu_cuda_data_dir")
end
set -e _tfgpu_libs
set -e _tfgpu_cuda_data_dir

# @RESTORE@ (conda: deactivate.d runs this part)
function _tfgpu_restore
    if set -q _TFGPU_HAD_LD_LIBRARY_PATH
        set -gx LD_LIBRARY_PATH $_TFGPU_OLD_LD_LIBRARY_PATH
    else
        set -e LD_LIBRARY_PATH
    end
    if set -q _TFGPU_HAD_XLA_FLAGS
        set -gx XLA_FLAGS $_TFGPU_OLD_XLA_FLAGS
    else
        set -e XLA_FLAGS
    end
    set -e _TFGPU_OLD_LD_LIBRARY_PATH _TFGPU_HAD_LD_LIBRARY_PATH _TFGPU_OLD_XLA_FLAGS _TFGPU_HAD_XLA_FLAGS
end

# @VENV@ (venvs only)
# Wrap the venv's own deactivate so ours runs first; it removes the wrapper as it always does.
functions -c deactivate _tfgpu_venv_deactivate
function deactivate
    _tfgpu_restore
    _tfgpu_venv_deactivate $argv
    if test "$argv[1]" != nondestructive
        functions -e _tfgpu_venv_deactivate _tfgpu_restore
    end
end
