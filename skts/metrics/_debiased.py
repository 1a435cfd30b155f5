"""The debiased binned calibration error (Kumar, Liang & Ma, 2019): the
plug-in estimate, less what the noise of each bin's accuracy adds to it."""

from __future__ import annotations

from numbers import Integral

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import ndtr

from skts._sklearn_compat import Interval, StrOptions, validate_params
from skts._validation import flat_positions
from skts.metrics._binned import _bin_index, _check_targets, _edges, _weights
from skts.metrics._smooth import _one_vs_rest


def _bin_moments(f, hits, w, n_bins, strategy):
    """Per non-empty bin: share of the weight, mean forecast, mean outcome
    and size (the sum of the weights: weights count as repetitions, as in
    scikit-learn, so a bootstrap resample's counts are its rows)."""
    idx = _bin_index(f, _edges(f, n_bins, strategy))
    mass = np.bincount(idx, w, minlength=n_bins)
    full = mass > 0
    mass = mass[full]
    conf = np.bincount(idx, w * f, minlength=n_bins)[full] / mass
    acc = np.bincount(idx, w * hits, minlength=n_bins)[full] / mass
    return mass / mass.sum(), conf, acc, mass


def debiased_error(f, hits, w, n_bins, strategy, norm) -> float:
    """The debiased error of one column: the squared error for ``"l2"``
    (before the mean over classes and the square root), the error for
    ``"l1"``."""
    share, conf, acc, size = _bin_moments(f, hits, w, n_bins, strategy)
    gap = acc - conf
    # A bin of one row has no estimate of its accuracy's variance: it keeps
    # its plug-in term, which can only overstate the error.
    many = size > 1
    var = np.zeros_like(gap)
    var[many] = acc[many] * (1 - acc[many]) / (size[many] - 1)
    if norm == "l2":
        # E[(acc_hat - conf)^2] = (acc - conf)^2 + var(acc_hat), and
        # acc_hat (1 - acc_hat) / (n - 1) is unbiased for var(acc_hat).
        return float(max(np.dot(share, gap * gap - var), 0.0))
    # L1: Kumar et al.'s correction, 2 * plug-in - E|N(acc_hat, s^2) - conf|
    # with s^2 = acc_hat (1 - acc_hat) / n, the expectation in closed form
    # (their code draws it by Monte Carlo).
    s = np.zeros_like(gap)
    s[many] = np.sqrt(acc[many] * (1 - acc[many]) / size[many])
    folded = np.abs(gap)
    noisy = s > 0
    d, sd = gap[noisy], s[noisy]
    folded[noisy] = sd * np.sqrt(2 / np.pi) * np.exp(-0.5 * (d / sd) ** 2) + d * (
        1 - 2 * ndtr(-d / sd)
    )
    return float(2 * np.dot(share, np.abs(gap)) - np.dot(share, folded))


@validate_params(
    {
        "y_true": ["array-like"],
        "y_prob": ["array-like"],
        "n_bins": [Interval(Integral, 1, None, closed="left")],
        "strategy": [StrOptions({"uniform", "quantile"})],
        "norm": [StrOptions({"l1", "l2"})],
        "mode": [StrOptions({"top-label", "classwise", "binary"})],
        "sample_weight": ["array-like", None],
        "labels": ["array-like", None],
        "class_axis": [Integral],
        "ignore_index": [Integral, None],
    },
    prefer_skip_nested_validation=True,
)
def debiased_calibration_error(
    y_true: ArrayLike,
    y_prob: ArrayLike,
    *,
    n_bins: int = 15,
    strategy: str = "uniform",
    norm: str = "l2",
    mode: str = "top-label",
    sample_weight: ArrayLike | None = None,
    labels: ArrayLike | None = None,
    class_axis: int = 1,
    ignore_index: int | None = None,
) -> float:
    """Debiased binned calibration error (Kumar, Liang & Ma, 2019).

    The plug-in binned error overstates the calibration error: even a
    calibrated model's bins have accuracies that scatter around their
    confidences. For the L2 error the scatter's contribution is known and
    removed exactly in expectation::

        CE_2^2 = sum_b (n_b / n) [(acc_b - conf_b)^2 - acc_b (1 - acc_b) / (n_b - 1)]

    (clipped at 0 before the square root). For the L1 error, Kumar et al.'s
    correction ``2 * plug-in - E[plug-in of a resampled accuracy]``, with
    the resampled accuracy normal around ``acc_b`` with variance
    ``acc_b (1 - acc_b) / n_b``; the expectation is computed in closed form.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities (1-D: positive-class column of a binary problem).
    n_bins : int, default=15
        Number of bins.
    strategy : {"uniform", "quantile"}, default="uniform"
        Equal-width bins ``((m-1)/M, m/M]`` or equal-mass bins (the bins of
        :func:`expected_calibration_error`).
    norm : {"l2", "l1"}, default="l2"
        The L2 calibration error (root mean squared gap; the estimator with
        the proven bias correction) or the L1 (the ECE's scale).
    mode : {"top-label", "classwise", "binary"}, default="top-label"
        The top-label error; the class-wise error (L2: the root of the mean
        over classes of the squared one-vs-rest errors, as
        ``uncertainty-calibration``'s ``mode="marginal"``; L1: their mean);
        or the positive (second) column of a binary problem.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights, counted as repetitions (scikit-learn's convention):
        a bin's share and its size ``n_b`` are sums of weights, so integer
        weights give the value of the repeated rows.
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
        The debiased error; lower is better. L2 is clipped at 0 before its
        square root. The L1 correction is not clipped (that would bias it
        up again): below 0 means the plug-in error is within what the bins'
        noise alone would give.

    See Also
    --------
    expected_calibration_error : The plug-in L1 estimate.
    smooth_calibration_error : A consistent estimate with no bins.

    Notes
    -----
    A bin of one sample (of total weight at most 1) has no estimate of the
    variance of its accuracy: it keeps its plug-in term (which can only
    overstate the error) instead of being refused
    (``uncertainty-calibration`` raises for L1, and sets the bin's L2 term
    to 0, which can hide an error). Empty bins are left out.
    On bins of at least two samples both estimators equal
    ``uncertainty-calibration``'s (the L1 one up to its Monte Carlo noise).

    References
    ----------
    A. Kumar, P. Liang and T. Ma, "Verified Uncertainty Calibration",
    NeurIPS 2019.

    Examples
    --------
    >>> import numpy as np
    >>> from skts.metrics import debiased_calibration_error, expected_calibration_error
    >>> rng = np.random.RandomState(0)
    >>> p = rng.uniform(size=2000)
    >>> y = (rng.uniform(size=2000) < p).astype(int)  # calibrated
    >>> plug_in = expected_calibration_error(y, p)
    >>> debiased = debiased_calibration_error(y, p, norm="l1")
    >>> bool(debiased < plug_in)
    True
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
        debiased_error(f, hits, w, n_bins, strategy, norm)
        for f, hits in _one_vs_rest(idx, proba, mode)
    ]
    if norm == "l2":
        return float(np.sqrt(np.mean(errors)))
    return float(np.mean(errors))
