"""Temperatures per group (TemperatureScaler(...).fit(..., groups=...)):
the exact rule on each group's rows, shrinkage, labels kept, unseen groups,
every backend the same."""

import math
import warnings

import numpy as np
import pytest

from skts import BoundaryTemperatureWarning, TemperatureScaler
from skts._grouped import shrink

GRID = np.geomspace(0.05, 20, 121)


def _brute_force(z, y, temperatures, w=None):
    """The exact rule by evaluating every candidate in float64 (the losses
    here are far apart, so float64 decides them)."""
    z = np.asarray(z, dtype=np.float64)
    w = np.ones(len(y)) if w is None else np.asarray(w, dtype=np.float64)
    best, best_t = math.inf, None
    for t in np.unique(temperatures):
        u = z / t
        m = u.max(axis=1, keepdims=True)
        lse = m[:, 0] + np.log(np.exp(u - m).sum(axis=1))
        loss = float(np.sum(w * (lse - u[np.arange(len(y)), y])) / w.sum())
        if loss < best:
            best, best_t = loss, t
    return best_t


def _class_dependent(n, truth, seed=0, scale=3.0):
    """Logits whose rows predicted as class k are calibrated at T = truth[k]."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, len(truth))) * scale
    t = np.asarray(truth)[z.argmax(axis=1)]
    p = np.exp(z / t[:, None])
    p /= p.sum(axis=1, keepdims=True)
    y = (p.cumsum(axis=1) < rng.random((n, 1))).sum(axis=1)
    return z, np.minimum(y, len(truth) - 1)


@pytest.mark.parametrize("seed", range(4))
def test_each_group_follows_the_exact_rule_on_its_rows(seed):
    rng = np.random.default_rng(seed)
    n, k = 400, 3
    z = rng.normal(size=(n, k)) * rng.uniform(0.5, 4)
    y = rng.integers(0, k, n)
    groups = rng.choice(["x", "y", "z", "w"], n)
    w = rng.uniform(0, 2, n) if seed % 2 else None
    scaler = TemperatureScaler(GRID, group_shrinkage=0, min_group_size=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BoundaryTemperatureWarning)
        scaler.fit(z, y, sample_weight=w, groups=groups)
    for g, t in scaler.temperatures_by_group_.items():
        rows = groups == g
        expected = _brute_force(z[rows], y[rows], GRID, None if w is None else w[rows])
        assert t == expected, g
    assert scaler.temperature_ == _brute_force(z, y, GRID, w)
    assert set(scaler.temperatures_by_group_) == {"w", "x", "y", "z"}


def test_class_dependent_confidence_is_recovered_and_no_label_changes():
    z, y = _class_dependent(20000, [0.4, 3.0, 1.0])
    scaler = TemperatureScaler().fit(z, y, groups="predicted")
    found = scaler.temperatures_by_group_
    assert found[0] == pytest.approx(0.4, rel=0.1)
    assert found[1] == pytest.approx(3.0, rel=0.1)
    assert found[2] == pytest.approx(1.0, rel=0.1)
    # One T is a compromise far from both.
    assert 0.6 < scaler.temperature_ < 2.5
    proba = scaler.predict_proba(z)  # fitted with "predicted": used by default
    assert np.array_equal(proba.argmax(axis=1), z.argmax(axis=1))
    assert np.array_equal(scaler.predict(z), z.argmax(axis=1))
    # Each row is divided by its group's temperature.
    t = np.array([found[c] for c in z.argmax(axis=1)])
    u = z / t[:, None]
    u -= u.max(axis=1, keepdims=True)
    expected = np.exp(u) / np.exp(u).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(proba, expected, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(scaler.transform(z), z / t[:, None], rtol=1e-15)


def test_group_temperatures_beat_one_temperature_out_of_sample():
    z, y = _class_dependent(12000, [0.4, 3.0, 1.0], seed=3)
    fit, test = slice(0, 6000), slice(6000, None)
    one = TemperatureScaler().fit(z[fit], y[fit])
    by_class = TemperatureScaler().fit(z[fit], y[fit], groups="predicted")

    def nll(p):
        return -np.mean(np.log(p[np.arange(len(p)), y[test]]))

    assert nll(by_class.predict_proba(z[test])) < nll(one.predict_proba(z[test])) - 0.01


def test_shrinkage_pulls_toward_the_pooled_temperature():
    own = np.array([0.5, 2.0, np.nan, 1.0])
    size = np.array([100.0, 10.0, 5.0, 0.0])
    pooled = 1.0
    # By hand: share n / (n + s), in log T.
    out = shrink(own, size, pooled, 100.0)
    assert out[0] == pytest.approx(math.exp(0.5 * math.log(0.5)))
    assert out[1] == pytest.approx(math.exp(10 / 110 * math.log(2.0)))
    assert out[2] == pooled and out[3] == pooled  # no fit, no rows
    assert np.array_equal(shrink(own, size, pooled, 0.0)[:2], own[:2])
    assert np.all(shrink(own, size, pooled, math.inf) == pooled)
    # With candidates: the nearest in log T, ties to the smaller.
    grid = np.array([0.5, 0.7, 1.0, 2.0])
    snapped = shrink(own, size, pooled, 100.0, grid)
    assert snapped[0] == 0.7  # exp(0.5 log 0.5) = 0.707: nearer 0.7 than 1.0
    assert shrink(np.array([math.sqrt(0.5)]), [1.0], 1.0, 0.0, [0.5, 1.0])[0] == (
        math.sqrt(0.5)
    )  # share 1: the own T itself
    tie = shrink(np.array([0.5]), np.array([1.0]), 2.0, 1.0, [0.5, 1.0, 2.0])
    assert tie[0] == 1.0  # exp(mean(log 0.5, log 2)) = 1: a candidate


def test_small_groups_take_the_pooled_temperature_and_cv_shrinks_noise():
    rng = np.random.default_rng(1)
    n, k = 4000, 4
    z = rng.normal(size=(n, k)) * 3
    p = np.exp(z / 1.7)
    p /= p.sum(axis=1, keepdims=True)
    y = (p.cumsum(axis=1) < rng.random((n, 1))).sum(axis=1).clip(0, k - 1)
    groups = rng.integers(0, 6, n)
    groups[:5] = 99  # a group of five rows
    scaler = TemperatureScaler().fit(z, y, groups=groups)
    assert scaler.temperatures_by_group_[99] == scaler.temperature_
    # Groups that carry no information: the cross-validated strength is
    # large (every group within a few percent of the pooled T).
    assert scaler.group_shrinkage_ >= 100
    spread = np.array(list(scaler.temperatures_by_group_.values()))
    assert np.all(np.abs(np.log(spread / scaler.temperature_)) < 0.15)
    # With the class-dependent model the data wants each group's own T.
    z2, y2 = _class_dependent(6000, [0.4, 3.0, 1.0])
    strong = TemperatureScaler().fit(z2, y2, groups="predicted")
    assert strong.group_shrinkage_ <= 30


def test_unseen_groups_get_the_pooled_temperature_with_a_warning():
    z, y = _class_dependent(3000, [0.5, 2.0])
    groups = np.where(np.arange(3000) % 2, "a", "b")
    scaler = TemperatureScaler().fit(z, y, groups=groups)
    with pytest.warns(UserWarning, match="not seen in fit .first 'c' at position 1"):
        p = scaler.predict_proba(z[:3], groups=["a", "c", "b"])
    pooled = TemperatureScaler().fit(z, y).predict_proba(z[1:2])
    np.testing.assert_array_equal(p[1:2], pooled)
    # Without groups: the pooled temperature for every row.
    np.testing.assert_array_equal(
        scaler.predict_proba(z[:10]),
        TemperatureScaler().fit(z, y).predict_proba(z[:10]),
    )


def test_bad_groups_are_one_line_errors():
    z, y = _class_dependent(200, [0.5, 2.0])
    with pytest.raises(
        ValueError, match=r"groups must have one label per sample \(200\)"
    ):
        TemperatureScaler().fit(z, y, groups=np.zeros(10))
    with pytest.raises(
        ValueError, match="groups must be an array of labels or 'predicted'"
    ):
        TemperatureScaler().fit(z, y, groups="class")
    with pytest.raises(ValueError, match="groups need 2-D logits"):
        TemperatureScaler().fit(
            np.zeros((2, 3, 4)), np.zeros((2, 4), dtype=int), groups=np.zeros(8)
        )
    plain = TemperatureScaler().fit(z, y)
    with pytest.raises(ValueError, match="fitted without groups"):
        plain.predict_proba(z, groups=np.zeros(200))
    with pytest.raises(ValueError, match="group_shrinkage"):
        TemperatureScaler(group_shrinkage=-1).fit(z, y, groups=np.zeros(200))


def test_a_refit_without_groups_forgets_them():
    z, y = _class_dependent(500, [0.5, 2.0])
    scaler = TemperatureScaler().fit(z, y, groups="predicted")
    scaler.fit(z, y)
    assert scaler.temperatures_by_group_ is None and scaler.group_shrinkage_ is None
    with pytest.raises(ValueError, match="fitted without groups"):
        scaler.predict_proba(z, groups="predicted")


def _fit_on(backend, z, y, groups, w=None):
    if backend == "numpy":
        return TemperatureScaler().fit(z, y, sample_weight=w, groups=groups)
    if backend == "dask":
        da = pytest.importorskip("dask.array")
        import dask

        with dask.config.set(scheduler="synchronous"):
            return TemperatureScaler().fit(
                da.from_array(z, chunks=(333, -1)), y, sample_weight=w, groups=groups
            )
    xp = pytest.importorskip("array_api_strict", reason="array_api_strict is optional")
    import sklearn

    try:
        with sklearn.config_context(array_api_dispatch=True):
            pass
    except (ImportError, RuntimeError) as exc:
        pytest.skip(f"array_api_dispatch unavailable: {str(exc).splitlines()[0]}")
    with sklearn.config_context(array_api_dispatch=True):
        return TemperatureScaler().fit(
            xp.asarray(z), xp.asarray(y), sample_weight=w, groups=groups
        )


@pytest.mark.parametrize("backend", ["dask", "array_api_strict"])
def test_every_backend_gives_the_same_group_temperatures(backend):
    z, y = _class_dependent(2500, [0.4, 3.0, 1.0], seed=5)
    rng = np.random.default_rng(0)
    groups = rng.choice([3, 7, 11], 2500)
    w = rng.uniform(0.5, 2.0, 2500)
    for g, weights in [(groups, None), ("predicted", w)]:
        here = _fit_on("numpy", z, y, g, weights)
        there = _fit_on(backend, z, y, g, weights)
        assert there.temperatures_by_group_ == here.temperatures_by_group_
        assert there.temperature_ == here.temperature_
        assert there.group_shrinkage_ == here.group_shrinkage_


# -- TemperatureScaledClassifier(...).fit(X, y, groups=...) -----------------


def _sites(n=3000, seed=0):
    """A model's data from two sites; its labels are noisier at site 1."""
    from sklearn.datasets import make_classification

    X, y = make_classification(
        n, n_features=8, n_informative=5, n_classes=3, random_state=seed
    )
    site = np.random.default_rng(seed).integers(0, 2, n)
    flip = (site == 1) & (np.random.default_rng(seed + 1).random(n) < 0.3)
    y = np.where(flip, (y + 1) % 3, y)
    return X, y, site


