"""Draw the figures of README.md and docs/ from the real logits in ../shared/data.

Run from the repository root: ``python docs/make_figures.py``.
"""

import os
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from skts import ReliabilityDisplay, TemperatureCurveDisplay, TemperatureScaler

DATA = Path(
    os.environ.get("SKTS_DATA")
    or Path(__file__).resolve().parents[2] / "shared" / "data"
)
OUT = Path(__file__).resolve().parent / "images"


def display_cases() -> None:
    """The displays' default pictures, one per case (no data needed beyond
    what scikit-learn ships): the visual record of how they look."""
    from sklearn.datasets import load_breast_cancer, load_digits
    from sklearn.frozen import FrozenEstimator
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from skts import TemperatureScaledClassifier

    X, y = load_digits(return_X_y=True)
    X_tr, X_rest, y_tr, y_rest = train_test_split(
        X, y, train_size=0.5, random_state=0, stratify=y
    )
    X_val, X_te, y_val, y_te = train_test_split(
        X_rest, y_rest, test_size=0.5, random_state=0, stratify=y_rest
    )
    model = LogisticRegression(C=1000, max_iter=10000).fit(X_tr, y_tr)
    mild = LogisticRegression(C=0.0005, max_iter=10000).fit(X_tr, y_tr)
    calibrated = TemperatureScaledClassifier(FrozenEstimator(model)).fit(X_val, y_val)
    Xb, yb = load_breast_cancer(return_X_y=True)
    Xb_tr, Xb_te, yb_tr, yb_te = train_test_split(
        Xb, yb, train_size=0.5, random_state=0, stratify=yb
    )
    binary = make_pipeline(StandardScaler(), LogisticRegression(C=1000))
    binary.fit(Xb_tr, yb_tr)
    rng = np.random.default_rng(0)
    z = rng.normal(size=(300, 4))
    ys = z.argmax(axis=1)
    z[np.arange(300), ys] += 50  # separable: the loss falls to 0 as T -> 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        separable = TemperatureScaler().fit(z, ys)

    def save(display, name):
        display.figure_.savefig(OUT / f"display_{name}.png", dpi=80)
        plt.close(display.figure_)

    first = ReliabilityDisplay.from_estimator(model, X_te, y_te, name="before")
    ReliabilityDisplay.from_estimator(
        calibrated,
        X_te,
        y_te,
        name="after",
        kind="line",
        ax=first.ax_,
        hist_ax=first.hist_ax_,
    )
    save(first, "comparison")
    save(ReliabilityDisplay.from_estimator(model, X_te, y_te), "multiclass")
    save(
        ReliabilityDisplay.from_estimator(model, X_te, y_te, class_=3, n_bins=10),
        "classwise",
    )
    save(
        ReliabilityDisplay.from_estimator(
            mild, X_te, y_te, strategy="quantile", n_bins=10
        ),
        "quantile",
    )
    save(ReliabilityDisplay.from_estimator(binary, Xb_te, yb_te), "binary")
    save(
        ReliabilityDisplay.from_estimator(binary, Xb_te, yb_te, pos_label=1, n_bins=10),
        "binary_pos_label",
    )
    first = ReliabilityDisplay.from_estimator(
        model, X_te, y_te, kind="smooth", name="before", random_state=0
    )
    ReliabilityDisplay.from_estimator(
        calibrated,
        X_te,
        y_te,
        kind="smooth",
        name="after",
        random_state=0,
        ax=first.ax_,
        hist_ax=first.hist_ax_,
    )
    save(first, "smooth")
    save(
        ReliabilityDisplay.from_estimator(
            calibrated, X_te, y_te, kind="smooth", class_=3, random_state=0
        ),
        "smooth_classwise",
    )
    first = ReliabilityDisplay.from_estimator(
        model, X_te, y_te, name="before", show_band=True, n_bins=10
    )
    ReliabilityDisplay.from_estimator(
        calibrated,
        X_te,
        y_te,
        name="after",
        kind="line",
        show_band=True,
        n_bins=10,
        ax=first.ax_,
        hist_ax=first.hist_ax_,
    )
    save(first, "band")
    save(TemperatureCurveDisplay.from_estimator(calibrated, X_val, y_val), "curve")
    save(TemperatureCurveDisplay.from_estimator(separable, z, ys), "curve_boundary")
    print(f"display cases in {OUT}")


def main() -> None:
    OUT.mkdir(exist_ok=True)
    display_cases()
    for name, title in [
        ("playground_cifar100", "CIFAR-100"),
        ("densenet40_cifar10", "CIFAR-10 DenseNet-40"),
    ]:
        data = np.load(DATA / f"{name}.npz", allow_pickle=False)
        val, y_val = data["val_logits"], data["val_labels"]
        test, y_test = data["test_logits"], data["test_labels"]
        scaler = TemperatureScaler().fit(val, y_val)
        z = test - test.max(1, keepdims=True)
        before = np.exp(z) / np.exp(z).sum(1, keepdims=True)
        after = scaler.predict_proba(test)
        first = ReliabilityDisplay.from_predictions(y_test, before, name="uncalibrated")
        ReliabilityDisplay.from_predictions(
            y_test,
            after,
            name=f"T = {scaler.temperature_:.3f}",
            kind="line",
            ax=first.ax_,
            hist_ax=first.hist_ax_,
        )
        fig = first.figure_
        fig.suptitle(f"{title}, test set (15 bins)")
        fig.savefig(OUT / f"reliability_{name}.png", dpi=100)
        plt.close(fig)

        first = ReliabilityDisplay.from_predictions(
            y_test, before, kind="smooth", name="uncalibrated", random_state=0
        )
        ReliabilityDisplay.from_predictions(
            y_test,
            after,
            kind="smooth",
            name=f"T = {scaler.temperature_:.3f}",
            random_state=0,
            ax=first.ax_,
            hist_ax=first.hist_ax_,
        )
        first.figure_.suptitle(f"{title}, test set (kernel-smoothed)")
        first.figure_.savefig(OUT / f"smooth_{name}.png", dpi=100)
        plt.close(first.figure_)

        curve = TemperatureCurveDisplay.from_estimator(scaler, val, y_val)
        curve.ax_.set_title(f"{title}:\nvalidation NLL over the 1001 candidates")
        curve.figure_.savefig(OUT / f"nll_curve_{name}.png", dpi=100)
        plt.close(curve.figure_)
        print(f"{name}: T = {scaler.temperature_:.4f}; figures in {OUT}")


if __name__ == "__main__":
    main()
