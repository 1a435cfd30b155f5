"""The debiased binned calibration error (skts.metrics._debiased): against
uncertainty-calibration (Kumar et al.'s package), its unbiasedness by
simulation, and what it does with sparse bins."""

import calibration as cal  # uncertainty-calibration (the test extra)
import numpy as np
import pytest
from calibration import utils as cal_utils
from scipy.special import softmax

from skts import TemperatureScaler
from skts.metrics import debiased_calibration_error, expected_calibration_error
from skts.metrics._binned import _edges
from skts.metrics._debiased import debiased_error

from _data import DATA, MISSING


def _real(name):
    path = DATA / name
    if not path.exists():
        pytest.skip(MISSING)
    d = np.load(path)
    t = TemperatureScaler().fit(d["val_logits"], d["val_labels"]).temperature_
    return d["test_labels"], softmax(d["test_logits"].astype(np.float64) / t, axis=1)


def _scheme(strategy):
    """uncertainty-calibration's bins: its own equal-width ones, or skts's
    equal-mass edges handed to it (its own equal-mass rule differs)."""
    if strategy == "uniform":
        return cal.get_equal_prob_bins
    return lambda probs, num_bins: list(
        _edges(np.asarray(probs), num_bins, "quantile")[1:]
    )


def _reference(y, proba, p, strategy, mode):
    return cal.lower_bound_scaling_ce(
        proba,
        y,
        p=p,
        debias=True,
        num_bins=15,
        binning_scheme=_scheme(strategy),
        mode={"classwise": "marginal"}.get(mode, mode),
    )


@pytest.mark.parametrize("name", ["densenet40_cifar10.npz", "playground_cifar100.npz"])
@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
def test_l2_top_label_equals_uncertainty_calibration_on_real_logits(name, strategy):
    y, proba = _real(name)
    conf = proba.max(axis=1)
    sizes = np.bincount(
        np.clip(np.searchsorted(_edges(conf, 15, strategy), conf) - 1, 0, 14)
    )
    if np.any((sizes > 0) & (sizes < 2)):
        pytest.fail("a bin of one sample: the two estimators differ there by design")
    expected = _reference(y, proba, 2, strategy, "top-label")
    got = debiased_calibration_error(y, proba, strategy=strategy)
    assert got == pytest.approx(expected, abs=1e-12)


def test_l2_classwise_equals_uncertainty_calibration_marginal():
    rng = np.random.RandomState(0)
    y = rng.randint(0, 4, size=4000)
    logits = 2.5 * (np.eye(4)[y] + rng.normal(size=(4000, 4)))
    proba = softmax(logits, axis=1)
    for strategy in ("uniform", "quantile"):
        expected = _reference(y, proba, 2, strategy, "classwise")
        got = debiased_calibration_error(y, proba, strategy=strategy, mode="classwise")
        assert got == pytest.approx(expected, abs=1e-12)


def test_l1_equals_kumar_et_als_monte_carlo_correction():
    # Small bins, so that the correction is large next to the Monte Carlo
    # noise of the reference (resampled 200,000 times here).
    rng = np.random.RandomState(1)
    p = rng.uniform(size=450)  # (every bin needs 2 points for the reference)
    y = (rng.uniform(size=450) < p**1.3).astype(int)
    edges = np.linspace(0, 1, 16)
    bins = list(edges[1:])
    np.random.seed(0)  # noqa: NPY002 (the reference draws from the global state)
    expected = cal_utils.normal_debiased_ce(
        cal_utils.bin(list(zip(p, y, strict=True)), bins), power=1, resamples=200_000
    )
    got = debiased_calibration_error(y, p, norm="l1", mode="binary")
    plug_in = cal_utils.plugin_ce(
        cal_utils.bin(list(zip(p, y, strict=True)), bins), power=1
    )
    assert abs(plug_in - got) > 0.004  # the correction is no rounding
    assert got == pytest.approx(expected, abs=3e-4)


