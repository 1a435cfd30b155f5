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

``--one-read``: also a study of a search skts does not have. One read at a
point ``beta0`` can give ``F``, ``F'`` and ``F''`` there and, per row, the
range ``R`` of the logits and their variance ``V`` under the row's softmax.
A row's third central moment is at most ``R V``, and so ``V`` grows by at
most ``exp(R |beta - beta0|)``: the third derivative of ``F`` between
``beta0`` and ``beta`` is at most ``mean(R V exp(R |beta - beta0|))``, and
Taylor's theorem puts each candidate's exact loss in an interval. Where the
best candidate's interval lies strictly below both its neighbours',
convexity settles the rule with no other read. Two columns say whether that
would settle it at the warm start's point (one read in all) and at the
point of one Newton step from there (two reads). In float64 NumPy: the
float32 reads' own error bounds are not included. Each interval is checked
against the float64 losses, and a settled answer against their argmin.
A third column says whether the two candidates either side of the warm
start's answer hold the minimiser (the continuous solver's ``T``): how
often a first window of those two, with their slopes, would settle the rule
alone (a search tried and not kept: see docs/performance.md). With
``--resample``, the same three counts and the warm start's standard error
in grid spacings. ``--sample-rows N``: the study's
warm start from a subsample of at most ``N`` rows (skts's holds up to
65,536), for the trade between its cost and the reads that follow.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_fit

KINDS = ((1.5, 0.5), (3.0, 0.7), (6.0, 0.9))


def _rows(z, y, chunk: int = 1 << 15):
    """Each chunk of rows in float64, with its row maxima and the labels'
    logits."""
    for s in range(0, z.shape[0], chunk):
        zz = np.asarray(z[s : s + chunk], dtype=np.float64)
        yield zz, zz.max(axis=1), zz[np.arange(zz.shape[0]), y[s : s + chunk]]


def taylor(z, y, beta: float):
    """``F``, ``F'`` and ``F''`` at ``beta`` (float64), and each row's range
    and variance there."""
    f = f1 = f2 = 0.0
    ranges, variances = [], []
    for zz, top, zy in _rows(z, y):
        e = np.exp(beta * (zz - top[:, None]))
        total = e.sum(axis=1)
        p = e / total[:, None]
        mean = (p * zz).sum(axis=1)
        var = (p * (zz - mean[:, None]) ** 2).sum(axis=1)
        f += float((np.log(total) + beta * (top - zy)).sum())
        f1 += float((mean - zy).sum())
        f2 += float(var.sum())
        ranges.append(top - zz.min(axis=1))
        variances.append(var)
    n = z.shape[0]
    return f / n, f1 / n, f2 / n, np.concatenate(ranges), np.concatenate(variances)


def one_read(z, y, beta0: float, betas: np.ndarray) -> tuple[bool, float]:
    """Whether one read at ``beta0`` settles the rule over ``betas``
    (descending), and the point of the Newton step that read gives."""
    f, f1, f2, r, v = taylor(z, y, beta0)
    newton = beta0 - f1 / f2 if f2 > 0 else beta0
    i = int(np.clip(np.searchsorted(-betas, -newton), 2, len(betas) - 3))
    near = np.arange(i - 2, i + 3)
    d = betas[near] - beta0
    center = f + f1 * d + f2 * d * d / 2
    third = np.array([np.mean(r * v * np.exp(r * abs(x))) for x in d])
    radius = third * np.abs(d) ** 3 / 6
    exact = bench_fit.independent_losses(z, y, 1.0 / betas[near])
    if np.any(np.abs(exact - center) > radius * (1 + 1e-9) + 1e-13):
        raise AssertionError("a Taylor interval misses the float64 loss")
    best = int(np.argmin(center + radius))
    low = center - radius
    settled = 0 < best < len(near) - 1 and bool(
        min(low[best - 1], low[best + 1]) > center[best] + radius[best]
    )
    if settled and not exact[best] < min(exact[best - 1], exact[best + 1]):
        raise AssertionError("a settled answer is not the float64 argmin")
    return settled, newton


