"""Numerics of temperature scaling (numpy only).

Everything here works on validated arrays: ``logits`` of shape
``(n_samples, n_classes)`` (float32 or float64, any finite values), ``y`` integer
class indices, ``sample_weight`` non-negative floats or ``None``, and candidate
temperatures that are finite and positive. Validation lives in the estimators.

The selection rule (``../DESIGN.md``) is

    L(T)  = -(1/n) sum_i log softmax(z_i / T)[y_i]      (weighted mean with weights)
    T*    = min argmin_{T in candidates} L(T)

and ``-log p_T(y|z)`` is always computed as ``(m - z_y)/T + log sum_j exp((z_j - m)/T)``
with ``m = max_j z_j``: the largest exponent is exactly 0, so nothing overflows.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "BoundaryTemperatureWarning",
    "SearchResult",
    "default_temperatures",
    "derivatives",
    "grid_search",
    "log_softmax",
    "nll",
    "nll_many",
    "softmax",
    "solve_continuous",
]

# About 64k float64 values per block (512 KiB): large enough that numpy's
# per-call overhead is small, small enough to stay in the L2 cache.
_BLOCK_ELEMENTS = 1 << 16
_EPS = float(np.finfo(np.float64).eps)
_BIG = float(np.finfo(np.float64).max)


class BoundaryTemperatureWarning(UserWarning):
    """The chosen temperature lies on the boundary of the candidate range.

    The validation loss may keep decreasing beyond the range: the data prefer
    ``T -> 0`` (every label already has the largest logit) or ``T -> infinity``
    (uniform forecasts). Widen the candidate range or check the held-out data.
    """


def default_temperatures() -> NDArray[np.float64]:
    """Default candidate grid: 1001 geometric points from 0.01 to 100.

    The ratio between neighbours is ``10**(1/250)``, about 0.93%, and the grid
    contains 0.01, 1 and 100 exactly (``10.0**0 == 1.0``).
    """
    return 10.0 ** (np.arange(-500, 501) / 250.0)


def _blocks(n_samples: int, n_classes: int) -> Iterator[slice]:
    # The block size depends on the shape only, so the summation order (and
    # hence every bit of the result) is the same whatever the caller.
    step = max(1, _BLOCK_ELEMENTS // max(n_classes, 1))
    for start in range(0, n_samples, step):
        yield slice(start, min(start + step, n_samples))


def _block_terms(z: NDArray, y: NDArray) -> tuple[NDArray, NDArray]:
    """Centred logits ``d = z - max(z)`` and the gap ``m - z_y`` of one block."""
    z = np.asarray(z, dtype=np.float64)
    m = z.max(axis=1)
    with np.errstate(over="ignore", invalid="ignore"):
        # Differences of logits near +-1e308 may overflow; -max keeps them finite
        # (their exponentials are 0 anyway).
        d = np.maximum(z - m[:, None], -_BIG)
        gap = np.minimum(m - z[np.arange(z.shape[0]), y], _BIG)
    return d, gap


def _row_nll(d: NDArray, gap: NDArray, temperature: float) -> NDArray:
    with np.errstate(over="ignore", under="ignore"):
        return gap / temperature + np.log(np.exp(d / temperature).sum(axis=1))


def _weights_total(sample_weight: NDArray | None, n_samples: int) -> float:
    if sample_weight is None:
        return float(n_samples)
    return float(np.sum(sample_weight, dtype=np.float64))


def nll_many(
    logits: NDArray,
    y: NDArray,
    temperatures: ArrayLike,
    sample_weight: NDArray | None = None,
) -> NDArray[np.float64]:
    """Validation loss ``L(T)`` at each of ``temperatures``, in one read of the data.

    The value for one temperature does not depend on which other temperatures
    are evaluated with it: ``nll_many(z, y, [a, b])[0] == nll(z, y, a)`` bit for
    bit. This routine is the float64 reference of every decision in skts.
    """
    temperatures = np.asarray(temperatures, dtype=np.float64).reshape(-1)
    n_samples, n_classes = logits.shape
    totals = np.zeros(temperatures.shape[0], dtype=np.float64)
    total_weight = _weights_total(sample_weight, n_samples)
    for rows in _blocks(n_samples, n_classes):
        d, gap = _block_terms(logits[rows], y[rows])
        # Normalised weights: the mean stays finite whenever it is representable,
        # even when the plain sum of the row losses would overflow.
        if sample_weight is None:
            scale = np.full(d.shape[0], 1.0 / total_weight)
        else:
            scale = sample_weight[rows] / total_weight
        for k, t in enumerate(temperatures):
            losses = _row_nll(d, gap, float(t))
            with np.errstate(over="ignore", invalid="ignore"):
                totals[k] += np.dot(scale, losses)
    return totals


def nll(
    logits: NDArray,
    y: NDArray,
    temperature: float,
    sample_weight: NDArray | None = None,
) -> float:
    """Validation loss ``L(T)`` (mean negative log-likelihood) at one temperature."""
    return float(nll_many(logits, y, [temperature], sample_weight)[0])


def derivatives(
    logits: NDArray,
    y: NDArray,
    beta: float,
    sample_weight: NDArray | None = None,
) -> tuple[float, float, float]:
    """``F(beta)``, ``F'(beta)`` and ``F''(beta)`` with ``F(beta) = L(1/beta)``.

    ``F'`` is the mean of ``E_p[z] - z_y`` and ``F''`` the mean variance of ``z``
    under ``p = softmax(beta z)``, which is why ``F`` is convex in ``beta``.
    """
    n_samples, n_classes = logits.shape
    total = _weights_total(sample_weight, n_samples)
    f = g = h = 0.0
    for rows in _blocks(n_samples, n_classes):
        d, gap = _block_terms(logits[rows], y[rows])
        w = None if sample_weight is None else sample_weight[rows]
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            e = np.exp(d * beta)
            s = e.sum(axis=1)
            p = e / s[:, None]
            # (p * d) * d, not p * d**2: p is 0 wherever d**2 could overflow.
            pd = p * d
            mean_d = pd.sum(axis=1)
            var_d = np.maximum((pd * d).sum(axis=1) - mean_d * mean_d, 0.0)
            loss = gap * beta + np.log(s)
            grad = mean_d + gap
            scale = np.full(d.shape[0], 1.0 / total) if w is None else w / total
            f += np.dot(scale, loss)
            g += np.dot(scale, grad)
            h += np.dot(scale, var_d)
    return float(f), float(g), float(h)


def _all_rows_constant(logits: NDArray) -> bool:
    n_samples, n_classes = logits.shape
    for rows in _blocks(n_samples, n_classes):
        block = logits[rows]
        if np.any(block.max(axis=1) != block.min(axis=1)):
            return False
    return True


def _error_bound(loss: float, n_samples: int, n_classes: int) -> float:
    """Generous bound on ``|computed L - exact L|`` for the float64 evaluator.

    Each row costs a handful of roundings relative to its loss plus about
    ``n_classes`` absolute ones in ``log(sum exp)`` (whose argument is >= 1);
    the outer sum adds ``log2(block)`` (pairwise) and one per block. A larger
    bound only widens the set of candidates evaluated exactly, never the answer.
    """
    n_blocks = 1 + n_samples * max(n_classes, 1) // _BLOCK_ELEMENTS
    terms = n_classes + 16 + math.log2(max(n_samples, 2)) + n_blocks
    return 8.0 * _EPS * terms * (abs(loss) + 1.0)


@dataclass(frozen=True)
class SearchResult:
    """Outcome of a temperature search."""

    temperature: float
    loss: float
    at_boundary: bool
    n_passes: int


def _newton_beta(
    logits: NDArray,
    y: NDArray,
    sample_weight: NDArray | None,
    lo: float,
    hi: float,
    start: float,
    rtol: float,
    max_iter: int = 60,
) -> tuple[float, int]:
    """Approximate minimiser of the convex ``F`` on ``[lo, hi]`` (safeguarded Newton).

    Only a starting point for the exact decision, which does not trust it.
    """
    beta = min(max(start, lo), hi)
    passes = 0
    tried_lo = tried_hi = False
    for _ in range(max_iter):
        _, g, h = derivatives(logits, y, beta, sample_weight)
        passes += 1
        if not np.isfinite(g) or g == 0.0:
            break
        if g > 0:
            hi = beta
        else:
            lo = beta
        tried_lo |= beta == lo
        tried_hi |= beta == hi
        if hi - lo <= rtol * hi:
            break
        step = g / h if h > 0 and np.isfinite(h) else np.inf
        new = beta - step
        if not lo < new < hi:
            # Leaving the bracket: try its untried end once (the minimum is often
            # there), else bisect in log space since the range spans decades.
            if new >= hi and not tried_hi:
                new = hi
            elif new <= lo and not tried_lo:
                new = lo
            else:
                new = math.sqrt(lo * hi)
        if abs(new - beta) <= rtol * beta:
            beta = new
            break
        beta = new
    return beta, passes


def grid_search(
    logits: NDArray,
    y: NDArray,
    temperatures: NDArray,
    sample_weight: NDArray | None = None,
    *,
    start: float = 1.0,
) -> SearchResult:
    """The exact rule ``T* = min argmin_{T in temperatures} L(T)``.

    The answer equals brute force (``nll_many`` at every candidate, then the
    smallest candidate among those with the smallest computed loss) bit for
    bit, at a cost independent of the number of candidates in all but
    degenerate cases.

    Notes
    -----
    ``F(beta) = L(1/beta)`` is convex, so over the candidates sorted by
    temperature the exact losses fall and then rise. A safeguarded Newton
    search locates the minimum; then candidates are evaluated outward from it
    with the float64 evaluator until, on each side, a candidate's computed loss
    exceeds the best computed loss by more than twice the evaluator's error
    bound ``eps``. Every candidate further out has an exact loss at least that
    of the edge (convexity), so its computed loss exceeds the best computed
    loss: it can neither win nor tie. Inside the evaluated window the rule is
    applied literally.
    """
    cand = np.unique(np.asarray(temperatures, dtype=np.float64))  # ascending T
    n_samples, n_classes = logits.shape
    if cand.shape[0] == 1 or _all_rows_constant(logits):
        # One candidate, or L(T) = log(n_classes) exactly for every T: the rule
        # gives the smallest candidate without any floating-point comparison.
        loss = nll(logits, y, float(cand[0]), sample_weight)
        return SearchResult(float(cand[0]), loss, cand.shape[0] > 1, 1)

    beta_lo, beta_hi = 1.0 / cand[-1], 1.0 / cand[0]
    beta, passes = _newton_beta(
        logits, y, sample_weight, beta_lo, beta_hi, start, rtol=1e-4
    )
    # Candidates (ascending T) on either side of T = 1/beta.
    j = int(np.searchsorted(cand, 1.0 / beta))
    left, right = max(j - 1, 0), min(j, cand.shape[0] - 1)
    losses: dict[int, float] = {}

    def evaluate(idx: list[int]) -> None:
        nonlocal passes
        todo = [i for i in idx if i not in losses]
        if todo:
            values = nll_many(logits, y, cand[todo], sample_weight)
            losses.update(zip(todo, values.tolist(), strict=True))
            passes += 1

    evaluate(list(range(left, right + 1)))
    width = 1
    while True:
        best = min(losses.values())
        margin = 2.0 * _error_bound(best, n_samples, n_classes)
        if not np.isfinite(best):
            margin = np.inf
        grow_left = left > 0 and losses[left] <= best + margin
        grow_right = right < cand.shape[0] - 1 and losses[right] <= best + margin
        if not (grow_left or grow_right):
            break
        # Grow by doubling steps: a long plateau of equal computed losses costs
        # a logarithmic number of passes (and linear work, as brute force).
        idx = []
        if grow_left:
            new_left = max(left - width, 0)
            idx += range(new_left, left)
            left = new_left
        if grow_right:
            new_right = min(right + width, cand.shape[0] - 1)
            idx += range(right + 1, new_right + 1)
            right = new_right
        evaluate(idx)
        width *= 2

    best = min(losses.values())
    chosen = min(i for i, v in losses.items() if v == best)
    at_boundary = chosen in (0, cand.shape[0] - 1)
    return SearchResult(float(cand[chosen]), best, at_boundary, passes)


def solve_continuous(
    logits: NDArray,
    y: NDArray,
    t_min: float,
    t_max: float,
    sample_weight: NDArray | None = None,
    *,
    tol: float = 1e-10,
    start: float = 1.0,
) -> SearchResult:
    """Minimise ``L(T)`` over ``[t_min, t_max]`` by bracketed bisection in ``beta``.

    Works on ``F(beta) = L(1/beta)`` over ``[1/t_max, 1/t_min]``, of width ``W``,
    with the absolute tolerance ``tau = tol * 1/t_min`` in ``beta``. Newton steps
    are taken inside the bracket only where even their worse outcome leaves a
    bracket that the remaining bisection steps can reduce below ``tau``; so the
    answer is within ``tau`` of a minimiser after at most
    ``ceil(log2(W / tau))`` evaluations of ``F'``. When ``F'`` keeps one sign on
    the whole interval the endpoint is returned.
    """
    lo, hi = 1.0 / t_max, 1.0 / t_min
    width = hi - lo
    if width <= 0.0:
        loss = nll(logits, y, t_min, sample_weight)
        return SearchResult(float(t_min), loss, False, 1)
    tau = tol * hi
    budget = max(1, math.ceil(math.log2(width / tau)))
    neg_seen = pos_seen = False  # a sign of F' seen inside, at the lower/upper end
    x = min(max(start, lo), hi)
    passes = 0
    for used in range(budget):
        remaining = budget - used
        # Any point whose worse side is <= tau * 2**(remaining - 1) keeps the
        # promise; the midpoint always qualifies.
        reach = tau * 2.0 ** (remaining - 1)
        x = min(max(x, hi - reach), lo + reach)
        _, g, h = derivatives(logits, y, x, sample_weight)
        passes += 1
        if g == 0.0:
            lo = hi = x
            break
        if g > 0:
            hi, pos_seen = x, True
        else:
            lo, neg_seen = x, True
        if hi - lo <= tau:
            break
        step = g / h if h > 0 and np.isfinite(h) and np.isfinite(g) else np.inf
        x = x - step
        if abs(step) < 0.5 * tau:
            # Newton has converged: aim just past its target so that the next
            # sign change closes the bracket below tau.
            x = x - math.copysign(0.5 * tau, step)
        if not lo < x < hi:
            x = 0.5 * (lo + hi)
    if lo == hi:
        beta = lo
    elif not pos_seen:
        beta = hi  # F' < 0 wherever evaluated: the minimiser is the upper end
    elif not neg_seen:
        beta = lo
    else:
        beta = 0.5 * (lo + hi)
    at_boundary = beta in (1.0 / t_max, 1.0 / t_min)
    if beta == 1.0 / t_max:
        temperature = float(t_max)
    elif beta == 1.0 / t_min:
        temperature = float(t_min)
    else:
        temperature = 1.0 / beta
    loss = nll(logits, y, temperature, sample_weight)
    return SearchResult(temperature, loss, at_boundary, passes + 1)


def warn_boundary(temperature: float, low: float, high: float) -> None:
    """Emit :class:`BoundaryTemperatureWarning` for a boundary choice."""
    side = "smallest" if temperature == low else "largest"
    hint = "T -> 0" if temperature == low else "T -> infinity"
    warnings.warn(
        f"The chosen temperature {temperature!r} is the {side} candidate "
        f"(range [{low!r}, {high!r}]); the validation loss may keep decreasing "
        f"beyond it: the data may prefer {hint}.",
        BoundaryTemperatureWarning,
        stacklevel=3,
    )


def log_softmax(logits: NDArray, temperature: float) -> NDArray[np.float64]:
    """``log softmax(logits / T)`` row by row, in blocks, without overflow."""
    n_samples, n_classes = logits.shape
    out = np.empty((n_samples, n_classes), dtype=np.float64)
    for rows in _blocks(n_samples, n_classes):
        z = np.asarray(logits[rows], dtype=np.float64)
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            u = np.maximum(z - z.max(axis=1)[:, None], -_BIG) / temperature
            out[rows] = u - np.log(np.exp(u).sum(axis=1))[:, None]
    return out


def softmax(logits: NDArray, temperature: float) -> NDArray[np.float64]:
    """``softmax(logits / T)`` row by row, in blocks, without overflow."""
    n_samples, n_classes = logits.shape
    out = np.empty((n_samples, n_classes), dtype=np.float64)
    for rows in _blocks(n_samples, n_classes):
        z = np.asarray(logits[rows], dtype=np.float64)
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            e = np.exp(np.maximum(z - z.max(axis=1)[:, None], -_BIG) / temperature)
            out[rows] = e / e.sum(axis=1)[:, None]
    return out
