"""TemperatureScaledClassifier: frozen and cross-fitted fits, responses, sklearn."""

import pickle
import warnings

import joblib
import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.datasets import load_digits, make_classification
from sklearn.exceptions import NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.model_selection import (
    GridSearchCV,
    KFold,
    StratifiedKFold,
    cross_val_predict,
    cross_val_score,
    cross_validate,
    train_test_split,
)
from sklearn.naive_bayes import GaussianNB
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVC
from sklearn.tree import DecisionTreeClassifier

from skts import (
    BoundaryTemperatureWarning,
    TemperatureScaledClassifier,
    TemperatureScaler,
)
from skts._numerics import default_temperatures, nll_many, softmax


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    X_train, X_val, y_train, y_val = train_test_split(
        X / 16.0, y, test_size=0.4, random_state=0, stratify=y
    )
    model = LogisticRegression(C=100.0, max_iter=3000).fit(X_train, y_train)
    return model, X_train, X_val, y_train, y_val


def brute_force_choice(logits, y, grid=None, sample_weight=None):
    grid = default_temperatures() if grid is None else np.asarray(grid, float)
    losses = nll_many(logits, y, grid, sample_weight)
    return grid[losses == losses.min()].min()


def test_frozen_uses_all_data_as_held_out_and_does_not_refit(digits):
    model, _, X_val, _, y_val = digits
    coef = model.coef_.copy()
    clf = TemperatureScaledClassifier(FrozenEstimator(model)).fit(X_val, y_val)
    np.testing.assert_array_equal(model.coef_, coef)
    assert clf.estimator_.estimator is model
    assert clf.response_method_ == "decision_function"
    expected = brute_force_choice(model.decision_function(X_val), y_val)
    assert clf.temperature_ == expected
    assert clf.temperature_ > 1  # C=100 makes it overconfident
    np.testing.assert_array_equal(clf.predict(X_val), model.predict(X_val))
    np.testing.assert_array_equal(clf.classes_, model.classes_)
    assert clf.n_features_in_ == model.n_features_in_


def test_calibration_improves_held_out_log_loss(digits):
    from sklearn.metrics import log_loss

    model, _, X_val, _, y_val = digits
    X_fit, X_test, y_fit, y_test = train_test_split(
        X_val, y_val, test_size=0.5, random_state=1, stratify=y_val
    )
    clf = TemperatureScaledClassifier(FrozenEstimator(model)).fit(X_fit, y_fit)
    before = log_loss(y_test, model.predict_proba(X_test))
    after = log_loss(y_test, clf.predict_proba(X_test))
    assert after < before


def test_cross_fitted_path_uses_out_of_fold_logits(digits):
    _, X_train, _, y_train, _ = digits
    est = LogisticRegression(C=100.0, max_iter=3000)
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    clf = TemperatureScaledClassifier(est, cv=cv).fit(X_train, y_train)
    oof = cross_val_predict(est, X_train, y_train, cv=cv, method="decision_function")
    assert clf.temperature_ == brute_force_choice(oof, y_train)
    refit = clone(est).fit(X_train, y_train)
    np.testing.assert_allclose(clf.estimator_.coef_, refit.coef_)
    assert clf.estimator_ is not est


def test_default_estimator_and_cv():
    X, y = make_classification(n_samples=200, random_state=0)
    clf = TemperatureScaledClassifier().fit(X, y)
    assert isinstance(clf.estimator_, LogisticRegression)
    oof = cross_val_predict(
        LogisticRegression(), X, y, cv=StratifiedKFold(5), method="decision_function"
    )
    logits = np.column_stack([np.zeros_like(oof), oof])
    assert clf.temperature_ == brute_force_choice(logits, y)


def test_binary_temperature_one_reproduces_the_model():
    X, y = make_classification(n_samples=200, random_state=0)
    model = LogisticRegression().fit(X, y)
    clf = TemperatureScaledClassifier(FrozenEstimator(model), temperatures=[1.0])
    clf.fit(X, y)
    np.testing.assert_allclose(
        clf.predict_proba(X), model.predict_proba(X), rtol=1e-11, atol=1e-15
    )
    np.testing.assert_allclose(clf.decision_function(X), model.decision_function(X))
    np.testing.assert_array_equal(clf.predict(X), model.predict(X))


