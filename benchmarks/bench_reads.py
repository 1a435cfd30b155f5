"""How many reads of the data a fit takes, across data sets that are not the
benchmark's: where the warm start's sample and the first window may miss.

Usage (from the repository root, after ``pip install`` of skts; about two
minutes)::

    python benchmarks/bench_reads.py
    python benchmarks/bench_reads.py --shapes 50000x1000 --seeds 0,1,2

Per shape, seed and kind of logits (float32 normal logits of scale 1.5, 3 or
6, the label the row's argmax 50%, 70% or 90% of the time, else uniform: the
larger the scale, the more confident and the heavier the tails), the grid
search's reads of all the data (``n_passes``: the float32 Newton step, each
window, and the float64 values of a near-tie), the warm start's distance
from the minimiser in its own standard errors (the continuous solver's
``T``), and the fit's time (min of ``--rounds``, default threads). Reads are
deterministic: they reproduce exactly on a rerun; the times do not.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from skts._numerics import (
    Rows,
    _steer,
    default_temperatures,
    grid_search,
    solve_continuous,
)

KINDS = ((1.5, 0.5), (3.0, 0.7), (6.0, 0.9))


def logits(n: int, k: int, seed: int, scale: float, p: float):
    rng = np.random.default_rng(seed)
    z = rng.normal(scale=scale, size=(n, k)).astype(np.float32)
    y = np.where(rng.random(n) < p, z.argmax(1), rng.integers(0, k, n))
    return z, y


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default="20000x500,100000x300,50000x1000")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    grid = default_temperatures()
    lo, hi = 1.0 / grid[-1], 1.0 / grid[0]
    print(f"load average {os.getloadavg()[0]:.2f}; default 1001-candidate grid")
    print("| data | scale, argmax share | reads | warm start off (se) | fit ms (min) |")
    print("|---|---|---|---|---|")
    counts: dict[int, int] = {}
    for shape in args.shapes.split(","):
        n, k = (int(v) for v in shape.split("x"))
        for seed in (int(s) for s in args.seeds.split(",")):
            for scale, p in KINDS:
                z, y = logits(n, k, seed, scale, p)
                t = solve_continuous(z, y, grid[0], grid[-1]).temperature
                beta, se, _, _ = _steer.warm_start(Rows(z, y), lo, hi, 1.0)
                off = abs(beta - 1.0 / t) / se if se > 0 else 0.0
                times = []
                for _ in range(args.rounds):
                    start = time.perf_counter()
                    result = grid_search(z, y, grid)
                    times.append(time.perf_counter() - start)
                counts[result.n_passes] = counts.get(result.n_passes, 0) + 1
                print(
                    f"| {shape} seed {seed} | {scale:g}, {p:.0%} | "
                    f"{result.n_passes} | {off:.1f} | {min(times) * 1e3:.1f} |"
                )
    total = sum(counts.values())
    spread = ", ".join(f"{v} with {r}" for r, v in sorted(counts.items()))
    print(f"\n{total} fits: {spread} reads")


if __name__ == "__main__":
    main()
