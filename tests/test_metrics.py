"""Calibration metrics and scorers against hand-worked values and brute force."""

import json
from itertools import pairwise

import numpy as np
import pytest
from sklearn.datasets import load_iris, make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import brier_score_loss, log_loss
from sklearn.model_selection import GridSearchCV, cross_validate

import skts.metrics._report as report_module
from skts import TemperatureScaler
from skts._numerics import default_temperatures, nll_many, softmax
from skts.metrics import (
    calibration_report,
    classwise_calibration_error,
    compare_calibration,
    debiased_calibration_error,
    expected_calibration_error,
    get_scorer,
    maximum_calibration_error,
    reliability_curve,
    smooth_calibration_error,
    smooth_reliability_curve,
    temperature_by_group,
)
from skts.metrics._binned import _bin_index
from skts.metrics._report import streamed_reports


def reference_ece(y_idx, proba, n_bins=15):
    """Guo et al.'s loop: bins (lo, hi], |acc - conf| weighted by bin size."""
    conf = proba.max(1)
    correct = proba.argmax(1) == y_idx
    edges = np.linspace(0, 1, n_bins + 1)
    ece, gaps = 0.0, []
    for lo, hi in pairwise(edges):
        inside = (conf > lo) & (conf <= hi)
        if lo == 0:
            inside |= conf == 0
        if inside.any():
            gap = abs(correct[inside].mean() - conf[inside].mean())
            ece += inside.mean() * gap
            gaps.append(gap)
    return ece, max(gaps)


@pytest.fixture
def forecast():
    rng = np.random.RandomState(0)
    logits = rng.normal(scale=3, size=(500, 4))
    proba = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    y = np.array(
        [rng.choice(4, p=p) for p in proba**0.5 / (proba**0.5).sum(1)[:, None]]
    )
    return y, proba


def test_hand_worked_single_bin():
    # Four forecasts of 0.9 for the positive class, three right: gap 0.15.
    assert expected_calibration_error([0, 1, 1, 1], [0.9] * 4) == pytest.approx(0.15)
    curve = reliability_curve([0, 1, 1, 1], [0.9] * 4, n_bins=5)
    np.testing.assert_array_equal(curve.counts, [0, 0, 0, 0, 4])
    assert np.isnan(curve.confidence[0])


def test_hand_worked_two_bins():
    y = [0, 1, 1, 1]
    p = [0.9, 0.9, 0.9, 0.6]  # bins: {0.9 x3: acc 2/3}, {0.6: acc 1}
    expected = 3 / 4 * abs(2 / 3 - 0.9) + 1 / 4 * abs(1 - 0.6)
    assert expected_calibration_error(y, p) == pytest.approx(expected)
    assert maximum_calibration_error(y, p) == pytest.approx(0.4)


def test_constant_one_third_on_balanced_classes_has_zero_ece():
    y = np.repeat([0, 1, 2], 20)
    proba = np.full((60, 3), 1 / 3)
    assert expected_calibration_error(y, proba) == pytest.approx(0.0, abs=1e-12)
    assert classwise_calibration_error(y, proba) == pytest.approx(0.0, abs=1e-12)


def test_bin_edges_are_right_closed():
    # With 5 bins, 0.8 is the right edge of bin 3, (0.6, 0.8]; 0.8 + 1e-12 is in
    # bin 4, (0.8, 1].
    curve = reliability_curve([1, 1], [0.8, 0.8 + 1e-12], n_bins=5, labels=[0, 1])
    np.testing.assert_array_equal(curve.counts, [0, 0, 0, 1, 1])


def test_against_brute_force(forecast):
    y, proba = forecast
    ece, mce = reference_ece(y, proba)
    assert expected_calibration_error(y, proba) == pytest.approx(ece, rel=1e-12)
    assert maximum_calibration_error(y, proba) == pytest.approx(mce, rel=1e-12)
    for n_bins in (5, 10, 20):
        assert expected_calibration_error(y, proba, n_bins=n_bins) == pytest.approx(
            reference_ece(y, proba, n_bins)[0], rel=1e-12
        )


