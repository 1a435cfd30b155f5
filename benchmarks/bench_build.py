"""What the build costs, what each optimisation level buys at run time, and
what each vector width's code gives on this machine.

Usage (from the repository root; a few minutes on 2 cores)::

    python benchmarks/bench_build.py                  # -O2 and -O3
    python benchmarks/bench_build.py --builds O2,O3 --rounds 7
    python benchmarks/bench_build.py --builds O2,avx512,avx2,sse2

Builds: ``O2``, ``O3`` (meson's optimisation level; the kernel's three
``target_clones`` chosen at load time), and, at the default -O3, one vector
width alone
(``SKTS_NO_CLONES`` and ``-march``: ``avx512`` x86-64-v4, ``avx2``
x86-64-v3, ``sse2`` the x86-64 baseline): the code of each clone, timed on
this machine (on an AVX-512 machine, ``avx2`` is what an AVX2-only machine
runs, at this machine's clock and memory). numpy's pass runs at the same
width in those builds' processes (``NPY_DISABLE_CPU_FEATURES`` turns off its
paths above it), so their ratios are what such a machine would give.

For each build, builds skts from this tree into a folder
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
# (an editable install of skts finds it before PYTHONPATH does: drop its
# finder, so that the build under test is the one imported)
sys.meta_path[:] = [f for f in sys.meta_path if "skts" not in type(f).__module__]
import numpy as np
import skts
from skts import TemperatureScaler
assert skts.__file__.startswith(sys.argv[3]), (skts.__file__, sys.argv[3])
sys.path.insert(0, sys.argv[2])
from bench_fit import synthetic
shapes = json.loads(sys.argv[1])
out = {}
for n, k in shapes:
    # bench_fit's synthetic logits (an overconfident network: the label is
    # the argmax 70% of the time, T near 2). With random labels T sits at the
    # grid's edge and the search reads few candidates: the -O2 kernel's 5x
    # slower window pass at 1,000,000 x 10 went unseen that way.
    z, y = synthetic(n, k)
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


ISA = {"avx512": "x86-64-v4", "avx2": "x86-64-v3", "sse2": "x86-64"}
# numpy's own code paths above each width (its dispatch targets), turned off
# in that build's processes, so that the numpy pass runs what numpy runs on
# such a machine too: like for like.
NUMPY_ABOVE = {
    "avx2": "X86_V4 AVX512_ICL AVX512_SPR",
    "sse2": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR",
}


def _setup_args(name: str) -> list[str]:
    if name.startswith("O"):
        return [f"-Csetup-args=-Doptimization={int(name[1:])}"]
    return [f"-Csetup-args=-Dc_args=-DSKTS_NO_CLONES -march={ISA[name]}"]


def build(name: str, where: Path) -> dict:
    """Build skts as ``name`` says into ``where``; the wall time and
    ninja's per-step times."""
    build_dir = where / "build"
    start = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(where / "site"),
            "-q",
            f"-Cbuild-dir={build_dir}",
            *_setup_args(name),
            str(ROOT),
        ],
        check=True,
    )
    wall = time.perf_counter() - start
    steps = {}
    for line in (build_dir / ".ninja_log").read_text().splitlines()[1:]:
        begin, end, _, target, _ = line.split("\t")
        name = (
            "cython"
            if target.endswith(".pyx.c")
            else "cython C"
            if target.endswith("pyx.c.o")
            else "kernel C"
            if target.endswith("_kernel.c.o")
            else None
        )
        if name:
            steps[name] = (int(end) - int(begin)) / 1000
    return {"wall": wall, **steps}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--builds", default="O2,O3")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    levels = args.builds.split(",")
    print(f"load average before: {os.getloadavg()}")
    scratch = Path(tempfile.mkdtemp(prefix="skts-bench-build-"))
    try:
        sites = {}
        for level in levels:
            where = scratch / level
            times = build(level, where)
            sites[level] = where / "site"
            steps = ", ".join(f"{k} {v:.1f} s" for k, v in times.items() if k != "wall")
            print(f"{level}: build {times['wall']:.1f} s ({steps})", flush=True)
        ratios = {(lv, f"{n}x{k}"): [] for lv in levels for n, k in SHAPES}
        fits = {key: [] for key in ratios}
        for _ in range(args.rounds):
            for level in levels:
                env = {**os.environ, "PYTHONPATH": str(sites[level])}
                if level in NUMPY_ABOVE:
                    env["NPY_DISABLE_CPU_FEATURES"] = NUMPY_ABOVE[level]
                out = subprocess.run(
                    [
                        sys.executable,
                        "-c",
                        CHILD,
                        json.dumps(SHAPES),
                        str(ROOT / "benchmarks"),
                        str(sites[level]),
                    ],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                    cwd=scratch,
                )
                for shape, (fit, floor) in json.loads(out.stdout).items():
                    ratios[level, shape].append(fit / floor)
                    fits[level, shape].append(fit)
        print(f"load average after: {os.getloadavg()}")
        print(
            f"{'shape':>12} "
            + " ".join(
                f"{f'{lv} fit ms (min)':>20} {'ratio med (min)':>16}" for lv in levels
            )
        )
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