def test_binary_decision_function_is_one_dimensional_and_scaled():
    X, y = make_classification(n_samples=200, random_state=1)
    model = LogisticRegression(C=1e4).fit(X[:100], y[:100])
    clf = TemperatureScaledClassifier(FrozenEstimator(model)).fit(X[100:], y[100:])
    d = clf.decision_function(X)
    assert d.shape == (200,)
    np.testing.assert_allclose(d, model.decision_function(X) / clf.temperature_)
    np.testing.assert_allclose(clf.predict_proba(X)[:, 1], 1 / (1 + np.exp(-d)))


@pytest.mark.parametrize(
    "estimator, method",
    [
        (LogisticRegression(max_iter=2000), "decision_function"),
        (GaussianNB(), "predict_log_proba"),
        (DecisionTreeClassifier(max_depth=3, random_state=0), "predict_log_proba"),
    ],
)
@pytest.mark.filterwarnings("ignore::skts.BoundaryTemperatureWarning")
def test_auto_response_method(digits, estimator, method):
    _, X_train, X_val, y_train, y_val = digits
    model = clone(estimator).fit(X_train, y_train)
    clf = TemperatureScaledClassifier(FrozenEstimator(model)).fit(X_val, y_val)
    assert clf.response_method_ == method
    proba = clf.predict_proba(X_val)
    assert np.all(np.isfinite(proba))
    np.testing.assert_allclose(proba.sum(1), 1.0)


class ProbaOnly(ClassifierMixin, BaseEstimator):
    """A classifier with predict_proba only (no decision_function, no log)."""

    def fit(self, X, y):
        self.model_ = GaussianNB().fit(X, y)
        self.classes_ = self.model_.classes_
        return self

    def predict_proba(self, X):
        return self.model_.predict_proba(X)

    def predict(self, X):
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]


def test_predict_proba_only_model_gets_finite_log_probabilities(digits):
    _, X_train, X_val, y_train, y_val = digits
    model = ProbaOnly().fit(X_train, y_train)
    clf = TemperatureScaledClassifier(FrozenEstimator(model)).fit(X_val, y_val)
    assert clf.response_method_ == "predict_proba"
    logits = np.log(np.maximum(model.predict_proba(X_val), np.finfo(float).tiny))
    assert clf.temperature_ == brute_force_choice(logits, y_val)


def test_named_response_method(digits):
    _, X_train, X_val, y_train, y_val = digits
    model = LogisticRegression(max_iter=2000).fit(X_train, y_train)
    clf = TemperatureScaledClassifier(
        FrozenEstimator(model), response_method="predict_log_proba"
    ).fit(X_val, y_val)
    assert clf.response_method_ == "predict_log_proba"
    assert clf.temperature_ == brute_force_choice(model.predict_log_proba(X_val), y_val)


def test_string_labels_and_held_out_set_missing_a_class():
    X, y = make_classification(
        n_samples=300, n_classes=3, n_informative=4, random_state=0
    )
    names = np.array(["cat", "dog", "emu"])[y]
    model = LogisticRegression().fit(X[:150], names[:150])
    keep = names[150:] != "emu"
    clf = TemperatureScaledClassifier(FrozenEstimator(model))
    clf.fit(X[150:][keep], names[150:][keep])
    np.testing.assert_array_equal(clf.classes_, ["cat", "dog", "emu"])
    assert set(clf.predict(X)) <= {"cat", "dog", "emu"}
    idx = np.searchsorted(clf.classes_, names[150:][keep])
    logits = model.decision_function(X[150:][keep])
    assert clf.temperature_ == brute_force_choice(logits, idx)


def test_labels_the_model_never_saw():
    X, y = make_classification(n_samples=100, random_state=0)
    model = LogisticRegression().fit(X, y)
    with pytest.raises(ValueError, match=r"labels the estimator never saw: \[7\]"):
        TemperatureScaledClassifier(FrozenEstimator(model)).fit(X, np.where(y, 7, 0))


class BadLogits(ClassifierMixin, BaseEstimator):
    def fit(self, X, y):
        self.classes_ = np.unique(y)
        return self

    def decision_function(self, X):
        out = np.zeros((len(X), len(self.classes_)))
        out[0, 0] = np.nan
        return out


class NoResponse(ClassifierMixin, BaseEstimator):
    def fit(self, X, y):
        self.classes_ = np.unique(y)
        return self

    def predict(self, X):
        return np.full(len(X), self.classes_[0])


