"""TemperatureScaledClassifier: temperature scaling around a scikit-learn classifier."""

from __future__ import annotations

import warnings
from inspect import signature
from numbers import Integral, Real
from types import SimpleNamespace

import numpy as np
from scipy.special import logsumexp
from sklearn.base import (
    BaseEstimator,
    ClassifierMixin,
    MetaEstimatorMixin,
)
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import check_cv
from sklearn.utils import get_tags, indexable
from sklearn.utils.metadata_routing import (
    MetadataRouter,
    MethodMapping,
    process_routing,
)
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, column_or_1d

from skts._array_api import (
    check_same_space,
    is_foreign,
    space,
)
from skts._fit import fit_temperature
from skts._linear import MatrixScaler, VectorScaler
from skts._numerics import BoundaryTemperatureWarning, Rows, log_softmax, softmax
from skts._responses import (
    AUTO_METHODS,
    fit_cross_validated,
    fit_frozen,
    fold_logits,
    host,
    like,
    model_logits,
    resolve_method,
)
from skts._scaler import TemperatureScaler
from skts._sklearn_compat import (
    HasMethods,
    Interval,
    StrOptions,
    assert_all_finite,
    fit_context,
    num_samples,
    routing_enabled,
)
from skts._validation import check_groups, check_temperatures, check_weights

