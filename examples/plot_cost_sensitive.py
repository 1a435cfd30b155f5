"""
Cost-sensitive decisions need calibrated probabilities
======================================================

When a false negative costs ``C_FN`` and a false positive ``C_FP``, the
decision that minimises the expected cost is to predict positive when

.. math:: p \\ge \\tau^* = \\frac{C_{FP}}{C_{FP} + C_{FN}}

but only if ``p`` is the real probability of the positive class. An
overconfident model puts most of its probabilities near 0 and 1, so the
threshold lands in the wrong place. scikit-learn's
:class:`~sklearn.model_selection.FixedThresholdClassifier` applies a
threshold; here it is applied to the same model before and after
temperature scaling.
"""

# %%
# An overconfident model on a screening problem
# ---------------------------------------------
# Breast-cancer screening: class 0 is malignant. Missing one (a false
# negative for "malignant") costs 10 times a needless follow-up.
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import FixedThresholdClassifier, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skts import ReliabilityDisplay, TemperatureScaledClassifier

X, y = load_breast_cancer(return_X_y=True)
y = 1 - y  # 1 = malignant, the positive class
X_train, X_rest, y_train, y_rest = train_test_split(
    X, y, train_size=0.4, random_state=0, stratify=y
)
X_val, X_test, y_val, y_test = train_test_split(
    X_rest, y_rest, test_size=0.5, random_state=0, stratify=y_rest
)
model = make_pipeline(StandardScaler(), LogisticRegression(C=100, max_iter=10000))
model.fit(X_train, y_train)
calibrated = TemperatureScaledClassifier(FrozenEstimator(model)).fit(X_val, y_val)
print(f"T = {calibrated.temperature_:.2f}")

C_FP, C_FN = 1.0, 10.0
tau = C_FP / (C_FP + C_FN)
print(f"cost-optimal threshold for calibrated probabilities: {tau:.3f}")


# %%
# The same threshold, before and after calibration
# ------------------------------------------------
def total_cost(classifier):
    predicted = classifier.predict(X_test)
    false_pos = np.sum((predicted == 1) & (y_test == 0))
    false_neg = np.sum((predicted == 0) & (y_test == 1))
    return C_FP * false_pos + C_FN * false_neg, false_pos, false_neg


rules = {
    "uncalibrated, 0.5": FixedThresholdClassifier(
        FrozenEstimator(model), threshold=0.5, response_method="predict_proba"
    ),
    f"uncalibrated, {tau:.3f}": FixedThresholdClassifier(
        FrozenEstimator(model), threshold=tau, response_method="predict_proba"
    ),
    f"calibrated, {tau:.3f}": FixedThresholdClassifier(
        FrozenEstimator(calibrated), threshold=tau, response_method="predict_proba"
    ),
}
costs = {}
for name, rule in rules.items():
    rule.fit(X_val, y_val)  # (frozen: nothing is refitted)
    cost, fp, fn = total_cost(rule)
    costs[name] = cost
    print(f"{name:>22}: cost {cost:5.1f} ({fp} false positives, {fn} missed)")

# %%
# With the overconfident probabilities the threshold barely moves any
# decision (few test probabilities lie between 0.09 and 0.5); once the
# probabilities are calibrated, the threshold lands where the costs say.
# The gain depends on the data; the principle does not: a threshold
# derived from costs is only cost-optimal on calibrated probabilities.
fig, (ax_cost, ax_rel) = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
ax_cost.barh(list(costs), list(costs.values()), color=["C0", "C0", "C1"])
ax_cost.set(xlabel=f"test cost (C_FP = {C_FP:g}, C_FN = {C_FN:g})")
ax_cost.invert_yaxis()
first = ReliabilityDisplay.from_estimator(
    model, X_test, y_test, pos_label=1, n_bins=8, name="uncalibrated", ax=ax_rel
)
ReliabilityDisplay.from_estimator(
    calibrated,
    X_test,
    y_test,
    pos_label=1,
    n_bins=8,
    name="calibrated",
    kind="line",
    ax=ax_rel,
)
ax_rel.axvline(tau, color="k", linestyle=":", linewidth=1)
plt.show()
