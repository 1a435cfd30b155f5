"""Calibration metrics, reliability curves and scorers.

Naming follows scikit-learn: ``*_error`` and ``*_loss`` are lower-is-better,
scorers are ``neg_*``. Every metric here is computed from
:func:`reliability_curve`, so plots and numbers always agree.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from numbers import Integral, Real

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.metrics import brier_score_loss, log_loss
from sklearn.metrics import get_scorer as _sklearn_get_scorer
from sklearn.utils import Bunch, check_random_state
from sklearn.utils._param_validation import Interval, StrOptions, validate_params
from sklearn.utils.validation import check_array, column_or_1d

from skts._scaler import (
    _check_class_indices,
    _check_logits,
    _check_temperatures,
    _check_weights,
    _fit_temperature,
)
from skts._temperature import BoundaryTemperatureWarning, nll_many

__all__ = [
    "CalibrationReport",
    "ReliabilityCurve",
    "calibration_report",
    "classwise_calibration_error",
    "expected_calibration_error",
    "get_scorer",
    "get_scorer_names",
    "maximum_calibration_error",
    "reliability_curve",
    "temperature_by_group",
]


@dataclass(frozen=True)
class ReliabilityCurve:
    """Per-bin data behind a reliability diagram and the binned metrics.

    Arrays have one entry per bin (``n_bins``); empty bins have ``count == 0``
    and NaN confidence and accuracy.

    Attributes
    ----------
    confidence : ndarray of shape (n_bins,)
        Mean forecast (top-label confidence, or ``p_k`` for a class) per bin.
    accuracy : ndarray of shape (n_bins,)
        Fraction correct (or observed frequency of the class) per bin.
    counts : ndarray of shape (n_bins,)
        Total sample weight per bin (the number of samples without weights).
    edges : ndarray of shape (n_bins + 1,)
        Bin edges; bin ``m`` is ``(edges[m], edges[m + 1]]`` and the first bin
        also holds ``edges[0]``.

    Examples
    --------
    >>> from skts.metrics import reliability_curve
    >>> # top-label confidences 0.9, 0.8, 0.7, 0.6, all right: mean 0.75, accuracy 1
    >>> curve = reliability_curve([1, 1, 0, 1], [0.9, 0.8, 0.3, 0.6], n_bins=2)
    >>> curve.counts, round(curve.confidence[1], 4), round(curve.calibration_error(), 4)
    (array([0., 4.]), np.float64(0.75), 0.25)
    """

    confidence: NDArray[np.float64]
    accuracy: NDArray[np.float64]
    counts: NDArray[np.float64]
    edges: NDArray[np.float64]

    @property
    def gap(self) -> NDArray[np.float64]:
        """``accuracy - confidence`` per bin (NaN for empty bins).

        Examples
        --------
        >>> from skts.metrics import reliability_curve
        >>> curve = reliability_curve([1, 1, 0, 1], [0.9, 0.8, 0.3, 0.6], n_bins=2)
        >>> curve.gap.round(2)  # the first bin is empty
        array([ nan, 0.25])
        """
        return self.accuracy - self.confidence

    def calibration_error(self) -> float:
        """Bin-mass weighted mean of ``|gap|`` over non-empty bins (the ECE).

        Examples
        --------
        >>> from skts.metrics import reliability_curve
        >>> curve = reliability_curve([0, 1, 1, 1], [0.9, 0.9, 0.9, 0.6], n_bins=5)
        >>> round(curve.calibration_error(), 4)  # 3/4 * |2/3 - 0.9| + 1/4 * |1 - 0.6|
        0.275
        """
        full = self.counts > 0
        total = self.counts[full].sum()
        return float(np.dot(self.counts[full], np.abs(self.gap[full])) / total)

    def maximum_error(self) -> float:
        """Largest ``|gap|`` over non-empty bins (the MCE).

        Examples
        --------
        >>> from skts.metrics import reliability_curve
        >>> curve = reliability_curve([0, 1, 1, 1], [0.9, 0.9, 0.9, 0.6], n_bins=5)
        >>> round(curve.maximum_error(), 4)  # the bin of the 0.6 forecast: |1 - 0.6|
        0.4
        """
        full = self.counts > 0
        return float(np.max(np.abs(self.gap[full])))


def _check_targets(y_true, y_prob, labels=None):
    """Class indices of ``y_true`` and the ``(n, K)`` probability matrix.

    A 1-D ``y_prob`` is the probability of the second (positive) label of a
    binary problem, which is what scikit-learn's scorers pass.
    """
    y_true = column_or_1d(y_true)
    y_prob = check_array(
        y_prob,
        ensure_2d=False,
        dtype=np.float64,
        input_name="y_prob",
        ensure_min_samples=0,
    )
    if y_prob.ndim == 1:
        y_prob = np.column_stack([1.0 - y_prob, y_prob])
    if y_prob.ndim != 2:
        raise ValueError(
            f"y_prob must be 1-D (binary) or 2-D; got shape {y_prob.shape}."
        )
    if y_true.shape[0] != y_prob.shape[0]:
        raise ValueError(
            f"y_true has {y_true.shape[0]} samples but y_prob has {y_prob.shape[0]}."
        )
    if y_prob.shape[0] == 0:
        raise ValueError("y_true and y_prob are empty: need at least 1 sample.")
    if np.any(y_prob < 0) or np.any(y_prob > 1):
        raise ValueError("y_prob must contain probabilities in [0, 1].")
    n_classes = y_prob.shape[1]
    if labels is None:
        # scikit-learn's log_loss convention: the columns are the sorted
        # unique labels of y_true only when there are as many; never guess
        # (a class missing from y_true, e.g. in a cross-validation fold,
        # would shift every column).
        labels = np.unique(y_true)
        if len(labels) != n_classes:
            raise ValueError(
                f"y_prob has {n_classes} columns but y_true has {len(labels)} "
                "distinct labels; pass labels= (e.g. the estimator's classes_) "
                "to say which column is which."
            )
    else:
        labels = np.asarray(labels)
        if len(labels) != n_classes:
            raise ValueError(
                f"labels has {len(labels)} entries but y_prob has {n_classes} columns."
            )
    order = np.argsort(labels, kind="stable")
    pos = np.searchsorted(labels, y_true, sorter=order)
    pos = np.clip(pos, 0, len(labels) - 1)
    idx = order[pos]
    if not np.all(labels[idx] == y_true):
        unseen = np.unique(y_true[labels[idx] != y_true])
        raise ValueError(f"y_true contains labels not in labels: {unseen.tolist()!r}.")
    return idx, y_prob


def _edges(values: NDArray, n_bins: int, strategy: str) -> NDArray[np.float64]:
    if strategy == "uniform":
        return np.linspace(0.0, 1.0, n_bins + 1)
    edges = np.quantile(values, np.linspace(0.0, 1.0, n_bins + 1))
    edges[0], edges[-1] = min(edges[0], 0.0), max(edges[-1], 1.0)
    return edges


def _bin_index(values: NDArray, edges: NDArray) -> NDArray[np.intp]:
    # Right-closed bins (edges[m], edges[m+1]]; values at edges[0] go in bin 0.
    idx = np.searchsorted(edges, values, side="left") - 1
    return np.clip(idx, 0, len(edges) - 2)


def _curve(values, hits, weights, n_bins, strategy) -> ReliabilityCurve:
    edges = _edges(values, n_bins, strategy)
    idx = _bin_index(values, edges)
    counts = np.bincount(idx, weights=weights, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        conf = np.bincount(idx, weights=weights * values, minlength=n_bins) / counts
        acc = np.bincount(idx, weights=weights * hits, minlength=n_bins) / counts
    conf[counts == 0] = np.nan
    acc[counts == 0] = np.nan
    return ReliabilityCurve(conf, acc, counts, edges)


def _weights(sample_weight, n: int) -> NDArray[np.float64]:
    w = _check_weights(sample_weight, n)
    return np.ones(n) if w is None else w


_COMMON = {
    "y_true": ["array-like"],
    "y_prob": ["array-like"],
    "n_bins": [Interval(Integral, 1, None, closed="left")],
    "strategy": [StrOptions({"uniform", "quantile"})],
    "sample_weight": ["array-like", None],
    "labels": ["array-like", None],
}


@validate_params(
    {**_COMMON, "class_": [Integral, None]}, prefer_skip_nested_validation=True
)
def reliability_curve(
    y_true: ArrayLike,
    y_prob: ArrayLike,
    *,
    n_bins: int = 15,
    strategy: str = "uniform",
    class_: int | None = None,
    sample_weight: ArrayLike | None = None,
    labels: ArrayLike | None = None,
) -> ReliabilityCurve:
    """Per-bin confidence, accuracy and counts: the data of a reliability diagram.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities; 1-D means the positive-class column of a
        binary problem.
    n_bins : int, default=15
        Number of bins.
    strategy : {"uniform", "quantile"}, default="uniform"
        ``"uniform"``: equal-width bins ``((m-1)/M, m/M]``. ``"quantile"``:
        equal-mass bins from the quantiles of the confidences.
    class_ : int, default=None
        ``None``: top-label curve (confidence = max probability, hit = the
        first argmax is the label). An integer ``k``: one-vs-rest curve of the
        ``k``-th column (confidence = ``p_k``, hit = the label is class ``k``).
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.
    labels : array-like of shape (n_classes,), default=None
        Labels of the columns of ``y_prob``; default sorted unique ``y_true``.

    Returns
    -------
    ReliabilityCurve
        Per-bin ``confidence``, ``accuracy``, ``counts`` and ``edges``.

    Examples
    --------
    >>> from skts.metrics import reliability_curve
    >>> curve = reliability_curve([0, 1, 1, 1], [0.9, 0.9, 0.9, 0.9], n_bins=5)
    >>> curve.counts
    array([0., 0., 0., 0., 4.])
    >>> float(curve.confidence[-1]), float(curve.accuracy[-1])
    (0.9, 0.75)
    """
    idx, proba = _check_targets(y_true, y_prob, labels)
    w = _weights(sample_weight, proba.shape[0])
    if class_ is None:
        top = np.argmax(proba, axis=1)
        values = proba[np.arange(proba.shape[0]), top]
        hits = (top == idx).astype(np.float64)
    else:
        if not 0 <= class_ < proba.shape[1]:
            raise ValueError(
                f"class_ must be a column index in [0, {proba.shape[1]}); "
                f"got {class_!r}."
            )
        values = proba[:, class_]
        hits = (idx == class_).astype(np.float64)
    return _curve(values, hits, w, n_bins, strategy)


@validate_params(_COMMON, prefer_skip_nested_validation=True)
def expected_calibration_error(
    y_true: ArrayLike,
    y_prob: ArrayLike,
    *,
    n_bins: int = 15,
    strategy: str = "uniform",
    sample_weight: ArrayLike | None = None,
    labels: ArrayLike | None = None,
) -> float:
    """Top-label expected calibration error (ECE), Guo et al. (2017).

    ``ECE = sum_m (|B_m| / n) |acc(B_m) - conf(B_m)|`` where the confidence of a
    sample is its largest probability, a sample is correct when the first
    argmax equals its label, and ``B_m`` are the non-empty bins.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities (1-D: positive-class column of a binary problem).
    n_bins : int, default=15
        Number of bins ``M``.
    strategy : {"uniform", "quantile"}, default="uniform"
        ``"uniform"``: equal-width bins ``((m-1)/M, m/M]`` as in Guo et al.
        ``"quantile"``: equal-mass bins (adaptive ECE).
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights (bin masses are sums of weights).
    labels : array-like of shape (n_classes,), default=None
        Labels of the columns of ``y_prob``; default sorted unique ``y_true``.

    Returns
    -------
    float
        The ECE, in [0, 1]; lower is better.

    See Also
    --------
    maximum_calibration_error : Largest bin gap.
    reliability_curve : The per-bin data.

    Notes
    -----
    ECE is a noisy, binning-dependent estimate: other bin counts or edges give
    other values, small bins are noisy, and errors of opposite sign inside one
    bin cancel. Report a proper score (log-loss, Brier) alongside, and a
    bootstrap interval (:func:`calibration_report`).

    References
    ----------
    C. Guo, G. Pleiss, Y. Sun and K. Q. Weinberger, "On Calibration of Modern
    Neural Networks", ICML 2017. M. P. Naeini, G. Cooper and M. Hauskrecht,
    "Obtaining Well Calibrated Probabilities Using Bayesian Binning", AAAI 2015.

    Examples
    --------
    >>> from skts.metrics import expected_calibration_error
    >>> round(expected_calibration_error([0, 1, 1, 1], [0.9, 0.9, 0.9, 0.9]), 6)
    0.15
    """
    curve = reliability_curve(
        y_true,
        y_prob,
        n_bins=n_bins,
        strategy=strategy,
        sample_weight=sample_weight,
        labels=labels,
    )
    return curve.calibration_error()


@validate_params(_COMMON, prefer_skip_nested_validation=True)
def maximum_calibration_error(
    y_true: ArrayLike,
    y_prob: ArrayLike,
    *,
    n_bins: int = 15,
    strategy: str = "uniform",
    sample_weight: ArrayLike | None = None,
    labels: ArrayLike | None = None,
) -> float:
    """Top-label maximum calibration error (MCE): the largest bin gap.

    ``MCE = max_m |acc(B_m) - conf(B_m)|`` over non-empty bins, with the bins of
    :func:`expected_calibration_error`. It depends on the emptiest bins, so it
    is noisier still than the ECE.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities (1-D: positive-class column of a binary problem).
    n_bins : int, default=15
        Number of bins.
    strategy : {"uniform", "quantile"}, default="uniform"
        Equal-width or equal-mass bins.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.
    labels : array-like of shape (n_classes,), default=None
        Labels of the columns of ``y_prob``; default sorted unique ``y_true``.

    Returns
    -------
    float
        The MCE, in [0, 1]; lower is better.

    See Also
    --------
    expected_calibration_error : Mass-weighted mean bin gap.

    References
    ----------
    M. P. Naeini, G. Cooper and M. Hauskrecht, AAAI 2015; Guo et al., ICML 2017.

    Examples
    --------
    >>> from skts.metrics import maximum_calibration_error
    >>> # bins: three 0.9 forecasts, 2 right (gap 0.233); one 0.6, right (gap 0.4)
    >>> round(maximum_calibration_error([0, 1, 1, 1], [0.9, 0.9, 0.9, 0.6]), 6)
    0.4
    """
    curve = reliability_curve(
        y_true,
        y_prob,
        n_bins=n_bins,
        strategy=strategy,
        sample_weight=sample_weight,
        labels=labels,
    )
    return curve.maximum_error()


@validate_params(_COMMON, prefer_skip_nested_validation=True)
def classwise_calibration_error(
    y_true: ArrayLike,
    y_prob: ArrayLike,
    *,
    n_bins: int = 15,
    strategy: str = "uniform",
    sample_weight: ArrayLike | None = None,
    labels: ArrayLike | None = None,
) -> float:
    """Class-wise ECE: the mean over classes of the one-vs-rest ECE of ``p_k``.

    For each class ``k`` the forecasts ``p_k`` are binned and compared with the
    observed frequency of class ``k`` in each bin (Kull et al., 2019).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities (1-D: positive-class column of a binary problem).
    n_bins : int, default=15
        Number of bins.
    strategy : {"uniform", "quantile"}, default="uniform"
        Equal-width or equal-mass bins.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.
    labels : array-like of shape (n_classes,), default=None
        Labels of the columns of ``y_prob``; default sorted unique ``y_true``.

    Returns
    -------
    float
        The class-wise ECE, in [0, 1]; lower is better.

    References
    ----------
    M. Kull, M. Perello-Nieto, M. Kängsepp, T. Silva Filho, H. Song and P.
    Flach, "Beyond temperature scaling: Obtaining well-calibrated multiclass
    probabilities with Dirichlet calibration", NeurIPS 2019.

    Examples
    --------
    >>> import numpy as np
    >>> from skts.metrics import classwise_calibration_error
    >>> y = [0, 1, 2] * 10
    >>> classwise_calibration_error(y, np.full((30, 3), 1 / 3))
    0.0
    """
    idx, proba = _check_targets(y_true, y_prob, labels)
    w = _weights(sample_weight, proba.shape[0])
    errors = [
        _curve(proba[:, k], (idx == k).astype(np.float64), w, n_bins, strategy)
        for k in range(proba.shape[1])
    ]
    return float(np.mean([c.calibration_error() for c in errors]))


@dataclass(frozen=True)
class CalibrationReport:
    """Accuracy, proper scores and binned calibration errors of one forecast.

    Attributes
    ----------
    n_samples : int
        Number of samples.
    values : dict of str to float
        ``accuracy``, ``log_loss``, ``brier_score`` (multiclass, sum over
        classes, in [0, 2]), ``ece``, ``mce`` and ``classwise_ece``.
    intervals : dict of str to tuple of float
        Percentile bootstrap intervals per metric (empty without bootstrap).
    confidence_level : float
        Level of the intervals.
    n_bootstrap : int
        Number of bootstrap resamples.
    groups : dict of group label to CalibrationReport
        The same metrics on each group of rows (``calibration_report(...,
        groups=g)``); empty otherwise.

    Examples
    --------
    >>> from skts.metrics import calibration_report
    >>> report = calibration_report([0, 1, 1, 1], [0.2, 0.9, 0.8, 0.6])
    >>> sorted(report.to_dict()["values"])
    ['accuracy', 'brier_score', 'classwise_ece', 'ece', 'log_loss', 'mce']
    """

    n_samples: int
    values: dict[str, float]
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    confidence_level: float = 0.95
    n_bootstrap: int = 0
    groups: dict = field(default_factory=dict)

    def __getitem__(self, name: str) -> float:
        return self.values[name]

    def to_dict(self) -> dict:
        """Plain-JSON form of the report.

        Examples
        --------
        >>> import json
        >>> from skts.metrics import calibration_report
        >>> report = calibration_report([0, 1, 1], [[0.8, 0.2], [0.3, 0.7], [0.4, 0.6]])
        >>> d = report.to_dict()
        >>> d["n_samples"], round(d["values"]["accuracy"], 4), d["intervals"]
        (3, 1.0, {})
        >>> json.loads(json.dumps(d)) == d  # plain JSON
        True
        """
        return {
            "n_samples": self.n_samples,
            "values": dict(self.values),
            "intervals": {k: list(v) for k, v in self.intervals.items()},
            "confidence_level": self.confidence_level,
            "n_bootstrap": self.n_bootstrap,
            **(
                {"groups": {str(g): r.to_dict() for g, r in self.groups.items()}}
                if self.groups
                else {}
            ),
        }

    def __str__(self) -> str:
        if self.groups:
            return _group_table(self)
        lines = [
            f"{'metric':<15}{'value':>10}" + ("   interval" if self.intervals else "")
        ]
        for name, value in self.values.items():
            line = f"{name:<15}{value:>10.4f}"
            if name in self.intervals:
                lo, hi = self.intervals[name]
                line += f"   [{lo:.4f}, {hi:.4f}]"
            lines.append(line)
        return "\n".join(lines)


def _group_table(report: CalibrationReport) -> str:
    """The overall values beside those of each group (intervals below)."""
    heads = [f"all (n={report.n_samples})"] + [
        f"{g} (n={r.n_samples})" for g, r in report.groups.items()
    ]
    width = max(12, *(len(h) + 2 for h in heads))
    lines = [f"{'metric':<15}" + "".join(f"{h:>{width}}" for h in heads)]
    parts = [report, *report.groups.values()]
    for name in report.values:
        lines.append(
            f"{name:<15}" + "".join(f"{r.values[name]:>{width}.4f}" for r in parts)
        )
    return "\n".join(lines)


def _check_groups(groups, n_samples: int, name: str = "groups") -> NDArray:
    """One group label per row, as a 1-D array."""
    groups = column_or_1d(np.asarray(groups), warn=True)
    if groups.shape[0] != n_samples:
        raise ValueError(
            f"{name} must have one label per sample ({n_samples}); got "
            f"{groups.shape[0]}."
        )
    if groups.dtype.kind == "f" and not np.all(np.isfinite(groups)):
        raise ValueError(f"{name} must not contain NaN or infinity.")
    return groups


def _row_stats(idx, proba, n_bins, log_proba=None) -> dict[str, NDArray]:
    """Per-row quantities behind every report metric (uniform bins).

    With ``log_proba`` (from logits) the log-loss is exact; without, the
    probabilities are clipped to [eps, 1 - eps] as scikit-learn's log_loss does.
    """
    n, n_classes = proba.shape
    rows = np.arange(n)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    top = np.argmax(proba, axis=1)
    conf = proba[rows, top]
    p_y = proba[rows, idx]
    eps = np.finfo(np.float64).eps
    return {
        "hits": (top == idx).astype(np.float64),
        "conf": conf,
        "top_bin": _bin_index(conf, edges),
        "nll": (
            # Clipped to [eps, 1 - eps] exactly as sklearn.metrics.log_loss does.
            -np.log(np.clip(p_y, eps, 1 - eps))
            if log_proba is None
            else -log_proba[rows, idx]
        ),
        # sum_k (p_k - 1[y = k])**2, the multiclass Brier score of the row.
        "brier": np.einsum("ij,ij->i", proba, proba) - 2.0 * p_y + 1.0,
        # One-vs-rest bins of every class, flattened to class * n_bins + bin.
        "cls_bin": (
            _bin_index(proba, edges) + (np.arange(n_classes) * n_bins)[None, :]
        ).ravel(),
        "cls_conf": proba.ravel(),
        "true_bin": idx * n_bins + _bin_index(p_y, edges),
    }


def _report_sums(stats, w, n_classes, n_bins) -> NDArray[np.float64]:
    """Weighted sums of the row quantities: additive over blocks of rows."""
    m = n_bins
    km = n_classes * m
    return np.concatenate(
        [
            [w.sum(), np.dot(w, stats["hits"]), np.dot(w, stats["nll"])],
            [np.dot(w, stats["brier"])],
            np.bincount(stats["top_bin"], weights=w, minlength=m),
            np.bincount(stats["top_bin"], weights=w * stats["conf"], minlength=m),
            np.bincount(stats["top_bin"], weights=w * stats["hits"], minlength=m),
            np.bincount(
                stats["cls_bin"],
                weights=np.repeat(w, n_classes) * stats["cls_conf"],
                minlength=km,
            ),
            np.bincount(stats["true_bin"], weights=w, minlength=km),
        ]
    )


def _report_from_sums(sums, n_classes, n_bins) -> dict[str, float]:
    m = n_bins
    km = n_classes * m
    total, hits, nll, brier = sums[:4]
    counts, conf, hit = (
        sums[4 : 4 + m],
        sums[4 + m : 4 + 2 * m],
        sums[4 + 2 * m : 4 + 3 * m],
    )
    cls_conf = sums[4 + 3 * m : 4 + 3 * m + km].reshape(n_classes, m)
    cls_hit = sums[4 + 3 * m + km :].reshape(n_classes, m)
    # The top-label bins as a ReliabilityCurve: ECE and MCE have one definition.
    with np.errstate(invalid="ignore", divide="ignore"):
        curve = ReliabilityCurve(
            conf / counts, hit / counts, counts, np.linspace(0.0, 1.0, m + 1)
        )
    # scikit-learn's brier_score_loss: summed over classes, and halved for a
    # binary problem (then it is the usual (p_1 - y)**2, in [0, 1]).
    half = 0.5 if n_classes == 2 else 1.0
    return {
        "accuracy": float(hits / total),
        "log_loss": float(nll / total),
        "brier_score": float(half * brier / total),
        "ece": curve.calibration_error(),
        "mce": curve.maximum_error(),
        "classwise_ece": float(np.mean(np.abs(cls_hit - cls_conf).sum(axis=1) / total)),
    }


def _report_sums_from_logits(logits, y_idx, temperature: float, n_bins: int = 15):
    """The additive sums behind the report of ``softmax(logits / T)`` (a
    chunk's part of a distributed report): see :func:`_streamed_sums`."""
    sums, _ = _streamed_sums(logits, y_idx, [temperature], 0, None, n_bins)
    return sums[0]


def _streamed_sums(
    logits, y_idx, temperatures, n_bootstrap: int, seed, n_bins: int = 15, bar=None
):
    """The report's sums for each of ``temperatures``, and those of
    ``n_bootstrap`` resamples, in one read of the rows, block by block.

    Memory stays one block (and one count vector) however many rows and
    resamples: the command line uses this on memory-mapped files. The
    log-loss is exact (from the log-softmax, never clipped).

    A resample with replacement is a multinomial count per row. It is drawn
    block by block: the block's share of the draws left is binomial, then
    those draws fall uniformly on its rows. That is the distribution of
    drawing all ``n`` indices at once, and every sum is additive over rows.
    The resamples depend only on ``seed``, ``n_bootstrap`` and the shape.

    Returns ``(sums, boot)``: arrays of shape ``(n_temperatures, width)``
    and ``(n_temperatures, n_bootstrap, width)``.
    """
    from skts._temperature import _blocks, log_softmax

    n, k = logits.shape
    width = 4 + 3 * n_bins + 2 * k * n_bins
    sums = np.zeros((len(temperatures), width))
    boot = np.zeros((len(temperatures), n_bootstrap, width))
    rng = np.random.default_rng(seed)
    draws_left = np.full(n_bootstrap, n, dtype=np.int64)
    rows_left = n
    for rows in _blocks(n, k):
        z, labels = logits[rows], y_idx[rows]
        m = z.shape[0]
        counts = []
        if n_bootstrap:
            share = rng.binomial(draws_left, m / rows_left)
            draws_left -= share
            counts = [
                np.bincount(rng.integers(0, m, size=c), minlength=m).astype(float)
                for c in share
            ]
        rows_left -= m
        for i, t in enumerate(temperatures):
            log_proba = log_softmax(z, t)
            stats = _row_stats(labels, np.exp(log_proba), n_bins, log_proba)
            sums[i] += _report_sums(stats, np.ones(m), k, n_bins)
            for b, w in enumerate(counts):
                boot[i, b] += _report_sums(stats, w, k, n_bins)
        if bar is not None:
            bar.update(m)
    return sums, boot


def _streamed_reports(
    logits, y_idx, temperatures, n_bootstrap: int = 0, seed=0, bar=None, n_bins=15
) -> list[CalibrationReport]:
    """:func:`calibration_report` of ``softmax(logits / T)`` for each of
    ``temperatures``, streamed (see :func:`_streamed_sums`), with 95%
    percentile-bootstrap intervals when ``n_bootstrap > 0``."""
    n, k = logits.shape
    sums, boot = _streamed_sums(logits, y_idx, temperatures, n_bootstrap, seed,
                                n_bins, bar)  # fmt: skip
    level = 0.95
    alpha = (1.0 - level) / 2.0
    out = []
    for i in range(len(temperatures)):
        values = _report_from_sums(sums[i], k, n_bins)
        intervals = {}
        if n_bootstrap:
            draws = [_report_from_sums(b, k, n_bins) for b in boot[i]]
            for metric in values:
                lo, hi = np.quantile([d[metric] for d in draws], [alpha, 1.0 - alpha])
                intervals[metric] = (float(lo), float(hi))
        out.append(CalibrationReport(n, values, intervals, level, n_bootstrap))
    return out


@validate_params(
    {
        "y_true": ["array-like"],
        "y_prob": ["array-like"],
        "n_bins": [Interval(Integral, 1, None, closed="left")],
        "n_bootstrap": [Interval(Integral, 0, None, closed="left")],
        "confidence_level": [Interval(Real, 0, 1, closed="neither")],
        "random_state": ["random_state"],
        "labels": ["array-like", None],
        "groups": ["array-like", None],
    },
    prefer_skip_nested_validation=True,
)
def calibration_report(
    y_true: ArrayLike,
    y_prob: ArrayLike,
    *,
    n_bins: int = 15,
    n_bootstrap: int = 0,
    confidence_level: float = 0.95,
    random_state=None,
    labels: ArrayLike | None = None,
    groups: ArrayLike | None = None,
) -> CalibrationReport:
    """Accuracy, log-loss, Brier score, ECE, MCE and class-wise ECE in one object.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities (1-D: positive-class column of a binary problem).
    n_bins : int, default=15
        Number of equal-width bins of the binned metrics.
    n_bootstrap : int, default=0
        Number of bootstrap resamples of the rows; with ``> 0`` every metric
        gets a percentile interval (the ECE is a noisy estimate: show it).
    confidence_level : float, default=0.95
        Level of the bootstrap intervals.
    random_state : int, RandomState instance or None, default=None
        Seed of the bootstrap.
    labels : array-like of shape (n_classes,), default=None
        Labels of the columns of ``y_prob``; default sorted unique ``y_true``.
    groups : array-like of shape (n_samples,), default=None
        A group label per row (a subpopulation, a site, a predicted class):
        the report then also holds the metrics of each group, in
        ``report.groups``, beside the overall ones. One temperature can leave
        the whole calibrated and each group wrong (see
        :func:`temperature_by_group`).

    Returns
    -------
    CalibrationReport
        ``values`` and, with bootstrap, ``intervals`` (and ``groups``).

    Notes
    -----
    ``log_loss`` and ``brier_score`` equal scikit-learn's
    :func:`~sklearn.metrics.log_loss` and the multiclass (unscaled, sum over
    classes) :func:`~sklearn.metrics.brier_score_loss`; they are computed here
    per row so that the bootstrap does not recompute them from scratch.

    Examples
    --------
    >>> from skts.metrics import calibration_report
    >>> report = calibration_report([0, 1, 1, 1], [0.9, 0.9, 0.9, 0.9])
    >>> report["accuracy"], round(report["ece"], 6)
    (0.75, 0.15)

    Two groups that share the forecast 0.75 but not its truth (rates 0.6 and
    0.9): calibrated overall, off by 0.15 in each group.

    >>> y = [1] * 6 + [0] * 4 + [1] * 9 + [0] * 1
    >>> report = calibration_report(y, [0.75] * 20, groups=["a"] * 10 + ["b"] * 10)
    >>> print(report)
    metric           all (n=20)    a (n=10)    b (n=10)
    accuracy             0.7500      0.6000      0.9000
    log_loss             0.5623      0.7271      0.3975
    brier_score          0.1875      0.2625      0.1125
    ece                  0.0000      0.1500      0.1500
    mce                  0.0000      0.1500      0.1500
    classwise_ece        0.0000      0.1500      0.1500
    """
    idx, proba = _check_targets(y_true, y_prob, labels)
    rng = check_random_state(random_state)
    report = _report(idx, proba, n_bins, n_bootstrap, confidence_level, rng)
    if groups is None:
        return report
    groups = _check_groups(groups, idx.shape[0])
    per_group = {}
    for g in np.unique(groups):
        rows = groups == g
        per_group[g.item() if hasattr(g, "item") else g] = _report(
            idx[rows], proba[rows], n_bins, n_bootstrap, confidence_level, rng
        )
    return CalibrationReport(
        report.n_samples,
        report.values,
        report.intervals,
        report.confidence_level,
        report.n_bootstrap,
        per_group,
    )


def _report(
    idx, proba, n_bins, n_bootstrap, confidence_level, random_state, log_proba=None
) -> CalibrationReport:
    n, n_classes = proba.shape
    stats = _row_stats(idx, proba, n_bins, log_proba)
    values = _report_from_sums(
        _report_sums(stats, np.ones(n), n_classes, n_bins), n_classes, n_bins
    )
    intervals: dict[str, tuple[float, float]] = {}
    if n_bootstrap > 0:
        rng = check_random_state(random_state)
        draws = {k: [] for k in values}
        for _ in range(n_bootstrap):
            # A resample with replacement is a multinomial reweighting of rows.
            w = np.bincount(rng.randint(0, n, size=n), minlength=n).astype(np.float64)
            sums = _report_sums(stats, w, n_classes, n_bins)
            for k, v in _report_from_sums(sums, n_classes, n_bins).items():
                draws[k].append(v)
        alpha = (1.0 - confidence_level) / 2.0
        for k, v in draws.items():
            lo, hi = np.quantile(v, [alpha, 1.0 - alpha])
            intervals[k] = (float(lo), float(hi))
    return CalibrationReport(n, values, intervals, confidence_level, n_bootstrap)


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
    "neg_brier_score": _brier,
    "neg_log_loss": _log_loss,
}


