"""Slow, obviously-correct references shared by the tests.

The rule is exact in real arithmetic: ``T* = min argmin L(T)`` over the real
losses. ``exact_losses`` evaluates them with mpmath at 60 significant digits,
one row and one term at a time (independent of skts's evaluators);
``exact_choice`` applies the rule. Candidates whose float losses are far
above the best (more than 1e-9 relative, a million times any rounding error)
are screened out in plain floats first, so the slow evaluator only runs on
near-ties.
"""

import math

import mpmath
import numpy as np

_DIGITS = 60


def float_losses(logits, y, temperatures, sample_weight=None):
    """L(T) per candidate: one Python loop per row, exactly rounded sums."""
    z = np.asarray(logits, dtype=np.float64).tolist()  # plain Python floats
    y = np.asarray(y).tolist()
    w = [1.0] * len(y) if sample_weight is None else list(map(float, sample_weight))
    top = max(w)
    w = [wi / top for wi in w]  # the weighted mean does not change
    out = []
    for t in map(float, temperatures):
        rows = []
        for zi, yi in zip(z, y, strict=True):
            m = max(zi)
            terms = [math.exp((zj - m) / t) for zj in zi]
            rows.append((m - zi[yi]) / t + math.log(math.fsum(terms)))
        # A row of weight 0 is absent, even if its loss is infinite.
        pairs = [(wi, li) for wi, li in zip(w, rows, strict=True) if wi > 0]
        try:
            out.append(math.fsum(wi * li for wi, li in pairs) / math.fsum(w))
        except OverflowError:  # the sum, not the mean, exceeds the float range
            try:
                out.append(math.fsum(wi / math.fsum(w) * li for wi, li in pairs))
            except OverflowError:
                out.append(math.inf)
    return np.array(out)


def exact_losses(logits, y, temperatures, sample_weight=None):
    """L(T) per candidate as mpmath numbers with 60 significant digits."""
    z = np.asarray(logits, dtype=np.float64).tolist()
    y = np.asarray(y).tolist()
    w = [1.0] * len(y) if sample_weight is None else list(map(float, sample_weight))
    out = []
    with mpmath.workdps(_DIGITS):
        weights = [mpmath.mpf(wi) for wi in w]
        total_weight = mpmath.fsum(weights)
        for t in map(float, temperatures):
            t = mpmath.mpf(t)
            total = mpmath.mpf(0)
            for zi, yi, wi in zip(z, y, weights, strict=True):
                if wi == 0:
                    continue
                row = [mpmath.mpf(v) for v in zi]
                first = max(range(len(row)), key=row.__getitem__)
                m = row[first]
                # log(1 + rest) keeps its relative accuracy for a tiny rest.
                rest = mpmath.fsum(
                    mpmath.exp((v - m) / t) for j, v in enumerate(row) if j != first
                )
                total += wi * ((m - row[yi]) / t + mpmath.log1p(rest))
            out.append(total / total_weight)
    return out


def exact_choices(logits, y, temperatures, sample_weight=None, *, screen=None):
    """The answers the rule allows, in real arithmetic.

    One candidate when the smallest exact loss wins by more than 1e-40
    relative; otherwise every candidate within 1e-40 relative of the smallest
    loss (60 digits cannot order them; skts promises the rule whenever the
    exact losses differ by more than about 1e-30 relative, and exactly equal
    losses, tested separately, go to the smallest temperature).
    ``screen`` gives float losses to rule out clear losers (default: the
    independent ``float_losses``).
    """
    temperatures = np.asarray(temperatures, dtype=np.float64)
    if screen is None:
        screen = float_losses(logits, y, temperatures, sample_weight)
    screen = np.asarray(screen, dtype=np.float64)
    best = screen.min()
    if np.isfinite(best):
        near = screen <= best + 1e-9 * (1.0 + abs(best))
    else:
        near = ~(screen < np.inf)
    near_t = sorted(set(temperatures[near].tolist()))
    if len(near_t) == 1:
        return near_t
    values = exact_losses(logits, y, near_t, sample_weight)
    with mpmath.workdps(_DIGITS):
        low = min(values)
        tolerance = abs(low) * mpmath.mpf(10) ** -40
        return [t for t, v in zip(near_t, values, strict=True) if v - low <= tolerance]


def exact_choice(logits, y, temperatures, sample_weight=None, *, screen=None):
    """The rule's answer when it is unique beyond 1e-40 relative, else None."""
    allowed = exact_choices(logits, y, temperatures, sample_weight, screen=screen)
    return allowed[0] if len(allowed) == 1 else None


def exact_slope(logits, y, beta, sample_weight=None):
    """F'(beta) = d/dbeta of the mean NLL at T = 1/beta (the weighted mean of
    E_p[z] - z_y, p = softmax(beta z)), an mpmath number at 60 digits."""
    z = np.asarray(logits, dtype=np.float64).tolist()
    y = np.asarray(y).tolist()
    w = [1.0] * len(y) if sample_weight is None else list(map(float, sample_weight))
    with mpmath.workdps(_DIGITS):
        b = mpmath.mpf(float(beta))
        total, weight = mpmath.mpf(0), mpmath.fsum(mpmath.mpf(wi) for wi in w)
        for zi, yi, wi in zip(z, y, w, strict=True):
            if wi == 0:
                continue
            row = [mpmath.mpf(v) for v in zi]
            m = max(row)
            e = [mpmath.exp(b * (v - m)) for v in row]
            mean = mpmath.fsum(
                ej * v for ej, v in zip(e, row, strict=True)
            ) / mpmath.fsum(e)
            total += mpmath.mpf(wi) * (mean - row[yi])
        return total / weight


def exact_curvature(logits, y, beta, sample_weight=None):
    """F''(beta): the weighted mean of each row's variance of z under p =
    softmax(beta z), an mpmath number at 60 digits."""
    z = np.asarray(logits, dtype=np.float64).tolist()
    w = [1.0] * len(z) if sample_weight is None else list(map(float, sample_weight))
    with mpmath.workdps(_DIGITS):
        b = mpmath.mpf(float(beta))
        total, weight = mpmath.mpf(0), mpmath.fsum(mpmath.mpf(wi) for wi in w)
        for zi, wi in zip(z, w, strict=True):
            if wi == 0:
                continue
            row = [mpmath.mpf(v) for v in zi]
            m = max(row)
            e = [mpmath.exp(b * (v - m)) for v in row]
            s = mpmath.fsum(e)
            mean = mpmath.fsum(ej * v for ej, v in zip(e, row, strict=True)) / s
            pairs = zip(e, row, strict=True)
            var = mpmath.fsum(ej * (v - mean) ** 2 for ej, v in pairs)
            total += mpmath.mpf(wi) * var / s
        return total / weight
