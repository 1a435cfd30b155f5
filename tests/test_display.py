"""ReliabilityDisplay and TemperatureCurveDisplay, drawn with the Agg backend."""

import subprocess
import sys

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

from skts import (
    ReliabilityDisplay,
    TemperatureCurveDisplay,
    TemperatureScaledClassifier,
    TemperatureScaler,
)
from skts._temperature import nll_many
from skts.metrics import expected_calibration_error, reliability_curve


@pytest.fixture
def pyplot():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    yield plt
    plt.close("all")


@pytest.fixture(scope="module")
def fitted():
    X, y = load_digits(return_X_y=True)
    X_tr, X_rest, y_tr, y_rest = train_test_split(
        X / 16, y, test_size=0.5, random_state=0
    )
    X_val, X_te, y_val, y_te = train_test_split(
        X_rest, y_rest, test_size=0.5, random_state=0
    )
    model = LogisticRegression(C=100, max_iter=3000).fit(X_tr, y_tr)
    clf = TemperatureScaledClassifier(FrozenEstimator(model)).fit(X_val, y_val)
    return model, clf, X_val, y_val, X_te, y_te


def test_import_skts_does_not_import_matplotlib():
    code = "import sys, skts; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_from_estimator_values_equal_reliability_curve(pyplot, fitted):
    model, _, _, _, X_te, y_te = fitted
    disp = ReliabilityDisplay.from_estimator(model, X_te, y_te, n_bins=10)
    curve = reliability_curve(y_te, model.predict_proba(X_te), n_bins=10)
    full = curve.counts > 0
    heights = [p.get_height() for p in disp.bars_.patches]
    np.testing.assert_allclose(heights, curve.accuracy[full])
    np.testing.assert_allclose(disp.line_.get_xdata(), curve.confidence[full])
    np.testing.assert_allclose(
        [p.get_height() for p in disp.hist_.patches], curve.counts / curve.counts.sum()
    )
    assert len(disp.gap_bars_.patches) == full.sum()
    assert disp.ece == pytest.approx(
        expected_calibration_error(y_te, model.predict_proba(X_te), n_bins=10)
    )
    legend = [t.get_text() for t in disp.ax_.get_legend().get_texts()]
    assert any("LogisticRegression (ECE = " in t for t in legend)
    assert disp.figure_ is disp.ax_.figure
    assert disp.hist_ax_ is not None


def test_before_and_after_on_the_same_axes(pyplot, fitted):
    model, clf, _, _, X_te, y_te = fitted
    before = ReliabilityDisplay.from_estimator(model, X_te, y_te, name="before")
    after = ReliabilityDisplay.from_estimator(
        clf, X_te, y_te, name="after", ax=before.ax_, hist_ax=before.hist_ax_
    )
    assert after.ax_ is before.ax_
    legend = [t.get_text() for t in before.ax_.get_legend().get_texts()]
    assert sum("ECE" in t for t in legend) == 2
    assert sum(t == "Perfectly calibrated" for t in legend) == 1
    assert after.ece < before.ece


def test_one_vs_rest_and_from_predictions(pyplot, fitted):
    model, _, _, _, X_te, y_te = fitted
    proba = model.predict_proba(X_te)
    disp = ReliabilityDisplay.from_predictions(y_te, proba, class_=3, n_bins=5)
    curve = reliability_curve(y_te, proba, class_=3, n_bins=5)
    np.testing.assert_allclose(
        [p.get_height() for p in disp.bars_.patches], curve.accuracy[curve.counts > 0]
    )
    assert disp.ax_.get_ylabel() == "Observed frequency"
    with pytest.raises(ValueError, match="class_ must be a column index"):
        ReliabilityDisplay.from_predictions(y_te, proba, class_=10)


def test_from_estimator_needs_predict_proba(pyplot):
    with pytest.raises(ValueError, match="estimator must have predict_proba"):
        ReliabilityDisplay.from_estimator(object(), [[0]], [0])


def test_temperature_curve_marks_the_chosen_temperature(pyplot, fitted):
    model, clf, X_val, y_val, _, _ = fitted
    disp = TemperatureCurveDisplay.from_estimator(clf, X_val, y_val)
    logits = model.decision_function(X_val)
    np.testing.assert_array_equal(
        disp.losses, nll_many(logits, y_val, disp.temperatures)
    )
    assert disp.marker_.get_xdata()[0] == clf.temperature_
    i = int(np.argmin(disp.losses))
    assert disp.temperatures[i] == clf.temperature_
    assert disp.ax_.get_xscale() == "log"


