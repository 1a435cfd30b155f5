"""VectorScaler and MatrixScaler: the rungs below one temperature.

Both first divide the logits by the exact-rule temperature (as
:class:`~skts.TemperatureScaler` chooses it), then fit an affine map of the
scaled logits ``u = z / T``:

    u = log softmax(z / T)
    vector:  u -> u * (1 + v) + b                 (2K parameters)
    matrix:  u -> u (I + M)^T + b                 (K^2 + K parameters)

by the weighted mean log-loss plus a ridge penalty on the deviations from
temperature scaling: ``alpha * K / n`` per squared scale deviation and
intercept, as in probmetrics' structured vector scaling (Berta et al.,
2026), and ``alpha * K^2 / n`` per squared off-diagonal entry of the matrix
(off-diagonal and intercept regularisation, Kull et al., 2019: without it
matrix scaling collapses on many classes). A large ``alpha`` gives
temperature scaling back; the problem is convex (a multinomial logistic
regression in the parameters), solved by SciPy's L-BFGS-B with the exact
gradient to ``tol``.

Unlike a temperature, these maps can change the predicted label of a row:
``predict`` returns the argmax of the calibrated logits.
"""

from __future__ import annotations

import warnings
from numbers import Integral, Real

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import minimize
from scipy.special import log_softmax as _log_softmax
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from skts._fit import fit_temperature, rows_for
from skts._numerics import BoundaryTemperatureWarning, blocks
from skts._sklearn_compat import Interval, fit_context
from skts._validation import (
    check_class_indices,
    check_logits,
    check_temperatures,
    check_weights,
)

__all__ = ["MatrixScaler", "VectorScaler"]


def _dense(logits) -> NDArray[np.float64]:
    """Checked logits as one float64 array (block readers gathered)."""
    if isinstance(logits, np.ndarray):
        return np.asarray(logits, dtype=np.float64)
    return np.concatenate(
        [np.asarray(logits[r], dtype=np.float64) for r in blocks(*logits.shape)]
    )


def _objective(kind: str, u, y, w, penalty: float):
    """The penalised mean log-loss of the affine map and its gradient, as a
    function of the flat parameters."""
    n, k = u.shape
    rows = np.arange(n)

    def unpack(theta):
        if kind == "vector":
            return theta[:k], theta[k:]
        return theta[: k * k].reshape(k, k), theta[k * k :]

    def value_and_grad(theta):
        a, b = unpack(theta)
        z = (u * (1 + a) if kind == "vector" else u + u @ a.T) + b
        logp = _log_softmax(z, axis=1)
        loss = -(w * logp[rows, y]).sum()
        r = np.exp(logp)
        r[rows, y] -= 1
        r *= w[:, None]
        gb = r.sum(axis=0)
        ga = (r * u).sum(axis=0) if kind == "vector" else r.T @ u
        loss += np.dot(penalty * theta, theta)
        grad = np.concatenate([ga.reshape(-1), gb]) + 2 * penalty * theta
        return loss, grad

    return value_and_grad


# Newton's polish (an exact Hessian) up to this many parameters.
_NEWTON_PARAMETERS = 256


def _hessian(kind: str, u, theta, w, penalty) -> NDArray:
    """The exact Hessian of :func:`_objective` at ``theta``.

    Each class's logit is linear in its own parameters through features
    ``f`` (vector: ``(u_k, 1)``; matrix: ``(u, 1)``), so the Hessian is
    ``sum_i w_i S_i[k, l] f_ika f_ilc`` with ``S = diag(p) - p p^T``: a
    block per class from ``diag(p)`` less ``A^T B``, ``A = w p f`` and
    ``B = p f`` of shape ``(n, K * features)`` (one matrix product), laid
    out per (class, feature) and permuted to ``theta``'s order.
    """
    n, k = u.shape
    ones = np.ones((n, 1))
    if kind == "vector":
        z = u * (1 + theta[:k]) + theta[k:]
        f = np.stack([u, np.broadcast_to(ones, u.shape)], axis=2)  # (n, k, 2)
    else:
        z = u + u @ theta[: k * k].reshape(k, k).T + theta[k * k :]
        f = np.broadcast_to(np.hstack([u, ones])[:, None, :], (n, k, k + 1))
    per = f.shape[2]
    p = np.exp(_log_softmax(z, axis=1))
    b = (p[:, :, None] * f).reshape(n, k * per)
    h = -((b * w[:, None]).T @ b)
    blocks = np.einsum("ik,ika,ikc->kac", p * w[:, None], f, f)
    for c in range(k):
        h[c * per : (c + 1) * per, c * per : (c + 1) * per] += blocks[c]
    # (class, feature) -> theta's index
    if kind == "vector":
        order = np.array([[c, k + c] for c in range(k)]).reshape(-1)
    else:
        order = np.array(
            [[c * k + a for a in range(k)] + [k * k + c] for c in range(k)]
        ).reshape(-1)
    out = np.empty_like(h)
    out[np.ix_(order, order)] = h
    out[np.diag_indices_from(out)] += 2 * penalty
    return out


