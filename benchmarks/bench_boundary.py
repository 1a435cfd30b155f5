"""Boundary optima: separable, anti-separable and nearly separable held-out data.

Usage (from the repository root; about 2 minutes on 2 cores)::

    python benchmarks/bench_boundary.py --repeat 7
    python benchmarks/bench_boundary.py --skts /path/to/other/checkout  # compare

For each case it times, interleaved round by round in one process (so that
machine noise hits every method alike), the floor (one plain chunked numpy
float64 pass computing the mean NLL at T = 1), skts's exact grid search over
the default 1001 candidates and the continuous solver over [0.01, 100], and
prints the min and median of the ratios to the floor of the same round, the
passes over the data, and whether the grid choice equals float64 brute force
over all candidates (the rule's answer on these cases: no near-ties).

Cases (float32 logits, N(0, 3**2), as ``bench_fit.py``):
  separable       every label is its row's argmax: the loss falls as T -> 0
  separable, margin 10   ... and stands 10 above the rest (a strong model)
  anti-separable  every label is its row's argmin: the loss falls as T -> inf
  one row wrong   separable but one row labelled with its argmin
  ordinary        the label is the argmax 70% of the time (no boundary)
"""

from __future__ import annotations

import argparse
import importlib.util
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from bench_fit import floor_pass  # the same floor as the main benchmark


def make_case(kind: str, n: int, k: int, seed: int = 0):
    rng = np.random.RandomState(seed)
    logits = rng.normal(scale=3.0, size=(n, k)).astype(np.float32)
    top, bottom = logits.argmax(1), logits.argmin(1)
    if kind == "separable":
        y = top
    elif kind == "separable, margin 10":
        # A strong model: the label's logit stands 10 above the rest.
        y = rng.randint(0, k, n)
        logits[np.arange(n), y] = logits.max(1) + 10.0
    elif kind == "anti-separable":
        y = bottom
    elif kind == "one row wrong":
        y = top.copy()
        y[n // 2] = bottom[n // 2]
    else:
        y = np.where(rng.rand(n) < 0.7, top, rng.randint(0, k, n))
    return logits, y


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="interleaved rounds")
    parser.add_argument(
        "--skts", help="import skts from this checkout instead (to compare)"
    )
    parser.add_argument("--quick", action="store_true", help="100,000 x 100 only")
    args = parser.parse_args()
    if args.skts:
        # A checkout from before skts/_numerics/: its numerics module imports
        # nothing from skts, so load its file directly (an installed skts
        # would shadow sys.path).
        path = Path(args.skts).resolve() / "skts" / "_temperature.py"
        spec = importlib.util.spec_from_file_location("other_temperature", path)
        numerics = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = numerics  # (dataclasses look themselves up)
        spec.loader.exec_module(numerics)
    else:
        import skts._numerics as numerics
    default_temperatures = numerics.default_temperatures
    grid_search = numerics.grid_search
    nll_many = numerics.nll_many
    solve_continuous = numerics.solve_continuous

    grid = default_temperatures()
    print(
        f"skts numerics from {numerics.__file__}, numpy {np.__version__}, "
        f"Python {platform.python_version()}, {platform.machine()}, "
        f"{args.repeat} interleaved rounds"
    )
    print(
        "| data | floor (s) | grid x floor, min / median (passes) | "
        "continuous x floor, min / median (passes) | T grid | T continuous | "
        "grid = brute force |"
    )
    print("|---|---|---|---|---|---|---|")
    shapes = [(100_000, 100)] + ([] if args.quick else [(1_000_000, 10)])
    kinds = [
        "separable",
        "separable, margin 10",
        "anti-separable",
        "one row wrong",
        "ordinary",
    ]
    for n, k in shapes:
        for kind in kinds:
            logits, y = make_case(kind, n, k)
            methods = {
                "floor": lambda z=logits, t=y: floor_pass(z, t),
                "grid": lambda z=logits, t=y: grid_search(z, t, grid),
                "cont": lambda z=logits, t=y: solve_continuous(z, t, 0.01, 100.0),
            }
            for fn in methods.values():
                fn()  # warm-up
            ratios = {"grid": [], "cont": []}
            floors = []
            out = {}
            for _ in range(args.repeat):
                times = {}
                for name, fn in methods.items():
                    t = time.perf_counter()
                    out[name] = fn()
                    times[name] = time.perf_counter() - t
                floors.append(times["floor"])
                for name in ratios:
                    ratios[name].append(times[name] / times["floor"])
            losses = nll_many(logits, y, grid)
            brute = float(grid[losses == losses.min()].min())
            g, c = out["grid"], out["cont"]
            print(
                f"| {kind} {n:,}x{k} | {statistics.median(floors):.3f} | "
                f"{min(ratios['grid']):.2f} / {statistics.median(ratios['grid']):.2f}"
                f" ({g.n_passes}) | {min(ratios['cont']):.2f} / "
                f"{statistics.median(ratios['cont']):.2f} ({c.n_passes}) | "
                f"{g.temperature:.4g} | {c.temperature:.4g} | "
                f"{'yes' if brute == g.temperature else 'NO'} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
