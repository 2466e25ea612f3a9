#!/usr/bin/env bash
# GPU proof: in a two-stack env (TF 2.21's CUDA 12 set kept apart, torch 2.11's CUDA 13 set in
# site-packages), which copy of each CUDA library each framework's process uses, and the cuDNN /
# cuSPARSE / NCCL / cuRAND operations run in both import orders (docs/maintainers/gpu-proofs.md).
# On the GPU machine, from the repository root, in two steps (each well inside one run's limit):
#   scripts/gpu/two_stack_libs_proof.sh build  BUNDLE WHEELS ENV RESULTS
#   scripts/gpu/two_stack_libs_proof.sh check  BUNDLE WHEELS ENV RESULTS
# BUNDLE holds src/ (this checkout's tfgpu and scripts) and tooldeps/ (the tool's wheels); WHEELS the
# release's wheels (torch's are rebuilt there from the machine's own install). `doctor` is also run
# with the checkout the machine was sent (the code before this change) for the before/after text.
set -u
step=$1 bundle=$(cd "$2" && pwd) wheels=$3 env_dir=$4 results=$5
mkdir -p "$results"
checkout=$PWD
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export TFGPU_CACHE_DIR=/tmp/tfgpu-cache UV_CACHE_DIR=/tmp/uv-cache XDG_CACHE_HOME=/tmp/xdg PYTHONUNBUFFERED=1
# from /tmp: `python3 -m` puts the working directory first on sys.path, before PYTHONPATH
new() { (cd /tmp && PYTHONPATH=/tmp/site:$bundle/src python3 -m tfgpu "$@"); }
old() { (cd /tmp && PYTHONPATH=/tmp/site:$checkout python3 -m tfgpu "$@"); }
if [ "$step" = build ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$bundle"/tooldeps/*.whl
  PYTHONPATH=/tmp/site python3 "$bundle/src/scripts/gpu/wheels_from_installed.py" torch "$wheels" 2>&1 | tail -3
  ls "$wheels" | wc -l
  start=$(date +%s)
  new create --tf 2.21 --with torch==2.11.0 --mode pip --python 3.12 --offline --find-links "$wheels" \
    --prefix "$env_dir" --no-verify >"$results/create.txt" 2>&1; echo "create exit $? in $(( $(date +%s) - start )) s"
  tail -5 "$results/create.txt"
  old doctor --prefix "$env_dir" --json >"$results/doctor_before.json" 2>"$results/doctor_before.err"; echo "doctor before exit $?"
else
  start=$(date +%s)
  new verify --prefix "$env_dir" --with torch --json >"$results/verify_with_torch.json" 2>"$results/verify_with_torch.err"
  echo "verify --with torch exit $? in $(( $(date +%s) - start )) s"
  new doctor --prefix "$env_dir" --json >"$results/doctor_after.json" 2>/dev/null; echo "doctor after exit $?"
  python3 - "$results" <<'PY'
import json, sys
r = sys.argv[1]
doc = json.load(open(r + "/verify_with_torch.json"))
rep = doc.get("details", doc)
for entry in rep.get("orders", []):
    print("ORDER", " then ".join(entry["order"]), entry["ok"], entry["exit"], entry.get("reason", ""))
    for step in entry["steps"]:
        print("  STEP", step.get("framework"), step.get("version"), step.get("ok"), step.get("error", ""))
        for op in step.get("ops", []):
            print("    OP", op["op"], op["library"], op.get("ok"), op.get("skipped", ""), (op.get("error") or op.get("note") or "")[:200])
        for name, use in sorted(step.get("uses", {}).items()):
            if name.startswith(("libcudnn", "libnccl", "libcurand", "libcusparse", "libcudart", "libcublas.")):
                print("    USE", name, use.get("version"), use.get("path"), use.get("package"), len(use.get("copies") or []))
        print("    OTHER_STACK", step.get("other_stack"))
for name in ("doctor_before", "doctor_after"):
    try:
        d = json.load(open("%s/%s.json" % (r, name)))
    except Exception as e:
        print(name, "unreadable", e); continue
    print(name.upper(), d.get("summary"))
    for f in d.get("findings", []):
        if f["id"] in ("cudnn.version", "libs.stacks", "libs.nccl", "libs.curand", "libs.cusparse", "libs.cudnn") or f["status"] == "fail":
            print(" ", f["id"], f["status"], f["title"]); [print("     ", e) for e in f.get("evidence", [])[:8]]
PY
  new verify --prefix "$env_dir" --with torch >"$results/verify_with_torch.txt" 2>&1
  new doctor --prefix "$env_dir" >"$results/doctor_after.txt" 2>&1
  old doctor --prefix "$env_dir" >"$results/doctor_before.txt" 2>&1
fi
