"""What the build costs, and what each optimisation level buys at run time.

Usage (from the repository root; a few minutes on 2 cores)::

    python benchmarks/bench_build.py                  # -O2 and -O3
    python benchmarks/bench_build.py --levels 2,3 --rounds 7

For each meson optimisation level, builds skts from this tree into a folder
of its own (``pip install --target``, no isolation, no dependencies) and
reports the wall time of the build and of each compile step (ninja's log:
Cython, the Cython-generated C, the kernel). Then, in interleaved rounds
(each round runs every build once, in a fresh process, so that a busy moment
of the machine hits them all), times a grid fit (``TemperatureScaler``,
float32, the default grid, ``n_jobs=None``) against one numpy float32 pass
(the NLL at T = 1, single-threaded) in the same process; prints the median
and minimum of the per-round ratios, and the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHAPES = [(1_000_000, 10), (1_000_000, 2), (10_000, 100), (50_000, 1000)]

CHILD = r"""
import json, sys, time
import numpy as np
from skts import TemperatureScaler
shapes = json.loads(sys.argv[1])
out = {}
for n, k in shapes:
    rng = np.random.default_rng(0)
    z = (rng.standard_normal((n, k), dtype=np.float32) * 3)
    y = rng.integers(0, k, n)
    def numpy_pass():
        total = 0.0
        for s in range(0, n, 65536):
            b = z[s:s + 65536]
            m = b.max(1, keepdims=True)
            total += float((np.log(np.exp(b - m).sum(1)) + m[:, 0]).sum())
            total -= float(b[np.arange(len(b)), y[s:s + 65536]].sum())
        return total
    TemperatureScaler().fit(z, y); numpy_pass()  # (warm-up)
    t0 = time.perf_counter(); numpy_pass(); t1 = time.perf_counter()
    TemperatureScaler().fit(z, y); t2 = time.perf_counter()
    out[f"{n}x{k}"] = (t2 - t1, t1 - t0)
print(json.dumps(out))
"""


def build(level: int, where: Path) -> dict:
    """Build skts at ``-Doptimization=level`` into ``where``; the wall time
    and ninja's per-step times."""
    build_dir = where / "build"
    start = time.perf_counter()
    subprocess.run(
        [
            sys.executable, "-m", "pip", "install", "--no-deps",
            "--no-build-isolation", "--target", str(where / "site"), "-q",
            f"-Cbuild-dir={build_dir}",
            f"-Csetup-args=-Doptimization={level}",
            str(ROOT),
        ],
        check=True,
    )
    wall = time.perf_counter() - start
    steps = {}
    for line in (build_dir / ".ninja_log").read_text().splitlines()[1:]:
        begin, end, _, target, _ = line.split("\t")
        name = (
            "cython" if target.endswith(".pyx.c")
            else "cython C" if target.endswith("pyx.c.o")
            else "kernel C" if target.endswith("_kernel.c.o")
            else None
        )
        if name:
            steps[name] = (int(end) - int(begin)) / 1000
    return {"wall": wall, **steps}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="2,3")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    levels = [int(x) for x in args.levels.split(",")]
    print(f"load average before: {os.getloadavg()}")
    scratch = Path(tempfile.mkdtemp(prefix="skts-bench-build-"))
    try:
        sites = {}
        for level in levels:
            where = scratch / f"O{level}"
            times = build(level, where)
            sites[level] = where / "site"
            steps = ", ".join(f"{k} {v:.1f} s" for k, v in times.items() if k != "wall")
            print(f"-O{level}: build {times['wall']:.1f} s ({steps})", flush=True)
        ratios = {(lv, f"{n}x{k}"): [] for lv in levels for n, k in SHAPES}
        fits = {key: [] for key in ratios}
        for _ in range(args.rounds):
            for level in levels:
                env = {**os.environ, "PYTHONPATH": str(sites[level])}
                out = subprocess.run(
                    [sys.executable, "-c", CHILD, json.dumps(SHAPES)],
                    env=env, capture_output=True, text=True, check=True,
                    cwd=scratch,
                )
                for shape, (fit, floor) in json.loads(out.stdout).items():
                    ratios[level, shape].append(fit / floor)
                    fits[level, shape].append(fit)
        print(f"load average after: {os.getloadavg()}")
        print(f"{'shape':>12} " + " ".join(
            f"{f'-O{lv} fit ms (min)':>20} {'ratio med (min)':>16}" for lv in levels
        ))
        for n, k in SHAPES:
            shape = f"{n}x{k}"
            cells = []
            for lv in levels:
                f, r = fits[lv, shape], ratios[lv, shape]
                cells.append(
                    f"{1000 * statistics.median(f):>11.1f} ({1000 * min(f):6.1f})"
                    f" {statistics.median(r):>8.2f} ({min(r):.2f})"
                )
            print(f"{shape:>12} " + " ".join(cells))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
