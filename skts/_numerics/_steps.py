"""Steps in ``beta = 1/T`` towards the root of ``F'``: Newton's (one helper,
one clamp), the cubic Taylor model's, and a safeguarded Newton search.

They only steer: every answer is decided by proven signs of ``F'`` or by
the exact rule, never by where a step lands.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

__all__ = ["model_step", "newton_beta", "newton_from", "newton_step"]


def newton_from(at: float, step: float, lo: float, hi: float) -> float | None:
    """``at - step`` kept inside ``[lo, hi]``; None if ``step`` is not finite."""
    if not np.isfinite(step):
        return None
    return min(max(at - step, lo), hi)


def newton_step(at: float, g: float, h: float, lo: float, hi: float) -> float | None:
    """Newton's step for the root of ``F'`` from ``at`` (``F' = g``, ``F'' =
    h``) kept inside ``[lo, hi]``; None where ``g`` and ``h`` do not give one
    (``h`` not positive and finite)."""
    if not (np.isfinite(g) and np.isfinite(h) and h > 0):
        return None
    return newton_from(at, g / h, lo, hi)


def model_step(g1: float, g2: float, g3: float = 0.0, g4: float = 0.0) -> float:
    """The step ``h`` to the root of ``F'`` from a point where ``F'`` and its
    next three derivatives are ``g1 ... g4``: the root nearest 0 of the cubic Taylor
    model ``g1 + g2 h + g3 h**2 / 2 + g4 h**3 / 6`` (Newton's step when ``g3 =
    g4 = 0``). Newton leaves an error of about ``(g3 / 2 g2) h**2``, the
    cubic model one of order ``h**4`` (about ``3 h**4`` relative, in ``beta``,
    on real logits). NaN where ``F''`` is not positive and finite.

    It only steers: every answer is decided by proven signs of ``F'``.
    """
    if not (np.isfinite(g1) and np.isfinite(g2) and g2 > 0.0):
        return math.nan
    newton = -g1 / g2
    if newton == 0.0:
        return newton  # (F' = 0 here: the root nearest 0 is 0)
    if not (np.isfinite(g3) and np.isfinite(g4)) or (g3 == 0.0 and g4 == 0.0):
        return newton
    h = newton
    for _ in range(8):  # Newton on the model, from Newton's step
        slope = g2 + h * (g3 + h * g4 / 2.0)
        if not slope > 0.0:
            return newton  # (the model is not monotone that far out)
        change = (g1 + h * (g2 + h * (g3 / 2.0 + h * g4 / 6.0))) / slope
        h -= change
        if abs(change) <= 1e-15 * abs(h):
            break
    # The model's root lies near Newton's step, on its side; else keep Newton.
    return h if np.isfinite(h) and 0.0 <= h / newton <= 2.0 else newton


def newton_beta(
    deriv: Callable[[float], tuple[float, float, float]],
    lo: float,
    hi: float,
    start: float,
    rtol: float,
    max_iter: int = 60,
) -> tuple[float, int]:
    """Approximate minimiser of the convex ``F`` on ``[lo, hi]`` (safeguarded Newton).

    ``deriv(beta)`` returns ``(F, F', F'')``. Only a starting point for the
    exact decision, which does not trust it.
    """
    beta = min(max(start, lo), hi)
    passes = 0
    tried_lo = tried_hi = False
    for _ in range(max_iter):
        _, g, h = deriv(beta)
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
        # Newton in log(beta) where the loss is convex there too (its second
        # derivative beta F' + beta**2 F'' positive): a scale parameter's
        # steps, which neither overshoot from above nor crawl from below.
        curve = beta * g + beta * beta * h
        if np.isfinite(step) and curve > 0:
            new = beta * math.exp(min(max(-beta * g / curve, -20.0), 20.0))
        if not lo < new < hi:
            # Leaving the bracket: try its untried end once (the minimum is often
            # there), else bisect in log space since the range spans decades.
            if new >= hi and not tried_hi:
                new = hi
            elif new <= lo and not tried_lo:
                new = lo
            else:
                new = math.sqrt(lo) * math.sqrt(hi)  # lo * hi may underflow
        if abs(new - beta) <= rtol * beta:
            beta = new
            break
        beta = new
    return beta, passes
