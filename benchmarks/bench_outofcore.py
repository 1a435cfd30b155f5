"""Exact temperature scaling on Dask: shards on disk, a LocalCluster.

Usage (from the repository root, with ``pip install -e ".[dask]"``)::

    python benchmarks/bench_outofcore.py --folder /tmp/skts-shards \\
        [--rows 2000000] [--classes 1000] [--shard-rows 100000] \\
        [--workers 2] [--memory-limit 2GiB] [--repeats 3]

Writes ``--rows`` x ``--classes`` float32 logits (8 GB at the defaults) as
``.npy`` shards of ``--shard-rows`` rows with their labels, and the same data
as one ``.npy`` file, once (reused on later runs). Then, several times,
interleaved, each in a fresh process:

- ``cluster``: ``TemperatureScaler().fit`` on the shards loaded lazily
  (:func:`skts._dask.load_npy_shards`, as ``skts fit --logits FOLDER``)
  through a ``LocalCluster`` of ``--workers`` single-threaded worker
  processes, each limited to ``--memory-limit`` (well below the data),
  which import skts before the timer starts (as the other modes' process);
- ``threads``: the same shards, the same code, Dask's threaded scheduler in
  one process (``skts fit`` without ``--scheduler``);
- ``mmap``: the in-memory path, ``TemperatureScaler().fit`` on the one
  ``.npy`` file memory-mapped (``np.load(mmap_mode="r")``).

- ``read``: the floor: the one ``.npy`` file read sequentially in 16 MiB
  pieces (``readinto`` one reused buffer), once.

Each run is **cold** (the files' pages dropped from the page cache first,
``posix_fadvise(POSIX_FADV_DONTNEED)``: no privilege needed) or **warm**
(read once just before). It reports wall time (min and median), the reads
of all the data (the search's passes, the first of which checks the inputs
as it reads them; on Dask a computation before them reads only the warm
start's subsample and the weights), the time and bandwidth
per read, and its share of the sequential read's bandwidth in the same
cache state; for the cluster, the
tasks' number and mean compute time, and the share of the wall time the
workers were not computing (scheduler, transfers, waiting: ``1 -
compute / (workers x wall)``). Peak resident memory of each worker or of the
process is sampled every 50 ms from ``/proc/self/status``: all of it, which
counts the pages of memory-mapped files, and the anonymous part, what the
process allocated (the bound: 64 MiB beyond the page cache, beside the
labels). It checks that every mode gives the same temperature bit for bit.
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
import importlib, json, os, sys, threading, time, warnings
from pathlib import Path
import numpy as np
mode, folder = sys.argv[1], Path(sys.argv[2])
workers, limit = int(sys.argv[3]), sys.argv[4]
from skts._fit import fit_temperature, rows_for
from skts._validation import check_temperatures


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
base = memory()[1]
if mode == "read":
    buf = bytearray(16 << 20)
    t = time.perf_counter()
    with open(folder / "all_logits.npy", "rb", buffering=0) as fh:
        while fh.readinto(buf):
            pass
    out.update(seconds=time.perf_counter() - t, computations=1, passes=1,
               temperature=None, peak_mib=[here.skts_peak], base_anon=base)
    print(json.dumps(out))
    sys.exit(0)
if mode == "mmap":
    # (rows_for: the estimator's checks; the logits' finiteness is tested by
    # the fit's first read, so the reads are the search's passes)
    z = np.load(folder / "all_logits.npy", mmap_mode="r")
    seconds, result = run_fit(z, np.load(folder / "all_labels.npy"), rows_for)
    out["computations"] = result.n_passes
else:
    import dask
    from skts._dask import DaskRows, load_npy_shards
    files = sorted((folder / "logits").glob("*.npy"))
    z = load_npy_shards(files)
    y = load_npy_shards(sorted((folder / "labels").glob("*.npy")), what="labels")
    count = [0]
    dask_compute = dask.compute
    def counted(*args, **kwargs):
        count[0] += 1
        return dask_compute(*args, **kwargs)
    if mode == "threads":
        dask.compute = counted
        seconds, result = run_fit(z, y, DaskRows)
        dask.compute = dask_compute
        # (the search's passes, each a read of all the data: the driver
        # reads the warm start's sample of mapped shards itself)
        assert count[0] == result.n_passes, count[0]
        out["computations"] = result.n_passes
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
            # Like for like: the mmap run's process imported skts before its
            # timer starts; here the workers import it before it too.
            c.run(importlib.import_module, "skts._dask")
            from distributed import get_task_stream
            with get_task_stream(c) as stream:
                seconds, result = run_fit(z, y, DaskRows)
            compute = [
                ss["stop"] - ss["start"]
                for task in stream.data for ss in task["startstops"]
                if ss["action"] == "compute"
            ]
            out["tasks"] = len(compute)
            out["task_seconds"] = sum(compute)
            out["peak_mib"] = sorted(c.run(read_peak).values())
            # Reads of all the data: the search's passes (the driver reads
            # the warm start's sample; the first pass checks the inputs as
            # it reads them).
            out["computations"] = result.n_passes
if mode != "cluster":
    out["peak_mib"] = [here.skts_peak]
out["seconds"] = seconds
out["base_anon"] = base
out["temperature"] = result.temperature
out["passes"] = result.n_passes
print(json.dumps(out))
"""