def one_read_columns(
    z, y, lo: float, hi: float, sample_rows: int = 0, t: float | None = None
) -> tuple[list[bool], float, float]:
    """Whether one read settles the rule at the warm start's point, and at
    the point of one Newton step from there, and whether the two candidates
    either side of the warm start's answer hold the minimiser; the warm
    start's seconds and its standard error in grid spacings. ``sample_rows``:
    its subsample holds at most that many rows (0: skts's own). ``t``: the
    continuous solver's answer, if the caller has it."""
    grid = default_temperatures()
    betas = 1.0 / grid
    own = _steer.subsample_rows
    if sample_rows:

        def fewer(n_samples: int, n_classes: int) -> slice:
            rows = own(n_samples, n_classes)
            m = min(len(range(n_samples)[rows]), sample_rows)
            step = max(1, n_samples // m)
            return slice(0, step * m, step)

        _steer.subsample_rows = fewer
    try:
        start = time.perf_counter()
        beta0, se, _, _ = _steer.warm_start(Rows(z, y), lo, hi, 1.0)
        seconds = time.perf_counter() - start
    finally:
        _steer.subsample_rows = own
    at_start, newton = one_read(z, y, beta0, betas)
    b = int(np.clip(np.searchsorted(grid, 1.0 / beta0), 1, len(grid) - 1))
    if t is None:
        t = solve_continuous(z, y, grid[0], grid[-1]).temperature
    holds = bool(grid[b - 1] < t <= grid[b])
    spacings = se / beta0 / np.log(grid[b] / grid[b - 1])
    return [at_start, one_read(z, y, newton, betas)[0], holds], seconds, spacings


def one_read_count(settled: list[int], total: int) -> str:
    return (
        f"one read settles the rule: at the warm start's point in {settled[0]} "
        f"of {total}, after a Newton read in {settled[1]}; the two candidates "
        f"either side of the warm start's answer hold the minimiser in "
        f"{settled[2]}"
    )


def logits(n: int, k: int, seed: int, scale: float, p: float):
    rng = np.random.default_rng(seed)
    z = rng.normal(scale=scale, size=(n, k)).astype(np.float32)
    y = np.where(rng.random(n) < p, z.argmax(1), rng.integers(0, k, n))
    return z, y


def resampled(n_sets: int, rounds: int, study: bool, sample_rows: int) -> None:
    """The reads of ``n_sets`` resampled copies of bench_fit's 1M x 10."""
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
    settled = [0, 0, 0]
    warm, spread = [], []
    lo, hi = 1.0 / bench_fit.GRID[-1], 1.0 / bench_fit.GRID[0]
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
            if study:
                found, seconds, spacings = one_read_columns(z, y, lo, hi, sample_rows)
                settled = [a + b for a, b in zip(settled, found, strict=True)]
                warm.append(seconds)
                spread.append(spacings)
    finally:
        for name, read in reads.items():
            setattr(Rows, name, read)
    print(f"{n_sets} resampled sets of 1000000x10, reads per fit:")
    for kind, count in sorted(kinds.items(), key=lambda kv: -kv[1]):
        print(f"  {kind}: {count}")
    mean, median = np.mean(times) * 1e3, np.median(times) * 1e3
    print(f"fit ms: mean {mean:.1f}, median {median:.1f}")
    if study:
        print(one_read_count(settled, n_sets))
        print(
            f"the study's warm start ms (once a set): min {min(warm) * 1e3:.2f}, "
            f"median {np.median(warm) * 1e3:.2f}; its standard error in grid "
            f"spacings: median {np.median(spread):.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default="20000x500,100000x300,50000x1000")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--resample", type=int, default=0)
    parser.add_argument("--one-read", action="store_true")
    parser.add_argument("--sample-rows", type=int, default=0)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}")
    if args.resample:
        resampled(args.resample, args.rounds, args.one_read, args.sample_rows)
        return
    grid = default_temperatures()
    lo, hi = 1.0 / grid[-1], 1.0 / grid[0]
    print("default 1001-candidate grid")
    head = "| data | scale, argmax share | reads | warm start off (se) | fit ms (min) |"
    study = (
        " one read settles: at the warm start | after a Newton read |"
        " two either side hold it |"
    )
    print(head + (study if args.one_read else ""))
    print("|---|---|---|---|---|" + ("---|---|---|" if args.one_read else ""))
    counts: dict[int, int] = {}
    settled = [0, 0, 0]
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
                extra = ""
                if args.one_read:
                    found, _, _ = one_read_columns(z, y, lo, hi, args.sample_rows, t)
                    settled = [a + b for a, b in zip(settled, found, strict=True)]
                    extra = "".join(" yes |" if yes else " no |" for yes in found)
                print(
                    f"| {shape} seed {seed} | {scale:g}, {p:.0%} | "
                    f"{result.n_passes} | {off:.1f} | {min(times) * 1e3:.1f} |{extra}"
                )
    total = sum(counts.values())
    spread = ", ".join(f"{v} with {r}" for r, v in sorted(counts.items()))
    print(f"\n{total} fits: {spread} reads")
    if args.one_read:
        print(one_read_count(settled, total))


if __name__ == "__main__":
    main()
