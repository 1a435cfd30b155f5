"""The numerics: the exact grid rule against brute force, and the solvers."""

import dataclasses
import math
import warnings

import mpmath
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from skts._numerics import (
    default_temperatures,
    derivatives,
    grid_search,
    log_softmax,
    nll,
    nll_many,
    search_grid,
    softmax,
    solve_continuous,
)

from _data import DATA as _DATA
from _data import MISSING, spy_windows, strict_rows
from _reference import exact_choices, exact_losses, float_losses

# --------------------------------------------------------------------------
# Slow, obviously-correct references (tests/_reference.py): mpmath at 60
# digits decides, plain-float sums screen out clear losers.


def brute_force(logits, y, temperatures, sample_weight=None):
    """The answers the exact rule allows, by evaluating every candidate
    (screened with skts's float64 evaluator on large inputs, where the Python
    loops are too slow); one answer unless exact losses agree to 1e-40."""
    temperatures = np.asarray(temperatures, dtype=np.float64)
    screen = None
    if np.size(logits) * temperatures.size > 200_000:
        screen = nll_many(logits, y, temperatures, sample_weight)
    return exact_choices(logits, y, temperatures, sample_weight, screen=screen)


def assert_matches_references(logits, y, temperatures, sample_weight=None):
    result = grid_search(logits, y, np.asarray(temperatures), sample_weight)
    # 1. The exact rule, in real arithmetic (independent mpmath reference).
    assert result.temperature in exact_choices(logits, y, temperatures, sample_weight)
    # 2. An element of the candidates, bit for bit.
    assert result.temperature in list(map(float, temperatures))
    # 3. The reported loss is the float64 value at the answer.
    ts = np.asarray(temperatures, dtype=np.float64)
    ref = float_losses(logits, y, ts, sample_weight)
    chosen = ref[ts == result.temperature][0]
    if np.isfinite(chosen):
        assert result.loss == pytest.approx(chosen, rel=1e-9, abs=1e-12)
    return result


# --------------------------------------------------------------------------
# Worked examples from the literature.


def test_binary_gap_log9_three_of_four_positive_gives_t2_and_075():
    logits = np.tile([0.0, np.log(9.0)], (4, 1))
    y = np.array([1, 1, 1, 0])
    grid = [0.5, 1.0, 1.5, 2.0, 3.0, 4.0]
    result = assert_matches_references(logits, y, grid)
    assert result.temperature == 2.0
    proba = softmax(logits, result.temperature)
    np.testing.assert_allclose(proba[:, 1], 0.75, rtol=0, atol=1e-15)


def test_three_class_example_gives_t1_and_loss_0571774():
    logits = np.array([[2, 0.5, -0.5], [0.2, 1.8, -0.3], [2.5, 1.8, 0.2]])
    y = np.array([0, 1, 1])
    result = assert_matches_references(logits, y, [0.5, 1.0, 2.0])
    assert result.temperature == 1.0
    assert round(result.loss, 6) == 0.571774


def test_nll_is_convex_in_beta_not_in_t():
    # One binary logit gap of 1: L(T) = log(1 + exp(-1/T)), L''(1) ~ -0.3413.
    logits = np.array([[0.0, 1.0]])
    y = np.array([1])
    h = 1e-4
    f = [nll(logits, y, t) for t in (1 - h, 1.0, 1 + h)]
    second = (f[0] - 2 * f[1] + f[2]) / h**2
    assert second == pytest.approx(-0.3413, abs=1e-3)
    _, _, f2 = derivatives(logits, y, 1.0)
    assert f2 > 0


# --------------------------------------------------------------------------
# The rule's consequences.


def test_unsorted_grid_with_duplicates():
    rng = np.random.RandomState(0)
    logits = rng.normal(scale=4, size=(50, 5))
    y = rng.randint(0, 5, size=50)
    grid = [3.0, 0.1, 1.0, 3.0, 0.7, 1.0, 10.0, 0.7]
    assert_matches_references(logits, y, grid)


def test_one_candidate():
    logits = np.array([[1.0, 2.0, 3.0]])
    result = grid_search(logits, np.array([0]), np.array([0.37]))
    assert result.temperature == 0.37
    assert not result.at_boundary


def test_constant_rows_give_the_smallest_candidate():
    logits = np.full((7, 4), 3.25)
    y = np.array([0, 1, 2, 3, 0, 1, 2])
    grid = np.array([5.0, 0.2, 1.0, 0.2, 7.0])
    result = grid_search(logits, y, grid)
    assert result.temperature == 0.2
    assert result.loss == pytest.approx(np.log(4))


def test_separable_data_prefers_small_t_and_flags_the_boundary():
    logits = np.array([[5.0, 0.0], [0.0, 5.0]])
    y = np.array([0, 1])
    result = grid_search(logits, y, default_temperatures())
    assert result.temperature == 0.01
    assert result.at_boundary


def test_uniform_preferring_data_goes_to_the_largest_candidate():
    logits = np.array([[5.0, 0.0], [5.0, 0.0]])
    y = np.array([0, 1])
    result = grid_search(logits, y, default_temperatures())
    assert result.temperature == 100.0
    assert result.at_boundary


def test_default_grid():
    grid = default_temperatures()
    assert grid[0] == 0.01 and grid[-1] == 100.0 and 1.0 in grid
    ratios = grid[1:] / grid[:-1]
    assert ratios.max() <= 1.01 and np.all(ratios > 1)


def test_weights_equal_repetition():
    rng = np.random.RandomState(3)
    logits = rng.normal(scale=3, size=(40, 3))
    y = rng.randint(0, 3, size=40)
    w = rng.randint(0, 4, size=40)
    grid = default_temperatures()
    weighted = grid_search(logits, y, grid, w.astype(float))
    repeated = grid_search(np.repeat(logits, w, axis=0), np.repeat(y, w), grid)
    assert weighted.temperature == repeated.temperature
    assert weighted.loss == pytest.approx(repeated.loss, rel=1e-12)


def test_float32_logits_match_float64_of_the_same_values():
    rng = np.random.RandomState(1)
    logits = (rng.normal(scale=5, size=(300, 10))).astype(np.float32)
    y = rng.randint(0, 10, size=300)
    r32 = grid_search(logits, y, default_temperatures())
    r64 = grid_search(logits.astype(np.float64), y, default_temperatures())
    assert r32 == r64


def test_extreme_logits_and_temperatures_stay_finite_without_warnings():
    logits = np.array([[1e300, -1e300, 0.0], [-1e300, 1e300, 1.0], [0.0, 1.0, 2.0]])
    y = np.array([0, 0, 2])
    grid = np.array([1e-8, 1e-3, 1.0, 1e3, 1e8])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = assert_matches_references(logits, y, grid)
        proba = softmax(logits, result.temperature)
        log_proba = log_softmax(logits, 1e-8)
        derivatives(logits, y, 1e8)
    assert np.all(np.isfinite(proba))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert not np.any(np.isnan(log_proba))


def test_search_is_not_brute_force():
    data = np.load(_DATA / "densenet40_cifar10.npz") if _DATA.exists() else None
    if data is None:
        rng = np.random.RandomState(0)
        logits = rng.normal(scale=6, size=(5000, 10))
        y = rng.randint(0, 10, size=5000)
    else:
        logits, y = data["val_logits"], data["val_labels"]
    result = grid_search(logits, y, default_temperatures())
    assert [result.temperature] == brute_force(logits, y, default_temperatures())
    # A handful of passes over the data, not one per candidate (1001).
    assert result.n_passes <= 20


# --------------------------------------------------------------------------
# Property tests against the references.

_magnitude = st.sampled_from([1e-3, 1.0, 10.0, 1e3, 1e100])


