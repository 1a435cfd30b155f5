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

Then the whole warm start (``warm_start``: the copy and every read of the
sample), unweighted and with sample weights, in the same alternation
(``Rows`` holds the sample's every k-th label and weight contiguous: read
strided, they were copied again by each of the sample's reads).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from skts._numerics import Rows
from skts._numerics._steer import subsample_rows, warm_start


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
    starts: dict[str, list[str]] = {}
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
        cells = _time_alternated(methods, args.rounds, evict)
        print(f"| {shape} | {len(range(n)[rows]):,} | {cells[0]} | {cells[1]} |")
        weighted = Rows(z, y, rng.uniform(0.5, 1.5, n))
        starts[shape] = _time_alternated(
            {
                "unweighted": lambda d=data: warm_start(d, 0.01, 100.0, 1.0),
                "weighted": lambda d=weighted: warm_start(d, 0.01, 100.0, 1.0),
            },
            args.rounds,
            evict,
        )
    print()
    print("| shape | warm start ms (min / median) | weighted (min / median) |")
    print("|---|---|---|")
    for shape, cells in starts.items():
        print(f"| {shape} | {cells[0]} | {cells[1]} |")
    print(f"load average {os.getloadavg()[0]:.2f}")


def _time_alternated(methods, rounds: int, evict) -> list[str]:
    """Min and median milliseconds of each method, alternating which goes
    first, each after the caches are evicted."""
    times: dict[str, list[float]] = {name: [] for name in methods}
    for r in range(rounds):
        for name in list(methods) if r % 2 else list(methods)[::-1]:
            evict += 1.0
            t = time.perf_counter()
            methods[name]()
            times[name].append((time.perf_counter() - t) * 1e3)
    return [f"{min(v):.2f} / {statistics.median(v):.2f}" for v in times.values()]


if __name__ == "__main__":
    main()