def _polish(kind, u, y, w, penalty, theta) -> NDArray:
    """Newton steps from ``theta`` (near the optimum of a strongly convex
    problem: quadratic convergence), while they lower the objective."""
    f = _objective(kind, u, y, w, penalty)
    value, grad = f(theta)
    for _ in range(20):
        step = np.linalg.solve(_hessian(kind, u, theta, w, penalty), grad)
        new_value, new_grad = f(theta - step)
        if not new_value <= value:
            break
        theta, value, grad = theta - step, new_value, new_grad
        if np.abs(step).max() <= 1e-15 * max(1.0, np.abs(theta).max()):
            break
    return theta


class _AffineScaler(ClassifierMixin, TransformerMixin, BaseEstimator):
    """The shared fit and predictions of the affine rungs."""

    _kind = "vector"

    _parameter_constraints: dict = {
        "alpha": [Interval(Real, 0, None, closed="left")],
        "temperatures": ["array-like", None],
        "tol": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
    }

    def __init__(self, alpha=1.0, *, temperatures=None, tol=1e-8, max_iter=1000):
        self.alpha = alpha
        self.temperatures = temperatures
        self.tol = tol
        self.max_iter = max_iter

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, logits, y, sample_weight=None):
        """Fit the temperature, then the regularised affine map.

        Parameters
        ----------
        logits : array-like or tensor of shape (n_samples, n_classes)
            Held-out logits (binary logits may be one column, the logit of
            class 1).

        y : array-like of shape (n_samples,)
            True class indices in ``0..n_classes-1``.

        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights of the log-loss (weighted mean).

        Returns
        -------
        self
            The fitted calibrator.
        """
        temperatures = check_temperatures(self.temperatures)
        checked = check_logits(logits, warn_probabilities=True)
        y = check_class_indices(y, checked.shape)
        weights = check_weights(sample_weight, checked.shape[0])
        with warnings.catch_warnings():
            # The temperature is a starting point here, not the answer.
            warnings.simplefilter("ignore", BoundaryTemperatureWarning)
            start = fit_temperature(rows_for(checked, y, weights), temperatures)
        z = _dense(checked)
        u = _log_softmax(z / start.temperature, axis=1)
        n, k = u.shape
        w = np.ones(n) if weights is None else weights
        # n counts rows by weight (weights are repetitions, scikit-learn's
        # convention): repeated and weighted rows give the same penalty.
        total = float(w.sum())
        w = w / total
        penalty = np.full(
            2 * k if self._kind == "vector" else k * k + k, self.alpha * k / total
        )
        if self._kind == "matrix":
            # K^2 off-diagonal entries: each pulled K times harder, so that
            # the map stays near vector scaling on many classes.
            off = ~np.eye(k, dtype=bool).reshape(-1)
            penalty[: k * k][off] = self.alpha * k * k / total
        result = minimize(
            _objective(self._kind, u, y, w, penalty),
            np.zeros(penalty.size),
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": self.max_iter, "gtol": self.tol, "ftol": 0.0},
        )
        theta = result.x
        if theta.size <= _NEWTON_PARAMETERS and self.alpha > 0:
            theta = _polish(self._kind, u, y, w, penalty, theta)
        self.temperature_ = start.temperature
        self.at_boundary_ = start.at_boundary
        if self._kind == "vector":
            self._deviation = theta[:k]
            self.scale_ = 1 + theta[:k]
            self.coef_ = np.diag(self.scale_)
        else:
            self._deviation = theta[: k * k].reshape(k, k)
            self.coef_ = np.eye(k) + self._deviation
        self.intercept_ = theta[-k:]
        self.n_iter_ = int(result.nit)
        self.validation_loss_ = float(
            -(w * _log_softmax(self._map(z), axis=1)[np.arange(n), y]).sum()
        )
        self.classes_ = np.arange(k)
        self.n_features_in_ = k
        return self

    def _map(self, z: NDArray) -> NDArray:
        u = _log_softmax(z / self.temperature_, axis=1)
        if self._kind == "vector":
            return u * (1 + self._deviation) + self.intercept_
        return u + u @ self._deviation.T + self.intercept_

    def _calibrated(self, logits) -> NDArray[np.float64]:
        check_is_fitted(self)
        z = _dense(check_logits(logits))
        if z.shape[1] != self.n_features_in_:
            raise ValueError(
                f"logits has {z.shape[1]} columns, but {type(self).__name__} was "
                f"fitted with {self.n_features_in_}."
            )
        return self._map(z)

    def transform(self, logits):
        """Calibrated logits (the affine map of ``logits``).

        Parameters
        ----------
        logits : array-like of shape (n_samples, n_classes)
            Logits to calibrate.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            The calibrated logits, float64.
        """
        return self._calibrated(logits)

    def predict_proba(self, logits):
        """Calibrated probabilities, the softmax of :meth:`transform`.

        Parameters
        ----------
        logits : array-like of shape (n_samples, n_classes)
            Logits to calibrate.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Rows sum to 1.
        """
        return np.exp(self.predict_log_proba(logits))

    def predict_log_proba(self, logits):
        """Logarithm of :meth:`predict_proba`, computed without underflow.

        Parameters
        ----------
        logits : array-like of shape (n_samples, n_classes)
            Logits to calibrate.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Calibrated log-probabilities.
        """
        return _log_softmax(self._calibrated(logits), axis=1)

    def predict(self, logits):
        """The first argmax of the calibrated logits: it can differ from the
        argmax of ``logits`` (a temperature's never does).

        Parameters
        ----------
        logits : array-like of shape (n_samples, n_classes)
            Logits.

        Returns
        -------
        ndarray of shape (n_samples,)
            Predicted class indices.
        """
        return self._calibrated(logits).argmax(axis=1)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        tags.input_tags.one_d_array = True
        return tags


