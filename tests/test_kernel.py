"""The compiled per-block pass (skts/_kernel.c): its elementary functions meet
the error bounds that the search's proofs use, and its passes agree with the
NumPy passes (the same formulas, read by numpy's own exp and log) within those
bounds, whatever the number of threads."""

import os
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from skts import _kernel
from skts._numerics import Rows, grid_search
from skts._numerics._blocks import error64_factor

_ENTRIES = {
    "nll": _kernel.nll,
    "slopes": _kernel.slopes,
    "derivatives": _kernel.derivatives,
    "window": _kernel.window,
}


def block_pass(z, y, w, total, betas, temperatures, read, **options):
    """One of the kernel's reads, as ``(sums, found)`` (``single`` only where
    the read has a choice; ``facts`` where it has them)."""
    if read != "derivatives":
        options.pop("single", None)
    if read in ("nll", "window"):
        options.pop("facts", None)
    out = _ENTRIES[read](z, y, w, total, betas, temperatures, **options)
    return out if isinstance(out, tuple) else (out, None)


U64 = 2.0**-53
U32 = 2.0**-24


def _rel_error(computed, exact):
    return np.abs((computed.astype(np.longdouble) - exact) / exact)


def test_exp64_within_its_proven_bound():
    rng = np.random.default_rng(0)
    x = np.concatenate(
        [
            -rng.uniform(0, 700, 400_000),
            -rng.uniform(0, 1, 100_000),
            # Around the odd multiples of ln(2) / 4, where k (half steps of
            # ln 2) may round either way, and at the ends of the domain.
            -(np.arange(1, 2000) + 0.5) * np.log(2) / 2 + rng.normal(0, 1e-12, 1999),
            [0.0, -1e-300, -0.1733, -0.3466, -700.0, -708.0],
        ]
    )
    exact = np.exp(x.astype(np.longdouble))
    assert _rel_error(_kernel._exp64(x), exact).max() < 3.2 * U64


def test_exp32_within_its_proven_bound():
    rng = np.random.default_rng(1)
    x = np.concatenate(
        [-rng.uniform(0, 87, 400_000), -rng.uniform(0, 1, 100_000), [0.0, -87.0]]
    ).astype(np.float32)
    exact = np.exp(x.astype(np.longdouble))
    assert _rel_error(_kernel._exp32(x), exact).max() < 4.4 * U32


def test_log_and_log1p_within_their_proven_bounds():
    rng = np.random.default_rng(2)
    s = np.concatenate(
        [np.exp(rng.uniform(0, 700, 300_000)), 1.0 + rng.uniform(0, 1, 100_000)]
    )
    s = np.concatenate([s, [1.5, np.nextafter(1.5, 0), 2.0, 3.0, 1e308]])
    exact = np.log(s.astype(np.longdouble))
    live = exact != 0
    assert _rel_error(_kernel._log64(s)[live], exact[live]).max() < 5 * U64
    assert _kernel._log64(np.array([1.0]))[0] == 0.0  # a row sum of 1: loss 0
    e = np.concatenate([rng.uniform(0, 1, 300_000), 10.0 ** -rng.uniform(0, 300, 1000)])
    exact = np.log1p(e.astype(np.longdouble))
    assert _rel_error(_kernel._log1p64(e), exact).max() < 5 * U64


@pytest.mark.parametrize("k", [3, 100])
def test_a_pair_of_close_points_shares_one_read_of_exponentials(k):
    # pair=True: the second beta's exponentials are derived from the first's
    # (the same values to a few units of the last place, often the same
    # bits); betas further apart than 1e-9 relative are read one by one
    # whatever is asked.
    rng = np.random.default_rng(3)
    z = rng.normal(scale=4.0, size=(3000, k))
    y = rng.integers(0, k, 3000)

    def run(betas, pair):
        sums, _ = block_pass(
            z, y, None, 3000.0, betas, [1 / b for b in betas], "slopes", pair=pair
        )
        return sums.sum(axis=0)

    close = [0.4, 0.4 * (1 + 5e-10)]
    shared, apart = run(close, True), run(close, False)
    assert np.array_equal(shared[0], apart[0])  # the first point: the same
    assert np.allclose(shared[1], apart[1], rtol=1e-13, atol=0)
    far = [0.4, 0.41]
    assert np.array_equal(run(far, True), run(far, False))


def _cumulant_reference(z, y, w, beta):
    """The weighted means of each row's third and fourth cumulants of d under
    softmax(beta d), in long double."""
    d = z.astype(np.longdouble) - z.max(axis=1, keepdims=True)
    e = np.exp(beta * d)
    s = e.sum(axis=1)
    m1, m2, m3, m4 = ((e * d**j).sum(axis=1) / s for j in (1, 2, 3, 4))
    k3 = m3 - 3 * m1 * m2 + 2 * m1**3
    k4 = m4 - 4 * m1 * m3 - 3 * m2**2 + 12 * m1**2 * m2 - 6 * m1**4
    w = np.ones(len(y)) if w is None else w
    return (w * k3).sum() / w.sum(), (w * k4).sum() / w.sum()


@pytest.mark.parametrize("k", [10, 100, 3000])
@pytest.mark.parametrize("weighted", [False, True])
def test_higher_derivatives_match_a_long_double_reference(k, weighted):
    # higher=True adds the sums of the rows' third and fourth cumulants of d
    # (the third and fourth derivatives of F in beta, which steer the cubic
    # model's steps), in float64 (SLOPES) and float32 (DERIV) arithmetic;
    # every other sum keeps its bits.
    rng = np.random.default_rng(k)
    n = 60_000 // k
    z = (rng.normal(scale=3.0, size=(n, k))).astype(np.float32)
    y = rng.integers(0, k, n)
    w = rng.uniform(0, 2, n) if weighted else None
    total = float(n if w is None else w.sum())
    beta = 0.7
    want = _cumulant_reference(z, y, w, beta)
    for mode, options, rtol in [
        ("slopes", {"moments": True}, 1e-10),
        ("derivatives", {"single": True}, 2e-4),
        ("derivatives", {"single": False}, 1e-10),
    ]:
        plain, _ = block_pass(
            z, y, w, total, [beta], [1 / beta], mode, n_threads=2, **options
        )
        more, _ = block_pass(
            z,
            y,
            w,
            total,
            [beta],
            [1 / beta],
            mode,
            n_threads=2,
            higher=True,
            **options,
        )
        assert more.shape[2] == plain.shape[2] + 2
        assert np.array_equal(more[:, :, : plain.shape[2]], plain)
        got = more.sum(axis=0)[0, -2:]
        np.testing.assert_allclose(got, np.array(want, dtype=float), rtol=rtol)
    with pytest.raises(TypeError, match="higher"):
        block_pass(z, y, w, total, [beta], [1 / beta], "nll", higher=True)
    with pytest.raises(ValueError, match="higher"):
        block_pass(
            z,
            y,
            w,
            total,
            [beta, beta * (1 + 1e-10)],
            [1 / beta, 1 / beta],
            "slopes",
            pair=True,
            higher=True,
        )