def test_classifier_groups_are_the_scalers_on_the_held_out_logits():
    from sklearn.frozen import FrozenEstimator
    from sklearn.linear_model import LogisticRegression

    from skts import TemperatureScaledClassifier

    X, y, site = _sites()
    model = LogisticRegression(max_iter=1000).fit(X[:1000], y[:1000])
    held, y_held, g = X[1000:], y[1000:], site[1000:]
    clf = TemperatureScaledClassifier(FrozenEstimator(model)).fit(
        held, y_held, groups=g
    )
    scaler = TemperatureScaler().fit(model.decision_function(held), y_held, groups=g)
    assert clf.temperatures_by_group_ == scaler.temperatures_by_group_
    assert clf.temperatures_by_group_[1] > 1.5 * clf.temperatures_by_group_[0]
    np.testing.assert_allclose(
        clf.predict_proba(held, groups=g),
        scaler.predict_proba(model.decision_function(held), groups=g),
        rtol=1e-6,
    )
    assert np.array_equal(clf.predict(held, groups=g), model.predict(held))
    with pytest.raises(ValueError, match="fitted without groups"):
        TemperatureScaledClassifier(FrozenEstimator(model)).fit(
            held, y_held
        ).predict_proba(held, groups=g)


def test_classifier_groups_with_folds_and_routing_to_a_group_splitter():
    import sklearn
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GroupKFold

    from skts import TemperatureScaledClassifier

    X, y, site = _sites(seed=2)
    by_site = TemperatureScaledClassifier(LogisticRegression(max_iter=1000), cv=3)
    by_site.fit(X, y, groups=site)
    assert set(by_site.temperatures_by_group_) == {0, 1}
    p = by_site.predict_proba(X[:5], groups=site[:5])
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    # With routing, the same groups also reach a splitter that asks for them:
    # no fold then holds a site in both its training and test rows.
    seen = []

    class Recording(GroupKFold):
        def split(self, X, y=None, groups=None):
            seen.append(groups)
            return super().split(X, y, groups)

    with sklearn.config_context(enable_metadata_routing=True):
        inner = LogisticRegression(max_iter=1000).set_fit_request(sample_weight=False)
        clf = TemperatureScaledClassifier(inner, cv=Recording(2), ensemble=False)
        clf.fit(X, y, groups=site)
    assert seen and np.array_equal(seen[0], site)
    assert set(clf.temperatures_by_group_) == {0, 1}


def test_the_meta_estimators_vector_and_matrix_options():
    from sklearn.frozen import FrozenEstimator
    from sklearn.naive_bayes import GaussianNB

    from skts import MatrixScaler, TemperatureScaledClassifier, VectorScaler

    X, y, _ = _sites(seed=4)
    model = GaussianNB().fit(X[:1500], y[:1500])
    held, y_held = X[1500:], y[1500:]
    for method, cls in [("vector", VectorScaler), ("matrix", MatrixScaler)]:
        clf = TemperatureScaledClassifier(FrozenEstimator(model), method=method)
        clf.fit(held, y_held)
        alone = cls().fit(model.predict_log_proba(held), y_held)
        assert isinstance(clf.calibrator_, cls)
        np.testing.assert_allclose(clf.calibrator_.coef_, alone.coef_, rtol=1e-6)
        proba = clf.predict_proba(held)
        np.testing.assert_array_equal(
            clf.predict(held), clf.classes_[proba.argmax(axis=1)]
        )
    with pytest.raises(ValueError, match="method='vector' has no groups"):
        TemperatureScaledClassifier(FrozenEstimator(model), method="vector").fit(
            held, y_held, groups="predicted"
        )
