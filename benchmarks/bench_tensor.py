"""Fitting on PyTorch tensors costs what fitting on the NumPy array costs.

For each input kind (the NumPy float32 array; the same memory as a float32
tensor, also with ``requires_grad``; a bfloat16 and a float16 tensor) a fresh
process builds the logits, resets the kernel's peak-RSS counter
(``/proc/self/clear_refs``), fits ``TemperatureScaler`` and reports the
extra peak memory (``VmHWM`` minus the resident memory before the fit) and
the fit time (min and median of ``--repeat`` fits in that process). Kinds
run interleaved, ``--rounds`` times each.

    python benchmarks/bench_tensor.py --rows 50000 --classes 1000

``--python`` runs another interpreter (e.g. an older skts) on the same
inputs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile

_CHILD = r"""
import json, sys, time
import numpy as np, torch
from skts import TemperatureScaler
kind, n, k, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = np.random.default_rng(0)
z = (rng.standard_normal((n, k), dtype=np.float32) * 3)
# labels: the argmax of the logits 60% of the time
y = np.where(rng.random(n) < 0.6, z.argmax(axis=1), rng.integers(0, k, n))
if kind == "numpy float32":
    x = z
elif kind == "tensor float32":
    x = torch.from_numpy(z)
elif kind == "tensor float32 (requires_grad)":
    x = torch.from_numpy(z).requires_grad_()
else:
    x = torch.from_numpy(z).to(getattr(torch, kind.split()[-1]))
    del z
def status(key):
    with open("/proc/self/status") as fh:
        return next(int(l.split()[1]) for l in fh if l.startswith(key + ":"))
times = []
extra = []
for _ in range(repeat):
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # reset VmHWM to the current RSS
    base = status("VmRSS")
    start = time.perf_counter()
    t = TemperatureScaler().fit(x, y).temperature_
    times.append(time.perf_counter() - start)
    extra.append((status("VmHWM") - base) / 1024)
print(json.dumps({"t": t, "times": times, "extra_mib": extra}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--classes", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    kinds = [
        "numpy float32",
        "tensor float32",
        "tensor float32 (requires_grad)",
        "tensor bfloat16",
        "tensor float16",
    ]
    results = {kind: {"times": [], "extra": [], "t": set()} for kind in kinds}
    for _ in range(args.rounds):
        for kind in kinds:
            r = subprocess.run(
                [args.python, "-c", _CHILD, kind, str(args.rows), str(args.classes),
                 str(args.repeat)],
                capture_output=True, text=True, check=False,
                cwd=tempfile.gettempdir(),  # not the repository's skts
            )  # fmt: skip
            if r.returncode != 0:  # (an older skts may refuse a kind)
                results[kind]["error"] = r.stderr.strip().splitlines()[-1]
                continue
            out = json.loads(r.stdout)
            results[kind]["times"] += out["times"]
            results[kind]["extra"] += out["extra_mib"]
            results[kind]["t"].add(out["t"])
    size = args.rows * args.classes * 4 / 2**20
    print(
        f"{args.rows} x {args.classes} logits ({size:.0f} MiB as float32), "
        f"{args.rounds} rounds x {args.repeat} fits, python {args.python}"
    )
    print(f"{'input':<32}{'fit s min/med':>16}{'extra MiB min/med':>20}  T")
    for kind, r in results.items():
        if not r["times"]:
            print(f"{kind:<32}  fails: {r['error'][:70]}")
            continue
        print(
            f"{kind:<32}{min(r['times']):>7.3f} / {statistics.median(r['times']):<6.3f}"
            f"{min(r['extra']):>9.0f} / {statistics.median(r['extra']):<8.0f}"
            f"  {sorted(r['t'])}"
        )


if __name__ == "__main__":
    main()