@pytest.mark.parametrize(
    ("degree", "unit", "r_max", "claimed", "remainder"),
    [
        (11, Fraction(1, 2**53), 1733, 1.5, Fraction(2, 100)),  # half steps of ln 2
        (7, Fraction(1, 2**24), 3466, 2.9, Fraction(13, 100)),
    ],
)
def test_horner_error_bound_of_exp(degree, unit, r_max, claimed, remainder):
    # The running-error bound the comments of _kernel.h quote, in exact
    # rational arithmetic, over |r| <= r_max / 10**4: with q_i = c_i + r q_{i+1}
    # (c_i = 1/i!, rounded except c_0 = c_1 = 1), the relative error of the
    # computed q_i is at most e_i <= (u c_i + |r| q_{i+1} (e_{i+1} + u)) / q_i + u
    # (first order; the claim leaves room for the second).
    import math

    worst = Fraction(0)
    for r in [Fraction(k, 10_000) for k in range(-r_max, r_max + 1, 31)]:
        q = Fraction(1, math.factorial(degree))
        e = unit  # the rounding of the leading coefficient
        for i in range(degree - 1, -1, -1):
            c = Fraction(1, math.factorial(i))
            rounded = 0 if i <= 1 else unit
            new_q = c + r * q
            e = (rounded * c + abs(r) * q * (e + unit)) / abs(new_q) + unit
            q = new_q
        worst = max(worst, e)
    assert worst / unit < claimed
    # The Taylor remainder the comments quote (below 0.02u, 0.13u): e^|r|
    # |r|^(degree + 1) / (degree + 1)!, with e^0.1733 < 1.19, e^0.3466 < 1.4165.
    e_r = Fraction(11_900, 10_000) if r_max == 1733 else Fraction(14_165, 10_000)
    rem = e_r * Fraction(r_max, 10_000) ** (degree + 1) / math.factorial(degree + 1)
    assert rem < remainder * unit


def _cases():
    rng = np.random.default_rng(3)
    for n, k in [(700, 2), (500, 3), (400, 10), (300, 33), (200, 100), (7, 5000)]:
        for dtype in (np.float32, np.float64):
            z = rng.normal(scale=4.0, size=(n, k)).astype(dtype)
            y = np.where(rng.random(n) < 0.6, z.argmax(1), rng.integers(0, k, n))
            w = rng.uniform(0, 2, n)
            w[::7] = 0.0
            yield f"{n}x{k}-{np.dtype(dtype).name}", z, y, w


CASES = list(_cases())


def _strided_view(z):
    """The same logits as a view the kernel cannot read in place (handed to
    it block by block, as contiguous copies)."""
    wide = np.empty((z.shape[0], 2 * z.shape[1]), dtype=z.dtype)
    wide[:, ::2] = z
    view = wide[:, ::2]
    assert not _kernel.supports(view) and _kernel.supports(z)
    return view


def _reference(z, y, w, temperatures):
    """Slow, obviously-correct (F, F', F'') per temperature, in extended
    precision (numpy's longdouble: 64-bit significand here)."""
    z = z.astype(np.longdouble)
    w = (
        np.ones(z.shape[0], dtype=np.longdouble)
        if w is None
        else w.astype(np.longdouble)
    )
    out = []
    for t in temperatures:
        u = (z - z.max(axis=1, keepdims=True)) / np.longdouble(t)
        e = np.exp(u)
        s = e.sum(axis=1)
        p = e / s[:, None]
        loss = -(u[np.arange(len(y)), y] - np.log(s))
        mean_z = (p * z).sum(axis=1)
        slope = mean_z - z[np.arange(len(y)), y]  # dF/dbeta per row
        var = (p * (z - mean_z[:, None]) ** 2).sum(axis=1)
        out.append([(w * v).sum() / w.sum() for v in (loss, slope, var)])
    return np.array(out, dtype=np.float64)


