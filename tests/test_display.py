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
from skts._numerics import nll_many
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
    assert disp.line_ is None  # (no unexplained dots at the bin means)
    np.testing.assert_allclose(
        [p.get_height() for p in disp.hist_.patches], curve.counts / curve.counts.sum()
    )
    # The gap bars go from each bin's accuracy to its mean confidence.
    assert len(disp.gap_bars_.patches) == full.sum()
    tops = sorted(
        (p.get_x(), p.get_y() + p.get_height()) for p in disp.gap_bars_.patches
    )
    np.testing.assert_allclose([t for _, t in tops], curve.confidence[full])
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
    assert disp.ax_.get_ylabel() == "Frequency of class 3"
    with pytest.raises(ValueError, match="class_ must be a class label or a column"):
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
    # (3-D logits are per-position rows: their labels are 2-D)
    with pytest.raises(ValueError, match=r"labels must have shape \(2, 2\)"):
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


# --------------------------------------------------------------------------
# Pictures that explain themselves by default.


def _inside(fig, artist) -> bool:
    fig.canvas.draw()
    box = artist.get_window_extent()
    whole = fig.bbox
    return (
        box.x0 >= whole.x0 - 1
        and box.y0 >= whole.y0 - 1
        and box.x1 <= whole.x1 + 1
        and box.y1 <= whole.y1 + 1
    )


def test_the_gap_says_which_way_the_model_errs(pyplot):
    from matplotlib.colors import to_hex

    # Bin 0.8-1.0 overconfident (90% confident, half right), bin 0.2-0.4
    # underconfident (30% confident, all right).
    y = [1, 0, 1, 0, 1, 1, 1]
    p = [0.9, 0.9, 0.9, 0.9, 0.3, 0.3, 0.3]
    disp = ReliabilityDisplay.from_predictions(y, p, n_bins=5, pos_label=1)
    by_x = {round(b.get_x(), 1): b for b in disp.gap_bars_.patches}
    over, under = by_x[0.8], by_x[0.2]
    assert over.get_height() > 0 and to_hex(over.get_edgecolor()) == to_hex("tab:red")
    assert under.get_height() < 0 and to_hex(under.get_edgecolor()) == to_hex("navy")
    legend = [t.get_text() for t in disp.ax_.get_legend().get_texts()]
    assert "overconfident (confidence > accuracy)" in legend
    assert "underconfident (confidence < accuracy)" in legend
    assert not any(t == "gap" for t in legend)


def test_a_second_display_is_a_line_by_default_with_one_entry_each(pyplot, fitted):
    model, clf, _, _, X_te, y_te = fitted
    before = ReliabilityDisplay.from_estimator(model, X_te, y_te, name="before")
    after = ReliabilityDisplay.from_estimator(
        clf, X_te, y_te, name="after", ax=before.ax_, hist_ax=before.hist_ax_
    )
    assert before.bars_ is not None and after.bars_ is None
    assert after.line_ is not None and after.gap_bars_ is None
    assert not after.hist_.patches[0].get_fill()  # outlines over the bars
    legend = [t.get_text() for t in before.ax_.get_legend().get_texts()]
    # One entry each, in the order drawn, before the diagonal and the gaps.
    assert legend[0].startswith("before (ECE") and legend[1].startswith("after (ECE")
    assert sum(t.startswith(("before", "after")) for t in legend) == 2
    assert sum("confident (confidence" in t for t in legend) <= 2
    names = [t.get_text() for t in before.hist_ax_.get_legend().get_texts()]
    assert names == ["before", "after"]
    # An explicit kind still wins.
    again = ReliabilityDisplay.from_estimator(
        clf, X_te, y_te, kind="bar", ax=before.ax_, hist_ax=before.hist_ax_
    )
    assert again.bars_ is not None


def test_a_second_display_gets_its_own_colour_and_legend(pyplot, fitted):
    from matplotlib.colors import to_hex

    model, clf, _, _, X_te, y_te = fitted
    before = ReliabilityDisplay.from_estimator(model, X_te, y_te, name="before")
    after = ReliabilityDisplay.from_estimator(
        clf,
        X_te,
        y_te,
        name="after",
        kind="line",
        ax=before.ax_,
        hist_ax=before.hist_ax_,
    )
    first = to_hex(before.bars_.patches[0].get_facecolor(), keep_alpha=False)
    second = to_hex(after.line_.get_color())
    assert first != second
    assert to_hex(after.hist_.patches[0].get_edgecolor(), keep_alpha=False) == second
    names = [t.get_text() for t in before.hist_ax_.get_legend().get_texts()]
    assert names == ["before", "after"]


