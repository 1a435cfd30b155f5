"""The estimators' input checks with cold caches: logits, labels, weights.

Usage (from the repository root, after ``pip install`` of skts; ms)::

    python benchmarks/bench_checks.py
    python benchmarks/bench_checks.py --rows 1000000 --classes 10 --rounds 31

In a fit the labels and weights are checked after the logits have streamed
through the caches, so each call here follows a 64 MiB write that evicts
them. Per check, min and median milliseconds over ``--rounds`` calls:
``check_logits`` (float32 logits), ``check_class_indices`` (int64 labels),
``check_weights`` (float64 weights), and the same label check on int32
labels. Compare two builds by running this in each, alternated, in fresh
processes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from skts._validation import check_class_indices, check_logits, check_weights


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=31)
    args = parser.parse_args()
    n, k = args.rows, args.classes
    rng = np.random.default_rng(0)
    z = rng.standard_normal((n, k)).astype(np.float32)
    y = rng.integers(0, k, n)
    y32 = y.astype(np.int32)
    w = rng.uniform(0.5, 1.5, n)
    evict = np.ones((64 << 20) // 8)
    checks = {
        "check_logits (float32)": lambda: check_logits(z),
        "check_class_indices (int64)": lambda: check_class_indices(y, (n, k)),
        "check_class_indices (int32)": lambda: check_class_indices(y32, (n, k)),
        "check_weights (float64)": lambda: check_weights(w, n),
    }
    print(f"load average {os.getloadavg()[0]:.2f}; {n:,} rows x {k} classes")
    print("| check | ms (min / median) |")
    print("|---|---|")
    for name, check in checks.items():
        times = []
        for _ in range(args.rounds):
            evict += 1.0
            t = time.perf_counter()
            check()
            times.append((time.perf_counter() - t) * 1e3)
        print(f"| {name} | {min(times):.2f} / {statistics.median(times):.2f} |")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
