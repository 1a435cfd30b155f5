"""Logits from a scikit-learn classifier: which response method, its
output as ``(n_samples, n_classes)`` logits, and the out-of-fold logits of a
cross-fit (fold models kept for an ensemble), with the columns of classes a
fold never saw filled as scikit-learn fills them."""

from __future__ import annotations

import numpy as np
from joblib import Parallel, delayed
from sklearn.base import clone
from sklearn.frozen import FrozenEstimator
from sklearn.model_selection import cross_val_predict
from sklearn.utils.validation import check_is_fitted

from skts._array_api import host_logits, is_foreign, namespace, to_numpy
from skts._sklearn_compat import (
    check_method_params,
    enforce_prediction_order,
    num_samples,
    safe_indexing,
)
from skts._validation import check_logits

__all__ = [
    "AUTO_METHODS",
    "cross_fit",
    "encode_seen",
    "fit_cross_validated",
    "fit_frozen",
    "fold_logits",
    "host",
    "like",
    "model_logits",
    "resolve_method",
]

AUTO_METHODS = ("decision_function", "predict_log_proba", "predict_proba")
# log(predict_proba) is kept finite: a probability of 0 becomes log(tiny).
_TINY = float(np.finfo(np.float64).tiny)
_LOG_TINY = float(np.log(_TINY))


def fit_frozen(estimator, X, y, method: str):
    """A frozen model: all of ``(X, y)`` is held out, nothing is refitted.
    Returns the model, its classes, ``y`` as class indices and the logits."""
    # An unfitted model inside FrozenEstimator: scikit-learn's error.
    check_is_fitted(estimator.estimator)
    classes = host(estimator.classes_)
    y_idx = encode_seen(y, classes)
    return estimator, classes, y_idx, model_logits(estimator, X, method, len(classes))


def fit_cross_validated(
    estimator, X, y, y_fit, cv, method, ensemble, inner_params, split_params, n_jobs
):
    """Out-of-fold logits for the temperature (the fold models kept with
    ``ensemble``), then the estimator refitted on all the data. Returns the
    refitted model, the classes, ``y`` as indices, the logits and the fold
    models (None without ``ensemble``)."""
    classes, y_idx = np.unique(y, return_inverse=True)
    if len(classes) < 2:
        raise ValueError(
            "y must contain at least 2 classes to calibrate; got 1 class: "
            f"{classes.tolist()!r}."
        )
    fold_models = None
    if ensemble:
        fold_models, oof = cross_fit(
            estimator, X, y_fit, cv, method, classes, inner_params, split_params,
            n_jobs,
        )  # fmt: skip
    elif method == "decision_function" and _a_fold_misses_a_class(
        cv, X, y, split_params, len(classes)
    ):
        # (cross_val_predict refuses a fold's one-column decision_function)
        _, oof = cross_fit(
            estimator, X, y_fit, cv, method, classes, inner_params, split_params,
            n_jobs,
        )  # fmt: skip
    else:
        oof = cross_val_predict(
            clone(estimator),
            X,
            y_fit,
            cv=cv,
            method=method,
            n_jobs=n_jobs,
            # With routing, cross_val_predict routes these again (to the
            # estimator and the splitter, by their requests).
            params={**inner_params, **split_params},
        )
    logits = _oof_to_logits(oof, method, len(classes))
    fitted = clone(estimator).fit(X, y_fit, **inner_params)
    if not np.array_equal(host(fitted.classes_), classes):
        raise ValueError(
            "The refitted estimator's classes_ differ from the labels in y."
        )
    return fitted, classes, y_idx, logits, fold_models


def _a_fold_misses_a_class(cv, X, y, split_params, n_classes: int) -> bool:
    y = np.asarray(host(y))
    return any(
        np.unique(y[train]).shape[0] < n_classes
        for train, _ in cv.split(X, y, **split_params)
    )


def resolve_method(estimator, response_method: str) -> str:
    """Name of the estimator method that gives logits."""
    if response_method in ("predict", "fit", "fit_predict", "score", "transform"):
        raise ValueError(
            f"response_method={response_method!r} does not return scores (logits "
            "or probabilities); use 'auto', 'decision_function', "
            "'predict_log_proba' or 'predict_proba'."
        )
    if response_method != "auto":
        if not callable(getattr(estimator, response_method, None)):
            raise ValueError(
                f"response_method={response_method!r} is not a method of "
                f"{type(estimator).__name__}."
            )
        return response_method
    for name in AUTO_METHODS:
        if callable(getattr(estimator, name, None)):
            return name
    raise ValueError(
        f"{type(estimator).__name__} has no decision_function, predict_log_proba "
        "or predict_proba: no usable response method to compute logits."
    )


def encode_seen(y, classes) -> np.ndarray:
    """Indices of ``y`` in ``classes``; labels never seen are an error."""
    seen = np.isin(y, classes)
    if not seen.all():
        unseen = np.unique(np.asarray(y)[~seen])
        raise ValueError(
            f"y contains labels the estimator never saw: {unseen.tolist()!r}; "
            f"its classes_ are {classes.tolist()!r}."
        )
    order = np.argsort(classes, kind="stable")
    return order[np.searchsorted(classes, y, sorter=order)]


def host(a):
    """A NumPy array of an estimator's output or of labels, wherever they
    live (under ``array_api_dispatch`` they may be tensors on a device:
    responses are n x n_classes, a small copy beside X)."""
    if a is None or not is_foreign(a):
        return a if a is None else np.asarray(a)
    xp, _ = namespace(a)
    if xp is None:
        return np.asarray(host_logits(a, "the estimator's output"))
    return to_numpy(a, xp)


