"""What every command shares: errors, the parser classes, the inputs' options,
and the library modules, imported on first use."""

from __future__ import annotations

import argparse


class _Lazy:
    """A module imported on first use: ``skts --help`` and ``--version`` stay
    fast (scikit-learn, which the estimators and metrics import, takes most
    of a second)."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str):
        import importlib

        return getattr(importlib.import_module(self._name), attr)


_validation = _Lazy("skts._validation")
_fit_lib = _Lazy("skts._fit")
_metrics = _Lazy("skts.metrics")
_report_lib = _Lazy("skts.metrics._report")
_compare_lib = _Lazy("skts.metrics._compare")

EXIT_USAGE = 2

# The version of the JSON that ``fit`` writes and ``report --json`` prints
# (documented in docs/cli.md); a reader refuses a newer one.
SCHEMA_VERSION = 3
STDOUT = "-"


class CLIError(Exception):
    """A problem with the user's input, reported as one line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage dump
        raise CLIError(message)


class _Formatter(
    argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter
):
    """Help with each option's default (where it has one), and examples kept
    as written."""

    def _get_help_string(self, action) -> str:
        text = action.help or ""
        quiet = any(action.default is v for v in (None, False, argparse.SUPPRESS))
        if action.required or quiet or "%(default)" in text:
            return text
        return text + " (default: %(default)s)"


_EXAMPLES = {
    "fit": "examples:\n  skts fit --logits val_logits.npy --labels val_labels.npy "
    "--out calib.json\n  skts fit --logits val.safetensors --key logits "
    "--labels val_labels.npy \\\n      --temperatures geom:0.05:20:401 --out "
    "calib.json",
    "apply": "example:\n  skts apply --logits test_logits.npy --calibration "
    "calib.json --out probs.npy --labels-out labels.csv",
    "report": "example:\n  skts report --logits test_logits.npy --labels "
    "test_labels.npy --calibration calib.json --bootstrap 200 --plot rel.png",
    "demo": "example:\n  skts demo --out skts-demo",
    "ladder": "example:\n  skts ladder --logits val_logits.npy --labels "
    "val_labels.npy --groups site.csv --out ladder.json",
}


def add_inputs(p, labels: bool) -> None:
    """The options every command reading logits takes."""
    p.add_argument(
        "--logits",
        required=True,
        help=".npy, .npz, .safetensors, .pt, .csv or .txt (binary: one "
        "column, the logit of class 1); or a folder or glob of .npy shards "
        "(read lazily with Dask, in sorted order)",
    )
    p.add_argument(
        "--key",
        help="the array of a logits file holding several (.npz, .safetensors, .pt)",
    )
    if labels:
        p.add_argument(
            "--labels",
            required=True,
            help="integer class indices 0..K-1 (a file, or shards paired "
            "with the logits' shards by sorted name)",
        )
        p.add_argument(
            "--labels-key", help="the array of a labels file holding several"
        )
    p.add_argument(
        "--class-axis",
        type=int,
        default=1,
        metavar="AXIS",
        help="axis of the classes of logits of more than 2 dimensions, as "
        "PyTorch's (N, K, d1, ..., dk) (-1: classes last, as token logits "
        "(batch, tokens, classes)); labels are then (N, d1, ..., dk)",
    )
    if labels:
        p.add_argument(
            "--ignore-index",
            type=int,
            metavar="LABEL",
            help="leave out the positions with this label (-100: PyTorch's "
            "and Hugging Face's padding)",
        )
    p.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="run on this running dask.distributed scheduler (.npy inputs)",
    )
    p.add_argument("--force", action="store_true", help="overwrite outputs")
    p.add_argument(
        "--quiet",
        action="store_true",
        help="no progress bars (shown on stderr only when it is a terminal)",
    )


def command_parser(subparsers, name: str, summary: str, description: str):
    """A subcommand whose --help shows its defaults and an example."""
    return subparsers.add_parser(
        name,
        help=summary,
        description=description,
        epilog=_EXAMPLES[name],
        formatter_class=_Formatter,
    )