@st.composite
def problems(draw, max_rows=12):
    n = draw(st.integers(1, max_rows))
    k = draw(st.integers(2, 5))
    kind = draw(st.sampled_from(["float", "ties", "constant", "huge"]))
    if kind == "ties":
        logits = draw(
            hnp.arrays(np.float64, (n, k), elements=st.integers(-3, 3).map(float))
        )
    elif kind == "constant":
        logits = np.repeat(
            draw(hnp.arrays(np.float64, (n, 1), elements=st.floats(-50, 50))), k, 1
        )
    else:
        logits = draw(
            hnp.arrays(
                np.float64,
                (n, k),
                elements=st.floats(-1, 1, allow_subnormal=False),
            )
        ) * draw(_magnitude if kind == "float" else st.just(1e300))
    y = draw(hnp.arrays(np.intp, n, elements=st.integers(0, k - 1)))
    return logits, y


grids = st.lists(
    st.floats(1e-8, 1e8, allow_subnormal=False), min_size=1, max_size=12
) | st.lists(st.sampled_from([0.25, 0.5, 1.0, 2.0, 4.0]), min_size=1, max_size=8)

_settings = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@_settings
@given(problems(), grids)
def test_grid_choice_equals_brute_force(problem, grid):
    logits, y = problem
    assert_matches_references(logits, y, grid)


@_settings
@given(problems(), grids, st.data())
def test_weighted_grid_choice_equals_brute_force(problem, grid, data):
    logits, y = problem
    w = data.draw(hnp.arrays(np.float64, len(y), elements=st.integers(0, 4).map(float)))
    if w.sum() == 0:
        w[0] = 1.0
    assert_matches_references(logits, y, grid, w)


@_settings
@given(problems(), grids)
def test_float32_input(problem, grid):
    logits, y = problem
    with np.errstate(over="ignore"):
        logits32 = logits.astype(np.float32)
    if not np.all(np.isfinite(logits32)):
        return
    assert_matches_references(logits32, y, grid)


@_settings
@given(problems(), st.floats(1e-3, 1e3))
def test_probabilities_are_finite_and_sum_to_one(problem, t):
    logits, _ = problem
    proba = softmax(logits, t)
    assert np.all(np.isfinite(proba))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(np.exp(log_softmax(logits, t)), proba, atol=1e-12)


@settings(max_examples=150, deadline=None)
@given(problems(max_rows=8), st.floats(1e-2, 1.0), st.floats(1.0, 1e2))
def test_continuous_is_never_worse_than_the_grid_inside_its_range(problem, lo, hi):
    logits, y = problem
    grid = np.geomspace(lo, hi, 25)
    cont = solve_continuous(logits, y, lo, hi, tol=1e-10)
    assert lo <= cont.temperature <= hi
    grid_loss = nll_many(logits, y, grid).min()
    assert cont.loss <= grid_loss + 1e-9 * (1 + abs(grid_loss))


# --------------------------------------------------------------------------
# The continuous solver.


def test_continuous_solution_is_a_stationary_point():
    rng = np.random.RandomState(0)
    logits = rng.normal(scale=5, size=(500, 10))
    y = np.where(rng.rand(500) < 0.6, logits.argmax(1), rng.randint(0, 10, 500))
    cont = solve_continuous(logits, y, 0.01, 100.0, tol=1e-10)
    _, g, _ = derivatives(logits, y, 1.0 / cont.temperature)
    assert abs(g) < 1e-6
    assert not cont.at_boundary
    grid = grid_search(logits, y, default_temperatures())
    assert cont.loss <= grid.loss
    assert abs(np.log(cont.temperature / grid.temperature)) < np.log(1.01)


def test_continuous_returns_the_endpoint_when_the_derivative_keeps_its_sign():
    logits = np.array([[5.0, 0.0], [0.0, 5.0]])  # separable: T -> 0
    y = np.array([0, 1])
    cont = solve_continuous(logits, y, 0.05, 20.0, tol=1e-10)
    assert cont.temperature == 0.05 and cont.at_boundary
    cont = solve_continuous(logits, np.array([1, 0]), 0.05, 20.0, tol=1e-10)
    assert cont.temperature == 20.0 and cont.at_boundary


def test_continuous_respects_its_step_bound():
    rng = np.random.RandomState(2)
    logits = rng.normal(scale=3, size=(200, 4))
    y = rng.randint(0, 4, size=200)
    for lo, hi in [(0.01, 100.0), (0.5, 2.0), (1e-4, 1e4)]:
        cont = solve_continuous(logits, y, lo, hi, tol=1e-10)
        # Every read counts, the float32 steering ones too.
        assert cont.n_passes <= continuous_budget(lo, hi, cont)
        assert cont.n_passes <= 6


def test_continuous_takes_few_passes_on_real_logits():
    if not _DATA.exists():
        pytest.skip(MISSING)
    data = np.load(_DATA / "playground_cifar100.npz")
    logits, y = data["val_logits"], data["val_labels"]
    cont = solve_continuous(logits, y, 0.01, 100.0, tol=1e-10)
    # (The warm start's reads aside.) One float64 read: the bracket about its
    # Newton target is proven from it alone (_one_read_bracket).
    assert cont.n_passes == 1
    _, g, h = derivatives(logits, y, 1 / cont.temperature)
    # Within tau = 1e-10 * beta of the root of F': |F'| <= tau * F'' (+ rounding).
    assert abs(g) <= 1e-10 / cont.temperature * h * 1.01 + 1e-12


def test_near_tie_is_decided_exactly():
    # 600 rows of the log-9 example: the optimum is T = 2 exactly. Candidates
    # symmetric around it in beta have losses equal to ~1e-9 (and, for the
    # smallest delta, ~1e-21), far below what float32 (float64) arithmetic can
    # separate: the exact rule decides.
    logits = np.tile([0.0, np.log(9.0)], (600, 1)).astype(np.float32)
    y = np.tile([1, 1, 1, 0], 150)
    for delta in (1e-3, 1e-5, 1e-7):
        grid = np.array([1 / (0.5 + delta), 1 / (0.5 - delta), 0.5, 8.0])
        result = grid_search(logits, y, grid)
        assert [result.temperature] == brute_force(logits, y, grid)


def test_losses_differing_in_the_35th_digit_are_told_apart():
    # Found by hypothesis: the row (4e-35, 0) with label 1 makes the loss grow
    # by 2e-35 / T, the separable row pulls towards T -> 0 by exp(-250 / T).
    # The losses at T = 0.25 and 0.5 agree to 34 digits; T = 0.5 is smaller,
    # by 2e-35 (decimal's default 28-digit context would call them equal).
    logits = np.array([[4.0e-35, 0.0], [0.0, 250.0]])
    y = np.array([1, 1])
    grid = [0.25, 0.5, 4.0]
    for weights in (None, np.array([1.0, 1.0])):
        result = grid_search(logits, y, np.array(grid), weights)
        assert [result.temperature] == exact_choices(logits, y, grid, weights) == [0.5]


def test_long_plateau_of_equal_losses():
    # Huge margins: L(T) underflows to exactly 0 for every small T.
    logits = np.array([[0.0, 800.0], [900.0, 0.0], [0.0, 1000.0]])
    y = np.array([1, 0, 1])
    grid = default_temperatures()
    result = grid_search(logits, y, grid)
    assert [result.temperature] == brute_force(logits, y, grid) == [0.01]


@pytest.mark.parametrize(
    "n, k, dtype, weighted, seed",
    [
        (4000, 3, np.float32, False, 0),
        (3000, 50, np.float32, True, 1),
        (2000, 200, np.float64, False, 2),
        (6000, 2, np.float32, True, 3),
        (30000, 10, np.float32, False, 4),
        (1500, 400, np.float32, False, 5),
    ],
)
def test_fast_search_equals_brute_force_on_larger_data(n, k, dtype, weighted, seed):
    # Several blocks, the float32 decision path, a subsample warm start that
    # is not all the data: the answer is still brute force's, bit for bit.
    rng = np.random.RandomState(seed)
    scale = rng.uniform(1, 8)
    logits = (rng.standard_t(4, size=(n, k)) * scale).astype(dtype)
    y = np.where(rng.rand(n) < 0.6, logits.argmax(1), rng.randint(0, k, n))
    w = rng.randint(0, 4, n).astype(float) if weighted else None
    grid = np.geomspace(0.05, 20, 301)
    result = grid_search(logits, y, grid, w)
    assert [result.temperature] == brute_force(logits, y, grid, w)
    losses = nll_many(logits, y, grid, w)
    assert result.loss == pytest.approx(losses.min(), rel=1e-6)
    assert result.n_passes <= 4


