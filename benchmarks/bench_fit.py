"""Time and memory of fitting one temperature, against floors, the hardware
bound and the peers, like for like.

Usage (from the repository root, after ``pip install`` of skts; about 10
minutes on 2 cores with every peer installed)::

    python benchmarks/bench_fit.py                 # all shapes, 7 interleaved rounds
    python benchmarks/bench_fit.py --quick         # small shapes only
    python benchmarks/bench_fit.py --load 2        # with 2 CPU-bound processes running
    python benchmarks/bench_fit.py --memory        # peak memory, fresh processes

Run it on an idle machine, nothing else running (the "threads" column says
how many threads skts's ``n_jobs=None`` uses: every core from 2**18 logits).

Per shape (float32 logits, the default 1001-candidate grid, ``n_jobs=None``):

- floors, timed in the same rounds: one numpy **float32** pass (the NLL at
  ``T = 1``, chunked; the targets of issue 12 are ratios to it) and one numpy
  float64 pass, single-threaded and on as many threads as skts uses (numpy
  releases the GIL; both ratios are shown);
- the **hardware bound** of one pass: reading the logits once at the measured
  read bandwidth, or one float32 exponential per logit at the kernel's
  measured rate, whichever is larger, on all cores;
- skts's grid and continuous solvers and ``predict_proba`` (against a numpy
  float64 softmax, float64 output);
- the peers as their users call them: scikit-learn's
  ``CalibratedClassifierCV(FrozenEstimator(...), method="temperature")`` on
  the logits; netcal's ``TemperatureScaling`` on float64 probabilities (on
  float32 it returns ``T = 1`` without fitting) whose attribute is ``1/T``;
  probmetrics' ``get_calibrator("temp-scaling")`` on probabilities
  (``invtemp_ = 1/T``); and the paper's recipe (Guo et al. 2017's
  reference code: LBFGS, ``lr=0.01``, ``max_iter=50`` on a PyTorch
  temperature parameter, CPU tensors, the same threads);
- exactness, checked by an implementation independent of skts's evaluator:
  scipy's float64 ``logsumexp`` at skts's choice and its two neighbours on
  each side (convexity makes a local minimum over the sorted grid the global
  one); "tie" where two losses agree to 1e-12 (skts then decided in 50-digit
  arithmetic).

Times are the median (and minimum) of ``--rounds`` rounds after a warm-up;
within a round every method runs once, in the same order, so that a busy
moment of the shared machine hits all of them. The peers run afterwards, in
``--peer-rounds`` rounds of their own (they are 10 to 1000 times slower, and
PyTorch's threads keep spinning after a call).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import subprocess
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import scipy
import sklearn
from scipy.special import logsumexp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.calibration import CalibratedClassifierCV
from sklearn.frozen import FrozenEstimator

try:
    from skts._numerics import (
        default_temperatures,
        grid_search,
        kernel_threads,
        solve_continuous,
    )
except ImportError:  # a checkout before skts/_numerics/ (to compare commits)
    from skts._temperature import (
        _kernel_threads as kernel_threads,
    )
    from skts._temperature import (
        default_temperatures,
        grid_search,
        solve_continuous,
    )

import skts
from skts import TemperatureScaler, _kernel

DATA = Path(
    os.environ.get("SKTS_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
)
GRID = default_temperatures()
BLOCK = 1 << 16
SHAPES = [
    (5_000, 10),
    (10_000, 100),
    (50_000, 1_000),
    (5_000, 50_000),
    (1_000_000, 10),
    (1_000_000, 2),
]
QUICK = [(5_000, 10), (10_000, 100)]
REAL = {"cifar10": "densenet40_cifar10.npz", "cifar100": "playground_cifar100.npz"}


# --- data -------------------------------------------------------------------


def synthetic(n: int, k: int, seed: int = 0):
    """Overconfident float32 logits (the label is the argmax 70% of the
    time), generated in chunks: no float64 array of the full size exists."""
    rng = np.random.default_rng(seed)
    logits = np.empty((n, k), dtype=np.float32)
    step = max(1, (1 << 22) // k)
    for s in range(0, n, step):
        logits[s : s + step] = rng.normal(scale=3.0, size=(min(step, n - s), k))
    top = np.empty(n, dtype=np.int64)
    for s in range(0, n, step):
        top[s : s + step] = logits[s : s + step].argmax(axis=1)
    y = np.where(rng.random(n) < 0.7, top, rng.integers(0, k, n))
    return logits, y


def load(name: str):
    if name in REAL:
        data = np.load(DATA / REAL[name])
        return np.ascontiguousarray(data["val_logits"], dtype=np.float32), data[
            "val_labels"
        ].astype(np.int64)
    n, k = (int(v) for v in name.split("x"))
    return synthetic(n, k)


# --- floors and the hardware bound -------------------------------------------


def _f32_block(z, y):
    m = z.max(axis=1)
    e = np.exp(z - m[:, None])
    rows = m - z[np.arange(z.shape[0]), y] + np.log(e.sum(axis=1))
    return float(rows.sum(dtype=np.float64))


def _f64_block(z, y):
    z = z.astype(np.float64)
    m = z.max(axis=1)
    e = np.exp(z - m[:, None])
    return float((m - z[np.arange(z.shape[0]), y] + np.log(e.sum(axis=1))).sum())


def floor_pass(logits, y, block_fn, threads=1):
    """One chunked numpy pass computing the mean NLL at T = 1."""
    n, k = logits.shape
    step = max(1, BLOCK // k)
    starts = range(0, n, step)
    if threads == 1:
        return sum(block_fn(logits[s : s + step], y[s : s + step]) for s in starts) / n
    with ThreadPoolExecutor(threads) as pool:
        parts = pool.map(
            lambda s: block_fn(logits[s : s + step], y[s : s + step]), starts
        )
        return sum(parts) / n


def read_bandwidth(threads: int) -> float:
    """Bytes per second of a vectorised read (numpy's sum of float32), on
    ``threads`` threads, each on its own 256 MiB."""
    arrays = [np.ones(1 << 26, dtype=np.float32) for _ in range(threads)]
    for a in arrays:
        a.sum()

    def one(a):
        return a.sum()

    best = np.inf
    with ThreadPoolExecutor(threads) as pool:
        for _ in range(5):
            t = time.perf_counter()
            list(pool.map(one, arrays))
            best = min(best, time.perf_counter() - t)
    return threads * arrays[0].nbytes / best


# --- the peers ------------------------------------------------------------------


class Logits(ClassifierMixin, BaseEstimator):
    """A fitted 'classifier' whose decision function is its input."""

    def fit(self, X, y):
        self.classes_ = np.arange(X.shape[1])
        return self

    def decision_function(self, X):
        X = np.asarray(X)
        return X[:, 1] - X[:, 0] if X.shape[1] == 2 else X

    def predict(self, X):
        return np.argmax(X, axis=1)


def probabilities(logits, dtype):
    z = logits.astype(np.float64)
    z -= z.max(axis=1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=1, keepdims=True)
    return z.astype(dtype, copy=False)


def fit_sklearn(logits, y):
    est = FrozenEstimator(Logits().fit(logits, y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = CalibratedClassifierCV(est, method="temperature").fit(logits, y)
    t = 1.0 / float(cal.calibrated_classifiers_[0].calibrators[0].beta_)
    # scikit-learn reads a binary decision function d as logits (-d, d): its T
    # is twice ours (whose T = 1 reproduces sigmoid(d)).
    return t / 2 if logits.shape[1] == 2 else t


def fit_netcal(logits, y):
    from netcal.scaling import TemperatureScaling

    ts = TemperatureScaling()
    ts.fit(probabilities(logits, np.float64), y)
    return 1.0 / float(np.ravel(ts.temperature)[0])


def fit_probmetrics(logits, y):
    from probmetrics.calibrators import get_calibrator

    cal = get_calibrator("temp-scaling")
    cal.fit(probabilities(logits, np.float32), y)
    return 1.0 / float(cal.invtemp_)


def fit_paper(logits, y):
    """Guo et al.'s recipe: NLL of logits / T, LBFGS(lr=0.01, max_iter=50)."""
    import torch

    z = torch.from_numpy(logits)
    labels = torch.from_numpy(y)
    temperature = torch.nn.Parameter(torch.ones(1) * 1.5)
    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.LBFGS([temperature], lr=0.01, max_iter=50)

    def step():
        optimizer.zero_grad()
        loss = criterion(z / temperature, labels)
        loss.backward()
        return loss

    optimizer.step(step)
    return float(temperature.item())


def available(name: str) -> bool:
    module = {
        "netcal": "netcal",
        "probmetrics": "probmetrics.calibrators",
        "paper": "torch",
    }.get(name)
    if module is None:
        return True
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def fit_skts(logits, y, solver):
    if solver == "grid":
        return grid_search(logits, y, GRID)
    return solve_continuous(logits, y, 0.01, 100.0)


METHODS = {
    "grid": lambda z, y: fit_skts(z, y, "grid").temperature,
    "continuous": lambda z, y: fit_skts(z, y, "continuous").temperature,
    "sklearn": fit_sklearn,
    "netcal": fit_netcal,
    "probmetrics": fit_probmetrics,
    "paper": fit_paper,
}


# --- exactness --------------------------------------------------------------


def independent_losses(logits, y, temperatures):
    """Mean NLL at each temperature with scipy's logsumexp, in float64."""
    z = logits.astype(np.float64)
    out = []
    for t in temperatures:
        total = 0.0
        for s in range(0, z.shape[0], 1 << 14):
            u = z[s : s + (1 << 14)] / t
            rows = logsumexp(u, axis=1) - u[np.arange(u.shape[0]), y[s : s + (1 << 14)]]
            total += float(rows.sum())
        out.append(total / z.shape[0])
    return np.array(out)


def exactness(logits, y, chosen: float) -> str:
    j = int(np.flatnonzero(GRID == chosen)[0])
    idx = list(range(max(j - 2, 0), min(j + 3, GRID.size)))
    losses = independent_losses(logits, y, GRID[idx])
    best = losses[idx.index(j)]
    others = np.delete(losses, idx.index(j))
    if np.any(np.abs(others - best) <= 1e-12 * abs(best)):
        return "tie"
    return "yes" if np.all(others > best) else "NO"


# --- timing -------------------------------------------------------------------


def rounds(jobs: dict, n_rounds: int, warm_up: bool = True):
    """Median and minimum time of each job over interleaved rounds.

    The jobs run in a new random order each round (a fixed seed): under load
    the scheduler sets this process aside at a near-regular period, and in a
    fixed order that period can fall on the same job round after round.
    """
    times: dict[str, list[float]] = {name: [] for name in jobs}
    for fn in jobs.values() if warm_up else ():
        fn()  # warm-up (and imports)
    order = random.Random(0)
    for _ in range(n_rounds):
        names = list(jobs)
        order.shuffle(names)
        for name, fn in ((name, jobs[name]) for name in names):
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    return {name: (statistics.median(v), min(v)) for name, v in times.items()}


PEERS = ("sklearn", "netcal", "probmetrics", "paper")


def numpy_softmax(logits, t):
    u = logits.astype(np.float64) / t
    u -= u.max(axis=1, keepdims=True)
    np.exp(u, out=u)
    u /= u.sum(axis=1, keepdims=True)
    return u


def bench(name, args, bandwidth, exp_rate):
    logits, y = load(name)
    n, k = logits.shape
    threads = kernel_threads(None, n * k)
    scaler = TemperatureScaler().fit(logits, y)
    t = scaler.temperature_
    jobs = {
        "f32 pass": lambda: floor_pass(logits, y, _f32_block),
        "f64 pass": lambda: floor_pass(logits, y, _f64_block),
        "f64 pass threads": lambda: floor_pass(logits, y, _f64_block, threads),
        "grid": lambda: fit_skts(logits, y, "grid"),
        "continuous": lambda: fit_skts(logits, y, "continuous"),
        "predict_proba": lambda: scaler.predict_proba(logits),
        "numpy softmax": lambda: numpy_softmax(logits, t),
    }
    res = rounds(jobs, args.rounds)
    # The peers after skts's rounds, not before or between them (their check
    # that they can fit the shape included): PyTorch's threads keep spinning
    # for a while after a call, which would slow whatever runs next, and some
    # peers allocate and free gigabytes, after which fresh allocations (skts's
    # 2 GiB of predict_proba output at 5,000 x 50,000) were seen to fault
    # slowly now and then on this kind of virtual machine.
    # (They take seconds to minutes on the largest shapes: one round there.)
    peers = [p for p in PEERS if p in args.peers and available(p)]
    failed = {}
    temps = {}
    for p in list(peers):
        try:
            temps[p] = METHODS[p](logits, y)
        except Exception as exc:  # a peer that cannot fit this shape
            failed[p] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:60]}"
            peers.remove(p)
            continue
    peer_jobs = {p: (lambda p=p: METHODS[p](logits, y)) for p in peers}
    # (The check above that each peer can fit the shape was its warm-up.)
    res.update(rounds(peer_jobs, args.peer_rounds if n * k < 5e7 else 1, False))

    grid = fit_skts(logits, y, "grid")
    cont = fit_skts(logits, y, "continuous")
    bound = max(logits.nbytes / bandwidth, n * k / exp_rate)
    return {
        "name": name,
        "shape": f"{n}x{k}",
        "threads": threads,
        "res": res,
        "bound": bound,
        "T": grid.temperature,
        "T_cont": cont.temperature,
        "reads": cont.n_passes,
        "grid_reads": grid.n_passes,
        "temps": temps,
        "exact": exactness(logits, y, grid.temperature) if args.exact else "—",
        "failed": failed,
    }


