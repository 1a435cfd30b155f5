"""Exact temperature scaling on Dask: shards on disk, a LocalCluster.

Usage (from the repository root, with ``pip install -e ".[dask]"``)::

    python benchmarks/bench_dask.py --folder /tmp/skts-shards \\
        [--rows 2000000] [--classes 1000] [--shard-rows 100000] \\
        [--workers 2] [--memory-limit 2GiB] [--repeats 3]

Writes ``--rows`` x ``--classes`` float32 logits (8 GB at the defaults) as
``.npy`` shards of ``--shard-rows`` rows with their labels, and the same data
as one ``.npy`` file, once (reused on later runs). Then, several times,
interleaved, each in a fresh process:

- ``cluster``: ``TemperatureScaler().fit`` on the shards loaded lazily
  (:func:`skts._dask.load_npy_shards`, as ``skts fit --logits FOLDER``)
  through a ``LocalCluster`` of ``--workers`` single-threaded worker
  processes, each limited to ``--memory-limit`` (well below the data);
- ``threads``: the same shards, the same code, Dask's threaded scheduler in
  one process (``skts fit`` without ``--scheduler``);
- ``mmap``: the in-memory path, ``TemperatureScaler().fit`` on the one
  ``.npy`` file memory-mapped (``np.load(mmap_mode="r")``).

It reports wall time (min and median), the number of passes over the data
(Dask computations: one validation pass, one subsample read, then the
search's passes), the peak resident memory of each worker or of the process
(sampled every 50 ms from ``/proc/self/status``: all of it, which counts the
pages of memory-mapped files, and the anonymous part, what the process
allocated), and checks that all three give the same temperature bit for bit.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np


def write_shards(folder: Path, n: int, k: int, shard_rows: int) -> None:
    done = folder / "done.json"
    spec = {"rows": n, "classes": k, "shard_rows": shard_rows}
    if done.exists() and json.loads(done.read_text()) == spec:
        return
    (folder / "logits").mkdir(parents=True, exist_ok=True)
    (folder / "labels").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    whole = np.lib.format.open_memmap(
        folder / "all_logits.npy", mode="w+", dtype=np.float32, shape=(n, k)
    )
    labels = np.empty(n, dtype=np.int64)
    t = time.perf_counter()
    for i, start in enumerate(range(0, n, shard_rows)):
        stop = min(start + shard_rows, n)
        # An overconfident network: the true class gets a margin, the logits
        # are too spread out (T > 1 fixes it), 30% of labels are noise.
        z = rng.standard_normal((stop - start, k), dtype=np.float32)
        z *= np.float32(4.0)
        y = np.where(
            rng.random(stop - start) < 0.7,
            z.argmax(1),
            rng.integers(0, k, stop - start),
        )
        z[np.arange(stop - start), y] += np.float32(3.0)
        np.save(folder / "logits" / f"part{i:05d}.npy", z)
        np.save(folder / "labels" / f"part{i:05d}.npy", y)
        whole[start:stop] = z
        labels[start:stop] = y
    whole.flush()
    del whole
    np.save(folder / "all_labels.npy", labels)
    done.write_text(json.dumps(spec))
    print(f"wrote the shards and the single file in {time.perf_counter() - t:.0f} s")


_CHILD = r"""
import json, os, sys, threading, time, warnings
from pathlib import Path
import numpy as np
mode, folder = sys.argv[1], Path(sys.argv[2])
workers, limit = int(sys.argv[3]), sys.argv[4]
from skts._fit import fit_temperature
from skts._numerics import Rows
from skts._validation import check_class_indices, check_logits, check_temperatures


def memory():
    # Resident memory in MiB: all of it, and the anonymous part (what the
    # process allocated, without the file pages it maps).
    fields = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon"):
                fields[key] = int(value.split()[0]) / 1024
    return fields["VmRSS"], fields["RssAnon"]


def start_sampler(holder):
    holder.skts_peak = memory()
    def loop():
        while True:
            rss, anon = memory()
            old = holder.skts_peak
            holder.skts_peak = (max(old[0], rss), max(old[1], anon))
            time.sleep(0.05)
    threading.Thread(target=loop, daemon=True).start()


class Here:
    pass

