# --- conda mode: CUDA and cuDNN from the plan's conda channels, TensorFlow from PyPI into the env --
# shellcheck shell=bash

check_driver
CONDA_EXE_FOUND=""
for candidate in "${TFGPU_CONDA:-}" micromamba mamba conda; do
    if [ -n "$candidate" ] && command -v "$candidate" >/dev/null 2>&1; then
        CONDA_EXE_FOUND="$(command -v "$candidate")"
        break
    fi
done
if [ -z "$CONDA_EXE_FOUND" ]; then
    die "no conda, mamba or micromamba on PATH." \
        "Install one (e.g. Miniforge: https://github.com/conda-forge/miniforge), or set TFGPU_CONDA=/path/to/conda;" \
        "or ask for a pip-mode export of this installer (it needs no conda)."
fi
say "using $CONDA_EXE_FOUND"

# The solver checks the __cuda virtual package; without a driver (a build host, a container
# build) it would reject CUDA builds, so it is told which CUDA the target runs.
if ! command -v nvidia-smi >/dev/null 2>&1 && [ -z "${CONDA_OVERRIDE_CUDA:-}" ]; then
    export CONDA_OVERRIDE_CUDA="$CUDA_MAJOR_MINOR"
    say "no driver here: CONDA_OVERRIDE_CUDA=$CONDA_OVERRIDE_CUDA for the solve"
fi

SPECS_STAMP="$TFGPU_PREFIX/etc/tfgpu/installed-conda-specs.txt"
if [ -x "$TFGPU_PREFIX/bin/python" ] && [ -f "$SPECS_STAMP" ] &&
    [ "$(cat "$SPECS_STAMP")" = "$(printf '%s\n' "${CONDA_SPECS[@]}")" ]; then
    in_place "conda env $TFGPU_PREFIX (${CONDA_SPECS[*]})"
else
    pins_conda
    say "creating the conda env $TFGPU_PREFIX: ${CONDA_SPECS[*]}"
    mkdir -p "$(dirname "$TFGPU_PREFIX")"
    # The plan's channels and no other: a .condarc on the target adds none.
    CHANNEL_ARGS=(--override-channels)
    for channel in "${CONDA_CHANNELS[@]}"; do
        CHANNEL_ARGS+=(-c "$channel")
    done
    run_logged "$CONDA_EXE_FOUND" create --yes --prefix "$TFGPU_PREFIX" "${CHANNEL_ARGS[@]}" "${CONDA_SPECS[@]}"
    mkdir -p "$(dirname "$SPECS_STAMP")"
    printf '%s\n' "${CONDA_SPECS[@]}" >"$SPECS_STAMP"
    changed "created the conda env $TFGPU_PREFIX"
fi
# None with --tf-source conda-forge: TensorFlow came with the conda packages.
if [ "${#PIP_REQUIREMENTS[@]}" -gt 0 ]; then
    pins_pip
    pip_install "$TFGPU_PREFIX/bin/python" "$TFGPU_PREFIX/etc/tfgpu/installed-requirements.txt" "${PIP_REQUIREMENTS[@]}"
fi

mkdir -p "$TFGPU_PREFIX/etc/conda/activate.d" "$TFGPU_PREFIX/etc/conda/deactivate.d"
write_if_changed "$TFGPU_PREFIX/etc/conda/activate.d/tfgpu-cuda.sh" 644 <<'TFGPU_ACTIVATE'
# tfgpu-install: this env's CUDA libraries first, XLA's libdevice; restored on deactivate.
# shellcheck shell=bash
_TFGPU_OLD_LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}"
_TFGPU_OLD_XLA_FLAGS="${XLA_FLAGS:-}"
export _TFGPU_OLD_LD_LIBRARY_PATH _TFGPU_OLD_XLA_FLAGS
LD_LIBRARY_PATH="$CONDA_PREFIX/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
if [ -d "$CONDA_PREFIX/nvvm/libdevice" ]; then
    _tfgpu_data_dir="$CONDA_PREFIX"
else
    _tfgpu_data_dir="$CONDA_PREFIX/lib"
fi
case " ${XLA_FLAGS:-} " in
    *--xla_gpu_cuda_data_dir=*) ;;
    *) XLA_FLAGS="${XLA_FLAGS:+$XLA_FLAGS }--xla_gpu_cuda_data_dir=$_tfgpu_data_dir"
       export XLA_FLAGS ;;
esac
unset _tfgpu_data_dir
TFGPU_ACTIVATE
write_if_changed "$TFGPU_PREFIX/etc/conda/deactivate.d/tfgpu-cuda.sh" 644 <<'TFGPU_DEACTIVATE'
# tfgpu-install: restore what activate.d/tfgpu-cuda.sh changed.
# shellcheck shell=bash
if [ -n "${_TFGPU_OLD_LD_LIBRARY_PATH:-}" ]; then
    export LD_LIBRARY_PATH="$_TFGPU_OLD_LD_LIBRARY_PATH"
else
    unset LD_LIBRARY_PATH
fi
if [ -n "${_TFGPU_OLD_XLA_FLAGS:-}" ]; then
    export XLA_FLAGS="$_TFGPU_OLD_XLA_FLAGS"
else
    unset XLA_FLAGS
fi
unset _TFGPU_OLD_LD_LIBRARY_PATH _TFGPU_OLD_XLA_FLAGS
TFGPU_DEACTIVATE

# CUDA 11's cudatoolkit keeps libdevice in lib/; XLA looks for nvvm/libdevice under its data dir.
if [ -f "$TFGPU_PREFIX/lib/libdevice.10.bc" ] && [ ! -e "$TFGPU_PREFIX/lib/nvvm/libdevice/libdevice.10.bc" ]; then
    mkdir -p "$TFGPU_PREFIX/lib/nvvm/libdevice"
    ln -s ../../libdevice.10.bc "$TFGPU_PREFIX/lib/nvvm/libdevice/libdevice.10.bc"
    changed "linked libdevice where XLA looks for it"
fi

verify_activated() {
    (
        export CONDA_PREFIX="$TFGPU_PREFIX"
        # shellcheck source=/dev/null
        . "$TFGPU_PREFIX/etc/conda/activate.d/tfgpu-cuda.sh"
        verify "$TFGPU_PREFIX/bin/python"
    )
}
verify_activated
finish
say "use it: conda activate $TFGPU_PREFIX (the activation puts its CUDA libraries first)"
