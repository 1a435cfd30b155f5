"""Does reading the machine's load earn its place in the thread policy?

skts's ``n_jobs=None`` uses every CPU the process may use from 2**18 logits
on; for passes of under 2**20 logits it first reads ``/proc/loadavg`` and
uses only the CPUs other processes leave idle (``others_running`` in
``skts._numerics._threads``). This compares that policy with the simpler one
(every CPU, load not read) on the shapes where they differ, idle and with
``--load`` CPU-bound processes running, in interleaved rounds (the order of
the two policies alternates), in one process.

Usage (from the repository root, after ``pip install`` of skts; a few
minutes)::

    python benchmarks/bench_thread_policy.py               # idle, then 2 hogs
    python benchmarks/bench_thread_policy.py --loads 0,1,2,4 --rounds 15

Prints, per shape, solver and load, the min and median fit time of each
policy in ms and the median of the per-round ratios (simple / load-aware;
above 1: reading the load is faster).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np

from skts._numerics import _threads, default_temperatures, grid_search, solve_continuous

SHAPES = [(5_000, 100), (10_000, 100), (2_700, 100), (30_000, 20)]


def _problem(n: int, k: int):
    rng = np.random.default_rng(n + k)
    z = (rng.normal(size=(n, k)) * 3.0).astype(np.float32)
    y = np.where(rng.random(n) < 0.7, z.argmax(axis=1), rng.integers(0, k, n))
    return z, y


def _time(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _run(z, y, solver: str, simple: bool) -> float:
    saved = _threads.others_running
    if simple:
        _threads.others_running = lambda: 0  # every CPU, load not read
    try:
        if solver == "grid":
            return _time(lambda: grid_search(z, y, default_temperatures()))
        return _time(lambda: solve_continuous(z, y, 0.01, 100.0))
    finally:
        _threads.others_running = saved


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loads", default="0,2", help="CPU-bound processes meanwhile")
    parser.add_argument("--rounds", type=int, default=21)
    args = parser.parse_args(argv)
    print(
        f"{os.cpu_count()} CPUs, skts uses {_threads.cpu_count()}; "
        f"load average before: {os.getloadavg()[0]:.2f}"
    )
    print("| shape | solver | load | load-aware ms (min / median) | "
          "simple ms (min / median) | simple / load-aware (median) |")
    print("|---|---|---|---|---|---|")
    for load in (int(v) for v in args.loads.split(",")):
        hogs = [
            subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(load)
        ]
        try:
            time.sleep(0.5 if load else 0.0)
            for n, k in SHAPES:
                z, y = _problem(n, k)
                for solver in ("grid", "continuous"):
                    _run(z, y, solver, False)  # warm-up
                    _run(z, y, solver, True)
                    aware, simple = [], []
                    for r in range(args.rounds):
                        order = (False, True) if r % 2 == 0 else (True, False)
                        for flag in order:
                            (simple if flag else aware).append(
                                _run(z, y, solver, flag)
                            )
                    ratio = statistics.median(
                        s / a for s, a in zip(simple, aware, strict=True)
                    )
                    print(
                        f"| {n:,} x {k} | {solver} | {load} | "
                        f"{min(aware) * 1e3:.2f} / {statistics.median(aware) * 1e3:.2f} | "
                        f"{min(simple) * 1e3:.2f} / {statistics.median(simple) * 1e3:.2f} | "
                        f"{ratio:.2f} |",
                        flush=True,
                    )
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait()
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
