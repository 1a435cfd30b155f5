"""The high-precision evaluator: ``L(T)`` to about 50 significant digits
with a proven relative error bound, and the exact rule among candidates
whose float64 losses are too close to tell apart.

Python's ``decimal`` rounds ``exp``, ``ln`` and the arithmetic correctly; only
near-ties reach it (about 10 microseconds per logit and temperature).
"""

from __future__ import annotations

import decimal
import math
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from skts._numerics._blocks import blocks, error64_factor

if TYPE_CHECKING:
    from skts._numerics._passes import Rows

__all__ = [
    "HP_DIGITS",
    "MAX_DIGITS",
    "combine_exact",
    "decide",
    "exact_part",
    "exact_rule",
    "exact_values",
    "hp_context",
]

# Digits of the evaluator that decides near-ties (Python's decimal module:
# correctly rounded exp and ln), and the most it escalates to for candidates
# still tied at fewer: losses that differ by more than about 1e-195 relative
# are told apart; closer ones count as equal (and go to the smallest T).
HP_DIGITS = 50
MAX_DIGITS = 200


def exact_values(
    totals,
    weight_sum,
    n_samples: int,
    n_classes: int,
    n_parts: int,
    digits: int = HP_DIGITS,
) -> tuple[list[decimal.Decimal], decimal.Decimal]:
    """``L(T)`` to about 50 significant digits from the weighted sums of
    :func:`exact_part` (folded over the rows with :func:`combine_exact`):
    the values and ``rel``, a proven bound on their relative error
    (:meth:`skts._numerics.Rows.exact` is this on the rows' sums).

    Notes
    -----
    Per row, ``S = 1 + r`` with ``r`` the sum of the exponentials other than
    one at the row's maximum, and the loss is ``g beta + ln(1 + r)``: every
    term is non-negative and computed to a relative error of a few units of
    the ``HP_DIGITS``-th digit (Python's decimal rounds ``exp``, ``ln`` and
    the arithmetic correctly), so relative errors add up linearly over the
    terms, the rows and the weights: ``rel = (n_classes + n_samples + 40 + c)
    * 10**(1 - digits)``, ``c`` the number of pieces combined (1 in memory,
    see :class:`~skts._numerics.Rows`), below 1e-30 for any input that fits a computer.
    ``ln(1 + r)`` keeps that relative accuracy when ``r`` is tiny (a series
    below 1e-20, 22 more digits above). Exponentials below ``10**-(digits +
    5) / n_classes`` of the row's largest term are skipped. Values below
    about ``10**-(10**18)`` underflow even here (only on data where every
    label wins by a margin near 1e17 times ``T``).

    About 10 microseconds per logit and temperature: only near-ties use it.
    """
    ctx = hp_context(digits)
    values = [ctx.divide(t, weight_sum) for t in totals]
    extra = n_classes + n_samples + 40 + n_parts
    rel = decimal.Decimal(extra).scaleb(1 - digits)
    return values, rel


def hp_context(digits: int = HP_DIGITS) -> decimal.Context:
    return decimal.Context(prec=digits, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)


def combine_exact(a, b, digits: int = HP_DIGITS):
    ctx = hp_context(digits)
    totals = [ctx.add(u, v) for u, v in zip(a[0], b[0], strict=True)]
    return totals, ctx.add(a[1], b[1])


