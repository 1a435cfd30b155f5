"""The fit on a busy machine: CPU-bound neighbours, an affinity mask, a CPU
quota, each against ``n_jobs=1`` and one numpy float32 pass in the same rounds.

Usage (from the repository root, after ``pip install`` of skts; about five
minutes on 2 cores)::

    python benchmarks/bench_load.py                       # every condition
    python benchmarks/bench_load.py --conditions idle,hogs2 --rounds 15
    python benchmarks/bench_load.py --shapes 1000000x10,5000x50000

Conditions, each in a fresh process (the CPUs skts counts are looked up once
per process):

- ``idle``: nothing else running (other users of the machine aside: the
  load average is printed);
- ``hogs2``, ``hogs4``: 2 or 4 CPU-bound background processes;
- ``taskset``: the process pinned to CPU 0 (``taskset -c 0``:
  ``os.sched_setaffinity``), 2 hogs running;
- ``quota``: the process in a cgroup of its own with a CFS quota of one CPU
  (v1 ``cpu.cfs_quota_us`` or v2 ``cpu.max``), 2 hogs running; made only
  where the machine lets this process make a cgroup (root, a writable
  controller), and said so otherwise.

Per shape (float32 logits from ``bench_fit.synthetic``), the jobs of a round
run in a new random order each round: one single-threaded numpy float32
pass (``bench_fit.floor_pass``: the NLL at ``T = 1``, chunked), and
``TemperatureScaler(solver=...)`` for the grid and continuous solvers with
the default ``n_jobs`` and with ``n_jobs=1``; at least ``--rounds`` rounds,
and more for short fits, to fill ``--seconds`` (a fit of a few ms on a busy
machine is preempted in some rounds and not in others: a handful of rounds
gave ratios that did not reproduce). ``--repeats`` cycles through
the conditions that many times (their rounds pooled): a busy spell of the
shared machine then falls on several conditions, not one.

Prints per condition the median (min) ms of each job, the median of the
per-round ratios fit / numpy pass and default / ``n_jobs=1``; then each
condition's ratio to the idle one, against the targets (at most 1.5x the
idle ratio, and default at most 1.25x ``n_jobs=1``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHAPES = ["1000000x10", "1000000x2", "10000x100", "50000x1000"]
CONDITIONS = ["idle", "hogs2", "hogs4", "taskset", "quota"]
HOGS = {"idle": 0, "hogs2": 2, "hogs4": 4, "taskset": 2, "quota": 2}
JOBS = ["numpy f32 pass", "grid", "grid n_jobs=1", "continuous", "continuous n_jobs=1"]


# --- the child: one condition's rounds -----------------------------------------


def _jobs(z, y, floor_pass, f32_block, scaler):
    def fit(**params):
        return lambda: scaler(**params).fit(z, y)

    return {
        "numpy f32 pass": lambda: floor_pass(z, y, f32_block),
        "grid": fit(),
        "grid n_jobs=1": fit(n_jobs=1),
        "continuous": fit(solver="continuous"),
        "continuous n_jobs=1": fit(solver="continuous", n_jobs=1),
    }


def child(shapes: list[str], n_rounds: int, seconds: float) -> dict:
    sys.path.insert(0, str(HERE))
    from bench_fit import _f32_block, floor_pass, synthetic

    from skts import TemperatureScaler
    from skts._numerics import _threads

    warnings.simplefilter("ignore")
    out = {"cpus": _threads.cpu_count(), "shapes": {}}
    for shape in shapes:
        n, k = (int(v) for v in shape.split("x"))
        z, y = synthetic(n, k)
        jobs = _jobs(z, y, floor_pass, _f32_block, TemperatureScaler)
        t = time.perf_counter()
        for fn in jobs.values():
            fn()  # (warm-up)
        # Short fits get more rounds: at least `seconds` of rounds (a fit of
        # a few ms on a busy machine is preempted in some rounds, not others).
        one_round = time.perf_counter() - t
        count = max(n_rounds, min(400, math.ceil(seconds / max(one_round, 1e-6))))
        times = {name: [] for name in jobs}
        order = random.Random(n + k)
        for _ in range(count):
            names = list(jobs)
            order.shuffle(names)
            for name in names:
                t = time.perf_counter()
                jobs[name]()
                times[name].append(time.perf_counter() - t)
        out["shapes"][shape] = {
            "threads": _threads.kernel_threads(None, n * k),
            "times": times,
        }
    return out


# --- the parent: conditions ---------------------------------------------------------


def _cgroup():
    """A new cgroup with a quota of one CPU, and the file a process writes
    its pid to; or ``(None, reason)``."""
    sys.path.insert(0, str(HERE.parent / "tests"))
    from test_threads import own_cpu_cgroup

    found, reason = own_cpu_cgroup()
    if found is None:
        return None, reason
    parent, version = found
    folder = os.path.join(parent, f"skts-bench-{os.getpid()}")
    try:
        os.mkdir(folder)
        if version == "v1":
            Path(folder, "cpu.cfs_period_us").write_text("100000")
            Path(folder, "cpu.cfs_quota_us").write_text("100000")
            return (folder, os.path.join(folder, "tasks")), ""
        Path(folder, "cpu.max").write_text("100000 100000")
        return (folder, os.path.join(folder, "cgroup.procs")), ""
    except OSError as exc:
        return None, f"no cgroup could be made here ({exc})"


def _loadavg() -> float:
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except OSError:
        return float("nan")


def run_condition(name, shapes, n_rounds, seconds, cgroup):
    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(HOGS[name])
    ]
    setup = None
    if name == "taskset":

        def setup():
            os.sched_setaffinity(0, {0})

    elif name == "quota":
        tasks = cgroup[1]

        def setup():
            Path(tasks).write_text(str(os.getpid()))

    try:
        time.sleep(0.5 if hogs else 0)  # (the hogs get going)
        before = _loadavg()
        run = subprocess.run(
            [sys.executable, __file__, "--child", "--shapes", ",".join(shapes),
             "--rounds", str(n_rounds), "--seconds", str(seconds)],
            preexec_fn=setup, capture_output=True, text=True,
            env={**os.environ, "OMP_NUM_THREADS": ""},
        )  # fmt: skip
        after = _loadavg()
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    if run.returncode != 0:
        raise SystemExit(f"condition {name}: {run.stderr.strip().splitlines()[-1]}")
    out = json.loads(run.stdout)
    out["load"] = (before, after)
    return out


def _per_round(a, b):
    return statistics.median(x / y for x, y in zip(a, b, strict=True))


def ms(v):
    return f"{1e3 * v:.1f}"


def report(results, shapes):
    idle = results.get("idle")
    for name, res in results.items():
        loads = ", ".join(f"{a:.1f}-{b:.1f}" for a, b in res["load"])
        print(
            f"\n### {name}: {HOGS[name]} hogs, skts counts {res['cpus']} CPU(s), "
            f"load average {loads}\n"
        )
        print(
            "| shape | threads | numpy f32 pass ms | grid ms | grid n_jobs=1 ms "
            "| grid / pass | grid / n_jobs=1 | continuous ms | continuous n_jobs=1 ms "
            "| continuous / pass | continuous / n_jobs=1 |"
        )
        print("|" + "---|" * 11)
        for shape in shapes:
            t = res["shapes"][shape]["times"]
            cell = {j: f"{ms(statistics.median(t[j]))} ({ms(min(t[j]))})" for j in JOBS}
            print(
                f"| {shape} | {res['shapes'][shape]['threads']} "
                f"| {cell['numpy f32 pass']} | {cell['grid']} "
                f"| {cell['grid n_jobs=1']} "
                f"| {_per_round(t['grid'], t['numpy f32 pass']):.2f} "
                f"| {_per_round(t['grid'], t['grid n_jobs=1']):.2f} "
                f"| {cell['continuous']} | {cell['continuous n_jobs=1']} "
                f"| {_per_round(t['continuous'], t['numpy f32 pass']):.2f} "
                f"| {_per_round(t['continuous'], t['continuous n_jobs=1']):.2f} |"
            )
    if idle is None:
        return
    print(
        "\n### Against the targets: (a) the fit's ratio to the pass over the idle "
        "one (<= 1.5); (a1) where skts uses fewer threads than idle, over the "
        "idle ratio of n_jobs=1 (the same threads); (b) default / n_jobs=1 "
        "(<= 1.25)\n"
    )
    print(
        "| condition | shape | grid (a) | grid (a1) | grid (b) "
        "| continuous (a) | continuous (a1) | continuous (b) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    worst = {"a": 0.0, "a1": 0.0, "b": 0.0}
    for name, res in results.items():
        for shape in shapes:
            t, t0 = res["shapes"][shape]["times"], idle["shapes"][shape]["times"]
            # (fewer threads than idle: a CPU limit, or a short pass on a
            # busy machine)
            fewer = res["shapes"][shape]["threads"] < idle["shapes"][shape]["threads"]
            cells = []
            for solver in ("grid", "continuous"):
                ratio = _per_round(t[solver], t["numpy f32 pass"])
                a = ratio / _per_round(t0[solver], t0["numpy f32 pass"])
                one = f"{solver} n_jobs=1"
                a1 = ratio / _per_round(t0[one], t0["numpy f32 pass"]) if fewer else a
                b = _per_round(t[solver], t[one])
                for key, v in (("a", a), ("a1", a1), ("b", b)):
                    worst[key] = max(worst[key], v)
                cells += [f"{a:.2f}", f"{a1:.2f}" if fewer else "", f"{b:.2f}"]
            print(f"| {name} | {shape} | " + " | ".join(cells) + " |")
    print(
        f"\nworst: (a) {worst['a']:.2f}, (a1) {worst['a1']:.2f}, (b) {worst['b']:.2f}"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--conditions", default=",".join(CONDITIONS))
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--seconds",
        type=float,
        default=4.0,
        help="at least this long of rounds per shape (more rounds for short fits)",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    shapes = args.shapes.split(",")
    if args.child:
        print(json.dumps(child(shapes, args.rounds, args.seconds)))
        return
    conditions = args.conditions.split(",")
    cgroup = None
    if "quota" in conditions:
        cgroup, reason = _cgroup()
        if cgroup is None:
            print(f"(no quota condition: {reason})")
            conditions.remove("quota")
    if "taskset" in conditions and not hasattr(os, "sched_setaffinity"):
        print("(no taskset condition: no affinity API here)")
        conditions.remove("taskset")
    import numpy

    import skts

    print(
        f"skts {skts.__version__}, numpy {numpy.__version__}, {os.cpu_count()} CPUs, "
        f"at least {args.rounds} rounds and {args.seconds} s of rounds per shape, "
        f"x {args.repeats} repeats per condition"
    )
    results: dict = {}
    try:
        for _ in range(args.repeats):
            for name in conditions:
                res = run_condition(name, shapes, args.rounds, args.seconds, cgroup)
                if name not in results:
                    results[name] = {**res, "load": [res["load"]]}
                    continue
                results[name]["load"].append(res["load"])
                for shape in shapes:
                    for job, v in res["shapes"][shape]["times"].items():
                        results[name]["shapes"][shape]["times"][job] += v
    finally:
        if cgroup is not None:
            os.rmdir(cgroup[0])
    report(results, shapes)


if __name__ == "__main__":
    main()
