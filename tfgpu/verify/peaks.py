"""The ceiling on what ``verify --bench`` may report: a GPU's peak matmul throughput per dtype.

From ``tfgpu/data/gpu_peaks.toml``: the datasheet figure of the GPU by name, else FLOPs per clock
per SM for its compute capability times its SMs and maximum clock (which the bench reads from the
driver). A measured median above the peak cannot be true (the clock stopped before the work did,
or a result was reused): it is clamped to the peak and the row says so, with the source.
"""

from __future__ import annotations

import re

DTYPES = ("float32", "float16", "bfloat16")


def peak(name: str | None, compute_capability: str | None, sm_count: int | None, clock_mhz: float | None,
         dtype: str) -> tuple[float | None, str]:
    """(peak TFLOP/s, where it comes from) for ``dtype`` on this GPU; (None, why) when unknown."""
    from tfgpu.resolver.tables import load_toml

    table = load_toml("gpu_peaks.toml")
    for row in table["gpu"]:
        if name and re.search(row["match"], name):
            return float(row[dtype]), f"{name}: datasheet peak ({', '.join(row['source'])})"
    rates = {row["cc"]: row for row in table["per_sm"]}
    if compute_capability in rates and sm_count and clock_mhz:
        per_sm = rates[compute_capability][dtype]
        value = per_sm * sm_count * clock_mhz * 1e6 / 1e12
        return round(value, 1), (f"{name or 'GPU'}: {per_sm} FLOPs/clock/SM (compute capability "
                                 f"{compute_capability}) x {sm_count} SMs x {clock_mhz:.0f} MHz")
    return None, f"no peak is known for {name or 'this GPU'} (compute capability {compute_capability or '?'})"


def apply_peaks(bench: dict) -> None:
    """Give each GPU matmul row of ``bench`` its peak; clamp a median above it, with a warning."""
    matmul = bench.get("matmul") or {}
    device = matmul.get("device_info") or {}
    warnings = bench.setdefault("warnings", [])
    for row in matmul.get("device", []):
        if row.get("dtype") not in DTYPES or row.get("median_tflops") is None:
            continue
        ceiling, source = peak(device.get("name"), device.get("compute_capability"), device.get("sm_count"),
                               device.get("clock_mhz"), row["dtype"])
        row["peak_tflops"], row["peak_source"] = ceiling, source
        if ceiling is not None and row["median_tflops"] > ceiling:
            row["measured_tflops"] = row["median_tflops"]
            row["median_tflops"] = ceiling
            row["clamped"] = True
            warnings.append(f"{row['dtype']}: the measured {row['measured_tflops']} TFLOP/s is above the peak of "
                            f"{ceiling} ({source}); that cannot be a real figure, so {ceiling} is reported. The "
                            "timing went wrong (another process on the GPU? a clock that stopped early?): run "
                            "`verify --bench` again.")
    if "device_tflops_fp32" in matmul:  # the flat keys mirror the rows (older readers of --json)
        rows = {row["dtype"]: row for row in matmul.get("device", [])}
        for key, dtype in (("device_tflops_fp32", "float32"), ("device_tflops_fp16", "float16")):
            if dtype in rows and rows[dtype].get("median_tflops") is not None:
                matmul[key] = rows[dtype]["median_tflops"]
