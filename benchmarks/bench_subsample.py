"""The warm start's subsample copy: ``Rows.subsample`` against NumPy's copy
of the same strided rows, with cold caches.

Usage (from the repository root, after ``pip install`` of skts; seconds)::

    python benchmarks/bench_subsample.py
    python benchmarks/bench_subsample.py --shapes 1000000x10 --rounds 21

At 32 classes or fewer the kernel does not read every k-th row in place, so
a fit copies the warm start's subsample (``subsample_rows``: at most 2**16
rows and about 2**20 values). Per shape (float32 logits), in ``--rounds``
rounds alternating which goes first, each after a 256 MiB write that evicts
the caches (as in a fit, where the input check has just streamed the whole
array): ``numpy``, ``np.array(logits[rows], order="C")``; ``skts``,
``Rows(logits, y).subsample(rows)``, which copies each row as one item.
Min and median milliseconds; both give the same values (checked).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from skts._numerics import Rows
from skts._numerics._steer import subsample_rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="1000000x2,1000000x10,1000000x32")
    parser.add_argument("--rounds", type=int, default=12)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}")
    print(
        "| shape | subsample rows | numpy ms (min / median) | skts ms (min / median) |"
    )
    print("|---|---|---|---|")
    rng = np.random.default_rng(0)
    evict = np.ones((256 << 20) // 8)
    for shape in args.shapes.split(","):
        n, k = (int(v) for v in shape.split("x"))
        z = rng.standard_normal((n, k)).astype(np.float32)
        y = rng.integers(0, k, n)
        rows = subsample_rows(n, k)
        data = Rows(z, y)
        methods = {
            "numpy": lambda z=z, rows=rows: np.array(z[rows], order="C"),
            "skts": lambda data=data, rows=rows: data.subsample(rows)[0],
        }
        assert np.array_equal(methods["numpy"](), methods["skts"]())
        times: dict[str, list[float]] = {name: [] for name in methods}
        for r in range(args.rounds):
            order = list(methods) if r % 2 else list(methods)[::-1]
            for name in order:
                evict += 1.0
                t = time.perf_counter()
                methods[name]()
                times[name].append((time.perf_counter() - t) * 1e3)
        cells = [
            f"{min(times[m]):.2f} / {statistics.median(times[m]):.2f}" for m in methods
        ]
        print(f"| {shape} | {len(range(n)[rows]):,} | {cells[0]} | {cells[1]} |")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
