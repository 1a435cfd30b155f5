"""
Temperature scaling inside a Pipeline, chosen by GridSearchCV
=============================================================

:class:`~skts.TemperatureScaledClassifier` is an ordinary scikit-learn
classifier: it goes into a :class:`~sklearn.pipeline.Pipeline`, and
:class:`~sklearn.model_selection.GridSearchCV` can tune the model inside it
by a proper score (log-loss) while reporting the calibration error (ECE)
beside it, with skts's scorers.
"""

# %%
# A pipeline whose last step calibrates
# -------------------------------------
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, train_test_split
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from skts import TemperatureScaledClassifier
from skts.metrics import get_scorer

X, y = load_digits(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(
    X, y, test_size=0.3, random_state=0, stratify=y
)
pipe = Pipeline(
    [
        ("scale", StandardScaler()),
        ("clf", TemperatureScaledClassifier(LogisticRegression(max_iter=5000), cv=3)),
    ]
)
# Inside each training fold, the temperature is fitted on out-of-fold
# logits of that fold (cv=3), so the scores below are honest.
scoring = {
    "log_loss": get_scorer("neg_log_loss"),
    "ece": get_scorer("neg_expected_calibration_error"),
}
grid = {"clf__estimator__C": np.logspace(-3, 3, 7)}
search = GridSearchCV(pipe, grid, scoring=scoring, refit="log_loss", cv=4)
search.fit(X_train, y_train)

# %%
# The same search without calibration, for comparison.
plain = Pipeline(
    [("scale", StandardScaler()), ("clf", LogisticRegression(max_iter=5000))]
)
plain_search = GridSearchCV(
    plain,
    {"clf__C": grid["clf__estimator__C"]},
    scoring=scoring,
    refit="log_loss",
    cv=4,
)
plain_search.fit(X_train, y_train)

best = search.best_params_["clf__estimator__C"]
print(
    f"best C with temperature scaling: {best:g}, "
    f"T = {search.best_estimator_[-1].temperature_:.2f}"
)
print(f"best C without: {plain_search.best_params_['clf__C']:g}")
for name, s in [("calibrated", search), ("plain", plain_search)]:
    print(f"{name:>10}: test log-loss {-s.score(X_test, y_test):.4f}")

# %%
# Without calibration the log-loss punishes both ends of the path: strong
# regularisation (small ``C``) makes the model underconfident, weak
# regularisation overconfident, and the search trades the quality of the
# model against its calibration. With a temperature fitted inside each
# fold, the log-loss is lower at every ``C`` and nearly flat beyond
# ``C = 1``, and the ECE stays low along the whole path: the choice of ``C``
# is about the model, no longer about its calibration.
C = grid["clf__estimator__C"]
fig, (ax_loss, ax_ece) = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
for name, s, style in [
    ("with temperature scaling", search, "o-"),
    ("without", plain_search, "s--"),
]:
    res = s.cv_results_
    ax_loss.plot(C, -res["mean_test_log_loss"], style, label=name)
    ax_ece.plot(C, -res["mean_test_ece"], style, label=name)
ax_loss.set(xscale="log", xlabel="C", ylabel="CV log-loss", yscale="log")
ax_ece.set(xscale="log", xlabel="C", ylabel="CV expected calibration error")
ax_loss.legend()
plt.show()
