"""Fit times of the rungs beside one temperature's: TemperatureScaler, a
temperature per group (by the predicted class; strength by cross-validation,
and fixed), VectorScaler, MatrixScaler, and calibration_ladder.

    python benchmarks/bench_ladder.py [--rounds 5] [--load N]

Interleaved rounds in one process, min and median per job, the machine's
load printed; on the real logits when ../shared/data (or $SKTS_DATA) has
them, and on a synthetic class-dependent model.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

import numpy as np

from skts import MatrixScaler, TemperatureScaler, VectorScaler, calibration_ladder


def _synthetic(n, k, seed=0):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * 3
    t = rng.uniform(0.4, 3.0, k)[z.argmax(axis=1)]
    p = np.exp(z / t[:, None] - (z / t[:, None]).max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    y = (p.cumsum(axis=1) < rng.random((n, 1))).sum(axis=1).clip(0, k - 1)
    return z.astype(np.float32), y


def _sets():
    data = Path(
        os.environ.get("SKTS_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data"
    )
    out = {}
    for name in ("densenet40_cifar10", "playground_cifar100"):
        if (data / f"{name}.npz").exists():
            d = np.load(data / f"{name}.npz", allow_pickle=False)
            out[name] = (d["val_logits"], d["val_labels"])
    out["synthetic 20000x10"] = _synthetic(20000, 10)
    return out


JOBS = {
    "one T": lambda z, y: TemperatureScaler().fit(z, y),
    "T per class (cv)": lambda z, y: TemperatureScaler().fit(z, y, groups="predicted"),
    "T per class (s=100)": lambda z, y: TemperatureScaler(group_shrinkage=100).fit(
        z, y, groups="predicted"
    ),
    "vector": lambda z, y: VectorScaler().fit(z, y),
    "matrix": lambda z, y: MatrixScaler().fit(z, y),
    "ladder (5 folds; 200 resamples)": lambda z, y: calibration_ladder(z, y),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--load", type=int, default=0, help="busy processes")
    parser.add_argument("--skip", default="", help="jobs to skip, separated by commas")
    args = parser.parse_args()
    from bench_metrics import busy_processes

    skip = set(filter(None, args.skip.split(",")))
    warnings.simplefilter("ignore")
    print(f"load average before: {os.getloadavg()}")
    with busy_processes(args.load):
        for name, (z, y) in _sets().items():
            times = {job: [] for job in JOBS if job not in skip}
            for _ in range(args.rounds):
                for job in times:  # interleaved
                    start = time.perf_counter()
                    JOBS[job](z, y)
                    times[job].append(time.perf_counter() - start)
            print(f"\n{name} ({z.shape[0]} x {z.shape[1]})")
            base = np.median(times["one T"])
            for job, ts in times.items():
                print(
                    f"  {job:<32} min {min(ts) * 1e3:9.1f} ms  median "
                    f"{np.median(ts) * 1e3:9.1f} ms  ({np.median(ts) / base:7.1f}x one T)"
                )
    print(f"\nload average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