def test_legend_and_labels_stay_clear_and_inside(pyplot, fitted):
    model, _, _, _, X_te, y_te = fitted
    disp = ReliabilityDisplay.from_estimator(model, X_te, y_te)
    fig = disp.figure_
    assert type(fig.get_layout_engine()).__name__ == "ConstrainedLayoutEngine"
    legend = disp.ax_.get_legend()
    fig.canvas.draw()
    # Above the diagram: it covers no bar, no line, no point.
    assert legend.get_window_extent().y0 >= disp.ax_.get_window_extent().y1 - 1
    for label in (disp.ax_.yaxis.label, disp.hist_ax_.xaxis.label, legend):
        assert _inside(fig, label)
    curve = TemperatureCurveDisplay.from_logits(
        model.decision_function(X_te), y_te, temperature=2.0
    )
    for label in (curve.ax_.xaxis.label, curve.ax_.yaxis.label):
        assert _inside(curve.figure_, label)


def test_binary_top_label_axis_and_pos_label(pyplot):
    rng = np.random.default_rng(0)
    p1 = rng.uniform(size=400)
    y = np.where(rng.uniform(size=400) < p1, "yes", "no")
    top = ReliabilityDisplay.from_predictions(y, p1)
    assert top.ax_.get_xlim() == (0.5, 1.0)  # no confidence is below 1/K
    pos = ReliabilityDisplay.from_predictions(y, p1, pos_label="yes", n_bins=10)
    same = ReliabilityDisplay.from_predictions(y, p1, class_=1, n_bins=10)
    curve = reliability_curve(y, p1, class_=1, n_bins=10)
    for disp in (pos, same):
        np.testing.assert_allclose(
            [b.get_height() for b in disp.bars_.patches],
            curve.accuracy[curve.counts > 0],
        )
        assert disp.ax_.get_xlim() == (0.0, 1.0)
    assert pos.hist_ax_.get_xlabel() == "p(class yes)"
    with pytest.raises(ValueError, match="pos_label is for binary problems"):
        ReliabilityDisplay.from_predictions([0, 1, 2], np.eye(3), pos_label=1)


def test_class_accepts_a_label(pyplot, fitted):
    model, _, _, _, X_te, y_te = fitted
    names = np.array([f"digit {d}" for d in range(10)])
    proba = model.predict_proba(X_te)
    by_label = ReliabilityDisplay.from_predictions(
        names[y_te], proba, class_="digit 3", labels=names
    )
    by_index = ReliabilityDisplay.from_predictions(names[y_te], proba, class_=3)
    assert [b.get_height() for b in by_label.bars_.patches] == [
        b.get_height() for b in by_index.bars_.patches
    ]
    assert by_label.ax_.get_ylabel() == "Frequency of class digit 3"
    # Labels that are not 0..K-1: a label, never the column of that number.
    shifted = ReliabilityDisplay.from_estimator(
        _Shifted(model), X_te, y_te + 1, class_=1, n_bins=5
    )
    curve = reliability_curve(y_te, proba, class_=0, n_bins=5)
    np.testing.assert_allclose(
        [b.get_height() for b in shifted.bars_.patches],
        curve.accuracy[curve.counts > 0],
    )


class _Shifted:
    """A fitted model whose classes are 1..10."""

    def __init__(self, model):
        self.model, self.classes_ = model, model.classes_ + 1

    def predict_proba(self, X):
        return self.model.predict_proba(X)


def test_unknown_keywords_are_a_type_error_that_names_them(pyplot):
    with pytest.raises(TypeError, match=r"\['colour'\]"):
        ReliabilityDisplay.from_predictions([0, 1], [0.2, 0.7], colour="red")
    with pytest.raises(TypeError, match=r"\['smoothing'\]"):
        TemperatureCurveDisplay.from_logits([[0.0, 1.0]], [1], smoothing=3)
    # Known matplotlib properties still pass through.
    disp = ReliabilityDisplay.from_predictions([0, 1], [0.2, 0.7], alpha=0.3)
    assert disp.bars_.patches[0].get_alpha() == 0.3


