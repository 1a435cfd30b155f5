"""``skts fit``: choose T on validation logits."""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from types import SimpleNamespace

import numpy as np

from skts import __version__
from skts._numerics import (
    BoundaryTemperatureWarning,
)
from skts.cli._common import (
    SCHEMA_VERSION,
    STDOUT,
    CLIError,
    _fit_lib,
    _validation,
    add_inputs,
    command_parser,
)
from skts.cli._inputs import (
    _dask_errors,
    _is_shards,
    _load_pair,
    _scheduler,
    _tolerance,
    finiteness_test,
    parse_temperatures,
)
from skts.cli._outputs import _atomic_outputs, _check_out_suffix, _check_outputs
from skts.cli._progress import _Counted, _progress_for
from skts.cli._reports import _check_lazy_options, _load_groups, _report_pair


def format_parser(subparsers) -> None:
    """``skts fit``'s options."""
    p = command_parser(
        subparsers,
        "fit",
        "choose T on validation logits",
        "Choose the temperature T on held-out (validation) logits\n"
        "and write it, with the metrics before and after, as JSON.",
    )
    add_inputs(p, labels=True)
    p.add_argument(
        "--temperatures",
        help="candidates, '0.5,1,2' or 'geom:LOW:HIGH:COUNT' (default: "
        "geom:0.01:100:1001, the library's 1001-point grid)",
    )
    p.add_argument(
        "--solver",
        choices=["grid", "continuous"],
        default="grid",
        help="the exact rule over the candidates, or a continuous minimiser "
        "over their range",
    )
    p.add_argument(
        "--tol", type=_tolerance, default=1e-10, help="continuous tolerance, in (0, 1)"
    )
    p.add_argument(
        "--groups",
        metavar="FILE|predicted",
        help="a temperature per group: a group label per row (.npy, .npz, "
        ".csv or .txt: metadata known when the calibration is applied), or "
        "'predicted' (the predicted class); each group's T follows the exact "
        "rule on its rows, pulled toward the pooled T; labels never change",
    )
    p.add_argument(
        "--group-shrinkage",
        type=_strength,
        default="cv",
        metavar="ROWS|cv",
        help="with --groups: how far each group's T is pulled toward the pooled "
        "one, in rows ('cv': chosen by cross-validation)",
    )
    p.add_argument("--bootstrap", type=int, default=0, help="bootstrap resamples")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    p.add_argument(
        "--out", required=True, help="calibration JSON to write ('-': stdout)"
    )
    p.set_defaults(func=main)


def _strength(text: str):
    """``--group-shrinkage``: 'cv', or a number of rows >= 0 ('inf' allowed)."""
    if text == "cv":
        return text
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise argparse.ArgumentTypeError(
            f"must be 'cv' or a number of rows >= 0; got {text!r}"
        )
    return value


def _fit_groups(args, logits, y, temperatures) -> tuple:
    """The pooled result and the calibration's per-group part."""
    from skts import TemperatureScaler

    if getattr(logits, "layout", None) is not None or args.ignore_index is not None:
        raise CLIError(
            "--groups needs 2-D logits (one row per sample), without --ignore-index"
        )
    predicted = args.groups == "predicted"
    groups = "predicted" if predicted else _load_groups(args.groups, logits.shape[0])
    scaler = TemperatureScaler(
        temperatures,
        solver=args.solver,
        tol=args.tol,
        group_shrinkage=args.group_shrinkage,
    ).fit(logits, y, groups=groups)
    result = SimpleNamespace(
        temperature=scaler.temperature_,
        loss=scaler.validation_loss_,
        at_boundary=scaler.at_boundary_,
    )
    part = {
        "groups": "predicted" if predicted else "labels",
        "group_shrinkage": scaler.group_shrinkage_,
        # JSON keys are text: a label's str() (the class index for "predicted")
        "temperatures_by_group": {
            str(g): t for g, t in scaler.temperatures_by_group_.items()
        },
    }
    return result, part


def main(args: argparse.Namespace) -> int:
    files = [o for o in [args.out] if o != STDOUT]
    _check_outputs(files, [args.logits, args.labels], args.force)
    for o in files:
        _check_out_suffix(o, (".json",))
    temperatures = parse_temperatures(args.temperatures)
    _check_lazy_options(args)
    progress = _progress_for(args)
    if args.groups and (args.scheduler is not None or _is_shards(args.logits)):
        raise CLIError("--groups needs the rows in memory; not available with shards")
    by_group = {}
    with _scheduler(args.scheduler), _dask_errors("reading the shards"):
        # (the fit's reads test the logits' finiteness: one read fewer; the
        # groups' fits read subsets, so their logits are tested first)
        y, logits, _, _ = _load_pair(args, finite=bool(args.groups))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", BoundaryTemperatureWarning)
            options = {"solver": args.solver, "tol": args.tol}
            if args.groups:
                result, by_group = _fit_groups(args, logits, y, temperatures)
            elif _validation.is_dask_array(logits):
                rows = _fit_lib.rows_for(logits, y)
                result = _fit_lib.fit_temperature(rows, temperatures, **options)
            else:
                with progress(logits.shape[0], "fit") as bar:
                    rows = _fit_lib.host_rows(
                        _Counted(logits, bar, "fit"),
                        y,
                        untested=finiteness_test(logits, args.logits),
                    )
                    result = _fit_lib.fit_temperature(rows, temperatures, **options)
        metrics = _report_pair(
            logits,
            y,
            result.temperature,
            args.bootstrap,
            seed=args.seed,
            progress=progress,
        )
    for w in caught:
        print(f"skts fit: warning: {w.message}", file=sys.stderr)
    grid = np.unique(temperatures)
    calib = {
        "schema_version": SCHEMA_VERSION,
        "skts_version": __version__,
        "temperature": result.temperature,
        "solver": args.solver,
        "validation_loss": result.loss,
        "at_boundary": bool(result.at_boundary),
        "n_samples": int(logits.shape[0]),
        "n_classes": int(logits.shape[1]),
        "candidates": {
            "count": int(grid.size),
            "min": float(grid[0]),
            "max": float(grid[-1]),
            "spec": args.temperatures or "geom:0.01:100:1001",
            # The candidates used, sorted and unique (floats round-trip JSON).
            "values": grid.tolist(),
        },
        "metrics": metrics,
        **by_group,
    }
    if args.out == STDOUT:
        json.dump(calib, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        with _atomic_outputs([args.out], args.force) as (tmp,):
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(calib, fh, indent=2)
                fh.write("\n")
    if by_group:
        temps = by_group["temperatures_by_group"]
        print(
            f"{len(temps)} groups: T from {min(temps.values()):.6g} to "
            f"{max(temps.values()):.6g} (shrinkage {by_group['group_shrinkage']:g} "
            "rows)",
            file=sys.stderr if args.out == STDOUT else sys.stdout,
        )
    print(
        f"T = {result.temperature:.6g} (validation NLL {result.loss:.6g}, "
        f"{logits.shape[0]} samples, {logits.shape[1]} classes) -> "
        f"{'stdout' if args.out == STDOUT else args.out}",
        file=sys.stderr if args.out == STDOUT else sys.stdout,
    )
    return 0
