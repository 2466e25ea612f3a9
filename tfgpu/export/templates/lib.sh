# --- helpers (tfgpu-install export; shared by every mode) ---------------------------------------
# shellcheck shell=bash

CHANGED=0
mkdir -p "$(dirname "$TFGPU_LOG")"
: >>"$TFGPU_LOG"

say() { printf '%s\n' "tfgpu: $*" | tee -a "$TFGPU_LOG"; }
warn() { printf '%s\n' "tfgpu: WARNING: $*" | tee -a "$TFGPU_LOG" >&2; }
die() {
    printf '%s\n' "tfgpu: ERROR: $*" | tee -a "$TFGPU_LOG" >&2
    exit 1
}
changed() { CHANGED=1; say "$*"; }
in_place() { say "already in place: $*"; }

say "TensorFlow $TF_VERSION (Python $PYTHON_VERSION, CUDA $CUDA_VERSION, cuDNN $CUDNN_VERSION) into $TFGPU_PREFIX; log: $TFGPU_LOG"

# Run a command with its whole output in the log; on failure show the log's tail and stop.
run_logged() {
    printf '%s\n' "+ $*" >>"$TFGPU_LOG"
    if ! "$@" >>"$TFGPU_LOG" 2>&1; then
        tail -n 20 "$TFGPU_LOG" >&2
        die "'$1' failed (the whole output is in $TFGPU_LOG)"
    fi
}

# version_ge A B: A >= B, comparing dot-separated numbers.
version_ge() {
    [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n 1)" = "$2" ]
}

# run_shown: like run_logged, for the long installs: what the command says is shown as it comes,
# so that a download of several GB is not minutes of silence. On a terminal the command writes to
# it directly (pip draws its download bars only there; the log keeps the command line); elsewhere
# (a pipe, CI, cloud-init's log) its lines ("Downloading NAME (SIZE)") go to stderr and the log.
run_shown() {
    local status=0
    printf '%s\n' "+ $*" >>"$TFGPU_LOG"
    if [ -t 2 ]; then
        "$@" >&2 || status=$?
        [ "$status" = 0 ] || printf '%s\n' "(exit $status; its output is on the terminal, above)" >>"$TFGPU_LOG"
    else
        "$@" 2>&1 | tee -a "$TFGPU_LOG" >&2 || status=$?
    fi
    [ "$status" = 0 ] ||
        die "'$1' failed with exit $status${LOCK_FAILURE_HINT:+; $LOCK_FAILURE_HINT} (its output is above; the log is $TFGPU_LOG)"
}

on_error() {
    printf '%s\n' "tfgpu: FAILED at line $1 (exit $2); the whole output is in $TFGPU_LOG" >&2
}
trap 'on_error "$LINENO" "$?"' ERR

# The NVIDIA driver: never installed here, only checked.
check_driver() {
    local driver
    if ! command -v nvidia-smi >/dev/null 2>&1; then
        warn "no NVIDIA driver found (nvidia-smi is not on PATH): TensorFlow will see no GPU until driver >= $MIN_DRIVER is installed"
        return 0
    fi
    driver="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>>"$TFGPU_LOG" | head -n 1 | tr -d '[:space:]')" || driver=""
    if [ -z "$driver" ]; then
        warn "nvidia-smi found no driver version (no GPU visible?); this stack needs driver >= $MIN_DRIVER"
        return 0
    fi
    if ! version_ge "$driver" "$MIN_DRIVER"; then
        die "NVIDIA driver $driver is too old: TensorFlow $TF_VERSION (CUDA $CUDA_VERSION) needs >= $MIN_DRIVER. Upgrade the driver, or generate a script for an older TensorFlow."
    fi
    say "NVIDIA driver $driver >= $MIN_DRIVER: ok"
}

# find_python: the interpreter to build the venv with (TFGPU_PYTHON overrides).
find_python() {
    local candidate
    for candidate in "${TFGPU_PYTHON:-}" "python$PYTHON_VERSION" python3; do
        [ -n "$candidate" ] || continue
        if command -v "$candidate" >/dev/null 2>&1 &&
            [ "$("$candidate" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" = "$PYTHON_VERSION" ]; then
            command -v "$candidate"
            return 0
        fi
    done
    die "Python $PYTHON_VERSION is needed (TensorFlow $TF_VERSION has wheels for it) and was not found." \
        "Install python$PYTHON_VERSION with its venv module (Debian/Ubuntu: apt-get install python$PYTHON_VERSION-venv;" \
        "RHEL: dnf install python$PYTHON_VERSION), or set TFGPU_PYTHON=/path/to/python$PYTHON_VERSION."
}