@pytest.mark.parametrize(("name", "z", "y", "w"), CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("weighted", [False, True])
def test_passes_agree_with_a_reference_within_their_bounds(name, z, y, w, weighted):
    w = w if weighted else None
    rows = Rows(z, y, w)
    ts = [0.05, 0.7, 1.0, 3.0, 40.0]
    ref = _reference(z, y, w, ts)
    nll = rows.nll(ts)
    c64 = error64_factor(rows.n_samples, rows.n_classes)
    assert np.all(np.abs(nll - ref[:, 0]) <= c64 * (np.abs(ref[:, 0]) + 1))
    # F' within its proven bound; F and F'' close; the exact facts exact.
    slopes = rows.slopes(ts)
    assert np.array_equal(slopes.values[:, 0], nll)
    assert np.all(np.abs(slopes.values[:, 1] - ref[:, 1]) <= slopes.bound)
    assert np.allclose(slopes.values[:, 2], ref[:, 2], rtol=1e-9, atol=1e-12)
    live = np.ones(len(y), bool) if w is None else w > 0
    zy = z[np.arange(len(y)), y]
    varies = bool(np.any((z.max(1) > z.min(1)) & live))
    assert slopes.separable == (bool(np.all((zy == z.max(1))[live])) and varies)
    assert slopes.anti_separable == (bool(np.all((zy == z.min(1))[live])) and varies)
    # Two points 1e-10 apart (a straddle) read as a pair, the second's
    # exponentials from the first's: F' still within its bound, F within
    # nll's, and at the first point nll's bits.
    for t in (0.7, 3.0):
        pair = [t, t * (1 + 1e-10)]
        got = rows.slopes(pair)
        near = _reference(z, y, w, pair)
        assert np.all(np.abs(got.values[:, 1] - near[:, 1]) <= got.bound)
        assert np.all(
            np.abs(got.values[:, 0] - near[:, 0]) <= c64 * (np.abs(near[:, 0]) + 1)
        )
        assert np.allclose(got.values[:, 2], near[:, 2], rtol=1e-9, atol=1e-12)
        assert got.values[0, 0] == rows.nll(pair[:1])[0]
    # Derivatives in beta (float32 and float64 arithmetic): steering values.
    betas = [1 / t for t in ts]
    for precision, rtol in (("float64", 1e-9), ("float32", 2e-4)):
        got = rows.derivatives(betas, precision)
        assert np.allclose(got[:, 0], ref[:, 0], rtol=rtol, atol=1e-6)
        assert np.allclose(got[:, 1], ref[:, 1], rtol=rtol, atol=1e-5)
        assert np.allclose(got[:, 2], ref[:, 2], rtol=100 * rtol, atol=1e-4)
    # The float32 window: every estimate within its proven bound; the fused
    # float64 values are nll's, bit for bit.
    est, err, exact, none = rows.window(np.array(ts), exact=np.array(ts[:2]))
    assert np.all(np.abs(est - ref[:, 0]) <= err)
    assert np.array_equal(exact, nll[:2])
    assert none is None
    # The same read gives F' and F'' at one of them: the float32 derivative
    # pass's values (its bits above two classes, whose windows read float32
    # exponentials too).
    for at in range(len(ts)):
        again, _, _, slope = rows.window(np.array(ts), deriv_at=at)
        assert np.array_equal(again, est)
        _, g, h = rows.derivatives([1 / ts[at]], "float32")[0]
        if z.shape[1] > 2:
            assert slope == (g, h)
        assert slope == pytest.approx((ref[at, 1], ref[at, 2]), rel=2e-2, abs=1e-4)
    # A view the kernel reads block by block gives the very same bits.
    view = Rows(_strided_view(z), y, w)
    assert np.array_equal(view.nll(ts), nll)
    assert np.array_equal(view.slopes(ts).bound, slopes.bound)
    assert np.array_equal(view.window(np.array(ts)).estimate, est)


@pytest.mark.parametrize("k", [2, 3, 10, 16, 20, 32, 33])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_warm_start_facts_are_exact_with_ties(k, dtype):
    # The warm start's float32 read tells whether every label of positive
    # weight has its row's largest / smallest logit: exact, with ties, at any
    # number of classes (at 32 or fewer, float32 extremes are found in float32
    # across rows; above, row by row).
    rng = np.random.default_rng(k)
    for kind in ("largest", "smallest", "any"):
        for n in (1, 17, 2500):
            z = rng.integers(-3, 3, size=(n, k)).astype(dtype)  # many ties
            y = {
                "largest": z.argmax(axis=1),
                "smallest": z.argmin(axis=1),
                "any": rng.integers(0, k, n),
            }[kind]
            w = rng.choice([0.0, 1.0, 2.5], size=n)
            if kind == "any" and n > 1:
                # one row of weight 0 that alone breaks each fact
                y[0], w[0] = (z[0].argmax() + 1) % k, 0.0
            for weights in (None, w):
                live = np.ones(n, bool) if weights is None else weights > 0
                if not live.any():
                    continue
                _, found = Rows(z, y, weights).moments(1.0, facts=True)
                zy = z[np.arange(n), y]
                assert found == (
                    bool(np.all((zy == z.max(axis=1))[live])),
                    bool(np.all((zy == z.min(axis=1))[live])),
                )


@pytest.mark.parametrize(
    ("name", "z", "y", "w"), CASES[:6], ids=[c[0] for c in CASES[:6]]
)
def test_window_bound_holds_against_high_precision(name, z, y, w):
    rows = Rows(z[:60], y[:60], w[:60])
    ts = np.array([0.3, 1.0, 2.5])
    est, err, _, _ = rows.window(ts)
    exact, _ = rows.exact(ts)
    assert np.all(np.abs(est - np.array([float(v) for v in exact])) <= err)


@pytest.mark.parametrize(
    ("n", "k"), [(1003, 3), (1003, 10), (301, 32), (301, 33), (150, 1000)]
)
def test_unweighted_window_takes_the_log_of_products_of_rows(n, k):
    # Unweighted, at most 32 classes, the window adds the logarithm of a
    # product of up to 8 rows' S (one logarithm per 8 rows): within (8 + 40
    # log K) float64 units of those rows' log S, far inside the float32 units
    # its bound counts. Wider rows take a log S per row (their exponentials
    # dwarf it), weighted or not: the same bits.
    # Against the same read with every weight 1 (a log S per row) and
    # against 40-digit values; n is no multiple of 16 (a chunk of rows ends
    # with a partial vector of products). Most labels are their row's
    # largest logit (the loss is then log S alone: the two sums differ).
    rng = np.random.default_rng(k)
    z = rng.normal(scale=3.0, size=(n, k)).astype(np.float32)
    z[::7] *= 20.0  # (spread rows: S near 1; flat ones: S near K)
    z[1::7] *= 0.01
    y = rng.integers(0, k, n)
    top = rng.random(n) < 0.7
    y[top] = z.argmax(axis=1)[top]
    ts = np.array([0.5, 1.0, 2.5])
    plain = Rows(z, y).window(ts)
    ones = Rows(z, y, np.ones(n)).window(ts)
    assert np.array_equal(plain.bound, ones.bound)
    per_row = (8 + 40 * np.log(k)) * U64 + 64 * U64 * np.abs(ones.estimate)
    assert np.all(np.abs(plain.estimate - ones.estimate) <= per_row)
    # (another sum at most 32 classes; the same one above)
    assert np.array_equal(plain.estimate, ones.estimate) == (k > 32)
    if k <= 33:
        exact, _ = Rows(z, y).exact(ts, digits=40)
        exact = np.array([float(v) for v in exact])
        assert np.all(np.abs(plain.estimate - exact) <= plain.bound)
    # A row's own S, alone: its product is itself (log S, the same bits).
    for i in (0, 1, n - 1):
        alone = Rows(z[i : i + 1], y[i : i + 1])
        weighted = Rows(z[i : i + 1], y[i : i + 1], np.ones(1))
        assert np.array_equal(alone.window(ts).estimate, weighted.window(ts).estimate)


@pytest.mark.parametrize(
    ("k", "scale"),
    [(10, 4.0), (33, 30.0), (1000, 0.05), (1000, 6.0), (5000, 1.0)],
    ids=["10-spread", "33-very-spread", "1000-flat", "1000-spread", "5000"],
)
def test_float32_window_bound_holds_row_by_row_and_counts_no_float32_log(k, scale):
    # One row at a time (an average over rows would hide a row whose errors
    # all fall one way), float32 logits, through both ways the kernel reads
    # wide rows (maxima found by the read itself, and known from a previous
    # read): the window's bound holds against 50-digit values, and it is the
    # documented u (8 + r + log2 K + 3 E_p|u|), doubled, with no term in
    # log S (flat rows of 1,000 classes have log S near 6.9: the first,
    # NumPy, version's float32 sum and log counted 24 + 8 log S units more).
    rng = np.random.default_rng(k)
    ts = np.array([0.4, 1.0, 3.0])
    run = 7.0 if k > 32 else 0.0
    for i in range(4):
        z = rng.normal(scale=scale, size=(1, k)).astype(np.float32)
        y = np.array([i % k])
        rows = Rows(z, y)
        for read in range(2):  # (the second with the row's maxima known)
            if k > 32:
                assert (rows._maxima.values is not None) == (read == 1)
            for t in ts:
                est, err, _, _ = rows.window(np.array([t]))
                exact, _ = rows.exact([t])
                assert abs(est[0] - float(exact[0])) <= err[0]
                d = z[0].astype(np.float64) - z[0].max()
                p = np.exp(d / t) / np.exp(d / t).sum()
                mean_abs_u = float(-(p * d).sum() / t)
                documented = 2 * U32 * (8.0 + run + np.log2(k) + 3.0 * mean_abs_u)
                slack = 1e-12 + 4e-38 * k + 1e-3 * documented
                assert documented <= err[0] <= documented + slack


@pytest.mark.parametrize(
    ("k", "scale"),
    [
        (3, 2.0),
        (10, 4.0),
        (32, 0.3),
        (33, 30.0),
        (1000, 0.05),
        (1000, 6.0),
        (5000, 1.0),
    ],
    ids=[
        "3",
        "10-spread",
        "32-flat",
        "33-very-spread",
        "1000-flat",
        "1000-spread",
        "5000",
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_window_slopes_hold_against_high_precision_row_by_row(k, scale, dtype):
    # The window's F' at every candidate (slopes=True), one row at a time (an
    # average over rows would hide a row whose errors all fall one way): within
    # its proven bound of F' at 60 digits, and that bound is the documented
    # 2 u32 (M1 (20 + c + r + log2 K + 3 beta M1) + 3.01 beta M2) + 4 u64 (g +
    # M1) + K (T 1e-35 + M1 1e-37) (c: the moments' longest float32 sum),
    # plus the weighted sum's roundings. The slopes change neither the
    # estimates nor their bounds, and F' is the bits of a deriv_at read's.
    from _reference import exact_slope

    rng = np.random.default_rng(k)
    ts = np.array([0.4, 1.0, 3.0])
    run = 7.0 if k > 32 else 0.0
    chain = -(-k // 16) if k > 32 else k
    for i in range(3):
        z = rng.normal(scale=scale, size=(1, k)).astype(dtype)
        y = np.array([(7 * i) % k])
        rows = Rows(z, y)
        read = rows.window(ts, slopes=True)
        plain = rows.window(ts)
        assert np.array_equal(read.estimate, plain.estimate)
        assert np.array_equal(read.bound, plain.bound)
        g, bound = read.slopes
        for q, t in enumerate(ts):
            exact = float(exact_slope(z, y, 1.0 / t))
            assert abs(g[q] - exact) <= bound[q]
            assert g[q] == rows.window(ts, deriv_at=q).slope[0]
            zd = z[0].astype(np.float64)
            d = zd - zd.max()
            p = np.exp(d / t) / np.exp(d / t).sum()
            m1, m2, gap = float(-(p * d).sum()), float((p * d * d).sum()), -d[y[0]]
            documented = (
                2
                * U32
                * (m1 * (20 + chain + run + np.log2(k) + 3 * m1 / t) + 3.01 * m2 / t)
                + 4 * U64 * (gap + m1)
                + k * (t * 1e-35 + m1 * 1e-37)
            )
            assert documented * (1 - 1e-4) <= bound[q] <= documented * 1.001 + 1e-12
            # (useful: far below the slope one grid step from a minimum)
            assert bound[q] <= 1e-3 * (1.0 + m1)


def test_window_slopes_hold_for_weighted_rows_and_any_thread_count():
    # Many rows, weights (some 0), float32: F' within its bound of 60 digits,
    # the same bits on 1 and 2 threads; two classes have no slopes (their
    # window is float64, with its own bound).
    from _reference import exact_slope

    rng = np.random.default_rng(5)
    n, k = 700, 40
    z = rng.normal(scale=3.0, size=(n, k)).astype(np.float32)
    y = np.where(rng.random(n) < 0.6, z.argmax(1), rng.integers(0, k, n))
    w = rng.choice([0.0, 0.5, 1.0, 3.0], size=n)
    ts = np.array([0.7, 0.9])
    reads = [Rows(z, y, w, n_jobs).window(ts, slopes=True) for n_jobs in (1, 2)]
    assert np.array_equal(reads[0].slopes[0], reads[1].slopes[0])
    g, bound = reads[0].slopes
    for q, t in enumerate(ts):
        assert abs(g[q] - float(exact_slope(z, y, 1.0 / t, w))) <= bound[q]
    assert Rows(z[:, :2], y % 2).window(ts, slopes=True).slopes is None
    with pytest.raises(ValueError, match="more than two classes"):
        _kernel.window(z[:, :2], y % 2, None, float(n), 1.0 / ts, ts, slopes=True)


@pytest.mark.parametrize("k", [3, 10, 32, 33, 100, 1000])
@pytest.mark.parametrize("scale", [0.3, 3.0, 30.0])
def test_window_curvature_holds_against_high_precision_row_by_row(k, scale):
    # With slopes and span, the window's F'' at every candidate, one row at a
    # time: within its proven bound (skts._numerics._blocks.curvature_bound)
    # of 60 digits, at temperatures whose exponents reach the clamp at -87
    # (scale 30 at T 0.05) and at ones far from it. The span is the row's
    # range, and the bound is useful where F'' is not tiny (at least 1e-3 and
    # a tenth of E_p[d**2], of which its error is a part): below 1% of it.
    # The estimates, their bounds and the slopes keep their bits.
    from _reference import exact_curvature

    rng = np.random.default_rng(k)
    ts = np.array([0.05, 0.4, 1.0, 3.0])
    for i in range(3):
        z = (rng.standard_t(3, size=(1, k)) * scale).astype(np.float32)
        y = np.array([(7 * i) % k])
        rows = Rows(z, y)
        read = rows.window(ts, slopes=True, span=True)
        plain = rows.window(ts, slopes=True)
        assert read.span == float(np.ptp(z.astype(np.float64)))
        assert plain.curvature is None and plain.span == np.inf
        for a, b in ((read.estimate, plain.estimate), (read.bound, plain.bound)):
            assert np.array_equal(a, b)
        assert np.array_equal(read.slopes[0], plain.slopes[0])
        h, bound = read.curvature
        d = z[0].astype(np.float64) - z.max()
        for q, t in enumerate(ts):
            exact = exact_curvature(z, y, 1.0 / t)
            assert abs(mpmath.mpf(h[q]) - exact) <= bound[q]
            p = np.exp(d / t) / np.exp(d / t).sum()
            if h[q] >= max(0.1 * (p * d * d).sum(), 1e-3):  # (F'' not tiny)
                assert bound[q] <= 1e-2 * h[q]


@pytest.mark.parametrize("t", [0.02, 0.3, 1.0, 5.0])
def test_window_curvature_holds_where_the_variance_is_small_against_its_moments(t):
    # F'' = M2 - M1**2 cancels where most of the mass sits at one d far from
    # 0 (999 classes 2 below the top one): its error is relative to M2, not
    # to F''; the bound (from the slope's, which counts M2) still holds, and
    # with weights (some 0) on 1 and 2 threads (the same bits).
    from _reference import exact_curvature

    k = 1000
    z = np.full((4, k), -2.0, dtype=np.float32)
    z[:, 0] = 0.0
    z[1, 1:] = np.linspace(-2.001, -1.999, k - 1, dtype=np.float32)
    z[2, 5] = 40.0  # (a far top, its others clamped at small t)
    z[3] *= 7.0
    y = np.array([0, 3, 5, 9])
    w = np.array([1.0, 0.0, 2.5, 0.5])
    reads = [
        Rows(z, y, w, n_jobs).window([t], slopes=True, span=True) for n_jobs in (1, 2)
    ]
    assert np.array_equal(reads[0].curvature[0], reads[1].curvature[0])
    assert reads[0].span == 42.0  # (rows of weight 0 count too)
    h, bound = reads[0].curvature
    exact = exact_curvature(z, y, 1.0 / t, w)
    assert abs(mpmath.mpf(h[0]) - exact) <= bound[0]
    assert bound[0] < np.inf


def _grouped_row_sum(e):
    """The kernel's float32 row sum S of a narrow row's exponentials (at most
    32 classes): groups of g classes (4 from 8 classes, 2 from 4, else 1),
    each summed in float32 as a balanced tree, the groups added in float64
    in class order. Also returns g."""
    k = e.shape[0]
    g = 4 if k >= 8 else 2 if k >= 4 else 1
    s, j = 0.0, 0
    for size in (4, 2, 1):
        if size > g:
            continue
        while j + size <= k:
            part = e[j : j + size]
            if size == 4:
                t = (part[0] + part[1]) + (part[2] + part[3])
            elif size == 2:
                t = part[0] + part[1]
            else:
                t = part[0]
            s += float(np.float32(t))
            j += size
    return s, g


@pytest.mark.parametrize("k", [3, 4, 5, 7, 8, 9, 10, 15, 16, 31, 32])
def test_float32_row_sum_is_the_grouped_sum_within_its_units(k):
    # A narrow row's exponentials are added in float32 groups (a balanced
    # tree of 4 from 8 classes, of 2 from 4), the groups in float64: the
    # window's estimate for a single row, gap * beta + log S, is that sum's
    # (the sum emulated from the kernel's own exponentials; not the
    # sequential float64 sum, which differs for some rows), and the sum is
    # within log2(g) + 1e-6 float32 units of the exact sum of the same
    # exponentials, at most log2 K - 1 units: inside the log2 K that the
    # window's bound counts for S.
    rng = np.random.default_rng(k)
    t = 0.8
    beta32 = np.float32(1.0 / t)
    differs = 0
    for i in range(60):
        z = rng.normal(scale=2.0, size=(1, k)).astype(np.float32)
        y = np.array([i % k])
        est = Rows(z, y).window(np.array([t])).estimate[0]
        d = z[0] - z[0].max()  # float32, as the kernel centres
        x = np.maximum(d * beta32, np.float32(-87.0))
        e = _kernel._exp32(x)
        s, g = _grouped_row_sum(e)
        gap = float(z[0].max()) - float(z[0, y[0]])
        want = gap * (1.0 / t) + float(_kernel._log64(np.array([s]))[0])
        assert abs(est - want) <= 1e-15 * max(abs(want), 1.0)
        sequential = 0.0
        for v in e:
            sequential += float(v)
        differs += s != sequential
        exact = sum(Fraction(float(v)) for v in e)
        rel = abs(Fraction(s) - exact) / exact
        assert rel <= (np.log2(g) + 1e-6) * Fraction(U32)
        assert rel <= max(np.log2(k) - 1, 1e-6) * Fraction(U32)
    if k >= 4:
        assert differs > 0  # (the test tells the grouped sum from the sequential)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k", [2, 3, 4, 5, 8, 10, 17, 21, 32])
def test_each_row_of_a_chunk_is_read_as_that_row_alone(k, dtype):
    # Rows of at most 32 classes are read class-major: each chunk is
    # transposed (float32 to float32 four rows by four classes at a time
    # where the vectors allow, the last rows one value at a time; to float64
    # by the strided copy). With one row weighted 1 and the others 0, a read
    # of all the rows is that row's value alone, which must be the row's own
    # read, bit for bit, wherever the row lies: first, in a tile, in the last
    # tile, or after the tiles (of 103 rows, 100 to 102); in float32 reads
    # and float64 ones, of float32 and float64 logits.
    rng = np.random.default_rng(k)
    n = 103
    z = rng.normal(scale=3.0, size=(n, k)).astype(dtype)
    y = rng.integers(0, k, n)
    t = np.array([0.7, 1.3])
    for i in (0, 1, 6, 50, 97, 99, 100, 101, 102):
        w = np.zeros(n)
        w[i] = 1.0
        whole, alone = Rows(z, y, w), Rows(z[i : i + 1], y[i : i + 1])
        assert whole.window(t).estimate.tolist() == alone.window(t).estimate.tolist()
        for precision in ("float32", "float64"):
            assert (
                whole.derivatives([0.9], precision).tolist()
                == alone.derivatives([0.9], precision).tolist()
            )
        assert whole.nll(t).tolist() == alone.nll(t).tolist()


def test_kernel_sums_do_not_depend_on_threads():
    rng = np.random.default_rng(4)
    z = rng.normal(scale=3.0, size=(300_000, 10)).astype(np.float32)
    y = rng.integers(0, 10, z.shape[0])
    w = rng.uniform(0, 1, z.shape[0])
    runs = [
        block_pass(
            z,
            y,
            w,
            float(w.sum()),
            [0.5, 1.0],
            [2.0, 1.0],
            mode,
            single=single,
            n_threads=threads,
        )[0]
        for mode, single in (
            ("nll", False),
            ("slopes", False),
            ("derivatives", True),
            ("window", True),
        )
        for threads in (1, 2, 3)
    ]
    for i in range(0, len(runs), 3):
        assert runs[i].shape[0] > 4  # several blocks
        assert np.array_equal(runs[i], runs[i + 1], equal_nan=True)
        assert np.array_equal(runs[i], runs[i + 2], equal_nan=True)


def test_extreme_logits_keep_the_exact_rule():
    # Logits near the float32 and float64 limits: the kernel clips as the
    # NumPy passes do, and the search still matches high precision.
    for dtype, big in ((np.float32, 3e38), (np.float64, 1e308)):
        z = np.array(
            [[big, -big, 0.0], [-big, big, 1.0], [0.0, 1.0, 2.0], [1.0, 0.0, 0.5]],
            dtype=dtype,
        )
        y = np.array([0, 2, 2, 1])
        grid = np.array([0.5, 1.0, 2.0])
        res = grid_search(z, y, grid)
        exact, _ = Rows(z, y).exact(grid)
        assert res.temperature == grid[int(np.argmin(exact))]


def test_softmax_kernel_matches_high_precision():
    rng = np.random.default_rng(5)
    z = rng.normal(scale=20.0, size=(50, 7))
    for log in (False, True):
        for out_dtype in (np.float64, np.float32):
            got = _kernel.softmax(z, 1 / 1.7, log, out_dtype)
            assert got.dtype == out_dtype
            with mpmath.workdps(40):
                for i in (0, 17, 49):
                    row = [mpmath.mpf(float(v)) / mpmath.mpf(1.7) for v in z[i]]
                    lse = mpmath.log(mpmath.fsum(mpmath.exp(v) for v in row))
                    want = [
                        float(v - lse) if log else float(mpmath.exp(v - lse))
                        for v in row
                    ]
                    tol = 1e-6 if out_dtype == np.float32 else 1e-13
                    assert np.allclose(
                        got[i], want, rtol=tol, atol=1e-300 if not log else tol
                    )


def test_every_kth_row_is_read_in_place_with_the_same_bits():
    # Above 32 classes the kernel reads rows any distance apart (the warm
    # start's subsample is then a view, not a copy).
    rng = np.random.default_rng(6)
    z = rng.normal(scale=3.0, size=(3000, 40)).astype(np.float32)
    y = rng.integers(0, 40, z.shape[0])
    view = z[::3]
    assert _kernel.supports(view) and not view.flags.c_contiguous
    assert not _kernel.supports(view, strided=False)
    assert not _kernel.supports(z[:, :10][::3])  # (32 classes or fewer: no)
    copy = np.ascontiguousarray(view)
    for mode, single in (
        ("nll", False),
        ("slopes", False),
        ("derivatives", True),
        ("window", True),
    ):
        a = block_pass(
            view,
            y[::3],
            None,
            1000.0,
            [0.7],
            [1 / 0.7],
            mode,
            single=single,
            facts=True,
        )
        b = block_pass(
            copy,
            y[::3],
            None,
            1000.0,
            [0.7],
            [1 / 0.7],
            mode,
            single=single,
            facts=True,
        )
        assert np.array_equal(a[0], b[0], equal_nan=True)
        assert np.array_equal(a[1], b[1])


@pytest.mark.parametrize("k", [2, 10, 32, 40])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_a_subsample_is_a_contiguous_copy_of_its_rows(k, dtype, tmp_path):
    # The warm start's subsample of rows the kernel cannot read in place
    # (every k-th row at 32 classes or fewer) is copied row by row as one
    # item each: the very rows, a plain contiguous aligned array that shares
    # no memory with the data, from arrays and memory maps alike.
    from skts._numerics._steer import subsample_rows

    rng = np.random.default_rng(k)
    n = 3001
    z = rng.normal(scale=3.0, size=(n, k)).astype(dtype)
    y = rng.integers(0, k, n)
    w = rng.random(n)
    np.save(tmp_path / "z.npy", z)
    mapped = np.load(tmp_path / "z.npy", mmap_mode="r")
    for data in (z, mapped):
        for rows in (slice(0, n, 7), slice(5, n - 3, 2), subsample_rows(n, k)):
            sub, sub_y, sub_w = Rows(data, y, w).subsample(rows)
            assert type(sub) is np.ndarray and sub.dtype == dtype
            assert sub.flags.c_contiguous and sub.flags.aligned
            assert not np.shares_memory(sub, data)
            assert np.array_equal(sub, z[rows])
            assert np.array_equal(sub_y, y[rows]) and np.array_equal(sub_w, w[rows])
    del mapped


def test_rows_hold_their_labels_and_weights_contiguous():
    # The warm start's sample (every k-th row, in place above 32 classes, a
    # copy below) comes with every k-th label and weight: Rows holds them
    # contiguous (else the kernel would copy them again on each read), the
    # very values; contiguous ones as given, without a copy.
    from skts._numerics._steer import subsample_rows

    rng = np.random.default_rng(0)
    for n, k in ((50_000, 64), (300_000, 10)):
        z = rng.normal(size=(n, k)).astype(np.float32)
        y = rng.integers(0, k, n)
        w = rng.random(n)
        rows = subsample_rows(n, k)
        assert rows.step > 1
        data = Rows(z, y, w)
        assert np.shares_memory(data.y, y) and np.shares_memory(data.sample_weight, w)
        got = data.view(rows) or data.subsample(rows)
        assert (data.view(rows) is not None) == (k > 32)
        sample = Rows(*got)
        assert sample.y.flags.c_contiguous and sample.sample_weight.flags.c_contiguous
        assert np.array_equal(sample.y, y[rows])
        assert np.array_equal(sample.sample_weight, w[rows])
        strided = Rows(z[rows], y[rows], None)
        assert strided.y.flags.c_contiguous and np.array_equal(strided.y, y[rows])


def test_small_data_is_its_own_warm_start_and_leaves_no_scratch(monkeypatch):
    # 5,000 x 10: the subsample would be the whole data set, so none is made
    # (no copy); and the compiled passes keep no scratch memory after a fit.
    import threading

    import skts._numerics as numerics
    from skts._numerics import _blocks

    rng = np.random.default_rng(7)
    z = rng.normal(scale=3.0, size=(5000, 10)).astype(np.float32)
    y = rng.integers(0, 10, z.shape[0])

    def no_copy(self, rows):
        raise AssertionError("a subsample was copied")

    monkeypatch.setattr(numerics.Rows, "subsample", no_copy)
    monkeypatch.setattr(_blocks, "_LOCAL", threading.local())
    res = grid_search(z, y, numerics.default_temperatures())
    exact, _ = Rows(z, y).exact([res.temperature])
    assert abs(res.loss - float(exact[0])) < 1e-12
    assert not getattr(_blocks._LOCAL, "buffers", {})  # no cached scratch


def test_threads_are_every_core_from_2_18_logits(monkeypatch):
    from skts._numerics import _threads as numerics

    monkeypatch.setattr(numerics, "cpu_count", lambda: 4)
    monkeypatch.setattr(numerics, "others_running", lambda: 0)
    assert numerics.kernel_threads(None, 1 << 18) == 4
    assert numerics.kernel_threads(None, (1 << 18) - 1) == 1
    assert numerics.kernel_threads(-1, 1000) == 4
    assert numerics.kernel_threads(-2, 1000) == 3
    assert numerics.kernel_threads(3, 1 << 20) == 3
    # Short passes on a busy machine: the cores others leave idle (a worker
    # that waits for a core stalls the whole pass); long ones: every core.
    monkeypatch.setattr(numerics, "others_running", lambda: 3)
    assert numerics.kernel_threads(None, 1 << 18) == 1
    assert numerics.kernel_threads(None, (1 << 20) - 1) == 1
    assert numerics.kernel_threads(None, 1 << 20) == 4
    assert numerics.kernel_threads(2, 1 << 18) == 2  # as asked
    monkeypatch.setattr(numerics, "others_running", lambda: 1)
    assert numerics.kernel_threads(None, 1 << 18) == 3


def test_other_processes_running_are_counted():
    # Two CPU-bound processes: /proc/loadavg counts them (and not the caller).
    import subprocess
    import sys
    import time

    from skts._numerics import _threads as numerics

    if not os.path.exists("/proc/loadavg"):
        pytest.skip("no /proc/loadavg on this system")
    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)
    ]
    try:
        time.sleep(0.5)
        numerics._LOAD["at"] = float("-inf")
        busy = numerics.others_running()
        assert busy >= 2
        assert numerics.others_running() == busy  # (looked up every 0.1 s)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


@pytest.mark.parametrize("user", [None, "50000"])
def test_openmp_spins_briefly_unless_told_and_the_environment_is_kept(user):
    # GNU OpenMP reads GOMP_SPINCOUNT when the kernel loads it: skts asks for
    # a short spin then, and leaves the environment as it found it; a value
    # the user set (or OMP_WAIT_POLICY) is theirs.
    import subprocess
    import sys

    drop = ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    if user is not None:
        env["GOMP_SPINCOUNT"] = user
    code = (
        "import os, skts._numerics._compiled as t; "
        "print(os.environ.get('GOMP_SPINCOUNT'), t._SET)"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True
    )
    spin, asked = run.stdout.split(maxsplit=1)
    assert spin == str(user)
    assert asked.strip() == ("['GOMP_SPINCOUNT']" if user is None else "[]")


@pytest.mark.parametrize("k", [33, 100, 5000])
def test_known_row_maxima_give_the_same_bits_in_one_sweep(k):
    # A pass may write the row maxima it finds (row_max_out) and a later one
    # take them (row_max): wide float32 rows are then read once, d = z - m
    # computed where it is used. Every mode keeps its bits.
    rng = np.random.default_rng(k)
    n = 30_000 // k
    z = (rng.normal(scale=4.0, size=(n, k))).astype(np.float32)
    y = rng.integers(0, k, n)
    w = rng.uniform(0, 2, n)
    total = float(w.sum())
    found = np.full(n, np.nan)
    block_pass(z, y, w, total, [1.0], [1.0], "nll", row_max_out=found)
    assert np.array_equal(found, z.max(axis=1).astype(np.float64))
    b3 = np.array([0.5, 1.0, 1.7])
    for mode, betas, options in [
        ("nll", b3, {}),
        ("slopes", b3, {"moments": True, "facts": True}),
        ("slopes", b3[:1], {"moments": True, "higher": True}),
        ("slopes", np.array([0.7, 0.7 * (1 + 1e-10)]), {"pair": True}),
        ("derivatives", b3[:1], {"single": True, "higher": True}),
        ("derivatives", b3, {"single": False}),
        ("window", b3, {"single": True, "deriv_at": 1}),
        ("window", b3[:1], {"single": True}),
    ]:
        plain = block_pass(
            z, y, w, total, betas, 1 / betas, mode, n_threads=2, **options
        )
        known = block_pass(
            z,
            y,
            w,
            total,
            betas,
            1 / betas,
            mode,
            n_threads=2,
            row_max=found,
            **options,
        )
        assert np.array_equal(plain[0], known[0], equal_nan=True), (mode, options)
    with pytest.raises(ValueError, match="row_max"):
        block_pass(z, y, w, total, [1.0], [1.0], "nll", row_max=found[:-1])


@pytest.mark.parametrize("read", ["nll", "slopes", "derivatives", "window"])
@pytest.mark.parametrize("k", [2, 10, 33, 300, 1003])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_each_block_writes_its_widest_row(read, k, dtype):
    # span_out (every entry point): each block's largest row range (max -
    # min), as numpy finds it block by block (the kernel's maximum in lanes
    # per chunk; wide rows' minima and maxima in one sweep, tails of 1 and 11
    # classes past the lanes), with the row maxima known, written alongside
    # (a fit's first read), or neither; the sums keep their bits.
    rng = np.random.default_rng(k)
    n = 150_000 // k
    z = (rng.normal(size=(n, k)) * rng.uniform(0.1, 30.0, size=(n, 1))).astype(dtype)
    y = rng.integers(0, k, n)
    step = max(1, _kernel.BLOCK_ELEMENTS // k)
    z64 = z.astype(np.float64)
    want = np.array(
        [
            (z64[i : i + step].max(axis=1) - z64[i : i + step].min(axis=1)).max()
            for i in range(0, n, step)
        ]
    )
    args = (z, y, None, float(n), [0.5], [2.0], read)
    plain = block_pass(*args)[0]
    for options in ({}, {"row_max": z64.max(axis=1)}, {"row_max_out": np.zeros(n)}):
        spans = np.full(len(want), np.nan)
        out = block_pass(*args, span_out=spans, **options)[0]
        assert np.array_equal(spans, want)
        assert np.array_equal(out, plain)
        if "row_max_out" in options:
            assert np.array_equal(options["row_max_out"], z64.max(axis=1))
    with pytest.raises(ValueError, match="span_out"):
        block_pass(*args, span_out=np.zeros(len(want) + 1))


@pytest.mark.parametrize("read", ["nll", "slopes", "derivatives", "window"])
@pytest.mark.parametrize("k", [2, 3, 10, 33, 300])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_each_block_says_whether_its_logits_are_all_finite(read, k, dtype):
    # finite_out: 1 for a block whose logits are all finite, 0 for one with a
    # NaN or an infinity anywhere (the last row and column included), as
    # numpy finds block by block; rows ld apart (a value that is not finite
    # between them is not the block's), and the row maxima known or not. The
    # sums keep their bits.
    rng = np.random.default_rng(k)
    n = 400_000 // k + 7
    z = rng.normal(size=(n, k)).astype(dtype)
    y = rng.integers(0, k, n)
    w = rng.uniform(0.5, 2.0, n)
    step = max(1, _kernel.BLOCK_ELEMENTS // k)
    starts = range(0, n, step)
    args = (y, w, float(w.sum()), [0.5, 0.7], [2.0, 1 / 0.7], read)
    plain = block_pass(z, *args)[0]
    finite = np.full(len(starts), np.nan)
    assert np.array_equal(block_pass(z, *args, finite_out=finite)[0], plain)
    assert (finite == 1.0).all()

    def layouts(a):
        yield a
        if k > 32:  # (rows ld apart: the NaN between them is never read)
            padded = np.full((n, k + 5), np.nan, dtype=dtype)
            padded[:, :k] = a
            yield padded[:, :k]

    for value in (np.nan, np.inf, -np.inf):
        bad = z.copy()
        rows = rng.choice(n, 3, replace=False)
        cols = rng.integers(0, k, 3)
        rows[0], cols[0] = n - 1, k - 1
        bad[rows, cols] = value
        want = np.array([np.isfinite(bad[i : i + step]).all() for i in starts], float)
        assert 0 < want.sum() < len(want)
        for view in layouts(bad):
            options = [{}]
            if k > 32 and dtype == np.float32:
                options.append({"row_max": np.nanmax(bad, axis=1).astype(np.float64)})
            for option in options:
                finite = np.full(len(starts), np.nan)
                block_pass(view, *args, finite_out=finite, **option)
                assert np.array_equal(finite, want), (value, option)
    for wrong in (np.zeros(len(starts) + 1), np.zeros(len(starts), np.float32)):
        with pytest.raises(ValueError, match="finite_out"):
            block_pass(z, *args, finite_out=wrong)


@pytest.mark.parametrize("read", ["nll", "slopes", "derivatives", "window"])
@pytest.mark.parametrize("k", [2, 10, 33, 300])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_kernel_checks_each_label_before_it_reads_the_logit_there(read, k, dtype):
    # The kernel checks the labels chunk by chunk, before the chunk's logits
    # are read at them: a label far outside the array (which a read would
    # fault on, or the sanitizer build report) anywhere, in the first chunk,
    # at a chunk's or a block's last row, or in the last row, is refused
    # with the row named, on one thread or two; the clean labels give finite
    # sums in every block.
    rng = np.random.default_rng(k)
    n = (3 << 16) // k + 7  # three blocks and a part
    z = rng.normal(size=(n, k)).astype(dtype)
    y = rng.integers(0, k, n)
    w = np.ones(n)
    chunk = 4096 // k  # (the kernel's chunk: whole lanes of 16 rows)
    chunk = chunk - chunk % 16 if chunk >= 16 else max(chunk, 1)
    block = _kernel.rows_per_block(k)
    values = (k, -1, 1 << 40, -(1 << 40))
    at = sorted({0, chunk - 1, chunk, block - 1, block, n - 1})
    for i, bad_at in enumerate(at):
        value = values[i % 4]
        bad = y.copy()
        bad[bad_at] = value
        with pytest.raises(ValueError, match=f"got {value} at row {bad_at}"):
            block_pass(z, bad, w, n, [1.0], [1.0], read, n_threads=1 + i % 2)
    ok = block_pass(z, y, w, n, [1.0], [1.0], read, n_threads=2)[0]
    assert np.isfinite(ok[:, :, 0]).all()


@pytest.mark.parametrize("read", ["nll", "slopes", "derivatives", "window"])
def test_every_entry_point_checks_the_shapes_it_is_given(read):
    # Memory safety is the kernel's own: a labels or weights array shorter
    # (or longer) than the logits, mismatched betas, a zero total, or logits
    # it cannot read are refused before any read.
    rng = np.random.default_rng(9)
    z = rng.normal(size=(1000, 5))
    y = rng.integers(0, 5, 1000)
    w = np.ones(1000)
    ok = block_pass(z, y, w, 1000.0, [1.0], [1.0], read)[0]
    assert np.isfinite(ok[:, :, 0]).all()
    bad = [
        ((z, y[:100], w, 1000.0, [1.0], [1.0]), "y must be 1-D with one value per row"),
        ((z, np.tile(y, 2), w, 1000.0, [1.0], [1.0]), "y must be 1-D"),
        ((z, y, w[:-1], 1000.0, [1.0], [1.0]), "sample_weight must be 1-D"),
        ((z, y, w, 1000.0, [1.0, 2.0], [1.0]), "2 betas but 1 temperatures"),
        ((z, y, w, 0.0, [1.0], [1.0]), "total weight must be > 0"),
        (
            (z, np.where(y == 3, 5, y), w, 1000.0, [1.0], [1.0]),
            r"class indices in \[0, 5\); got 5 at row",
        ),
        ((z, np.where(y == 3, -1, y), w, 1000.0, [1.0], [1.0]), r"got -1 at row"),
        ((z[:, ::2], y, w, 1000.0, [1.0], [1.0]), "logits must be a 2-D float32"),
        ((z.astype(np.float16), y, w, 1000.0, [1.0], [1.0]), "logits must be"),
    ]
    for args, match in bad:
        with pytest.raises(ValueError, match=match):
            block_pass(*args, read)
    with pytest.raises(ValueError, match="sample_weight must be 1-D"):
        _kernel.varies(z, w[:10])
    with pytest.raises(ValueError, match="logits must be"):
        _kernel.softmax(z[::2], 1.0, False, np.float64)
    ones = np.ones((1, 1000))
    assert _kernel.report_rows(z, 1.0, y, ones, 0.1)["predicted"].shape == (1000,)
    bad_report = [
        ((z[:, ::2], 1.0, y, ones, 0.1), "logits must be a 2-D float32"),
        ((z, 1.0, y[:10], ones, 0.1), "y must be 1-D with one value per row"),
        ((z, 1.0, y, np.ones(1000), 0.1), "weights must be 2-D, one row or more"),
        ((z, 1.0, y, ones[:, :-1], 0.1), "weights must be 2-D"),
        ((z, 1.0, y, ones[:0], 0.1), "weights must be 2-D, one row or more"),
        ((z[:, :0], 1.0, y, ones, 0.1), "logits must be a 2-D float32"),
        ((z, 1.0, y, ones, 0.0), "threshold must be in"),
        ((z, float("inf"), y, ones, 0.1), "beta must be finite"),
        ((z, 1.0, np.where(y == 3, 5, y), ones, 0.1), r"\[0, 5\); got 5 at row"),
        ((z, 1.0, np.where(y == 3, -1, y), ones, 0.1), r"got -1 at row"),
    ]
    for args, match in bad_report:
        with pytest.raises(ValueError, match=match):
            _kernel.report_rows(*args)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k", [2, 10, 17, 1000, 5000])
def test_the_report_read_is_the_softmax_at_any_thread_count(k, dtype):
    # One read of the logits gives the report's quantities of the compiled
    # softmax's own probabilities: the logits' first argmax (ties), p there
    # and at the label, the values above the threshold, bit for bit; the
    # squares' and the weighted columns' sums to their rounding; log p_y
    # against mpmath, also where p_y is 0 (the log-softmax's value). The
    # same bits on one thread and two.
    rng = np.random.default_rng(k)
    n = max(40, 60_000 // k)
    z = (rng.normal(size=(n, k)) * 4).astype(dtype)
    z[::3, k // 2] = z[::3].max(axis=1)
    z[::3, -1] = z[::3, k // 2]
    z[1] = 0.0
    y = rng.integers(0, k, n)
    z[2, (y[2] + 1) % k] = z[2].max() + 2000.0  # p_y = 0 in float64
    w = np.vstack([np.ones(n), rng.integers(0, 3, n), np.zeros(n)])
    beta = 0.8
    got = [_kernel.report_rows(z, beta, y, w, 1 / 15, t) for t in (1, 2)]
    for key in got[0]:
        assert np.array_equal(got[0][key], got[1][key]), key
    r = got[0]
    p = _kernel.softmax(z, beta, False, np.float64)
    rows = np.arange(n)
    first = z.argmax(axis=1)
    assert np.array_equal(r["predicted"], first)
    assert np.array_equal(r["top"], p[rows, first])
    assert np.array_equal(r["p_y"], p[rows, y]) and r["p_y"][2] == 0.0
    flat = np.flatnonzero(p > 1 / 15)
    assert np.array_equal(r["high_at"], flat)
    assert np.array_equal(r["high_p"], p.reshape(-1)[flat])
    unit = 2.0**-52
    np.testing.assert_allclose(r["sumsq"], np.einsum("ij,ij->i", p, p), rtol=k * unit)
    np.testing.assert_allclose(r["colsum"], w @ p, rtol=n * unit, atol=1e-300)
    assert np.all(r["colsum"][2] == 0.0)
    with mpmath.workdps(40):
        for i in [0, 1, 2, 3, n - 1]:
            row = [mpmath.mpf(float(v)) for v in z[i]]
            m = max(row)
            lse = mpmath.log(mpmath.fsum(mpmath.exp(beta * (v - m)) for v in row))
            want = float(beta * (row[y[i]] - m) - lse)
            assert r["log_p_y"][i] == pytest.approx(want, rel=1e-14, abs=1e-14), i


def test_the_block_size_is_the_kernels():
    # One definition: Python reads the kernel's block size and row formula.
    from skts._numerics import BLOCK_ELEMENTS, rows_per_block

    assert BLOCK_ELEMENTS == _kernel.BLOCK_ELEMENTS == 1 << 16
    for k in (1, 2, 7, 1000, 1 << 17):
        assert rows_per_block(k) == max(1, (1 << 16) // k)


def _misaligned(a):
    """A contiguous copy of ``a`` whose data sit one byte off alignment (as
    an array unpickled from a buffer, say after a Dask transfer, can)."""
    buf = np.zeros(a.nbytes + 1, dtype=np.uint8)
    out = np.frombuffer(buf.data, np.uint8, a.nbytes, 1).view(a.dtype)
    out = out.reshape(a.shape)
    out[...] = a
    assert out.flags.c_contiguous and not out.flags.aligned
    return out


def test_misaligned_arrays_are_copied_not_read_in_place():
    # (found by the UndefinedBehaviorSanitizer job: a misaligned float load)
    from skts._numerics import default_temperatures, softmax

    rng = np.random.default_rng(10)
    z = (rng.normal(size=(3000, 40)) * 3).astype(np.float32)
    y = rng.integers(0, 40, 3000)
    w = rng.uniform(0.5, 2.0, 3000)
    assert not _kernel.supports(_misaligned(z))
    want = grid_search(z, y, default_temperatures(), w)
    got = grid_search(
        _misaligned(z), _misaligned(y), default_temperatures(), _misaligned(w)
    )
    assert got == want
    assert np.array_equal(softmax(_misaligned(z), 2.0), softmax(z, 2.0))
    with pytest.raises(ValueError, match="aligned"):
        _kernel.nll(_misaligned(z), y, w, 3000.0, [1.0], [1.0])
    sums = _kernel.nll(z, _misaligned(y), _misaligned(w), float(w.sum()), [1.0], [1.0])
    assert np.array_equal(sums, _kernel.nll(z, y, w, float(w.sum()), [1.0], [1.0]))


def test_the_binary_window_uses_the_spread_it_is_given():
    # (found by tests/test_portable.py: with first_spread=-1 the two-class
    # window read its per-row spread from scratch memory left by an earlier
    # call, so its error bound depended on what ran before)
    rng = np.random.default_rng(11)
    z = rng.normal(0, 4, (500, 2))
    y = rng.integers(0, 2, 500)
    betas = np.array([0.5, 2.0])

    def err(spread):
        sums = _kernel.window(
            z, y, None, 500.0, betas, 1 / betas, first_spread=-1, spread=spread
        )
        return sums[0, :, 1]

    small = err(0.0)
    # scratch left full of other values by a wide, measuring call
    _kernel.window(
        rng.normal(0, 50, (500, 2)), y, None, 500.0, betas, 1 / betas, first_spread=0
    )
    assert np.array_equal(err(0.0), small)
    # and the bound grows with the spread it is told: 3 spread beta ulps per
    # row (the binary window is float64 arithmetic)
    big = err(10.0)
    assert np.all(big > small)
    assert np.allclose(big - small, 3 * 10.0 * betas * 2 * 2.0**-53, rtol=1e-9)


@pytest.mark.parametrize("first_spread", [1, 2, -2])
def test_window_takes_only_a_first_or_a_given_spread(first_spread):
    z = np.zeros((4, 3))
    with pytest.raises(ValueError, match="first_spread"):
        _kernel.window(
            z,
            np.zeros(4, np.int64),
            None,
            4.0,
            [1.0, 2.0],
            [1.0, 0.5],
            first_spread=first_spread,
        )
    with pytest.raises(ValueError, match="spread must be finite"):
        _kernel.window(
            z,
            np.zeros(4, np.int64),
            None,
            4.0,
            [1.0],
            [1.0],
            first_spread=-1,
            spread=float("nan"),
        )
