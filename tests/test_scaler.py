"""TemperatureScaler on logit arrays: API, validation and consequences of the rule."""

import pickle
import warnings

import joblib
import numpy as np
import pytest
from sklearn.base import clone

from skts import BoundaryTemperatureWarning, TemperatureScaler
from skts._temperature import nll_many


@pytest.fixture
def data():
    rng = np.random.RandomState(0)
    logits = rng.normal(scale=4, size=(400, 6))
    # An overconfident model: the label is the argmax 60% of the time.
    y = np.where(rng.rand(400) < 0.6, logits.argmax(1), rng.randint(0, 6, 400))
    return logits, y


def test_fit_chooses_the_brute_force_candidate(data):
    logits, y = data
    grid = np.geomspace(0.05, 20, 301)[::-1]
    scaler = TemperatureScaler(temperatures=grid).fit(logits, y)
    losses = nll_many(logits, y, grid)
    expected = grid[losses == losses.min()].min()
    assert scaler.temperature_ == expected
    assert scaler.validation_loss_ == losses.min()
    assert scaler.temperature_ > 1  # overconfident logits get softened
    assert not scaler.at_boundary_


def test_predictions(data):
    logits, y = data
    scaler = TemperatureScaler().fit(logits, y)
    t = scaler.temperature_
    np.testing.assert_array_equal(scaler.transform(logits), logits / t)
    proba = scaler.predict_proba(logits)
    z = logits / t
    expected = np.exp(z - z.max(1, keepdims=True))
    expected /= expected.sum(1, keepdims=True)
    np.testing.assert_allclose(proba, expected, rtol=1e-12)
    np.testing.assert_allclose(np.exp(scaler.predict_log_proba(logits)), proba)
    np.testing.assert_array_equal(scaler.predict(logits), logits.argmax(1))
    np.testing.assert_array_equal(scaler.classes_, np.arange(6))
    assert scaler.n_features_in_ == 6
    assert scaler.score(logits, y) == np.mean(logits.argmax(1) == y)


def test_temperature_one_is_the_identity(data):
    logits, y = data
    scaler = TemperatureScaler(temperatures=[1.0]).fit(logits, y)
    z = logits - logits.max(1, keepdims=True)
    np.testing.assert_allclose(
        scaler.predict_proba(logits), np.exp(z) / np.exp(z).sum(1, keepdims=True)
    )
    np.testing.assert_array_equal(scaler.transform(logits), logits)


@pytest.mark.filterwarnings("ignore::skts.BoundaryTemperatureWarning")
def test_labels_are_the_first_argmax_of_the_logits():
    logits = np.array([[1.0, 1.0, 0.0], [0.0, 2.0, 2.0], [3.0, 3.0, 3.0]])
    scaler = TemperatureScaler(temperatures=[0.5, 2.0]).fit(logits, [0, 1, 2])
    np.testing.assert_array_equal(scaler.predict(logits), [0, 1, 0])


def test_float32_stays_float32_in_memory(data):
    logits, y = data
    logits32 = np.ascontiguousarray(logits, dtype=np.float32)
    from skts._scaler import _check_logits

    assert _check_logits(logits32) is logits32
    scaler = TemperatureScaler().fit(logits32, y)
    assert scaler.predict_proba(logits32).dtype == np.float64


def test_continuous_solver(data):
    logits, y = data
    grid = TemperatureScaler().fit(logits, y)
    cont = TemperatureScaler(solver="continuous").fit(logits, y)
    assert cont.validation_loss_ <= grid.validation_loss_
    assert abs(np.log(cont.temperature_ / grid.temperature_)) < 0.01


@pytest.mark.parametrize("solver", ["grid", "continuous"])
def test_boundary_warning(solver):
    logits = np.array([[4.0, 0.0], [0.0, 4.0], [4.0, 0.0]])
    y = np.array([0, 1, 0])  # every label has the largest logit: T -> 0
    with pytest.warns(BoundaryTemperatureWarning, match="smallest"):
        scaler = TemperatureScaler([0.1, 1.0, 10.0], solver=solver).fit(logits, y)
    assert scaler.temperature_ == 0.1 and scaler.at_boundary_
    with pytest.warns(BoundaryTemperatureWarning, match="largest"):
        TemperatureScaler([0.1, 1.0, 10.0], solver=solver).fit(logits, [1, 0, 1])