def set_cache(folder: Path, state: str) -> None:
    """Drop every data file's pages from the page cache (``cold``), or read
    each once (``warm``)."""
    files = [folder / "all_logits.npy", *sorted((folder / "logits").glob("*.npy"))]
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            if state == "cold":
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            else:
                while os.read(fd, 16 << 20):
                    pass
        finally:
            os.close(fd)


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
    parser.add_argument("--modes", default="read,mmap,threads,cluster")
    parser.add_argument("--cache", default="cold,warm")
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
    states = args.cache.split(",")
    runs = {(m, c): [] for c in states for m in modes}
    for _ in range(args.repeats):
        for state in states:
            for mode in modes:  # interleaved: the machine's noise hits all alike
                set_cache(args.folder, state)
                runs[mode, state].append(
                    child(mode, args.folder, args.workers, args.memory_limit)
                )
    temps = {r["temperature"] for rs in runs.values() for r in rs} - {None}
    print(f"temperature: {sorted(temps)} (identical everywhere: {len(temps) == 1})")
    print(f"load average: {open('/proc/loadavg').read().split()[:3]}\n")
    whole = (args.folder / "all_logits.npy").stat().st_size
    print(
        "| cache | mode | min s | median s | reads | s per read (min) | GB/s per read "
        "| of the sequential read | tasks | ms per task | not computing "
        "| peak RSS MiB | anonymous MiB (beyond the start) |"
    )
    print("|" + "---|" * 13)
    cold_reads = []
    for state in states:
        floor = None
        if ("read", state) in runs:
            floor = whole / min(r["seconds"] for r in runs["read", state])
        for mode in modes:
            rs = runs[mode, state]
            secs = [r["seconds"] for r in rs]
            reads = rs[0]["computations"]
            per = min(secs) / reads
            rate = whole / per
            share = f"{rate / floor:.0%}" if floor else "—"
            tasks = ms_task = idle = "—"
            if mode == "cluster":
                best = min(rs, key=lambda r: r["seconds"])
                tasks = str(best["tasks"])
                ms_task = f"{1e3 * best['task_seconds'] / best['tasks']:.0f}"
                idle = (
                    f"{1 - best['task_seconds'] / (args.workers * best['seconds']):.0%}"
                )
            rss = max(p[0] for r in rs for p in r["peak_mib"])
            anon = max(p[1] for r in rs for p in r["peak_mib"])
            grown = max(p[1] - r["base_anon"] for r in rs for p in r["peak_mib"])
            if state == "cold" and mode != "read" and (mode, "warm") in runs:
                # (the file fits in the page cache: only the fit's first read
                # is cold; it took the cold fit's extra time plus a warm read)
                warm = [r["seconds"] for r in runs[mode, "warm"]]
                first = min(secs) - min(warm) + min(warm) / reads
                cold_reads.append(
                    (mode, first, whole / first / floor if floor else None)
                )
            who = " per worker" if mode == "cluster" else ""
            grown = "" if mode == "cluster" else f" ({grown:+.0f})"
            print(
                f"| {state} | {mode} | {min(secs):.2f} | {statistics.median(secs):.2f} "
                f"| {reads} | {per:.2f} | {rate / 1e9:.2f} | {share} | {tasks} "
                f"| {ms_task} | {idle} | {rss:.0f}{who} | {anon:.0f}{grown}{who} |"
            )
    for mode, first, share in cold_reads:
        print(
            f"cold {mode}: the first read (the cold fit less the warm one, plus a "
            f"warm read) took about {first:.2f} s"
            + (f", {share:.0%} of the sequential read's speed" if share else "")
        )


if __name__ == "__main__":
    main()