def exact_part(
    logits, y, sample_weight, total, temperatures, digits=HP_DIGITS, *, n_jobs=None
):
    """The weighted sums of :meth:`~skts._numerics.Rows.exact` over some
    rows, and their weight, to ``digits`` significant digits."""
    ctx = hp_context(digits)
    wide = ctx.copy()
    # ln(1 + r) for r above `small` loses log10(1/r) digits to the rounding
    # of 1 + r (0.4 digits more per digit: 22 at 50 digits); below, the
    # series to r**3 / 3 leaves r**3 relative, under 10**-digits.
    wide.prec = digits + math.ceil(0.44 * digits)
    dec = decimal.Decimal
    n_samples, n_classes = logits.shape
    inverse = [ctx.divide(1, dec(float(t))) for t in temperatures]
    margin = dec((digits + 5) * math.log(10.0) + math.log(n_classes))
    small = dec(1).scaleb(-math.ceil(0.4 * digits))
    totals = [dec(0)] * len(inverse)
    weight_sum = dec(0)
    for rows in blocks(n_samples, n_classes):
        z_block = np.asarray(logits[rows], dtype=np.float64).tolist()
        y_block = y[rows].tolist()
        w_block = (
            [1.0] * len(y_block)
            if sample_weight is None
            else np.asarray(sample_weight[rows], dtype=np.float64).tolist()
        )
        for z, label, w in zip(z_block, y_block, w_block, strict=True):
            if w == 0.0:
                continue  # a row of weight 0 counts for nothing
            first = max(range(len(z)), key=z.__getitem__)
            top = dec(z[first])
            diffs = [ctx.subtract(dec(v), top) for j, v in enumerate(z) if j != first]
            gap = ctx.subtract(top, dec(z[label]))
            weight = dec(w)
            weight_sum = ctx.add(weight_sum, weight)
            for k, beta in enumerate(inverse):
                xs = [ctx.multiply(d, beta) for d in diffs]
                # The row's largest term: ln of max(g beta, largest exponential).
                big = max(xs)
                scale = ctx.multiply(gap, beta)
                if scale > 0:
                    big = max(big, ctx.ln(scale))
                cut = ctx.subtract(big, margin)
                rest = dec(0)
                for x in xs:
                    if x > cut:
                        rest = ctx.add(rest, ctx.exp(x))
                if rest < small:
                    # ln(1 + r) = r - r**2/2 + r**3/3 - ..., error below r**4.
                    log_s = ctx.add(
                        ctx.subtract(rest, ctx.divide(ctx.multiply(rest, rest), 2)),
                        ctx.divide(ctx.power(rest, 3), 3),
                    )
                else:
                    log_s = ctx.plus(wide.ln(wide.add(1, rest)))
                loss = ctx.add(scale, log_s)
                totals[k] = ctx.add(totals[k], ctx.multiply(weight, loss))
    return [(totals, weight_sum)]


def decide(
    rows: Rows, cand: NDArray, values: dict[int, float]
) -> tuple[int, float, int]:
    """The exact rule among candidates (indices into the ascending ``cand``)
    whose float64 losses are ``values``; every other candidate is known to
    be worse.

    Candidates whose float64 values cannot be told apart from the best one
    within the evaluator's proven error bound are decided by
    :meth:`~skts._numerics.Rows.exact`; values that agree within its (about 1e-47
    relative) bound count as equal, and equal losses go to the smallest
    temperature (:func:`exact_rule`). Returns the chosen index, its float64
    loss, and how many high-precision reads ran.
    """
    c64 = error64_factor(rows.n_samples, rows.n_classes)

    def slack(v: float) -> float:
        return c64 * (abs(v) + 1.0)

    best = min(values, key=lambda i: (values[i], i))
    top = values[best]
    if np.isfinite(top):
        tied = [i for i, v in values.items() if v - slack(v) <= top + slack(top)]
    else:  # every loss overflowed float64: only the exact values can tell
        tied = [i for i, v in values.items() if not v < np.inf]
    if len(tied) == 1:
        return best, top, 0
    tied.sort()
    k, exact, reads = exact_rule(rows, cand[tied])
    chosen = tied[k]
    loss = values[chosen]
    if not np.isfinite(loss):
        loss = float(exact)
    return chosen, loss, reads


def exact_rule(rows: Rows, temperatures) -> tuple[int, decimal.Decimal, int]:
    """The rule among ``temperatures`` (ascending) by their exact losses:
    the index of the smallest candidate among the minimisers, its loss, and
    the reads made.

    At ``HP_DIGITS`` digits, candidates whose values agree within the
    evaluator's proven bound cannot be ordered; those still tied with the
    best are read again with twice the digits, up to ``MAX_DIGITS``. The
    others are proven worse at any precision, so the tie set only shrinks.
    Candidates still within the bound at ``MAX_DIGITS`` count as equal.
    """
    index = list(range(len(temperatures)))
    digits, reads = HP_DIGITS, 0
    while True:
        exact, rel = rows.exact([temperatures[i] for i in index], digits=digits)
        reads += 1
        # In the evaluator's precision: decimal's default context keeps 28
        # digits, which would merge losses that differ in the 35th.
        ctx = hp_context(digits)
        top = ctx.multiply(min(exact), ctx.add(1, rel))
        close = [
            (i, v)
            for i, v in zip(index, exact, strict=True)
            if ctx.multiply(v, ctx.subtract(1, rel)) <= top
        ]
        if len(close) == 1 or digits >= MAX_DIGITS:
            return close[0][0], close[0][1], reads
        index, digits = [i for i, _ in close], 2 * digits
