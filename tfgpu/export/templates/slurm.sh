# --- the job (tfgpu-install export) ---------------------------------------------------------------
# shellcheck shell=bash

say() { printf '%s\n' "tfgpu-job: $*"; }
die() {
    printf '%s\n' "tfgpu-job: ERROR: $*" >&2
    exit 1
}

[ -n "${SLURM_JOB_ID:-}" ] || die "submit this with sbatch (or run it inside salloc): it reads the SLURM_* variables"
# Slurm runs a copy of this script from its spool directory: the job's files are found through the
# directory it was submitted from (the README says to submit from the export's directory).
TFGPU_JOB_DIR="${TFGPU_JOB_DIR:-${SLURM_SUBMIT_DIR:-$PWD}}"
TFGPU_PREFIX="${TFGPU_PREFIX:-${XDG_DATA_HOME:-${HOME:?HOME is not set}/.local/share}/tfgpu-install/envs/$ENV_NAME}"
# One port per worker on its node, from a base that differs between jobs sharing a node.
TFGPU_PORT="${TFGPU_PORT:-$((20000 + SLURM_JOB_ID % 20000))}"
for helper in multiworker.py check_env.py gpu_checks.py; do
    [ -f "$TFGPU_JOB_DIR/tfgpu/$helper" ] ||
        die "$TFGPU_JOB_DIR/tfgpu/$helper is missing: submit from the directory tfgpu-install wrote (or set TFGPU_JOB_DIR to it)"
done

# The environment, one of three ways: an Apptainer image, a module, or the venv itself.
if [ -n "${TFGPU_IMAGE:-}" ]; then
    command -v apptainer >/dev/null 2>&1 || die "TFGPU_IMAGE is set but apptainer is not on PATH on $(hostname)"
    [ -f "$TFGPU_IMAGE" ] || die "TFGPU_IMAGE=$TFGPU_IMAGE does not exist (build it: apptainer build tfgpu-env.sif tfgpu-env.def)"
    PYTHON=(apptainer exec --nv --bind "$TFGPU_JOB_DIR" "$TFGPU_IMAGE" python)
    WHERE="image $TFGPU_IMAGE"
elif [ -n "${TFGPU_MODULE:-}" ]; then
    type module >/dev/null 2>&1 || die "TFGPU_MODULE is set but the module command is not defined in this job's shell"
    module load "$TFGPU_MODULE" || die "module load $TFGPU_MODULE failed (module use <env>/modulefiles first?)"
    PYTHON=(python)
    WHERE="module $TFGPU_MODULE"
else
    [ -x "$TFGPU_PREFIX/bin/python" ] ||
        die "no environment at $TFGPU_PREFIX: build it on the login node with install-tf.sh (README.md), or set TFGPU_PREFIX"
    # shellcheck source=/dev/null
    . "$TFGPU_PREFIX/bin/activate"
    PYTHON=("$TFGPU_PREFIX/bin/python")
    WHERE="env $TFGPU_PREFIX"
fi

# NCCL, for every task this job starts: NVLink multicast off (on shared GPU hosts it takes fabric
# resources other jobs need), warnings in the job's output, and the network interface when given.
export NCCL_NVLS_ENABLE=0
export NCCL_DEBUG="${NCCL_DEBUG:-WARN}"
if [ -n "${TFGPU_NCCL_IFNAME:-}" ]; then
    export NCCL_SOCKET_IFNAME="$TFGPU_NCCL_IFNAME"
fi
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-1}"

say "TensorFlow $TF_VERSION (CUDA $CUDA_VERSION, cuDNN $CUDNN_VERSION) from $WHERE"
say "job $SLURM_JOB_ID: $SLURM_NTASKS task(s) on $SLURM_JOB_NUM_NODES node(s): $SLURM_JOB_NODELIST"

# Preflight, on every node before the workers start: TensorFlow imports and computes on each GPU
# (tfgpu-install's verify, run with the env's own Python on the compute node).
preflight_out="$(srun --nodes="$SLURM_JOB_NUM_NODES" --ntasks="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 \
    "${PYTHON[@]}" -I "$TFGPU_JOB_DIR/tfgpu/check_env.py")" || true
