"""The smooth ECE and the smoothed reliability curve (skts.metrics._smooth):
against relplot (the authors' package), against a slow continuous kernel
reference, and its invariants."""

import numpy as np
import pytest
import relplot  # (the test extra: the reference, never skipped)
from relplot.estimators import KernelSmoother
from relplot.kernels import ReflectedGaussianKernel
from scipy.special import softmax

from skts import TemperatureScaler
from skts.metrics import (
    smooth_calibration_error,
    smooth_reliability_curve,
)

from _data import DATA, MISSING


def _real(name):
    path = DATA / name
    if not path.exists():
        pytest.skip(MISSING)
    d = np.load(path)
    return d["val_logits"], d["val_labels"], d["test_logits"], d["test_labels"]


@pytest.mark.parametrize("name", ["densenet40_cifar10.npz", "playground_cifar100.npz"])
@pytest.mark.parametrize("calibrated", [False, True])
def test_top_label_agrees_with_relplot_on_real_logits(name, calibrated):
    val_z, val_y, z, y = _real(name)
    t = TemperatureScaler().fit(val_z, val_y).temperature_ if calibrated else 1.0
    proba = softmax(z.astype(np.float64) / t, axis=1)
    f, correct = relplot.multiclass_logits_to_confidences(proba, y, probs=True)
    expected, width = relplot.smECE(f, correct, return_width=True)
    assert smooth_calibration_error(y, proba) == pytest.approx(expected, abs=1e-9)
    curve = smooth_reliability_curve(y, proba)
    assert curve.bandwidth == width
    assert curve.error == pytest.approx(expected, abs=1e-9)


def test_classwise_is_the_mean_of_relplots_one_vs_rest():
    val_z, val_y, z, y = _real("densenet40_cifar10.npz")
    t = TemperatureScaler().fit(val_z, val_y).temperature_
    proba = softmax(z.astype(np.float64) / t, axis=1)
    expected = np.mean(
        [relplot.smECE(proba[:, k], (y == k).astype(float)) for k in range(10)]
    )
    got = smooth_calibration_error(y, proba, mode="classwise")
    assert got == pytest.approx(expected, abs=1e-9)


def _random(seed, n, shape):
    rng = np.random.RandomState(seed)
    if shape == "beta":
        f = rng.beta(5, 1, size=n)
    elif shape == "ties":
        f = rng.choice([0.0, 0.3, 0.5, 1.0], size=n)
    else:
        f = rng.uniform(size=n)
    y = (rng.uniform(size=n) < f**1.5).astype(float)
    return f, y


@pytest.mark.parametrize("n", [1, 2, 7, 100, 3000, 200_000])
@pytest.mark.parametrize("shape", ["uniform", "beta", "ties"])
def test_binary_agrees_with_relplot_on_random_data(n, shape):
    f, y = _random(n, n, shape)
    expected, width = relplot.smECE(f, y, return_width=True)
    got = smooth_calibration_error(y.astype(int), f, mode="binary", labels=[0, 1])
    assert got == pytest.approx(expected, abs=1e-9)
    assert smooth_reliability_curve(y, f, class_=1, labels=[0, 1]).bandwidth == width


@pytest.mark.parametrize("sigma", [0.003, 0.02, 0.1, 0.5])
def test_a_given_bandwidth_is_relplots_smECE_sigma(sigma):
    f, y = _random(1, 5000, "beta")
    expected = relplot.smECE_sigma(f, y, sigma)
    got = smooth_calibration_error(y, f, mode="binary", bandwidth=sigma)
    assert got == pytest.approx(expected, abs=1e-9)


def _continuous_reference(f, y, sigma, t):
    """The smooth ECE at ``sigma`` with no grid: a Gaussian reflected at 0
    and 1 evaluated at every (point, forecast) pair, and the mean absolute
    smoothed residual weighted by the density (relplot's floor included)."""
    d = t[:, None]
    phi = np.exp(-0.5 * ((d - f) / sigma) ** 2)
    phi += np.exp(-0.5 * ((d + f) / sigma) ** 2)  # image at -f
    phi += np.exp(-0.5 * ((d - 2 + f) / sigma) ** 2)  # image at 2 - f
    phi /= np.sqrt(2 * np.pi) * sigma
    num = phi @ (f - y)
    den = phi.sum(axis=1) + 1e-4  # relplot's floor (its grid sums are in these units)
    return np.sum(np.abs(num / den) * den) / np.sum(den)


@pytest.mark.parametrize("sigma", [0.03, 0.1])
def test_the_grid_approximates_the_continuous_kernel(sigma):
    # The grid's error is O(step^2) for a smooth kernel: the estimate is the
    # continuous one to far better than the error's own size.
    f, y = _random(2, 3000, "uniform")
    t = np.linspace(0, 1, max(round(10 / sigma), 200))
    exact = _continuous_reference(f, y, sigma, t)
    got = smooth_calibration_error(y, f, mode="binary", bandwidth=sigma)
    assert got == pytest.approx(exact, rel=2e-3)
    assert abs(got - exact) < 0.05 * exact