class VectorScaler(_AffineScaler):
    """Vector scaling: a scale and a bias per class, regularised toward one
    temperature. **It can change predicted labels.**

    The logits are divided by the exact-rule temperature and turned into
    log-probabilities, then each class's gets a factor ``1 + v_k`` and a
    bias ``b_k``, fitted by
    log-loss with the ridge penalty ``alpha * K / n * (|v|^2 + |b|^2)``
    (probmetrics' structured vector scaling): ``alpha -> inf`` is
    temperature scaling, ``alpha = 0`` Guo et al.'s vector scaling. The
    problem is convex; SciPy's L-BFGS-B solves it to ``tol`` (the gradient's
    largest component), then, up to 256 parameters, Newton's method with the
    exact Hessian takes it to the optimum to rounding.

    Parameters
    ----------
    alpha : float, default=1.0
        Strength of the penalty on the deviations from temperature scaling,
        per class and per held-out row (``lambda = alpha * K / n``, ``n`` the
        rows by weight: sample weights count as repetitions).
    temperatures : array-like of shape (n_candidates,), default=None
        Candidates of the first step's temperature, as for
        :class:`TemperatureScaler`.
    tol : float, default=1e-8
        Stop when the projected gradient's largest component is below it.
    max_iter : int, default=1000
        Iterations of L-BFGS-B at most.

    Attributes
    ----------
    temperature_ : float
        The exact-rule temperature of the first step.
    at_boundary_ : bool
        Whether ``temperature_`` is an end of the candidate range.
    scale_ : ndarray of shape (n_classes,)
        Each class's factor ``1 + v_k``.
    coef_ : ndarray of shape (n_classes, n_classes)
        ``diag(scale_)``: calibrated logits are ``u @ coef_.T + intercept_``
        with ``u = log_softmax(logits / temperature_)``.
    intercept_ : ndarray of shape (n_classes,)
        Each class's bias.
    validation_loss_ : float
        Mean (weighted) log-loss of the fitted map on the data passed to ``fit``.
    n_iter_ : int
        Iterations L-BFGS-B took.
    classes_ : ndarray of shape (n_classes,)
        ``np.arange(n_classes)``.
    n_features_in_ : int
        Number of logit columns seen in ``fit``.

    See Also
    --------
    TemperatureScaler : One temperature: never changes a label.
    MatrixScaler : A full matrix, the next rung.
    calibration_ladder : Which rung the held-out data supports.

    References
    ----------
    C. Guo, G. Pleiss, Y. Sun and K. Q. Weinberger, "On Calibration of Modern
    Neural Networks", ICML 2017. E. Berta, D. Holzmüller, M. I. Jordan and
    F. Bach, "Structured matrix scaling for multi-class calibration",
    AISTATS 2026.

    Examples
    --------
    >>> import numpy as np
    >>> from skts import VectorScaler
    >>> rng = np.random.default_rng(0)
    >>> logits = rng.normal(size=(500, 3)) * 3
    >>> y = rng.integers(0, 3, size=500)
    >>> scaler = VectorScaler().fit(logits, y)
    >>> scaler.predict_proba(logits[:2]).sum(axis=1).round(6)
    array([1., 1.])
    >>> scaler.scale_.shape, scaler.intercept_.shape
    ((3,), (3,))
    """

    _kind = "vector"


