"""Binned calibration errors and reliability curves (ECE, MCE, class-wise
ECE): every number here comes from :func:`reliability_curve`, so plots and
numbers agree."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from numbers import Integral

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.utils.validation import check_array, column_or_1d

from skts._sklearn_compat import Interval, StrOptions, validate_params
from skts._validation import (
    check_weights,
    flat_positions,
)


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

    def interval(self, confidence_level: float = 0.95):
        """Wilson score interval of each bin's accuracy.

        The accuracy of a bin of ``n`` samples is a binomial proportion;
        Wilson's interval for it stays inside [0, 1] and keeps close to its
        level even for small bins and accuracies near 0 or 1 (where the
        normal "p +- z se" interval collapses to a point). ``n`` is the bin's
        total weight (weights count as repetitions). It is the uncertainty of
        the bin's accuracy given its members, not of the binning.

        Parameters
        ----------
        confidence_level : float, default=0.95
            Level of the intervals.

        Returns
        -------
        lower, upper : ndarray of shape (n_bins,)
            Bounds (NaN for empty bins).

        References
        ----------
        E. B. Wilson, "Probable inference, the law of succession, and
        statistical inference", JASA 22 (1927).

        Examples
        --------
        >>> from skts.metrics import reliability_curve
        >>> curve = reliability_curve([1] * 10, [0.95] * 10, n_bins=2, labels=[0, 1])
        >>> lower, upper = curve.interval()
        >>> round(float(lower[1]), 4), round(float(upper[1]), 4)  # 10 of 10 right
        (0.7225, 1.0)
        """
        from scipy.special import ndtri

        z = float(ndtri(0.5 + confidence_level / 2))
        n = np.where(self.counts > 0, self.counts, np.nan)
        p = self.accuracy
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z / (1 + z * z / n) * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
        return np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)

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
        labels = column_or_1d(np.asarray(labels))
        values, counts = np.unique(labels, return_counts=True)
        if np.any(counts > 1):
            raise ValueError(
                f"labels must be unique (one per column of y_prob); got "
                f"{values[counts > 1][0].item()!r} {int(counts.max())} times."
            )
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


@functools.lru_cache(maxsize=8)
def _uniform_edges(n_bins: int) -> NDArray[np.float64]:
    """``np.linspace(0, 1, n_bins + 1)``, read-only, made once."""
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    edges.flags.writeable = False
    return edges


def _bin_index(values: NDArray, edges: NDArray) -> NDArray[np.intp]:
    # Right-closed bins (edges[m], edges[m+1]]; values at edges[0] go in bin 0.
    m = len(edges) - 1
    uniform = _uniform_edges(m)
    if m > 1 and (edges is uniform or np.array_equal(edges, uniform)):
        # Equal widths: floor(v m) is the bin or a neighbour (each edge is
        # within a few units of j / m), which one comparison with each of
        # its edges settles: the index searchsorted gives, for finite values,
        # at a fraction of its cost (a binary search per value).
        values = np.asarray(values, dtype=np.float64)
        guess = np.clip(values * m, 0, m - 1).astype(np.intp)
        idx = guess - (values <= edges[guess]) + (values > edges[guess + 1])
    else:
        idx = np.searchsorted(edges, values, side="left") - 1
    return np.clip(idx, 0, m - 1)


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
    w = check_weights(sample_weight, n)
    return np.ones(n) if w is None else w


_COMMON = {
    "y_true": ["array-like"],
    "y_prob": ["array-like"],
    "n_bins": [Interval(Integral, 1, None, closed="left")],
    "strategy": [StrOptions({"uniform", "quantile"})],
    "sample_weight": ["array-like", None],
    "labels": ["array-like", None],
    "class_axis": [Integral],
    "ignore_index": [Integral, None],
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
    class_axis: int = 1,
    ignore_index: int | None = None,
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
    y_true, y_prob, sample_weight = flat_positions(
        y_true,
        y_prob,
        sample_weight,
        class_axis=class_axis,
        ignore_index=ignore_index,
    )
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
    class_axis: int = 1,
    ignore_index: int | None = None,
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
    y_true, y_prob, sample_weight = flat_positions(
        y_true,
        y_prob,
        sample_weight,
        class_axis=class_axis,
        ignore_index=ignore_index,
    )
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
    class_axis: int = 1,
    ignore_index: int | None = None,
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
    y_true, y_prob, sample_weight = flat_positions(
        y_true,
        y_prob,
        sample_weight,
        class_axis=class_axis,
        ignore_index=ignore_index,
    )
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
    class_axis: int = 1,
    ignore_index: int | None = None,
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
    y_true, y_prob, sample_weight = flat_positions(
        y_true,
        y_prob,
        sample_weight,
        class_axis=class_axis,
        ignore_index=ignore_index,
    )
    idx, proba = _check_targets(y_true, y_prob, labels)
    w = _weights(sample_weight, proba.shape[0])
    errors = [
        _curve(proba[:, k], (idx == k).astype(np.float64), w, n_bins, strategy)
        for k in range(proba.shape[1])
    ]
    return float(np.mean([c.calibration_error() for c in errors]))