def test_quantile_bins_show_their_edges(pyplot, fitted):
    model, _, _, _, X_te, y_te = fitted
    disp = ReliabilityDisplay.from_estimator(
        model, X_te, y_te, strategy="quantile", n_bins=8
    )
    segments = disp.hist_.get_segments()
    np.testing.assert_allclose([s[0][0] for s in segments], disp.edges)
    assert disp.hist_ax_.get_ylabel() == "Bin edges"


def test_temperature_curve_at_the_boundary_is_labelled_and_visible(pyplot):
    rng = np.random.default_rng(0)
    z = rng.normal(size=(300, 4))
    y = z.argmax(axis=1)
    z[np.arange(300), y] += 50  # separable by 50: the loss falls to 0 as T -> 0
    with pytest.warns(Warning):
        scaler = TemperatureScaler().fit(z, y)
    disp = TemperatureCurveDisplay.from_estimator(scaler, z, y)
    assert scaler.at_boundary_
    assert "edge of the grid" in disp.marker_.get_label()
    assert disp.marker_.get_marker() == "D"
    assert any(line.get_xdata()[0] == scaler.temperature_ for line in disp.ax_.lines)
    assert disp.losses.min() == 0.0  # underflows: a log axis would drop it
    assert disp.ax_.get_yscale() == "linear"


def test_groups_with_equal_mass_bins_draw_each_groups_edges(pyplot):
    # (an AttributeError before: a group's histogram is then its bin edges,
    # a line collection, not bars)
    from matplotlib.colors import to_rgb

    rng = np.random.default_rng(0)
    proba = rng.dirichlet(np.ones(3), 400)
    y = rng.integers(0, 3, 400)
    disp = ReliabilityDisplay.from_predictions(
        y, proba, strategy="quantile", groups=np.arange(400) % 2
    )
    assert sorted(disp.group_displays_) == [0, 1]
    for i, group in enumerate(sorted(disp.group_displays_)):
        edges = disp.group_displays_[group].hist_
        assert edges.get_linestyle()[0][1] is not None  # dashed
        assert tuple(edges.get_color()[0][:3]) == to_rgb(f"C{i + 1}")


def test_smooth_diagram_draws_the_smooth_curve_and_its_band(pyplot, fitted):
    from skts.metrics import smooth_calibration_error, smooth_reliability_curve

    model, _, _, _, X_te, y_te = fitted
    proba = model.predict_proba(X_te)
    disp = ReliabilityDisplay.from_estimator(
        model, X_te, y_te, kind="smooth", n_bootstrap=30, random_state=0
    )
    curve = smooth_reliability_curve(
        y_te, proba, labels=model.classes_, n_bootstrap=30, random_state=0
    )
    keep = curve.confidence >= 1 / 10 - 1e-12  # (the top-label axis starts at 1/K)
    np.testing.assert_allclose(disp.line_.get_xdata(), curve.confidence[keep])
    np.testing.assert_allclose(disp.line_.get_ydata(), curve.accuracy[keep])
    band = disp.band_.get_paths()[0].vertices
    assert band[:, 1].min() == pytest.approx(curve.lower[keep].min())
    assert band[:, 1].max() == pytest.approx(curve.upper[keep].max())
    assert disp.ece == pytest.approx(smooth_calibration_error(y_te, proba))
    legend = [t.get_text() for t in disp.ax_.get_legend().get_texts()]
    assert f"LogisticRegression (smECE = {disp.ece:.4f})" in legend
    assert "95% band (bootstrap)" in legend
    assert disp.bars_ is None and disp.gap_bars_ is None and disp.edges is None
    assert disp.hist_ax_.get_ylabel() == "Density"
    with pytest.raises(ValueError, match="drawn with kind='smooth'"):
        disp.plot(kind="bar")


