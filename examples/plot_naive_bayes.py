"""
When one temperature is not enough: naive Bayes, and two groups
===============================================================

Temperature scaling has one parameter: it can make a model less (or more)
confident overall, and nothing else. Two cases where that is not enough,
and what to look at instead.
"""

# %%
# Gaussian naive Bayes: miscalibrated class by class
# --------------------------------------------------
# Naive Bayes multiplies per-feature likelihoods as if the pixels were
# independent; on digits its probabilities are almost all 0 or 1, and how
# wrong they are depends on the class. One temperature softens all of them
# alike.
import matplotlib.pyplot as plt
import numpy as np
from sklearn.calibration import CalibratedClassifierCV
from sklearn.datasets import load_digits
from sklearn.frozen import FrozenEstimator
from sklearn.model_selection import train_test_split
from sklearn.naive_bayes import GaussianNB

from skts import ReliabilityDisplay, TemperatureScaledClassifier
from skts.metrics import calibration_report, temperature_by_group

X, y = load_digits(return_X_y=True)
X_train, X_rest, y_train, y_rest = train_test_split(
    X, y, train_size=0.5, random_state=0, stratify=y
)
X_val, X_test, y_val, y_test = train_test_split(
    X_rest, y_rest, test_size=0.5, random_state=0, stratify=y_rest
)
nb = GaussianNB().fit(X_train, y_train)
scaled = TemperatureScaledClassifier(FrozenEstimator(nb)).fit(X_val, y_val)
isotonic = CalibratedClassifierCV(FrozenEstimator(nb), method="isotonic")
isotonic.fit(X_val, y_val)
print(f"T = {scaled.temperature_:.1f}")
for name, model in [
    ("naive Bayes", nb),
    ("temperature", scaled),
    ("isotonic", isotonic),
]:
    r = calibration_report(y_test, model.predict_proba(X_test))
    print(
        f"{name:>12}: accuracy {r['accuracy']:.3f}  log-loss {r['log_loss']:.3f}  "
        f"ECE {r['ece']:.3f}  class-wise ECE {r['classwise_ece']:.4f}"
    )

# %%
# The temperature is large, and it cuts the log-loss by a factor of four:
# the model can no longer be all but certain of a wrong class. Yet the ECE
# and the class-wise ECE get *worse*: the distortion is not one of overall
# confidence, so softening every forecast alike moves the confident right
# answers away from the diagonal as it brings the wrong ones closer (a proper
# score and a binned one can disagree; report both). Isotonic regression
# (one free monotone map per class, here fitted on the 450 validation rows)
# has the local freedom one number lacks; it may also change the predicted
# labels, which temperature scaling never does.
fig, axes = plt.subplots(
    2, 2, figsize=(10, 7), sharex="col", height_ratios=[3, 1], layout="constrained"
)
for col, class_ in enumerate([None, 8]):
    for name, model, kind in [
        ("naive Bayes", nb, "bar"),
        ("temperature", scaled, "line"),
        ("isotonic", isotonic, "line"),
    ]:
        ReliabilityDisplay.from_estimator(
            model,
            X_test,
            y_test,
            name=name,
            kind=kind,
            class_=class_,
            n_bins=10,
            ax=axes[0, col],
            hist_ax=axes[1, col],
        )
plt.show()

# %%
# Two groups, identical logits
# ----------------------------
# The example of the literature: two groups get the very same forecast for
# every row, but the event happens for 60% of the first group and 90% of the
# second. No temperature can report both: with equal sizes, about 0.75 is
# calibrated for the whole and wrong for each group.
rng = np.random.default_rng(0)
n = 2000
group = np.repeat(["A", "B"], n // 2)
positive = np.where(group == "A", 0.6, 0.9)
y_two = (rng.random(n) < positive).astype(int)
d = np.full(n, np.log(0.95 / 0.05))  # the model says 0.95 for everyone
by_group = temperature_by_group(y_two, d, group, n_bootstrap=100, random_state=0)
print(
    f"one T = {by_group.overall_temperature:.2f}: p = "
    f"{1 / (1 + np.exp(-d[0] / by_group.overall_temperature)):.3f} for every row"
)
for g, t, (lo, hi) in zip(
    by_group.groups, by_group.temperature, by_group.interval, strict=True
):
    p = 1 / (1 + np.exp(-d[0] / t))
    print(f"group {g}: its own T = {t:.2f} [{lo:.2f}, {hi:.2f}], p = {p:.3f}")

# %%
# What to look at instead
# -----------------------
# * The class-wise ECE (and ``ReliabilityDisplay(..., class_=k)``): one
#   temperature cannot fix class-dependent errors; vector or matrix scaling
#   and isotonic regression can, with more parameters to fit.
# * Reports by group (``calibration_report(..., groups=...)``,
#   :func:`~skts.metrics.temperature_by_group`, the ``groups=`` of the
#   reliability diagram): when groups want different temperatures, the
#   information is missing from the logits; calibrate per group if the group
#   is known when predicting, or say that the forecast is calibrated for the
#   mixture only.
