"""Paired comparisons (skts.metrics._compare) and ``skts report --compare``:
the same resamples for both forecasts, against a slow reference that
resamples the rows themselves."""

import json

import numpy as np
import pytest
from scipy.special import softmax
from test_cli import assert_one_line_error, run

from skts import TemperatureScaler
from skts.metrics import (
    calibration_report,
    compare_calibration,
    debiased_calibration_error,
    smooth_calibration_error,
)
from skts.metrics._compare import streamed_comparison


def _pair(n=1500, k=4, seed=0):
    rng = np.random.RandomState(seed)
    y = rng.randint(0, k, size=n)
    logits = 3.0 * (np.eye(k)[y] + rng.normal(size=(n, k)))
    t = TemperatureScaler().fit(logits[: n // 2], y[: n // 2]).temperature_
    z, y = logits[n // 2 :], y[n // 2 :]
    return y, z, softmax(z, axis=1), softmax(z / t, axis=1)


def _metrics(y, proba):
    values = dict(calibration_report(y, proba, labels=np.arange(proba.shape[1])).values)
    values["smooth_ece"] = smooth_calibration_error(
        y, proba, labels=range(proba.shape[1])
    )
    values["debiased_l2_ce"] = debiased_calibration_error(
        y, proba, labels=range(proba.shape[1])
    )
    return values


def test_values_are_each_metric_of_each_forecast():
    y, _, a, b = _pair()
    c = compare_calibration(y, a, b, n_bootstrap=0)
    expected_a, expected_b = _metrics(y, a), _metrics(y, b)
    assert list(c.values_a) == list(expected_a)
    for name in expected_a:
        assert c.values_a[name] == pytest.approx(expected_a[name], abs=1e-12)
        assert c.values_b[name] == pytest.approx(expected_b[name], abs=1e-12)
        assert c.difference[name] == pytest.approx(
            expected_b[name] - expected_a[name], abs=1e-12
        )
    assert c.intervals == {} and c.n_bootstrap == 0


def test_intervals_are_those_of_resampling_the_rows_themselves():
    # The slow reference: draw the rows (the same draws as skts's weights),
    # recompute every metric of both forecasts on the resampled rows.
    y, _, a, b = _pair(n=600)
    c = compare_calibration(y, a, b, n_bootstrap=40, random_state=7)
    rng = np.random.RandomState(7)
    n = y.shape[0]
    diffs = []
    for _ in range(40):
        rows = rng.randint(0, n, size=n)
        ma, mb = _metrics(y[rows], a[rows]), _metrics(y[rows], b[rows])
        diffs.append({k: mb[k] - ma[k] for k in ma})
    for name, (lo, hi) in c.intervals.items():
        draws = [d[name] for d in diffs]
        expected = np.quantile(draws, [0.025, 0.975])
        assert lo == pytest.approx(expected[0], abs=1e-6), name
        assert hi == pytest.approx(expected[1], abs=1e-6), name


def test_pairing_narrows_the_interval_of_a_difference():
    # b is a, slightly improved: the two errors move together across
    # resamples, so the paired interval of b - a is much narrower than the
    # one two independent bootstraps would give.
    y, _, a, _ = _pair(n=3000)
    b = 0.95 * a + 0.05 / a.shape[1]
    paired = compare_calibration(y, a, b, n_bootstrap=200, random_state=0)
    rng = np.random.RandomState(1)
    n = y.shape[0]
    unpaired = []
    for _ in range(200):
        ra, rb = rng.randint(0, n, size=n), rng.randint(0, n, size=n)
        unpaired.append(
            calibration_report(y[rb], b[rb], labels=range(4))["log_loss"]
            - calibration_report(y[ra], a[ra], labels=range(4))["log_loss"]
        )
    lo, hi = paired.intervals["log_loss"]
    ulo, uhi = np.quantile(unpaired, [0.025, 0.975])
    assert hi - lo < 0.5 * (uhi - ulo)
    assert lo <= paired.difference["log_loss"] <= hi


def test_a_forecast_against_itself_differs_by_nothing():
    y, _, a, _ = _pair(n=400)
    c = compare_calibration(y, a, a.copy(), n_bootstrap=20, random_state=0)
    assert all(d == 0 for d in c.difference.values())
    assert all(iv == (0.0, 0.0) for iv in c.intervals.values())
    text = str(c)
    assert text.splitlines()[0].startswith("metric") and "paired interval" in text
    assert json.loads(json.dumps(c.to_dict()))["difference"]["ece"] == 0.0


def test_calibration_shows_as_a_reliable_improvement_on_real_logits():
    from _data import DATA, MISSING

    path = DATA / "densenet40_cifar10.npz"
    if not path.exists():
        pytest.skip(MISSING)
    d = np.load(path)
    scaler = TemperatureScaler().fit(d["val_logits"], d["val_labels"])
    y = d["test_labels"]
    before = softmax(d["test_logits"].astype(np.float64), axis=1)
    after = scaler.predict_proba(d["test_logits"])
    c = compare_calibration(y, before, after, n_bootstrap=200, random_state=0)
    for name in ("log_loss", "ece", "smooth_ece", "debiased_l2_ce"):
        assert c.intervals[name][1] < 0, name  # lower after: the interval below 0
    assert c.difference["accuracy"] == 0.0


def test_streamed_comparison_equals_the_in_memory_values():
    y, z, _, _ = _pair(n=2000)
    t = TemperatureScaler().fit(z, y).temperature_
    c = streamed_comparison(z, 1.0, z, t, y, n_bootstrap=50, seed=0)
    in_memory = compare_calibration(
        y, softmax(z, axis=1), softmax(z / t, axis=1), n_bootstrap=0
    )
    assert set(c.values_a) < set(in_memory.values_a)  # (the report's metrics)
    for name in c.values_a:
        assert c.values_a[name] == pytest.approx(in_memory.values_a[name], abs=1e-9)
        assert c.values_b[name] == pytest.approx(in_memory.values_b[name], abs=1e-9)
    assert c.intervals["accuracy"] == (0.0, 0.0)  # paired: the labels never move
    lo, hi = c.intervals["log_loss"]
    assert lo < c.difference["log_loss"] < hi


@pytest.mark.parametrize(
    "b, kwargs, match",
    [
        (np.full((4, 3), 1 / 3), {}, "same shape"),
        (np.full((4, 2), 0.5), {"n_bootstrap": -1}, "n_bootstrap"),
        (np.full((4, 2), 2.0), {}, r"y_prob must contain probabilities in \[0, 1\]"),
    ],
)
def test_bad_input_is_one_line_errors(b, kwargs, match):
    with pytest.raises(ValueError, match=match):
        compare_calibration([0, 1, 0, 1], np.full((4, 2), 0.5), b, **kwargs)


@pytest.fixture(scope="module")
def cli_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("compare")
    y, z, _, _ = _pair(n=2400, k=5, seed=3)
    np.save(folder / "z.npy", z.astype(np.float32))
    np.save(folder / "y.npy", y)
    np.save(folder / "other.npy", (z / 2).astype(np.float32))
    np.save(folder / "narrow.npy", z[:, :3].astype(np.float32))
    return folder


def test_report_compare_json(cli_files):
    folder = cli_files
    r = run(
        "report", "--logits", "z.npy", "--labels", "y.npy", "--compare", "other.npy",
        "--bootstrap", "60", "--json", cwd=folder,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["schema_version"] == 3
    comparison = out["comparison"]
    assert comparison["sources"]["b"]["logits"] == "other.npy"
    z, y = np.load(folder / "z.npy"), np.load(folder / "y.npy")
    other = np.load(folder / "other.npy")
    expected = compare_calibration(
        y,
        softmax(z.astype(np.float64), axis=1),
        softmax(other.astype(np.float64), axis=1),
        n_bootstrap=0,
    )
    for name, value in comparison["difference"].items():
        assert value == pytest.approx(expected.difference[name], abs=1e-6)
    assert set(comparison["intervals"]) == set(comparison["difference"])
    assert comparison["n_bootstrap"] == 60
    # The report's own metrics are unchanged by --compare.
    assert out["metrics"]["before"]["values"]["ece"] == pytest.approx(
        expected.values_a["ece"], abs=1e-6
    )


def test_report_compare_table_with_a_calibration(cli_files, tmp_path):
    folder = cli_files
    r = run("fit", "--logits", "z.npy", "--labels", "y.npy", "--out",
            tmp_path / "cal.json", "--quiet", cwd=folder)  # fmt: skip
    assert r.returncode == 0, r.stderr
    r = run(
        "report", "--logits", "z.npy", "--labels", "y.npy", "--calibration",
        tmp_path / "cal.json", "--compare", "other.npy", cwd=folder,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "compared: a = z.npy / T = " in r.stdout
    assert "b - a" in r.stdout


@pytest.mark.parametrize(
    "extra, fragments",
    [
        (["--compare", "narrow.npy"], ["--compare file 'narrow.npy' has shape"]),
        (["--compare", "missing.npy"], ["missing.npy"]),
        (["--compare", "z.npy", "--scheduler", "127.0.0.1:1"], ["--compare"]),
    ],
)
def test_report_compare_bad_input_is_one_line(cli_files, extra, fragments):
    r = run("report", "--logits", "z.npy", "--labels", "y.npy", *extra, cwd=cli_files)
    assert_one_line_error(r, *fragments)
