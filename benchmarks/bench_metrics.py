"""Speed and memory of the smooth and debiased calibration errors against
the reference implementations, called as their users call them.

- smooth ECE, top-label: ``skts.metrics.smooth_calibration_error(y, p)``
  against ``relplot.smECE(*relplot.multiclass_logits_to_confidences(p, y,
  probs=True))``;
- debiased L2 error, top-label, 15 equal-mass bins:
  ``skts.metrics.debiased_calibration_error(y, p, strategy="quantile")``
  against ``calibration.get_top_calibration_error(p, y, p=2)``
  (uncertainty-calibration; its equal-mass edges are midpoints between
  sorted forecasts, skts's are quantiles: the same work);
- and skts alone where no peer has the estimator: the class-wise smooth ECE.

Times: interleaved rounds in one process (each job once per round, the
order rotated), min and median per job, the load average printed before and
after. Memory: each job once in a fresh process, the peak of what it
allocates (``tracemalloc``: numpy's buffers and Python objects) beyond the
inputs. ``--load N`` runs N busy processes during the timings (a machine in
use).

    python benchmarks/bench_metrics.py                # 10^6 x 10, 10^5 x 1000
    python benchmarks/bench_metrics.py --load 2
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import statistics
import subprocess
import sys
import time

import numpy as np


def data(n: int, k: int, seed: int = 0):
    """Probabilities of an overconfident model (labels drawn from
    softmax(z / 1.5), forecasts softmax(z)), float64, and the labels."""
    rng = np.random.default_rng(seed)
    z = 3.0 * rng.normal(size=(n, k))
    q = np.exp(z / 1.5 - (z / 1.5).max(axis=1, keepdims=True))
    q /= q.sum(axis=1, keepdims=True)
    u = rng.random(n)[:, None]
    y = np.minimum((q.cumsum(axis=1) < u).sum(axis=1), k - 1)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    return y, p


def jobs(k: int) -> dict:
    import calibration
    import relplot

    from skts.metrics import debiased_calibration_error, smooth_calibration_error

    def relplot_smece(y, p):
        f, c = relplot.multiclass_logits_to_confidences(p, y, probs=True)
        return relplot.smECE(f, c)

    out = {
        "skts smooth": lambda y, p: smooth_calibration_error(y, p),
        "relplot smECE": relplot_smece,
        "skts debiased L2": lambda y, p: debiased_calibration_error(
            y, p, strategy="quantile"
        ),
        "uncertainty-calibration L2": lambda y, p: (
            calibration.get_top_calibration_error(p, y, p=2)
        ),
    }
    if k >= 1000:
        out["skts smooth class-wise"] = lambda y, p: smooth_calibration_error(
            y, p, mode="classwise"
        )
    return out


def _busy(stop):
    while not stop.is_set():
        sum(i * i for i in range(10_000))


@contextlib.contextmanager
def busy_processes(n: int):
    """``n`` busy processes while the block runs (a machine in use)."""
    stop = multiprocessing.Event()
    busy = [multiprocessing.Process(target=_busy, args=(stop,)) for _ in range(n)]
    for proc in busy:
        proc.start()
    try:
        yield
    finally:
        stop.set()
        for proc in busy:
            proc.join()


def timings(n, k, n_rounds):
    y, p = data(n, k)
    todo = jobs(k)
    values = {name: fn(y, p) for name, fn in todo.items()}  # (and a warm-up)
    times = {name: [] for name in todo}
    names = list(todo)
    for r in range(n_rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            t = time.perf_counter()
            todo[name](y, p)
            times[name].append(time.perf_counter() - t)
    return values, times


def memory(n, k, name) -> float:
    """Peak bytes ``name`` allocates beyond its inputs, in a fresh process."""
    here = os.path.dirname(os.path.abspath(__file__))
    code = (
        f"import sys, tracemalloc; sys.path.insert(0, {here!r});"
        f"import bench_metrics as b; y, p = b.data({n}, {k});"
        f"fn = b.jobs({k})[{name!r}]; tracemalloc.start(); fn(y, p);"
        "print(tracemalloc.get_traced_memory()[1])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    return float(out.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--load", type=int, default=0, help="busy processes")
    parser.add_argument(
        "--shapes", default="1000000x10,100000x1000", help="comma-separated NxK"
    )
    args = parser.parse_args()
    shapes = [tuple(map(int, s.split("x"))) for s in args.shapes.split(",")]
    print(f"load average before: {os.getloadavg()}; cpus: {os.cpu_count()}")
    print(f"busy processes during the timings: {args.load}")
    with busy_processes(args.load):
        results = {shape: timings(*shape, args.rounds) for shape in shapes}
    print(f"load average after: {os.getloadavg()}")
    for (n, k), (values, times) in results.items():
        print(f"\n{n} x {k} (float64 probabilities), {args.rounds} rounds")
        print(f"{'job':<28}{'value':>10}{'min ms':>10}{'median ms':>11}{'peak MB':>10}")
        for name, ts in times.items():
            peak = memory(n, k, name) / 2**20
            print(
                f"{name:<28}{values[name]:>10.5f}{1e3 * min(ts):>10.1f}"
                f"{1e3 * statistics.median(ts):>11.1f}{peak:>10.1f}"
            )


if __name__ == "__main__":
    main()
