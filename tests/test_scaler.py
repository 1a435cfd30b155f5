"""TemperatureScaler on logit arrays: API, validation and consequences of the rule."""

import pickle
import warnings

import joblib
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from sklearn.base import clone

from skts import BoundaryTemperatureWarning, TemperatureScaler
from skts._numerics import nll_many


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
    from skts._validation import check_logits as _check_logits

    assert _check_logits(logits32) is logits32
    scaler = TemperatureScaler().fit(logits32, y)
    # Outputs keep the input's precision by default (issue 29).
    assert scaler.predict_proba(logits32).dtype == np.float32
    assert scaler.predict_proba(logits).dtype == np.float64


def _variants(values):
    """``values`` as the array kinds users pass: plain, Fortran-ordered, a
    strided view, a memory-map subclass, big-endian, and a list."""
    big = values.astype(values.dtype.newbyteorder(">"))
    strided = np.repeat(values, 2, axis=0)[::2]
    yield "plain", values
    yield "fortran", np.asfortranarray(values)
    yield "strided", strided
    yield "subclass", values.view(np.memmap)
    yield "big-endian", big
    yield "list", values.tolist()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_the_checks_skip_scikit_learn_only_where_it_returns_the_input(
    dtype, monkeypatch
):
    # A C-contiguous NumPy array of float32/float64 logits, integer or float
    # labels, float64 weights: scikit-learn's checks would return it as it
    # is, so the estimators skip them (a tenth of a fit at 5,000 x 10). Every
    # other kind still takes them: each check gives what scikit-learn's
    # gives, the same values, dtype and messages, whatever the kind.
    from sklearn.utils.validation import check_array, column_or_1d

    import skts._validation as validation
    from skts._array_api import Widened
    from skts._validation import check_class_indices, check_logits, check_weights

    calls = []
    for name in ("check_array", "column_or_1d"):
        real = getattr(validation, name)
        spy = lambda *a, _real=real, **kw: calls.append(a[0]) or _real(*a, **kw)  # noqa: E731
        monkeypatch.setattr(validation, name, spy)
    rng = np.random.default_rng(5)
    z = rng.normal(size=(40, 4)).astype(dtype)
    for kind, logits in _variants(z):
        calls.clear()
        got = check_logits(logits, finite=False)
        if dtype == np.float16 and kind != "list":
            assert isinstance(got, Widened)
            continue
        want = check_array(logits, dtype=[np.float64, np.float32], ensure_2d=False)
        assert got.dtype == want.dtype and type(got) is type(want), kind
        np.testing.assert_array_equal(got, want)
        assert (got is logits) == (want is logits), kind
        assert (not calls) == (kind == "plain"), kind
    for label_dtype in (np.int64, np.int32, np.uint8, np.float64, bool):
        y = rng.integers(0, 2, 40).astype(label_dtype)
        for kind, labels in _variants(y):
            calls.clear()
            got = check_class_indices(labels, (40, 4))
            # (a 1-D Fortran-ordered array is C-contiguous too, and one byte
            # has no byte order)
            byte = np.dtype(label_dtype).itemsize == 1
            plain = kind in ("plain", "fortran") or (kind == "big-endian" and byte)
            plain = plain and label_dtype is not bool
            assert (not calls) == plain, (kind, label_dtype)
            want = column_or_1d(labels)
            assert got.flags.c_contiguous, kind
            if plain and label_dtype == np.int64:  # (others are cast to int64)
                assert got is labels, kind
            np.testing.assert_array_equal(got, want)
    y = np.arange(40) % 4
    y_bad = y.astype(np.float64)
    y_bad[7] = 1.5
    for _, labels in _variants(y_bad):
        with pytest.raises(ValueError, match=r"got 1\.5 at position 7\.$"):
            check_class_indices(labels, (40, 4))
    w = rng.uniform(0.5, 1.5, 40).astype(dtype)
    for kind, weights in _variants(w):
        calls.clear()
        got = check_weights(weights, 40)
        plain = kind in ("plain", "fortran") and dtype == np.float64
        assert (not calls) == plain, kind
        assert got.dtype == np.float64 and type(got) is np.ndarray, kind
        np.testing.assert_array_equal(got, np.asarray(weights, dtype=np.float64))
        assert got is weights or not plain, kind
    w[3] = -1.0
    for _, weights in _variants(w):
        with pytest.raises(ValueError, match=r"got -1\.0 at position 3\.$"):
            check_weights(weights, 40)


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
    for other in (
        joblib.load(tmp_path / "s.joblib"),
        pickle.loads(pickle.dumps(scaler)),
    ):
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
        (np.zeros((2, 2, 2)), [0, 0], "labels must have shape \\(2, 2\\)"),
        (np.zeros((2, 0)), [0, 0], "at least 2 columns"),
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


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nonfinite_logits_are_located(value, dtype):
    # scikit-learn's message, with the first position in row order (rows of
    # 3 classes: a second bad value further on is not the one named).
    logits = np.zeros((6, 3), dtype=dtype)
    logits[4, 0] = value
    logits[3, 2] = value
    kind = "NaN" if np.isnan(value) else "infinity"
    match = rf"Input logits contains {kind}.*, first at row 3, column 2\.$"
    with pytest.raises(ValueError, match=match):
        TemperatureScaler().fit(logits, [0, 1, 2, 0, 1, 2])
    with pytest.raises(ValueError, match=match):
        TemperatureScaler(temperatures=[1.0]).fit(
            np.zeros((6, 3)), [0, 1, 2] * 2
        ).predict_proba(logits)
    # binary logits (one column: the logit of class 1) name that column
    d = np.zeros(6, dtype=dtype)
    d[5] = value
    with pytest.raises(ValueError, match=r"first at row 5, column 1\.$"):
        TemperatureScaler().fit(d, [0, 1] * 3)
    weights = np.ones(6)
    weights[2] = value
    with pytest.raises(
        ValueError, match=r"sample_weight contains .*first at position 2\.$"
    ):
        TemperatureScaler().fit(np.zeros((6, 3)), [0, 1, 2] * 2, sample_weight=weights)


