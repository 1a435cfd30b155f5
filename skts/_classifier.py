"""TemperatureScaledClassifier: temperature scaling around a scikit-learn classifier."""

from __future__ import annotations

import warnings
from inspect import signature
from numbers import Integral, Real

import numpy as np
from joblib import Parallel, delayed
from scipy.special import logsumexp
from sklearn.base import (
    BaseEstimator,
    ClassifierMixin,
    MetaEstimatorMixin,
    clone,
)
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import check_cv, cross_val_predict
from sklearn.utils import get_tags, indexable
from sklearn.utils.metadata_routing import (
    MetadataRouter,
    MethodMapping,
    _routing_enabled,
    process_routing,
)
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (
    _assert_all_finite,
    _check_method_params,
    _num_samples,
    check_is_fitted,
    column_or_1d,
)

from skts._array_api import (
    check_same_space,
    host_logits,
    is_foreign,
    namespace,
    space,
    to_numpy,
)
from skts._fit import fit_temperature
from skts._numerics import Rows, log_softmax, softmax
from skts._sklearn_compat import (
    HasMethods,
    Interval,
    StrOptions,
    enforce_prediction_order,
    fit_context,
    safe_indexing,
)
from skts._validation import check_logits, check_temperatures, check_weights

__all__ = ["TemperatureScaledClassifier"]

_AUTO_METHODS = ("decision_function", "predict_log_proba", "predict_proba")
# log(predict_proba) is kept finite: a probability of 0 becomes log(tiny).
_TINY = float(np.finfo(np.float64).tiny)
_LOG_TINY = float(np.log(_TINY))


