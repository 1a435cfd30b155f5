"""Scale sanity: fit on 10,000,000 x 10 float32 logits memory-mapped from disk.

Usage (from the repository root; writes ~400 MB into a temporary folder)::

    python benchmarks/bench_scale.py [--rows 10000000] [--classes 10]

The logits are written to a temporary ``.npy`` block by block, opened with
``mmap_mode="r"`` (as the CLI does) and calibrated with ``TemperatureScaler``
and through ``skts fit``. The script reports wall time and the peak of memory
allocated by Python and numpy during the fit (tracemalloc), which must stay a
small buffer whatever the number of rows; the memory-mapped file itself is
paged in by the operating system and never copied.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import tracemalloc
import warnings
from pathlib import Path

import numpy as np

from skts import TemperatureScaler


def write_logits(folder: Path, n: int, k: int, block: int = 1_000_000):
    rng = np.random.RandomState(0)
    logits = np.lib.format.open_memmap(
        folder / "logits.npy", mode="w+", dtype=np.float32, shape=(n, k)
    )
    labels = np.empty(n, dtype=np.int64)
    for start in range(0, n, block):
        stop = min(start + block, n)
        z = rng.normal(scale=3.0, size=(stop - start, k)).astype(np.float32)
        logits[start:stop] = z
        labels[start:stop] = np.where(
            rng.rand(stop - start) < 0.7, z.argmax(1), rng.randint(0, k, stop - start)
        )
    logits.flush()
    del logits
    np.save(folder / "labels.npy", labels)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--classes", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        t = time.perf_counter()
        write_logits(folder, args.rows, args.classes)
        size = (folder / "logits.npy").stat().st_size / 2**20
        print(
            f"wrote {args.rows} x {args.classes} float32 logits ({size:.0f} MiB) "
            f"in {time.perf_counter() - t:.1f}s"
        )
        logits = np.load(folder / "logits.npy", mmap_mode="r")
        labels = np.load(folder / "labels.npy")
        for solver in ("grid", "continuous"):
            tracemalloc.start()
            t = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                scaler = TemperatureScaler(solver=solver).fit(logits, labels)
            elapsed = time.perf_counter() - t
            peak = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
            print(
                f"{solver:10s} T = {scaler.temperature_:.6f}  time {elapsed:.2f}s  "
                f"peak traced memory {peak:.1f} MiB (labels alone: "
                f"{labels.nbytes / 2**20:.0f} MiB, logits file {size:.0f} MiB)"
            )
        t = time.perf_counter()
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "skts",
                "fit",
                "--logits",
                str(folder / "logits.npy"),
                "--labels",
                str(folder / "labels.npy"),
                "--out",
                str(folder / "c.json"),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        print(
            f"skts fit (CLI, memory-mapped): {out.stdout.strip()} "
            f"in {time.perf_counter() - t:.1f}s"
        )


if __name__ == "__main__":
    main()