printf '%s\n' "$preflight_out" | "${PYTHON[@]}" -I -c "$PREFLIGHT_PY" "$SLURM_JOB_NUM_NODES" "$MIN_DRIVER" ||
    die "preflight failed: see above (TFGPU_ALLOW_CPU=1 lets a CPU-only test run go on)"

# expand_tasks_per_node "2(x3),1" -> "2 2 2 1" (Slurm's compressed SLURM_STEP_TASKS_PER_NODE).
expand_tasks_per_node() {
    local part parts out=() k
    IFS=, read -r -a parts <<<"$1"
    for part in "${parts[@]}"; do
        if [[ $part =~ ^([0-9]+)\(x([0-9]+)\)$ ]]; then
            for ((k = 0; k < BASH_REMATCH[2]; k++)); do out+=("${BASH_REMATCH[1]}"); done
        elif [[ $part =~ ^[0-9]+$ ]]; then
            out+=("$part")
        else
            return 1
        fi
    done
    printf '%s\n' "${out[*]}"
}

# tfgpu_task COMMAND...: run in each task by srun. TF_CONFIG from the step's nodes and tasks (block
# distribution: a node's tasks are consecutive ranks, ports TFGPU_PORT + local rank), one GPU of the
# node's per task when several tasks share a node, then COMMAND.
tfgpu_task() {
    local hosts counts workers=() i j host gpus entry list
    mapfile -t hosts < <(scontrol show hostnames "$SLURM_STEP_NODELIST")
    read -r -a counts <<<"$(expand_tasks_per_node "$SLURM_STEP_TASKS_PER_NODE")" ||
        die "cannot read SLURM_STEP_TASKS_PER_NODE=$SLURM_STEP_TASKS_PER_NODE"
    for i in "${!hosts[@]}"; do
        host="${hosts[$i]}"
        [[ $host =~ ^[A-Za-z0-9][A-Za-z0-9.-]*$ ]] || die "unexpected node name: $host"
        for ((j = 0; j < counts[i]; j++)); do
            printf -v entry '"%s:%d"' "$host" "$((TFGPU_PORT + j))"
            workers+=("$entry")
        done
    done
    list="$(IFS=,; printf '%s' "${workers[*]}")"
    # shellcheck disable=SC2089,SC2090  # TF_CONFIG is JSON: its quotes are data, for TensorFlow to read
    printf -v TF_CONFIG '{"cluster": {"worker": [%s]}, "task": {"type": "worker", "index": %d}}' "$list" "$SLURM_PROCID"
    # shellcheck disable=SC2090
    export TF_CONFIG
    if [ -n "${CUDA_VISIBLE_DEVICES:-}" ] && [ "${SLURM_STEP_NUM_TASKS:-1}" -gt "${#hosts[@]}" ]; then
        IFS=, read -r -a gpus <<<"$CUDA_VISIBLE_DEVICES"
        if [ "${#gpus[@]}" -gt "$SLURM_LOCALID" ]; then
            export CUDA_VISIBLE_DEVICES="${gpus[$SLURM_LOCALID]}"
        fi
    fi
    exec "$@"
}
export -f tfgpu_task expand_tasks_per_node die
export TFGPU_PORT

# The workers: the program given to sbatch (sbatch tfgpu-job.sbatch train.py --epochs 3), run with
# the env's Python; by default one MultiWorkerMirroredStrategy step that prints each worker's loss.
if [ "$#" -gt 0 ]; then
    PROGRAM=("$@")
else
    PROGRAM=("$TFGPU_JOB_DIR/tfgpu/multiworker.py" --worker)
fi
say "starting $SLURM_NTASKS worker(s): ${PROGRAM[*]}"
srun --label --kill-on-bad-exit=1 --distribution=block bash -c 'tfgpu_task "$@"' tfgpu-task \
    "${PYTHON[@]}" "${PROGRAM[@]}"
say "all $SLURM_NTASKS worker(s) finished"
