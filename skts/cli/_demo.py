"""``skts demo``: the whole story on a real model."""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import numpy as np

from skts._numerics import (
    BoundaryTemperatureWarning,
)
from skts.cli._common import (
    CLIError,
    _metrics,
    _validation,
    command_parser,
)
from skts.cli._outputs import _atomic_outputs
from skts.cli._reports import _format_table


def format_parser(subparsers) -> None:
    """``skts demo``'s options."""
    p = command_parser(
        subparsers,
        "demo",
        "run the whole story on a real model",
        "Train a real model, calibrate it, print a before/after\n"
        "table and write the figures.",
    )
    p.add_argument("--out", default="skts-demo", help="folder for the figures")
    p.add_argument("--bootstrap", type=int, default=200, help="bootstrap resamples")
    p.set_defaults(func=main)


def run_demo(out: str = "skts-demo", *, n_bootstrap: int = 200) -> int:
    """The main job: train, calibrate and judge a real model, write the figures.

    Digits (1,797 8x8 images, shipped with scikit-learn) are split 50/25/25
    into train, validation and test. A logistic regression with almost no
    regularisation (``C=1000``) on the raw pixels is accurate but overconfident;
    :class:`~skts.TemperatureScaledClassifier` around the frozen model fits T on
    the validation part, and the test part judges both.
    """
    import time

    from sklearn.datasets import load_digits
    from sklearn.frozen import FrozenEstimator
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split

    from skts._classifier import TemperatureScaledClassifier

    start = time.perf_counter()

    def stage(i: int, text: str) -> None:
        print(f"[{i}/5 {time.perf_counter() - start:5.1f}s] {text}", flush=True)

    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise CLIError(f"--out {out!r} exists and is not a folder")
    stage(1, "loading digits (1797 images of 8x8 pixels, 10 classes) ...")
    X, y = load_digits(return_X_y=True)
    X_train, X_rest, y_train, y_rest = train_test_split(
        X, y, train_size=0.5, random_state=0, stratify=y
    )
    X_val, X_test, y_val, y_test = train_test_split(
        X_rest, y_rest, test_size=0.5, random_state=0, stratify=y_rest
    )
    print(f"        train {len(y_train)}, validation {len(y_val)}, test {len(y_test)}")
    stage(2, "training LogisticRegression(C=1000) on the training part ...")
    model = LogisticRegression(C=1000, max_iter=10000).fit(X_train, y_train)
    stage(3, "fitting the temperature on the validation part ...")
    calibrated = TemperatureScaledClassifier(FrozenEstimator(model))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", BoundaryTemperatureWarning)
        calibrated.fit(X_val, y_val)
    grid = np.unique(_validation.check_temperatures(None))
    position = int(np.searchsorted(grid, calibrated.temperature_)) + 1
    where = "at the boundary!" if caught else "inside the range"
    print(
        f"        T = {calibrated.temperature_:.4f}: candidate {position} of "
        f"{grid.size} in [{grid[0]:g}, {grid[-1]:g}], {where}"
    )
    stage(4, f"judging on the test part ({n_bootstrap} bootstrap resamples) ...")
    p_before = model.predict_proba(X_test)
    p_after = calibrated.predict_proba(X_test)
    kw = {"n_bootstrap": n_bootstrap, "random_state": 0, "labels": model.classes_}
    before = _metrics.calibration_report(y_test, p_before, **kw).to_dict()
    after = _metrics.calibration_report(y_test, p_after, **kw).to_dict()
    print()
    print(_format_table({"before": before, "after": after}))
    print()
    print(
        "Accuracy is unchanged by construction; for the rest lower is better. "
        "Intervals: percentile bootstrap over test rows."
    )
    stage(5, f"writing figures into {folder}/ ...")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("        no figures: matplotlib is missing (skts's 'plot' extra)")
        return 0
    from skts._display import ReliabilityDisplay, TemperatureCurveDisplay

    folder.mkdir(parents=True, exist_ok=True)
    disp = ReliabilityDisplay.from_predictions(
        y_test, p_before, labels=model.classes_, name="LogisticRegression"
    )
    ReliabilityDisplay.from_predictions(
        y_test,
        p_after,
        labels=model.classes_,
        name=f"T = {calibrated.temperature_:.3g}",
        kind="line",
        ax=disp.ax_,
        hist_ax=disp.hist_ax_,
    )
    disp.figure_.suptitle("Digits, test part: before and after")
    curve = TemperatureCurveDisplay.from_estimator(calibrated, X_val, y_val)
    curve.ax_.set_title("Validation log-loss over the candidates")
    paths = [folder / "reliability.png", folder / "temperature_curve.png"]
    with _atomic_outputs([str(p) for p in paths], force=True) as temps:
        disp.figure_.savefig(temps[0], format="png", dpi=100)
        curve.figure_.savefig(temps[1], format="png", dpi=100)
    plt.close("all")
    for p in paths:
        print(f"        wrote {p}")
    print(f"done in {time.perf_counter() - start:.1f}s")
    return 0


def main(args: argparse.Namespace) -> int:
    return run_demo(args.out, n_bootstrap=args.bootstrap)