def run_fit(logits, y, rows_cls):
    t = time.perf_counter()
    rows = rows_cls(logits, y)
    result = fit_temperature(rows, check_temperatures(None))
    return time.perf_counter() - t, result

out = {}
here = Here()
start_sampler(here)
warnings.simplefilter("ignore")
if mode == "mmap":
    t = time.perf_counter()
    z = check_logits(np.load(folder / "all_logits.npy", mmap_mode="r"))
    y = check_class_indices(np.load(folder / "all_labels.npy"), z.shape)
    check = time.perf_counter() - t
    seconds, result = run_fit(z, y, lambda a, b: Rows(a, b))
    seconds += check
    out["computations"] = 1 + result.n_passes  # the input check reads it all
else:
    import dask
    from skts._dask import DaskRows, load_npy_shards
    files = sorted((folder / "logits").glob("*.npy"))
    z = load_npy_shards(files)
    y = load_npy_shards(sorted((folder / "labels").glob("*.npy")), what="labels")
    count = [0]
    from dask.callbacks import Callback
    class Count(Callback):
        def _start(self, dsk):
            count[0] += 1
    if mode == "threads":
        with Count():
            seconds, result = run_fit(z, y, DaskRows)
        out["computations"] = count[0]
    else:
        from distributed import Client, LocalCluster
        import psutil

        def start_worker_sampler(dask_worker):
            start_sampler(dask_worker)

        def read_peak(dask_worker):
            return dask_worker.skts_peak

        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                          memory_limit=limit, host="127.0.0.1",
                          dashboard_address=":0") as cluster, Client(cluster) as c:
            c.run(start_worker_sampler)
            seconds, result = run_fit(z, y, DaskRows)
            out["peak_mib"] = sorted(c.run(read_peak).values())
            # Computations: validation + subsample + the search's passes.
            out["computations"] = 2 + result.n_passes
if mode != "cluster":
    out["peak_mib"] = [here.skts_peak]
out["seconds"] = seconds
out["temperature"] = result.temperature
out["passes"] = result.n_passes
print(json.dumps(out))
"""


def child(mode: str, folder: Path, workers: int, limit: str) -> dict:
    res = subprocess.run(
        [sys.executable, "-c", _CHILD, mode, str(folder), str(workers), limit],
        capture_output=True,
        text=True,
        check=False,
    )
    if res.returncode != 0:
        raise SystemExit(f"{mode} failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, required=True)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--classes", type=int, default=1_000)
    parser.add_argument("--shard-rows", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-limit", default="2GiB")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--modes", default="cluster,threads,mmap")
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    write_shards(args.folder, args.rows, args.classes, args.shard_rows)
    size = sum(p.stat().st_size for p in (args.folder / "logits").glob("*.npy"))
    n_shards = len(list((args.folder / "logits").glob("*.npy")))
    print(
        f"{args.rows:,} x {args.classes:,} float32 logits, {size / 1e9:.1f} GB in "
        f"{n_shards} shards; {os.cpu_count()} cores; workers: {args.workers} x 1 "
        f"thread, memory limit {args.memory_limit} each"
    )
    modes = args.modes.split(",")
    runs: dict[str, list[dict]] = {m: [] for m in modes}
    for _ in range(args.repeats):
        for mode in modes:  # interleaved: the machine's noise hits all alike
            runs[mode].append(child(mode, args.folder, args.workers, args.memory_limit))
    temps = {r["temperature"] for rs in runs.values() for r in rs}
    print(f"temperature: {sorted(temps)} (identical everywhere: {len(temps) == 1})")
    print(
        f"{'mode':<8} {'min s':>7} {'median s':>9} {'passes':>7} {'comps':>6} "
        f"{'peak RSS MiB':>13} {'of which anon':>14}"
    )
    for mode, rs in runs.items():
        secs = [r["seconds"] for r in rs]
        rss = max(p[0] for r in rs for p in r["peak_mib"])
        anon = max(p[1] for r in rs for p in r["peak_mib"])
        per = "  (per worker)" if mode == "cluster" else ""
        print(
            f"{mode:<8} {min(secs):>7.1f} {statistics.median(secs):>9.1f} "
            f"{rs[0]['passes']:>7} {rs[0]['computations']:>6} "
            f"{rss:>13.0f} {anon:>14.0f}{per}"
        )


if __name__ == "__main__":
    main()