class MatrixScaler(_AffineScaler):
    """Matrix scaling: a full linear map of the logits, regularised toward
    one temperature. **It can change predicted labels.**

    The logits are divided by the exact-rule temperature ``T`` and turned
    into log-probabilities ``u``, then mapped by ``u -> u (I + M)^T + b``,
    fitted by log-loss with ridge penalties that pull every entry toward
    temperature scaling: ``alpha * K / n`` per squared diagonal deviation and
    intercept, ``alpha * K^2 / n`` per squared off-diagonal entry (Kull et
    al.'s off-diagonal and intercept regularisation, which keeps matrix
    scaling from collapsing on many classes). Convex; SciPy's L-BFGS-B.

    Parameters
    ----------
    alpha : float, default=1.0
        Strength of the penalties (``alpha * K / n`` per squared diagonal
        deviation and intercept, ``alpha * K^2 / n`` per off-diagonal entry).
    temperatures : array-like of shape (n_candidates,), default=None
        Candidates of the first step's temperature.
    tol : float, default=1e-8
        Stop when the projected gradient's largest component is below it.
    max_iter : int, default=1000
        Iterations of L-BFGS-B at most.

    Attributes
    ----------
    temperature_ : float
        The exact-rule temperature of the first step.
    at_boundary_ : bool
        Whether ``temperature_`` is an end of the candidate range.
    coef_ : ndarray of shape (n_classes, n_classes)
        Calibrated logits are ``u @ coef_.T + intercept_`` with
        ``u = log_softmax(logits / temperature_)``.
    intercept_ : ndarray of shape (n_classes,)
        The biases.
    validation_loss_ : float
        Mean (weighted) log-loss of the fitted map on the data passed to ``fit``.
    n_iter_ : int
        Iterations L-BFGS-B took.
    classes_ : ndarray of shape (n_classes,)
        ``np.arange(n_classes)``.
    n_features_in_ : int
        Number of logit columns seen in ``fit``.

    See Also
    --------
    VectorScaler : A scale and a bias per class.
    calibration_ladder : Which rung the held-out data supports.

    References
    ----------
    M. Kull, M. Perello-Nieto, M. Kängsepp, T. Silva Filho, H. Song and
    P. Flach, "Beyond temperature scaling: Obtaining well-calibrated
    multi-class probabilities with Dirichlet calibration", NeurIPS 2019.

    Examples
    --------
    >>> import numpy as np
    >>> from skts import MatrixScaler
    >>> rng = np.random.default_rng(0)
    >>> logits = rng.normal(size=(500, 3)) * 3
    >>> y = rng.integers(0, 3, size=500)
    >>> MatrixScaler().fit(logits, y).coef_.shape
    (3, 3)
    """

    _kind = "matrix"
