"""Scorers for ``GridSearchCV`` and ``cross_val_score``: the calibration
errors and multiclass proper scores, as ``neg_*`` (greater is better)."""

from __future__ import annotations

from sklearn.metrics import brier_score_loss, log_loss
from sklearn.metrics import get_scorer as _sklearn_get_scorer

from skts.metrics._binned import (
    classwise_calibration_error,
    expected_calibration_error,
    maximum_calibration_error,
)
from skts.metrics._debiased import debiased_calibration_error
from skts.metrics._smooth import smooth_calibration_error


class _ProbaScorer:
    """``scorer(estimator, X, y)``: minus a probability metric, with the
    columns named by the estimator's ``classes_`` (a class missing from the
    scored fold must not shift them)."""

    def __init__(self, metric, name: str):
        self._metric = metric
        self._name = name

    def __call__(self, estimator, X, y_true, sample_weight=None):
        proba = estimator.predict_proba(X)
        labels = getattr(estimator, "classes_", None)
        return -float(
            self._metric(y_true, proba, labels=labels, sample_weight=sample_weight)
        )

    def __repr__(self) -> str:
        return f"skts.metrics.get_scorer({self._name!r})"


def _brier(y_true, y_prob, *, labels=None, sample_weight=None):
    return brier_score_loss(y_true, y_prob, labels=labels, sample_weight=sample_weight)


def _log_loss(y_true, y_prob, *, labels=None, sample_weight=None):
    return log_loss(y_true, y_prob, labels=labels, sample_weight=sample_weight)


_SCORERS = {
    "neg_expected_calibration_error": expected_calibration_error,
    "neg_maximum_calibration_error": maximum_calibration_error,
    "neg_classwise_calibration_error": classwise_calibration_error,
    "neg_smooth_calibration_error": smooth_calibration_error,
    "neg_debiased_calibration_error": debiased_calibration_error,
    "neg_brier_score": _brier,
    "neg_log_loss": _log_loss,
}


def get_scorer(name):
    """A scorer by name: skts's calibration scorers, else scikit-learn's.

    Parameters
    ----------
    name : str or callable
        ``"neg_expected_calibration_error"``, ``"neg_maximum_calibration_error"``,
        ``"neg_classwise_calibration_error"``,
        ``"neg_smooth_calibration_error"`` (top-label smooth ECE),
        ``"neg_debiased_calibration_error"`` (top-label debiased L2 error, 15
        equal-width bins), ``"neg_brier_score"`` (multiclass
        Brier, sum over classes, in [0, 2]; a binary problem uses
        scikit-learn's half scale, [0, 1]) or ``"neg_log_loss"``; any other name
        (or a callable) goes to :func:`sklearn.metrics.get_scorer`.

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y)``, greater is better.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.linear_model import LogisticRegression
    >>> from skts.metrics import get_scorer
    >>> X, y = load_iris(return_X_y=True)
    >>> model = LogisticRegression(max_iter=1000).fit(X, y)
    >>> bool(get_scorer("neg_expected_calibration_error")(model, X, y) <= 0)
    True
    """
    if isinstance(name, str) and name in _SCORERS:
        return _ProbaScorer(_SCORERS[name], name)
    try:
        return _sklearn_get_scorer(name)
    except ValueError:
        if not isinstance(name, str):
            raise
        raise ValueError(
            f"{name!r} is not a scorer: skts provides {get_scorer_names()}; "
            "scikit-learn's are listed by sklearn.metrics.get_scorer_names()."
        ) from None


def get_scorer_names() -> list[str]:
    """The names of the scorers skts provides (see :func:`get_scorer`).

    Returns
    -------
    list of str
        Sorted; each is a ``neg_*`` scorer, greater is better.
        :func:`get_scorer` also accepts every name of
        :func:`sklearn.metrics.get_scorer_names`.

    Examples
    --------
    >>> from skts.metrics import get_scorer_names
    >>> get_scorer_names()[:2]
    ['neg_brier_score', 'neg_classwise_calibration_error']
    """
    return sorted(_SCORERS)