def test_nonfinite_logits_of_a_mapped_file_are_located_block_by_block(tmp_path):
    # 20,000,000 float32 logits (80 MB, memory-mapped): the position is
    # found block by block (a mask of the whole array would be 20 MB); the
    # value named is the kind the message names (NaN over an earlier inf).
    import tracemalloc

    from skts._validation import check_finite

    n, k = 5_000_000, 4
    z = np.lib.format.open_memmap(tmp_path / "z.npy", "w+", np.float32, (n, k))
    z[n - 3, 1] = np.inf
    z[n - 2, 3] = np.nan
    z.flush()
    del z
    z = np.load(tmp_path / "z.npy", mmap_mode="r")
    tracemalloc.start()
    try:
        with pytest.raises(ValueError) as raised:
            check_finite(z, "z.npy")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(raised.value) == (
        f"Input z.npy contains NaN, first at row {n - 2}, column 3."
    )
    assert peak < 4 << 20, peak / 2**20
    del z


@pytest.mark.parametrize(
    "sample_weight, match",
    [
        (
            [1.0, -1.0, 1.0],
            r"sample_weight must be non-negative; got -1.0 at position 1",
        ),
        ([0.0, 0.0, 0.0], "sample_weight must have a positive sum"),
        ([1.0, np.nan, 1.0], "sample_weight contains NaN"),
        ([1.0, 1.0], r"sample_weight must have shape \(3,\); got \(2,\)"),
    ],
)
def test_bad_sample_weight(sample_weight, match):
    logits = np.array([[1.0, 2.0], [2.0, 1.0], [0.0, 0.0]])
    with pytest.raises(ValueError, match=match):
        TemperatureScaler().fit(logits, [0, 1, 1], sample_weight=sample_weight)


