"""``skts``: the parser of every command, and ``main``, which turns every
error into one line on stderr and an exit code."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence

from skts import __version__
from skts.cli import _apply, _demo, _fit, _ladder, _report, _signals
from skts.cli._common import (
    EXIT_USAGE,
    CLIError,
    _Formatter,
    _Parser,
)

# Resamples at most (each holds a few sums per bin and class: a million of
# them is already gigabytes at 100 classes).
MAX_BOOTSTRAP = 1_000_000

# Each command: its module's format_parser (options) and main (what it does).
_COMMANDS = (_demo, _fit, _apply, _report, _ladder)


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="skts",
        formatter_class=_Formatter,
        epilog="examples:\n"
        "  skts fit --logits val_logits.npy --labels val_labels.npy --out calib.json\n"
        "  skts apply --logits test_logits.npy --calibration calib.json --out p.npy\n"
        "  skts report --logits test_logits.npy --labels test_labels.npy "
        "--calibration calib.json\n"
        "  skts ladder --logits val_logits.npy --labels val_labels.npy\n"
        "  skts demo\n"
        "'skts COMMAND --help' tells more.",
        description="Temperature-scaling calibration for logit files.",
    )
    parser.add_argument("--version", action="version", version=f"skts {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    for module in _COMMANDS:
        module.format_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code.

    Parameters
    ----------
    argv : sequence of str, default=None
        Arguments without the program name; default ``sys.argv[1:]``.

    Returns
    -------
    int
        0 on success, 2 on bad input (one line on stderr).

    Examples
    --------
    >>> from skts.cli import main
    >>> main(["fit", "--logits", "missing.npy", "--labels", "y.npy", "--out", "c.json"])
    2
    """
    parser = _build_parser()
    command = "skts"
    previous = _signals.catch()
    try:
        args = parser.parse_args(argv)
        command = f"skts {args.command}"
        if not 0 <= getattr(args, "bootstrap", 0) <= MAX_BOOTSTRAP:
            raise CLIError(
                f"--bootstrap must be between 0 and {MAX_BOOTSTRAP:,}; got "
                f"{args.bootstrap:,}"
            )
        try:
            code = int(args.func(args))
        except Exception:
            _signals.reraise()  # (an interrupt a library reported as its own error)
            raise
        _signals.settle()  # a signal held since publishing: nothing stays
        return code
    except CLIError as exc:
        print(f"{command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ValueError as exc:  # validation errors from skts itself
        print(f"{command}: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # The reader of stdout went away (``skts apply --out - | head``): the
        # usual quiet exit of a Unix filter. Python would complain when it
        # flushes stdout at exit; point stdout at /dev/null first.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except OSError as exc:
        print(f"{command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"{command}: interrupted", file=sys.stderr)
        return 130
    except _signals.Terminated:
        print(f"{command}: terminated", file=sys.stderr)
        return 128 + signal.SIGTERM
    finally:
        _signals.release(previous)


def run() -> None:
    """The ``skts`` program (and ``python -m skts``): :func:`main`, then exit
    with its code.

    After an interrupt, exit at once with 130 (or 143), the streams flushed:
    CPython (3.11) ends a process by SIGINT at exit when a KeyboardInterrupt
    once passed through an ``exec`` of a string (scipy's imports make one),
    even though ``main`` caught it and cleaned up."""
    code = main()
    if code in (130, 128 + signal.SIGTERM):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