def test_non_finite_logits_from_the_model():
    X, y = make_classification(n_samples=30, random_state=0)
    model = BadLogits().fit(X, y)
    with pytest.raises(ValueError, match=r"BadLogits.decision_function.*non-finite"):
        TemperatureScaledClassifier(FrozenEstimator(model)).fit(X, y)


def test_model_without_a_response_method():
    X, y = make_classification(n_samples=30, random_state=0)
    with pytest.raises(ValueError, match="NoResponse has no decision_function"):
        TemperatureScaledClassifier(NoResponse()).fit(X, y)
    with pytest.raises(ValueError, match="response_method='scores' is not a method"):
        TemperatureScaledClassifier(LogisticRegression(), response_method="scores").fit(
            X, y
        )


def test_sample_weight_reaches_the_objective_and_the_inner_fit(digits):
    model, _, X_val, _, y_val = digits
    rng = np.random.RandomState(0)
    w = rng.randint(0, 4, size=len(y_val))
    weighted = TemperatureScaledClassifier(FrozenEstimator(model))
    weighted.fit(X_val, y_val, sample_weight=w)
    repeated = TemperatureScaledClassifier(FrozenEstimator(model))
    repeated.fit(np.repeat(X_val, w, 0), np.repeat(y_val, w))
    assert weighted.temperature_ == repeated.temperature_
    # Cross-fitted: the inner fit sees the weights (zero weight = row removed).
    X, y = make_classification(n_samples=120, random_state=0)
    w = np.ones(120)
    w[:20] = 0
    clf = TemperatureScaledClassifier(LogisticRegression(), cv=3)
    clf.fit(X, y, sample_weight=w)
    ref = LogisticRegression().fit(X[20:], y[20:])
    np.testing.assert_allclose(clf.estimator_.coef_, ref.coef_, rtol=1e-4)


def test_sample_weight_with_an_estimator_that_cannot_take_it():
    # As CalibratedClassifierCV: warn, and weight the calibration only.
    X, y = make_classification(n_samples=90, random_state=0)
    w = np.where(np.arange(90) < 45, 5.0, 1.0)
    with pytest.warns(UserWarning, match="ProbaOnly.fit does not accept"):
        weighted = TemperatureScaledClassifier(ProbaOnly(), cv=3).fit(
            X, y, sample_weight=w
        )
    plain = TemperatureScaledClassifier(ProbaOnly(), cv=3).fit(X, y)
    oof = cross_val_predict(
        ProbaOnly(), X, y, cv=StratifiedKFold(3), method="predict_proba"
    )
    logits = np.log(np.maximum(oof, np.finfo(float).tiny))
    assert weighted.temperature_ == brute_force_choice(logits, y, sample_weight=w)
    assert weighted.temperature_ != plain.temperature_


class RecordsWeights(ClassifierMixin, BaseEstimator):
    """Logistic regression that records the sample_weight its fit received."""

    def fit(self, X, y, sample_weight=None):
        self.received_ = sample_weight
        self.model_ = LogisticRegression().fit(X, y, sample_weight=sample_weight)
        self.classes_ = self.model_.classes_
        return self

    def decision_function(self, X):
        return self.model_.decision_function(X)

    def predict(self, X):
        return self.model_.predict(X)


@pytest.mark.parametrize("request_weights", [True, False])
def test_metadata_routing_in_a_pipeline(request_weights):
    import sklearn

    X, y = make_classification(n_samples=120, random_state=1)
    w = np.linspace(0.5, 2.0, 120)
    with sklearn.config_context(enable_metadata_routing=True):
        inner = RecordsWeights().set_fit_request(sample_weight=request_weights)
        clf = TemperatureScaledClassifier(inner, cv=3).set_fit_request(
            sample_weight=True
        )
        pipe = make_pipeline(StandardScaler().set_fit_request(sample_weight=False), clf)
        pipe.fit(X, y, sample_weight=w)
        fitted = pipe[-1]
        # The inner estimator gets the weights only when it asks for them...
        if request_weights:
            np.testing.assert_array_equal(fitted.estimator_.received_, w)
        else:
            assert fitted.estimator_.received_ is None
        # ... and the temperature always uses them.
        Xs = pipe[0].transform(X)
        oof = cross_val_predict(
            clone(inner),
            Xs,
            y,
            cv=StratifiedKFold(3),
            method="decision_function",
            params={"sample_weight": w} if request_weights else {},
        )
        logits = np.column_stack([np.zeros_like(oof), oof])
        assert fitted.temperature_ == brute_force_choice(logits, y, sample_weight=w)
        # Unrequested metadata is an error, as everywhere in scikit-learn.
        unset = TemperatureScaledClassifier(RecordsWeights(), cv=3)
        with pytest.raises(ValueError, match="sample_weight"):
            unset.set_fit_request(sample_weight=True).fit(X, y, sample_weight=w)