@pytest.mark.parametrize(
    "dtype", [np.int8, np.uint8, np.int32, np.int64, ">i8", np.float64]
)
def test_label_and_weight_checks_name_the_first_bad_position(dtype):
    # Whatever the labels' type (the extremes of narrow integers included)
    # and wherever the bad labels or weights lie (several, or the last one
    # alone), the in-memory checks and the Dask pieces' checks name the first
    # bad position, and pass the same values once the bad ones are gone.
    from sklearn.utils.validation import check_array

    from skts._validation import check_chunk, check_class_indices, check_weights

    rng = np.random.default_rng(3)
    n, k = 5_000, 7
    for trial in range(20):
        y = rng.integers(0, k, n).astype(dtype)
        w = rng.uniform(0, 2, n)
        bad_y = np.sort(rng.choice(n, rng.integers(1, 4), replace=False))
        if trial == 0:
            bad_y[-1] = n - 1  # (the last label alone bad)
            bad_y = bad_y[-1:]
        integer = np.dtype(dtype).kind in "iu"
        low = np.iinfo(dtype).min if integer else -1e20
        high = np.iinfo(dtype).max if integer else 1e20
        for i in bad_y:
            y[i] = rng.choice([v for v in (k, high, low, -1) if v < 0 or v >= k])
        want = int(np.flatnonzero((y < 0) | (y >= k))[0])
        with pytest.raises(ValueError, match=rf"got .* at position {want}\.$"):
            check_class_indices(y, (n, k))
        message = check_chunk(np.zeros((n, k)), y, None, 100, k)
        assert message.endswith(f"at position {100 + want}."), message
        good = np.where((y < 0) | (y >= k), 0, y).astype(dtype)
        assert check_class_indices(good, (n, k)).tolist() == good.tolist()
        assert check_chunk(np.zeros((n, k)), good, w, 0, k) is None

        bad_w = np.sort(rng.choice(n, rng.integers(1, 4), replace=False))
        for i in bad_w:
            w[i] = rng.choice([-1.0, -np.inf, np.nan, np.inf, -1e-300])
        w[bad_w[-1]] = -1.0  # (at least one finite negative weight)
        want = int(np.flatnonzero(~np.isfinite(w) | (w < 0))[0])
        message = check_chunk(np.zeros((n, k)), good, w, 100, k)
        assert message.endswith(f"at position {100 + want}."), message
        negative = np.where(np.isfinite(w), w, 1.0)
        want = int(np.flatnonzero(negative < 0)[0])
        with pytest.raises(
            ValueError, match=rf"non-negative; got .* at position {want}\.$"
        ):
            check_weights(negative, n)
    # A weight that is bad without being negative (the smallest is fine).
    for value in (np.inf, np.nan):
        for i in (0, 2_500, n - 1):
            w = np.ones(n)
            w[i] = value
            message = check_chunk(np.zeros((n, k)), np.zeros(n, int), w, 100, k)
            assert message.endswith(f"got {value!r} at position {100 + i}."), message
    # In memory, a weight that is not finite gets scikit-learn's own message
    # and its position (before the shape's), whatever else is wrong with the
    # weights.
    for value in (np.inf, np.nan, -np.inf):
        for i in (0, n - 1):
            for size, other in ((n, 1.0), (n, -1.0), (n + 1, 1.0)):
                w = np.full(size, other)
                w[i] = value
                with pytest.raises(ValueError) as ours:
                    check_weights(w, n)
                with pytest.raises(ValueError) as reference:
                    check_array(w, ensure_2d=False, input_name="sample_weight")
                assert str(ours.value) == (
                    f"{str(reference.value)[:-1]}, first at position {i}."
                )
    # A positive sum: one positive weight anywhere is enough.
    for i in (0, 2_500, n - 1):
        w = np.zeros(n)
        w[i] = 1e-300
        assert check_weights(w, n) is w
    with pytest.raises(ValueError, match="positive sum"):
        check_weights(np.zeros(n), n)


