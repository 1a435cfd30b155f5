"""calibration_ladder: the verdict on constructed cases whose answer is
known, the paired intervals, the labels each rung changes."""

import json

import numpy as np
import pytest
from scipy.special import softmax

from skts import calibration_ladder


def _draw(truth_logits, rng):
    p = softmax(truth_logits, axis=1)
    k = p.shape[1]
    return (p.cumsum(axis=1) < rng.random((len(p), 1))).sum(axis=1).clip(0, k - 1)


def test_one_temperature_when_one_temperature_is_the_truth():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(3000, 4)) * 3
    y = _draw(z / 1.8, rng)
    ladder = calibration_ladder(z, y, n_bootstrap=100)
    assert ladder.verdict == "temperature"
    assert ladder.log_loss_interval[0].tolist() == [0.0, 0.0]  # paired with itself
    assert ladder.labels_changed[0] == ladder.labels_changed[1] == 0


def test_group_temperatures_when_confidence_depends_on_the_class():
    rng = np.random.default_rng(1)
    z = rng.normal(size=(4000, 3)) * 3
    t = np.array([0.4, 3.0, 1.0])[z.argmax(axis=1)]
    y = _draw(z / t[:, None], rng)
    ladder = calibration_ladder(z, y, n_bootstrap=100)
    assert ladder.verdict == "group temperature"
    assert ladder.log_loss_interval[1][1] < 0
    assert ladder.labels_changed[1] == 0


def test_vector_scaling_when_a_class_is_under_predicted():
    rng = np.random.default_rng(2)
    z = rng.normal(size=(4000, 4)) * 2
    shifted = z.copy()
    shifted[:, 0] += 1.5
    y = _draw(shifted, rng)
    ladder = calibration_ladder(z, y, n_bootstrap=100)
    assert ladder.verdict == "vector"
    assert ladder.labels_changed[2] > 0  # it moves labels to class 0, and says so


def test_metadata_groups_and_the_report():
    rng = np.random.default_rng(3)
    z = rng.normal(size=(3000, 3)) * 3
    site = rng.integers(0, 2, 3000)
    y = _draw(z / np.where(site == 1, 3.0, 0.5)[:, None], rng)
    ladder = calibration_ladder(z, y, groups=site, n_bootstrap=100)
    assert ladder.verdict == "group temperature"
    as_dict = json.loads(json.dumps(ladder.to_dict()))
    assert [r["rung"] for r in as_dict["rungs"]] == list(ladder.rungs)
    assert as_dict["verdict"] == "group temperature"
    text = str(ladder)
    assert "verdict: group temperature" in text and "labels changed" in text
    # The point values are the means of the out-of-fold losses; the Brier
    # score of a forecast is at most 2.
    assert np.all(ladder.brier <= 2) and np.all(ladder.log_loss > 0)


def test_bad_input_is_one_line():
    z = np.zeros((20, 3))
    with pytest.raises(ValueError, match="cv"):
        calibration_ladder(z, np.zeros(20, dtype=int), cv=1)
    with pytest.raises(ValueError, match="groups must have one label per sample"):
        calibration_ladder(z, np.zeros(20, dtype=int), groups=np.zeros(3))
