"""Per-pixel and per-token logits: classes on ``class_axis``, positions
labelled ``ignore_index`` left out. Every fit must equal the fit on the
flattened, filtered ``(m, K)`` array bit for bit (issue 29)."""

import numpy as np
import pytest
import sklearn

from skts import TemperatureScaler
from skts._array_api import Positions
from skts._validation import check_layout
from skts.metrics import calibration_report


def _segmentation(n=6, k=5, h=12, w=10, seed=0, dtype=np.float32):
    """Logits (n, k, h, w) of a model overconfident by 2.5, labels drawn from
    its calibrated probabilities, a border of -100 (unlabelled pixels)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k, h, w)) * 2.0
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    u = rng.random((n, 1, h, w))
    y = (p.cumsum(axis=1) < u).sum(axis=1).clip(0, k - 1)
    y[:, 0, :] = -100
    y[:, :, -2:] = -100
    return (z * 2.5).astype(dtype), y


def _flat(z, y, axis=1, ignore=-100):
    k = z.shape[axis]
    rows = np.moveaxis(z, axis, -1).reshape(-1, k)
    labels = y.reshape(-1)
    kept = labels != ignore
    return np.ascontiguousarray(rows[kept]), labels[kept]


@pytest.mark.parametrize("solver", ["grid", "continuous"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_segmentation_fit_equals_the_flattened_filtered_fit(solver, dtype):
    z, y = _segmentation(dtype=dtype)
    got = TemperatureScaler(solver=solver, ignore_index=-100).fit(z, y)
    ref = TemperatureScaler(solver=solver).fit(*_flat(z, y))
    assert got.temperature_ == ref.temperature_
    assert got.validation_loss_ == ref.validation_loss_
    assert 2.0 < got.temperature_ < 3.2  # it finds the overconfidence
    assert got.n_features_in_ == 5


def test_outputs_come_back_in_the_input_layout():
    z, y = _segmentation()
    scaler = TemperatureScaler(ignore_index=-100).fit(z, y)
    ref = TemperatureScaler(temperatures=[scaler.temperature_]).fit(*_flat(z, y))
    every = np.moveaxis(z, 1, -1).reshape(-1, 5)
    for method in ("predict_proba", "predict_log_proba", "transform"):
        out = getattr(scaler, method)(z)
        assert out.shape == z.shape and out.dtype == np.float32, method
        flat = np.moveaxis(out, 1, -1).reshape(-1, 5)
        np.testing.assert_array_equal(flat, getattr(ref, method)(every))
    np.testing.assert_allclose(scaler.predict_proba(z).sum(axis=1), 1, rtol=1e-6)
    labels = scaler.predict(z)
    assert labels.shape == y.shape
    np.testing.assert_array_equal(labels, z.argmax(axis=1))


def test_tokens_with_the_classes_last_and_padding():
    rng = np.random.default_rng(3)
    z = (rng.normal(size=(4, 9, 30)) * 4).astype(np.float32)  # (batch, tokens, vocab)
    y = z.argmax(axis=-1)
    flip = rng.random(y.shape) < 0.3
    y[flip] = rng.integers(0, 30, size=flip.sum())
    y[:, 6:] = -100  # padding
    got = TemperatureScaler(class_axis=-1, ignore_index=-100).fit(z, y)
    ref = TemperatureScaler().fit(*_flat(z, y, axis=-1))
    assert got.temperature_ == ref.temperature_
    assert got.transform(z).shape == z.shape
    np.testing.assert_array_equal(got.predict(z), z.argmax(axis=-1))
    # The classes last of a C-contiguous array: rows are read in place.
    reader, *_ = check_layout(z, y, class_axis=-1)
    assert reader[0:5].base is not None and np.shares_memory(reader[0:5], z)
    # Without class_axis=-1 the shapes disagree, and the message says what to do.
    with pytest.raises(ValueError, match="pass class_axis=-1"):
        TemperatureScaler().fit(z, y)


def test_mostly_padding_is_gathered_exactly():
    z, y = _segmentation(n=5)
    rng = np.random.default_rng(9)
    sparse = np.where(rng.random(y.shape) < 0.05, y, -100)  # 95% padding
    sparse[0, 0, 0] = 1
    got = TemperatureScaler(temperatures=[0.5, 1, 2, 4], ignore_index=-100).fit(
        z, sparse
    )
    ref = TemperatureScaler(temperatures=[0.5, 1, 2, 4]).fit(*_flat(z, sparse))
    assert got.validation_loss_ == ref.validation_loss_
    reader, *_ = check_layout(z, sparse, ignore_index=-100)
    rows, _ = _flat(z, sparse)
    np.testing.assert_array_equal(reader[0 : reader.shape[0]], rows)


def test_2d_rows_with_ignore_index_and_binary_logits():
    rng = np.random.default_rng(4)
    z = rng.normal(size=(500, 3)) * 3
    y = rng.integers(0, 3, size=500)
    y[::7] = -1
    got = TemperatureScaler(ignore_index=-1).fit(z, y)
    kept = y != -1
    assert got.temperature_ == TemperatureScaler().fit(z[kept], y[kept]).temperature_
    d = rng.normal(size=200) * 3
    yb = (d + rng.normal(size=200) > 0).astype(int)
    yb[:20] = 9
    got = TemperatureScaler(ignore_index=9).fit(d, yb)
    assert got.temperature_ == TemperatureScaler().fit(d[20:], yb[20:]).temperature_


def test_weights_per_sample_or_per_position():
    z, y = _segmentation(n=4)
    w = np.array([1.0, 2.0, 0.5, 3.0])
    got = TemperatureScaler(ignore_index=-100).fit(z, y, sample_weight=w)
    rows, labels = _flat(z, y)
    per = np.repeat(w, 12 * 10)[y.reshape(-1) != -100]
    ref = TemperatureScaler().fit(rows, labels, sample_weight=per)
    assert got.temperature_ == ref.temperature_
    pixel = np.broadcast_to(w[:, None, None], y.shape)
    same = TemperatureScaler(ignore_index=-100).fit(z, y, sample_weight=pixel)
    assert same.temperature_ == ref.temperature_
    with pytest.raises(ValueError, match=r"sample_weight must have shape \(4,\)"):
        TemperatureScaler(ignore_index=-100).fit(z, y, sample_weight=w[:3])


def test_half_precision_and_tensors_are_read_in_place():
    torch = pytest.importorskip("torch", reason="PyTorch is optional")
    z, y = _segmentation()
    for dtype in (torch.float16, torch.bfloat16):
        t = torch.from_numpy(z).to(dtype)
        got = TemperatureScaler(ignore_index=-100).fit(t, torch.from_numpy(y))
        wide = t.float().numpy()
        assert got.temperature_ == TemperatureScaler().fit(*_flat(wide, y)).temperature_
        proba = got.predict_proba(t)
        assert proba.dtype == np.float32 and proba.shape == z.shape
    # A strided block of rows is gathered exactly.
    reader, *_ = check_layout(torch.from_numpy(z).to(torch.bfloat16), y)
    assert isinstance(reader, Positions) and reader.bits
    wide = np.moveaxis(torch.from_numpy(z).to(torch.bfloat16).float().numpy(), 1, -1)
    every = wide.reshape(-1, 5)
    np.testing.assert_array_equal(reader[3:250], every[3:250])
    np.testing.assert_array_equal(reader[5:400:7], every[5:400:7])
    np.testing.assert_array_equal(reader.argmax(), every.argmax(axis=1))


def test_every_ignored_or_bad_axis_is_one_clear_error():
    z, y = _segmentation()
    with pytest.raises(ValueError, match="every label is ignore_index=-100"):
        TemperatureScaler(ignore_index=-100).fit(z, np.full(y.shape, -100))
    with pytest.raises(ValueError, match="class_axis=0 is not an axis"):
        TemperatureScaler(class_axis=0).fit(z, y)
    with pytest.raises(ValueError, match="class_axis=7 is not an axis"):
        TemperatureScaler(class_axis=7).fit(z, y)
    # Labels outside the classes (a forgotten ignore_index) are named.
    with pytest.raises(ValueError, match=r"class indices in \[0, 5\); got -100"):
        TemperatureScaler().fit(z, y)
    bad = z.copy()
    bad[1, 2, 3, 4] = np.nan
    with pytest.raises(ValueError, match="logits must be finite"):
        TemperatureScaler(ignore_index=-100).fit(bad, y)
    # Weights and groups of the wrong shape are named as what they are.
    with pytest.raises(ValueError, match=r"^sample_weight must have shape \(6,\)"):
        TemperatureScaler(ignore_index=-100).fit(z, y, sample_weight=np.ones(5))
    p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    with pytest.raises(ValueError, match=r"^groups must have shape \(6,\)"):
        calibration_report(y, p, groups=np.ones(5), ignore_index=-100)


def _dispatch_problem() -> str | None:
    """Why scikit-learn's array-API dispatch cannot be enabled here
    (scikit-learn 1.7 needs SciPy >= 1.14 for it), or None."""
    try:
        with sklearn.config_context(array_api_dispatch=True):
            return None
    except (ImportError, RuntimeError) as exc:
        return str(exc).splitlines()[0]


@pytest.mark.skipif(
    _dispatch_problem() is not None,
    reason=f"array_api_dispatch unavailable: {_dispatch_problem()}",
)
def test_on_a_device_the_positions_are_gathered_there(monkeypatch):
    xps = pytest.importorskip("array_api_strict", reason="array_api_strict is optional")
    z, y = _segmentation(dtype=np.float64)
    ref = TemperatureScaler().fit(*_flat(z, y))
    dev = xps.Device("device1")
    with sklearn.config_context(array_api_dispatch=True):
        scaler = TemperatureScaler(ignore_index=-100).fit(
            xps.asarray(z, device=dev), xps.asarray(y, device=dev)
        )
        proba = scaler.predict_proba(xps.asarray(z, device=dev))
    assert scaler.temperature_ == ref.temperature_
    assert proba.shape == z.shape and proba.device == dev
    every = TemperatureScaler(temperatures=[ref.temperature_]).fit(*_flat(z, y))
    expected = every.predict_proba(np.moveaxis(z, 1, -1).reshape(-1, 5))
    got = np.moveaxis(np.asarray(proba._array), 1, -1).reshape(-1, 5)
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_dask_logits_must_be_rows():
    da = pytest.importorskip("dask.array", reason="Dask is optional")
    z, y = _segmentation()
    with pytest.raises(ValueError, match="Dask logits must be 2-D rows"):
        TemperatureScaler(ignore_index=-100).fit(da.from_array(z), da.from_array(y))


def _metric_cases():
    from skts import metrics

    yield "ece", metrics.expected_calibration_error, {}
    yield "mce", metrics.maximum_calibration_error, {}
    yield "classwise", metrics.classwise_calibration_error, {}
    yield "smooth", metrics.smooth_calibration_error, {}
    yield "smooth-classwise", metrics.smooth_calibration_error, {"mode": "classwise"}
    yield "debiased", metrics.debiased_calibration_error, {}
    yield "debiased-l1", metrics.debiased_calibration_error, {"norm": "l1"}


@pytest.mark.parametrize("name, metric, options", list(_metric_cases()))
def test_metrics_take_positions_and_ignore_index(name, metric, options):
    z, y = _segmentation()
    scaler = TemperatureScaler(ignore_index=-100).fit(z, y)
    proba = scaler.predict_proba(z)  # (n, K, h, w)
    rows, labels = _flat(proba, y)
    kw = {"labels": range(5), **options}
    expected = metric(labels, rows, **kw)
    assert metric(y, proba, ignore_index=-100, **kw) == expected
    # classes last, and per-sample weights spread over the positions
    last = np.moveaxis(proba, 1, -1)
    assert metric(y, last, class_axis=-1, ignore_index=-100, **kw) == expected
    if "sample_weight" in metric.__wrapped__.__code__.co_varnames:
        w = np.array([1.0, 2.0, 1.0, 3.0, 1.0, 0.5])
        per = np.repeat(w, 12 * 10)[y.reshape(-1) != -100]
        got = metric(y, proba, ignore_index=-100, sample_weight=w, **kw)
        assert got == metric(labels, rows, sample_weight=per, **kw)
    with pytest.raises(ValueError, match=r"y_true must have shape \(6, 12, 10\)"):
        metric(y[:, :5], proba, **kw)


def test_report_comparison_and_curves_take_positions():
    from skts import metrics

    z, y = _segmentation()
    before = TemperatureScaler(temperatures=[1.0], ignore_index=-100).fit(z, y)
    after = TemperatureScaler(ignore_index=-100).fit(z, y)
    pa, pb = before.predict_proba(z), after.predict_proba(z)
    ra, labels = _flat(pa, y)
    rb, _ = _flat(pb, y)
    groups = np.array(list("aabbab"))
    flat_groups = np.repeat(groups, 120)[y.reshape(-1) != -100]
    got = metrics.calibration_report(y, pb, ignore_index=-100, groups=groups)
    ref = metrics.calibration_report(labels, rb, groups=flat_groups)
    assert got.values == ref.values and got.groups.keys() == ref.groups.keys()
    cmp = metrics.compare_calibration(
        y, pa, pb, ignore_index=-100, n_bootstrap=20, random_state=0
    )
    cref = metrics.compare_calibration(labels, ra, rb, n_bootstrap=20, random_state=0)
    assert cmp.difference == cref.difference and cmp.intervals == cref.intervals
    assert cmp.difference["log_loss"] < 0  # the fitted T helps
    curve = metrics.reliability_curve(y, pb, ignore_index=-100)
    np.testing.assert_array_equal(
        curve.counts, metrics.reliability_curve(labels, rb).counts
    )
    smooth = metrics.smooth_reliability_curve(y, pb, ignore_index=-100)
    np.testing.assert_array_equal(
        smooth.accuracy, metrics.smooth_reliability_curve(labels, rb).accuracy
    )


def test_a_device_array_without_dispatch_says_what_to_do():
    xps = pytest.importorskip("array_api_strict", reason="array_api_strict is optional")
    z, y = _segmentation(dtype=np.float64)
    on_device = xps.asarray(z, device=xps.Device("device1"))
    with pytest.raises(ValueError, match=r"array_api_dispatch=True.*SCIPY_ARRAY_API=1"):
        TemperatureScaler(ignore_index=-100).fit(on_device, y)


def test_displays_take_positions():
    matplotlib = pytest.importorskip("matplotlib", reason="matplotlib is optional")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from skts import ReliabilityDisplay, TemperatureCurveDisplay

    z, y = _segmentation()
    rows, labels = _flat(z, y)
    scaler = TemperatureScaler(ignore_index=-100).fit(z, y)
    proba = scaler.predict_proba(z).astype(np.float64)
    flat, _ = _flat(proba, y)
    got = ReliabilityDisplay.from_predictions(y, proba, ignore_index=-100)
    ref = ReliabilityDisplay.from_predictions(labels, flat)
    np.testing.assert_array_equal(got.counts, ref.counts)
    np.testing.assert_array_equal(got.accuracy, ref.accuracy)
    groups = np.array(list("abcabc"))
    by = ReliabilityDisplay.from_predictions(y, proba, ignore_index=-100, groups=groups)
    assert sorted(by.group_displays_) == ["a", "b", "c"]
    n_a = int(((y != -100) & (groups[:, None, None] == "a")).sum())
    assert by.group_displays_["a"].counts.sum() == n_a
    curve = TemperatureCurveDisplay.from_logits(
        z, y, ignore_index=-100, temperatures=[1.0, 2.0, 3.0]
    )
    flat_curve = TemperatureCurveDisplay.from_logits(
        rows, labels, temperatures=[1.0, 2.0, 3.0]
    )
    np.testing.assert_array_equal(curve.losses, flat_curve.losses)
    plt.close("all")
