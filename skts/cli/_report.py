"""``skts report``: calibration metrics, before (and after)."""

from __future__ import annotations

import argparse
import json

from skts import __version__
from skts.cli._common import (
    SCHEMA_VERSION,
    CLIError,
    _compare_lib,
    _fit_lib,
    _validation,
    add_inputs,
    command_parser,
)
from skts.cli._inputs import (
    _dask_errors,
    _load_calibration,
    _load_logits,
    _load_pair,
    _scheduler,
)
from skts.cli._outputs import _check_out_suffix, _check_outputs
from skts.cli._progress import _progress_for
from skts.cli._reports import (
    _check_lazy_options,
    _format_groups,
    _format_table,
    _load_groups,
    _plot_reliability,
    _report_pair,
)


def format_parser(subparsers) -> None:
    """``skts report``'s options."""
    p = command_parser(
        subparsers,
        "report",
        "calibration metrics, before (and after)",
        "Calibration metrics of the logits as they are (T = 1)\n"
        "and, with --calibration, after dividing them by T.",
    )
    add_inputs(p, labels=True)
    p.add_argument("--calibration", help="JSON from 'skts fit'")
    p.add_argument("--plot", help="write a reliability diagram (.png/.pdf/.svg)")
    p.add_argument(
        "--groups",
        help="a group label per row (.npy, .npz, .csv or .txt): each group's "
        "metrics beside the overall ones",
    )
    p.add_argument(
        "--compare",
        metavar="OTHER",
        help="logits of another model or calibrator on the same rows (any "
        "logits format): every metric's difference OTHER - these, with paired "
        "bootstrap intervals (--bootstrap)",
    )
    p.add_argument("--compare-key", help="the array of an OTHER file holding several")
    p.add_argument("--json", action="store_true", help="print JSON, not a table")
    p.add_argument(
        "--bootstrap",
        type=int,
        default=0,
        help="bootstrap resamples (streamed: any number, bounded memory)",
    )
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    inputs = (
        [args.logits, args.labels]
        + ([args.calibration] if args.calibration else [])
        + ([args.groups] if args.groups else [])
        + ([args.compare] if args.compare else [])
    )
    _check_outputs([args.plot], inputs, args.force)
    _check_out_suffix(args.plot, (".png", ".pdf", ".svg"))
    calib = _load_calibration(args.calibration) if args.calibration else None
    _check_lazy_options(args)
    with _scheduler(args.scheduler), _dask_errors("reading the shards"):
        y, logits, keep, y_rows = _load_pair(args)
        if calib is not None and logits.shape[1] != calib["n_classes"]:
            raise CLIError(
                f"logits file {args.logits!r} has {logits.shape[1]} columns but the "
                f"calibration was fitted on {calib['n_classes']} classes"
            )
        if _validation.is_dask_array(logits):
            _fit_lib.rows_for(logits, y)  # checks the rows: one pass
        t = None if calib is None else calib["temperature"]
        groups = None
        every = logits.shape[0] if keep is None else y_rows
        if args.groups:
            groups = _load_groups(args.groups, every)  # one per row or position
            groups = groups if keep is None else groups[keep]
        comparison = None
        if args.compare:
            other = _load_logits(
                args.compare, args.compare_key, lazy=False, class_axis=args.class_axis
            )
            if keep is not None and other.shape[0] == every:
                other = _validation.kept_rows(other, keep)
            if other.shape != logits.shape:
                raise CLIError(
                    f"--compare file {args.compare!r} has shape {other.shape} but "
                    f"the logits have {logits.shape}: compare forecasts of the "
                    "same rows and classes"
                )
            with _progress_for(args)(logits.shape[0], "compare") as bar:
                comparison = _compare_lib.streamed_comparison(
                    logits, 1.0 if t is None else t, other, 1.0, y,
                    args.bootstrap, args.seed, bar,
                )  # fmt: skip
        metrics = _report_pair(
            logits,
            y,
            t,
            args.bootstrap,
            groups,
            seed=args.seed,
            progress=_progress_for(args),
        )
    if args.plot:
        _plot_reliability(args.plot, logits, y, t, args.force, groups)
    if args.json:
        out = {
            "schema_version": SCHEMA_VERSION,
            "skts_version": __version__,
            "temperature": t,
            "n_samples": int(logits.shape[0]),
            "n_classes": int(logits.shape[1]),
            "metrics": metrics,
        }
        if comparison is not None:
            out["comparison"] = {
                "sources": {
                    "a": {"logits": args.logits, "temperature": t},
                    "b": {"logits": args.compare, "temperature": None},
                },
                **comparison.to_dict(),
            }
        print(json.dumps(out, indent=2))
    else:
        if t is not None:
            print(f"temperature: {t:.6g}")
        print(_format_table(metrics))
        if groups is not None:
            print(_format_groups(metrics))
        if comparison is not None:
            at = "" if t is None else f" / T = {t:.6g}"
            print(f"\ncompared: a = {args.logits}{at}, b = {args.compare}")
            print(comparison)
        if args.plot:
            print(f"reliability diagram -> {args.plot}")
    return 0