def test_metadata_routing_sends_groups_to_the_splitter():
    import sklearn
    from sklearn.model_selection import GroupKFold

    X, y = make_classification(n_samples=90, random_state=2)
    groups = np.repeat(np.arange(9), 10)
    with sklearn.config_context(enable_metadata_routing=True):
        clf = TemperatureScaledClassifier(LogisticRegression(), cv=GroupKFold(3))
        clf.fit(X, y, groups=groups)
    expected = cross_val_predict(
        LogisticRegression(),
        X,
        y,
        cv=GroupKFold(3),
        groups=groups,
        method="decision_function",
    )
    logits = np.column_stack([np.zeros_like(expected), expected])
    assert clf.temperature_ == brute_force_choice(logits, y)


def test_unfitted_frozen_estimator_raises_not_fitted():
    X, y = make_classification(n_samples=30, random_state=0)
    with pytest.raises(NotFittedError):
        TemperatureScaledClassifier(FrozenEstimator(LogisticRegression())).fit(X, y)


@pytest.mark.parametrize("method", ["predict", "apply"])
def test_methods_that_return_labels_are_rejected(method):
    X, y = make_classification(n_samples=40, random_state=0)
    estimator = DecisionTreeClassifier(random_state=0)
    match = "does not return scores|not float scores|cannot be cross-fitted"
    with pytest.raises(ValueError, match=match):
        TemperatureScaledClassifier(estimator, response_method=method, cv=2).fit(X, y)
    frozen = FrozenEstimator(estimator.fit(X, y))
    with pytest.raises(ValueError, match=match):
        TemperatureScaledClassifier(frozen, response_method=method).fit(X, y)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"temperatures": [0.0]}, "temperatures must be finite and > 0"),
        ({"solver": "bfgs"}, "solver"),
        ({"cv": "five"}, "cv"),
    ],
)
def test_bad_parameters(params, match):
    X, y = make_classification(n_samples=60, random_state=0)
    with pytest.raises(ValueError, match=match):
        TemperatureScaledClassifier(**params).fit(X, y)


def test_empty_and_mismatched_input():
    X, y = make_classification(n_samples=60, random_state=0)
    with pytest.raises(ValueError, match="X is empty"):
        TemperatureScaledClassifier().fit(X[:0], y[:0])
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        TemperatureScaledClassifier().fit(X, y[:-1])
    with pytest.raises(ValueError, match="sample_weight must be non-negative"):
        TemperatureScaledClassifier().fit(X, y, sample_weight=-np.ones(60))


def test_not_fitted():
    with pytest.raises(NotFittedError):
        TemperatureScaledClassifier().predict(np.zeros((1, 2)))


def test_pipeline_gridsearch_and_cross_val_score(digits):
    _, X_train, _, y_train, _ = digits
    pipe = make_pipeline(
        StandardScaler(),
        TemperatureScaledClassifier(LogisticRegression(max_iter=500), cv=3),
    )
    search = GridSearchCV(
        pipe,
        {"temperaturescaledclassifier__estimator__C": [0.1, 1.0]},
        scoring="neg_log_loss",
        cv=3,
    ).fit(X_train, y_train)
    assert search.best_params_["temperaturescaledclassifier__estimator__C"] in (
        0.1,
        1.0,
    )
    scores = cross_val_score(
        TemperatureScaledClassifier(LinearSVC(), cv=3), X_train, y_train, cv=3
    )
    assert scores.mean() > 0.9


def test_persistence(digits, tmp_path):
    model, _, X_val, _, y_val = digits
    clf = TemperatureScaledClassifier(FrozenEstimator(model)).fit(X_val, y_val)
    joblib.dump(clf, tmp_path / "clf.joblib")
    for other in (
        joblib.load(tmp_path / "clf.joblib"),
        pickle.loads(pickle.dumps(clf)),
    ):
        assert other.temperature_ == clf.temperature_
        np.testing.assert_array_equal(
            other.predict_proba(X_val), clf.predict_proba(X_val)
        )
        np.testing.assert_array_equal(other.predict(X_val), clf.predict(X_val))


