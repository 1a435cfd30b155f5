"""Where a grid fit's time goes against the hardware bound: the float32
window read's fixed cost (centring the rows) and its cost per candidate,
against the kernel's exponential rate, and the fit's phases.

Usage (from the repository root, after ``pip install`` of skts; about a
minute)::

    python benchmarks/bench_window.py
    python benchmarks/bench_window.py --shapes 1000000x10 --rounds 9

Per shape (float32 logits, ``benchmarks/bench_fit.py``'s synthetic data and
grid), on one thread: ``Rows.window`` at 1, 2, 4 and 8 candidates and the
kernel's float32 exponential rate (the ``exp`` half of ``bench_fit.py``'s
bound), in the same interleaved rounds (min and median; this machine's speed
moves by 1.5x from minute to minute, so every cost is also given in units of
one float32 exponential per logit at the best rate of those rounds). The
least-squares line through the minima gives the read's fixed cost and its
cost per candidate. In the same rounds, the windows the fit reads with
derivatives: one and two candidates with their proven slopes (after a
Newton step, and the one-candidate reads that grow such a window), four
with ``F'`` and ``F''`` at the second (the window placed from the subsample
alone, before), one with ``F'`` and ``F''`` (``bench_reads.py
--one-read``'s study), and one with its slope, ``F''`` with its bound and
the rows' largest range (the first read placed from the subsample alone).
Then the fit's phases (the warm start and each read, timed around
``Rows``' methods) with skts's default threads.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_fit

from skts import _kernel
from skts._numerics import _grid, _passes

COUNTS = (1, 2, 4, 8)


def window_costs(z, y, rounds: int):
    """min and median seconds of ``Rows.window`` at each count, one thread,
    and the best float32 exponential rate on one core in the same rounds."""
    rows = _passes.Rows(z, y, None, 1)
    # Candidates around the minimiser, one grid step apart.
    t0 = _grid.grid_search(z, y, bench_fit.GRID).temperature
    j = int(np.searchsorted(bench_fit.GRID, t0))
    cand = bench_fit.GRID[max(j - 4, 0) : max(j - 4, 0) + max(COUNTS)]
    reads = {m: functools.partial(rows.window, cand[:m]) for m in COUNTS}
    for m in (1, 2):
        reads[f"{m} with slopes"] = functools.partial(
            rows.window, cand[:m], slopes=True
        )
    reads["1 with F', F''"] = functools.partial(rows.window, cand[:1], deriv_at=0)
    reads["1 with slopes, span"] = functools.partial(
        rows.window, cand[:1], slopes=True, deriv_at=0, span=True
    )
    reads["4 with F', F''"] = functools.partial(rows.window, cand[:4], deriv_at=1)
    times = {m: [] for m in reads}
    names = list(reads)
    rates = []
    rng = np.random.default_rng(0)
    rows.window(cand[:1])  # (warm-up)
    for _ in range(rounds):
        for i in rng.permutation(len(names) + 1):
            if i == len(names):
                rates.append(_kernel.exp32_rate(1, 0.02))
                continue
            m = names[i]
            t = time.perf_counter()
            reads[m]()
            times[m].append(time.perf_counter() - t)
    return {m: (min(v), float(np.median(v))) for m, v in times.items()}, max(rates)


def phases(z, y, rounds: int):
    """Median seconds of the warm start and of each read of a grid fit."""
    log: list[tuple[str, float]] = []

    def timed(name, f):
        @functools.wraps(f)
        def g(*args, **kwargs):
            t = time.perf_counter()
            out = f(*args, **kwargs)
            log.append((name, time.perf_counter() - t))
            return out

        return g

    saved = {
        n: getattr(_passes.Rows, n) for n in ("window", "derivatives", "slopes", "nll")
    }
    warm = _grid.warm_start
    try:
        for n, f in saved.items():
            setattr(_passes.Rows, n, timed(n, f))
        _grid.warm_start = timed("warm start", warm)
        runs = []
        for _ in range(rounds):
            log.clear()
            t = time.perf_counter()
            _grid.grid_search(z, y, bench_fit.GRID)
            runs.append([*log, ("fit", time.perf_counter() - t)])
    finally:
        for n, f in saved.items():
            setattr(_passes.Rows, n, f)
        _grid.warm_start = warm
    names = [n for n, _ in runs[0]]
    return [(n, float(np.median([r[i][1] for r in runs]))) for i, n in enumerate(names)]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="1000000x10,50000x1000")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    print(
        f"load average {os.getloadavg()[0]:.2f}; command: python "
        f"benchmarks/bench_window.py {' '.join(argv or sys.argv[1:])}"
    )
    for shape in args.shapes.split(","):
        n, k = (int(v) for v in shape.split("x"))
        z, y = bench_fit.synthetic(n, k)
        costs, rate = window_costs(z, y, args.rounds)
        m = np.array(COUNTS, dtype=float)
        per, fixed = np.polyfit(m, [costs[c][0] for c in COUNTS], 1)
        exp_ms = n * k / rate * 1e3
        print(f"\n{shape}, one thread: Rows.window ms, min (median)")
        for line in (COUNTS, [c for c in costs if c not in COUNTS]):
            print(
                "  "
                + ", ".join(
                    f"{c}: {costs[c][0] * 1e3:.1f} ({costs[c][1] * 1e3:.1f})"
                    for c in line
                )
            )
        print(
            f"  fixed {fixed * 1e3:.1f} ms ({fixed * 1e3 / exp_ms:.1f} exp passes), "
            f"per candidate {per * 1e3:.1f} ms ({per * 1e3 / exp_ms:.1f} exp passes); "
            f"one exp per logit: {exp_ms:.1f} ms ({rate / 1e9:.2f} G/s)"
        )
        print(
            "  a grid fit, default threads, median ms: "
            + ", ".join(
                f"{name} {t * 1e3:.1f}" for name, t in phases(z, y, args.rounds)
            )
        )


if __name__ == "__main__":
    main()
