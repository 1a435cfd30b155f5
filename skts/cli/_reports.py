"""The metrics before and after, as the commands report them."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from skts._numerics import (
    softmax,
)
from skts.cli._common import (
    CLIError,
    _metrics,
    _report_lib,
    _validation,
)
from skts.cli._inputs import _dask_backend, _is_shards, _load_array
from skts.cli._outputs import _atomic_outputs
from skts.cli._progress import _NoBar


def _report_pair(
    logits,
    y,
    temperature: float | None,
    n_bootstrap: int,
    groups=None,
    *,
    seed: int = 0,
    progress=None,
) -> dict:
    """Metrics before (T = 1) and after calibration, as plain dicts (with
    ``groups``, each group's metrics too, under ``"groups"``).

    Streamed: the rows are read block by block, bootstrap included, so a
    large memory-mapped file is never held in memory as probabilities.
    """
    temps = {"before": 1.0}
    if temperature is not None:
        temps["after"] = temperature
    if _validation.is_dask_array(logits):
        return _report_pair_lazy(logits, y, temps)
    progress = progress or (lambda total, desc: _NoBar())

    def reports(z, labels, desc: str) -> dict[str, dict]:
        with progress(z.shape[0], desc) as bar:
            parts = _report_lib.streamed_reports(
                z, labels, list(temps.values()), n_bootstrap, seed, bar
            )
        return {name: r.to_dict() for name, r in zip(temps, parts, strict=True)}

    out = reports(logits, y, "report")
    if groups is not None:
        for g in np.unique(groups):
            idx = np.flatnonzero(groups == g)
            part = reports(_Take(logits, idx), y[idx], f"group {g}")
            for name, r in part.items():
                out[name].setdefault("groups", {})[str(g)] = r
    return out


class _Take:
    """The rows ``idx`` of ``logits``, read block by block."""

    def __init__(self, logits, idx: NDArray):
        self.logits, self.idx = logits, idx
        self.shape = (idx.shape[0], logits.shape[1])

    def __getitem__(self, rows):
        return self.logits[self.idx[rows]]


def _load_groups(path: str, n_samples: int) -> NDArray:
    """A group label per row: any values (numbers or text) in .npy, .npz,
    .csv or .txt, one per line."""
    p = Path(path)
    if p.suffix.lower() in (".csv", ".txt") and p.is_file():
        try:
            arr = np.loadtxt(p, dtype=str, ndmin=1, delimiter=",")
        except (OSError, ValueError) as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise CLIError(f"cannot read groups file {path!r}: {reason}") from None
    else:
        arr = np.asarray(_load_array(path, what="groups"))
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise CLIError(f"groups file {path!r} must be 1-D; got shape {arr.shape}")
    if arr.shape[0] != n_samples:
        raise CLIError(
            f"the logits have {n_samples} rows but groups file {path!r} has "
            f"{arr.shape[0]} labels"
        )
    return _validation.check_groups(arr, n_samples, name=f"groups file {path!r}")


def _check_lazy_options(args: argparse.Namespace) -> None:
    """Options that need the rows in memory, refused before any work."""
    lazy = args.scheduler is not None or _is_shards(args.logits)
    if not lazy:
        return
    if getattr(args, "bootstrap", 0):
        raise CLIError(
            "--bootstrap resamples rows in memory; it is not available with "
            "shards or --scheduler"
        )
    if getattr(args, "plot", None):
        raise CLIError("--plot needs the rows in memory; not available with shards")
    if getattr(args, "groups", None):
        raise CLIError("--groups needs the rows in memory; not available with shards")
    if getattr(args, "compare", None):
        raise CLIError(
            "--compare reads both files block by block from one machine; not "
            "available with shards or --scheduler"
        )


def _report_pair_lazy(logits, y, temps: dict) -> dict:
    """:func:`_report_pair` on a Dask array: one reduction over the chunks,
    both temperatures at once (the inputs were checked by the fit's pass;
    ``--bootstrap`` was refused by :func:`_check_lazy_options`)."""
    import dask

    backend = _dask_backend()
    n, k = logits.shape
    y = backend._along(y, logits.chunks[0], "labels", n)
    if not _validation.is_dask_array(y):  # one labels file beside shards of logits
        import dask.array as da

        y = da.from_array(y, chunks=(logits.chunks[0],))
    pairs = list(zip(logits.to_delayed().ravel(), y.to_delayed().ravel(), strict=True))
    part = dask.delayed(_report_lib.report_sums_from_logits, pure=True)
    tasks = {name: [part(z, yy, t) for z, yy in pairs] for name, t in temps.items()}
    computed = dask.compute(tasks)[0]
    return {
        name: _metrics.CalibrationReport(
            n, _report_lib.report_from_sums(sum(parts), k, 15)
        ).to_dict()
        for name, parts in computed.items()
    }


def _format_table(metrics: dict) -> str:
    """Metrics before (and after) as a text table, with intervals when present."""
    parts = [("before", metrics["before"])]
    if "after" in metrics:
        parts.append(("after", metrics["after"]))
    level = metrics["before"].get("confidence_level", 0.95)
    with_ci = bool(metrics["before"]["intervals"])
    head = f"{'metric':<15}"
    for label, _ in parts:
        head += f"{label:>10}"
        if with_ci:
            head += f"  {f'{level:.0%} interval':<18}"
    lines = [head.rstrip()]
    for name in metrics["before"]["values"]:
        line = f"{name:<15}"
        for _, part in parts:
            line += f"{part['values'][name]:>10.4f}"
            if with_ci:
                lo, hi = part["intervals"][name]
                line += f"  [{lo:.4f}, {hi:.4f}]"
        lines.append(line)
    return "\n".join(lines)


def _format_groups(metrics: dict) -> str:
    """Each group's metrics (after calibration, when there is one) beside
    those of all rows."""
    when = "after" if "after" in metrics else "before"
    part = metrics[when]
    heads = [f"all (n={part['n_samples']})"] + [
        f"{g} (n={r['n_samples']})" for g, r in part["groups"].items()
    ]
    width = max(12, *(len(h) + 2 for h in heads))
    lines = [
        f"by group ({when})",
        f"{'metric':<15}" + "".join(f"{h:>{width}}" for h in heads),
    ]
    for name in part["values"]:
        values = [part["values"][name]] + [
            r["values"][name] for r in part["groups"].values()
        ]
        lines.append(f"{name:<15}" + "".join(f"{v:>{width}.4f}" for v in values))
    return "\n".join(lines)


def _plot_reliability(
    path: str, logits, y, temperature, force: bool, groups=None
) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise CLIError(
            "--plot needs matplotlib: pip install matplotlib (skts's 'plot' extra)"
        ) from None
    from skts._display import ReliabilityDisplay

    labels = np.arange(logits.shape[1])
    if groups is not None:
        # One diagram (calibrated when there is a temperature), a line per group.
        t = 1.0 if temperature is None else temperature
        disp = ReliabilityDisplay.from_predictions(
            y,
            softmax(logits, t),
            labels=labels,
            name="uncalibrated" if temperature is None else f"T = {t:.4g}",
            groups=groups,
        )
    else:
        disp = ReliabilityDisplay.from_predictions(
            y, softmax(logits, 1.0), labels=labels, name="uncalibrated"
        )
    if temperature is not None and groups is None:
        ReliabilityDisplay.from_predictions(
            y,
            softmax(logits, temperature),
            labels=labels,
            name=f"T = {temperature:.4g}",
            kind="line",
            ax=disp.ax_,
            hist_ax=disp.hist_ax_,
        )
    with _atomic_outputs([path], force) as (tmp,):
        disp.figure_.savefig(tmp, format=Path(path).suffix.lstrip(".").lower())
    plt.close(disp.figure_)
