"""Logits as deep-learning code has them: tensors, array-API namespaces and
devices, half precision, binary logits of one column, probabilities by
mistake."""

import tracemalloc
import warnings

import numpy as np
import pytest
import sklearn
from sklearn.utils import get_tags

from skts import TemperatureScaledClassifier, TemperatureScaler, _array_api
from skts.metrics import temperature_by_group

torch = pytest.importorskip("torch", reason="PyTorch is optional (CPU wheels exist)")
xps = pytest.importorskip("array_api_strict", reason="array_api_strict is optional")


def _data(n=4000, k=10, seed=0, scale=3.0, t_true=2.0):
    """Overconfident logits: labels drawn from softmax(z / t_true)."""
    rng = np.random.default_rng(seed)
    z = (rng.normal(size=(n, k)) * scale).astype(np.float32)
    p = np.exp(z / t_true - (z / t_true).max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    y = (p.cumsum(axis=1) < rng.random(n)[:, None]).sum(axis=1).clip(0, k - 1)
    return z, y


def _dispatch_problem() -> str | None:
    """Why scikit-learn's array-API dispatch cannot be enabled here (e.g.
    scikit-learn 1.7 needs SciPy >= 1.14 for it), or None."""
    try:
        with sklearn.config_context(array_api_dispatch=True):
            return None
    except (ImportError, RuntimeError) as exc:
        return str(exc).splitlines()[0]


dispatch = pytest.mark.skipif(
    _dispatch_problem() is not None,
    reason=f"array_api_dispatch unavailable: {_dispatch_problem()}",
)


def _peak(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# --------------------------------------------------------------------------
# Without dispatch: tensors through a zero-copy view.


def test_a_float32_tensor_is_read_in_place_and_gives_the_numpy_answer():
    z, y = _data(n=200_000, k=50)
    ref = TemperatureScaler().fit(z, y)
    t = torch.from_numpy(z).requires_grad_()  # as a network returns it
    scaler = TemperatureScaler().fit(t, torch.from_numpy(y))
    assert scaler.temperature_ == ref.temperature_
    assert scaler.validation_loss_ == ref.validation_loss_
    # No float64 (nor float32) copy of the 40 MB input: the same memory as
    # on the NumPy array, give or take a MiB.
    numpy_peak = _peak(lambda: TemperatureScaler().fit(z, y))
    tensor_peak = _peak(lambda: TemperatureScaler().fit(t, torch.from_numpy(y)))
    assert tensor_peak <= numpy_peak + (1 << 20) < z.nbytes
    # Outputs are NumPy (scikit-learn without array_api_dispatch).
    proba = scaler.predict_proba(t[:5])
    assert isinstance(proba, np.ndarray)
    np.testing.assert_array_equal(proba, ref.predict_proba(z[:5]))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_is_widened_block_by_block(dtype):
    z, y = _data(n=400_000, k=40)
    half = torch.from_numpy(z).to(getattr(torch, dtype))
    widened = half.float().numpy()  # exact: every half value is a float32
    ref = TemperatureScaler().fit(widened, y)
    scaler = TemperatureScaler().fit(half, y)
    assert scaler.temperature_ == ref.temperature_
    assert scaler.validation_loss_ == ref.validation_loss_
    np.testing.assert_array_equal(
        scaler.predict_proba(half[:100]), ref.predict_proba(widened[:100])
    )
    np.testing.assert_array_equal(scaler.predict(half), ref.predict(widened))
    np.testing.assert_array_equal(scaler.transform(half), ref.transform(widened))
    # Never widened whole: the peak stays below half a float32 copy (64 MB).
    peak = _peak(lambda: TemperatureScaler().fit(half, y))
    assert peak < widened.nbytes / 2


def test_numpy_float16_is_widened_too():
    z, y = _data()
    half = z.astype(np.float16)
    ref = TemperatureScaler().fit(half.astype(np.float32), y)
    assert TemperatureScaler().fit(half, y).temperature_ == ref.temperature_


def test_half_precision_non_finite_is_reported_with_its_position():
    z, _ = _data(n=10, k=3)
    half = torch.from_numpy(z).to(torch.bfloat16)
    half[7, 2] = float("inf")
    with pytest.raises(ValueError, match=r"finite; got inf at row 7, column 2"):
        TemperatureScaler().fit(half, np.zeros(10, dtype=int))


def test_a_device_array_without_dispatch_says_what_to_do():
    z, y = _data(n=50, k=3)
    on_device = xps.asarray(z, device=xps.Device("device1"))
    with pytest.raises(ValueError, match="array_api_dispatch=True"):
        TemperatureScaler().fit(on_device, y)


# --------------------------------------------------------------------------
# Binary logits of one column.


def test_one_binary_logit_means_logits_zero_and_d():
    rng = np.random.default_rng(3)
    d = rng.normal(size=2000) * 4
    y = (rng.random(2000) < 1 / (1 + np.exp(-d / 2.5))).astype(int)
    two = np.column_stack([np.zeros_like(d), d])
    ref = TemperatureScaler().fit(two, y)
    assert 2.0 < ref.temperature_ < 3.2
    for shaped in (d, d[:, None], torch.from_numpy(d)):
        scaler = TemperatureScaler().fit(shaped, y)
        assert scaler.temperature_ == ref.temperature_
        np.testing.assert_array_equal(
            scaler.predict_proba(shaped), ref.predict_proba(two)
        )
        np.testing.assert_array_equal(scaler.predict(shaped), ref.predict(two))
        # decision_function: the binary convention of scikit-learn, d / T.
        np.testing.assert_allclose(
            scaler.decision_function(shaped), d / ref.temperature_, rtol=1e-15
        )
    for dtype in (torch.bfloat16, torch.float16):  # half precision, one column
        half = torch.from_numpy(d).to(dtype)
        wide = half.float().numpy()
        assert (
            TemperatureScaler().fit(half, y).temperature_
            == TemperatureScaler().fit(wide, y).temperature_
            == TemperatureScaler().fit(half[:, None], y).temperature_
        )
    bunch = temperature_by_group(y, d, np.arange(2000) % 2)
    ref_bunch = temperature_by_group(y, two, np.arange(2000) % 2)
    np.testing.assert_array_equal(bunch.temperature, ref_bunch.temperature)
    from skts import TemperatureCurveDisplay

    curve = TemperatureCurveDisplay.from_logits(d, y)
    np.testing.assert_array_equal(
        curve.losses, TemperatureCurveDisplay.from_logits(two, y).losses
    )
    assert get_tags(TemperatureScaler()).input_tags.one_d_array


# --------------------------------------------------------------------------
# Probabilities passed as logits.


def test_probabilities_passed_as_logits_get_a_warning():
    z, y = _data(n=500)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    with pytest.warns(UserWarning, match=r"look like probabilities.*np\.log\(p\)"):
        TemperatureScaler().fit(p, y)
    with pytest.warns(UserWarning, match="look like probabilities"):
        TemperatureScaler().fit(torch.from_numpy(p).to(torch.bfloat16), y)
    with pytest.warns(UserWarning, match="look like probabilities"):
        temperature_by_group(y, p, y % 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        TemperatureScaler().fit(np.log(p), y)  # log-probabilities: fine
        TemperatureScaler().fit(z, y)
        # Entries in [0, 1] whose rows do not sum to 1 are logits.
        TemperatureScaler().fit(p * 0.5, y)


# --------------------------------------------------------------------------
# array_api_dispatch: computed where the arrays live.


def _namespaces():
    yield pytest.param(xps, xps.Device("CPU_DEVICE"), False, id="strict-cpu")
    yield pytest.param(xps, xps.Device("device1"), False, id="strict-device1")
    yield pytest.param(torch, "cpu", False, id="torch-cpu")
    # The device passes (XpRows) on a CPU tensor: what a CUDA tensor runs.
    yield pytest.param(torch, "cpu", True, id="torch-device-passes")


@dispatch
@pytest.mark.parametrize("xp, device, force", _namespaces())
@pytest.mark.parametrize("weighted", [False, True])
def test_dispatch_computes_in_the_namespace_and_matches_numpy(
    xp, device, force, weighted, monkeypatch
):
    monkeypatch.setattr(_array_api, "FORCE_DEVICE_PASSES", force)
    z, y = _data(n=3000, k=12, seed=1)
    w = np.random.default_rng(2).uniform(0, 3, size=3000) if weighted else None
    zx = xp.asarray(z, device=device)
    yx = xp.asarray(y, device=device)
    wx = None if w is None else xp.asarray(w, device=device)
    ref = TemperatureScaler().fit(z, y, sample_weight=w)
    ref_c = TemperatureScaler(solver="continuous").fit(z, y, sample_weight=w)
    with sklearn.config_context(array_api_dispatch=True):
        scaler = TemperatureScaler().fit(zx, yx, sample_weight=wx)
        cont = TemperatureScaler(solver="continuous").fit(zx, yx, sample_weight=wx)
        outputs = {
            "predict_proba": scaler.predict_proba(zx),
            "predict_log_proba": scaler.predict_log_proba(zx),
            "transform": scaler.transform(zx),
            "decision_function": scaler.decision_function(zx),
            "predict": scaler.predict(zx),
        }
    assert isinstance(scaler.temperature_, float)
    assert scaler.temperature_ == ref.temperature_  # the exact rule: same bits
    assert scaler.validation_loss_ == pytest.approx(ref.validation_loss_, rel=1e-12)
    assert cont.temperature_ == pytest.approx(ref_c.temperature_, rel=1e-8)
    for name, out in outputs.items():
        assert type(out) is type(zx), name
        assert out.device == zx.device, name
        expected = getattr(ref, name)(z)
        got = np.from_dlpack(out) if xp is torch else np.asarray(out._array)
        if name == "predict":
            np.testing.assert_array_equal(got, expected)
        else:
            assert got.dtype == np.float32  # the input's floating type
            np.testing.assert_allclose(got, expected, rtol=2e-5, atol=1e-6)


@dispatch
@pytest.mark.parametrize("xp, device, force", _namespaces())
def test_near_ties_on_a_device_follow_real_arithmetic(xp, device, force, monkeypatch):
    # float64 rounding says L(1) <= L(2); exactly, L(2) is smaller by 3e-17
    # (tests/test_temperature.py): the device passes reach the same answer.
    monkeypatch.setattr(_array_api, "FORCE_DEVICE_PASSES", force)
    logits = np.array([[3.0, 0.0], [2.0, 0.0]])
    y = np.array([0, 1])
    w = np.array([5.324138008803048, 1.0])
    with sklearn.config_context(array_api_dispatch=True):
        scaler = TemperatureScaler(temperatures=[1.0, 2.0]).fit(
            xp.asarray(logits, device=device),
            xp.asarray(y, device=device),
            sample_weight=xp.asarray(w, device=device),
        )
    assert scaler.temperature_ == 2.0


@dispatch
def test_dispatch_checks_inputs_on_the_device():
    z, y = _data(n=100, k=3)
    z[40, 1] = np.nan
    zx = xps.asarray(z, device=xps.Device("device1"))
    with sklearn.config_context(array_api_dispatch=True):
        with pytest.raises(ValueError, match=r"finite; got nan at row 40, column 1"):
            TemperatureScaler().fit(zx, xps.asarray(y, device=xps.Device("device1")))


@dispatch
def test_dispatch_refuses_a_namespace_other_than_the_fits():
    z, y = _data(n=200, k=3)
    with sklearn.config_context(array_api_dispatch=True):
        scaler = TemperatureScaler().fit(torch.from_numpy(z), torch.from_numpy(y))
        with pytest.raises(
            ValueError, match=r"TemperatureScaler.predict_proba\(\) must"
        ):
            scaler.predict_proba(z)
    assert get_tags(scaler).array_api_support


@dispatch
@pytest.mark.parametrize("ensemble", [False, True])
def test_classifier_follows_its_estimators_array_api_support(ensemble):
    from sklearn.datasets import load_digits
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

    X, y = load_digits(return_X_y=True)
    clf = TemperatureScaledClassifier(LinearDiscriminantAnalysis(), ensemble=ensemble)
    ref = sklearn.base.clone(clf).fit(X[:1000], y[:1000])
    Xt, yt = torch.from_numpy(X), torch.from_numpy(y)
    with sklearn.config_context(array_api_dispatch=True):
        fitted = clf.fit(Xt[:1000], yt[:1000])
        proba = fitted.predict_proba(Xt[1000:])
        labels = fitted.predict(Xt[1000:])
    assert fitted.temperature_ == ref.temperature_
    assert isinstance(proba, torch.Tensor) and isinstance(labels, torch.Tensor)
    np.testing.assert_allclose(proba.numpy(), ref.predict_proba(X[1000:]), atol=1e-10)
    np.testing.assert_array_equal(labels.numpy(), ref.predict(X[1000:]))
    assert (
        get_tags(clf).array_api_support
        == get_tags(LinearDiscriminantAnalysis()).array_api_support
    )


@dispatch
def test_a_device_without_float64_is_refused_with_a_reason(monkeypatch):
    from skts import _sklearn_compat

    monkeypatch.setattr(
        _sklearn_compat, "max_precision_float_dtype", lambda xp, device: xp.float32
    )
    z, y = _data(n=100, k=3)
    on_device = xps.asarray(z, device=xps.Device("device1"))
    with sklearn.config_context(array_api_dispatch=True):
        with pytest.raises(ValueError, match=r"has no float64.*move the logits"):
            TemperatureScaler().fit(on_device, xps.asarray(y, device=on_device.device))


@dispatch
def test_device_passes_decide_constructed_near_ties_in_real_arithmetic():
    # 40 problems whose two candidates' losses agree in float64 (see
    # tests/test_temperature.py), run through the device passes
    # (array_api_strict's simulated device): the 60-digit reference decides.
    from test_temperature import _constructed_near_ties

    from _reference import exact_choices

    device = xps.Device("device1")
    for logits, y, grid, w in _constructed_near_ties(40, seed=1):
        allowed = exact_choices(logits, y, grid, w)
        with sklearn.config_context(array_api_dispatch=True):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # boundary answers are fine here
                got = TemperatureScaler(temperatures=grid).fit(
                    xps.asarray(logits, device=device),
                    xps.asarray(y, device=device),
                    sample_weight=xps.asarray(w, device=device),
                )
        assert got.temperature_ in allowed


@dispatch
@pytest.mark.parametrize("solver", ["grid", "continuous"])
@pytest.mark.parametrize("edge", ["argmax", "argmin", "mixed"])
def test_device_passes_at_the_ends_of_the_range(solver, edge):
    # Every label the largest logit (T -> 0), the smallest (T -> infinity),
    # or nearly so: the exact facts and the proven slopes of the device
    # passes give the NumPy answer.
    rng = np.random.default_rng(4)
    z = rng.normal(size=(5000, 6)) * 3
    y = z.argmax(axis=1) if edge != "argmin" else z.argmin(axis=1)
    if edge == "mixed":
        y[:3] = z[:3].argmin(axis=1)
    device = xps.Device("device1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = TemperatureScaler(solver=solver).fit(z, y)
        with sklearn.config_context(array_api_dispatch=True):
            got = TemperatureScaler(solver=solver).fit(
                xps.asarray(z, device=device), xps.asarray(y, device=device)
            )
    assert got.at_boundary_ == ref.at_boundary_
    if solver == "grid" or ref.at_boundary_:
        assert got.temperature_ == ref.temperature_
    else:
        assert got.temperature_ == pytest.approx(ref.temperature_, rel=1e-8)
