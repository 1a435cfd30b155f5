"""``skts ladder``: which rung of calibration the held-out logits support."""

from __future__ import annotations

import argparse
import json
import sys

from skts.cli._common import STDOUT, CLIError, add_inputs, command_parser
from skts.cli._inputs import _dask_errors, _is_shards, _load_pair, _scheduler
from skts.cli._outputs import _atomic_outputs, _check_out_suffix, _check_outputs
from skts.cli._reports import _load_groups


def format_parser(subparsers) -> None:
    """``skts ladder``'s options."""
    p = command_parser(
        subparsers,
        "ladder",
        "which calibration the held-out logits support",
        "Fit one temperature, a temperature per group, vector and matrix\n"
        "scaling by cross-validation on the held-out logits; print each\n"
        "one's out-of-fold log-loss, Brier score and ECE with paired\n"
        "bootstrap intervals against one temperature, the labels each\n"
        "changes, and the simplest rung whose gain is outside its interval.",
    )
    add_inputs(p, labels=True)
    p.add_argument(
        "--groups",
        metavar="FILE|predicted",
        default="predicted",
        help="the groups of the group-temperature rung: a label per row "
        "(.npy, .npz, .csv or .txt), or 'predicted' (the predicted class)",
    )
    p.add_argument("--cv", type=int, default=5, help="folds (at least 2)")
    p.add_argument(
        "--alpha",
        type=float,
        default=1.0,
        help="penalty strength of vector and matrix scaling",
    )
    p.add_argument("--bootstrap", type=int, default=200, help="paired resamples")
    p.add_argument("--seed", type=int, default=0, help="folds' and resamples' seed")
    p.add_argument("--out", help="write the results as JSON ('-': stdout)")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from skts import calibration_ladder

    files = [o for o in [args.out] if o not in (None, STDOUT)]
    _check_outputs(files, [args.logits, args.labels], args.force)
    for o in files:
        _check_out_suffix(o, (".json",))
    if args.cv < 2:
        raise CLIError(f"argument --cv: must be at least 2; got {args.cv}")
    if args.bootstrap < 1:
        raise CLIError(
            f"argument --bootstrap: must be at least 1; got {args.bootstrap}"
        )
    if not args.alpha >= 0:
        raise CLIError(f"argument --alpha: must be >= 0; got {args.alpha}")
    if args.scheduler is not None or _is_shards(args.logits):
        raise CLIError("ladder fits every rung in memory; not available with shards")
    with _scheduler(None), _dask_errors("reading the logits"):
        y, logits, keep, _ = _load_pair(args)
    if getattr(logits, "layout", None) is not None or keep is not None:
        raise CLIError("ladder needs 2-D logits (one row per sample)")
    groups = args.groups
    if groups != "predicted":
        groups = _load_groups(groups, logits.shape[0])
    ladder = calibration_ladder(
        logits,
        y,
        groups=groups,
        cv=args.cv,
        alpha=args.alpha,
        n_bootstrap=args.bootstrap,
        random_state=args.seed,
    )
    if args.out == STDOUT:
        json.dump(ladder.to_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    if args.out is not None:
        with _atomic_outputs([args.out], args.force) as (tmp,):
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(ladder.to_dict(), fh, indent=2)
                fh.write("\n")
    print(ladder)
    return 0