__all__ = ["TemperatureScaledClassifier"]


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

    method : {"temperature", "vector", "matrix"}, default="temperature"
        The calibration map of the (out-of-fold) logits: one temperature
        (never changes a label); :class:`VectorScaler` or
        :class:`MatrixScaler` (regularised toward one temperature by
        ``alpha``; **they can change predicted labels**: :meth:`predict` is
        then the argmax of the calibrated probabilities).

    alpha : float, default=1.0
        Penalty strength of ``method="vector"`` and ``"matrix"``.

    group_shrinkage : float or "cv", default="cv"
        With ``groups`` in :meth:`fit`: how far each group's temperature is
        pulled toward the pooled one, in rows (see :class:`TemperatureScaler`).

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

    calibrator_ : TemperatureScaler, VectorScaler, MatrixScaler or None
        The fitted map of the logits when it is more than one temperature
        (``groups`` in :meth:`fit`, or ``method`` other than
        ``"temperature"``), fitted on the same held-out logits; else None.

    temperatures_by_group_ : dict or None
        With ``groups`` in :meth:`fit`: ``{group: T}`` (see
        :class:`TemperatureScaler`); else None.

    group_shrinkage_ : float or None
        With ``groups``: the shrinkage strength used, in rows; else None.

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
        "method": [StrOptions({"temperature", "vector", "matrix"})],
        "alpha": [Interval(Real, 0, None, closed="left")],
        "group_shrinkage": [
            Interval(Real, 0, None, closed="left"),
            StrOptions({"cv"}),
        ],
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
        method="temperature",
        alpha=1.0,
        group_shrinkage="cv",
    ):
        self.estimator = estimator
        self.temperatures = temperatures
        self.solver = solver
        self.cv = cv
        self.response_method = response_method
        self.tol = tol
        self.n_jobs = n_jobs
        self.ensemble = ensemble
        self.method = method
        self.alpha = alpha
        self.group_shrinkage = group_shrinkage

    def _get_estimator(self):
        if self.estimator is not None:
            return self.estimator
        estimator = LogisticRegression()
        if routing_enabled():
            estimator.set_fit_request(sample_weight=True)
        return estimator

    @fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y, sample_weight=None, groups=None, **fit_params):
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

        groups : array-like of shape (n_samples,) or "predicted", default=None
            A group label per sample (metadata known at prediction time), or
            ``"predicted"`` (the predicted class): a temperature per group,
            fitted on the held-out logits as :class:`TemperatureScaler` fits
            it (``temperatures_by_group_``); every label is kept. Pass the
            same kind of groups to the predict methods. With metadata
            routing, an array of groups also reaches the ``cv`` splitter
            when it requests them (:class:`~sklearn.model_selection.GroupKFold`).

        **fit_params : dict
            Parameters for the estimator's ``fit`` (and, with metadata routing,
            for the ``cv`` splitter), routed as scikit-learn routes them.

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
        y = host(y)
        if np.asarray(y).dtype.kind == "f":
            assert_all_finite(np.asarray(y), input_name="y")
        check_classification_targets(y)
        y = column_or_1d(y, warn=True)
        if y_fit is not None and not is_foreign(y_fit):
            y_fit = y
        X, y = indexable(X, y)
        n_samples = num_samples(X)
        if n_samples == 0:
            raise ValueError("X is empty: need at least 1 sample to fit.")
        temperatures = check_temperatures(self.temperatures)
        sample_weight = check_weights(host(sample_weight), n_samples)
        estimator = self._get_estimator()
        method = resolve_method(estimator, self.response_method)
        frozen = isinstance(estimator, FrozenEstimator)
        ensemble = (not frozen) if self.ensemble == "auto" else bool(self.ensemble)
        if ensemble and frozen:
            raise ValueError(
                "ensemble=True needs models fitted on cross-validation folds; "
                "a FrozenEstimator is not refitted: use ensemble=False or 'auto'."
            )
        if not frozen and method not in AUTO_METHODS:
            raise ValueError(
                f"response_method={method!r} cannot be cross-fitted "
                f"(cross_val_predict takes {', '.join(AUTO_METHODS)}); wrap a "
                "fitted estimator in FrozenEstimator to use another method."
            )
        if groups is not None and not isinstance(groups, str):
            groups = check_groups(host(groups), n_samples)
        if groups is not None and self.method != "temperature":
            raise ValueError(
                f"groups give a temperature per group; method={self.method!r} "
                "has no groups: use method='temperature'."
            )
        if routing_enabled():
            routed_groups = (
                {} if groups is None or isinstance(groups, str) else {"groups": groups}
            )
            routed = process_routing(
                self, "fit", sample_weight=sample_weight, **routed_groups, **fit_params
            )
            inner_params = dict(routed.estimator.fit)
            split_params = {} if frozen else dict(routed.splitter.split)
        else:
            inner_params, split_params = dict(fit_params), {}
            if sample_weight is not None and not frozen:
                if "sample_weight" in signature(estimator.fit).parameters:
                    inner_params["sample_weight"] = like(sample_weight, X)
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
            fitted, classes, y_idx, logits = fit_frozen(estimator, X, y, method)
        else:
            fitted, classes, y_idx, logits, fold_models = fit_cross_validated(
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

        calibrator = self._fit_calibrator(logits, y_idx, sample_weight, groups)
        if calibrator is None:
            result = fit_temperature(
                Rows(logits, y_idx, sample_weight, self.n_jobs),
                temperatures,
                solver=self.solver,
                tol=self.tol,
            )
        else:
            # (the pooled temperature, or the affine map's first step)
            result = SimpleNamespace(
                temperature=calibrator.temperature_,
                loss=calibrator.validation_loss_,
                at_boundary=calibrator.at_boundary_,
            )
        self.calibrator_ = calibrator
        self.temperatures_by_group_ = getattr(
            calibrator, "temperatures_by_group_", None
        )
        self.group_shrinkage_ = getattr(calibrator, "group_shrinkage_", None)
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

    def _fit_calibrator(self, logits, y_idx, sample_weight, groups):
        """The fitted map of the held-out logits when it is more than one
        temperature, else None."""
        if groups is None and self.method == "temperature":
            return None
        if self.method == "temperature":
            calibrator = TemperatureScaler(
                self.temperatures,
                solver=self.solver,
                tol=self.tol,
                n_jobs=self.n_jobs,
                dtype=np.float64,
                group_shrinkage=self.group_shrinkage,
            ).fit(logits, y_idx, sample_weight, groups=groups)
        else:
            scaler = VectorScaler if self.method == "vector" else MatrixScaler
            calibrator = scaler(self.alpha, temperatures=self.temperatures)
            with warnings.catch_warnings():
                # The temperature is the map's start (warned below, if at all).
                warnings.simplefilter("ignore", BoundaryTemperatureWarning)
                calibrator.fit(logits, y_idx, sample_weight)
        return calibrator

    def _check_groups(self, groups) -> None:
        """Groups at prediction need a fit with groups."""
        if groups is not None and self.temperatures_by_group_ is None:
            raise ValueError(
                "groups were given, but TemperatureScaledClassifier was fitted "
                "without groups."
            )

    def _log_proba_of(self, logits, groups=None):
        """Calibrated log-probabilities of some logits."""
        self._check_groups(groups)
        if self.calibrator_ is None:
            return log_softmax(logits, self.temperature_)
        if isinstance(self.calibrator_, TemperatureScaler):
            return self.calibrator_.predict_log_proba(logits, groups=groups)
        return self.calibrator_.predict_log_proba(logits)

    def _uncalibrated_logits(self, X):
        check_is_fitted(self)
        return model_logits(
            self.estimator_, X, self.response_method_, len(self.classes_)
        )

    def _ensemble_log_proba(self, X, groups=None):
        """``log mean_k softmax(z_k(X) / T)`` over the fold models (the
        calibration map of each fold's logits), or None without ensemble."""
        check_is_fitted(self)
        if not hasattr(self, "estimators_"):
            return None
        parts = [
            self._log_proba_of(
                fold_logits(est, X, self.response_method_, self.classes_), groups
            )
            for est in self.estimators_
        ]
        with np.errstate(under="ignore"):
            out = logsumexp(np.stack(parts), axis=0) - np.log(len(parts))
        # Rows sum to 1 up to rounding; renormalise so they do in float64.
        return out - logsumexp(out, axis=1, keepdims=True)

    def decision_function(self, X, groups=None):
        """Calibrated logits ``z(X) / temperature_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Input data.

        groups : array-like of shape (n_samples,) or "predicted", default=None
            Each sample's group, with a classifier fitted with ``groups``
            (see :meth:`predict_proba`).

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
        logits = self._ensemble_log_proba(X, groups)
        if logits is not None:
            # The ensemble's calibrated logits: its log-probabilities.
            if len(self.classes_) == 2:
                return like(logits[:, 1] - logits[:, 0], X)
            return like(logits, X)
        logits = self._uncalibrated_logits(X)
        if self.calibrator_ is not None:
            if isinstance(self.calibrator_, TemperatureScaler):
                logits = self.calibrator_.transform(logits, groups=groups)
            else:
                logits = self.calibrator_.transform(logits)
            if len(self.classes_) == 2:
                return like(logits[:, 1] - logits[:, 0], X)
            return like(logits, X)
        self._check_groups(groups)
        with np.errstate(over="ignore", under="ignore"):
            if len(self.classes_) == 2:
                return like((logits[:, 1] - logits[:, 0]) / self.temperature_, X)
            return like(logits / self.temperature_, X)

    def predict_proba(self, X, groups=None):
        """Calibrated probabilities ``softmax(z(X) / temperature_)``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Input data.

        groups : array-like of shape (n_samples,) or "predicted", default=None
            With a classifier fitted with ``groups``: each sample's group
            (an unseen group gets the pooled ``temperature_``, with a
            warning); ``None``: the predicted class if fitted with
            ``groups="predicted"``, else ``temperature_``.

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
        log_proba = self._ensemble_log_proba(X, groups)
        if log_proba is not None:
            return like(np.exp(log_proba), X)
        if self.calibrator_ is not None:
            logits = self._uncalibrated_logits(X)
            return like(np.exp(self._log_proba_of(logits, groups)), X)
        self._check_groups(groups)
        return like(softmax(self._uncalibrated_logits(X), self.temperature_), X)

    def predict_log_proba(self, X, groups=None):
        """Logarithm of :meth:`predict_proba`, computed without underflow.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Input data.

        groups : array-like of shape (n_samples,) or "predicted", default=None
            Each sample's group, as for :meth:`predict_proba`.

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
        log_proba = self._ensemble_log_proba(X, groups)
        if log_proba is not None:
            return like(log_proba, X)
        return like(self._log_proba_of(self._uncalibrated_logits(X), groups), X)

    def predict(self, X, groups=None):
        """Class of the largest logit (the first on ties): unchanged by ``T``
        (also by a temperature per group); with ``method="vector"`` or
        ``"matrix"``, the class of the largest calibrated probability.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Input data.

        groups : array-like of shape (n_samples,) or "predicted", default=None
            Accepted for symmetry with :meth:`predict_proba`: a temperature
            never changes a label, so it is not used.

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
        logits = self._ensemble_log_proba(X, groups)
        if logits is None:
            logits = self._uncalibrated_logits(X)
            if self.calibrator_ is not None and self.method != "temperature":
                logits = self.calibrator_.transform(logits)
        return like(self.classes_[np.argmax(logits, axis=1)], X)

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
