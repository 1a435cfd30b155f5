"""
When one temperature is not enough: groups
==========================================

One temperature rescales every logit alike. When two groups of rows share
the same kind of logits but are right at different rates, it calibrates
their mixture and leaves each group wrong: overconfident on one,
underconfident on the other. Here is how to see it, on a real dataset.

The data: scikit-learn's handwritten digits. We split them, honestly, into
two subpopulations by a property of the images, the amount of ink (bold and
thin writing), and give the thin ones noisier labels: 30% of them were
relabelled at random, as if that part of the data had been annotated in a
hurry. The model never sees the groups.
"""

# %%
# A model trained on both groups
# ------------------------------
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

from skts import (
    ReliabilityDisplay,
    TemperatureScaledClassifier,
    calibration_ladder,
)
from skts.metrics import calibration_report, temperature_by_group

X, y = load_digits(return_X_y=True)
ink = X.sum(axis=1)
group = np.where(ink > np.median(ink), "bold", "thin")
rng = np.random.default_rng(0)
noisy = (group == "thin") & (rng.random(len(y)) < 0.3)
y = np.where(noisy, rng.integers(0, 10, len(y)), y)

X_train, X_rest, y_train, y_rest, g_train, g_rest = train_test_split(
    X / 16, y, group, test_size=0.5, random_state=0, stratify=group
)
X_val, X_test, y_val, y_test, g_val, g_test = train_test_split(
    X_rest, y_rest, g_rest, test_size=0.5, random_state=0, stratify=g_rest
)
model = LogisticRegression(C=1.0, max_iter=5000).fit(X_train, y_train)

# %%
# One temperature, fitted on the validation set
# ----------------------------------------------
calibrated = TemperatureScaledClassifier(FrozenEstimator(model)).fit(X_val, y_val)
print(f"T = {calibrated.temperature_:.3f}")
report = calibration_report(y_test, calibrated.predict_proba(X_test), groups=g_test)
print(report)

# %%
# The one temperature is a compromise between the groups, and each group
# pays for it: the bold digits are right more often than their forecasts say
# (underconfident: accuracy above the diagonal), the thin ones less often
# (overconfident: below it), and each group's ECE is larger than that of
# the whole, where the two errors partly cancel. The reliability diagram
# shows it, a line per group over the bars of the whole:
disp = ReliabilityDisplay.from_estimator(
    calibrated, X_test, y_test, groups=g_test, n_bins=10, name="one T"
)
disp.figure_.suptitle("One temperature, two groups")
plt.show()

# %%
# What would each group choose?
# -----------------------------
# :func:`~skts.metrics.temperature_by_group` fits ``T`` on each group's rows
# (here the validation rows), with bootstrap intervals: the two intervals do
# not overlap, so the groups really want different temperatures. The last
# column is what the one temperature costs each group in log-loss.
logits_val = model.decision_function(X_val)
label_index = np.searchsorted(model.classes_, y_val)
by_group = temperature_by_group(
    label_index, logits_val, g_val, n_bootstrap=200, random_state=0
)
print(f"overall T = {by_group.overall_temperature:.3f}")
for g, t, (lo, hi), own, one in zip(
    by_group.groups,
    by_group.temperature,
    by_group.interval,
    by_group.loss,
    by_group.loss_at_overall,
    strict=True,
):
    print(
        f"{g}: T = {t:.3f}  95% interval [{lo:.3f}, {hi:.3f}]  "
        f"log-loss {own:.3f} with its own T, {one:.3f} with the overall T"
    )

# %%
# Acting on it: a temperature per group
# -------------------------------------
# One temperature cannot serve both groups, and the model's logits do not
# say which group a row is in; but here the group is known at prediction
# time (the amount of ink is in the image). So give each group its own
# temperature: ``fit(..., groups=...)`` chooses each group's ``T`` by the
# exact rule on its rows, pulled toward the pooled ``T`` by a strength that
# cross-validation chooses (a small group cannot overfit). Every row's logits
# are still divided by a positive number, so no label changes.
by_ink = TemperatureScaledClassifier(FrozenEstimator(model)).fit(
    X_val, y_val, groups=g_val
)
print(by_ink.temperatures_by_group_, f"(shrinkage {by_ink.group_shrinkage_:g} rows)")
after = calibration_report(
    y_test, by_ink.predict_proba(X_test, groups=g_test), groups=g_test
)
print(after)
assert (by_ink.predict(X_test) == model.predict(X_test)).all()

# %%
# On the test rows both groups' log-loss falls, and the bold group's ECE
# falls from about 0.18 to 0.03 (the whole's from 0.105 to 0.058). The thin
# group's ECE stays where it was: its own temperature is close to the
# pooled one, and what is left of its error is not a stretch of the logits
# (a third of its labels are noise) that any temperature could remove. The
# bold digits' line now follows the diagonal where they have samples:
disp = ReliabilityDisplay.from_predictions(
    y_test,
    by_ink.predict_proba(X_test, groups=g_test),
    labels=model.classes_,
    groups=g_test,
    n_bins=10,
    name="a T per group",
)
disp.figure_.suptitle("A temperature per group")
plt.show()

# %%
# Is it worth it? The ladder
# --------------------------
# :func:`~skts.calibration_ladder` fits every rung by cross-validation on
# the validation rows (one temperature, a temperature per group, vector and
# matrix scaling) and moves down from one temperature only when a rung's
# out-of-fold log-loss is better by more than its paired bootstrap interval.
# Here the per-group temperature is the rung the data supports; vector and
# matrix scaling (which change labels: see the last column) are not better.
ladder = calibration_ladder(logits_val, label_index, groups=g_val, random_state=0)
print(ladder)

# %%
# Grouping by the predicted class (``groups="predicted"``) is the same
# remedy for class-dependent miscalibration. When the group is not known at
# prediction time, no temperature can fix this: the forecast is calibrated
# for the mixture only, and the docs should say so.