@pytest.mark.parametrize("solver", ["grid", "continuous"])
@pytest.mark.parametrize("k", [2, 10, 50])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_fit_finds_every_logit_that_is_not_finite(solver, k, dtype, monkeypatch):
    # A fit leaves the logits' finiteness test to its reads (one read fewer):
    # a NaN or an infinity anywhere (in the warm start's sample or not, in a
    # row of weight zero, in a Fortran-ordered array read block by block, in
    # 1-D binary logits, in data that are their own sample) gets
    # scikit-learn's own message, check_array's (and where), and leaves the estimator
    # unfitted; the test runs once then, and never on finite logits.
    from sklearn.utils.validation import check_array

    import skts._fit
    from skts._numerics import subsample_rows

    tests = []
    real = skts._fit.check_finite

    def counted(arr, name="logits"):
        tests.append(arr.shape)
        real(arr, name)

    monkeypatch.setattr(skts._fit, "check_finite", counted)
    rng = np.random.default_rng(k)
    n = 2_000_000 // k
    z = (rng.normal(size=(n, k)) * 3).astype(dtype)
    y = np.argmax(z + rng.gumbel(size=(n, k)) * 2, axis=1)
    w = rng.uniform(0.5, 2.0, n)
    TemperatureScaler(solver=solver).fit(z, y, sample_weight=w)
    TemperatureScaler(solver=solver).fit(np.asfortranarray(z), y)
    assert tests == []
    expected = 0

    def expect(logits, labels=y, **fit_params):
        nonlocal expected
        with pytest.raises(ValueError) as reference:
            check_array(
                logits,
                dtype=[np.float64, np.float32],
                input_name="logits",
                ensure_2d=False,
            )
        # ... with the first position of what it names (a NaN before an
        # infinity; binary logits are the column 1 of (0, d))
        kind = np.isnan if np.isnan(logits).any() else np.isinf
        where = np.argwhere(kind(np.reshape(logits, (len(logits), -1))))[0]
        column = 1 if np.ndim(logits) == 1 else where[1]
        scaler = TemperatureScaler(solver=solver)
        with pytest.raises(ValueError) as ours:
            scaler.fit(logits, labels, **fit_params)
        assert str(ours.value) == (
            f"{str(reference.value)[:-1]}, first at row {where[0]}, column {column}."
        )
        assert not hasattr(scaler, "temperature_")
        expected += 1
        assert len(tests) == expected

    inside = np.arange(n)[subsample_rows(n, k)]
    outside = np.setdiff1d(np.arange(n), inside)
    assert outside.size
    for value in (np.nan, np.inf, -np.inf):
        for row in (rng.choice(inside), rng.choice(outside), n - 1):
            bad = z.copy()
            bad[row, rng.integers(k)] = value
            expect(bad)
    row = rng.choice(outside)
    bad = z.copy()
    bad[row, 0] = np.inf
    zero = w.copy()
    zero[row] = 0.0
    expect(bad, sample_weight=zero)
    expect(np.asfortranarray(bad))
    bad[rng.choice(inside), k - 1] = np.nan  # (and a NaN: that is named)
    expect(bad)
    small = z[:300].copy()  # (its own sample)
    small[123, 0] = -np.inf
    expect(small, y[:300])
    if k == 2:
        binary = (z[:, 1] - z[:, 0]).astype(dtype)
        binary[rng.choice(outside)] = np.nan
        expect(binary)


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


# --------------------------------------------------------------------------
# Hardening: a failed fit changes nothing; properties over generated data.


def test_failed_fit_leaves_a_fitted_scaler_unchanged(data):
    logits, y = data
    scaler = TemperatureScaler().fit(logits, y)
    before = dict(vars(scaler))
    bad_inputs = [
        (np.full_like(logits, np.nan), y, None),
        (logits, np.full_like(y, 99), None),
        (logits, y, -np.ones(len(y))),
        (logits[:, :0], y * 0, None),
    ]
    for bad_logits, bad_y, bad_w in bad_inputs:
        with pytest.raises(ValueError):
            scaler.fit(bad_logits, bad_y, sample_weight=bad_w)
        assert vars(scaler) == before
    scaler.set_params(temperatures=[-1.0])
    with pytest.raises(ValueError, match="temperatures"):
        scaler.fit(logits, y)
    assert scaler.temperature_ == before["temperature_"]