def test_temperature_curve_for_a_scaler_at_the_boundary(pyplot):
    logits = np.array([[4.0, 0.0], [0.0, 4.0]])
    y = np.array([0, 1])
    with pytest.warns(UserWarning, match="smallest"):
        scaler = TemperatureScaler([0.5, 1.0, 2.0]).fit(logits, y)
    disp = TemperatureCurveDisplay.from_estimator(scaler, logits, y)
    assert disp.marker_.get_xdata()[0] == 0.5 == disp.temperatures[0]
    with pytest.raises(ValueError, match="estimator must be a fitted"):
        TemperatureCurveDisplay.from_estimator(object(), logits, y)


def test_missing_matplotlib_names_the_plot_extra(monkeypatch):
    import sys as _sys

    # A None entry makes "import matplotlib..." raise ImportError.
    for name in list(_sys.modules):
        if name == "matplotlib" or name.startswith("matplotlib."):
            monkeypatch.delitem(_sys.modules, name)
    monkeypatch.setitem(_sys.modules, "matplotlib", None)
    monkeypatch.setitem(_sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(
        ImportError, match=r"pip install matplotlib .skts's 'plot' extra"
    ):
        ReliabilityDisplay.from_predictions([0, 1], [0.2, 0.8])
    with pytest.raises(ImportError, match="TemperatureCurveDisplay needs matplotlib"):
        TemperatureCurveDisplay.from_logits(np.array([[0.0, 1.0]]), [1])


@pytest.mark.parametrize(
    "y_true, y_prob, match",
    [
        ([0, 1], [[0.5, np.nan], [0.2, 0.8]], "y_prob contains NaN"),
        ([0, 1, 1], [0.2, 0.8], "y_true has 3 samples but y_prob has 2"),
        ([0, 1], [1.2, 0.8], r"probabilities in \[0, 1\]"),
        ([], [], "empty"),
    ],
)
def test_hostile_predictions(pyplot, y_true, y_prob, match):
    with pytest.raises(ValueError, match=match):
        ReliabilityDisplay.from_predictions(y_true, y_prob)


def test_hostile_logits_for_the_curve(pyplot):
    with pytest.raises(ValueError, match="logits contains NaN"):
        TemperatureCurveDisplay.from_logits(np.array([[np.nan, 1.0]]), [0])
    with pytest.raises(ValueError, match="logits must be 2-D"):
        TemperatureCurveDisplay.from_logits(np.zeros((2, 2, 2)), [0, 1])
    with pytest.raises(ValueError, match="class indices"):
        TemperatureCurveDisplay.from_logits(np.array([[0.0, 1.0]]), [5])
    with pytest.raises(ValueError, match="temperatures must be finite"):
        TemperatureCurveDisplay.from_logits(
            np.array([[0.0, 1.0]]), [1], temperatures=[0.0, 1.0]
        )


def test_displays_never_guess_which_column_is_which(pyplot):
    # Classes [1, 2, 3], y_true without class 3: the columns cannot be named.
    proba = np.array([[0.8, 0.1, 0.1], [0.1, 0.8, 0.1]] * 2)
    y = np.array([1, 2, 1, 2])
    with pytest.raises(ValueError, match="pass labels="):
        ReliabilityDisplay.from_predictions(y, proba)
    disp = ReliabilityDisplay.from_predictions(y, proba, labels=[1, 2, 3])
    assert disp.accuracy[~np.isnan(disp.accuracy)].tolist() == [1.0]
    assert disp.ece == pytest.approx(0.2)


def test_one_line_per_group_over_the_whole(pyplot, fitted):
    _, clf, _, _, X_te, y_te = fitted
    proba = clf.predict_proba(X_te)
    # Two honest subpopulations: digits written with more or less ink.
    groups = np.where(X_te.sum(axis=1) > np.median(X_te.sum(axis=1)), "bold", "thin")
    disp = ReliabilityDisplay.from_estimator(clf, X_te, y_te, groups=groups)
    assert sorted(disp.group_displays_) == ["bold", "thin"]
    legend = [t.get_text() for t in disp.ax_.get_legend().get_texts()]
    for g in ("bold", "thin"):
        rows = groups == g
        part = disp.group_displays_[g]
        # Each line is that group's own curve, named with its size and ECE.
        curve = reliability_curve(y_te[rows], proba[rows], labels=clf.classes_)
        full = curve.counts > 0
        np.testing.assert_allclose(part.line_.get_ydata(), curve.accuracy[full])
        ece = expected_calibration_error(y_te[rows], proba[rows], labels=clf.classes_)
        assert f"{g} (n={rows.sum()}) (ECE = {ece:.4f})" in legend
        assert part.ax_ is disp.ax_
    # Distinct colours: the whole's bars and each group's line.
    colours = {disp.group_displays_[g].line_.get_color() for g in ("bold", "thin")}
    assert len(colours) == 2
    assert disp.ece == pytest.approx(expected_calibration_error(y_te, proba))
    with pytest.raises(ValueError, match="one label per sample"):
        ReliabilityDisplay.from_predictions(y_te, proba, groups=groups[:3])