def test_same_answer_as_temperature_scaler(digits):
    model, _, X_val, _, y_val = digits
    clf = TemperatureScaledClassifier(FrozenEstimator(model)).fit(X_val, y_val)
    scaler = TemperatureScaler().fit(model.decision_function(X_val), y_val)
    assert clf.temperature_ == scaler.temperature_
    assert clf.validation_loss_ == scaler.validation_loss_


def test_continuous_solver_close_to_grid(digits):
    model, _, X_val, _, y_val = digits
    grid = TemperatureScaledClassifier(FrozenEstimator(model)).fit(X_val, y_val)
    cont = TemperatureScaledClassifier(FrozenEstimator(model), solver="continuous")
    cont.fit(X_val, y_val)
    assert cont.validation_loss_ <= grid.validation_loss_
    assert abs(np.log(cont.temperature_ / grid.temperature_)) < 0.01


# --------------------------------------------------------------------------
# Hardening: hostile inputs, no partial fits, secure persistence.


def test_failed_fit_leaves_a_fitted_classifier_unchanged(digits):
    model, _, X_val, _, y_val = digits
    clf = TemperatureScaledClassifier(FrozenEstimator(model)).fit(X_val, y_val)
    before = {k: v for k, v in vars(clf).items() if k.endswith("_")}
    for bad_X, bad_y, bad_w in [
        (X_val, np.full_like(y_val, 42), None),  # labels never seen
        (np.full_like(X_val, np.nan), y_val, None),  # NaN features
        (X_val[:, :5], y_val, None),  # wrong number of features
        (X_val, y_val, np.zeros(len(y_val))),  # all-zero weights
        (X_val, y_val, np.full(len(y_val), np.nan)),  # NaN weights
    ]:
        with pytest.raises(ValueError):
            clf.fit(bad_X, bad_y, sample_weight=bad_w)
        after = {k: v for k, v in vars(clf).items() if k.endswith("_")}
        assert after.keys() == before.keys()
        assert all(after[k] is before[k] for k in before)


def test_predict_with_wrong_number_of_features(digits):
    model, _, X_val, _, y_val = digits
    clf = TemperatureScaledClassifier(FrozenEstimator(model)).fit(X_val, y_val)
    for method in ("predict", "predict_proba", "decision_function"):
        with pytest.raises(ValueError, match="features"):
            getattr(clf, method)(X_val[:, :10])


def test_non_numeric_features(digits):
    _, X_train, _, y_train, _ = digits
    X_text = np.array([["a"] * X_train.shape[1]] * 20)
    with pytest.raises(ValueError, match=r"could not convert|numeric"):
        TemperatureScaledClassifier(LogisticRegression(), cv=2).fit(
            X_text, y_train[:20]
        )


def test_model_returning_infinite_logits_at_predict_time(digits):
    _, X_train, X_val, y_train, y_val = digits
    model = BadLogits().fit(X_train, y_train)
    clf = TemperatureScaledClassifier(FrozenEstimator(model))
    with pytest.raises(ValueError, match="non-finite"):
        clf.fit(X_val, y_val)


def test_skops_round_trip_trusts_only_skts_types(digits, tmp_path):
    sio = pytest.importorskip("skops.io")
    model, _, X_val, _, y_val = digits
    clf = TemperatureScaledClassifier(FrozenEstimator(model)).fit(X_val, y_val)
    path = tmp_path / "clf.skops"
    sio.dump(clf, path)
    untrusted = sio.get_untrusted_types(file=path)
    assert untrusted == ["skts._classifier.TemperatureScaledClassifier"]
    loaded = sio.load(path, trusted=untrusted)
    np.testing.assert_array_equal(loaded.predict_proba(X_val), clf.predict_proba(X_val))
    scaler = TemperatureScaler().fit(model.decision_function(X_val), y_val)
    data = sio.dumps(scaler)
    assert sio.get_untrusted_types(data=data) == ["skts._scaler.TemperatureScaler"]
    assert sio.loads(data, trusted=["skts._scaler.TemperatureScaler"]).temperature_ == (
        scaler.temperature_
    )


# --------------------------------------------------------------------------
# ensemble: scikit-learn's CalibratedClassifierCV semantics.


