#!/usr/bin/env bash
# GPU proof: a TF env the tool built maps no CUDA file from outside; a leak made on purpose is
# found by doctor and closed by repair (docs/maintainers/gpu-proofs.md, 2026-12-02).
# Usage, on the GPU machine, from the repository root:
#   scripts/gpu/closed_env_proof.sh ENV TF PYTHON WHEELS RESULTS
# e.g. scripts/gpu/closed_env_proof.sh /tmp/tf213 2.13 3.11 /tmp/wheels /tmp/res
# (tfgpu-install on PATH or `python3 -m tfgpu` importable; WHEELS holds the release's wheels).
set -u
env_dir=$1 tf=$2 python=$3 wheels=$4 results=$5
mkdir -p "$results"
tool() { python3 -m tfgpu "$@"; }
findings() {  # the libs.* findings and every failure of one doctor run
  tool doctor --prefix "$env_dir" --json >"$results/$1.json"
  python3 - "$results/$1.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
print("summary", doc["summary"])
for f in doc["findings"]:
    if f["id"] in ("libs.closed", "libs.dlopen") or f["status"] == "fail":
        print(f["id"], f["status"], f["title"], f["evidence"][:3])
PY
}
maps() { "$env_dir/bin/python" scripts/gpu/cuda_maps.py "$env_dir" >"$results/maps_$1.json" 2>"$results/maps_$1.err"
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("outside_env", d["outside_env"], "inside", len(d["inside_env"]))' "$results/maps_$1.json"; }
links() { find "$env_dir" -name 'libnvrtc.so' -type l -printf '%p -> %l\n'; }

echo "== the system's NVRTC the loader would find"; ldconfig -p | grep -i 'libnvrtc.so '
echo "== create"; tool create --tf "$tf" --mode pip --python "$python" --offline --find-links "$wheels" \
  --prefix "$env_dir" --no-verify | tail -8
echo "== verify"; tool verify --prefix "$env_dir" --json >"$results/verify.json"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("ok", d["ok"], "outside_env", d["outside_env"])' "$results/verify.json"
echo "== closed"; maps closed; findings doctor_closed; links
echo "== leak made on purpose: the unversioned names removed"; find "$env_dir" -name 'libnvrtc.so' -type l -delete
findings doctor_leak; maps leak
echo "== repair"; tool repair --prefix "$env_dir" --yes --no-verify | tail -8; links
findings doctor_repaired; maps repaired