def get_scorer(name):
    """A scorer by name: skts's calibration scorers, else scikit-learn's.

    Parameters
    ----------
    name : str or callable
        ``"neg_expected_calibration_error"``, ``"neg_maximum_calibration_error"``,
        ``"neg_classwise_calibration_error"``, ``"neg_brier_score"`` (multiclass
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


@validate_params(
    {
        "y_true": ["array-like"],
        "logits": ["array-like"],
        "groups": ["array-like", StrOptions({"predicted"})],
        "temperatures": ["array-like", None],
        "n_bootstrap": [Interval(Integral, 0, None, closed="left")],
        "confidence_level": [Interval(Real, 0, 1, closed="neither")],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def temperature_by_group(
    y_true: ArrayLike,
    logits: ArrayLike,
    groups,
    *,
    temperatures: ArrayLike | None = None,
    n_bootstrap: int = 0,
    confidence_level: float = 0.95,
    random_state=None,
) -> Bunch:
    """The temperature each group of rows would choose, beside the overall one.

    One temperature cannot calibrate groups that share logits but differ in
    how often they are right (two subpopulations with different label noise,
    or classes the model is over- or under-confident about): it calibrates
    their mixture and leaves each group wrong. Fitting ``T`` on each group
    shows whether the groups want different temperatures; with bootstrap, how
    sure that is.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True class indices in ``0..n_classes-1`` (as for
        :class:`~skts.TemperatureScaler`).
    logits : array-like or tensor of shape (n_samples, n_classes)
        Held-out logits. Binary logits may be one column, shape
        ``(n_samples,)``: the logit of class 1, i.e. logits ``(0, d)``.
    groups : array-like of shape (n_samples,) or "predicted"
        A group label per row, or ``"predicted"``: the predicted class (the
        first argmax of the logits). Do not group by the true class: within
        a true class every label is that class, so its logit always looks
        right and that group's ``T`` is biased towards 0.
    temperatures : array-like of shape (n_candidates,), default=None
        Candidates, as for :class:`~skts.TemperatureScaler` (default: 1001
        geometric points from 0.01 to 100).
    n_bootstrap : int, default=0
        Bootstrap resamples of each group's rows; with ``> 0`` each group's
        ``T`` gets a percentile interval.
    confidence_level : float, default=0.95
        Level of the intervals.
    random_state : int, RandomState instance or None, default=None
        Seed of the bootstrap.

    Returns
    -------
    result : :class:`~sklearn.utils.Bunch`
        - ``groups``: ndarray of shape (n_groups,), the sorted group labels;
        - ``temperature``: each group's ``T`` (the exact grid rule on its rows);
        - ``loss``: each group's mean log-loss at its own ``T``;
        - ``loss_at_overall``: each group's mean log-loss at the overall ``T``
          (the gap is what one temperature costs that group);
        - ``n_samples``: rows per group;
        - ``at_boundary``: whether a group's ``T`` is an end of the range
          (its loss may keep falling beyond);
        - ``interval``: ndarray of shape (n_groups, 2), bootstrap percentile
          intervals of ``T`` (NaN without bootstrap);
        - ``overall_temperature``, ``overall_loss``: the fit on all rows.

    See Also
    --------
    calibration_report : The metrics of each group (``groups=``).
    skts.TemperatureScaler : The fit on all rows.

    Examples
    --------
    Two groups share the logit gap ``log 9`` (forecast 0.9) but are right 60%
    and 90% of the time; one temperature gives 0.75 to both:

    >>> import numpy as np
    >>> from skts.metrics import temperature_by_group
    >>> logits = np.tile([0.0, np.log(9.0)], (20, 1))
    >>> y = np.array([1] * 6 + [0] * 4 + [1] * 9 + [0] * 1)
    >>> groups = np.array(["a"] * 10 + ["b"] * 10)
    >>> result = temperature_by_group(y, logits, groups, temperatures=[1, 2, 4, 8])
    >>> result.overall_temperature, result.temperature.tolist()
    (2.0, [8.0, 1.0])
    """
    logits = _check_logits(logits, warn_probabilities=True)
    y = _check_class_indices(y_true, logits.shape, name="y_true")
    if isinstance(groups, str):
        groups = np.argmax(logits, axis=1)
    else:
        groups = _check_groups(groups, logits.shape[0])
    temperatures = _check_temperatures(temperatures)
    rng = check_random_state(random_state)

    def fit(rows, weights=None):
        with warnings.catch_warnings():
            # Reported as at_boundary: a per-group warning would only repeat it.
            warnings.simplefilter("ignore", BoundaryTemperatureWarning)
            return _fit_temperature(
                logits[rows], y[rows], temperatures, weights, "grid", 1e-10
            )

    everything = fit(slice(None))
    labels = np.unique(groups)
    temps, losses, at_overall, counts, edge = [], [], [], [], []
    interval = np.full((labels.shape[0], 2), np.nan)
    alpha = (1.0 - confidence_level) / 2.0
    for k, g in enumerate(labels):
        rows = np.flatnonzero(groups == g)
        result = fit(rows)
        temps.append(result.temperature)
        losses.append(result.loss)
        at_overall.append(
            float(nll_many(logits[rows], y[rows], [everything.temperature])[0])
        )
        counts.append(rows.shape[0])
        edge.append(result.at_boundary)
        if n_bootstrap:
            draws = []
            for _ in range(n_bootstrap):
                # A resample with replacement is a multinomial reweighting.
                w = np.bincount(
                    rng.randint(0, rows.shape[0], size=rows.shape[0]),
                    minlength=rows.shape[0],
                ).astype(np.float64)
                draws.append(fit(rows, w).temperature)
            interval[k] = np.quantile(draws, [alpha, 1.0 - alpha])
    return Bunch(
        groups=labels,
        temperature=np.asarray(temps),
        loss=np.asarray(losses),
        loss_at_overall=np.asarray(at_overall),
        n_samples=np.asarray(counts),
        at_boundary=np.asarray(edge),
        interval=interval,
        overall_temperature=everything.temperature,
        overall_loss=everything.loss,
    )


def __dir__() -> list[str]:
    # Only the public names: what the module imports (numpy, scikit-learn's
    # helpers) is not part of skts.metrics.
    return sorted(__all__)