def test_smooth_one_vs_rest_before_and_after(pyplot, fitted):
    from skts.metrics import smooth_calibration_error

    model, clf, _, _, X_te, y_te = fitted
    before = ReliabilityDisplay.from_estimator(
        model, X_te, y_te, kind="smooth", class_=3, name="before", n_bootstrap=10
    )
    after = ReliabilityDisplay.from_estimator(
        clf, X_te, y_te, kind="smooth", class_=3, name="after", n_bootstrap=10,
        ax=before.ax_, hist_ax=before.hist_ax_,
    )  # fmt: skip
    assert before.ax_.get_ylabel() == "Frequency of class 3"
    assert before.line_.get_xdata()[0] == 0.0  # one-vs-rest: the whole axis
    legend = [t.get_text() for t in before.ax_.get_legend().get_texts()]
    assert sum("smECE" in t for t in legend) == 2
    assert sum("band" in t for t in legend) == 1  # (one entry for both bands)
    proba = clf.predict_proba(X_te)
    onehot = (y_te == clf.classes_[3]).astype(int)
    expected = smooth_calibration_error(onehot, proba[:, 3], mode="binary")
    assert after.ece == pytest.approx(expected)
    # Without bootstrap there is no band, and asking for one says so.
    bare = ReliabilityDisplay.from_estimator(
        model, X_te, y_te, kind="smooth", n_bootstrap=0
    )
    assert bare.band_ is None and bare.lower is None
    with pytest.raises(ValueError, match="show_band=True needs a band"):
        bare.plot(show_band=True)


def test_smooth_groups_draw_one_curve_each(pyplot, fitted):
    model, _, _, _, X_te, y_te = fitted
    groups = np.where(y_te < 5, "low", "high")
    disp = ReliabilityDisplay.from_estimator(
        model, X_te, y_te, kind="smooth", groups=groups, n_bootstrap=10
    )
    assert sorted(disp.group_displays_) == ["high", "low"]
    for g, d in disp.group_displays_.items():
        assert d.edges is None and d.band_ is None
        assert d.line_.get_label().startswith(f"{g} (n=")
    names = [t.get_text() for t in disp.hist_ax_.get_legend().get_texts()]
    assert len(names) == 3


def test_binned_band_is_the_wilson_interval(pyplot, fitted):
    mpmath = pytest.importorskip("mpmath")
    model, _, _, _, X_te, y_te = fitted
    proba = model.predict_proba(X_te)
    disp = ReliabilityDisplay.from_predictions(y_te, proba, n_bins=8, show_band=True)
    curve = reliability_curve(y_te, proba, n_bins=8)
    lower, upper = curve.interval(0.95)
    full = curve.counts > 0
    # The Wilson bounds solve (p_hat - q)^2 = z^2 q (1 - q) / n, in high precision.
    z = mpmath.sqrt(2) * mpmath.erfinv(mpmath.mpf("0.95"))
    for m in np.flatnonzero(full):
        n, p = mpmath.mpf(curve.counts[m]), mpmath.mpf(curve.accuracy[m])
        roots = mpmath.polyroots(
            [1 + z**2 / n, -(2 * p + z**2 / n), p**2], maxsteps=200, extraprec=60
        )
        lo, hi = sorted(float(mpmath.re(r)) for r in roots)
        assert lower[m] == pytest.approx(max(lo, 0.0), abs=1e-12)
        assert upper[m] == pytest.approx(min(hi, 1.0), abs=1e-12)
    bars = disp.band_.lines[2][0].get_segments()
    assert len(bars) == full.sum()
    np.testing.assert_allclose([s[0][1] for s in bars], lower[full])
    np.testing.assert_allclose([s[1][1] for s in bars], upper[full])
    legend = [t.get_text() for t in disp.ax_.get_legend().get_texts()]
    assert "95% interval (Wilson)" in legend
    plain = ReliabilityDisplay.from_predictions(y_te, proba, n_bins=8)
    assert plain.band_ is None  # (off by default on binned diagrams)


def test_curve_from_logits_marks_the_rules_choice_and_the_grid_edge(pyplot):
    from skts import BoundaryTemperatureWarning, TemperatureScaler
    from skts.datasets import load_digits_logits

    data = load_digits_logits()
    z, y = data.val_logits, data.val_labels
    disp = TemperatureCurveDisplay.from_logits(z, y)
    chosen = TemperatureScaler().fit(z, y).temperature_
    assert disp.marker_.get_xdata()[0] == chosen
    assert disp.marker_.get_label() == f"chosen T = {chosen:.4g}"
    # On a grid that stops short of it, the edge is chosen, warned and marked.
    with pytest.warns(BoundaryTemperatureWarning):
        edge = TemperatureCurveDisplay.from_logits(z, y, temperatures=[0.5, 1.0])
    assert edge.marker_.get_xdata()[0] == 1.0
    assert edge.marker_.get_label().endswith("(edge of the grid)")
    assert any(
        list(line.get_xdata()) == [1.0, 1.0] for line in edge.ax_.get_lines()
    )  # the dotted vertical line at the edge
