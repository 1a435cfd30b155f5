"""
Calibrating a CIFAR network's logits
====================================

The setting of Guo et al. (2017): a deep network trained on CIFAR,
its logits on held-out images, one temperature. These are real, published
outputs of a DenseNet-40 on CIFAR-10 and of a DenseNet-BC-100 on CIFAR-100
(their sources and licences: :doc:`/data`), fetched by :mod:`skts.datasets`
the first time (a few MB) and cached in ``~/skts_data`` (or ``$SKTS_DATA``).
Offline, with nothing cached, a network is skipped with the reason.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np

from skts import ReliabilityDisplay, TemperatureCurveDisplay, TemperatureScaler
from skts.datasets import fetch_densenet40_cifar10, fetch_densenet100_cifar100
from skts.metrics import calibration_report

networks = {}
for name, fetch in [
    ("CIFAR-10 DenseNet-40", fetch_densenet40_cifar10),
    ("CIFAR-100 DenseNet-BC-100", fetch_densenet100_cifar100),
]:
    try:
        networks[name] = fetch()
    except OSError as exc:
        print(f"{name}: skipped ({exc})")

# %%
# One temperature per network, fitted on the validation logits
# ------------------------------------------------------------
# The reports are on the test logits, with 95% bootstrap intervals.
results = {}
for name, data in networks.items():
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
if results:
    n = len(results)
    fig, axes = plt.subplots(
        2, n + 1, figsize=(4.7 * (n + 1), 6), height_ratios=[3, 1],
        layout="constrained", squeeze=False,
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
    gs = axes[0, n].get_gridspec()
    for ax in axes[:, n]:
        ax.remove()
    curve_ax = fig.add_subplot(gs[:, n])
    for name, (data, scaler, _, _) in results.items():
        TemperatureCurveDisplay.from_estimator(
            scaler, data["val_logits"], data["val_labels"], name=name, ax=curve_ax
        )
    plt.show()
