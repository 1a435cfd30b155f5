"""The continuous solver: bracketed Newton in ``beta = 1/T`` on the convex
``F(beta) = L(1/beta)``, to a tolerance, in at most ``ceil(log2(W / tau)) +
3`` reads (see :func:`search_continuous`)."""

from __future__ import annotations

import itertools
import math

import numpy as np
from numpy.typing import NDArray

from skts._numerics._exact import exact_rule
from skts._numerics._passes import Rows, Slopes
from skts._numerics._result import SearchResult
from skts._numerics._steer import float32_range, one_read_bracket, warm_start
from skts._numerics._steps import model_step, newton_from

__all__ = ["TINY_T", "search_continuous", "solve_continuous"]

# Below this temperature beta = 1/T nears float64's largest value: the
# solver's float reads stop here, and the 50-digit evaluator takes over.
TINY_T = 2.0**-1020


def solve_continuous(
    logits: NDArray,
    y: NDArray,
    t_min: float,
    t_max: float,
    sample_weight: NDArray | None = None,
    *,
    tol: float = 1e-10,
    start: float = 1.0,
    n_jobs: int | None = None,
) -> SearchResult:
    """Minimise ``L(T)`` over ``[t_min, t_max]`` on arrays (see
    :func:`search_continuous`)."""
    rows = Rows(logits, y, sample_weight, n_jobs)
    return search_continuous(rows, t_min, t_max, tol=tol, start=start)