class TemperatureScaledClassifier(ClassifierMixin, MetaEstimatorMixin, BaseEstimator):
    """Calibrate a classifier's probabilities with one temperature.

    The wrapped classifier's logits ``z(x)`` (decision function, or
    log-probabilities) are divided by a temperature ``T > 0`` before the
    softmax. ``T`` is the smallest candidate among the minimisers of the
    log-loss on held-out data, so predicted labels, accuracy and the
    confusion matrix never change; only the confidence does. (With
    ``ensemble``, the default when the estimator is cross-fitted, the
    forecast is the average over the fold models and the label its argmax.)

    Parameters
    ----------
    estimator : estimator instance, default=None
        The classifier to calibrate. ``None`` means
        :class:`~sklearn.linear_model.LogisticRegression`. Wrapped in
        :class:`~sklearn.frozen.FrozenEstimator`, it is used as fitted and all of
        ``(X, y)`` passed to ``fit`` is the held-out set. Otherwise it is cloned:
        ``T`` is fitted on out-of-fold logits (see ``cv``), then ``estimator_`` is
        refitted on all the data.

    temperatures : array-like of shape (n_candidates,), default=None
        Candidate temperatures, finite and > 0, any order, duplicates allowed.
        ``None`` uses 1001 geometric points from 0.01 to 100 (1 included).

    solver : {"grid", "continuous"}, default="grid"
        ``"grid"``: the exact rule over the candidates. ``"continuous"``:
        minimise over ``[min, max]`` of the candidates (bisection with Newton
        steps in ``beta = 1/T``).

    cv : int, cross-validation generator or iterable, default=None
        Splits for the out-of-fold logits when ``estimator`` is not frozen;
        ``None`` is 5-fold stratified. The test folds must partition the data.

    response_method : str, default="auto"
        Method of the estimator giving the logits. ``"auto"`` tries
        ``decision_function``, then ``predict_log_proba``, then
        ``predict_proba`` (whose log is kept finite). Any method name that
        returns ``(n_samples, n_classes)`` scores (or ``(n_samples,)`` for a
        binary problem) is accepted.

    tol : float, default=1e-10
        Tolerance of the continuous solver in ``beta = 1/T``, relative to its
        starting estimate of ``beta``.

    n_jobs : int, default=None
        Jobs of the out-of-fold fits (passed to
        :func:`~sklearn.model_selection.cross_val_predict`, where ``None``
        means 1) and threads of the temperature search (``None``: all cores
        where it pays, see :class:`TemperatureScaler`). The answer does not
        depend on it.

    ensemble : bool or "auto", default="auto"
        As in :class:`~sklearn.calibration.CalibratedClassifierCV`. ``True``:
        keep the model fitted on each training fold (``estimators_``, in fold
        order); one temperature is fitted on their out-of-fold logits, and
        :meth:`predict_proba` averages ``softmax(z_k(x) / T)`` over the fold
        models (usually better probabilities than one refitted model; the
        predicted label, the argmax of that average, can then differ from a
        single model's). ``False``: the temperature scales ``estimator_``,
        refitted on all the data. ``"auto"``: ``True`` unless the estimator
        is a :class:`~sklearn.frozen.FrozenEstimator` (which has no folds).

    Attributes
    ----------
    estimator_ : estimator instance
        The fitted (or frozen) classifier whose logits are scaled; with
        ``ensemble``, refitted on all the data too, for inspection (its
        coefficients, its features), while predictions come from
        ``estimators_``.

    estimators_ : list of estimator instances
        With ``ensemble``: the models fitted on each training fold, in the
        order of the ``cv`` splits (absent otherwise).

    classes_ : ndarray of shape (n_classes,)
        Class labels, those of ``estimator_``.

    temperature_ : float
        The chosen temperature.

    validation_loss_ : float
        Held-out mean (weighted) log-loss at ``temperature_``.
        Computed in float64 for up to 2**18 logits; for larger inputs the
        grid search reports its float32-arithmetic value (float64
        accumulation), within a proven error bound, typically 1e-7 relative.

    at_boundary_ : bool
        Whether ``temperature_`` is an end of the candidate range.

    response_method_ : str
        The method of ``estimator_`` that gives the logits.

    n_features_in_ : int
        Number of features seen by ``estimator_``.

    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Feature names seen by ``estimator_``, when it has them.

    Raises
    ------
    ValueError
        On bad temperatures or sample weights, labels the frozen estimator
        never saw, non-finite logits from the estimator, or an estimator with no
        usable response method.

    See Also
    --------
    TemperatureScaler : The same selection on raw logit arrays.
    sklearn.calibration.CalibratedClassifierCV : Sigmoid, isotonic and
        temperature calibration in scikit-learn.

    Notes
    -----
    A binary ``decision_function`` ``d`` is turned into the logits ``(0, d)``,
    so ``T = 1`` reproduces ``sigmoid(d)`` exactly and
    :meth:`decision_function` returns ``d / T``.

    References
    ----------
    C. Guo, G. Pleiss, Y. Sun and K. Q. Weinberger, "On Calibration of Modern
    Neural Networks", ICML 2017, arXiv:1706.04599.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from sklearn.frozen import FrozenEstimator
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.model_selection import train_test_split
    >>> from skts import TemperatureScaledClassifier
    >>> X, y = load_digits(return_X_y=True)
    >>> X_train, X_val, y_train, y_val = train_test_split(X, y, random_state=0)
    >>> model = LogisticRegression(max_iter=2000).fit(X_train, y_train)
    >>> calibrated = TemperatureScaledClassifier(FrozenEstimator(model))
    >>> calibrated.fit(X_val, y_val).temperature_ > 1  # the model was overconfident
    True
    >>> bool((calibrated.predict(X_val) == model.predict(X_val)).all())
    True
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit"]), None],
        "temperatures": ["array-like", None],
        "solver": [StrOptions({"grid", "continuous"})],
        "cv": ["cv_object"],
        "response_method": [str],
        "tol": [Interval(Real, 0, 1, closed="neither")],
        "n_jobs": [Integral, None],
        "ensemble": ["boolean", StrOptions({"auto"})],
    }

    def __init__(
        self,
        estimator=None,
        *,
        temperatures=None,
        solver="grid",
        cv=None,
        response_method="auto",
        tol=1e-10,
        n_jobs=None,
        ensemble="auto",
    ):
        self.estimator = estimator
        self.temperatures = temperatures
        self.solver = solver
        self.cv = cv
        self.response_method = response_method
        self.tol = tol
        self.n_jobs = n_jobs
        self.ensemble = ensemble

    def _get_estimator(self):
        if self.estimator is not None:
            return self.estimator
        estimator = LogisticRegression()
        if _routing_enabled():
            estimator.set_fit_request(sample_weight=True)
        return estimator

    @fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y, sample_weight=None, **fit_params):
        """Fit the temperature (and the estimator, unless it is frozen).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Held-out data for a frozen estimator; otherwise training data.

        y : array-like of shape (n_samples,)
            Target labels.

        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights, always used by the log-loss that chooses
            ``T``. Without metadata routing they are also passed to the
            estimator's ``fit`` (out-of-fold and final) when it accepts them,
            else a warning says they only weight the calibration (as
            :class:`~sklearn.calibration.CalibratedClassifierCV` does); with
            routing enabled, the estimator gets them only if it requests them.

        **fit_params : dict
            Parameters for the estimator's ``fit`` (and, with metadata routing,
            for the ``cv`` splitter, e.g. ``groups``), routed as scikit-learn
            routes them.

        Returns
        -------
        self : TemperatureScaledClassifier
            The fitted classifier.

        Examples
        --------
        >>> from sklearn.datasets import load_iris
        >>> from sklearn.linear_model import LogisticRegression
        >>> from skts import TemperatureScaledClassifier
        >>> X, y = load_iris(return_X_y=True)
        >>> clf = TemperatureScaledClassifier(LogisticRegression(max_iter=1000), cv=3)
        >>> clf = clf.fit(X, y)
        >>> len(clf.estimators_), clf.classes_.tolist(), clf.temperature_ > 0
        (3, [0, 1, 2], True)
        """
        # Under array_api_dispatch the estimator gets y as given (in X's
        # namespace); the calibration reads a NumPy copy (O(n)).
        y_fit = y
        y = _host(y)
        if np.asarray(y).dtype.kind == "f":
            _assert_all_finite(np.asarray(y), input_name="y")
        check_classification_targets(y)
        y = column_or_1d(y, warn=True)
        if y_fit is not None and not is_foreign(y_fit):
            y_fit = y
        X, y = indexable(X, y)
        n_samples = _num_samples(X)
        if n_samples == 0:
            raise ValueError("X is empty: need at least 1 sample to fit.")
        temperatures = check_temperatures(self.temperatures)
        sample_weight = check_weights(_host(sample_weight), n_samples)
        estimator = self._get_estimator()
        method = _resolve_method(estimator, self.response_method)
        frozen = isinstance(estimator, FrozenEstimator)
        ensemble = (not frozen) if self.ensemble == "auto" else bool(self.ensemble)
        if ensemble and frozen:
            raise ValueError(
                "ensemble=True needs models fitted on cross-validation folds; "
                "a FrozenEstimator is not refitted: use ensemble=False or 'auto'."
            )
        if not frozen and method not in _AUTO_METHODS:
            raise ValueError(
                f"response_method={method!r} cannot be cross-fitted "
                f"(cross_val_predict takes {', '.join(_AUTO_METHODS)}); wrap a "
                "fitted estimator in FrozenEstimator to use another method."
            )
        if _routing_enabled():
            routed = process_routing(
                self, "fit", sample_weight=sample_weight, **fit_params
            )
            inner_params = dict(routed.estimator.fit)
            split_params = {} if frozen else dict(routed.splitter.split)
        else:
            inner_params, split_params = dict(fit_params), {}
            if sample_weight is not None and not frozen:
                if "sample_weight" in signature(estimator.fit).parameters:
                    inner_params["sample_weight"] = _like(sample_weight, X)
                else:
                    warnings.warn(
                        f"{type(estimator).__name__}.fit does not accept "
                        "sample_weight: the weights are used for the temperature "
                        "only, not to fit the estimator.",
                        UserWarning,
                        stacklevel=3,
                    )

        fold_models = None
        if frozen:
            fitted, classes, y_idx, logits = _fit_frozen(estimator, X, y, method)
        else:
            fitted, classes, y_idx, logits, fold_models = _fit_cross_validated(
                estimator,
                X,
                y,
                y_fit,
                check_cv(self.cv, y, classifier=True),
                method,
                ensemble,
                inner_params,
                split_params,
                self.n_jobs,
            )

        result = fit_temperature(
            Rows(logits, y_idx, sample_weight, self.n_jobs),
            temperatures,
            solver=self.solver,
            tol=self.tol,
        )
        self.estimator_ = fitted
        self._fit_space = space(X)
        if ensemble:
            self.estimators_ = fold_models
        elif hasattr(self, "estimators_"):
            del self.estimators_  # a refit without ensemble: no fold models
        self.classes_ = classes
        self.response_method_ = method
        self.temperature_ = result.temperature
        self.validation_loss_ = result.loss
        self.at_boundary_ = result.at_boundary
        inner = fitted.estimator if isinstance(fitted, FrozenEstimator) else fitted
        for attr in ("n_features_in_", "feature_names_in_"):
            if hasattr(inner, attr):
                setattr(self, attr, getattr(inner, attr))
        return self

    def _uncalibrated_logits(self, X):
        check_is_fitted(self)
        return _logits(self.estimator_, X, self.response_method_, len(self.classes_))

    def _ensemble_log_proba(self, X):
        """``log mean_k softmax(z_k(X) / T)`` over the fold models, or None
        without ensemble."""
        check_is_fitted(self)
        if not hasattr(self, "estimators_"):
            return None
        parts = [
            log_softmax(
                _fold_logits(est, X, self.response_method_, self.classes_),
                self.temperature_,
            )
            for est in self.estimators_
        ]
        with np.errstate(under="ignore"):
            out = logsumexp(np.stack(parts), axis=0) - np.log(len(parts))
        # Rows sum to 1 up to rounding; renormalise so they do in float64.
        return out - logsumexp(out, axis=1, keepdims=True)

    def decision_function(self, X):
        """Calibrated logits ``z(X) / temperature_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Input data.

        Returns
        -------
        ndarray of shape (n_samples, n_classes) or (n_samples,)
            Calibrated logits; for two classes the 1-D score whose sign gives
            ``classes_[1]`` (``> 0``), as scikit-learn does.

        Examples
        --------
        >>> from sklearn.datasets import load_iris
        >>> from sklearn.linear_model import LogisticRegression
        >>> from skts import TemperatureScaledClassifier
        >>> X, y = load_iris(return_X_y=True)
        >>> clf = TemperatureScaledClassifier(LogisticRegression(max_iter=1000), cv=3)
        >>> clf = clf.fit(X, y)
        >>> clf.decision_function(X[:2]).shape  # calibrated logits
        (2, 3)
        """
        check_is_fitted(self)
        check_same_space(self, X, "decision_function")
        logits = self._ensemble_log_proba(X)
        if logits is not None:
            # The ensemble's calibrated logits: its log-probabilities.
            if len(self.classes_) == 2:
                return _like(logits[:, 1] - logits[:, 0], X)
            return _like(logits, X)
        logits = self._uncalibrated_logits(X)
        with np.errstate(over="ignore", under="ignore"):
            if len(self.classes_) == 2:
                return _like((logits[:, 1] - logits[:, 0]) / self.temperature_, X)
            return _like(logits / self.temperature_, X)

    def predict_proba(self, X):
        """Calibrated probabilities ``softmax(z(X) / temperature_)``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Input data.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Rows sum to 1, columns follow ``classes_``.

        Examples
        --------
        >>> from sklearn.datasets import load_iris
        >>> from sklearn.linear_model import LogisticRegression
        >>> from skts import TemperatureScaledClassifier
        >>> X, y = load_iris(return_X_y=True)
        >>> clf = TemperatureScaledClassifier(LogisticRegression(max_iter=1000), cv=3)
        >>> clf = clf.fit(X, y)
        >>> clf.predict_proba(X[:2]).sum(axis=1).round(12)
        array([1., 1.])
        """
        check_is_fitted(self)
        check_same_space(self, X, "predict_proba")
        log_proba = self._ensemble_log_proba(X)
        if log_proba is not None:
            return _like(np.exp(log_proba), X)
        return _like(softmax(self._uncalibrated_logits(X), self.temperature_), X)

    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`, computed without underflow.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Input data.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Calibrated log-probabilities.

        Examples
        --------
        >>> from sklearn.datasets import load_iris
        >>> from sklearn.linear_model import LogisticRegression
        >>> from skts import TemperatureScaledClassifier
        >>> X, y = load_iris(return_X_y=True)
        >>> clf = TemperatureScaledClassifier(LogisticRegression(max_iter=1000), cv=3)
        >>> clf = clf.fit(X, y)
        >>> import numpy as np
        >>> log_p, p = clf.predict_log_proba(X[:2]), clf.predict_proba(X[:2])
        >>> bool(np.allclose(np.exp(log_p), p))
        True
        """
        check_is_fitted(self)
        check_same_space(self, X, "predict_log_proba")
        log_proba = self._ensemble_log_proba(X)
        if log_proba is not None:
            return _like(log_proba, X)
        return _like(log_softmax(self._uncalibrated_logits(X), self.temperature_), X)

    def predict(self, X):
        """Class of the largest logit (the first on ties): unchanged by ``T``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Input data.

        Returns
        -------
        ndarray of shape (n_samples,)
            Predicted labels from ``classes_``.

        Examples
        --------
        >>> from sklearn.datasets import load_iris
        >>> from sklearn.linear_model import LogisticRegression
        >>> from skts import TemperatureScaledClassifier
        >>> X, y = load_iris(return_X_y=True)
        >>> clf = TemperatureScaledClassifier(LogisticRegression(max_iter=1000), cv=3)
        >>> clf = clf.fit(X, y)
        >>> clf.predict(X[:3])
        array([0, 0, 0])
        """
        check_is_fitted(self)
        check_same_space(self, X, "predict")
        logits = self._ensemble_log_proba(X)
        if logits is None:
            logits = self._uncalibrated_logits(X)
        return _like(self.classes_[np.argmax(logits, axis=1)], X)

    def get_metadata_routing(self):
        """Get metadata routing of this object.

        ``sample_weight`` is consumed by the temperature fit itself; ``fit``
        metadata go to the estimator's ``fit`` and (unless the estimator is
        frozen) to the ``cv`` splitter's ``split``, by their requests.

        Returns
        -------
        routing : MetadataRouter
            The routing information.

        Examples
        --------
        >>> import sklearn
        >>> from sklearn.linear_model import LogisticRegression
        >>> from skts import TemperatureScaledClassifier
        >>> with sklearn.config_context(enable_metadata_routing=True):
        ...     inner = LogisticRegression().set_fit_request(sample_weight=True)
        ...     routing = TemperatureScaledClassifier(inner).get_metadata_routing()
        >>> routing.consumes("fit", ["sample_weight"])
        {'sample_weight'}
        """
        estimator = self._get_estimator()
        router = MetadataRouter(owner=self).add_self_request(self)
        router.add(
            estimator=estimator,
            method_mapping=MethodMapping().add(caller="fit", callee="fit"),
        )
        if not isinstance(estimator, FrozenEstimator):
            router.add(
                splitter=check_cv(self.cv, classifier=True),
                method_mapping=MethodMapping().add(caller="fit", callee="split"),
            )
        return router

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        estimator = LogisticRegression() if self.estimator is None else self.estimator
        inner = get_tags(estimator)
        tags.array_api_support = inner.array_api_support
        tags.input_tags.sparse = inner.input_tags.sparse
        tags.input_tags.allow_nan = inner.input_tags.allow_nan
        return tags