def ms(v):
    return f"{1e3 * v:.1f}" if v >= 1e-3 else f"{1e3 * v:.2f}"


def header(peers):
    x = "\u00d7"  # the multiplication sign
    head = (
        "| data | threads | f32 pass ms | f64 pass ms (1 thr / skts thr) | bound ms "
        f"| grid ms med (min) | **grid {x} f32** | cont {x} f32 (reads) "
        f"| grid {x} f64 1 thr / thr | predict_proba {x} numpy f64 softmax | "
        + "".join(f"{p} {x} grid | " for p in peers)
        + "T grid | grid exact |"
    )
    print(head)
    print("|" + "---|" * (head.count("|") - 1), flush=True)


def row(r, peers):
    res = r["res"]
    f32, f64 = res["f32 pass"][0], res["f64 pass"][0]
    f64t = res["f64 pass threads"][0]
    g = res["grid"][0]
    peer_cells = "".join(
        f"{res[p][0] / g:.0f} | " if p in res else "fails | " for p in peers
    )
    label = "synthetic" if r["name"][0].isdigit() else r["name"]
    print(
        f"| {r['shape']} ({label}) "
        f"| {r['threads']} | {ms(f32)} | {ms(f64)} / {ms(f64t)} | {ms(r['bound'])} "
        f"| {ms(g)} ({ms(res['grid'][1])}) | **{g / f32:.2f}** "
        f"| {res['continuous'][0] / f32:.2f} ({r['reads']}) "
        f"| {g / f64:.2f} / {g / f64t:.2f} "
        f"| {res['predict_proba'][0] / res['numpy softmax'][0]:.2f} | "
        f"{peer_cells}{r['T']:.4f} | {r['exact']} |",
        flush=True,
    )


