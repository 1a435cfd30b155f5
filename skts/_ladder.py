"""calibration_ladder: which rung of calibration the held-out data supports.

The rungs, simplest first: one temperature; a temperature per group (by
default the predicted class); vector scaling; matrix scaling. Each is fitted
by cross-validation on the held-out set, so every row gets an out-of-fold
forecast from every rung; the rungs' per-row losses are then compared on the
same rows, with paired bootstrap intervals (one resample of the rows serves
every rung). The verdict starts at one temperature and moves down a rung
only when that rung's out-of-fold log-loss beats the current choice by more
than its interval: the literature's advice (one T first), made a rule a user
can defend.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.model_selection import KFold, StratifiedKFold
from sklearn.utils import check_random_state

from skts._linear import MatrixScaler, VectorScaler
from skts._numerics import BoundaryTemperatureWarning
from skts._scaler import TemperatureScaler
from skts._sklearn_compat import Interval, StrOptions, validate_params
from skts._validation import check_class_indices, check_groups, check_logits
from skts.metrics import expected_calibration_error
from skts.metrics._bootstrap import percentile_interval, resample_weights

__all__ = ["CalibrationLadder", "calibration_ladder"]

RUNGS = ("temperature", "group temperature", "vector", "matrix")


@dataclass(frozen=True)
class CalibrationLadder:
    """The ladder's out-of-fold results and its verdict.

    Attributes
    ----------
    rungs : tuple of str
        The rungs, simplest first.
    log_loss, brier, ece : ndarray of shape (n_rungs,)
        Each rung's out-of-fold mean log-loss, multiclass Brier score and
        top-label ECE (15 equal-width bins).
    log_loss_interval : ndarray of shape (n_rungs, 2)
        Paired bootstrap interval of each rung's log-loss minus one
        temperature's (negative: better than one T).
    brier_interval, ece_interval : ndarray of shape (n_rungs, 2)
        The same for the Brier score and the ECE.
    labels_changed : ndarray of shape (n_rungs,)
        Rows whose out-of-fold label differs from the logits' argmax (0 for
        the temperature rungs, by construction).
    verdict : str
        The simplest rung whose log-loss improvement over the rung chosen
        before it is outside its interval.
    reasons : tuple of str
        One sentence per step of the verdict.
    n_samples : int
    confidence_level : float
    """

    rungs: tuple
    log_loss: NDArray
    brier: NDArray
    ece: NDArray
    log_loss_interval: NDArray
    brier_interval: NDArray
    ece_interval: NDArray
    labels_changed: NDArray
    verdict: str
    reasons: tuple
    n_samples: int
    confidence_level: float

    def to_dict(self) -> dict:
        """The results as plain JSON-ready values."""
        return {
            "rungs": [
                {
                    "rung": r,
                    "log_loss": float(self.log_loss[i]),
                    "brier": float(self.brier[i]),
                    "ece": float(self.ece[i]),
                    "log_loss_vs_temperature": self.log_loss_interval[i].tolist(),
                    "brier_vs_temperature": self.brier_interval[i].tolist(),
                    "ece_vs_temperature": self.ece_interval[i].tolist(),
                    "labels_changed": int(self.labels_changed[i]),
                }
                for i, r in enumerate(self.rungs)
            ],
            "verdict": self.verdict,
            "reasons": list(self.reasons),
            "n_samples": self.n_samples,
            "confidence_level": self.confidence_level,
        }

    def __str__(self) -> str:
        level = f"{self.confidence_level:.0%}"
        lines = [
            f"{'rung':<18} {'log-loss':>9} {'vs one T (' + level + ')':>24} "
            f"{'Brier':>8} {'ECE':>7} {'labels changed':>15}"
        ]
        for i, r in enumerate(self.rungs):
            lo, hi = self.log_loss_interval[i]
            lines.append(
                f"{r:<18} {self.log_loss[i]:>9.4f} {f'[{lo:+.4f}, {hi:+.4f}]':>24} "
                f"{self.brier[i]:>8.4f} {self.ece[i]:>7.4f} "
                f"{int(self.labels_changed[i]):>15d}"
            )
        lines.append(f"verdict: {self.verdict}")
        lines.extend(f"  {reason}" for reason in self.reasons)
        return "\n".join(lines)


@validate_params(
    {
        "logits": ["array-like"],
        "y": ["array-like"],
        "groups": ["array-like", StrOptions({"predicted"}), None],
        "cv": [Interval(Integral, 2, None, closed="left")],
        "temperatures": ["array-like", None],
        "alpha": [Interval(Real, 0, None, closed="left")],
        "n_bootstrap": [Interval(Integral, 1, None, closed="left")],
        "confidence_level": [Interval(Real, 0, 1, closed="neither")],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def calibration_ladder(
    logits: ArrayLike,
    y: ArrayLike,
    *,
    groups=None,
    cv: int = 5,
    temperatures: ArrayLike | None = None,
    alpha: float = 1.0,
    n_bootstrap: int = 200,
    confidence_level: float = 0.95,
    random_state=0,
) -> CalibrationLadder:
    """Fit every rung by cross-validation and say which one the data supports.

    The rungs, simplest first: one temperature
    (:class:`~skts.TemperatureScaler`); a temperature per group (the same
    with ``groups``: keeps every label); vector scaling
    (:class:`~skts.VectorScaler`) and matrix scaling
    (:class:`~skts.MatrixScaler`), which can change labels. Every row of the
    held-out set gets an out-of-fold forecast from each rung; each rung's
    mean log-loss, Brier score and ECE are compared with one temperature's
    on the same rows, with paired bootstrap intervals.

    The verdict starts at one temperature and moves to a lower rung only
    when its out-of-fold log-loss beats the rung chosen so far by more than
    the interval of the difference (the interval lies wholly below zero).

    Parameters
    ----------
    logits : array-like of shape (n_samples, n_classes)
        Held-out logits (binary logits may be one column).
    y : array-like of shape (n_samples,)
        True class indices in ``0..n_classes-1``.
    groups : array-like of shape (n_samples,), "predicted" or None, default=None
        The groups of the group-temperature rung; None: the predicted class.
    cv : int, default=5
        Folds (stratified by class when every class has that many rows).
    temperatures : array-like of shape (n_candidates,), default=None
        Candidate temperatures, as for :class:`~skts.TemperatureScaler`.
    alpha : float, default=1.0
        Penalty strength of vector and matrix scaling.
    n_bootstrap : int, default=200
        Paired bootstrap resamples of the rows.
    confidence_level : float, default=0.95
        Level of the intervals.
    random_state : int, RandomState instance or None, default=0
        Seed of the folds and of the bootstrap.

    Returns
    -------
    ladder : CalibrationLadder
        The rungs' out-of-fold metrics (``log_loss``, ``brier``, ``ece``),
        their paired intervals against one temperature
        (``log_loss_interval``, ...), ``labels_changed``, the ``verdict``
        and its ``reasons``; ``str(ladder)`` is a table, ``to_dict()`` JSON.

    See Also
    --------
    skts.metrics.temperature_by_group : The diagnosis per group.

    Examples
    --------
    Logits whose class 1 is overconfident and class 0 underconfident: one
    temperature cannot serve both, a temperature per predicted class can.

    >>> import numpy as np
    >>> from skts import calibration_ladder
    >>> rng = np.random.default_rng(0)
    >>> z = rng.normal(size=(4000, 3)) * 3
    >>> true_t = np.array([0.4, 3.0, 1.0])[z.argmax(axis=1)]
    >>> p = np.exp(z / true_t[:, None])
    >>> p /= p.sum(axis=1, keepdims=True)
    >>> y = (p.cumsum(axis=1) < rng.random((4000, 1))).sum(axis=1)
    >>> ladder = calibration_ladder(z, y, n_bootstrap=50)
    >>> ladder.verdict
    'group temperature'
    >>> int(ladder.labels_changed[1])
    0
    """
    z = check_logits(logits, warn_probabilities=True)
    y = check_class_indices(y, z.shape)
    z = np.asarray(z if isinstance(z, np.ndarray) else z[:], dtype=np.float64)
    n, k = z.shape
    if groups is None:
        groups = "predicted"
    if not isinstance(groups, str):
        groups = check_groups(groups, n)
    rng = check_random_state(random_state)
    log_p = np.empty((len(RUNGS), n, k))
    for train, test in _folds(y, cv, rng):
        models = _fit_rungs(
            z[train], y[train], _rows(groups, train), temperatures, alpha
        )
        for r, model in enumerate(models):
            if r != 1:
                log_p[r, test] = model.predict_log_proba(z[test])
                continue
            with warnings.catch_warnings():
                # A group absent from the training folds gets the pooled T.
                warnings.simplefilter("ignore", UserWarning)
                log_p[r, test] = model.predict_log_proba(
                    z[test], groups=_rows(groups, test)
                )
    return _compare(log_p, z, y, n_bootstrap, confidence_level, rng)


def _rows(groups, index):
    return groups if isinstance(groups, str) else groups[index]


def _folds(y, cv: int, rng) -> list:
    n = y.shape[0]
    cv = min(cv, n)
    counts = np.bincount(y)
    seed = rng.randint(2**31 - 1)
    if counts[counts > 0].min() >= cv:
        return list(StratifiedKFold(cv, shuffle=True, random_state=seed).split(y, y))
    return list(KFold(cv, shuffle=True, random_state=seed).split(y))


def _fit_rungs(z, y, groups, temperatures, alpha) -> list:
    """The four rungs fitted on some rows, in :data:`RUNGS` order."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BoundaryTemperatureWarning)
        return [
            TemperatureScaler(temperatures).fit(z, y),
            TemperatureScaler(temperatures).fit(z, y, groups=groups),
            VectorScaler(alpha, temperatures=temperatures).fit(z, y),
            MatrixScaler(alpha, temperatures=temperatures).fit(z, y),
        ]