def _fit_frozen(estimator, X, y, method: str):
    """A frozen model: all of ``(X, y)`` is held out, nothing is refitted.
    Returns the model, its classes, ``y`` as class indices and the logits."""
    # An unfitted model inside FrozenEstimator: scikit-learn's error.
    check_is_fitted(estimator.estimator)
    classes = _host(estimator.classes_)
    y_idx = _encode_seen(y, classes)
    return estimator, classes, y_idx, _logits(estimator, X, method, len(classes))


def _fit_cross_validated(
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
        fold_models, oof = _cross_fit(
            estimator, X, y_fit, cv, method, classes, inner_params, split_params,
            n_jobs,
        )  # fmt: skip
    elif method == "decision_function" and _a_fold_misses_a_class(
        cv, X, y, split_params, len(classes)
    ):
        # (cross_val_predict refuses a fold's one-column decision_function)
        _, oof = _cross_fit(
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
    if not np.array_equal(_host(fitted.classes_), classes):
        raise ValueError(
            "The refitted estimator's classes_ differ from the labels in y."
        )
    return fitted, classes, y_idx, logits, fold_models


def _a_fold_misses_a_class(cv, X, y, split_params, n_classes: int) -> bool:
    y = np.asarray(_host(y))
    return any(
        np.unique(y[train]).shape[0] < n_classes
        for train, _ in cv.split(X, y, **split_params)
    )


def _resolve_method(estimator, response_method: str) -> str:
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
    for name in _AUTO_METHODS:
        if callable(getattr(estimator, name, None)):
            return name
    raise ValueError(
        f"{type(estimator).__name__} has no decision_function, predict_log_proba "
        "or predict_proba: no usable response method to compute logits."
    )


def _encode_seen(y, classes) -> np.ndarray:
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


def _host(a):
    """A NumPy array of an estimator's output or of labels, wherever they
    live (under ``array_api_dispatch`` they may be tensors on a device:
    responses are n x n_classes, a small copy beside X)."""
    if a is None or not is_foreign(a):
        return a if a is None else np.asarray(a)
    xp, _ = namespace(a)
    if xp is None:
        return np.asarray(host_logits(a, "the estimator's output"))
    return to_numpy(a, xp)


def _like(result, X):
    """``result`` in the namespace and on the device of ``X`` (under
    ``array_api_dispatch``), else as it is."""
    xp, device = namespace(X)
    if xp is None:
        return result
    return xp.asarray(result, device=device)


def _as_logits(response, method: str, n_classes: int) -> np.ndarray:
    """Turn a response into ``(n_samples, n_classes)`` logits (no checks but
    the dtype: scores are floats; integer or string outputs are labels)."""
    response = _host(response)
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


def _logits(estimator, X, method: str, n_classes: int) -> np.ndarray:
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
    oof = np.asarray(_host(oof), dtype=np.float64)
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
    fold_params = _check_method_params(X, params=params, indices=train)
    return estimator.fit(
        safe_indexing(X, train), safe_indexing(y, train), **fold_params
    )


def _fold_response(estimator, X, method: str, classes) -> np.ndarray:
    """``estimator``'s response with one column per class of ``classes``, as
    :func:`~sklearn.model_selection.cross_val_predict` lays it out (a class
    missing from the fold's training data gets its fill value)."""
    response = _host(getattr(estimator, method)(X))
    seen = np.searchsorted(classes, _host(estimator.classes_))
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


def _fold_logits(estimator, X, method: str, classes) -> np.ndarray:
    """Checked logits of one fold model on ``X``."""
    with np.errstate(divide="ignore"):
        return _oof_to_logits(
            _fold_response(estimator, X, method, classes), method, len(classes)
        )


def _cross_fit(estimator, X, y, cv, method, classes, params, split_params, n_jobs):
    """The fold models (in split order) and their out-of-fold responses."""
    splits = list(cv.split(X, _host(y), **split_params))
    test = np.concatenate([t for _, t in splits])
    if test.shape[0] != _num_samples(X) or np.unique(test).shape[0] != test.shape[0]:
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
