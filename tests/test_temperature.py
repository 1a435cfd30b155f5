"""The numerics: the exact grid rule against brute force, and the solvers."""

import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from _reference import exact_choices, exact_losses, float_losses
from skts._temperature import (
    default_temperatures,
    derivatives,
    grid_search,
    log_softmax,
    nll,
    nll_many,
    softmax,
    solve_continuous,
)

_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

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
        width = 1 / lo - 1 / hi
        tau = 1e-10 * (1 / cont.temperature)
        bound = math.ceil(math.log2(width / tau)) + 3
        assert cont.n_passes <= bound + 3  # + the float32 steering passes


def test_continuous_takes_few_passes_on_real_logits():
    if not _DATA.exists():
        pytest.skip("../shared/data is not beside the repository")
    data = np.load(_DATA / "playground_cifar100.npz")
    logits, y = data["val_logits"], data["val_labels"]
    cont = solve_continuous(logits, y, 0.01, 100.0, tol=1e-10)
    assert cont.n_passes <= 4
    _, g, h = derivatives(logits, y, 1 / cont.temperature)
    # Within tau = 1e-10 * beta of the root of F': |F'| <= tau * F'' (+ rounding).
    assert abs(g) <= 1e-10 / cont.temperature * h * 1.01 + 1e-12


def test_near_tie_is_decided_in_float64_like_brute_force():
    # 600 rows of the log-9 example: the optimum is T = 2 exactly. Candidates
    # symmetric around it in beta have losses equal to ~1e-9, far below what
    # float32 arithmetic can separate: float64 decides, as brute force does.
    logits = np.tile([0.0, np.log(9.0)], (600, 1)).astype(np.float32)
    y = np.tile([1, 1, 1, 0], 150)
    for delta in (1e-3, 1e-5, 1e-7):
        grid = np.array([1 / (0.5 + delta), 1 / (0.5 - delta), 0.5, 8.0])
        result = grid_search(logits, y, grid)
        assert [result.temperature] == brute_force(logits, y, grid)


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