def _compare(log_p, z, y, n_bootstrap, confidence_level, rng) -> CalibrationLadder:
    n_rungs, n, k = log_p.shape
    rows = np.arange(n)
    loss = -log_p[:, rows, y]  # (rungs, n)
    p = np.exp(log_p)
    onehot = np.zeros((n, k))
    onehot[rows, y] = 1.0
    brier = ((p - onehot) ** 2).sum(axis=2)  # (rungs, n)
    labels = z.argmax(axis=1)
    changed = (p.argmax(axis=2) != labels).sum(axis=1)

    def ece(r, weight=None):
        return expected_calibration_error(
            y, p[r], sample_weight=weight, labels=np.arange(k)
        )

    eces = np.array([ece(r) for r in range(n_rungs)])
    draws_loss = np.empty((n_bootstrap, n_rungs))
    draws_brier = np.empty((n_bootstrap, n_rungs))
    draws_ece = np.empty((n_bootstrap, n_rungs))
    for b in range(n_bootstrap):
        w = resample_weights(rng, n)
        draws_loss[b] = loss @ w / n
        draws_brier[b] = brier @ w / n
        draws_ece[b] = [ece(r, w) for r in range(n_rungs)]

    def against(draws, base):
        return np.array(
            [
                percentile_interval(draws[:, r] - draws[:, base], confidence_level)
                for r in range(n_rungs)
            ]
        )

    chosen, reasons = 0, []
    for r in range(1, n_rungs):
        lo, hi = percentile_interval(
            draws_loss[:, r] - draws_loss[:, chosen], confidence_level
        )
        gain = loss[chosen].mean() - loss[r].mean()
        if hi < 0:
            reasons.append(
                f"{RUNGS[r]} beats {RUNGS[chosen]} by {gain:.4g} in log-loss "
                f"(difference in [{lo:.4g}, {hi:.4g}]): chosen."
            )
            chosen = r
        else:
            reasons.append(
                f"{RUNGS[r]} does not beat {RUNGS[chosen]} reliably "
                f"(log-loss difference in [{lo:.4g}, {hi:.4g}]): not chosen."
            )
    return CalibrationLadder(
        rungs=RUNGS,
        log_loss=loss.mean(axis=1),
        brier=brier.mean(axis=1),
        ece=eces,
        log_loss_interval=against(draws_loss, 0),
        brier_interval=against(draws_brier, 0),
        ece_interval=against(draws_ece, 0),
        labels_changed=changed,
        verdict=RUNGS[chosen],
        reasons=tuple(reasons),
        n_samples=n,
        confidence_level=confidence_level,
    )