@pytest.mark.slow
def test_ensemble_keeps_scikit_learns_fold_models_and_averages_them(digits):
    _, X_train, X_val, y_train, _ = digits
    est = LogisticRegression(C=100.0, max_iter=3000)
    cv = StratifiedKFold(5)
    clf = TemperatureScaledClassifier(est, cv=cv).fit(X_train, y_train)  # "auto"
    # The fold models: those scikit-learn fits on the same folds, in order.
    folds = cross_validate(est, X_train, y_train, cv=cv, return_estimator=True)
    assert len(clf.estimators_) == 5
    for mine, theirs in zip(clf.estimators_, folds["estimator"], strict=True):
        np.testing.assert_allclose(mine.coef_, theirs.coef_)
    # One temperature, fitted on their out-of-fold logits.
    oof = cross_val_predict(est, X_train, y_train, cv=cv, method="decision_function")
    assert clf.temperature_ == TemperatureScaler().fit(oof, y_train).temperature_
    # predict_proba: the mean of softmax(z_k / T) over the fold models.
    t = clf.temperature_
    by_hand = np.mean(
        [softmax(m.decision_function(X_val), t) for m in folds["estimator"]], axis=0
    )
    np.testing.assert_allclose(clf.predict_proba(X_val), by_hand, rtol=1e-12)
    # (np.log of a probability near 1 is itself only within an ulp of 1)
    np.testing.assert_allclose(
        clf.predict_log_proba(X_val), np.log(by_hand), rtol=1e-10, atol=1e-15
    )
    np.testing.assert_array_equal(clf.predict(X_val), by_hand.argmax(axis=1))
    np.testing.assert_allclose(
        clf.decision_function(X_val), np.log(by_hand), rtol=1e-10, atol=1e-15
    )
    # estimator_ is still the model refitted on all the data (for inspection).
    refit = clone(est).fit(X_train, y_train)
    np.testing.assert_allclose(clf.estimator_.coef_, refit.coef_)


def test_ensemble_gives_better_probabilities_on_digits(digits):
    # The measurement: 0.129 (averaged folds) against 0.138 (one
    # refitted model) for a cross-fitted LogisticRegression on digits.
    _, X_train, X_val, y_train, y_val = digits
    est = LogisticRegression(C=100.0, max_iter=3000)
    averaged = TemperatureScaledClassifier(est, ensemble=True).fit(X_train, y_train)
    single = TemperatureScaledClassifier(est, ensemble=False).fit(X_train, y_train)
    assert not hasattr(single, "estimators_")
    assert averaged.temperature_ == single.temperature_  # the same OOF logits
    assert log_loss(y_val, averaged.predict_proba(X_val)) < log_loss(
        y_val, single.predict_proba(X_val)
    )


def test_ensemble_against_calibrated_classifier_cv(digits):
    sklearn = pytest.importorskip("sklearn")
    if tuple(int(p) for p in sklearn.__version__.split(".")[:2]) < (1, 8):
        pytest.skip("CalibratedClassifierCV(method='temperature') is new in 1.8")
    from sklearn.calibration import CalibratedClassifierCV

    _, X_train, X_val, y_train, y_val = digits
    est = LogisticRegression(C=100.0, max_iter=3000)
    theirs = CalibratedClassifierCV(est, method="temperature", ensemble=True).fit(
        X_train, y_train
    )
    mine = TemperatureScaledClassifier(est).fit(X_train, y_train)
    # The same folds, the same fold models; both average over them.
    assert len(theirs.calibrated_classifiers_) == len(mine.estimators_)
    for cal, model in zip(
        theirs.calibrated_classifiers_, mine.estimators_, strict=True
    ):
        np.testing.assert_allclose(cal.estimator.coef_, model.coef_)
    # One exact temperature on all the out-of-fold logits is at least as good
    # here as one temperature per fold.
    assert (
        log_loss(y_val, mine.predict_proba(X_val))
        <= log_loss(y_val, theirs.predict_proba(X_val)) * 1.02
    )


def test_ensemble_with_a_class_missing_from_a_training_fold():
    X, y = make_classification(
        n_samples=90, n_classes=3, n_informative=4, random_state=0
    )
    y[:2] = 3  # a rare class: absent from some training folds
    clf = TemperatureScaledClassifier(
        LogisticRegression(max_iter=1000), cv=KFold(3), ensemble=True
    )
    clf.fit(X, y)
    proba = clf.predict_proba(X)
    assert proba.shape == (90, 4)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
    assert np.isfinite(clf.predict_log_proba(X)).all()


