"""One test over every ``Rows`` backend: each named read the searches make
(``skts._numerics.Rows``) gives the in-memory NumPy answer.

The Dask backend runs the very kernel reads on pieces cut at the blocks'
boundaries and folds them in block order: every read is NumPy's bit for bit.
The array-API backend runs the same formulas in the array's namespace with its
own ``exp`` and ``log``: its float64 reads agree with the kernel's within the
proven error bounds, its exact facts, 50-digit values and subsamples are the
same, and so is the grid answer, bit for bit. (In the spirit of
scikit-learn's ``test_common_curve_display.py``.)
"""

import functools

import numpy as np
import pytest

from skts._numerics import EPS, Rows, default_temperatures, search_grid
from skts._numerics._blocks import error64_factor

from _data import strict_rows

da = pytest.importorskip("dask.array", reason="dask is optional (skts[dask])")
xps = pytest.importorskip("array_api_strict", reason="array_api_strict is optional")


def _problem(n=70_000, k=7, seed=0, weighted=True):
    rng = np.random.default_rng(seed)
    z = (rng.normal(size=(n, k)) * 3.0).astype(np.float32)
    y = np.where(rng.random(n) < 0.6, z.argmax(axis=1), rng.integers(0, k, n))
    w = rng.uniform(0.0, 3.0, n) if weighted else None
    return z, y, w


def _numpy(z, y, w):
    return Rows(z, y, w)


def _dask(z, y, w):
    from skts._dask import DaskRows

    # Chunks that do not fall on the blocks' boundaries.
    chunks = (12_345, z.shape[1])
    return DaskRows(
        da.from_array(z, chunks=chunks),
        da.from_array(y, chunks=chunks[:1]),
        None if w is None else da.from_array(w, chunks=chunks[:1]),
    )


BACKENDS = {
    "numpy": _numpy,
    "dask": _dask,
    "array_api_strict": functools.partial(strict_rows, xps),
}
# Backends that cut rows at the blocks' boundaries and run the kernel there.
SAME_BITS = {"numpy", "dask"}


@pytest.fixture(scope="module", params=[True, False], ids=["weighted", "unweighted"])
def problem(request):
    return _problem(weighted=request.param)


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_every_named_read_gives_the_numpy_answer(backend, problem):
    z, y, w = problem
    # The array-API backend reads float64 logits: compare it with NumPy on
    # the same values.
    host = _numpy(z.astype(np.float64) if backend == "array_api_strict" else z, y, w)
    rows = BACKENDS[backend](z, y, w)
    same = backend in SAME_BITS
    assert (rows.n_samples, rows.n_classes) == (host.n_samples, host.n_classes)
    assert rows.total == host.total  # the weights' one normalisation and order
    ts = np.array([0.4, 1.0, 1.0 * (1 + 1e-10), 2.5])

    def check(got, want, bound):
        if same:
            assert np.array_equal(got, want, equal_nan=True)
        else:
            assert np.all(np.abs(np.asarray(got) - np.asarray(want)) <= bound)

    nll = host.nll(ts)
    c64 = error64_factor(host.n_samples, host.n_classes)
    check(rows.nll(ts), nll, 2.0 * c64 * (np.abs(nll) + 1.0))

    for precision in ("float64", "float32"):
        if precision == "float32" and not same:
            continue  # (the device passes have no float32 reads)
        for higher in (False, True):
            want = host.derivatives([0.5, 1.1], precision, higher=higher)
            got = rows.derivatives([0.5, 1.1], precision, higher=higher)
            check(got, want, 1e-9 * (np.abs(want) + 1.0))

    for options in ({}, {"moments": False}, {"higher": True}, {"span": True}):
        t = ts[1:2] if options.get("higher") else ts
        got, want = rows.slopes(t, **options), host.slopes(t, **options)
        assert (got.separable, got.anti_separable) == (
            want.separable,
            want.anti_separable,
        )
        if options.get("moments", True):
            # F' within both reads' proven bounds of each other.
            check(got.values[:, 1], want.values[:, 1], got.bound + want.bound)
            check(got.bound, want.bound, 1e-6 * want.bound)
        check(got.values[:, 0], want.values[:, 0], 2.0 * c64 * (np.abs(nll[0]) + 3.0))
        if options.get("span"):
            assert got.span == want.span
        if options.get("higher"):
            # the cubic model's steps (third and fourth derivatives), as the
            # kernel's
            assert list(got.orders) == list(want.orders) == [4]
            check(got.steps, want.steps, 1e-9 * np.abs(want.steps))

    if same:
        # (the float32 window; the device backend reads float64 there)
        got = rows.window(ts[:3], exact=ts[:1], spread=None, deriv_at=1)
        want = host.window(ts[:3], exact=ts[:1], spread=None, deriv_at=1)
        for a, b in zip(got, want, strict=True):
            assert np.array_equal(a, b)
    else:
        got = rows.window(ts[:3], exact=ts[:1])
        assert np.all(np.abs(got.estimate - nll[:3]) <= got.bound)
        assert got.reference[0] == rows.nll(ts[:1])[0]

    small = slice(0, 300)
    part = BACKENDS[backend](z[small], y[small], None if w is None else w[small])
    part_host = _numpy(
        z[small].astype(np.float64), y[small], None if w is None else w[small]
    )
    values, rel = part.exact([0.7, 1.3])
    want, want_rel = part_host.exact([0.7, 1.3])
    assert rel >= want_rel  # (one rounding more per piece combined)
    for a, b in zip(values, want, strict=True):
        assert abs(a - b) <= rel * abs(b)

    assert rows.flat() == host.flat() is False
    got = rows.subsample(slice(0, 5000, 7))
    want = host.subsample(slice(0, 5000, 7))
    for a, b in zip(got, want, strict=True):
        assert (a is None and b is None) or np.array_equal(a, b)
    assert not rows.readable() or backend == "numpy"


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_the_grid_answer_is_the_same_on_every_backend(backend, problem):
    z, y, w = problem
    zz = z.astype(np.float64) if backend == "array_api_strict" else z
    grid = default_temperatures()
    want = search_grid(_numpy(zz, y, w), grid)
    got = search_grid(BACKENDS[backend](z, y, w), grid)
    assert got.temperature == want.temperature
    if backend in SAME_BITS:
        assert got == want  # every step of the search too
    else:
        assert abs(got.loss - want.loss) <= 1e-6 * want.loss + EPS


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_constant_rows_are_flat_on_every_backend(backend):
    z = np.zeros((500, 4), dtype=np.float32)
    y = np.arange(500) % 4
    w = np.ones(500)
    w[3] = 0.0
    z[3] = [1.0, 2.0, 3.0, 4.0]  # varies, but weighs nothing
    assert BACKENDS[backend](z, y, w).flat()
    assert not BACKENDS[backend](z, y, None).flat()
