"""``skts apply``: write calibrated probabilities."""

from __future__ import annotations

import argparse
import sys

import numpy as np

from skts._numerics import (
    log_softmax,
    softmax,
)
from skts.cli._common import (
    STDOUT,
    CLIError,
    _validation,
    add_inputs,
    command_parser,
)
from skts.cli._inputs import (
    _dask_errors,
    _load_calibration,
    _load_logits,
    _scheduler,
)
from skts.cli._outputs import (
    _atomic_outputs,
    _check_out_suffix,
    _check_outputs,
    _write_rows,
)
from skts.cli._progress import _progress_for
from skts.cli._reports import _load_groups


def format_parser(subparsers) -> None:
    """``skts apply``'s options."""
    p = command_parser(
        subparsers,
        "apply",
        "write calibrated probabilities",
        "Write softmax(logits / T) (or its log) and/or the\n"
        "predicted classes, block by block.",
    )
    add_inputs(p, labels=False)
    p.add_argument("--calibration", required=True, help="JSON from 'skts fit'")
    p.add_argument("--out", help="probabilities, .npy or .csv ('-': CSV on stdout)")
    p.add_argument("--log", action="store_true", help="write log-probabilities")
    p.add_argument(
        "--dtype",
        choices=["float32", "float64"],
        help="of the written probabilities (default: the input's, at least float32)",
    )
    p.add_argument(
        "--labels-out", help="predicted class indices, .npy or .csv ('-': stdout)"
    )
    p.add_argument(
        "--groups",
        metavar="FILE|predicted",
        help="with a calibration fitted with --groups: each row's group (a "
        "file with a label per row, or 'predicted'); a group not seen in fit "
        "gets the pooled T, with a warning (default: 'predicted' for a "
        "calibration by predicted class, else the pooled T)",
    )
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    outputs = [args.out, args.labels_out]
    if args.out is None and args.labels_out is None:
        raise CLIError("nothing to write: give --out and/or --labels-out")
    if outputs.count(STDOUT) > 1:
        raise CLIError("only one of --out and --labels-out can be '-' (stdout)")
    files = [o for o in outputs if o not in (None, STDOUT)]
    _check_outputs(files, [args.logits, args.calibration], args.force)
    for o in files:
        _check_out_suffix(o, (".npy", ".csv", ".txt"))
    calib = _load_calibration(args.calibration)
    with _scheduler(args.scheduler), _dask_errors("reading the shards"):
        logits = _load_logits(
            args.logits,
            args.key,
            lazy=args.scheduler is not None,
            warn=False,
            class_axis=args.class_axis,
        )
        return _apply_to(args, calib, logits, outputs)


def _temperatures_of(args, calib, logits):
    """``(f, by_group)``: ``f(fn, block, rows)`` is ``fn`` (softmax or its
    log) of a block of rows at each row's temperature (its group's, or the
    pooled one), ``by_group`` whether the groups' temperatures are used."""
    t = calib["temperature"]
    table = calib.get("temperatures_by_group")
    kind = calib.get("groups")
    groups = args.groups or ("predicted" if kind == "predicted" else None)
    if table is None or groups is None:
        if args.groups:
            raise CLIError(
                f"--groups given, but calibration {args.calibration!r} has no "
                "temperatures per group (fit it with --groups)"
            )
        if table is not None:
            print(
                "skts apply: warning: the calibration has a temperature per group; "
                "without --groups every row gets the pooled T",
                file=sys.stderr,
            )
        return (lambda fn, block, rows: fn(block, t)), False
    if getattr(logits, "layout", None) is not None:
        raise CLIError("--groups needs 2-D logits (one row per sample)")
    if (groups == "predicted") != (kind == "predicted"):
        fitted = "the predicted class" if kind == "predicted" else "a groups file"
        raise CLIError(
            f"calibration {args.calibration!r} has temperatures per {fitted}; "
            f"--groups {groups!r} does not match it"
        )
    if groups == "predicted":
        labels = None
    else:
        labels = np.asarray(_load_groups(groups, logits.shape[0])).astype(str)
    unseen = []

    def apply(fn, block, rows):
        keys = np.argmax(block, axis=1).astype(str) if labels is None else labels[rows]
        distinct, codes = np.unique(keys, return_inverse=True)
        temps = np.array([table.get(key, np.nan) for key in distinct.tolist()])
        if np.isnan(temps).any() and not unseen:
            unseen.append(str(distinct[np.isnan(temps)][0]))
            print(
                f"skts apply: warning: group {unseen[0]!r} was not seen in fit: "
                f"its rows get the pooled T = {t:.6g}",
                file=sys.stderr,
            )
        temps = np.where(np.isnan(temps), t, temps)
        out = None
        for c, value in enumerate(temps.tolist()):
            idx = np.flatnonzero(codes.reshape(-1) == c)
            part = fn(block[idx], value)
            if out is None:
                out = np.empty((block.shape[0], *part.shape[1:]), dtype=part.dtype)
            out[idx] = part
        return out

    return apply, True


def _apply_to(args, calib, logits, outputs) -> int:
    if logits.shape[1] != calib["n_classes"]:
        raise CLIError(
            f"logits file {args.logits!r} has {logits.shape[1]} columns but the "
            f"calibration was fitted on {calib['n_classes']} classes"
        )
    t = calib["temperature"]
    n, k = logits.shape
    per_row, by_group = _temperatures_of(args, calib, logits)
    paths = [o for o in outputs if o not in (None, STDOUT)]
    step = None
    read = logits.__getitem__
    if _validation.is_dask_array(logits):
        # Rows come from the shards in pieces of about 4M values, each
        # checked as the in-memory reader checks a whole file.
        step = max(1, (1 << 22) // k)

        def read(rows):
            try:
                return _validation.check_logits(
                    np.asarray(logits[rows]), name=f"logits {args.logits!r}"
                )
            except ValueError as exc:
                raise CLIError(str(exc).rstrip(".")) from None

    # The input's precision, at least float32, unless --dtype says otherwise.
    dtype = np.dtype(
        args.dtype or (np.float64 if logits.dtype == np.float64 else np.float32)
    )
    progress = _progress_for(args)
    with _atomic_outputs(paths, args.force) as temps:
        tmp_of = dict(zip(paths, temps, strict=True))
        tmp_of[STDOUT] = STDOUT
        if args.out is not None:
            fn = softmax if not args.log else log_softmax
            with progress(n, "probabilities") as bar:
                _write_rows(
                    tmp_of[args.out],
                    args.out,
                    n,
                    k,
                    dtype,
                    lambda rows: per_row(fn, read(rows), rows),
                    step,
                    bar,
                    layout=getattr(logits, "layout", None),
                )
        if args.labels_out is not None:
            with progress(n, "labels") as bar:
                _write_rows(
                    tmp_of[args.labels_out],
                    args.labels_out,
                    n,
                    None,
                    np.int64,
                    lambda rows: np.argmax(read(rows), axis=1),
                    step,
                    bar,
                    layout=getattr(logits, "layout", None),
                )
    where = paths + (["stdout"] if STDOUT in outputs else [])
    what = (
        f"T = {t:.6g}"
        if not by_group
        else (f"{len(calib['temperatures_by_group'])} group temperatures")
    )
    print(
        f"applied {what} to {n} rows -> {', '.join(where)}",
        file=sys.stderr if STDOUT in outputs else sys.stdout,
    )
    return 0