# ensure_venv: the venv at TFGPU_PREFIX, created with the right Python unless it is there.
ensure_venv() {
    local have
    if [ -x "$TFGPU_PREFIX/bin/python" ]; then
        have="$("$TFGPU_PREFIX/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
        [ "$have" = "$PYTHON_VERSION" ] ||
            die "$TFGPU_PREFIX already holds a Python $have environment; this script builds Python $PYTHON_VERSION. Remove it, or set TFGPU_PREFIX to another path."
        in_place "venv $TFGPU_PREFIX"
        return 0
    fi
    PYTHON="$(find_python)"
    say "creating the venv $TFGPU_PREFIX with $PYTHON"
    mkdir -p "$(dirname "$TFGPU_PREFIX")"
    run_logged "$PYTHON" -m venv --prompt "$ENV_NAME" "$TFGPU_PREFIX"
    changed "created the venv $TFGPU_PREFIX"
}

# pip_sources: extra pip arguments from TFGPU_FIND_LINKS / TFGPU_OFFLINE (pip reads PIP_* itself).
PIP_SOURCES=()
if [ -n "${TFGPU_FIND_LINKS:-}" ]; then
    PIP_SOURCES+=(--find-links "$TFGPU_FIND_LINKS")
fi
if [ "${TFGPU_OFFLINE:-0}" = 1 ]; then
    PIP_SOURCES+=(--no-index)
fi

# pip_install PYTHON STAMP REQUIREMENT...: install once; the stamp records what was installed.
pip_install() {
    local python="$1" stamp="$2"
    shift 2
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$(printf '%s\n' "$@")" ]; then
        in_place "Python packages: $*"
        return 0
    fi
    say "installing with pip: $* (this downloads several GB for CUDA builds)"
    run_shown "$python" -m pip install --disable-pip-version-check "${PIP_SOURCES[@]}" "$@"
    mkdir -p "$(dirname "$stamp")"
    printf '%s\n' "$@" >"$stamp"
    changed "installed: $*"
}

# write_if_changed PATH MODE: stdin becomes PATH unless it already holds exactly that.
write_if_changed() {
    local path="$1" mode="$2" tmp
    tmp="$(mktemp "${path}.XXXXXX")"
    cat >"$tmp"
    if [ -f "$path" ] && cmp -s "$tmp" "$path"; then
        rm -f "$tmp"
        in_place "$path"
        return 0
    fi
    chmod "$mode" "$tmp"
    mv -f "$tmp" "$path"
    changed "wrote $path"
}

# verify PYTHON: import TensorFlow, list GPUs, a matmul on the first GPU; fails without a GPU.
verify() {
    local python="$1"
    if [ "${TFGPU_SKIP_VERIFY:-0}" = 1 ]; then
        warn "VERIFICATION SKIPPED (TFGPU_SKIP_VERIFY=1): nothing has checked that TensorFlow sees a GPU"
        return 0
    fi
    say "verifying: import tensorflow, list GPUs, a matmul on the GPU"
    local output status=0
    output="$(printf '%s\n' "$VERIFY_PY" | "$python" - "$TF_VERSION" "$MIN_DRIVER" 2>&1)" || status=$?
    # TensorFlow's own log lines go to the log file; its verdict lines to the screen as well.
    printf '%s\n' "$output" >>"$TFGPU_LOG"
    printf '%s\n' "$output" | grep -E '^(TensorFlow |FAIL|OK)' || true
    if [ "$status" != 0 ]; then
        diagnose "$python"
        die "verification failed: TensorFlow $TF_VERSION does not run on a GPU here (details above and in $TFGPU_LOG)." \
            "Rerun this script once the machine's GPU or driver is fixed; it changes nothing that is already in place."
    fi
}

# diagnose: what this machine shows about its GPU, for the person who administers it. Only checks
# this script can run here: the target has no tfgpu-install.
diagnose() {
    local driver
    say "what this machine shows (send these lines and $TFGPU_LOG to its administrator):"
    if ! command -v nvidia-smi >/dev/null 2>&1; then
        say "  - nvidia-smi is not on PATH: no NVIDIA driver is installed here; one >= $MIN_DRIVER is needed"
    else
        driver="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>>"$TFGPU_LOG" | head -n 1 | tr -d '[:space:]')" ||
            driver=""
        if [ -z "$driver" ]; then
            say "  - nvidia-smi runs but reports no GPU: the driver is not loaded, or no GPU is visible to this machine"
        elif version_ge "$driver" "$MIN_DRIVER"; then
            say "  - NVIDIA driver $driver (>= $MIN_DRIVER needed: ok)"
        else
            say "  - NVIDIA driver $driver is older than the $MIN_DRIVER this TensorFlow needs: the driver must be upgraded"
        fi
    fi
    if ! compgen -G '/dev/nvidia[0-9]*' >/dev/null; then
        say "  - no /dev/nvidia0: no GPU device here (a container needs --gpus all or a GPU request)"
    fi
    if [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then
        say "  - CUDA_VISIBLE_DEVICES='$CUDA_VISIBLE_DEVICES' limits which GPUs TensorFlow may see"
    fi
    say "  - check again by hand: $1 -c 'import tensorflow as tf; print(tf.config.list_physical_devices(\"GPU\"))'"
}

finish() {
    if [ "$CHANGED" = 0 ]; then
        say "nothing changed: everything was already in place"
    else
        say "done: TensorFlow $TF_VERSION is installed in $TFGPU_PREFIX"
    fi
}