def like(result, X):
    """``result`` in the namespace and on the device of ``X`` (under
    ``array_api_dispatch``), else as it is."""
    xp, device = namespace(X)
    if xp is None:
        return result
    return xp.asarray(result, device=device)


def _as_logits(response, method: str, n_classes: int) -> np.ndarray:
    """Turn a response into ``(n_samples, n_classes)`` logits (no checks but
    the dtype: scores are floats; integer or string outputs are labels)."""
    response = host(response)
    if response.dtype.kind not in "f":
        raise ValueError(
            f"response_method={method!r} returned {response.dtype} values, not "
            "float scores: it gives labels, not logits or probabilities."
        )
    if method == "predict_proba":
        # log(max(p, tiny)) == max(log p, log tiny); NaN stays NaN for the check.
        response = np.log(np.maximum(response.astype(np.float64), _TINY))
    elif method == "predict_log_proba":
        response = np.maximum(response, _LOG_TINY)
    if response.ndim == 1 and n_classes == 2:
        # Logits (0, d): T = 1 gives sigmoid(d) exactly, and the label is
        # classes_[1] exactly when d > 0.
        response = np.column_stack([np.zeros_like(response), response])
    return response


def model_logits(estimator, X, method: str, n_classes: int) -> np.ndarray:
    """Checked logits of ``estimator`` on ``X``."""
    with np.errstate(divide="ignore"):
        response = getattr(estimator, method)(X)
        raw = _as_logits(response, method, n_classes)
    inner = estimator.estimator if isinstance(estimator, FrozenEstimator) else estimator
    name = f"the output of {type(inner).__name__}.{method}"
    if raw.ndim != 2 or raw.shape[1] != n_classes:
        raise ValueError(
            f"{name} must have shape (n_samples, {n_classes}); got {np.shape(raw)}."
        )
    if not np.all(np.isfinite(raw)):
        raise ValueError(f"{name} contains non-finite values (NaN or inf).")
    return check_logits(raw, name=name)


def _oof_to_logits(oof, method: str, n_classes: int) -> np.ndarray:
    """Out-of-fold responses as logits.

    ``cross_val_predict`` fills the columns of classes missing from a training
    fold with the smallest float (or a probability of 0); those entries get the
    smallest other logit of their row instead, so every loss stays finite.
    """
    oof = np.asarray(host(oof), dtype=np.float64)
    if method != "predict_proba":
        missing = oof == np.finfo(np.float64).min
        if oof.ndim == 2 and missing.any():
            row_min = np.where(missing, np.inf, oof).min(axis=1, keepdims=True)
            oof = np.where(missing, row_min, oof)
    with np.errstate(divide="ignore"):
        raw = _as_logits(oof, method, n_classes)
    if raw.ndim != 2 or raw.shape[1] != n_classes or not np.all(np.isfinite(raw)):
        raise ValueError(
            f"The out-of-fold {method} values must be finite with {n_classes} "
            "columns; the estimator returned non-finite or misshaped values."
        )
    return raw


def _fit_fold(estimator, X, y, train, params):
    """``estimator`` fitted on the rows ``train`` (its fit parameters sliced
    to them, as scikit-learn's cross-validation does)."""
    fold_params = check_method_params(X, params=params, indices=train)
    return estimator.fit(
        safe_indexing(X, train), safe_indexing(y, train), **fold_params
    )


def _fold_response(estimator, X, method: str, classes) -> np.ndarray:
    """``estimator``'s response with one column per class of ``classes``, as
    :func:`~sklearn.model_selection.cross_val_predict` lays it out (a class
    missing from the fold's training data gets its fill value)."""
    response = host(getattr(estimator, method)(X))
    seen = np.searchsorted(classes, host(estimator.classes_))
    if method == "decision_function" and len(seen) == 2 < len(classes):
        # A fold that saw two classes gives one score d (scikit-learn's
        # cross_val_predict refuses it): its logits are (0, d), as for any
        # binary model, and the other classes get scikit-learn's fill for a
        # class missing from a fold (the smallest float; see _oof_to_logits).
        if response.ndim == 1:
            response = np.column_stack([np.zeros_like(response), response])
        full = np.full((response.shape[0], len(classes)), np.finfo(np.float64).min)
        full[:, seen] = response
        return full
    return enforce_prediction_order(seen, response, len(classes), method)


def fold_logits(estimator, X, method: str, classes) -> np.ndarray:
    """Checked logits of one fold model on ``X``."""
    with np.errstate(divide="ignore"):
        return _oof_to_logits(
            _fold_response(estimator, X, method, classes), method, len(classes)
        )


def cross_fit(estimator, X, y, cv, method, classes, params, split_params, n_jobs):
    """The fold models (in split order) and their out-of-fold responses."""
    splits = list(cv.split(X, host(y), **split_params))
    test = np.concatenate([t for _, t in splits])
    if test.shape[0] != num_samples(X) or np.unique(test).shape[0] != test.shape[0]:
        raise ValueError(
            "cv must partition the data: with ensemble=True every sample must be "
            "in exactly one test fold."
        )
    models = Parallel(n_jobs=n_jobs)(
        delayed(_fit_fold)(clone(estimator), X, y, train, params) for train, _ in splits
    )
    parts = [
        _fold_response(model, safe_indexing(X, t), method, classes)
        for model, (_, t) in zip(models, splits, strict=True)
    ]
    oof = np.empty((test.shape[0], *np.shape(parts[0])[1:]), dtype=np.float64)
    for part, (_, t) in zip(parts, splits, strict=True):
        oof[t] = part
    return models, oof