@pytest.mark.parametrize(
    "bad, match",
    [
        ([["a", "b"], ["c", "d"]], "could not convert|logits"),
        (np.array([[1 + 2j, 0]]), "Complex data not supported"),
    ],
)
def test_non_numeric_logits(bad, match):
    with pytest.raises(ValueError, match=match):
        TemperatureScaler().fit(bad, [0] * len(bad))


_logit_rows = hnp.arrays(
    np.float64,
    hnp.array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=8).filter(
        lambda s: s[1] >= 2
    ),
    elements=st.floats(-1e3, 1e3, allow_subnormal=False),
)


@settings(max_examples=200, deadline=None)
@given(_logit_rows, st.data())
def test_scaler_properties(logits, data):
    n, k = logits.shape
    y = data.draw(hnp.arrays(np.intp, n, elements=st.integers(0, k - 1)))
    grid = data.draw(st.lists(st.floats(1e-3, 1e3), min_size=1, max_size=6))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BoundaryTemperatureWarning)
        scaler = TemperatureScaler(temperatures=grid).fit(logits, y)
    assert scaler.temperature_ in grid
    proba = scaler.predict_proba(logits)
    assert np.all(np.isfinite(proba))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
    # Labels: the first argmax of the logits, whatever T.
    np.testing.assert_array_equal(scaler.predict(logits), np.argmax(logits, axis=1))
    # transform, then softmax, is predict_proba.
    t = scaler.transform(logits)
    e = np.exp(t - t.max(axis=1, keepdims=True))
    np.testing.assert_allclose(e / e.sum(axis=1, keepdims=True), proba, atol=1e-12)
    # T = 1 is the identity.
    one = TemperatureScaler(temperatures=[1.0]).fit(logits, y)
    z = logits - logits.max(axis=1, keepdims=True)
    np.testing.assert_allclose(
        one.predict_proba(logits),
        np.exp(z) / np.exp(z).sum(1, keepdims=True),
        atol=1e-12,
    )


