"""Paired comparisons: two forecasts of the same labels, every metric's
difference with a bootstrap interval whose resamples are the same rows for
both (so the noise of the test set they share cancels)."""

from __future__ import annotations

from dataclasses import dataclass, field
from numbers import Integral, Real

import numpy as np
from numpy.typing import ArrayLike
from sklearn.utils import check_random_state

from skts._sklearn_compat import Interval, validate_params
from skts._validation import flat_positions
from skts.metrics._binned import _check_targets
from skts.metrics._bootstrap import percentile_interval, resample_weights
from skts.metrics._debiased import debiased_error
from skts.metrics._report import (
    _report_sums,
    _row_stats,
    _streamed_sums,
    report_from_sums,
)
from skts.metrics._smooth import _Smoother, smooth_error


@dataclass(frozen=True)
class CalibrationComparison:
    """Two forecasts of the same labels, metric by metric.

    Attributes
    ----------
    n_samples : int
        Number of samples.
    values_a, values_b : dict of str to float
        The metrics of each forecast (those of
        :func:`calibration_report`, and with in-memory probabilities
        ``smooth_ece`` and ``debiased_l2_ce``, both top-label).
    difference : dict of str to float
        ``values_b - values_a`` per metric (negative: ``b`` has the lower
        error or loss; for ``accuracy``, the lower accuracy).
    intervals : dict of str to tuple of float
        Paired percentile-bootstrap interval of each difference (empty
        without bootstrap): every resample draws the same rows for both.
    confidence_level : float
        Level of the intervals.
    n_bootstrap : int
        Number of bootstrap resamples.

    Examples
    --------
    >>> from skts.metrics import compare_calibration
    >>> c = compare_calibration([0, 1, 1, 1], [0.9, 0.9, 0.9, 0.9],
    ...                         [0.75, 0.75, 0.75, 0.75], n_bootstrap=0)
    >>> round(c.difference["ece"], 4)  # ECE 0.15 -> 0.0
    -0.15
    """

    n_samples: int
    values_a: dict[str, float]
    values_b: dict[str, float]
    difference: dict[str, float]
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    confidence_level: float = 0.95
    n_bootstrap: int = 0

    def to_dict(self) -> dict:
        """Plain-JSON form.

        Examples
        --------
        >>> from skts.metrics import compare_calibration
        >>> c = compare_calibration([0, 1, 1], [0.2, 0.7, 0.6], [0.3, 0.8, 0.9],
        ...                         n_bootstrap=0)
        >>> sorted(c.to_dict())[:4]
        ['a', 'b', 'confidence_level', 'difference']
        """
        return {
            "n_samples": self.n_samples,
            "a": dict(self.values_a),
            "b": dict(self.values_b),
            "difference": dict(self.difference),
            "intervals": {k: list(v) for k, v in self.intervals.items()},
            "confidence_level": self.confidence_level,
            "n_bootstrap": self.n_bootstrap,
        }

    def __str__(self) -> str:
        head = f"{'metric':<15}{'a':>10}{'b':>10}{'b - a':>10}"
        if self.intervals:
            head += f"   {self.confidence_level:.0%} paired interval"
        lines = [head]
        for name, d in self.difference.items():
            line = (
                f"{name:<15}{self.values_a[name]:>10.4f}"
                f"{self.values_b[name]:>10.4f}{d:>+10.4f}"
            )
            if name in self.intervals:
                lo, hi = self.intervals[name]
                line += f"   [{lo:+.4f}, {hi:+.4f}]"
            lines.append(line)
        return "\n".join(lines)


class _Forecast:
    """One forecast's per-row quantities, made once for every resample."""

    def __init__(self, idx, proba, n_bins):
        self.n_classes = proba.shape[1]
        self.n_bins = n_bins
        self.stats = _row_stats(idx, proba, n_bins)
        self.smoother = _Smoother(self.stats["conf"], np.ones(idx.shape[0]))

    def metrics(self, w) -> dict[str, float]:
        k, m = self.n_classes, self.n_bins
        values = report_from_sums(_report_sums(self.stats, w, k, m), k, m)
        conf, hits = self.stats["conf"], self.stats["hits"]
        values["smooth_ece"] = smooth_error(conf, hits, w, smoother=self.smoother)[0]
        values["debiased_l2_ce"] = float(
            np.sqrt(debiased_error(conf, hits, w, m, "uniform", "l2"))
        )
        return values


def _comparison(values_a, values_b, diffs, n, level, n_bootstrap):
    difference = {k: values_b[k] - values_a[k] for k in values_a}
    intervals = {}
    if n_bootstrap:
        intervals = {
            k: percentile_interval([d[k] for d in diffs], level) for k in difference
        }
    return CalibrationComparison(
        n, values_a, values_b, difference, intervals, level, n_bootstrap
    )


