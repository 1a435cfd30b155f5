"""The report that ``skts fit`` (and ``skts report``) writes beside the
temperature: its cost against the fit and a numpy pass, like for like.

``skts fit`` fits ``T`` and then reports the metrics before and after
(accuracy, log-loss, Brier score, ECE, MCE, class-wise ECE at ``T = 1`` and
at ``T``), streamed over the rows (:func:`skts.metrics._report.streamed_reports`,
one group of rows in memory at a time). Per shape (synthetic float32 logits,
the label the argmax 70% of the time), in interleaved rounds (the order
rotated each round), min and median wall time of:

- ``fit``: ``TemperatureScaler().fit(z, y)`` (the exact grid);
- ``report``: ``streamed_reports(z, y, [1.0, T])``, what ``skts fit`` adds;
- ``f32 pass``: one chunked numpy float32 pass computing the mean NLL at
  ``T = 1`` on one thread (``bench_fit.py``'s floor);

and the medians of the per-round ratios report / fit and report / pass.
With ``--files Z.npy Y.npy`` it also times the whole command, ``skts fit
--logits Z.npy --labels Y.npy`` in a fresh process (the file memory-mapped,
warm: read once before), ``--cli-rounds`` times. ``--load N`` runs N busy
processes during the timings.

    python benchmarks/bench_report.py
    python benchmarks/bench_report.py --load 2
    python benchmarks/bench_report.py --shapes "" --files z.npy y.npy
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_fit import _f32_block, floor_pass, synthetic
from bench_metrics import busy_processes

from skts import TemperatureScaler
from skts.metrics._report import streamed_reports


def timings(n: int, k: int, n_rounds: int):
    z, y = synthetic(n, k)
    t = TemperatureScaler().fit(z, y).temperature_
    todo = {
        "fit": lambda: TemperatureScaler().fit(z, y),
        "report": lambda: streamed_reports(z, y, [1.0, t]),
        "f32 pass": lambda: floor_pass(z, y, _f32_block),
    }
    for fn in todo.values():  # (warm-up)
        fn()
    names = list(todo)
    times = {name: [] for name in names}
    for r in range(n_rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            start = time.perf_counter()
            todo[name]()
            times[name].append(time.perf_counter() - start)
    return times


def cli_seconds(logits: str, labels: str, n_rounds: int) -> list[float]:
    """``skts fit`` on the files, each time in a fresh process (warm)."""
    with open(logits, "rb") as fh:  # (read once: the page cache holds it)
        while fh.read(1 << 24):
            pass
    out = []
    with tempfile.TemporaryDirectory() as folder:
        target = os.path.join(folder, "t.json")
        for _ in range(n_rounds):
            start = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "skts", "fit", "--logits", logits,
                 "--labels", labels, "--out", target, "--quiet", "--force"],
                check=True, stdout=subprocess.DEVNULL,
            )  # fmt: skip
            out.append(time.perf_counter() - start)
    return out


def row(n: int, k: int, times: dict) -> str:
    def ms(name):
        v = times[name]
        return f"{1e3 * statistics.median(v):.1f} ({1e3 * min(v):.1f})"

    def ratio(a, b):
        pairs = zip(times[a], times[b], strict=True)
        return statistics.median(x / y for x, y in pairs)

    return (
        f"| {n}x{k} | {ms('fit')} | {ms('report')} | {ms('f32 pass')} "
        f"| {ratio('report', 'fit'):.1f} | {ratio('report', 'f32 pass'):.2f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--load", type=int, default=0, help="busy processes")
    parser.add_argument(
        "--shapes",
        default="1000000x10,200000x1000,5000x50000",
        help="comma-separated NxK ('' for none)",
    )
    parser.add_argument("--files", nargs=2, metavar=("LOGITS", "LABELS"))
    parser.add_argument("--cli-rounds", type=int, default=3)
    args = parser.parse_args()
    shapes = [tuple(map(int, s.split("x"))) for s in args.shapes.split(",") if s]
    print(f"load average before: {os.getloadavg()}; cpus: {os.cpu_count()}")
    print(f"busy processes during the timings: {args.load}; rounds: {args.rounds}")
    with busy_processes(args.load):
        if shapes:
            print(
                "\n| shape | fit ms | report ms | f32 pass ms | report / fit "
                "| report / pass |\n|---|---|---|---|---|---|"
            )
        for n, k in shapes:
            print(row(n, k, timings(n, k, args.rounds)), flush=True)
        if args.files:
            got = cli_seconds(*args.files, args.cli_rounds)
            print(
                f"\nskts fit --logits {args.files[0]} --labels {args.files[1]}: "
                f"{statistics.median(got):.2f} s median, {min(got):.2f} s min "
                f"({len(got)} runs: {', '.join(f'{s:.2f}' for s in got)})"
            )
    print(f"\nload average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