@settings(max_examples=200, deadline=None)
@given(_logit_rows, st.data())
def test_integer_weights_equal_row_repetition(logits, data):
    n, k = logits.shape
    y = data.draw(hnp.arrays(np.intp, n, elements=st.integers(0, k - 1)))
    w = data.draw(hnp.arrays(np.intp, n, elements=st.integers(0, 4)))
    if w.sum() == 0:
        w[0] = 1
    grid = np.array(data.draw(st.lists(st.floats(0.05, 20), min_size=1, max_size=8)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BoundaryTemperatureWarning)
        weighted = TemperatureScaler(grid).fit(logits, y, sample_weight=w)
        repeated = TemperatureScaler(grid).fit(np.repeat(logits, w, 0), np.repeat(y, w))
    # Same choice, unless two candidates tie to within rounding (the two
    # computations sum in different orders).
    losses = nll_many(np.repeat(logits, w, 0), np.repeat(y, w), grid)
    tol = 1e-12 * (1 + abs(losses.min()))
    chosen = losses[grid == weighted.temperature_][0]
    assert chosen <= losses.min() + tol
    rivals = losses[grid != repeated.temperature_]
    if rivals.size == 0 or rivals.min() > losses.min() + tol:
        assert weighted.temperature_ == repeated.temperature_


def test_threads_do_not_change_the_answer(data):
    logits, y = data
    big = np.tile(logits, (200, 1)).astype(np.float32)  # 80k x 6: several blocks
    yy = np.tile(y, 200)
    one = TemperatureScaler(n_jobs=1).fit(big, yy)
    two = TemperatureScaler(n_jobs=2).fit(big, yy)
    assert one.temperature_ == two.temperature_
    assert one.validation_loss_ == two.validation_loss_
    c1 = TemperatureScaler(solver="continuous", n_jobs=1).fit(big, yy)
    c2 = TemperatureScaler(solver="continuous", n_jobs=-1).fit(big, yy)
    assert c1.temperature_ == c2.temperature_


@pytest.mark.parametrize(
    "bad, shown",
    [(0.5, "0.5"), (np.nan, "nan"), (1e20, "1e+20"), (-3.0, "-3.0"), (2.25, "2.25")],
)
def test_bad_labels_name_the_first_offending_value_in_one_line(bad, shown):
    logits = np.zeros((500, 3))
    y = np.zeros(500)
    y[123], y[400] = bad, bad
    with pytest.raises(ValueError) as info:
        TemperatureScaler().fit(logits, y)
    message = str(info.value)
    assert "\n" not in message and len(message) < 200
    assert f"got {shown} at position 123" in message


@pytest.mark.parametrize("solver", ["grid", "continuous"])
def test_huge_sample_weights_give_the_unweighted_answer(data, solver):
    logits, y = data
    plain = TemperatureScaler(solver=solver).fit(logits, y)
    for c in (1e308, 1e-320, 2.0**1000):
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # no overflow anywhere
            huge = TemperatureScaler(solver=solver).fit(
                logits, y, sample_weight=np.full(len(y), c)
            )
        assert huge.temperature_ == plain.temperature_
        assert huge.validation_loss_ == pytest.approx(plain.validation_loss_, rel=1e-12)
        assert huge.validation_loss_ > 0.1


@pytest.mark.parametrize("solver", ["grid", "continuous"])
def test_a_flat_loss_goes_to_the_smallest_and_says_so(solver):
    logits = np.tile([[2.0, 2.0, 2.0]], (6, 1))
    with pytest.warns(BoundaryTemperatureWarning, match="same for every temperature"):
        scaler = TemperatureScaler([3.0, 0.2, 1.0], solver=solver).fit(
            logits, [0, 1, 2, 0, 1, 2]
        )
    assert scaler.temperature_ == 0.2 and scaler.at_boundary_


def test_output_dtype_is_what_the_user_asks_for(data):
    z, y = data
    z32 = z.astype(np.float32)
    default = TemperatureScaler(dtype=np.float64).fit(z32, y)
    keep = TemperatureScaler().fit(z32, y)  # dtype=None: the input's
    single = TemperatureScaler(dtype=np.float32).fit(z, y)
    for method in ("predict_proba", "predict_log_proba", "transform"):
        wide = getattr(default, method)(z32)
        assert wide.dtype == np.float64
        assert getattr(keep, method)(z32).dtype == np.float32
        assert getattr(keep, method)(z).dtype == np.float64  # float64 stays
        got = getattr(single, method)(z)
        assert got.dtype == np.float32
        # The same numbers, rounded once to float32 (float64 arithmetic).
        np.testing.assert_array_equal(
            getattr(keep, method)(z32), wide.astype(np.float32)
        )
    with pytest.raises(ValueError, match="dtype"):
        TemperatureScaler(dtype=np.int64).fit(z, y)


@pytest.mark.parametrize("solver", ["grid", "continuous"])
def test_logits_near_the_float32_limit_give_no_runtime_warning(solver):
    # (issue 25) scikit-learn's finiteness test summed +-FLT_MAX rows into
    # inf - inf: "invalid value encountered in reduce" reached the user.
    import warnings

    from skts.metrics import calibration_report

    big = np.finfo(np.float32).max
    z = np.array(
        [[big, big, 0], [-big, -big, 1], [0, 1, 2], [1, 0, 0.5]] * 50,
        dtype=np.float32,
    )
    y = np.array([0, 2, 2, 1] * 50)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        warnings.simplefilter("ignore", UserWarning)  # (the boundary warning)
        scaler = TemperatureScaler(solver=solver).fit(z, y, sample_weight=np.ones(200))
        proba = scaler.predict_proba(z)
        calibration_report(y, proba)
    assert np.isfinite(scaler.validation_loss_)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
