"""How many reads of the data a fit takes, across data sets that are not the
benchmark's: where the warm start's sample and the first window may miss.

Usage (from the repository root, after ``pip install`` of skts; about two
minutes)::

    python benchmarks/bench_reads.py
    python benchmarks/bench_reads.py --shapes 50000x1000 --seeds 0,1,2
    python benchmarks/bench_reads.py --resample 90

Per shape, seed and kind of logits (float32 normal logits of scale 1.5, 3 or
6, the label the row's argmax 50%, 70% or 90% of the time, else uniform: the
larger the scale, the more confident and the heavier the tails), the grid
search's reads of all the data (``n_passes``: the float32 Newton step, each
window, and the float64 values of a near-tie), the warm start's distance
from the minimiser in its own standard errors (the continuous solver's
``T``), and the fit's time (min of ``--rounds``, default threads). Reads are
deterministic: they reproduce exactly on a rerun; the times do not.

``--resample N``: instead, bench_fit.py's 1,000,000 x 10 synthetic logits,
N times with their rows shuffled and their scale drawn from [0.7, 1.4] (the
warm start's sample and the minimiser's place on the grid change): the
reads each fit takes and what they are (``wK``: a float32 window of K
candidates, ``nll``: the float64 values of a near-tie, ``derivatives``: a
float32 Newton step, ``slopes``: a float64 read at the range's ends), and
the mean and median of the fits' times (each the best of ``--rounds``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

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


def resampled(n_sets: int, rounds: int) -> None:
    """The reads of ``n_sets`` resampled copies of bench_fit's 1M x 10."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import bench_fit

    z0, y0 = bench_fit.synthetic(1_000_000, 10)
    rng = np.random.default_rng(0)
    log: list[str] = []
    reads = {
        name: getattr(Rows, name) for name in ("window", "nll", "derivatives", "slopes")
    }

    def spy(name):
        def read(rows, what, *a, **kw):
            log.append(f"w{len(what)}" if name == "window" else name)
            return reads[name](rows, what, *a, **kw)

        return read

    kinds: dict[str, int] = {}
    times = []
    for name in reads:
        setattr(Rows, name, spy(name))
    try:
        for _ in range(n_sets):
            order = rng.permutation(z0.shape[0])
            z = np.ascontiguousarray(z0[order] * np.float32(rng.uniform(0.7, 1.4)))
            y = y0[order]
            best = np.inf
            for _ in range(rounds):
                log.clear()
                start = time.perf_counter()
                grid_search(z, y, bench_fit.GRID)
                best = min(best, time.perf_counter() - start)
            kinds[" ".join(log)] = kinds.get(" ".join(log), 0) + 1
            times.append(best)
    finally:
        for name, read in reads.items():
            setattr(Rows, name, read)
    print(f"{n_sets} resampled sets of 1000000x10, reads per fit:")
    for kind, count in sorted(kinds.items(), key=lambda kv: -kv[1]):
        print(f"  {kind}: {count}")
    mean, median = np.mean(times) * 1e3, np.median(times) * 1e3
    print(f"fit ms: mean {mean:.1f}, median {median:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default="20000x500,100000x300,50000x1000")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--resample", type=int, default=0)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}")
    if args.resample:
        resampled(args.resample, args.rounds)
        return
    grid = default_temperatures()
    lo, hi = 1.0 / grid[-1], 1.0 / grid[0]
    print("default 1001-candidate grid")
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
