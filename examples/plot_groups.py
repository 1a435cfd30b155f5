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

from skts import ReliabilityDisplay, TemperatureScaledClassifier
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
# What to do instead
# ------------------
# Scaling cannot fix this: the two groups need different maps from logits to
# probabilities, and the model's logits do not say which group a row is in.
# If the group is known at prediction time, calibrate each group on its own
# (one :class:`~skts.TemperatureScaler` per group, or a feature the model can
# use); if it is not, say so: the forecast is calibrated for the mixture
# only. Grouping by the predicted class (``groups="predicted"``) is the same
# check for class-dependent miscalibration.
