"""One compiled pass on one thread and on every core, back to back and after
a pause: what a pass pays to wake its workers.

Usage (from the repository root, after ``pip install`` of skts; under a
minute)::

    python benchmarks/bench_threads.py            # 10,000 x 100 float32, N(0, 3^2)
    python benchmarks/bench_threads.py --rows 5000

The pass is the float32 derivative pass of the continuous solver (one beta);
each setting runs 200 times after a pause of 0, 2 or 10 ms (``time.sleep``;
idle OpenMP workers spin briefly, then sleep, and a pass then wakes them).
Prints the minimum and median in ms, as a markdown table.
"""

import argparse
import os
import statistics
import time

import numpy as np

from skts import _kernel


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--classes", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    n, k = args.rows, args.classes
    z = rng.normal(scale=3.0, size=(n, k)).astype(np.float32)
    y = rng.integers(0, k, n)
    cores = os.cpu_count()

    def one(threads):
        _kernel.derivatives(
            z, y, None, float(n), [0.35], [1 / 0.35], single=True, n_threads=threads
        )

    print(f"{n} x {k} float32, {cores} cores; ms, min / median of {args.repeat}")
    print("| pause | 1 thread | " + f"{cores} threads |")
    print("|---|---|---|")
    for pause in (0.0, 0.002, 0.010):
        cells = []
        for threads in (1, cores):
            times = []
            for _ in range(args.repeat):
                if pause:
                    time.sleep(pause)
                t = time.perf_counter()
                one(threads)
                times.append(time.perf_counter() - t)
            cells.append(f"{1e3 * min(times):.3f} / {1e3 * statistics.median(times):.3f}")
        print(f"| {1e3 * pause:.0f} ms | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
