"""Smooth ECE (Błasiok & Nakkiran, 2023): the calibration error of a
kernel-smoothed reliability curve, with no bins, at the bandwidth that equals
its own error.

The estimator is relplot's, step for step, so that the two agree: forecasts
are split linearly between the two nearest points of a regular grid on
[0, 1], the grid is convolved with a Gaussian reflected at 0 and 1, and the
smoothed residual is read on a second grid. Two things make it faster than
relplot and leave the numbers alone: the split onto a grid depends only on the
grid's size, which the bandwidth search changes rarely, so it is made once per
size (one pass over the rows instead of one per bandwidth tried), and the
convolution is an FFT (O(M log M) per bandwidth instead of O(M^2)).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from numbers import Integral, Real

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.fft import irfft, next_fast_len, rfft

from skts._sklearn_compat import Interval, StrOptions, validate_params
from skts._validation import flat_positions
from skts.metrics._binned import _check_targets, _weights
from skts.metrics._bootstrap import percentile_interval, resample_weights

# relplot's constants (relplot.metrics.smooth_ece, relplot.kernels,
# relplot.config): the evaluation grid, the density floor, the search.
_MESH = 200
_DENSITY_FLOOR = 1e-4
_SEARCH_EPS = 1e-3
_SEARCH_STEPS = 10


@dataclass(frozen=True)
class SmoothCurve:
    """A kernel-smoothed reliability curve, read on a grid of confidences
    (what :func:`smooth_reliability_curve` returns and a
    ``kind="smooth"`` :class:`~skts.ReliabilityDisplay` draws).

    Attributes
    ----------
    confidence : ndarray of shape (n_points,)
        The grid (200 points equally spaced on [0, 1], relplot's).
    accuracy : ndarray of shape (n_points,)
        Smoothed accuracy (or frequency of the class) at each grid point.
    density : ndarray of shape (n_points,)
        Kernel density of the forecasts at each grid point (integrates to 1).
    bandwidth : float
        The Gaussian kernel's standard deviation.
    error : float
        The smooth ECE at that bandwidth.
    lower, upper : ndarray of shape (n_points,) or None
        Percentile-bootstrap band of the smoothed accuracy (rows resampled,
        the bandwidth kept), ``None`` without bootstrap.
    confidence_level : float
        Level of the band.

    Examples
    --------
    >>> import numpy as np
    >>> from skts.metrics import smooth_reliability_curve
    >>> rng = np.random.RandomState(0)
    >>> p = rng.uniform(size=4000)
    >>> y = (rng.uniform(size=4000) < p).astype(int)
    >>> curve = smooth_reliability_curve(y, p, class_=1, n_bootstrap=50,
    ...                                  random_state=0)
    >>> curve.confidence.shape, bool(np.all(curve.lower <= curve.upper))
    ((200,), True)
    >>> mid = curve.confidence.searchsorted(0.5)  # calibrated: the diagonal
    >>> bool(curve.lower[mid] < 0.5 < curve.upper[mid])
    True
    """

    confidence: NDArray[np.float64]
    accuracy: NDArray[np.float64]
    density: NDArray[np.float64]
    bandwidth: float
    error: float
    lower: NDArray[np.float64] | None = None
    upper: NDArray[np.float64] | None = None
    confidence_level: float = 0.95


class _Smoother:
    """Reflected-Gaussian smoothing of per-row values over the forecasts
    ``f`` (relplot's ``ReflectedGaussianKernel.apply``), with row weights."""

    def __init__(self, f: NDArray, weights: NDArray):
        self.f = f
        self.weights = weights
        self._splits: dict[int, tuple[NDArray, NDArray]] = {}
        self._grids: dict[tuple[int, int], NDArray] = {}

    def reweighted(self, weights: NDArray) -> _Smoother:
        """The same forecasts with other row weights (a bootstrap resample):
        the grid splits are shared, the grids are not."""
        other = _Smoother(self.f, weights)
        other._splits = self._splits
        return other

    def _split(self, m: int):
        # relplot's smooth_round_to_grid: each forecast shared between its
        # two neighbours on the m-point grid, in proportion to its distance.
        if m not in self._splits:
            pos = self.f * (m - 1)
            bins = pos.astype(np.intp).clip(0, m - 2)
            self._splits[m] = (bins, pos - bins)
        return self._splits[m]

    def grid(self, values: NDArray, m: int, weights=None, key=None) -> NDArray:
        """``values`` (weighted) rounded onto the m-point grid; cached
        under ``key`` when given (the grid does not depend on the bandwidth)."""
        if key is not None and (key, m) in self._grids:
            return self._grids[key, m]
        bins, frac = self._split(m)
        a = (self.weights if weights is None else weights) * values
        out = np.bincount(bins, a * (1 - frac), minlength=m)
        out += np.bincount(bins + 1, a * frac, minlength=m)
        if key is not None:
            self._grids[key, m] = out
        return out


def _grid_size(sigma: float) -> int:
    return max(2000, round(20 / sigma)) // 2 + 1


@lru_cache(maxsize=128)
def _kernel_spectrum(sigma: float, m: int, wide: bool):
    """The FFT length and the spectrum of the Gaussian of standard deviation
    ``sigma`` on the m-point grid, centred. relplot's kernel spans offsets
    up to +-0.5 (``wide=False``); the wide one up to +-1. Cached: the
    bandwidth search tries the same dyadic bandwidths for every resample."""
    if wide:
        half = m - 1
        s = np.arange(-half, half + 1) / (m - 1)
    else:
        # relplot's: m points on [0, 1], centred at 0.5 (between two grid
        # points when m is even), read from index m // 2 of the convolution.
        half = m // 2
        s = np.linspace(0.0, 1.0, m) - 0.5
    kernel = np.exp(-s * s / (2 * sigma**2))
    kernel /= np.sqrt(2 * np.pi) * sigma
    size = next_fast_len(3 * m - 2 + kernel.shape[0] - 1, real=True)
    return size, rfft(kernel, size), half


def _convolve(grids: NDArray, sigma: float, wide: bool = False) -> NDArray:
    """Each row of ``grids`` (length m) convolved with the Gaussian of
    standard deviation ``sigma``, reflected at both ends: relplot's
    ``ReflectedGaussianKernel.convolve`` (by FFT), whose kernel stops at
    offsets of 0.5, or with ``wide`` the kernel out to offsets of 1."""
    m = grids.shape[-1]
    size, spectrum, half = _kernel_spectrum(float(sigma), m, wide)
    flipped = grids[:, ::-1]
    ext = np.concatenate([flipped[:, :-1], grids, flipped[:, 1:]], axis=1)
    full = irfft(rfft(ext, size, axis=1) * spectrum, size, axis=1)
    # Grid point i sits at ext index i + m - 1, the kernel's centre at half.
    start = m - 1 + half
    return full[:, start : start + m]


def _interpolate(t: NDArray, values: NDArray) -> NDArray:
    # relplot.kernels.interpolate, on the last axis.
    n = values.shape[-1]
    step = 1 / (n - 1)
    inds = (t * (n - 1)).astype(np.intp).clip(0, n - 2)
    residual = (t - inds * step) / step
    return values[..., inds] * (1 - residual) + values[..., inds + 1] * residual


def _smoothed(smoother, values, sigma, t, *, weights=None, key=None, wide=False):
    """``values`` smoothed over the forecasts and read on ``t``, and the
    density there (relplot's ``BaseKernelMixin.smooth``: what its
    ``KernelSmoother`` predicts). ``wide``: the kernel out to offsets of 1,
    not relplot's 0.5. The grids are cached under ``key`` (only with the
    smoother's own weights: they do not depend on the bandwidth)."""
    m = _grid_size(sigma)
    cached = key is not None and weights is None
    grids = np.stack(
        [
            smoother.grid(values, m, weights, key if cached else None),
            smoother.grid(np.ones_like(values), m, weights, "1" if cached else None),
        ]
    )
    num, den = _interpolate(t, _convolve(grids, sigma, wide))
    den = den + _DENSITY_FLOOR
    return num / den, den


def _error_at(smoother, residual, sigma: float) -> float:
    t = np.linspace(0.0, 1.0, max(round(10 / sigma), _MESH))
    rs, den = _smoothed(smoother, residual, sigma, t, key="residual")
    return float(np.sum(np.abs(rs) * den) / np.sum(den))


def _bandwidth(smoother, residual) -> float:
    """relplot's ``search_param``: the bandwidth ``sigma`` at which the smooth
    ECE equals ``sigma``, by bisection on (0, 1] (ten halvings); the error
    is at least the bandwidth at the returned end."""

    def wide_enough(sigma):
        return sigma < _SEARCH_EPS or sigma < _error_at(smoother, residual, sigma)

    if wide_enough(1.0):
        return 1.0
    start, end = 1.0, 0.0
    for _ in range(_SEARCH_STEPS):
        mid = (start + end) / 2
        if wide_enough(mid):
            end = mid
        else:
            start = mid
    return start


def _one_vs_rest(idx, proba, mode):
    """``(forecast, hit)`` columns the error is measured on: one pair for
    the top label or the binary positive class, one per class otherwise."""
    if mode == "top-label":
        top = np.argmax(proba, axis=1)
        yield proba[np.arange(proba.shape[0]), top], (top == idx).astype(np.float64)
    elif mode == "binary":
        if proba.shape[1] != 2:
            raise ValueError(
                f'mode="binary" needs 2 classes; y_prob has {proba.shape[1]} '
                'columns (use "top-label" or "classwise").'
            )
        yield proba[:, 1], (idx == 1).astype(np.float64)
    else:
        for k in range(proba.shape[1]):
            yield proba[:, k], (idx == k).astype(np.float64)


def _mean_one(w: NDArray) -> NDArray:
    # Weights scaled to mean one: unit weights give relplot's numbers, and
    # the result does not depend on the weights' scale.
    return w * (w.shape[0] / w.sum())


def smooth_error(f, hits, w, bandwidth=None, smoother=None) -> tuple[float, float]:
    """The smooth ECE of forecasts ``f`` against outcomes ``hits`` with
    row weights ``w``, and its bandwidth. ``smoother`` (of the same ``f``)
    shares its grid splits: the bootstrap makes them once."""
    smoother = (
        _Smoother(f, _mean_one(w))
        if smoother is None
        else smoother.reweighted(_mean_one(w))
    )
    residual = f - hits
    sigma = _bandwidth(smoother, residual) if bandwidth is None else bandwidth
    return _error_at(smoother, residual, sigma), sigma


def smooth_curve(f, hits, w, bandwidth=None, n_bootstrap=0, rng=None, level=0.95):
    """The smoothed reliability curve at the smooth ECE's bandwidth (or the
    given one) on relplot's 200-point plotting grid (the smoothed outcomes,
    as relplot's diagram draws them), and, with ``n_bootstrap``, the
    percentile band of the curves of resampled rows (at the same bandwidth,
    as relplot's bagged band).

    The curve's kernel reaches offsets of 1, not relplot's 0.5: at wide
    bandwidths relplot's cut kernel makes a step at 0.5 when many forecasts
    sit near 1 (the reflection of that mass enters the window all at once),
    which is no property of the model. The smooth ECE keeps relplot's kernel,
    to agree with it; where the cut matters (bandwidths above about 0.1)
    the two kernels give visibly different curves and nearly equal errors."""
    w = _mean_one(w)
    smoother = _Smoother(f, w)
    residual = f - hits
    sigma = _bandwidth(smoother, residual) if bandwidth is None else bandwidth
    error = _error_at(smoother, residual, sigma)
    t = np.linspace(0.0, 1.0, _MESH)
    accuracy, den = _smoothed(smoother, hits, sigma, t, key="hits", wide=True)
    density = den / (den.sum() * (t[1] - t[0]))
    lower = upper = None
    if n_bootstrap:
        draws = np.empty((n_bootstrap, t.shape[0]))
        for b in range(n_bootstrap):
            wb = w * resample_weights(rng, f.shape[0])
            draws[b] = _smoothed(smoother, hits, sigma, t, weights=wb, wide=True)[0]
        bands = [percentile_interval(draws[:, j], level) for j in range(t.shape[0])]
        lower, upper = (np.array(b) for b in zip(*bands, strict=True))
    return SmoothCurve(t, accuracy, density, float(sigma), error, lower, upper, level)


@validate_params(
    {
        "y_true": ["array-like"],
        "y_prob": ["array-like"],
        "class_": [Integral, None],
        "bandwidth": [Interval(Real, 0, None, closed="neither"), None],
        "n_bootstrap": [Interval(Integral, 0, None, closed="left")],
        "confidence_level": [Interval(Real, 0, 1, closed="neither")],
        "random_state": ["random_state"],
        "sample_weight": ["array-like", None],
        "labels": ["array-like", None],
        "class_axis": [Integral],
        "ignore_index": [Integral, None],
    },
    prefer_skip_nested_validation=True,
)
def smooth_reliability_curve(
    y_true: ArrayLike,
    y_prob: ArrayLike,
    *,
    class_: int | None = None,
    bandwidth: float | None = None,
    n_bootstrap: int = 0,
    confidence_level: float = 0.95,
    random_state=None,
    sample_weight: ArrayLike | None = None,
    labels: ArrayLike | None = None,
    class_axis: int = 1,
    ignore_index: int | None = None,
) -> SmoothCurve:
    """The kernel-smoothed reliability curve behind the smooth ECE, with a
    bootstrap band.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities (1-D: positive-class column of a binary problem).
    class_ : int, default=None
        ``None``: the top-label curve; a column index ``k``: the one-vs-rest
        curve of ``p_k``.
    bandwidth : float, default=None
        Kernel standard deviation; default the smooth ECE's fixed point.
    n_bootstrap : int, default=0
        Resamples of the rows for the band (0: no band).
    confidence_level : float, default=0.95
        Level of the band.
    random_state : int, RandomState instance or None, default=None
        Seed of the resamples.
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
    SmoothCurve
        The curve, its density, bandwidth, smooth ECE and band.

    See Also
    --------
    smooth_calibration_error : Its error, alone.
    reliability_curve : The binned curve.

    Notes
    -----
    The curve is the smoothed outcome, as relplot's diagram draws it, with
    the whole Gaussian kernel (relplot cuts it at offsets of 0.5, which at
    wide bandwidths draws a step at 0.5 when many forecasts sit near 1); its
    ``error`` is :func:`smooth_calibration_error`'s, relplot's to rounding.

    Examples
    --------
    >>> import numpy as np
    >>> from skts.metrics import smooth_reliability_curve
    >>> rng = np.random.RandomState(0)
    >>> p = rng.uniform(size=4000)
    >>> y = (rng.uniform(size=4000) < p**2).astype(int)  # overconfident below 1
    >>> curve = smooth_reliability_curve(y, p, class_=1)
    >>> mid = curve.confidence.searchsorted(0.5)
    >>> round(float(curve.accuracy[mid]), 1)  # the truth at 0.5: 0.25
    0.3
    >>> round(curve.bandwidth, 3), round(curve.error, 3)  # the fixed point
    (0.163, 0.163)
    """
    y_true, y_prob, sample_weight = flat_positions(
        y_true,
        y_prob,
        sample_weight,
        class_axis=class_axis,
        ignore_index=ignore_index,
    )
    from sklearn.utils import check_random_state

    idx, proba = _check_targets(y_true, y_prob, labels)
    w = _weights(sample_weight, proba.shape[0])
    if class_ is None:
        ((f, hits),) = _one_vs_rest(idx, proba, "top-label")
    else:
        if not 0 <= class_ < proba.shape[1]:
            raise ValueError(
                f"class_ must be a column index in [0, {proba.shape[1]}); "
                f"got {class_!r}."
            )
        f, hits = proba[:, class_], (idx == class_).astype(np.float64)
    rng = check_random_state(random_state)
    return smooth_curve(f, hits, w, bandwidth, n_bootstrap, rng, confidence_level)


@validate_params(
    {
        "y_true": ["array-like"],
        "y_prob": ["array-like"],
        "mode": [StrOptions({"top-label", "classwise", "binary"})],
        "bandwidth": [Interval(Real, 0, None, closed="neither"), None],
        "sample_weight": ["array-like", None],
        "labels": ["array-like", None],
        "class_axis": [Integral],
        "ignore_index": [Integral, None],
    },
    prefer_skip_nested_validation=True,
)
def smooth_calibration_error(
    y_true: ArrayLike,
    y_prob: ArrayLike,
    *,
    mode: str = "top-label",
    bandwidth: float | None = None,
    sample_weight: ArrayLike | None = None,
    labels: ArrayLike | None = None,
    class_axis: int = 1,
    ignore_index: int | None = None,
) -> float:
    """Smooth ECE (smECE): the calibration error of a kernel-smoothed
    reliability curve, with no bins (Błasiok & Nakkiran, 2023).

    The residuals ``f - y`` are smoothed over the forecasts ``f`` with a
    Gaussian kernel reflected at 0 and 1, and the smooth ECE is the mean
    absolute smoothed residual, weighted by the kernel density of ``f``.
    The bandwidth is the published fixed-point rule: the ``sigma`` at which
    the smooth ECE at ``sigma`` equals ``sigma``. It agrees with
    ``relplot.smECE`` (the authors' package) to rounding.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities (1-D: positive-class column of a binary problem).
    mode : {"top-label", "classwise", "binary"}, default="top-label"
        ``"top-label"``: the largest probability against "the first argmax
        is the label" (relplot's ``multiclass_logits_to_confidences``).
        ``"classwise"``: the mean over classes of the one-vs-rest smooth ECE
        of ``p_k``, each at its own bandwidth. ``"binary"``: the positive
        (second) column against "the label is the second class", as
        ``relplot.smECE(p, y)`` is called on a binary problem.
    bandwidth : float, default=None
        ``None``: the fixed-point bandwidth. A number: the smooth ECE at that
        kernel standard deviation (``relplot.smECE_sigma``).
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights (scaled to mean one: unit weights give the
        unweighted value, and their scale does not matter).
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
        The smooth ECE, in [0, 1]; lower is better.

    See Also
    --------
    expected_calibration_error : The binned estimate.
    debiased_calibration_error : The binned estimate, corrected for its bias.

    Notes
    -----
    The smooth ECE is consistent (it estimates a calibration distance, not a
    number that depends on bin edges) and continuous in the forecasts. Like
    relplot, it is computed on a grid of at least 1,001 points (finer for
    small bandwidths) after splitting each forecast between its two nearest
    grid points, in O(n + M log M) per bandwidth tried.

    References
    ----------
    J. Błasiok and P. Nakkiran, "Smooth ECE: Principled Reliability Diagrams
    via Kernel Smoothing", ICLR 2024 (arXiv:2309.12236).

    Examples
    --------
    >>> import numpy as np
    >>> from skts.metrics import smooth_calibration_error
    >>> rng = np.random.RandomState(0)
    >>> p = rng.uniform(size=5000)
    >>> y = (rng.uniform(size=5000) < p).astype(int)  # calibrated
    >>> round(smooth_calibration_error(y, p, mode="binary"), 2)
    0.02
    >>> y = (rng.uniform(size=5000) < p**2).astype(int)  # miscalibrated
    >>> round(smooth_calibration_error(y, p, mode="binary"), 2)  # E|p - p^2| = 1/6
    0.15
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
        smooth_error(f, hits, w, bandwidth)[0]
        for f, hits in _one_vs_rest(idx, proba, mode)
    ]
    return float(np.mean(errors))
