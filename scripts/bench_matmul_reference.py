#!/usr/bin/env python3
"""A long, synced reference timing of TensorFlow matmuls, to hold `verify --bench` against.

    ENV/bin/python scripts/bench_matmul_reference.py [--n 8192] [--rounds 5] [--calls 400] [--warmup 50]

Run with the env's own Python on a GPU machine. Per dtype (fp32, fp16, bf16): --warmup calls, each
waited for; then --rounds rounds of --calls matmuls, each round ended by `.numpy()` of the whole
last product (the plain way to wait for a GPU in TensorFlow), minus the time that copy alone takes
(measured on an idle GPU). Rounds are long on purpose: with 50 calls a round the copy of a
134-268 MB product is a tenth of the round on an H200 and varies from run to run (+-10% seen);
with 400 it is ~1%. Prints one JSON line: median TFLOP/s per dtype and each round's rate.
Deliberately not the bench's own method (warm-up by time, one-element copies): an independent
long measurement of the same quantity. Compare: `tfgpu-install verify --prefix ENV --bench --json`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--n", type=int, default=8192)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--warmup", type=int, default=50)
    args = parser.parse_args()

    import tensorflow as tf

    n, out = (
        args.n,
        {
            "method": f"{args.warmup} warm-up calls, {args.rounds} rounds x {args.calls} calls, "
            f".numpy() of the last product minus its copy time",
            "dtypes": {},
        },
    )
    for name, dtype in (("fp32", tf.float32), ("fp16", tf.float16), ("bf16", tf.bfloat16)):
        with tf.device("/GPU:0"):
            a = tf.cast(tf.random.normal((n, n)), dtype)
            b = tf.cast(tf.random.normal((n, n)), dtype)
            for _ in range(args.warmup):
                product = tf.matmul(a, b)
                product.numpy()
            copies = []
            for _ in range(3):
                started = time.perf_counter()
                product.numpy()
                copies.append(time.perf_counter() - started)
            copy = min(copies)
            rates = []
            for _ in range(args.rounds):
                started = time.perf_counter()
                for _ in range(args.calls):
                    product = tf.matmul(a, b)
                product.numpy()
                seconds = time.perf_counter() - started - copy
                rates.append(2 * n**3 * args.calls / seconds / 1e12)
        out["dtypes"][name] = {
            "median": round(statistics.median(rates), 1),
            "rounds": [round(r, 1) for r in rates],
            "copy_seconds": round(copy, 4),
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
