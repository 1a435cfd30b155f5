"""Time and memory of fitting one temperature, against baselines in the same run.

Usage (from the repository root; ~3 minutes on 2 cores)::

    python benchmarks/bench_fit.py            # all shapes
    python benchmarks/bench_fit.py --quick    # small shapes only

For every shape it prints one row: the one-pass floor (a plain chunked numpy
float64 pass computing the mean NLL at T = 1), skts grid and continuous,
brute force over the 1001 candidates (timed on a row subsample and scaled),
scikit-learn's ``CalibratedClassifierCV(FrozenEstimator(...),
method="temperature")``, and netcal when it is installed. Times are medians of
``--repeat`` runs after one warm-up; ratios are against the floor measured in
the same run. Peak memory is measured separately with tracemalloc. The grid
choice is compared with full brute force wherever that is affordable.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
import tracemalloc
import warnings
from pathlib import Path

import numpy as np
import sklearn
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.calibration import CalibratedClassifierCV
from sklearn.frozen import FrozenEstimator

import skts
from skts._temperature import (
    default_temperatures,
    grid_search,
    nll_many,
    solve_continuous,
)

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
GRID = default_temperatures()


class Logits(ClassifierMixin, BaseEstimator):
    """A fitted 'classifier' whose decision function is its input (the logits)."""

    def fit(self, X, y):
        self.classes_ = np.arange(X.shape[1])
        return self

    def decision_function(self, X):
        X = np.asarray(X)
        # scikit-learn expects the 1-D score of the positive class for 2 classes.
        return X[:, 1] - X[:, 0] if X.shape[1] == 2 else X

    def predict(self, X):
        return np.argmax(X, axis=1)


def floor_pass(logits, y, block=1 << 16):
    """The floor: one chunked float64 numpy pass, mean NLL at T = 1."""
    n, k = logits.shape
    step = max(1, block // k)
    total = 0.0
    for s in range(0, n, step):
        z = logits[s : s + step].astype(np.float64)
        m = z.max(axis=1)
        lse = np.log(np.exp(z - m[:, None]).sum(axis=1))
        total += (m - z[np.arange(z.shape[0]), y[s : s + step]] + lse).sum()
    return total / n


def timed(fn, repeat):
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def peak_mib(fn):
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 2**20


def synthetic(n, k, seed=0):
    """Overconfident float32 logits: the label is the argmax 70% of the time."""
    rng = np.random.RandomState(seed)
    logits = rng.normal(scale=3.0, size=(n, k)).astype(np.float32)
    y = np.where(rng.rand(n) < 0.7, logits.argmax(1), rng.randint(0, k, n))
    return logits, y


def sklearn_temperature(logits, y):
    est = FrozenEstimator(Logits().fit(logits, y))
    cal = CalibratedClassifierCV(est, method="temperature").fit(logits, y)
    return 1.0 / float(cal.calibrated_classifiers_[0].calibrators[0].beta_)


def netcal_temperature(logits, y):  # pragma: no cover - optional baseline
    from netcal.scaling import TemperatureScaling

    z = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    ts = TemperatureScaling()
    ts.fit(p, y)
    return float(np.ravel(ts.temperature)[0])


def brute_force_choice(logits, y):
    losses = nll_many(logits, y, GRID)
    return float(GRID[losses == losses.min()].min())


def bench(name, logits, y, repeat, args):
    n, k = logits.shape
    row = {"shape": f"{name} {n}x{k} {logits.dtype}"}
    floor, _ = timed(lambda: floor_pass(logits, y), repeat)
    row["floor_s"] = floor
    t_grid, res = timed(
        lambda: grid_search(logits, y, GRID, n_jobs=args.n_jobs), repeat
    )
    row.update(grid_s=t_grid, grid_x=t_grid / floor, T=res.temperature, nll=res.loss)
    t_cont, cres = timed(
        lambda: solve_continuous(logits, y, 0.01, 100.0, n_jobs=args.n_jobs), repeat
    )
    row.update(cont_s=t_cont, cont_x=t_cont / floor, cont_passes=cres.n_passes)
    row["T_cont"] = cres.temperature
    # Brute force: all 1001 candidates on a subsample of rows, scaled to n.
    m = min(n, max(200, (1 << 21) // k))
    t_sub, _ = timed(lambda: nll_many(logits[:m], y[:m], GRID), 1)
    row["brute_x"] = t_sub * n / m / floor
    if n * k * GRID.size <= args.exact_limit:
        row["exact"] = brute_force_choice(logits, y) == res.temperature
    else:
        row["exact"] = None
    if not args.skip_sklearn:
        reps = max(1, min(repeat, 3))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t_sk, t_sk_val = timed(lambda: sklearn_temperature(logits, y), reps)
        row.update(sk_s=t_sk, sk_x=t_sk / floor, speedup=t_sk / t_grid, T_sk=t_sk_val)
        row["sk_mib"] = peak_mib(lambda: sklearn_temperature(logits, y))
    try:
        import netcal  # noqa: F401

        t_nc, _ = timed(lambda: netcal_temperature(logits, y), 1)
        row["netcal_x"] = t_nc / floor
    except ImportError:
        row["netcal_x"] = None
    row["grid_mib"] = peak_mib(lambda: grid_search(logits, y, GRID, n_jobs=args.n_jobs))
    row["cont_mib"] = peak_mib(
        lambda: solve_continuous(logits, y, 0.01, 100.0, n_jobs=args.n_jobs)
    )
    return row


def fmt(v, spec):
    return "n/a" if v is None else format(v, spec)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small shapes only")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--n-jobs", type=int, default=None)
    parser.add_argument("--skip-sklearn", action="store_true")
    parser.add_argument("--exact-limit", type=float, default=3e9)
    args = parser.parse_args()

    def real(fname):
        data = np.load(DATA / fname)
        return data["val_logits"], data["val_labels"]

    # Each case is built right before it runs, and freed after.
    cases = [
        (label, lambda fname=fname: real(fname))
        for fname, label in [
            ("densenet40_cifar10.npz", "CIFAR-10 val"),
            ("playground_cifar100.npz", "CIFAR-100 val"),
        ]
        if (DATA / fname).exists()
    ]
    shapes = [(10_000, 100)]
    if not args.quick:
        shapes += [(50_000, 1_000), (1_000_000, 10), (1_000_000, 2)]
    for n, k in shapes:
        cases.append(("synthetic", lambda n=n, k=k: synthetic(n, k)))

    print(
        f"skts {skts.__version__}, scikit-learn {sklearn.__version__}, numpy "
        f"{np.__version__}, Python {platform.python_version()}, "
        f"{platform.machine()}, n_jobs={args.n_jobs}"
    )
    header = (
        "| data | floor (s) | skts grid (s) | x floor | skts continuous x floor "
        "(passes) | brute force x floor | sklearn x floor | skts speed-up vs sklearn "
        "| netcal x floor | peak MiB skts grid / cont / sklearn | T grid | T sklearn "
        "| grid = brute force |"
    )
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for label, make in cases:
        logits, y = make()
        r = bench(label, logits, y, args.repeat, args)
        print(
            f"| {r['shape']} | {r['floor_s']:.3f} | {r['grid_s']:.3f} | "
            f"{r['grid_x']:.2f} | {r['cont_x']:.2f} ({r['cont_passes']}) | "
            f"{r['brute_x']:.0f} | {fmt(r.get('sk_x'), '.1f')} | "
            f"{fmt(r.get('speedup'), '.1f')} | {fmt(r['netcal_x'], '.1f')} | "
            f"{r['grid_mib']:.1f} / {r['cont_mib']:.1f} / "
            f"{fmt(r.get('sk_mib'), '.0f')} | "
            f"{r['T']:.4f} | {fmt(r.get('T_sk'), '.4f')} | "
            f"{'n/a' if r['exact'] is None else ('yes' if r['exact'] else 'NO')} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