def temperatures(rows):
    print()
    print("Temperatures (grid / continuous / peers), and peers that failed:")
    for r in rows:
        peers_t = ", ".join(f"{p} {v:.4f}" for p, v in r["temps"].items())
        fails = "; ".join(f"{p}: {m}" for p, m in r["failed"].items())
        print(
            f"  {r['shape']}: {r['T']:.4f} / {r['T_cont']:.4f}; {peers_t}"
            + (f"; failed: {fails}" if fails else "")
        )


# --- memory, each measurement in a fresh process ------------------------------


def _status(field: str) -> float:
    """A field of /proc/self/status, in MiB (Linux)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024  # kB
    raise RuntimeError(f"no {field} in /proc/self/status")


def child(name: str, method: str) -> None:
    """Peak memory of one fit above the data, in this (fresh) process: the
    resident set's high-water mark, reset (Linux's clear_refs) once the data
    and the libraries are loaded."""
    import gc

    logits, y = load(name)
    if method not in ("grid", "continuous", "predict_proba") and not available(method):
        print("n/a")
        return
    if method in ("netcal", "probmetrics", "paper"):
        __import__({"paper": "torch"}.get(method, method))
    import skts._scaler  # noqa: F401  (skts's own imports, before the mark)

    gc.collect()
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # reset the high-water mark to the current resident set
    base = _status("VmRSS")
    if method == "predict_proba":
        scaler = TemperatureScaler(temperatures=[1.5]).fit(logits[:10], y[:10])
        scaler.predict_proba(logits)
    else:
        METHODS[method](logits, y)
    print(f"{_status('VmHWM') - base:.1f}")


def memory(names, peers):
    methods = ["grid", "continuous", *peers]
    head = "| data | logits MiB | " + "".join(f"{m} MiB | " for m in methods)
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for name in names:
        cells = []
        for m in methods:
            out = subprocess.run(
                # (-S carried over: a run against another checkout on PYTHONPATH)
                [sys.executable, *(["-S"] if sys.flags.no_site else []), __file__,
                 "--child", name, m],  # fmt: skip
                capture_output=True,
                text=True,
                check=False,
            )
            cells.append(
                out.stdout.strip().splitlines()[-1]
                if out.returncode == 0 and out.stdout.strip()
                else "error"
            )
        logits, _ = load(name)
        print(
            f"| {name} | {logits.nbytes / 2**20:.0f} | " + " | ".join(cells) + " |",
            flush=True,
        )
        del logits


# --- main -------------------------------------------------------------------------


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small shapes only")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--peer-rounds", type=int, default=3)
    parser.add_argument(
        "--peers",
        default=",".join(PEERS),
        help="comma-separated peers to time (default: all installed)",
    )
    parser.add_argument(
        "--load",
        type=int,
        default=0,
        help="run N CPU-bound background processes meanwhile",
    )
    parser.add_argument(
        "--memory",
        action="store_true",
        help="peak memory of each fit, in fresh processes",
    )
    parser.add_argument("--no-exact", dest="exact", action="store_false")
    parser.add_argument("--shapes", default=None, help="e.g. 10000x100,cifar10")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(*args.child)
    args.peers = [p for p in args.peers.split(",") if p]
    if args.shapes:
        names = args.shapes.split(",")
    else:
        names = [n for n in REAL if (DATA / REAL[n]).exists()]
        names += [f"{n}x{k}" for n, k in (QUICK if args.quick else SHAPES)]
    cores = os.cpu_count()
    print(
        f"skts {skts.__version__}, numpy {np.__version__}, scipy {scipy.__version__}, "
        f"scikit-learn {sklearn.__version__}, Python {platform.python_version()}, "
        f"{platform.machine()}, {cores} cores; command: "
        f"python benchmarks/bench_fit.py {' '.join(argv or sys.argv[1:])}"
    )
    peers = [p for p in args.peers if available(p)]
    if args.memory:
        memory(names, peers)
        return None
    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(args.load)
    ]
    try:
        if hogs:
            time.sleep(1)  # (they are running)
        bandwidth = read_bandwidth(cores)
        exp_rate = _kernel.exp32_rate(cores)
        print(
            f"hardware bound of one pass on {cores} cores: read "
            f"{bandwidth / 1e9:.1f} GB/s, "
            f"{exp_rate / 1e9:.1f} G float32 exp/s (the kernel's polynomial, "
            f"{_kernel.exp32_rate(1) / 1e9:.1f} G/s on one core); background load: "
            f"{args.load} processes"
        )
        header(peers)
        rows = []
        for name in names:
            rows.append(bench(name, args, bandwidth, exp_rate))
            row(rows[-1], peers)
        temperatures(rows)
    finally:
        for h in hogs:
            h.kill()
    return None


if __name__ == "__main__":
    main()