def _classwise_by_loops(y, proba, n_bins=15):
    """Class-wise ECE the slow way: every class, every bin (lo, hi] (0 in
    the first), |share of the class - mean forecast| weighted by bin size."""
    edges = np.linspace(0, 1, n_bins + 1)
    per_class = []
    for k in range(proba.shape[1]):
        p, hit = proba[:, k], y == k
        total = 0.0
        for lo, hi in pairwise(edges):
            inside = ((p > lo) | ((lo == 0) & (p == 0))) & (p <= hi)
            if inside.any():
                total += inside.mean() * abs(hit[inside].mean() - p[inside].mean())
        per_class.append(total)
    return float(np.mean(per_class))


def test_classwise_against_brute_force(forecast):
    y, proba = forecast
    assert classwise_calibration_error(y, proba) == pytest.approx(
        _classwise_by_loops(y, proba)
    )


@pytest.mark.parametrize("n_bins", [1, 2, 3, 10, 15, 100, 997])
def test_equal_width_bins_are_the_binary_searchs(n_bins):
    # The report's bins come from a guess (floor(v m)) settled by comparing
    # with its two edges; the reference is a binary search over the edges,
    # at every edge and either side of it, and at the ends and beyond.
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    rng = np.random.default_rng(n_bins)
    values = np.concatenate(
        [
            rng.random(20_000),
            edges,
            np.nextafter(edges, 2.0),
            np.nextafter(edges, -1.0),
            edges * (1 + 1e-15),
            [0.0, 5e-324, 1.0, 1.0 + 1e-12, -0.25, 3.0],
        ]
    )
    want = np.clip(np.searchsorted(edges, values, side="left") - 1, 0, n_bins - 1)
    assert np.array_equal(_bin_index(values, edges), want)
    # Other edges (quantiles) keep the binary search.
    uneven = np.sort(np.r_[0.0, rng.random(n_bins - 1), 1.0]) if n_bins > 1 else edges
    want = np.clip(np.searchsorted(uneven, values, side="left") - 1, 0, n_bins - 1)
    assert np.array_equal(_bin_index(values, uneven), want)


@pytest.mark.parametrize("n_classes", [3, 40, 300])
def test_report_classwise_of_many_classes_against_loops(n_classes):
    # The report sums only the forecasts beyond the first bin one by one
    # (the first bin's sum is each class's total less the others): against
    # every class and bin by loops, with forecasts exactly on the edges.
    rng = np.random.default_rng(n_classes)
    n = 600
    logits = rng.normal(scale=4.0, size=(n, n_classes))
    proba = np.exp(logits - logits.max(1, keepdims=True))
    proba /= proba.sum(1, keepdims=True)
    on_edges = rng.random(proba.shape) < 0.05
    proba[on_edges] = rng.integers(0, 16, on_edges.sum()) / 15
    y = np.r_[np.arange(n_classes), rng.integers(0, n_classes, n - n_classes)]
    report = calibration_report(y, proba)
    assert report["classwise_ece"] == pytest.approx(
        _classwise_by_loops(y, proba), rel=1e-12
    )
    assert report["classwise_ece"] == pytest.approx(
        classwise_calibration_error(y, proba), rel=1e-12
    )