@validate_params(
    {
        "y_true": ["array-like"],
        "y_prob_a": ["array-like"],
        "y_prob_b": ["array-like"],
        "n_bins": [Interval(Integral, 1, None, closed="left")],
        "n_bootstrap": [Interval(Integral, 0, None, closed="left")],
        "confidence_level": [Interval(Real, 0, 1, closed="neither")],
        "random_state": ["random_state"],
        "labels": ["array-like", None],
        "class_axis": [Integral],
        "ignore_index": [Integral, None],
    },
    prefer_skip_nested_validation=True,
)
def compare_calibration(
    y_true: ArrayLike,
    y_prob_a: ArrayLike,
    y_prob_b: ArrayLike,
    *,
    n_bins: int = 15,
    n_bootstrap: int = 1000,
    confidence_level: float = 0.95,
    random_state=None,
    labels: ArrayLike | None = None,
    class_axis: int = 1,
    ignore_index: int | None = None,
) -> CalibrationComparison:
    """Compare two forecasts of the same labels, with paired bootstrap intervals.

    Every metric of :func:`calibration_report` (accuracy, log-loss, Brier
    score, ECE, MCE, class-wise ECE), the smooth ECE
    (:func:`smooth_calibration_error`) and the debiased L2 error
    (:func:`debiased_calibration_error`) of ``a`` and of ``b``, and the
    difference ``b - a`` of each, with a percentile interval from resamples
    of the rows that are the same for ``a`` and ``b``. "Before and after
    calibration" and "two calibrators on one test set" are such pairs: the
    two forecasts' errors are correlated through the rows they share, and
    only a paired interval accounts for it (two separate intervals that
    overlap say little about the difference).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_prob_a, y_prob_b : array-like of shape (n_samples, n_classes) or (n_samples,)
        The two forecasts' probabilities (1-D: positive-class column of a
        binary problem).
    n_bins : int, default=15
        Number of equal-width bins of the binned metrics.
    n_bootstrap : int, default=1000
        Number of paired resamples (0: no intervals).
    confidence_level : float, default=0.95
        Level of the intervals.
    random_state : int, RandomState instance or None, default=None
        Seed of the resamples.
    labels : array-like of shape (n_classes,), default=None
        Labels of the columns (the same for both); default sorted unique
        ``y_true``.
    class_axis : int, default=1
        Axis of the classes of ``y_prob`` of more than two dimensions:
        ``(n_samples, n_classes, d1, ..., dk)`` per-pixel or per-token
        probabilities with ``y_true`` of shape ``(n_samples, d1, ..., dk)``,
        every position one sample (``-1``: the classes last).
    ignore_index : int, default=None
        A label whose positions are left out (``-100``: PyTorch's and
        Hugging Face's padding); ``None`` keeps every sample.

    Returns
    -------
    CalibrationComparison
        ``values_a``, ``values_b``, ``difference`` and ``intervals``.

    Notes
    -----
    An interval of a difference that excludes 0 says that, on resamples of
    this test set, ``b`` is reliably better (or worse) on that metric; it
    says nothing about other test sets. Memory is one row weight vector per
    resample (the resamples are drawn one at a time); ``skts report
    --compare`` streams the same comparison over files that do not fit in
    memory.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy.special import softmax
    >>> from skts import TemperatureScaler
    >>> from skts.metrics import compare_calibration
    >>> rng = np.random.RandomState(0)
    >>> y = rng.randint(0, 3, size=2000)
    >>> logits = 4.0 * (np.eye(3)[y] + rng.normal(size=(2000, 3)))  # overconfident
    >>> scaler = TemperatureScaler().fit(logits[:1000], y[:1000])
    >>> before = softmax(logits[1000:], axis=1)
    >>> after = scaler.predict_proba(logits[1000:])
    >>> c = compare_calibration(y[1000:], before, after, random_state=0)
    >>> lo, hi = c.intervals["log_loss"]
    >>> bool(hi < 0)  # calibration lowered the log-loss, reliably
    True
    >>> c.difference["accuracy"]  # and left every label alone
    0.0
    """
    if np.shape(y_prob_a) != np.shape(y_prob_b):
        raise ValueError(
            "y_prob_a and y_prob_b must have the same shape; got "
            f"{np.shape(y_prob_a)} and {np.shape(y_prob_b)}."
        )
    y_flat, y_prob_a, _ = flat_positions(
        y_true, y_prob_a, class_axis=class_axis, ignore_index=ignore_index
    )
    _, y_prob_b, _ = flat_positions(
        y_true, y_prob_b, class_axis=class_axis, ignore_index=ignore_index
    )
    y_true = y_flat
    idx, proba_a = _check_targets(y_true, y_prob_a, labels)
    _, proba_b = _check_targets(y_true, y_prob_b, labels)
    n = idx.shape[0]
    a, b = _Forecast(idx, proba_a, n_bins), _Forecast(idx, proba_b, n_bins)
    ones = np.ones(n)
    values_a, values_b = a.metrics(ones), b.metrics(ones)
    rng = check_random_state(random_state)
    diffs = []
    for _ in range(n_bootstrap):
        w = resample_weights(rng, n)
        da, db = a.metrics(w), b.metrics(w)
        diffs.append({k: db[k] - da[k] for k in da})
    return _comparison(values_a, values_b, diffs, n, confidence_level, n_bootstrap)


def streamed_comparison(
    logits_a, t_a, logits_b, t_b, y_idx, n_bootstrap=0, seed=0, bar=None, n_bins=15
) -> CalibrationComparison:
    """:func:`compare_calibration` of ``softmax(logits_a / t_a)`` and
    ``softmax(logits_b / t_b)``, streamed block by block (memory-mapped
    files of any size), over the report's metrics, with paired resamples."""
    n, k = logits_a.shape
    sums, boot = _streamed_sums(
        logits_a, y_idx, [t_a], n_bootstrap, seed, n_bins, bar, [(logits_b, t_b)]
    )
    values_a = report_from_sums(sums[0], k, n_bins)
    values_b = report_from_sums(sums[1], k, n_bins)
    diffs = []
    for ba, bb in zip(boot[0], boot[1], strict=True):
        da, db = report_from_sums(ba, k, n_bins), report_from_sums(bb, k, n_bins)
        diffs.append({m: db[m] - da[m] for m in da})
    return _comparison(values_a, values_b, diffs, n, 0.95, n_bootstrap)
