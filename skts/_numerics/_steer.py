"""Steering: where the searches look first, and the proof that ends the
continuous solver in one read.

- :func:`warm_start`: Newton on a row subsample (float32 reads through
  :meth:`Rows.moments`), then one step on all the data; it says where the
  minimum is likely to be, never what the answer is.
- :func:`one_read_bracket`: a bracket of the minimiser proven from one
  float64 :meth:`Rows.slopes` read, from bounds on how fast ``F''`` changes.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from skts._numerics._blocks import EPS
from skts._numerics._compiled import kernel
from skts._numerics._passes import Rows, Slopes
from skts._numerics._steps import model_step, newton_beta, newton_from, newton_step

# Newton steps on the warm start's sample at most (each a read of about 2**20
# values; one in the usual case).
_SAMPLE_STEPS = 8

__all__ = ["float32_range", "one_read_bracket", "spacing", "warm_start"]


def spacing(cand: NDArray, beta: float) -> float:
    """The log-spacing of the sorted candidates ``cand`` around ``1/beta``."""
    if cand.shape[0] < 2:
        return 0.0
    j = min(max(int(np.searchsorted(cand, 1.0 / beta)), 1), cand.shape[0] - 1)
    return math.log(cand[j] / cand[j - 1])


def float32_range(beta_lo: float, beta_hi: float) -> bool:
    """Whether the float32 passes (and their error bounds) apply to every
    ``beta`` in ``[beta_lo, beta_hi]``: ``beta`` and ``beta * d`` must stay far
    from float32 underflow and overflow (``d`` is clipped at -3.4e38, which
    changes nothing once ``beta >= 1e-30``: both exponentials are 0)."""
    return 1e-30 <= beta_lo and beta_hi <= 1e30


def subsample_rows(n_samples: int, n_classes: int) -> slice:
    """The rows of :func:`warm_start`'s subsample: every k-th row, at most
    2**16 rows and about 2**20 values (a backend may read them ahead)."""
    m = min(n_samples, max(256, min((1 << 20) // n_classes, 1 << 16)))
    step = max(1, n_samples // m)
    return slice(0, step * m, step)


def warm_start(
    data: Rows, lo: float, hi: float, start: float
) -> tuple[float, float, float, int]:
    """Minimiser of ``F`` on a row subsample, its standard error (in ``beta``),
    the subsample's ``F''`` there (when the subsample is all the data: the
    relative size ``s`` of the last, unevaluated, step, a cubic-model step
    whose error is about ``3 s**4``), and which end the subsample points to.

    The subsample (every k-th row, at most 2**16 rows and about 2**20 values)
    costs a few percent of one pass per Newton step (compiled float32
    passes); its answer tells where to look, never what to answer. When it
    would be the whole data set it is the data itself (no copy), and the
    standard error is 0. The last value is ``1`` when every subsample label
    has the largest logit of its row (the data may prefer ``T -> 0``), ``-1``
    when every one has the smallest (``T -> infinity``), else ``0``: exact
    comparisons, read by the first pass, where the float32 derivatives
    underflow.
    """
    n_samples, n_classes = data.n_samples, data.n_classes
    picked = subsample_rows(n_samples, n_classes)
    # The data itself, or a view of every step-th row (no copy), where the
    # kernel reads them in place; else a copy (e.g. a device or Dask sample).
    view = data.view(picked)
    if view is not None:
        sub, sub_y, sub_w = view
    else:
        sub, sub_y, sub_w = data.subsample(picked)
        if not kernel.supports(sub):
            dtype = np.float64 if sub.dtype == np.float64 else np.float32
            sub = np.require(sub, dtype, "CA")  # (aligned too)
    if sub_w is not None and not sub_w.sum() > 0:
        sub_w = None
    whole = sub.shape[0] >= n_samples
    # Newton first on every k-th row of the sample (about 2**14 values, at
    # least 64 rows) to 1%, then one step on every j-th row (about 2**17
    # values), then steps on the sample (see below): each step starts within
    # the sampling noise of the one before, where Newton converges
    # quadratically.

    def sample_rows(logits, y, w) -> Rows:
        # (the fit's own threads: n_jobs=1 is one thread here too; and, as the
        # data's reads, a look at every logit while they are not known finite)
        return Rows(
            logits, y, w, data.n_jobs, keep_maxima=False, unchecked=data.unchecked
        )

    def every(stride: int) -> Rows:
        small = sub[::stride] if stride > 1 else sub
        small_rows = sample_rows(
            small if kernel.supports(small) else np.require(small, None, "CA"),
            sub_y[::stride],
            None if sub_w is None else sub_w[::stride],
        )
        if small_rows.sample_weight is not None and not small_rows.total > 0:
            small_rows = sample_rows(small_rows.logits, small_rows.y, None)
        return small_rows

    stride = max(1, min(sub.shape[0] // 64, sub.shape[0] * n_classes >> 17))
    tiny_stride = max(1, min(sub.shape[0] // 64, sub.shape[0] * n_classes >> 14))
    small_rows = every(stride)
    sample = sample_rows(sub, sub_y, sub_w)
    found: list[int] = []

    def moments(rows: Rows, seen: dict, want_facts: bool = True, higher: bool = False):
        """``deriv(beta)`` on ``rows``; with ``want_facts``, its first read also
        records which end the rows point to (in ``found``); with ``higher``,
        ``seen`` also gets the third and fourth derivatives (last)."""

        def deriv(b: float):
            if b in seen:
                return tuple(seen[b][:3])
            # (a read of all the data records its row maxima for the fit)
            values, facts = rows.moments(
                b, facts=want_facts and not found, higher=higher
            )
            if facts is not None:
                top, bottom = facts
                found.append(1 if top else -1 if bottom else 0)
            seen[b] = values
            return tuple(seen[b][:3])

        return deriv

    beta0 = min(max(start, lo), hi)
    if whole:
        # All the data: Newton to 1% on a sample (every k-th row, about 2**14
        # values) then one step on all the data from the cubic model of F'
        # (third and fourth derivatives from the same read): its error, about
        # 3 s**4 for a step of relative size s, is returned in its place.
        if tiny_stride > 1:
            # (to 3%: the sampling noise is of that order, and the cubic
            # model's error from 3% is about 2e-6)
            tiny = moments(every(tiny_stride), {}, want_facts=False)
            beta0, _ = newton_beta(tiny, lo, hi, beta0, rtol=3e-2)
        else:
            beta0, _ = newton_beta(moments(sample, {}), lo, hi, beta0, rtol=1e-2)
        seen: dict = {}
        # (the data itself when it can be read in place: the same values, and
        # its row maxima are then known to the fit's later reads)
        rows = data if data.readable() else sample
        moments(rows, seen, higher=True)(beta0)
        edge = found[0]
        if edge:
            return (hi if edge == 1 else lo), np.inf, np.nan, edge
        _, g, h, _, g3, g4 = seen[beta0]
        step = model_step(g, h, g3, g4)
        beta = newton_from(beta0, -step, lo, hi)
        beta = beta0 if beta is None else beta
        # (se 0; the curvature slot carries the last step's relative size)
        return beta, 0.0, abs(beta - beta0) / beta, edge
    seen_small: dict = {}
    deriv = moments(small_rows, seen_small)
    if tiny_stride > stride:
        # (the exact facts come from the first read of small_rows below)
        tiny = moments(every(tiny_stride), {}, want_facts=False)
        beta0, _ = newton_beta(tiny, lo, hi, beta0, rtol=1e-2)
    _, g, h = deriv(beta0)
    edge = found[0]
    if edge:
        # The subsample's own minimum is at that end; Newton would only crawl
        # there (the derivatives decay exponentially on separable rows).
        return (hi if edge == 1 else lo), np.inf, np.nan, edge
    if tiny_stride > stride:
        beta = newton_step(beta0, g, h, lo, hi)
        beta = beta0 if beta is None else beta
    else:
        beta, _ = newton_beta(deriv, lo, hi, beta0, rtol=1e-2)
    # Then Newton steps on the whole sample, the last not evaluated: from
    # within 1%, Newton's quadratic convergence leaves about 1e-4, a
    # hundredth of the default grid's spacing, after one. The smaller
    # samples may be far off, though (a few dozen wide rows of very
    # confident logits put the first answer 40% away): the steps go on until
    # what the last leaves (about 3 s**2 for a step of relative size s) is
    # below a quarter of the standard error; else the windows would start
    # many standard errors from the minimum and grow read by read.
    seen = seen_small if stride == 1 else {}
    sample_deriv = moments(sample, seen)
    for _ in range(_SAMPLE_STEPS):
        _, g, h = sample_deriv(beta)
        at = beta
        stepped = newton_step(at, g, h, lo, hi)
        beta = at if stepped is None else stepped
        # Standard error of the root of the mean gradient: sd(g_i) / (sqrt(m) F'').
        _, mean_g, curvature, mean_g2 = seen[at]
        sd = math.sqrt(max(mean_g2 - mean_g * mean_g, 0.0))
        if not curvature > 0 or not np.isfinite(sd):
            return beta, np.inf, curvature, edge
        se = sd / (math.sqrt(sub.shape[0]) * curvature)
        if 3.0 * ((beta - at) / beta) ** 2 * beta <= 0.25 * se:
            break
    return beta, se, curvature, edge


def one_read_bracket(
    x: float, read: Slopes, n_samples: int, n_classes: int, half: float
) -> tuple[float, float, float] | None:
    """A bracket of the minimiser proven from one float64 read at ``x``
    alone: ``(t, p, q)``, ``F' < 0`` at ``p`` and ``> 0`` at ``q``, ``|q - p|
    <= 2 half``, about the read's target ``t`` (``x`` less its step); None
    if the read cannot prove it (then the caller reads a pair there).

    Notes
    -----
    Per row, under ``p = softmax(beta d)``, the third and fourth cumulants
    of ``d`` are at most ``R_i`` and ``R_i**2`` times its variance, ``R_i``
    the row's range (``|d - E d| <= R_i``, and the variance is at most
    ``R_i**2 / 4``). So ``|F'''| <= R F''`` and ``|F''''| <= R**2 F''``, ``R``
    the largest range (``read.span``), and ``F''(x + h)`` lies within a
    factor ``e^(R |h|)`` of ``F''(x)``. With ``F'(x) = g +- e_g`` (the read's
    proven bound), ``F''(x) = H +- e_H`` and, from a ``higher`` read,
    ``F'''(x) = K +- e_K``: at distance ``s`` towards the root, ``|F'|`` has
    fallen by at least ``(H - e_H) (1 - e^(-R s)) / R`` and at most ``(H +
    e_H) (e^(R s) - 1) / R``, or, with ``K``, by ``(H -+ e_H) s + (k -+ e_K)
    s**2 / 2 -+ R**2 (H + e_H) e^(R s) s**3 / 6`` (``k = K`` towards larger
    beta, ``-K`` towards smaller); the larger of the two lower bounds and
    the smaller of the upper ones hold. ``F'`` has changed sign at the far
    end of ``t +- half`` and not yet at the near one when they say so (with
    a margin of 1e-9 of the terms for the roundings of the test itself).

    The error bounds: with ``R beta <= 600`` no exponent reaches the clamp
    at -700, and each exponential of the read is within ``(8 + 3 |x_j|) u``,
    ``|x_j| <= R beta``; the row sums of ``e x**j`` (same-signed terms) carry
    at most ``c = K + 16 + 3 R beta`` units ``u``, the variance ``m2 - m1**2``
    at most ``4 (c + 1) u (m2 + m1**2)`` and ``m3 - 3 m1 m2 + 2 m1**3`` at most
    ``24 (c + 2) u R beta m2`` (``|m1| <= R beta``, ``|m3| <= R beta m2``;
    first order; ``m_j`` the raw moments of ``x = beta d``), and the read's
    bound of ``F'`` sums at least ``8 u T (m2 + m1**2)`` per row. Hence
    ``e_H <= (c + 1) e_g T`` and ``e_K <= 3 (c + 2) R beta e_g T**2``; we
    use twice and four times those, plus ``(2 N + 8) u`` times ``H`` and
    ``R H`` for the weighted sums.
    """
    _, g, h = (float(v) for v in read.values[0])
    eg, span = float(read.bound[0]), read.span * (1.0 + 4.0 * EPS)
    beta, big = x, abs(g) + eg  # (x is a beta)
    if not (math.isfinite(span) and span * beta <= 600.0 and abs(g) > eg and h > 0.0):
        return None
    unit = EPS / 2.0
    c = n_classes + 16.0 + 3.0 * span * beta
    sums = (2.0 * n_samples + 8.0) * unit
    eh = 4.0 * (c + 1.0) * eg / beta + 2.0 * sums * h
    h_lo, h_hi = h - eh, h + eh
    if not h_lo > 0.0:
        return None
    way = 1.0 if g < 0.0 else -1.0  # towards the root
    third = read.third
    if math.isfinite(third):
        ek = 6.0 * (c + 2.0) * span * eg / beta + 2.0 * sums * span * h_hi
        k_way = way * third
    step = float(read.steps[0])
    t = x - step if math.isfinite(step) else x + way * (abs(g) / h)
    far, near = t + way * half, t - way * half
    reach_far, reach_near = (far - x) * way, (near - x) * way

    def falls(s: float) -> tuple[float, float]:
        """Bounds on how far ``|F'|`` falls at distance ``s`` towards the
        root, each less its margin for roundings."""
        rs = span * s
        lo_ = h_lo * (s if span == 0.0 else -math.expm1(-rs) / span)
        hi_ = h_hi * (s if span == 0.0 else math.expm1(rs) / span)
        margin = 1e-9 * (hi_ + big)
        if math.isfinite(third):
            cube = span * span * h_hi * math.exp(rs) * s**3 / 6.0
            square = 0.5 * s * s
            lo2 = h_lo * s + (k_way - ek) * square - cube
            hi2 = h_hi * s + (k_way + ek) * square + cube
            margin = 1e-9 * (hi_ + (abs(third) + ek) * square + cube + big)
            lo_, hi_ = max(lo_, lo2), min(hi_, hi2)
        return lo_ - margin, hi_ + margin

    if not falls(reach_far)[0] > big:
        return None
    if reach_near > 0.0 and not falls(reach_near)[1] < abs(g) - eg:
        return None
    return t, min(far, near), max(far, near)