def test_the_curve_is_relplots_kernel_smoother():
    f, y = _random(3, 4000, "beta")
    curve = smooth_reliability_curve(y, f, class_=1, labels=[0, 1])
    expected = (
        KernelSmoother(ReflectedGaussianKernel(curve.bandwidth))
        .fit(f[:, None], y)
        .predict(curve.confidence[:, None])
    )
    np.testing.assert_allclose(curve.accuracy, expected, atol=1e-9)
    step = curve.confidence[1] - curve.confidence[0]
    assert curve.density.sum() * step == pytest.approx(1.0)


def test_the_band_is_a_bootstrap_of_the_curve():
    rng = np.random.RandomState(0)
    p = rng.uniform(size=3000)
    y = (rng.uniform(size=3000) < p).astype(int)
    curve = smooth_reliability_curve(y, p, class_=1, n_bootstrap=100, random_state=0)
    assert np.all(curve.lower <= curve.upper)
    inner = (curve.confidence > 0.1) & (curve.confidence < 0.9)
    # The calibrated truth (the diagonal) inside the band almost everywhere,
    # and the band narrower than the whole axis.
    covered = (curve.lower <= curve.confidence) & (curve.confidence <= curve.upper)
    assert covered[inner].mean() > 0.75  # (pointwise 95%, and a smoothing bias)
    assert np.median((curve.upper - curve.lower)[inner]) < 0.2
    again = smooth_reliability_curve(y, p, class_=1, n_bootstrap=100, random_state=0)
    np.testing.assert_array_equal(curve.lower, again.lower)
    wider = smooth_reliability_curve(
        y, p, class_=1, n_bootstrap=100, random_state=0, confidence_level=0.99
    )
    assert np.all(wider.upper - wider.lower >= curve.upper - curve.lower - 1e-12)


def test_weights_count_as_repetitions_and_their_scale_does_not_matter():
    f, y = _random(4, 2000, "uniform")
    w = np.random.RandomState(5).randint(1, 4, size=2000)
    repeated = smooth_calibration_error(
        np.repeat(y, w), np.repeat(f, w), mode="binary", labels=[0, 1]
    )
    weighted = smooth_calibration_error(
        y, f, mode="binary", sample_weight=w, labels=[0, 1]
    )
    assert weighted == pytest.approx(repeated, rel=1e-6)
    scaled = smooth_calibration_error(
        y, f, mode="binary", sample_weight=w * 0.001, labels=[0, 1]
    )
    assert scaled == pytest.approx(weighted, rel=1e-12)


def test_miscalibration_raises_it_and_calibration_keeps_it_small():
    rng = np.random.RandomState(6)
    p = rng.uniform(size=20000)
    calibrated = (rng.uniform(size=20000) < p).astype(int)
    off = (rng.uniform(size=20000) < p**2).astype(int)
    small = smooth_calibration_error(calibrated, p, mode="binary")
    big = smooth_calibration_error(off, p, mode="binary")
    assert small < 0.02 < 0.1 < big < 1 / 6  # E|p - p^2| = 1/6


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"mode": "binary"}, 'mode="binary" needs 2 classes'),
        ({"mode": "all"}, "mode"),
        ({"bandwidth": 0.0}, "bandwidth"),
        ({"bandwidth": -1.0}, "bandwidth"),
    ],
)
def test_bad_arguments_are_one_line_errors(kwargs, match):
    proba = np.full((6, 3), 1 / 3)
    with pytest.raises(ValueError, match=match):
        smooth_calibration_error([0, 1, 2, 0, 1, 2], proba, **kwargs)


def test_class_out_of_range():
    with pytest.raises(ValueError, match="class_ must be a column index"):
        smooth_reliability_curve([0, 1], [[0.5, 0.5], [0.2, 0.8]], class_=2)


def test_the_curve_has_no_step_where_relplots_cut_kernel_makes_one():
    # Many forecasts at 1 and a wide bandwidth: relplot's kernel, cut at
    # offsets of 0.5, takes in the reflection of that mass all at once at
    # t = 0.5. skts's curve uses the whole kernel: the continuous reference.
    rng = np.random.RandomState(8)
    f = np.concatenate([np.full(3000, 0.999), rng.uniform(0.05, 1, size=2000)])
    y = (rng.uniform(size=5000) < 0.7 * f).astype(float)
    sigma = 0.2
    curve = smooth_reliability_curve(y, f, class_=1, labels=[0, 1], bandwidth=sigma)
    t = curve.confidence
    relplots = (
        KernelSmoother(ReflectedGaussianKernel(sigma))
        .fit(f[:, None], y)
        .predict(t[:, None])
    )
    i = np.searchsorted(t, 0.5)
    step = lambda mu: abs(mu[i] - mu[i - 1]) / np.median(np.abs(np.diff(mu)))  # noqa: E731
    assert step(relplots) > 10  # the artefact, in the reference
    assert step(curve.accuracy) < 3
    d = t[:, None]
    phi = sum(np.exp(-0.5 * ((d - g) / sigma) ** 2) for g in (f, -f, 2 - f)) / (
        np.sqrt(2 * np.pi) * sigma
    )
    exact = (phi @ y) / (phi.sum(axis=1) + 1e-4)
    np.testing.assert_allclose(curve.accuracy, exact, atol=2e-3)
    # The number keeps relplot's kernel (and agrees with it).
    assert curve.error == pytest.approx(relplot.smECE_sigma(f, y, sigma), abs=1e-9)