def test_ensemble_needs_folds_and_refits_cleanly(digits):
    model, X_train, X_val, y_train, y_val = digits
    with pytest.raises(ValueError, match="ensemble=True needs models fitted on"):
        TemperatureScaledClassifier(FrozenEstimator(model), ensemble=True).fit(
            X_val, y_val
        )
    frozen = TemperatureScaledClassifier(FrozenEstimator(model)).fit(X_val, y_val)
    assert not hasattr(frozen, "estimators_")  # "auto": no folds to keep
    clf = TemperatureScaledClassifier(LogisticRegression(max_iter=500), cv=3)
    clf.fit(X_train, y_train)
    assert len(clf.estimators_) == 3
    clf.set_params(ensemble=False).fit(X_train, y_train)
    assert not hasattr(clf, "estimators_")
    with pytest.raises(ValueError, match="ensemble"):
        TemperatureScaledClassifier(ensemble="yes").fit(X_train, y_train)


def test_ensemble_persists_with_joblib_and_skops(digits, tmp_path):
    _, X_train, X_val, y_train, _ = digits
    clf = TemperatureScaledClassifier(LogisticRegression(max_iter=500), cv=3)
    clf.fit(X_train, y_train)
    joblib.dump(clf, tmp_path / "clf.joblib")
    loaded = joblib.load(tmp_path / "clf.joblib")
    np.testing.assert_array_equal(loaded.predict_proba(X_val), clf.predict_proba(X_val))
    sio = pytest.importorskip("skops.io")
    sio.dump(clf, tmp_path / "clf.skops")
    untrusted = sio.get_untrusted_types(file=tmp_path / "clf.skops")
    assert untrusted == ["skts._classifier.TemperatureScaledClassifier"]
    loaded = sio.load(tmp_path / "clf.skops", trusted=untrusted)
    assert len(loaded.estimators_) == 3
    np.testing.assert_array_equal(loaded.predict_proba(X_val), clf.predict_proba(X_val))


@pytest.mark.parametrize("ensemble", ["auto", False])
def test_folds_that_saw_two_of_three_classes_are_calibrated_not_refused(ensemble):
    # (issue 25) KFold(3) on data sorted by class: each training fold sees
    # two classes, whose decision_function is one score d. scikit-learn's
    # cross_val_predict refuses it (and CalibratedClassifierCV's temperature
    # method fails on it in scikit-learn 1.9); skts uses the fold's logits
    # (0, d) and scikit-learn's fill for the class it missed (here the row's
    # smallest other logit, as for every missing class): T is the rule's on
    # those out-of-fold logits, built here by hand.
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    X = X[::2]
    y = y[::2]
    cv = KFold(3)
    oof = np.empty((len(y), 3))
    for train, test in cv.split(X, y):
        model = LogisticRegression(max_iter=1000).fit(X[train], y[train])
        d = model.decision_function(X[test])
        seen = list(model.classes_)
        logits = np.column_stack([np.zeros_like(d), d])
        full = np.empty((len(test), 3))
        full[:, seen] = logits
        missing = [c for c in range(3) if c not in seen]
        full[:, missing] = logits.min(axis=1, keepdims=True)
        oof[test] = full
    want = TemperatureScaler().fit(oof, y).temperature_
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BoundaryTemperatureWarning)
        clf = TemperatureScaledClassifier(
            LogisticRegression(max_iter=1000), cv=cv, ensemble=ensemble
        ).fit(X, y)
    assert clf.temperature_ == want
    proba = clf.predict_proba(X)
    assert proba.shape == (len(y), 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)


def test_a_class_with_one_member_under_the_default_cv_is_calibrated():
    # (issue 25) the default stratified CV with a class of one sample: the
    # folds without it are cross-fitted as above, not refused.
    X, y = make_classification(n_samples=120, n_classes=3, n_informative=4, random_state=1)
    y[0] = 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # (scikit-learn's split)
        clf = TemperatureScaledClassifier(LogisticRegression(max_iter=1000)).fit(X, y)
    assert clf.classes_.tolist() == [0, 1, 2, 3]
    assert np.isfinite(clf.temperature_)
    np.testing.assert_allclose(clf.predict_proba(X).sum(axis=1), 1.0, rtol=1e-12)