# --------------------------------------------------------------------------
# The rule in real arithmetic: near-ties, huge weights, extreme ranges.


def test_issue_near_tie_example_goes_to_the_exact_answer():
    # float64 rounding says L(1) <= L(2); exactly, L(2) is smaller by 3e-17.
    logits = np.array([[3.0, 0.0], [2.0, 0.0]])
    y = np.array([0, 1])
    w = np.array([5.324138008803048, 1.0])
    grid = np.array([1.0, 2.0])
    assert exact_choices(logits, y, grid, w) == [2.0]
    losses = nll_many(logits, y, grid, w)
    assert losses[0] <= losses[1]  # what decided it before
    assert grid_search(logits, y, grid, w).temperature == 2.0


def _constructed_near_ties(count, seed=0):
    """Problems whose two candidates' losses agree in floating point: the
    first row's weight solves L(a) = L(b) in floats, so the exact losses
    differ by about one rounding."""
    rng = np.random.RandomState(seed)
    while count:
        k, n = rng.randint(2, 5), rng.randint(2, 6)
        logits = np.round(rng.normal(scale=3, size=(n, k)), 2)
        y = rng.randint(0, k, n)
        grid = np.sort(rng.choice([0.5, 1.0, 1.5, 2.0, 3.0], 2, replace=False))
        w = rng.uniform(0.5, 2, n)
        rest = float_losses(logits[1:], y[1:], grid, w[1:]) * w[1:].sum()
        first = float_losses(logits[:1], y[:1], grid)
        if first[0] == first[1] or not -(rest[0] - rest[1]) / (first[0] - first[1]) > 0:
            continue
        w[0] = -(rest[0] - rest[1]) / (first[0] - first[1])
        count -= 1
        yield logits, y, grid, w


def test_constructed_near_ties_follow_real_arithmetic_not_float64():
    wrong64 = 0
    for logits, y, grid, w in _constructed_near_ties(60):
        allowed = exact_choices(logits, y, grid, w)
        # Any power-of-two scaling of the weights is the same problem, exactly.
        for c in (1.0, 2.0**900, 2.0**-900):
            assert grid_search(logits, y, grid, w * c).temperature in allowed
        losses = nll_many(logits, y, grid, w)
        wrong64 += float(grid[losses == losses.min()].min()) not in allowed
    # The cases are real near-ties: float64 comparison gets many of them wrong.
    assert wrong64 >= 10


def test_exactly_equal_losses_go_to_the_smallest_candidate():
    # Rows of weight 0 are absent: the rows that count are constant, so the
    # loss is log(3) for every T, exactly.
    logits = np.array([[1.0, 1.0, 1.0], [5.0, 0.0, 1.0], [2.0, 2.0, 2.0]])
    y = np.array([0, 1, 2])
    w = np.array([1.0, 0.0, 3.0])
    grid = np.array([4.0, 0.3, 2.0])
    for solver in ("grid", "continuous"):
        if solver == "grid":
            result = grid_search(logits, y, grid, w)
            assert result.temperature == 0.3
        else:
            result = solve_continuous(logits, y, 0.3, 4.0, w)
            assert result.temperature == 0.3
        assert result.flat and result.at_boundary
        assert result.loss == pytest.approx(np.log(3.0), rel=1e-15)


@pytest.mark.parametrize("c", [2.0**1000, 2.0**-1000, 1e308, 1e-300, 3.7e200])
def test_weight_scale_does_not_change_the_answer(c):
    rng = np.random.RandomState(0)
    logits = rng.normal(scale=3, size=(300, 4))
    y = np.where(rng.rand(300) < 0.6, logits.argmax(1), rng.randint(0, 4, 300))
    w = rng.uniform(0.1, 1.0, 300)
    w /= w.max()  # so that c * w stays finite for c = 1e308
    grid = default_temperatures()
    plain = grid_search(logits, y, grid, w)
    scaled = grid_search(logits, y, grid, w * c)
    assert scaled.temperature == plain.temperature
    assert scaled.loss == pytest.approx(plain.loss, rel=1e-12)
    assert 0.5 < scaled.loss < 2.0
    cont, cont_scaled = (
        solve_continuous(logits, y, 0.01, 100.0, v) for v in (w, w * c)
    )
    assert cont_scaled.temperature == pytest.approx(cont.temperature, rel=1e-9)
    assert cont_scaled.loss == pytest.approx(cont.loss, rel=1e-12)
    full = np.full(300, 1e308)
    assert grid_search(logits, y, grid, full).temperature == plain_unweighted(
        logits, y, grid
    )


def plain_unweighted(logits, y, grid):
    return grid_search(logits, y, grid).temperature


def test_logits_and_candidates_near_1e200():
    rng = np.random.RandomState(0)
    logits = rng.normal(size=(40, 4)) * 1e200
    y = rng.randint(0, 4, 40)
    grid = np.array([3e199, 1e200, 3e200, 1e201])
    result = assert_matches_references(logits, y, grid)
    assert np.isfinite(result.loss)
    cont = solve_continuous(logits, y, 3e199, 1e201)
    assert 3e199 < cont.temperature < 1e201 and np.isfinite(cont.loss)
    # A stationary point (F' in beta scales like T here), in a few reads.
    g = derivatives(logits, y, 1.0 / cont.temperature)[1]
    assert abs(g) <= 1e-8 * abs(derivatives(logits, y, 1.0 / 3e199)[1])
    assert cont.n_passes <= 8
    assert cont.loss <= nll_many(logits, y, grid).min()


def test_huge_and_tiny_candidate_sets_work():
    rng = np.random.RandomState(1)
    logits = rng.normal(scale=3, size=(30, 3))
    y = rng.randint(0, 3, 30)
    for grid in ([1e-300, 1e-200, 1e-100], [1e100, 1e200, 1e300], [1e-300, 1e300]):
        grid = np.array(grid)
        assert_matches_references(logits, y, grid)
        cont = solve_continuous(logits, y, grid.min(), grid.max())
        assert grid.min() <= cont.temperature <= grid.max()
        assert cont.n_passes <= continuous_budget(grid.min(), grid.max(), cont)


def continuous_budget(lo, hi, result=None, tol=1e-10):
    """An upper bound on the solver's read budget, ceil(log2(W / tau)) + 3:
    its tau is tol times its starting beta, at least tol / hi."""
    width = 1 / lo - 1 / hi
    return 3 + max(1, math.ceil(math.log2(width) - math.log2(tol / hi)))


@settings(max_examples=150, deadline=None)
@given(
    problems(max_rows=30),
    st.floats(1e-3, 1.0),
    st.floats(1.0, 1e3),
    st.sampled_from([1e-10, 1e-6, 1e-3]),
)
def test_continuous_never_exceeds_its_read_budget(problem, lo, hi, tol):
    logits, y = problem
    if hi <= lo:
        return
    result = solve_continuous(logits, y, lo, hi, tol=tol)
    assert result.n_passes <= continuous_budget(lo, hi, tol=tol)
    assert lo <= result.temperature <= hi


def test_continuous_on_wide_rows_takes_few_reads():
    # 37 reads before (the straddle missed and a safeguard jumped away).
    rng = np.random.RandomState(0)
    logits = rng.normal(scale=3.0, size=(200, 20_000)).astype(np.float32)
    y = np.where(rng.rand(200) < 0.7, logits.argmax(1), rng.randint(0, 20_000, 200))
    result = solve_continuous(logits, y, 0.01, 100.0)
    assert result.n_passes <= 6
    assert not result.at_boundary


# --------------------------------------------------------------------------
# Boundary optima: proven in a couple of reads (separable held-out data).


