"""Draw the figures of README.md and docs/ from the real logits in ../shared/data.

Run from the repository root: ``python docs/make_figures.py``.
"""

import os
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


def main() -> None:
    OUT.mkdir(exist_ok=True)
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

        curve = TemperatureCurveDisplay.from_estimator(scaler, val, y_val)
        curve.ax_.set_title(f"{title}:\nvalidation NLL over the 1001 candidates")
        curve.figure_.savefig(OUT / f"nll_curve_{name}.png", dpi=100)
        plt.close(curve.figure_)
        print(f"{name}: T = {scaler.temperature_:.4f}; figures in {OUT}")


if __name__ == "__main__":
    main()