def test_no_warning_inside_the_range_or_with_one_candidate(data):
    logits, y = data
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        TemperatureScaler().fit(logits, y)
        TemperatureScaler(temperatures=[3.0]).fit(logits, y)


def test_persistence_and_clone(data, tmp_path):
    logits, y = data
    scaler = TemperatureScaler().fit(logits, y)
    joblib.dump(scaler, tmp_path / "s.joblib")
    for other in (joblib.load(tmp_path / "s.joblib"), pickle.loads(pickle.dumps(scaler))):
        assert other.temperature_ == scaler.temperature_
        np.testing.assert_array_equal(
            other.predict_proba(logits), scaler.predict_proba(logits)
        )
    assert not hasattr(clone(scaler), "temperature_")


@pytest.mark.parametrize(
    "temperatures, match",
    [
        ([], "temperatures must be a non-empty"),
        ([1.0, 0.0], r"temperatures must be finite and > 0; got 0.0 at position 1"),
        ([1.0, -2.0], r"got -2.0 at position 1"),
        ([np.nan], "temperatures must be finite"),
        ([1.0, np.inf], "temperatures must be finite"),
        ([[1.0, 2.0]], "temperatures must be a non-empty 1-D"),
        (["a"], "temperatures must be numbers"),
    ],
)
def test_bad_temperatures(data, temperatures, match):
    logits, y = data
    with pytest.raises(ValueError, match=match):
        TemperatureScaler(temperatures=temperatures).fit(logits, y)


@pytest.mark.parametrize(
    "logits, y, match",
    [
        (np.array([[np.nan, 1.0]]), [0], "logits contains NaN"),
        (np.array([[np.inf, 1.0]]), [0], "logits contains infinity"),
        (np.zeros((0, 3)), [], "logits is empty"),
        (np.array([1.0, 2.0]), [0], "logits must be 2-D"),
        (np.array([[1.0], [2.0]]), [0, 0], "at least 2 columns"),
        (np.array([[1.0, 2.0]]), [0, 1], "logits has 1 rows but y has 2"),
        (np.array([[1.0, 2.0]]), [2], r"y must contain class indices in \[0, 2\)"),
        (np.array([[1.0, 2.0]]), [-1], "class indices"),
        (np.array([[1.0, 2.0]]), [0.5], "integer class indices"),
        (np.array([[1.0, 2.0]]), ["a"], "integer class indices"),
    ],
)
def test_bad_logits_and_labels(logits, y, match):
    with pytest.raises(ValueError, match=match):
        TemperatureScaler().fit(logits, y)


@pytest.mark.parametrize(
    "sample_weight, match",
    [
        ([1.0, -1.0, 1.0], r"sample_weight must be non-negative; got -1.0 at position 1"),
        ([0.0, 0.0, 0.0], "sample_weight must have a positive sum"),
        ([1.0, np.nan, 1.0], "sample_weight contains NaN"),
        ([1.0, 1.0], r"sample_weight must have shape \(3,\); got \(2,\)"),
    ],
)
def test_bad_sample_weight(sample_weight, match):
    logits = np.array([[1.0, 2.0], [2.0, 1.0], [0.0, 0.0]])
    with pytest.raises(ValueError, match=match):
        TemperatureScaler().fit(logits, [0, 1, 1], sample_weight=sample_weight)


def test_predict_checks(data):
    logits, y = data
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        TemperatureScaler().predict_proba(logits)
    scaler = TemperatureScaler().fit(logits, y)
    with pytest.raises(ValueError, match="logits has 5 columns, but TemperatureScaler"):
        scaler.predict_proba(logits[:, :5])
    with pytest.raises(ValueError, match="logits contains NaN"):
        scaler.transform(np.full((1, 6), np.nan))


def test_bad_solver(data):
    logits, y = data
    with pytest.raises(ValueError, match="solver"):
        TemperatureScaler(solver="newton").fit(logits, y)
