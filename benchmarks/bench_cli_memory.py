"""Peak memory of ``skts apply`` and ``skts report`` (also ``--compare``, two
forecasts with paired resamples) on a large ``.npy`` file.

Each command runs in a fresh process; its memory is sampled from
``/proc/PID/status`` every 10 ms: ``RssAnon`` (memory the process allocated:
what the streaming bounds), ``RssFile`` (pages of memory-mapped files: the
input, and an output written through a memory map) and the kernel's
``VmHWM`` (the high-water mark of both). Reports min and median over
interleaved runs.

    python benchmarks/bench_cli_memory.py --rows 2000000 --classes 100

``--python`` runs another interpreter (e.g. a virtual environment with an
older skts) on the same files: before and after in one table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _make_inputs(folder: Path, n: int, k: int) -> tuple[Path, Path]:
    logits, labels = folder / "logits.npy", folder / "labels.npy"
    rng = np.random.default_rng(0)
    z = np.lib.format.open_memmap(logits, mode="w+", dtype=np.float32, shape=(n, k))
    step = max(1, (1 << 22) // k)
    y = np.empty(n, dtype=np.int64)
    for start in range(0, n, step):
        rows = slice(start, min(start + step, n))
        block = rng.normal(size=(rows.stop - rows.start, k)).astype(np.float32)
        # Labels drawn from softmax(z / 1.5): an overconfident model.
        p = np.exp(block / 1.5 - (block / 1.5).max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        u = rng.random(p.shape[0])[:, None]
        y[rows] = np.minimum((p.cumsum(axis=1) < u).sum(axis=1), k - 1)
        z[rows] = 3.0 * block
    z.flush()
    del z
    np.save(labels, y)
    return logits, labels


def _status(pid: int) -> dict[str, int]:
    out = {}
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key in ("RssAnon", "RssFile", "RssShmem", "VmHWM"):
                    out[key] = int(value.split()[0]) * 1024
    except (FileNotFoundError, ProcessLookupError):
        pass
    return out


def _run(cmd: list[str]) -> dict[str, float]:
    start = time.perf_counter()
    # (cwd: not the repository, whose skts would shadow --python's own.)
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=tempfile.gettempdir(),
    )
    peak = {"RssAnon": 0, "RssFile": 0, "VmHWM": 0}
    while proc.poll() is None:
        for key, value in _status(proc.pid).items():
            if key in peak:
                peak[key] = max(peak[key], value)
        time.sleep(0.01)
    err = proc.stderr.read().decode()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {err}")
    mib = 1 << 20
    return {
        "anon_mib": peak["RssAnon"] / mib,
        "file_mib": peak["RssFile"] / mib,
        "hwm_mib": peak["VmHWM"] / mib,
        "seconds": time.perf_counter() - start,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--classes", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--bootstrap", type=int, default=10)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--folder", help="keep the inputs here (default: temporary)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.folder or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        logits, labels = folder / "logits.npy", folder / "labels.npy"
        if not logits.exists():
            logits, labels = _make_inputs(folder, args.rows, args.classes)
        skts = [args.python, "-m", "skts"]
        calib = folder / "calibration.json"
        subprocess.run(
            [*skts, "fit", "--logits", str(logits), "--labels", str(labels),
             "--out", str(calib), "--force"],
            check=True, capture_output=True,
        )  # fmt: skip
        commands = {
            "apply": [*skts, "apply", "--logits", str(logits), "--calibration",
                      str(calib), "--out", str(folder / "proba.npy"), "--force"],
            "report": [*skts, "report", "--logits", str(logits), "--labels",
                       str(labels), "--calibration", str(calib)],
            f"report --bootstrap {args.bootstrap}": [
                *skts, "report", "--logits", str(logits), "--labels", str(labels),
                "--calibration", str(calib), "--bootstrap", str(args.bootstrap)],
        }  # fmt: skip
        help_text = subprocess.run(
            [*skts, "apply", "--help"], capture_output=True, text=True, check=True
        ).stdout
        report_help = subprocess.run(
            [*skts, "report", "--help"], capture_output=True, text=True, check=True
        ).stdout
        if "--compare" in report_help:  # a second file, paired resamples
            commands[f"report --compare --bootstrap {args.bootstrap}"] = [
                *commands[f"report --bootstrap {args.bootstrap}"],
                "--compare",
                str(logits),
            ]
        if "--dtype" in help_text:  # float64 output, as older versions wrote
            commands["apply --dtype float64"] = [
                *commands["apply"],
                "--dtype",
                "float64",
            ]
        results: dict[str, list[dict]] = {name: [] for name in commands}
        for _ in range(args.repeat):
            for name, cmd in commands.items():
                results[name].append(_run(cmd))
        size = logits.stat().st_size / (1 << 20)
        print(f"input: {args.rows} x {args.classes} float32 ({size:.0f} MiB), "
              f"{args.repeat} interleaved runs, python {args.python}")  # fmt: skip
        print(f"{'command':<36}{'anon MiB min/med':>20}{'file MiB med':>14}"
              f"{'VmHWM MiB med':>15}{'s med':>8}")  # fmt: skip
        for name, runs in results.items():
            anon = [r["anon_mib"] for r in runs]
            print(
                f"{name:<36}{min(anon):>10.0f} / {statistics.median(anon):<7.0f}"
                f"{statistics.median(r['file_mib'] for r in runs):>14.0f}"
                f"{statistics.median(r['hwm_mib'] for r in runs):>15.0f}"
                f"{statistics.median(r['seconds'] for r in runs):>8.1f}"
            )
        print(json.dumps({k: v for k, v in results.items()}))


if __name__ == "__main__":
    main()
