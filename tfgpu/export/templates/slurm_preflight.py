"""Run in the job by the env's Python (not tfgpu library code): read the check_env.py report of
every node (one JSON line each, on stdin), say per node what it found, exit 1 when a node has no
working GPU -- unless TFGPU_ALLOW_CPU=1 (a CPU-only test run), which is said loudly."""

import json
import os
import sys

nodes, min_driver = int(sys.argv[1]), sys.argv[2]
allow_cpu = os.environ.get("TFGPU_ALLOW_CPU") == "1"
reports = []
for line in sys.stdin:
    try:
        reports.append(json.loads(line))
    except ValueError:
        continue
failed = 0
for number, report in enumerate(reports):
    gpus = ", ".join("%s %s" % (g.get("name"), "ok" if g.get("ok") else "FAILED") for g in report.get("gpus", []))
    if report.get("ok"):
        print("tfgpu-job: preflight %d: TensorFlow %s, GPUs: %s" % (number, report.get("tensorflow"), gpus))
    elif allow_cpu and report.get("tensorflow") and not report.get("gpus"):
        print("tfgpu-job: WARNING: preflight %d: no GPU (%s); TFGPU_ALLOW_CPU=1, so the workers run on the CPU"
              % (number, report.get("reason")))
    else:
        failed += 1
        print("tfgpu-job: preflight %d FAILED: %s [%s] (driver >= %s needed)"
              % (number, report.get("reason"), report.get("code"), min_driver))
if len(reports) != nodes:
    print("tfgpu-job: preflight: %d of %d nodes reported" % (len(reports), nodes))
    failed += 1
sys.exit(1 if failed else 0)