def _boundary_case(kind, n, k, seed=0, dtype=np.float32):
    rng = np.random.RandomState(seed)
    logits = rng.normal(scale=3.0, size=(n, k)).astype(dtype)
    top, bottom = logits.argmax(1), logits.argmin(1)
    if kind == "separable":
        return logits, top
    if kind == "margin":
        y = rng.randint(0, k, n)
        logits[np.arange(n), y] = logits.max(1) + 10.0
        return logits, y
    if kind == "anti":
        return logits, bottom
    y = top.copy()  # "one wrong": nearly separable
    y[n // 3] = bottom[n // 3]
    return logits, y


@pytest.mark.parametrize("kind", ["separable", "margin", "anti"])
@pytest.mark.parametrize("n, k", [(20_000, 30), (300, 7), (5, 2)])
def test_separable_data_is_settled_in_one_read(kind, n, k):
    logits, y = _boundary_case(kind, n, k)
    grid = default_temperatures()
    expected = 0.01 if kind != "anti" else 100.0
    result = grid_search(logits, y, grid)
    assert result.temperature == expected and result.at_boundary
    assert result.n_passes == 1
    # The reference is a fact: the loss is strictly monotone in T. Spot-check
    # it in 60-digit arithmetic on the candidates nearest the answer.
    near = grid[:3] if expected == 0.01 else grid[-3:][::-1]
    rows = slice(0, min(n, 400))
    exact = exact_losses(logits[rows], y[rows], near)
    assert exact[0] < exact[1] < exact[2]
    assert result.loss == pytest.approx(nll(logits, y, expected), rel=1e-12, abs=1e-300)
    cont = solve_continuous(logits, y, 0.01, 100.0)
    assert cont.temperature == expected and cont.at_boundary
    assert cont.n_passes == 1


@pytest.mark.parametrize("n, k", [(20_000, 30), (300, 7)])
def test_nearly_separable_data_equals_brute_force(n, k):
    logits, y = _boundary_case("one wrong", n, k)
    grid = default_temperatures()
    result = grid_search(logits, y, grid)
    assert [result.temperature] == brute_force(logits, y, grid)
    assert result.temperature > 0.01  # one wrong row keeps the optimum inside
    cont = solve_continuous(logits, y, 0.01, 100.0)
    _, g, h = derivatives(logits, y, 1.0 / cont.temperature)
    assert abs(g) <= 1e-9 * h / cont.temperature + 1e-12
    assert not cont.at_boundary


def test_optimum_beyond_the_range_is_proven_by_the_slope_at_the_end():
    # Not separable (one row wrong), but the optimum T ~ 0.015 lies below the
    # range [0.5, 100]: F'(1/0.5) < 0 is proven, T = 0.5 in two reads.
    logits, y = _boundary_case("one wrong", 20_000, 30)
    grid = np.geomspace(0.5, 100, 200)
    result = grid_search(logits, y, grid)
    assert result.temperature == grid[0] and result.at_boundary
    assert result.n_passes <= 2
    assert [result.temperature] == brute_force(logits, y, grid)
    cont = solve_continuous(logits, y, 0.5, 100.0)
    assert cont.temperature == 0.5 and cont.at_boundary
    assert cont.n_passes <= 2


def test_float32_derivatives_underflow_but_the_answer_is_proven():
    # Margins of 10 at T = 0.01: every float32 exponential underflows.
    logits, y = _boundary_case("margin", 5000, 100)
    assert grid_search(logits, y, default_temperatures()).n_passes == 1


def test_public_evaluators_take_huge_weights():
    rng = np.random.RandomState(0)
    logits = rng.normal(size=(50, 3))
    y = rng.randint(0, 3, 50)
    huge = np.full(50, 1e308)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        assert (
            nll_many(logits, y, [0.5, 2.0], huge).tolist()
            == nll_many(logits, y, [0.5, 2.0]).tolist()
        )
        assert derivatives(logits, y, 1.3, huge) == pytest.approx(
            derivatives(logits, y, 1.3), rel=1e-14
        )


# --------------------------------------------------------------------------
# Large inputs: the first window placed from the subsample (with F' and F''
# read in the same pass), or after a float32 Newton step on all the data.


@pytest.fixture(scope="module")
def large_problem():
    rng = np.random.default_rng(7)
    n, k = 300_000, 3
    logits = rng.normal(scale=2.0, size=(n, k)).astype(np.float32)
    y = np.where(rng.random(n) < 0.6, logits.argmax(1), rng.integers(0, k, n))
    grid = default_temperatures()
    losses = nll_many(logits, y, grid)
    best = int(np.argmin(losses))
    # A clear winner (no near-tie for the float64 values to settle).
    assert np.sort(losses)[1] - losses[best] > 1e-12
    return logits, y, grid, best


@pytest.mark.parametrize(
    ("offset", "spread"),
    [
        (0.002, 0.5),  # the window holds the answer
        (0.03, 0.5),  # it misses: Newton from its middle
        (-0.03, 5.0),  # far and uncertain
        (0.03, 5.0),
    ],
)
@pytest.mark.parametrize("k", [3, 2])
def test_large_inputs_find_the_brute_force_answer(
    large_problem, monkeypatch, offset, spread, k
):
    # The first read is a window that also reads F' and F'' at its middle
    # (fused) where the subsample's spread is a spacing or less, and, with
    # more than two classes (float32 windows whose slopes are proven),
    # wherever the subsample lands; two classes far off take a float32 Newton
    # step first. The answer is brute force's.
    from skts._numerics import Rows, _grid

    logits, y, grid, best = large_problem
    if k == 2:
        rng = np.random.default_rng(2)
        logits = rng.normal(scale=2.0, size=(300_000, 2)).astype(np.float32)
        y = np.where(
            rng.random(300_000) < 0.6, logits.argmax(1), rng.integers(0, 2, 300_000)
        )
        best = int(np.argmin(nll_many(logits, y, grid)))
    beta = 1.0 / grid[best]
    spacing = math.log(grid[best + 1] / grid[best])
    # The warm start's answer, off by `offset`, with a standard error of
    # `spread` candidate spacings (the data are large: it is a subsample's).
    start = beta * (1 + offset)
    curvature = derivatives(logits[::20], y[::20], start)[2]  # a subsample's
    monkeypatch.setattr(
        _grid,
        "warm_start",
        lambda *a: (start, spread * spacing * beta, curvature, 0),
    )
    windows = []
    window = Rows.window

    def spy(rows, temperatures, *a, **kw):
        windows.append((len(temperatures), kw.get("deriv_at")))
        return window(rows, temperatures, *a, **kw)

    monkeypatch.setattr(Rows, "window", spy)
    result = grid_search(logits, y, grid)
    assert result.temperature == grid[best]
    assert (windows[0][1] is not None) == (k > 2 or spread < 1.0)
    # One window when the subsample was close (plus, at most, float64 values
    # for candidates too close for float32); a few reads otherwise.
    assert result.n_passes <= (2 if abs(offset) < 0.005 else 4)
    if abs(offset) < 0.005:
        assert len(windows) == 1


@pytest.mark.parametrize("span", [0.0, 1e-3, 0.7, 20.0, 300.0])
def test_the_curvature_integrals_bound_their_exact_values(span):
    # _curve: below (exp(-R s) - 1 + R s) / R**2 and, with up, above (exp(R s)
    # - 1 - R s) / R**2 (their limits s**2 / 2 at R = 0), at 60 digits, on
    # both sides of the series' threshold R s = 0.1; and close (1e-3 of the
    # value, with the series' looser remainder) where R s is small.
    from skts._numerics._grid import _curve

    for s in (1e-9, 1e-4, 0.003, 0.0049, 0.0051, 0.05, 0.4, 3.0):
        with mpmath.workdps(60):
            r, x = mpmath.mpf(span), mpmath.mpf(s)
            if span == 0.0:
                down = up = x * x / 2
            else:
                down = (mpmath.exp(-r * x) - 1 + r * x) / r**2
                up = (mpmath.exp(r * x) - 1 - r * x) / r**2
        low, high = _curve(span, s), _curve(span, s, True)
        assert 0.0 <= low <= down and high >= up
        if span * s < 0.1:
            assert high <= up * (1 + 1e-3) and low >= down * (1 - 1e-3)
    assert _curve(math.inf, 0.1) == 0.0 and _curve(math.inf, 0.1, True) == math.inf


@pytest.mark.parametrize("step", [0.002, 0.03])
def test_one_reads_intervals_hold_the_exact_losses(step):
    # From one window read at a candidate (F' and F'' with their proven
    # bounds, the rows' largest range): each neighbour's loss less the read
    # candidate's lies in its interval, at 60 digits, for grids so fine that
    # R s stays below the series' threshold and so coarse that it does not;
    # and the intervals are narrow enough to decide: the read candidate sits
    # at the continuous minimiser, and every other one is proven worse.
    from skts._numerics import Rows
    from skts._numerics._grid import _intervals

    from _reference import exact_losses

    rng = np.random.default_rng(3)
    n, k = 300, 20
    z = rng.normal(scale=3.0, size=(n, k)).astype(np.float32)
    y = np.where(rng.random(n) < 0.7, z.argmax(1), rng.integers(0, k, n))
    t = solve_continuous(z, y, 0.05, 20.0).temperature
    cand = t * np.exp(step * np.arange(-6, 7))
    j = 6  # (t itself)
    read = Rows(z, y).window(cand[[j]], slopes=True, span=True)
    g, e = (float(v[0]) for v in read.slopes)
    h, eh = (float(v[0]) for v in read.curvature)
    low, high = _intervals(cand, j, (g, e), (h - eh, h + eh, read.span))
    assert sorted(low) == list(range(3, 10))
    exact = exact_losses(z, y, cand[3:10])
    for i in range(3, 10):
        diff = exact[i - 3] - exact[j - 3]
        assert low[i] <= diff <= high[i]
        # (j sits at the continuous minimiser: every other candidate is
        # proven worse by the read at j alone)
        assert i == j or low[i] > 0.0


@pytest.mark.parametrize("weighted", [False, True])
def test_one_read_at_the_nearest_candidate_proves_the_rule(
    large_problem, monkeypatch, weighted
):
    # From a close subsample (fused), the first read is the nearest candidate
    # alone with its proven F', F'' and the rows' largest range; its
    # intervals on the candidates within 3 of it (_intervals) prove the
    # rule's answer when both its neighbours' lie above it. Where the warm
    # start is within half a spacing of the answer: that one read. A spacing
    # or two off: one more read, of the proven answer alone (its loss), not
    # of its slopes. Six off: no proof, and the Newton step from the read
    # places the next window. Always the rule's answer (brute force).
    from skts._numerics import Rows, _grid

    logits, y, grid, best = large_problem
    w = None
    if weighted:  # (weights, some 0: the answer moves)
        w = np.random.default_rng(1).choice([0.0, 0.5, 1.0, 2.0], size=len(y))
        best = int(np.argmin(nll_many(logits, y, grid, w)))
    allowed = brute_force(logits, y, grid[best - 10 : best + 11], w)
    assert allowed == [grid[best]]
    spacing = math.log(grid[best + 1] / grid[best])
    beta = 1.0 / grid[best]
    curvature = derivatives(logits[::20], y[::20], beta, w)[2]
    reads = {}
    window = Rows.window
    for off in (0.0, 0.3, -0.4, 0.8, -1.3, 6.0):
        start = beta * math.exp(-off * spacing)
        se = 0.5 * spacing * start  # (close: the fused first read)
        monkeypatch.setattr(
            _grid, "warm_start", lambda *a, b=start, e=se: (b, e, curvature, 0)
        )
        windows = reads[off] = []

        def spy(rows, temperatures, *a, seen=windows, **kw):
            seen.append((len(temperatures), kw["slopes"], kw["span"]))
            return window(rows, temperatures, *a, **kw)

        monkeypatch.setattr(Rows, "window", spy)
        result = grid_search(logits, y, grid, w)
        monkeypatch.setattr(Rows, "window", window)
        assert result.temperature == grid[best]
        assert windows[0] == (1, True, True)
    for off in (0.0, 0.3, -0.4):
        assert reads[off] == [(1, True, True)]
    # (a spacing or two off, the proof needs the answer's neighbours well
    # above it: so where the minimiser is within 0.3 of a spacing of the
    # answer, not 0.43 as with these weights)
    t = solve_continuous(logits, y, grid[0], grid[-1], w).temperature
    centred = abs(math.log(t / grid[best])) < 0.3 * spacing
    assert centred != weighted
    for off in (0.8, -1.3):
        assert not centred or reads[off] == [(1, True, True), (1, False, False)]
    assert len(reads[6.0]) > 1 and reads[6.0][1] != (1, False, False)


@pytest.fixture(scope="module", params=[1, 4])
def confident_wide(request):
    # 20,000 rows of 500 very confident logits (the label the argmax 90% of
    # the time): the warm start's first answers, on a few dozen rows, were
    # 12 and 52 standard errors from the minimum for these two seeds.
    rng = np.random.default_rng(request.param)
    n, k = 20_000, 500
    logits = rng.normal(scale=6.0, size=(n, k)).astype(np.float32)
    top = logits.argmax(1)
    y = np.where(rng.random(n) < 0.9, top, rng.integers(0, k, n))
    t = solve_continuous(logits, y, 0.05, 20.0).temperature
    return logits, y, t


def test_the_warm_start_converges_on_its_sample(confident_wide, monkeypatch):
    from skts._numerics import Rows, _steer

    logits, y, t = confident_wide
    grid = default_temperatures()
    lo, hi = 1.0 / grid[-1], 1.0 / grid[0]
    beta, se, _, _ = _steer.warm_start(Rows(logits, y), lo, hi, 1.0)
    assert abs(beta - 1.0 / t) <= 4.0 * se
    # One unevaluated Newton step on the sample (as before) is far off here.
    monkeypatch.setattr(_steer, "_SAMPLE_STEPS", 1)
    beta, se, _, _ = _steer.warm_start(Rows(logits, y), lo, hi, 1.0)
    assert abs(beta - 1.0 / t) > 4.0 * se


def test_a_far_warm_start_does_not_cost_reads(confident_wide, monkeypatch):
    from scipy.special import logsumexp

    logits, y, _ = confident_wide
    windows = spy_windows(monkeypatch)
    grid = default_temperatures()
    result = grid_search(logits, y, grid)
    # Two windows, each one candidate with its proven F', F'' and the rows'
    # largest range: the one nearest the warm start's answer (whose read
    # also places a Newton step on all the data), then the one nearest the
    # step's, whose Taylor intervals prove the answer. Before: a float32
    # Newton step, that second window, then the answer alone for its loss
    # (three reads); before that, 7 and 8, the windows growing from many
    # standard errors away.
    assert windows == [(1, True), (1, True)]
    assert result.n_passes == 2
    # The choice is the float64 minimum among its neighbours (scipy's
    # logsumexp, independent of skts); convexity makes it the global one.
    j = int(np.flatnonzero(grid == result.temperature)[0])
    z = logits.astype(np.float64)
    near = grid[max(j - 2, 0) : j + 3]
    losses = [
        float(np.mean(logsumexp(z / t, axis=1) - z[np.arange(len(y)), y] / t))
        for t in near
    ]
    assert near[int(np.argmin(losses))] == result.temperature


@pytest.mark.parametrize(
    ("phase", "weighted"), [(0.0, False), (0.3, False), (0.3, True)]
)
def test_the_window_after_a_newton_step_gives_the_rule_wherever_it_lands(
    confident_wide, monkeypatch, phase, weighted
):
    # A warm start six spacings off (three standard errors): its nearest
    # candidate's read proves nothing, and the Newton step from that read
    # places the next window. Wherever the step lands (offsets in grid steps
    # from the minimiser: past the next candidate, on a candidate, between
    # two), that window is the candidate nearest it alone, with its slopes
    # and span: its Taylor intervals prove the answer, or the window grows
    # (one more read of the answer alone for its loss when that is a
    # neighbour). The answer is always the rule's (brute force at 60
    # digits). So too from a warm start a few spacings uncertain but 1e-4
    # from the landing: its own nearest candidate's read proves the answer,
    # no Newton step.
    from skts._numerics import _grid

    logits, y, t = confident_wide
    w = None
    if weighted:  # (weights, some 0: the minimiser moves)
        w = np.random.default_rng(0).choice([0.0, 0.5, 1.0, 2.0], size=len(y))
        t = solve_continuous(logits, y, 0.05, 20.0, w).temperature
    step = 0.0092
    grid = t * np.exp(step * (np.arange(-25, 26) + phase))
    allowed = brute_force(logits, y, grid, w)
    sub = None if w is None else w[::20]
    curvature = derivatives(logits[::20], y[::20], 1.0 / t, sub)[2]
    far = 1.0 / (t * np.exp(6.0 * step))
    monkeypatch.setattr(
        _grid, "warm_start", lambda *a: (far, 3.0 * step * far, curvature, 0)
    )
    n_windows = []
    for offset in (-2.6, -1.0, -0.5, 0.0, 0.15, 0.5, 1.7):
        landing = 1.0 / (t * np.exp(step * offset))
        monkeypatch.setattr(_grid, "newton_step", lambda *a, b=landing: b)
        windows = spy_windows(monkeypatch)
        result = grid_search(logits, y, grid, w)
        assert result.temperature in allowed
        assert windows[:2] == [(1, True), (1, True)]
        n_windows.append(len(windows))
    # (landing on the minimiser or 0.15 of a spacing from it: that window
    # alone after the first)
    assert n_windows[3] == n_windows[4] == 2
    assert max(n_windows) > 2  # (the far landings grew it)
    for offset in (-1.0, 0.0, 0.15, 0.5):
        landing = 1.0 / (t * np.exp(step * offset))
        start = landing * (1.0 + 1e-4)
        monkeypatch.setattr(
            _grid,
            "warm_start",
            lambda *a, b=start: (b, 3.0 * step * b, curvature, 0),
        )
        monkeypatch.setattr(_grid, "newton_step", lambda *a, b=landing: b)
        windows = spy_windows(monkeypatch)
        result = grid_search(logits, y, grid, w)
        assert result.temperature in allowed
        assert windows[0] == (1, True)
        assert offset not in (0.0, 0.15) or windows == [(1, True)]


@pytest.mark.parametrize("side", [-1, 1])
@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("backend", ["kernel", "array_api_strict"])
def test_an_off_centre_minimum_is_settled_by_one_window(
    large_problem, monkeypatch, side, k, backend
):
    # The minimum known to a tenth of a candidate spacing, 0.45 of one from
    # the nearest candidate: that one and the next are within float32's
    # bound of each other, and the first window holds both their outer
    # neighbours (before, a second read fetched the missing one). A window
    # read in float64 (the kernel's at two classes, the array-API backend's
    # always) has a bound that leaves no such tie: the window holds the
    # three candidates around it.
    from skts._numerics import Rows, _grid

    if backend == "array_api_strict":
        xps = pytest.importorskip("array_api_strict", reason="an optional test extra")
    logits, y, _, _ = large_problem
    if k == 2:
        rng = np.random.default_rng(2)
        logits = rng.normal(scale=2.0, size=(300_000, 2)).astype(np.float32)
        y = np.where(
            rng.random(300_000) < 0.6, logits.argmax(1), rng.integers(0, 2, 300_000)
        )
    t = solve_continuous(logits, y, 0.05, 20.0).temperature
    step = 0.0092  # (the default grid's spacing in log T)
    grid = t * np.exp(step * (np.arange(-10, 11) + side * 0.45))
    curvature = derivatives(logits[::20], y[::20], 1.0 / t)[2]
    monkeypatch.setattr(
        _grid, "warm_start", lambda *a: (1.0 / t, 1e-6 / t, curvature, 0)
    )
    windows = []
    window = Rows.window

    def spy(rows, temperatures, *a, **kw):
        windows.append(len(temperatures))
        return window(rows, temperatures, *a, **kw)

    monkeypatch.setattr(Rows, "window", spy)
    if backend == "kernel":
        result = grid_search(logits, y, grid)
    else:
        result = search_grid(strict_rows(xps, logits, y), grid)
    assert result.temperature in brute_force(logits, y, grid)
    if k == 2 or backend != "kernel":
        assert windows == [3]
        assert result.n_passes == 1
    else:
        assert windows == [4]
        assert result.n_passes <= 2  # (the window, and the tie's float64 values)


# --------------------------------------------------------------------------
# Steering: cubic-model steps, and per-block results folded in block order.


def test_the_cubic_model_step_is_exact_on_a_cubic_and_newton_is_its_fallback():
    from skts._numerics import model_step as _model_step

    # F'(b) = (b - r) + (b - r)**2 + (b - r)**3 / 3: increasing, root r.
    r, b0 = 0.8, 0.83
    u = b0 - r
    g1, g2, g3, g4 = u + u * u + u**3 / 3, 1 + 2 * u + u * u, 2 + 2 * u, 2.0
    h = _model_step(g1, g2, g3, g4)
    assert abs(b0 + h - r) < 1e-14
    newton = _model_step(g1, g2)
    assert newton == -g1 / g2 and abs(b0 + newton - r) > 1e-4
    assert math.isnan(_model_step(g1, 0.0, g3, g4))  # no curvature: no step
    assert _model_step(0.0, g2, g3, g4) == 0.0  # at the root already
    assert math.isnan(_model_step(g1, -1.0))
    # A model without a root (1 + h + 500 h**2): Newton's step instead.
    assert _model_step(1.0, 1.0, 1e3, 0.0) == -1.0


@pytest.mark.parametrize("k", [10, 200])
def test_higher_derivatives_steer_to_the_fourth_order(k):
    # From 1% off, a step from the cubic model of F' (F''' and F'''' from the
    # same read) lands within ~3e-8 of the root, Newton's only within ~2e-4:
    # what lets the continuous solver skip a read.
    from skts._numerics import Rows as _Rows
    from skts._numerics import model_step as _model_step

    rng = np.random.default_rng(k)
    z = (rng.normal(scale=3.0, size=(4000, k))).astype(np.float32)
    y = np.where(rng.random(4000) < 0.7, z.argmax(axis=1), rng.integers(0, k, 4000))
    rows = _Rows(z, y)
    root = 1.0 / solve_continuous(z, y, 0.01, 100.0, tol=1e-12).temperature
    for precision, floor in [("float64", 0.0), ("float32", 1e-6)]:
        for start in (root * 1.01, root * 0.99):
            f, g1, g2, g3, g4 = rows.derivatives([start], precision, higher=True)[0]
            plain = rows.derivatives([start], precision)[0]
            assert np.array_equal(plain, [f, g1, g2])
            cubic = abs(start + _model_step(g1, g2, g3, g4) - root) / root
            newton = abs(start + _model_step(g1, g2) - root) / root
            assert cubic < 1e-6 + floor
            assert newton > 1e-5
            assert cubic < newton / 100


@pytest.mark.parametrize(("n", "k"), [(20000, 3), (5000, 10), (2500, 40), (5000, 100)])
def test_continuous_reads_once_after_a_warm_start_on_all_the_data(n, k):
    # When the warm-start sample is all the data, its last step (cubic model)
    # lands near enough that float64 needs one read: a Newton (or, from
    # further off, cubic-model) step, whose bracket that read proves
    # (_one_read_bracket). Before: 2 (two points straddling the target in a
    # second read), and 3 or 4 before that.
    rng = np.random.default_rng(n + k)
    z = (rng.normal(scale=3.0, size=(n, k))).astype(np.float32)
    y = np.where(rng.random(n) < 0.7, z.argmax(axis=1), rng.integers(0, k, n))
    result = solve_continuous(z, y, 0.01, 100.0)
    assert result.n_passes == 1
    _, g, h = derivatives(z, y, 1 / result.temperature)
    assert abs(g) <= 1e-10 / result.temperature * h * 1.01 + 1e-12


def test_per_block_results_fold_in_block_order_without_a_step_per_block():
    # Stacked per-block results (many blocks: long rows) fold to the bits of
    # the block-by-block fold that Dask runs over its pieces.
    from skts._numerics import Rows, add, fold
    from skts._numerics._passes import combine_slopes, combine_window

    rng = np.random.default_rng(0)
    z = (rng.normal(scale=3.0, size=(300, 3000))).astype(np.float32)
    y = rng.integers(0, 3000, 300)
    rows = Rows(z, y, rng.uniform(0, 2, 300))

    def one_by_one(combine, parts):
        parts = list(parts)
        acc = parts[0]
        for part in parts[1:]:
            acc = combine(acc, part)
        return acc

    window = rows.window_parts(np.array([0.8, 1.0, 1.2]), np.array([1.0]), None, 1)
    assert len(window) > 10
    for got, want in zip(
        fold(combine_window, window), one_by_one(combine_window, window), strict=True
    ):
        if isinstance(got, list):
            got, want = got[0], want[0]
        assert np.array_equal(got, want)
    slopes = rows.slopes_parts([0.8, 1.0], True, True)
    got, want = fold(combine_slopes, slopes), one_by_one(combine_slopes, slopes)
    assert np.array_equal(got[0], want[0]) and got[1] == want[1]
    derivs = rows.derivatives_parts([0.8, 1.0], "float32", True)
    assert np.array_equal(fold(add, derivs), one_by_one(add, derivs))


def test_a_fit_reads_wide_rows_maxima_once_and_keeps_its_bits(monkeypatch):
    # The first read of a fit records the row maxima of wide float32 logits;
    # later reads take them (one sweep of the logits each). Same answers, to
    # the bit, as without.
    import skts._numerics as numerics
    from skts._numerics import _passes

    rng = np.random.default_rng(7)
    z = (rng.normal(scale=3.0, size=(3000, 200))).astype(np.float32)
    y = np.where(rng.random(3000) < 0.7, z.argmax(axis=1), rng.integers(0, 200, 3000))
    rows = numerics.Rows(z, y)
    rows.slopes([1.0])
    assert np.array_equal(rows._maxima.values, z.max(axis=1).astype(np.float64))
    with_maxima = [
        solve_continuous(z, y, 0.01, 100.0),
        grid_search(z, y, default_temperatures()),
    ]
    monkeypatch.setattr(_passes._RowMaxima, "wanted", staticmethod(lambda z: False))
    without = [
        solve_continuous(z, y, 0.01, 100.0),
        grid_search(z, y, default_temperatures()),
    ]
    assert with_maxima == without
    rows = numerics.Rows(z, y)
    rows.slopes([1.0])
    assert rows._maxima is None


@pytest.mark.parametrize("first", ["derivatives", "nll", "window"])
def test_a_fit_keeps_wide_rows_ranges_from_its_first_read(monkeypatch, first):
    # The read that finds wide float32 rows' maxima also writes each block's
    # largest row range (its sweep finds the minima alongside); a later
    # window asked for the span is given it: the kernel is not asked to
    # sweep the rows for their minima again. The same span as numpy's and
    # as rows that keep nothing, the same bits; narrow rows keep nothing.
    import types

    import skts._numerics as numerics
    from skts._numerics import _passes

    rng = np.random.default_rng(3)
    n, k = 20_000, 200
    z = (rng.normal(size=(n, k)) * rng.uniform(0.5, 20.0, (n, 1))).astype(np.float32)
    y = np.where(rng.random(n) < 0.7, z.argmax(axis=1), rng.integers(0, k, n))
    z64 = z.astype(np.float64)
    want = float((z64.max(axis=1) - z64.min(axis=1)).max())
    asked = []
    real = _passes.kernel

    def window(*a, **kw):
        asked.append("span_out" in kw)
        return real.window(*a, **kw)

    spy = types.SimpleNamespace(**vars(real))
    spy.window = window
    monkeypatch.setattr(_passes, "kernel", spy)
    rows = numerics.Rows(z, y)
    {
        "derivatives": lambda: rows.derivatives([0.7], "float32"),
        "nll": lambda: rows.nll(np.array([1.5])),
        "window": lambda: rows.window(np.array([1.5])),
    }[first]()
    asked.clear()
    read = rows.window(np.array([1.3]), slopes=True, span=True)
    assert asked == [False]
    assert read.span == want
    fresh = numerics.Rows(z, y, keep_maxima=False)
    again = fresh.window(np.array([1.3]), slopes=True, span=True)
    assert asked == [False, True]
    assert again.span == want
    assert np.array_equal(again.curvature, read.curvature)
    assert np.array_equal(again.estimate, read.estimate)
    narrow = numerics.Rows(z[:, :30], y % 30)
    narrow.nll(np.array([1.5]))
    assert narrow._maxima is None
    assert narrow.window(np.array([1.3]), slopes=True, span=True).span == float(
        (z64[:, :30].max(axis=1) - z64[:, :30].min(axis=1)).max()
    )


@pytest.mark.parametrize("higher", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_a_bracket_from_one_read_is_proven_or_refused(seed, higher):
    # After one float64 read at x, _one_read_bracket proves a bracket of the
    # minimiser about Newton's target from |F'''| <= R F'' (R the largest row
    # range) and the read's proven error bounds. Checked against F' in
    # 60-digit arithmetic: wherever it answers, F' < 0 at the lower end and
    # > 0 at the upper one, the two within tau. It answers near the root
    # (within 1e-8 relative; from a higher read, whose third derivative
    # bounds the second-order term, within 1e-6) and refuses 1e-3 away,
    # where the read's target misses the root by far more than tau.
    from skts._numerics import Rows as _Rows
    from skts._numerics import one_read_bracket as _one_read_bracket

    from _reference import exact_slope

    rng = np.random.default_rng(seed)
    n, k = [(300, 10), (200, 2), (120, 40), (400, 5), (150, 20), (250, 3)][seed]
    scale = [1.0, 3.0, 8.0, 0.5, 20.0, 60.0][seed]
    z = rng.normal(scale=scale, size=(n, k))
    z = z.astype(np.float32) if seed % 2 else z
    y = np.where(rng.random(n) < 0.7, z.argmax(axis=1), rng.integers(0, k, n))
    w = None
    if seed % 3 == 0:
        w = rng.uniform(0, 2, n)
        w[:5] = 0.0
    rows = _Rows(z, y, w)
    root = 1.0 / solve_continuous(z, y, 1e-3, 1e3, w, tol=1e-13).temperature
    answered = []
    for eps in (1e-9, -1e-8, 3e-8, -1e-7, 1e-6, -1e-5, 1e-4, -1e-3):
        x = root * (1.0 + eps)
        tau = 1e-10 * x
        read = rows.slopes([1.0 / x], facts=False, span=True, higher=higher)
        assert read.span == float(
            (z.astype(np.float64).max(axis=1) - z.min(axis=1)).max()
        )
        found = _one_read_bracket(x, read, n, k, 0.45 * tau)
        answered.append(found is not None)
        # (The read's target moved by 1 to 3 half-widths: the root then lies
        # near or beyond an end, and only a sound proof refuses there.)
        for shift in (-3.0, -1.5, -1.0, 1.0, 1.5, 3.0) if found else ():
            moved = dataclasses.replace(read, steps=read.steps + shift * 0.45 * tau)
            other = _one_read_bracket(x, moved, n, k, 0.45 * tau)
            if other is not None:
                t, p, q = other
                assert exact_slope(z, y, p, w) < 0 < exact_slope(z, y, q, w)
        if found is None:
            continue
        t, p, q = found
        assert p < t < q and q - p <= tau
        assert exact_slope(z, y, p, w) < 0 < exact_slope(z, y, q, w)
    assert answered[: 5 if higher else 2] == [True] * (5 if higher else 2)
    assert not answered[-1]


def test_a_bracket_from_one_read_needs_a_known_span_within_the_clamp():
    # Without the rows' span (inf), or where beta times it reaches the
    # exponent clamp (600), nothing is proven from one read.
    from skts._numerics import Rows as _Rows
    from skts._numerics import one_read_bracket as _one_read_bracket

    rng = np.random.default_rng(3)
    z = rng.normal(size=(200, 6))
    y = z.argmax(axis=1)
    y[:60] = 0
    rows = _Rows(z, y)
    x = 1.0 / solve_continuous(z, y, 1e-3, 1e3, tol=1e-13).temperature
    x *= 1.0 + 1e-9  # (at the root itself the sign of F' is unknowable)
    read = rows.slopes([1.0 / x], facts=False, span=True)
    assert _one_read_bracket(x, read, 200, 6, 0.45e-10 * x) is not None
    unknown = rows.slopes([1.0 / x], facts=False)
    assert unknown.span == math.inf
    assert _one_read_bracket(x, unknown, 200, 6, 0.45e-10 * x) is None
    # One far logit (5,000 below its row's others) puts beta R far beyond
    # the clamp: refused, and the solver reads a pair.
    far = z.copy()
    far[7, (y[7] + 1) % 6] = -5000.0
    wide = _Rows(far, y).slopes([1.0 / x], facts=False, span=True)
    assert wide.span * x > 600.0
    assert _one_read_bracket(x, wide, 200, 6, 0.45e-10 * x) is None
    near = solve_continuous(z, y, 1e-3, 1e3)
    fallback = solve_continuous(far, y, 1e-3, 1e3)
    assert fallback.n_passes == near.n_passes + 1
    _, g, h = derivatives(far, y, 1 / fallback.temperature)
    assert abs(g) <= 1e-10 / fallback.temperature * h * 1.01 + 1e-12


def test_a_higher_read_reports_the_third_derivative():
    # _Slopes.third (from a higher read) is F''' at its beta: the slope of
    # F'' there, measured by central differences of float64 reads.
    from skts._numerics import Rows as _Rows

    rng = np.random.default_rng(11)
    z = rng.normal(scale=4.0, size=(3000, 12))
    y = np.where(rng.random(3000) < 0.6, z.argmax(axis=1), rng.integers(0, 12, 3000))
    rows = _Rows(z, y)
    for beta in (0.3, 1.0, 2.5):
        third = rows.slopes([1.0 / beta], facts=False, higher=True).third
        h = 1e-4 * beta
        up, down = (
            rows.slopes([1.0 / b], facts=False).values[0, 2]
            for b in (beta + h, beta - h)
        )
        assert third == pytest.approx((up - down) / (2 * h), rel=1e-5)
        assert np.isnan(rows.slopes([1.0 / beta], facts=False).third)


def test_the_one_read_bracket_reads_copied_blocks_too():
    # float16 logits and strided views reach the kernel as contiguous block
    # copies: their spans are gathered like their sums, and the bracket is
    # proven from one read there too (float16 widened exactly to float32).
    rng = np.random.default_rng(8)
    z = rng.normal(scale=3.0, size=(40_000, 8))
    y = np.where(rng.random(40_000) < 0.7, z.argmax(axis=1), rng.integers(0, 8, 40_000))
    half = z.astype(np.float16)
    strided = np.repeat(z, 2, axis=1)[:, ::2]
    assert not strided.flags.c_contiguous
    for logits, same in ((half, half.astype(np.float32)), (strided, z)):
        got = solve_continuous(logits, y, 0.01, 100.0)
        want = solve_continuous(same, y, 0.01, 100.0)
        assert got == want
        assert got.n_passes == 1


_TINY_CASES = [
    # (logits, labels, candidates): 1/T overflows float64 for some candidates
    ([[0.4, -0.4], [1.9, 0.3]], [0, 1], [5e-324, 1.0]),
    ([[0.4, -0.4], [1.9, 0.3]], [0, 1], [1e-320, 1e-319]),
    ([[0.4, -0.4], [1.9, 0.3], [0.1, 0.2]], [0, 1, 1], [5e-324, 1e-310, 0.7, 3.0]),
    ([[2.0, 0.0], [3.0, 0.0]], [0, 0], [5e-324, 1e-300, 1.0, 3.0]),  # separable
    # logits that differ by a subnormal amount: only tiny T resolve them
    ([[0.0, 5e-324], [0.0, 0.0]], [1, 0], [5e-324, 1e-323, 0.5, 2.0]),
]


@pytest.mark.parametrize(("z", "y", "temperatures"), _TINY_CASES)
def test_candidates_whose_inverse_overflows_follow_the_rule(z, y, temperatures):
    # (issue 25) 1/T beyond float64 gave NaN losses and the smallest T; the
    # rule's answer, against a 60-digit reference, with no RuntimeWarning.
    from _reference import exact_choice, exact_losses

    z = np.array(z)
    want = exact_choice(z, np.array(y), temperatures)
    result = grid_search(z, np.array(y), np.array(temperatures))
    assert result.temperature == want
    exact = float(exact_losses(z, np.array(y), [want])[0])
    assert result.loss == pytest.approx(exact, rel=1e-12) or (
        exact > 1.7e308 and result.loss == np.inf
    )
    # The continuous solver over the same range ends where the rule's
    # minimiser lies when that is an end (and never at a NaN loss).
    cont = solve_continuous(z, np.array(y), min(temperatures), max(temperatures))
    assert not np.isnan(cont.loss)
    if want in (min(temperatures), max(temperatures)) and len(temperatures) == 2:
        assert cont.temperature == want


def test_softmax_at_a_temperature_whose_inverse_overflows():
    z = np.array([[0.0, 5e-324, -1.0], [2.0, 2.0, 0.0]])
    p = softmax(z, 5e-324)
    # exp(-1) / (1 + exp(-1)) for the subnormal gap of one T; ties share.
    np.testing.assert_allclose(p[0], [1 / (1 + np.e), np.e / (1 + np.e), 0.0])
    np.testing.assert_array_equal(p[1], [0.5, 0.5, 0.0])
    np.testing.assert_allclose(np.exp(log_softmax(z, 5e-324)), p)


@pytest.mark.parametrize(("low", "high"), [(2.0, 5.0), (0.5, 2.0)])
@pytest.mark.parametrize("n_copies", [1, 250_000])
def test_the_continuous_solver_ends_in_one_read_at_an_exact_end(low, high, n_copies):
    # (issue 25) the minimiser exactly at an end of the range (T* = 2: every
    # forecast says 0.9, three in four are right) took 18 or 33 reads.
    z = np.tile(np.log([[9.0, 1.0]]), (4 * n_copies, 1))
    y = np.tile([0, 0, 0, 1], n_copies)
    result = solve_continuous(z, y, low, high)
    assert result.temperature == 2.0
    assert result.n_passes == 1 and result.at_boundary
    assert result.loss == pytest.approx(nll(z, y, 2.0), rel=1e-12)


@pytest.mark.parametrize(
    ("gap", "decided"), [(1e-25, True), (1e-70, True), (1e-120, False)]
)
def test_ties_below_fifty_digits_are_decided_up_to_the_stated_limit(gap, decided):
    # (issue 25) z = [[a, 0], [0, a]], y = [0, 0]: L(T) = log 2 + (a/T)**2 / 8
    # + ..., strictly falling in T, by about 1e-50 (a = 1e-25) or 1e-140
    # relative (a = 1e-70) between candidates: the evaluator escalates to 200
    # digits and finds the rule's answer, the largest T. Below its stated
    # resolution (about 1e-195 relative; a = 1e-120 gives 1e-240) the
    # losses count as equal: the smallest T.
    import mpmath

    from skts._numerics import MAX_DIGITS

    z = np.array([[gap, 0.0], [0.0, gap]])
    y = np.array([0, 0])
    grid = np.array([0.5, 1.0, 2.0])
    with mpmath.workdps(400):
        a = mpmath.mpf(gap)
        losses = [
            (a / t + 2 * mpmath.log1p(mpmath.exp(-a / t))) / 2
            for t in (mpmath.mpf(v) for v in grid)
        ]
        assert losses[0] > losses[1] > losses[2]
        spread = (losses[0] - losses[2]) / losses[2]
    assert (spread > mpmath.mpf(10) ** -(MAX_DIGITS - 5)) == decided
    want = grid[-1] if decided else grid[0]
    assert grid_search(z, y, grid).temperature == want
    full = default_temperatures()
    assert grid_search(z, y, full).temperature == (full[-1] if decided else full[0])
