"""
Calibrating a CIFAR network's logits
====================================

The setting of Guo et al. (2017): a deep network trained on CIFAR,
its logits on held-out images, one temperature. These are real logits of a
DenseNet-40 on CIFAR-10 and of a CIFAR-100 network (their sources and
licences: :doc:`/data`). They are not shipped with skts: this example runs
when they are in ``../shared/data`` beside the repository or in the folder
named by the ``SKTS_DATA`` environment variable, and says so otherwise.
"""

# %%
import os
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from skts import ReliabilityDisplay, TemperatureCurveDisplay, TemperatureScaler
from skts.metrics import calibration_report

DATA = Path(os.environ.get("SKTS_DATA") or "../../shared/data")
files = {
    "CIFAR-10 DenseNet-40": DATA / "densenet40_cifar10.npz",
    "CIFAR-100 network": DATA / "playground_cifar100.npz",
}
available = all(f.exists() for f in files.values())
if not available:
    print(f"The CIFAR logits are not in {DATA} (see 'The real logits'): skipped.")

# %%
# One temperature per network, fitted on the validation logits
# ------------------------------------------------------------
# The reports are on the test logits, with 95% bootstrap intervals.
results = {}
for name, path in files.items() if available else []:
    data = np.load(path, allow_pickle=False)
    scaler = TemperatureScaler().fit(data["val_logits"], data["val_labels"])
    z = data["test_logits"].astype(np.float64)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    before = e / e.sum(axis=1, keepdims=True)
    after = scaler.predict_proba(data["test_logits"])
    results[name] = (data, scaler, before, after)
    print(f"{name}: T = {scaler.temperature_:.3f}")
    for when, proba in [("before", before), ("after", after)]:
        r = calibration_report(
            data["test_labels"], proba, n_bootstrap=100, random_state=0
        )
        lo, hi = r.intervals["ece"]
        print(
            f"  {when:>6}: accuracy {r['accuracy']:.4f}  log-loss "
            f"{r['log_loss']:.4f}  ECE {100 * r['ece']:.2f}% "
            f"[{100 * lo:.2f}, {100 * hi:.2f}]"
        )

# %%
# Guo et al. report, for comparable networks, ECE 3.28% -> 0.33% on CIFAR-10
# (DenseNet-40) and 16.53% -> 1.26% on CIFAR-100 (ResNet-110): these are
# other trainings of similar networks, and the picture is the same, a large
# drop with one number, the accuracy untouched.
if available:
    fig, axes = plt.subplots(
        2, 3, figsize=(14, 6), height_ratios=[3, 1], layout="constrained"
    )
    for col, (name, (data, scaler, before, after)) in enumerate(results.items()):
        first = ReliabilityDisplay.from_predictions(
            data["test_labels"],
            before,
            name="uncalibrated",
            ax=axes[0, col],
            hist_ax=axes[1, col],
        )
        ReliabilityDisplay.from_predictions(
            data["test_labels"],
            after,
            name=f"T = {scaler.temperature_:.2f}",
            kind="line",
            ax=axes[0, col],
            hist_ax=axes[1, col],
        )
        axes[1, col].set_title(name, fontsize="small", loc="right")
    gs = axes[0, 2].get_gridspec()
    for ax in axes[:, 2]:
        ax.remove()
    curve_ax = fig.add_subplot(gs[:, 2])
    for name, (data, scaler, _, _) in results.items():
        TemperatureCurveDisplay.from_estimator(
            scaler, data["val_logits"], data["val_labels"], name=name, ax=curve_ax
        )
    plt.show()