def test_the_l2_estimate_is_unbiased_where_the_plug_in_is_not():
    # Forecasts on 15 fixed values (one per bin), each right with a known
    # probability: the true squared binned error is known exactly.
    rng = np.random.RandomState(2)
    values = (np.arange(15) + 0.5) / 15
    truth = np.clip(values + 0.1 * np.sin(7 * values), 0, 1)
    true_sq = np.mean((truth - values) ** 2)
    n, trials = 1500, 400
    debiased, plug_in = [], []
    for _ in range(trials):
        k = rng.randint(0, 15, size=n)
        f, hits = values[k], (rng.uniform(size=n) < truth[k]).astype(float)
        debiased.append(debiased_error(f, hits, np.ones(n), 15, "uniform", "l2"))
        gap = np.bincount(k, hits, 15) / np.bincount(k, minlength=15) - values
        plug_in.append(np.dot(np.bincount(k, minlength=15) / n, gap**2))
    se = np.std(debiased) / np.sqrt(trials)
    assert abs(np.mean(debiased) - true_sq) < 4 * se
    # The plug-in is biased up by about sum_b share_b var_b = E[acc(1-acc)]/(n/15).
    bias = np.mean(plug_in) - true_sq
    assert bias > 10 * se
    assert bias == pytest.approx(np.mean(truth * (1 - truth)) * 15 / n, rel=0.2)


def test_a_bin_of_one_sample_keeps_its_plug_in_term():
    # Bin 14 holds one forecast 0.99 that was wrong; the rest are in bin 7.
    f = np.array([0.99] + [0.5] * 40)
    hits = np.array([0.0] + [1.0, 0.0] * 20)
    share = np.array([40 / 41, 1 / 41])
    acc = np.array([0.5, 0.0])
    gap = acc - np.array([0.5, 0.99])
    var = np.array([0.5 * 0.5 / 39, 0.0])  # the singleton: no variance estimate
    expected = np.sqrt(np.dot(share, gap**2 - var))
    got = debiased_calibration_error(hits.astype(int), f, mode="binary")
    assert got == pytest.approx(max(expected, 0.0), abs=1e-12)
    assert got > 0.1  # the wrong 0.99 is not hidden...
    bins = list(np.linspace(0, 1, 16)[1:])
    data = cal_utils.bin(list(zip(f, hits, strict=True)), bins)
    nonempty = [b for b in data if len(b)]
    assert cal_utils.unbiased_l2_ce(nonempty) == 0.0  # ...as the reference's 0 does
    # The reference refuses the L1 estimate here; skts gives one.
    with pytest.raises(ValueError, match="at least 2 points"):
        cal_utils.normal_debiased_ce(
            cal_utils.bin(
                list(zip(f, hits, strict=True)), list(np.linspace(0, 1, 16)[1:])
            ),
            power=1,
        )
    l1 = debiased_calibration_error(hits.astype(int), f, norm="l1", mode="binary")
    # By hand: the singleton keeps |gap| = 0.99; the bin of 40 at accuracy
    # 0.5 has plug-in 0 and E|N(0, s^2)| = s sqrt(2 / pi), s^2 = 0.25 / 40.
    by_hand = 0.99 / 41 + 40 / 41 * (0 - np.sqrt(0.25 / 40) * np.sqrt(2 / np.pi))
    assert l1 == pytest.approx(by_hand, abs=1e-12)
    assert l1 < 0  # (Kumar et al.'s L1 correction can cross 0: documented)


def test_integer_weights_are_repetitions():
    rng = np.random.RandomState(3)
    p = rng.uniform(size=500)
    y = (rng.uniform(size=500) < p).astype(int)
    w = rng.randint(1, 4, size=500)
    for norm in ("l1", "l2"):
        weighted = debiased_calibration_error(
            y, p, norm=norm, mode="binary", sample_weight=w
        )
        repeated = debiased_calibration_error(
            np.repeat(y, w), np.repeat(p, w), norm=norm, mode="binary"
        )
        assert weighted == pytest.approx(repeated, abs=1e-12)


def test_it_corrects_the_ece_downward_on_a_calibrated_model():
    rng = np.random.RandomState(4)
    p = rng.uniform(size=3000)
    y = (rng.uniform(size=3000) < p).astype(int)
    assert debiased_calibration_error(y, p, norm="l1") < expected_calibration_error(
        y, p
    )
    assert debiased_calibration_error(y, p) < 0.01


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"norm": "l3"}, "norm"),
        ({"n_bins": 0}, "n_bins"),
        ({"strategy": "equal"}, "strategy"),
        ({"mode": "binary"}, 'mode="binary" needs 2 classes'),
    ],
)
def test_bad_arguments_are_one_line_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        debiased_calibration_error([0, 1, 2], np.full((3, 3), 1 / 3), **kwargs)
