# --- pip mode: a venv with TensorFlow and NVIDIA's CUDA wheels ----------------------------------
# shellcheck shell=bash

check_driver
ensure_venv
pins_pip
pip_install "$TFGPU_PREFIX/bin/python" "$TFGPU_PREFIX/etc/tfgpu/installed-requirements.txt" "${PIP_REQUIREMENTS[@]}"

# Activation and the load hook: the env's CUDA libraries first on LD_LIBRARY_PATH, XLA's
# libdevice, ptxas on PATH, and a .pth hook that preloads the libraries for unactivated starts.
activation_report="$(write_activation "$TFGPU_PREFIX/bin/python" "$TFGPU_PREFIX")" ||
    die "setting up the CUDA library activation failed (see $TFGPU_LOG)"
printf '%s\n' "activation: $activation_report" >>"$TFGPU_LOG"
case "$activation_report" in
    '{"changed": [],'*) in_place "activation scripts and load hook" ;;
    *) changed "wrote the activation scripts and the load hook ($TFGPU_PREFIX/etc/tfgpu)" ;;
esac

verify "$TFGPU_PREFIX/bin/python"
finish
say "use it: source $TFGPU_PREFIX/bin/activate (or run $TFGPU_PREFIX/bin/python directly)"