def test_streamed_report_of_many_classes_is_the_in_memory_one():
    # Streamed from logits, several blocks per group of rows (1,000 classes:
    # 65 rows a block), against calibration_report of the probabilities.
    rng = np.random.default_rng(7)
    n, k = 3_000, 1_000
    z = rng.normal(scale=3.0, size=(n, k)).astype(np.float32)
    y = np.where(rng.random(n) < 0.7, z.argmax(1), rng.integers(0, k, n))
    got = streamed_reports(z, y, [1.0, 1.7])
    for report, t in zip(got, [1.0, 1.7], strict=True):
        want = calibration_report(y, softmax(z, t), labels=np.arange(k))
        for name, value in want.values.items():
            assert report[name] == pytest.approx(value, rel=1e-9, abs=1e-15), name
    assert got[0]["classwise_ece"] == pytest.approx(
        _classwise_by_loops(y, softmax(z, 1.0)), rel=1e-9
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_streamed_log_loss_against_60_digits(dtype):
    # The streamed report takes log p_y from the softmax's p_y where that is
    # a normal float64, and from the log-softmax where it is subnormal or 0:
    # each row's -log p_y against mpmath, and the mean (never clipped).
    from _reference import exact_losses

    rng = np.random.default_rng(5)
    n, k = 60, 10
    z = rng.normal(scale=4.0, size=(n, k))
    y = rng.integers(0, k, n)
    top = z.argmax(1)
    z[:10, y[:10]] = z[:10, top[:10]] - 800.0  # p_y = 0 in float64
    z[10:20, y[10:20]] = z[10:20, top[10:20]] - 720.0  # subnormal p_y
    z[20:30] = 0.0
    z[20:30, y[20:30]] = 30.0  # p_y = 1 - 9e-13 or so
    z = z.astype(dtype)
    for t in (1.0, 0.7):
        p_y = softmax(z, t)[np.arange(n), y]
        assert np.all(p_y[:10] == 0.0) and np.all(p_y[10:20] < np.finfo(float).tiny)
        got = report_module._label_log_proba(z, y, t, p_y)
        want = np.array(
            [float(exact_losses(z[i : i + 1], y[i : i + 1], [t])[0]) for i in range(n)]
        )
        np.testing.assert_allclose(-got, want, rtol=1e-14, atol=1e-15)
        (report,) = streamed_reports(z, y, [t])
        assert report["log_loss"] == pytest.approx(float(np.mean(want)), rel=1e-14)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k", [2, 10, 100, 4096, 4097])
def test_the_compiled_report_read_is_the_report_of_the_probabilities(
    monkeypatch, k, dtype
):
    # The streamed report reads the logits once in compiled code (no float64
    # probabilities whole) where it can: every metric and every bootstrap
    # interval, paired forecasts included, equal those of the probabilities
    # (the path it replaces) to summation order. Ties at a row's maximum,
    # rows of equal logits and labels of probability 0; several blocks a
    # group (4,096 classes: two rows a block). Wider rows keep the path of
    # the probabilities.
    rng = np.random.default_rng(k)
    n = max(100, 200_000 // k)
    z = rng.normal(scale=3.0, size=(n, k)).astype(dtype)
    z[::3, k // 2] = z[::3].max(axis=1)
    z[::3, -1] = z[::3, k // 2]
    z[1] = 0.0
    y = np.where(rng.random(n) < 0.6, z.argmax(1), rng.integers(0, k, n))
    z[2, (y[2] + 1) % k] = z[2].max() + 2000.0  # p_y = 0
    other = (z * 0.5 + rng.normal(size=z.shape)).astype(dtype)
    used = []
    compiled = report_module._compiled_row_stats

    def counting(*args):
        got = compiled(*args)
        used.append(got is not None)
        return got

    monkeypatch.setattr(report_module, "_compiled_row_stats", counting)
    fast, fast_boot = report_module._streamed_sums(
        z, y, [1.0, 1.7], 20, 4, others=[(other, 1.3)]
    )
    assert used and all(u == (k <= report_module._COMPILED_CLASSES) for u in used)
    monkeypatch.setattr(report_module, "_compiled_row_stats", lambda *a: None)
    slow, slow_boot = report_module._streamed_sums(
        z, y, [1.0, 1.7], 20, 4, others=[(other, 1.3)]
    )
    # (sums of non-negative terms: the same to a few units of their size)
    np.testing.assert_allclose(fast, slow, rtol=1e-12, atol=1e-12 * n)
    np.testing.assert_allclose(fast_boot, slow_boot, rtol=1e-12, atol=1e-12 * n)
    assert np.array_equal(fast[:, :2], slow[:, :2])  # rows, correct: exact
    for f, s in zip(fast, slow, strict=True):
        a = report_module.report_from_sums(f, k, 15)
        b = report_module.report_from_sums(s, k, 15)
        for name in b:
            assert a[name] == pytest.approx(b[name], rel=1e-11, abs=1e-14), name


def test_grouped_blocks_draw_the_resamples_of_single_blocks(monkeypatch):
    # The streamed bootstrap draws its resamples block by block; processing
    # several blocks at a time must not change them: the intervals of one
    # block per group (a group of 1 value) are those of the default groups.
    rng = np.random.default_rng(3)
    n, k = 5_000, 200
    z = rng.normal(scale=3.0, size=(n, k))
    y = rng.integers(0, k, n)
    grouped = streamed_reports(z, y, [1.0], 50, 11)[0]
    monkeypatch.setattr(report_module, "_GROUP_VALUES", 1)
    single = streamed_reports(z, y, [1.0], 50, 11)[0]
    assert single.intervals.keys() == grouped.intervals.keys()
    for name, (lo, hi) in single.intervals.items():
        assert grouped.intervals[name] == pytest.approx((lo, hi), rel=1e-12), name
    # (and the intervals are not all one point: the resamples differ)
    assert grouped.intervals["accuracy"][0] < grouped.intervals["accuracy"][1]


def test_quantile_bins_have_equal_mass(forecast):
    y, proba = forecast
    curve = reliability_curve(y, proba, n_bins=10, strategy="quantile")
    np.testing.assert_array_equal(curve.counts, np.full(10, 50.0))
    ece = expected_calibration_error(y, proba, n_bins=10, strategy="quantile")
    assert ece == pytest.approx(curve.calibration_error())


def test_binary_column_equals_full_matrix(forecast):
    rng = np.random.RandomState(1)
    p = rng.rand(200)
    y = (rng.rand(200) < p**2).astype(int)
    full = np.column_stack([1 - p, p])
    for metric in (
        expected_calibration_error,
        maximum_calibration_error,
        classwise_calibration_error,
    ):
        assert metric(y, p) == metric(y, full)


def test_string_labels_and_explicit_labels():
    y = np.array(["b", "a", "b", "c"])
    proba = np.array(
        [[0.1, 0.8, 0.1], [0.7, 0.2, 0.1], [0.3, 0.6, 0.1], [0.1, 0.1, 0.8]]
    )
    numeric = expected_calibration_error([1, 0, 1, 2], proba)
    assert expected_calibration_error(y, proba) == numeric
    # A test fold missing a class: labels= says which column is which.
    assert expected_calibration_error(
        y[:3], proba[:3], labels=["a", "b", "c"]
    ) == expected_calibration_error([1, 0, 1], proba[:3], labels=[0, 1, 2])
    with pytest.raises(ValueError, match="pass labels="):
        expected_calibration_error(y[:3], proba[:3])
    # Integer labels get no guess either (the columns could be any classes).
    with pytest.raises(ValueError, match="pass labels="):
        expected_calibration_error([1, 0, 1], proba[:3])
    with pytest.raises(ValueError, match=r"labels not in labels: \['z'\]"):
        expected_calibration_error(["z", "a", "b", "c"], proba, labels=["a", "b", "c"])


def test_sample_weight_equals_repetition(forecast):
    y, proba = forecast
    w = np.random.RandomState(2).randint(0, 3, size=len(y))
    assert expected_calibration_error(y, proba, sample_weight=w) == pytest.approx(
        expected_calibration_error(np.repeat(y, w), np.repeat(proba, w, 0))
    )


@pytest.mark.parametrize(
    "y_true, y_prob, kwargs, match",
    [
        ([0, 1], [[0.5, 0.5]], {}, "y_true has 2 samples but y_prob has 1"),
        ([0], [[1.5, -0.5]], {}, r"y_prob must contain probabilities in \[0, 1\]"),
        ([0], [[np.nan, 0.5]], {}, "y_prob contains NaN"),
        ([], np.zeros((0, 2)), {}, "empty"),
        ([0, 1], [0.2, 0.7], {"n_bins": 0}, "n_bins"),
        ([0, 1], [0.2, 0.7], {"strategy": "log"}, "strategy"),
        ([0, 1], [0.2, 0.7], {"sample_weight": [0, 0]}, "positive sum"),
        ([0, 1], [0.2, 0.7], {"sample_weight": [1, -1]}, "non-negative"),
    ],
)
def test_bad_input(y_true, y_prob, kwargs, match):
    with pytest.raises(ValueError, match=match):
        expected_calibration_error(y_true, y_prob, **kwargs)


def test_report_matches_sklearn(forecast):
    y, proba = forecast
    report = calibration_report(y, proba)
    assert report["accuracy"] == pytest.approx(np.mean(proba.argmax(1) == y))
    assert report["log_loss"] == pytest.approx(log_loss(y, proba), rel=1e-12)
    assert report["brier_score"] == pytest.approx(brier_score_loss(y, proba), rel=1e-12)
    assert report["ece"] == pytest.approx(expected_calibration_error(y, proba))
    assert report["mce"] == pytest.approx(maximum_calibration_error(y, proba))
    assert report["classwise_ece"] == pytest.approx(
        classwise_calibration_error(y, proba)
    )
    assert report.intervals == {}
    assert "log_loss" in str(report)


def test_report_bootstrap(forecast):
    y, proba = forecast
    a = calibration_report(y, proba, n_bootstrap=100, random_state=0)
    b = calibration_report(y, proba, n_bootstrap=100, random_state=0)
    assert a.intervals == b.intervals
    for name, (lo, hi) in a.intervals.items():
        assert lo <= hi
        assert lo <= a[name] + 0.02 and a[name] - 0.02 <= hi
    assert a.intervals["ece"][1] > a.intervals["ece"][0]  # ECE is noisy
    assert a.to_dict()["n_bootstrap"] == 100


@pytest.mark.parametrize(
    "name",
    [
        "neg_expected_calibration_error",
        "neg_maximum_calibration_error",
        "neg_classwise_calibration_error",
        "neg_smooth_calibration_error",
        "neg_debiased_calibration_error",
        "neg_brier_score",
        "neg_log_loss",
    ],
)
@pytest.mark.parametrize("n_classes", [2, 3])
def test_scorers_in_grid_search(name, n_classes):
    X, y = make_classification(
        n_samples=150, n_classes=n_classes, n_informative=4, random_state=0
    )
    search = GridSearchCV(
        LogisticRegression(), {"C": [0.01, 1.0]}, scoring=get_scorer(name), cv=3
    ).fit(X, y)
    assert np.all(search.cv_results_["mean_test_score"] <= 0)
    model = LogisticRegression().fit(X, y)
    scorer = get_scorer(name)
    proba = model.predict_proba(X)
    if name == "neg_expected_calibration_error":
        assert scorer(model, X, y) == -expected_calibration_error(y, proba)
    if name == "neg_smooth_calibration_error":
        assert scorer(model, X, y) == -smooth_calibration_error(y, proba)
    if name == "neg_debiased_calibration_error":
        assert scorer(model, X, y) == -debiased_calibration_error(y, proba)
    if name == "neg_brier_score":
        expected = brier_score_loss(y, proba[:, 1] if n_classes == 2 else proba)
        assert scorer(model, X, y) == pytest.approx(-expected)


def test_multi_metric_and_fallback():
    X, y = load_iris(return_X_y=True)
    result = cross_validate(
        LogisticRegression(max_iter=1000),
        X,
        y,
        cv=3,
        scoring={
            "ece": get_scorer("neg_expected_calibration_error"),
            "acc": get_scorer("accuracy"),
        },
    )
    assert np.all(result["test_acc"] > 0.8)
    assert np.all(result["test_ece"] <= 0)
    with pytest.raises(
        ValueError, match="'no_such_scorer' is not a scorer: skts provides"
    ):
        get_scorer("no_such_scorer")


@pytest.mark.parametrize(
    "y_true, y_prob, match",
    [
        ([[0, 1], [1, 0]], [0.2, 0.8], "y should be a 1d array"),
        (
            [0, 1],
            [[[0.2, 0.8]], [[0.5, 0.5]]],
            "y_prob must be 1-D|dim|y_true must have shape \\(2, 2\\)",
        ),
        ([0, 1], [["a", "b"], ["c", "d"]], "could not convert|y_prob"),
        ([0, 1], [[np.inf, 0.0], [0.5, 0.5]], "y_prob contains infinity"),
        (["a", "b"], [[0.5, 0.3, 0.2], [0.5, 0.3, 0.2]], "pass labels="),
    ],
)
def test_hostile_inputs_every_metric(y_true, y_prob, match):
    for metric in (
        expected_calibration_error,
        maximum_calibration_error,
        classwise_calibration_error,
        calibration_report,
        smooth_calibration_error,
        smooth_reliability_curve,
        debiased_calibration_error,
        lambda y, p: compare_calibration(y, p, p, n_bootstrap=0),
    ):
        with pytest.raises(ValueError, match=match):
            metric(y_true, y_prob)


def test_a_class_missing_from_y_true_is_never_guessed():
    # Classes [1, 2, 3]; y = [1, 2, 1, 2], every top forecast right at 0.8.
    proba = np.array(
        [[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.8, 0.1, 0.1], [0.1, 0.8, 0.1]]
    )
    y = np.array([1, 2, 1, 2])
    for metric in (
        expected_calibration_error,
        maximum_calibration_error,
        classwise_calibration_error,
        reliability_curve,
        calibration_report,
        smooth_calibration_error,
        debiased_calibration_error,
    ):
        with pytest.raises(ValueError, match="pass labels="):
            metric(y, proba)
    assert expected_calibration_error(y, proba, labels=[1, 2, 3]) == pytest.approx(0.2)
    report = calibration_report(y, proba, labels=[1, 2, 3])
    assert report["accuracy"] == 1.0 and report["ece"] == pytest.approx(0.2)


@pytest.mark.parametrize(
    "name, metric",
    [
        ("neg_expected_calibration_error", expected_calibration_error),
        ("neg_maximum_calibration_error", maximum_calibration_error),
        ("neg_classwise_calibration_error", classwise_calibration_error),
        ("neg_smooth_calibration_error", smooth_calibration_error),
        ("neg_debiased_calibration_error", debiased_calibration_error),
        ("neg_log_loss", log_loss),
        ("neg_brier_score", brier_score_loss),
    ],
)
def test_scorers_name_columns_by_classes_on_a_fold_missing_a_class(name, metric):
    from sklearn.linear_model import LogisticRegression

    rng = np.random.RandomState(0)
    X = rng.normal(size=(60, 3))
    y = np.where(X[:, 0] > 0, 2, 1)
    y[:3] = 3  # a rare class, absent from the scored part below
    model = LogisticRegression(max_iter=1000).fit(X, y)
    X_fold, y_fold = X[10:], y[10:]
    proba = model.predict_proba(X_fold)
    expected = metric(y_fold, proba, labels=model.classes_)
    assert get_scorer(name)(model, X_fold, y_fold) == pytest.approx(-expected)


def test_report_brier_is_scikit_learns_brier_score_loss():
    rng = np.random.RandomState(0)
    for k in (2, 4):
        proba = rng.dirichlet(np.ones(k), size=200)
        y = rng.randint(0, k, 200)
        report = calibration_report(y, proba, labels=np.arange(k))
        expected = brier_score_loss(y, proba, labels=np.arange(k))
        assert report["brier_score"] == pytest.approx(expected, rel=1e-12)


# --------------------------------------------------------------------------
# What one temperature cannot fix: groups.


def _two_groups(n=1000):
    """The literature's example: one logit gap ln 9 for every row; group a is
    right 60% of the time, group b 90%."""
    logits = np.tile([0.0, np.log(9.0)], (2 * n, 1))
    y = np.concatenate(
        [
            np.repeat([1, 0], [6 * n // 10, 4 * n // 10]),
            np.repeat([1, 0], [9 * n // 10, n // 10]),
        ]
    )
    groups = np.repeat(["a", "b"], n)
    return logits, y, groups


def test_one_temperature_is_calibrated_overall_and_wrong_in_each_group():
    logits, y, groups = _two_groups()
    scaler = TemperatureScaler(temperatures=[1.0, 1.5, 2.0, 3.0, 4.0]).fit(logits, y)
    assert scaler.temperature_ == 2.0  # sigmoid(ln 9 / 2) = 0.75 = the mixture
    proba = scaler.predict_proba(logits)
    np.testing.assert_allclose(proba[:, 1], 0.75, rtol=0, atol=1e-15)
    report = calibration_report(y, proba, groups=groups)
    assert report["ece"] == pytest.approx(0.0, abs=1e-12)
    assert set(report.groups) == {"a", "b"}
    for g, rate in (("a", 0.6), ("b", 0.9)):
        part = report.groups[g]
        assert part.n_samples == 1000
        assert part["ece"] == pytest.approx(0.15, abs=1e-12)  # |0.75 - rate|
        assert part["accuracy"] == pytest.approx(rate)
        expected = -(rate * np.log(0.75) + (1 - rate) * np.log(0.25))
        assert part["log_loss"] == pytest.approx(expected, rel=1e-12)
    # The text form shows the groups beside the whole; the JSON form holds them.
    text = str(report)
    assert "all (n=2000)" in text and "a (n=1000)" in text and "b (n=1000)" in text
    assert json.loads(json.dumps(report.to_dict()))["groups"]["b"]["values"][
        "ece"
    ] == pytest.approx(0.15)


def test_group_reports_equal_reports_of_each_group_alone():
    rng = np.random.RandomState(0)
    proba = rng.dirichlet(np.ones(3), size=300)
    y = rng.randint(0, 3, 300)
    groups = rng.randint(0, 4, 300)
    report = calibration_report(y, proba, groups=groups, labels=[0, 1, 2])
    assert sorted(report.groups) == [0, 1, 2, 3]
    for g, part in report.groups.items():
        alone = calibration_report(y[groups == g], proba[groups == g], labels=[0, 1, 2])
        assert part.values == pytest.approx(alone.values)
    assert report.values == calibration_report(y, proba).values
    with pytest.raises(ValueError, match="one label per sample \\(300\\); got 299"):
        calibration_report(y, proba, groups=groups[:-1])


def test_temperature_by_group_finds_what_each_group_wants():
    logits, y, groups = _two_groups()
    grid = default_temperatures()
    result = temperature_by_group(y, logits, groups)
    assert result.groups.tolist() == ["a", "b"]
    assert result.n_samples.tolist() == [1000, 1000]
    # Brute force per group: every candidate, smallest among the minimisers.
    for k, g in enumerate(["a", "b"]):
        losses = nll_many(logits[groups == g], y[groups == g], grid)
        assert result.temperature[k] == grid[np.flatnonzero(losses == losses.min())[0]]
        assert result.loss[k] == pytest.approx(losses.min(), rel=1e-12)
    # By hand: sigmoid(ln 9 / T) = rate, T = ln 9 / ln(rate / (1 - rate)).
    assert result.temperature[0] == pytest.approx(np.log(9) / np.log(1.5), rel=0.01)
    assert result.temperature[1] == pytest.approx(1.0, rel=0.01)
    assert result.overall_temperature == pytest.approx(2.0, rel=0.01)
    # What the one temperature costs each group, by hand at T = 2 (p = 0.75).
    t = result.overall_temperature
    p = 1 / (1 + np.exp(-np.log(9) / t))
    for k, rate in enumerate([0.6, 0.9]):
        expected = -(rate * np.log(p) + (1 - rate) * np.log(1 - p))
        assert result.loss_at_overall[k] == pytest.approx(expected, rel=1e-12)
        assert result.loss[k] < result.loss_at_overall[k]
    assert np.isnan(result.interval).all()
    assert not result.at_boundary.any()


def test_temperature_by_group_bootstrap_and_predicted_groups():
    rng = np.random.RandomState(1)
    logits = rng.normal(scale=3, size=(600, 4))
    y = np.where(rng.rand(600) < 0.6, logits.argmax(1), rng.randint(0, 4, 600))
    result = temperature_by_group(
        y, logits, "predicted", n_bootstrap=30, random_state=0
    )
    explicit = temperature_by_group(y, logits, logits.argmax(1))
    assert result.groups.tolist() == explicit.groups.tolist() == [0, 1, 2, 3]
    np.testing.assert_array_equal(result.temperature, explicit.temperature)
    lo, hi = result.interval[:, 0], result.interval[:, 1]
    assert np.all(lo <= hi) and np.all(lo < hi)  # resampling moves T
    assert np.all((lo <= result.temperature * 1.2) & (result.temperature <= hi * 1.2))
    again = temperature_by_group(y, logits, "predicted", n_bootstrap=30, random_state=0)
    np.testing.assert_array_equal(again.interval, result.interval)
    with pytest.raises(ValueError, match="groups"):
        temperature_by_group(y, logits, "true")


@pytest.mark.parametrize(
    ("groups", "match"),
    [
        (np.array([np.nan] + [1.0] * 19), "groups must be finite labels; got nan at"),
        (np.array(["a", None] * 10, dtype=object), "missing labels; got None at"),
        (np.array(["a", 1] * 10, dtype=object), "labels of one kind"),
    ],
)
def test_group_labels_that_are_no_labels_are_one_line_errors(groups, match):
    # (issue 25) NaN gave numpy warnings and a reduction error; None a
    # TypeError from sorting.
    rng = np.random.default_rng(0)
    z = rng.normal(size=(20, 3))
    y = np.arange(20) % 3
    proba = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    with pytest.raises(ValueError, match=match):
        temperature_by_group(y, z, groups)
    with pytest.raises(ValueError, match=match):
        calibration_report(y, proba, groups=groups)


@pytest.mark.parametrize(
    "metric",
    [
        expected_calibration_error,
        maximum_calibration_error,
        classwise_calibration_error,
        reliability_curve,
        calibration_report,
    ],
)
def test_duplicated_labels_are_refused(metric):
    # (issue 25) labels=[1, 1, 2] gave meaningless numbers: scikit-learn's
    # rule, unique labels, one per column.
    proba = np.array([[0.2, 0.3, 0.5], [0.6, 0.2, 0.2], [0.1, 0.8, 0.1]])
    with pytest.raises(ValueError, match="labels must be unique.*got 1 2 times"):
        metric([1, 2, 1], proba, labels=[1, 1, 2])
    metric([1, 2, 1], proba, labels=[1, 2, 3])  # (unique: accepted)