def search_continuous(
    rows: Rows,
    t_min: float,
    t_max: float,
    *,
    tol: float = 1e-10,
    start: float = 1.0,
) -> SearchResult:
    """Minimise ``L(T)`` over ``[t_min, t_max]``: bracketed Newton in ``beta``.

    Works on the convex ``F(beta) = L(1/beta)`` over ``[1/t_max, 1/t_min]``, of
    width ``W``, and reads the data at most ``ceil(log2(W / tau)) + 3`` times
    in all, ``tau = tol * beta_start``.

    Notes
    -----
    A row subsample gives a starting point. Unless it clearly puts the
    minimum inside the range, one read first evaluates ``F'`` at both ends
    with a proven error bound: a proven ``F' < 0`` at ``1/t_min`` (or ``> 0``
    at ``1/t_max``) means, by convexity, that the loss falls (rises) on the
    whole range, and that end is returned at once. Then float32 steps on all
    the data steer (they never shrink the bracket; at most three reads before
    the float64 phase, usually one or none), and float64 evaluations of
    ``F'`` shrink a bracket around the minimiser. The steering steps, and the
    first float64 one when Newton's would not land close enough, come from
    the cubic Taylor model of ``F'`` (its third and fourth derivatives read
    with it, :func:`~skts._numerics._steps.model_step`): from 3% off it
    lands within about 2e-6, and from there Newton lands within tau. Each
    read adds, beside Newton's points, equally spaced points in any gap
    (between the bracket ends and the points) wider than ``tau * 4**(r - 1)``,
    ``r`` the reads left (at most three per gap), so whatever the signs the
    bracket is at most ``tau`` wide when the budget is spent; on smooth data
    that costs no point until the budget is nearly spent. A read of one
    point near the root usually ends it: a bracket of width 0.9 tau about
    its target is proven from that read alone
    (:func:`~skts._numerics._steer.one_read_bracket`: the rows' largest
    range bounds how fast ``F''`` can change). Where it is not, Newton steps
    (two points
    straddling the target, in one read, once the step's error is below tau;
    read as a pair, they cost little more than one) end it after one float64
    read more. The search also stops at a point where
    ``|F'|`` is within its proven rounding bound: float64 cannot tell on which
    side of it the minimiser lies.
    """
    if t_min < TINY_T:
        return _with_a_huge_beta(rows, t_min, t_max, tol=tol, start=start)
    lo, hi = 1.0 / t_max, 1.0 / t_min
    width = hi - lo
    if width <= 0.0 or rows.flat():
        # One point, or the same loss everywhere: the lower end of T.
        loss = float(rows.nll([t_min])[0])
        return SearchResult(float(t_min), loss, width > 0, 1, flat=width > 0)
    steer = float32_range(lo, hi)
    edge = 0
    if steer:
        x, se, last, edge = warm_start(rows, lo, hi, start)
    else:  # beyond float32's range: no float32 steering
        x, se = min(max(start, lo), hi), np.inf
    tau = max(tol * max(x, lo), 5e-324)
    # (log2 of a difference: width / tau may overflow for ranges like 1e+-300.)
    budget = max(1, math.ceil(math.log2(width) - math.log2(tau))) + 3
    passes = 0
    a, b = lo, hi
    neg_seen = pos_seen = False
    # beta -> (F, F', step to subtract, bound on F', order of the step: 2 for
    # Newton's, 4 for the cubic model's)
    info: dict[float, tuple[float, float, float, float, int]] = {}
    settled: float | None = None  # a point where the sign of F' is unknowable

    def read(points: list[float], higher: bool = False) -> Slopes:
        nonlocal passes, a, b, neg_seen, pos_seen, settled
        ends = lo in points or hi in points  # the exact facts matter at the ends
        one = len(points) == 1 and not ends  # (its span: see one_read_bracket)
        res = rows.slopes(
            [1.0 / p for p in points], facts=ends, higher=higher, span=one
        )
        passes += 1
        for p, (f, g, _), bound, step, order in zip(
            points, res.values, res.bound, res.steps, res.orders, strict=True
        ):
            info[p] = (float(f), float(g), float(step), float(bound), int(order))
            if not abs(g) > bound:
                settled = p if settled is None else settled
            elif g > 0:
                b, pos_seen = min(b, p), True
            else:
                a, neg_seen = max(a, p), True
        return res

    # The relative error of x (the warm start's estimate when its sample was
    # all the data: its last step was from the cubic model).
    error = 3.0 * last**4 + 1e-7 if steer and se == 0.0 else math.inf
    if edge:
        # Every subsample label has its row's largest (smallest) logit: the
        # loss at that end and the exact facts of every row, in one cheap read.
        end = hi if edge == 1 else lo
        facts = rows.slopes([1.0 / end], moments=False)
        passes += 1
        if facts.separable if edge == 1 else facts.anti_separable:
            t = float(t_min) if edge == 1 else float(t_max)
            return SearchResult(t, float(facts.values[0, 0]), True, passes)
    if edge or not (lo < x - 4.0 * se and x + 4.0 * se < hi):
        # The seed: the sign of F' at both ends, in one read.
        ends = read([lo, hi])
        if ends.decreasing(1):
            return SearchResult(float(t_min), info[hi][0], True, passes)
        if ends.increasing(0):
            return SearchResult(float(t_max), info[lo][0], True, passes)
        for end, t in ((hi, t_min), (lo, t_max)):
            if not abs(info[end][1]) > info[end][3]:
                # |F'| within its proven rounding bound at an end (the
                # minimiser there, to float64's resolution): that end, from
                # this one read, as for any such point (see the Notes).
                return SearchResult(float(t), info[end][0], True, passes)
        # Newton from the end nearer the subsample's answer.
        p = hi if abs(x - hi) < abs(x - lo) else lo
        stepped = newton_from(p, info[p][2], lo, hi)
        x = x if stepped is None else stepped
        settled, error = None, math.inf
    # The float64 phase straddles the minimiser in its second read when its
    # first (a Newton step, or one from the cubic model of F' when Newton
    # would not be close enough) lands within a fraction of tau. Float32
    # steps (cubic model too: error about 3 s**4 after a step of relative
    # size s, and about 1e-7 at best) get its first read that close; the warm
    # start's last step may have, when its sample was all the data.
    rel_tau = tau / max(x, lo)
    while passes < 3:  # at most 3 reads before the float64 phase
        if not steer or not lo < x < hi or 3.0 * error**4 <= 0.1 * rel_tau:
            break  # the answer is an end, or close enough
        _, g, h, g3, g4 = rows.derivatives([x], "float32", higher=True)[0]
        passes += 1
        step = model_step(g, h, g3, g4)
        if not np.isfinite(step):
            break
        new = min(max(x + step, lo), hi)
        error = 3.0 * (abs(new - x) / new) ** 4 + 1e-7
        x = new
    # Newton from x if its error (about 2 e**2) is well inside tau, else the
    # cubic model (3 e**4), from the first float64 read.
    higher = 2.0 * error**2 > 0.1 * rel_tau
    # The float64 phase: at most budget - passes reads, each keeping its
    # points within reach of both ends of the bracket.
    target = x
    while passes < budget and settled is None and b - a > tau:
        # Every gap left after this read is at most reach wide, and each later
        # read can cut a gap in four (three points): reach = tau 4**r, r the
        # reads left after this one (in logs: it may exceed the float range).
        left = budget - passes - 1
        reach = (
            math.inf if 2 * left + math.log2(tau) > 1000 else math.ldexp(tau, 2 * left)
        )
        points = [target]
        near = [p for p in info if a <= p <= b]
        if near:
            p = min(near, key=lambda q: abs(info[q][1]))
            step, order = info[p][2], info[p][4]
            target = p - step
            if not a < target < b:
                # Beyond the bracket: look at an untried end once (the minimum
                # is often there), else bisect (in log space when it is wide).
                if target >= b and b == hi and hi not in info:
                    target = hi
                elif target <= a and a == lo and lo not in info:
                    target = lo
                elif a > 0 and b > 4.0 * a:
                    target = math.sqrt(a) * math.sqrt(b)
                else:
                    target = 0.5 * (a + b)
                points = [target]
            elif step * step <= tau * p if order == 2 else 30.0 * step**4 <= tau * p**3:
                # Newton's next error (~step**2 / beta), or the cubic model's
                # (~3 step**4 / beta**3), is about tau or less (a tenth of it):
                # straddle the target, both points in one read.
                points = [max(target - 0.45 * tau, a), min(target + 0.45 * tau, b)]
            else:
                points = [target]
        if budget - passes == 1:
            # The last read: an end that may be the answer must be known.
            points += [e for e in (lo, hi) if e in (a, b) and e not in info]
        points = sorted({q for q in points if a <= q <= b})
        # Whatever the signs, the next bracket is one of the gaps between a,
        # the points and b: cut any gap wider than reach into equal parts (at
        # most four once the bracket is within 4 reach, as the previous read
        # left it). Newton's points go where Newton wants; the guarantee costs
        # extra points only when they do not already keep it, which on smooth
        # data is the last read or two of a budget already mostly spent.
        edges = [a, *points, b]
        for u, v in itertools.pairwise(edges):
            if v - u > reach:
                parts = math.ceil((v - u) / reach)
                points += [u + (v - u) * (i / parts) for i in range(1, parts)]
        # (A straddle clamped to the bracket may land on a known end.)
        points = sorted({q for q in points if q not in info})
        if not points:
            break
        interior = len(points) == 1 and lo < points[0] < hi
        res = read(points, higher=higher and interior)
        higher = False
        if interior and settled is None:
            # A bracket proven from this read alone, about its target
            # (Newton's or the cubic model's): no second read (the pair) to
            # straddle it.
            found = one_read_bracket(
                points[0], res, rows.n_samples, rows.n_classes, 0.45 * tau
            )
            if found is not None and a < found[0] < b:
                # (the minimiser is in both brackets: [a, b] by the signs
                # read so far, the other by the proof)
                x0, (f0, g0, h0) = points[0], (float(v) for v in res.values[0])
                t = found[0]
                # F at t from its Taylor polynomial at x0 (the next term,
                # below R F'' |t - x0|**3 / 6, is far below F's rounding).
                dt = t - x0
                loss = f0 + g0 * dt + 0.5 * h0 * dt * dt
                return SearchResult(1.0 / t, float(loss), False, passes)
    if settled is not None:
        beta = settled
    elif a == b:
        beta = a
    elif not pos_seen:
        beta = hi  # F' < 0 wherever evaluated: the minimiser is the upper end
    elif not neg_seen:
        beta = lo
    else:
        beta = min((a, b), key=lambda v: info[v][0] if v in info else np.inf)
    if beta not in info:
        # (Only when the last read had to spend its points elsewhere.)
        known = [v for v in (a, b) if v in info]
        beta = known[0] if known else beta
    at_boundary = beta in (lo, hi)
    if beta == lo:
        temperature = float(t_max)
    elif beta == hi:
        temperature = float(t_min)
    else:
        temperature = 1.0 / beta
    if beta in info:
        loss = info[beta][0]
    else:
        loss = float(rows.nll([temperature])[0])
        passes += 1
    return SearchResult(float(temperature), float(loss), at_boundary, passes)


def _with_a_huge_beta(
    rows: Rows, t_min: float, t_max: float, *, tol: float, start: float
) -> SearchResult:
    """The continuous solver when ``1/t_min`` is beyond float64 (``t_min``
    below ``2**-1020``): the range down to ``2**-1020`` is searched as usual;
    an answer at that end, or a range entirely below it, is compared with
    ``t_min`` by the 50-digit evaluator (which holds ``1/T`` exactly), and
    the smaller loss wins (ties: the smaller ``T``)."""
    passes = 0
    if t_max > TINY_T:
        found = search_continuous(rows, TINY_T, t_max, tol=tol, start=start)
        if found.temperature != TINY_T:
            at_end = found.temperature == t_max
            return SearchResult(found.temperature, found.loss, at_end, found.n_passes)
        passes = found.n_passes
    ends = [t_min, min(t_max, TINY_T)] if t_max > t_min else [t_min]
    k, loss, reads = exact_rule(rows, ends)
    t = float(ends[k])
    # (a loss beyond float64's range is reported as inf)
    return SearchResult(t, float(loss), t in (t_min, t_max), passes + reads)
