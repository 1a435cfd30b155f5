"""The exact grid rule ``T* = min argmin_{T in candidates} L(T)``, in a
handful of reads.

Phases (each a function below): the warm start says where the minimum is
likely to be (:func:`~skts._numerics._steer.warm_start`); :func:`_ends`
settles an answer at an end of the range by one proven sign of ``F'``;
:func:`_first_window` places the first float32 window; :func:`_windows`
reads windows of candidates with proven error bounds until convexity
excludes every candidate outside; :func:`~skts._numerics._exact.decide`
applies the rule to the ones left. Degenerate data (plateaus, non-finite
losses) go to :func:`search_grid_float64`, which decides everything in
float64.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from skts._numerics._blocks import error64_factor, error_bound
from skts._numerics._exact import decide, exact_rule
from skts._numerics._passes import Rows
from skts._numerics._result import SearchResult
from skts._numerics._steer import float32_range, spacing, warm_start
from skts._numerics._steps import newton_beta, newton_from, newton_step

__all__ = ["grid_search", "search_grid", "search_grid_float64"]

# Up to this many logits, the reported loss is the float64 value (cheap there).
EXACT_LOSS_ELEMENTS = 1 << 18


def grid_search(
    logits: NDArray,
    y: NDArray,
    temperatures: NDArray,
    sample_weight: NDArray | None = None,
    *,
    start: float = 1.0,
    n_jobs: int | None = None,
) -> SearchResult:
    """The exact rule ``T* = min argmin_{T in temperatures} L(T)`` on arrays
    (see :func:`search_grid`)."""
    rows = Rows(logits, y, sample_weight, n_jobs)
    return search_grid(rows, temperatures, start=start)


@dataclass
class _Start:
    """Where the first window goes: what the phases before it found."""

    beta: float  # the likely minimiser
    beta0: float  # the warm start's answer
    se: float  # its standard error (in beta)
    passes: int
    # The weighted mean of E_p[-d] at spread_beta (bounds it at larger beta)
    spread_beta: float | None = None
    spread: float | None = None
    newton_error: float = 0.0  # relative, of a float32 Newton step
    fused: bool = False  # whether the first window reads (F', F'') too


def search_grid(
    rows: Rows, temperatures: NDArray, *, start: float = 1.0
) -> SearchResult:
    """The exact rule ``T* = min argmin_{T in temperatures} L(T)``.

    The answer equals brute force (``nll_many`` at every candidate, then the
    smallest candidate among those with the smallest computed loss) bit for
    bit, at a cost independent of the number of candidates in all but
    degenerate cases, and of about one read of the data in the usual case.

    Notes
    -----
    ``F(beta) = L(1/beta)`` is convex, so over the candidates sorted by
    temperature the exact losses fall and then rise. A row subsample says
    where the minimum is likely to be. One float32 pass then evaluates the
    candidates around it, each with a rigorous error bound, so each exact loss
    is known to lie in an interval. The float64 brute-force values lie within
    their own (smaller) error bound of the exact ones. If, on both sides of
    the window, the edge candidate's interval lies strictly above that of the
    window's best, convexity puts every candidate further out above it too: no
    outside candidate can win or tie in float64. Inside the window, candidates
    whose intervals leave the best one's are decided; any that remain close
    are evaluated in float64 with the reference routine and the rule is applied
    to those values literally. When a window does not settle the question it
    is widened; if the data are degenerate (long plateaus of equal losses),
    the float64 search takes over.
    """
    cand = np.unique(np.asarray(temperatures, dtype=np.float64))  # ascending T
    n_cand = cand.shape[0]
    if cand[0] < 1e-300 and n_cand > 1:  # (sorted: only then can 1/T overflow)
        with np.errstate(over="ignore"):
            huge = ~np.isfinite(1.0 / cand)  # beta = 1/T beyond float64
        if huge.any():
            return _with_huge_betas(rows, cand, huge, start)
    if n_cand == 1 or rows.flat():
        # One candidate, or L(T) = log(n_classes) exactly for every T: the rule
        # gives the smallest candidate without any floating-point comparison.
        loss = float(rows.nll(cand[:1])[0])
        return SearchResult(float(cand[0]), loss, n_cand > 1, 1, flat=n_cand > 1)

    beta_lo, beta_hi = 1.0 / cand[-1], 1.0 / cand[0]
    if not float32_range(beta_lo, beta_hi):
        return search_grid_float64(rows, cand, start=start)
    beta0, se, h, edge = warm_start(rows, beta_lo, beta_hi, start)
    found = _ends(rows, cand, beta0, se, edge)
    if isinstance(found, SearchResult):
        return found
    return _windows(rows, cand, _first_window(rows, cand, found, h))


def _with_huge_betas(
    rows: Rows, cand: NDArray, huge: NDArray, start: float
) -> SearchResult:
    """The rule when some candidates are so small (below ``2**-1024``, about
    5.6e-309) that ``beta = 1/T`` overflows float64.

    Their losses are read by the 50-digit evaluator, which holds ``1/T``
    exactly. By convexity in ``beta`` they matter only when the rule over
    the other candidates picks the smallest of those (the loss still falling
    as ``T`` shrinks); every row constant, or every label at its row's
    largest (smallest) logit, is decided from the exact facts.
    """
    passes = 0
    if rows.flat():
        # L(T) = log(n_classes) for every T: the smallest candidate, and the
        # loss of any T that float64 can evaluate.
        loss = float(rows.nll([1.0])[0])
        return SearchResult(float(cand[0]), loss, True, 1, flat=True)
    facts = rows.slopes([1.0], moments=False)
    passes += 1
    normal = cand[~huge]
    if facts.anti_separable and normal.size:
        # F' > 0 for every beta: the largest candidate, a normal one.
        loss = float(rows.nll(normal[-1:])[0])
        return SearchResult(float(normal[-1]), loss, True, passes + 1)
    contenders = list(cand[huge])
    if normal.size and not facts.separable:
        found = search_grid(rows, normal, start=start)
        passes += found.n_passes
        if found.temperature != normal[0]:
            at_end = found.temperature == cand[-1]
            return SearchResult(found.temperature, found.loss, at_end, passes)
        contenders.append(normal[0])
    elif facts.separable:
        contenders = contenders[:1]  # F' < 0 for every beta: the smallest T
    k, loss, reads = exact_rule(rows, contenders)
    t = float(contenders[k])
    # (inf only where the loss exceeds float64's range)
    return SearchResult(t, float(loss), t in (cand[0], cand[-1]), passes + reads)


def _ends(
    rows: Rows, cand: NDArray, beta0: float, se: float, edge: int
) -> SearchResult | _Start:
    """An answer at an end of the range, proven; else where to start."""
    beta_lo, beta_hi = 1.0 / cand[-1], 1.0 / cand[0]
    passes = 0
    if edge:
        # Every subsample label has its row's largest (smallest) logit: read
        # the loss at the matching end and the exact facts of every row. If
        # all the data are like that, the answer is proven without any
        # floating-point comparison.
        t = cand[0] if edge == 1 else cand[-1]
        facts = rows.slopes([t], moments=False)
        passes += 1
        if facts.separable if edge == 1 else facts.anti_separable:
            return SearchResult(float(t), float(facts.values[0, 0]), True, passes)
    near_hi = edge != -1 and not beta0 + 4.0 * se < beta_hi
    near_lo = edge != 1 and not beta0 - 4.0 * se > beta_lo
    if not (near_hi or near_lo):
        return _Start(beta0, beta0, se, passes)
    # The subsample puts the minimum at (or near) an end of the range. By
    # convexity one proven sign of F' at that end settles it: F'(beta_hi)
    # < 0 means F decreases on the whole range, so the smallest candidate
    # is the unique minimiser (and symmetrically at beta_lo). One read.
    ends = [t for t, near in ((cand[0], near_hi), (cand[-1], near_lo)) if near]
    check = rows.slopes(ends)
    passes += 1
    for k, t in enumerate(ends):
        if t == cand[0] and check.decreasing(k):
            return SearchResult(float(t), float(check.values[k, 0]), True, passes)
        if t == cand[-1] and check.increasing(k):
            return SearchResult(float(t), float(check.values[k, 0]), True, passes)
    if check.separable or check.anti_separable:
        # Proven, but the loss was read at the other end only.
        t = cand[0] if check.separable else cand[-1]
        loss = float(rows.nll([t])[0])
        return SearchResult(float(t), loss, True, passes + 1)
    # Not settled: one float64 Newton step from the end nearer the
    # subsample's answer replaces the float32 gradient pass of _first_window.
    k = 0 if near_hi else len(ends) - 1
    end_beta = 1.0 / ends[k]
    beta = newton_from(end_beta, check.steps[k], beta_lo, beta_hi)
    return _Start(end_beta if beta is None else beta, beta0, 0.0, passes)


def _certifies(rows: Rows) -> bool:
    """Whether a window read of one or two candidates can also give F' with a
    proven bound there (and F'' and the rows' largest range): float32 windows
    of more than two classes."""
    return rows.n_classes > 2 and not rows.float64_window


def _first_window(rows: Rows, cand: NDArray, at: _Start, h: float) -> _Start:
    """How the first window is placed, given the warm start's uncertainty
    (``h``: the subsample's ``F''`` at its answer)."""
    beta0, se = at.beta0, at.se
    if 3.0 * se <= 0.01 * beta0:
        return at  # (close enough; se is 0 after a float64 step from an end)
    if se <= spacing(cand, beta0) * beta0 or _certifies(rows):
        # The subsample leaves the minimum uncertain by a grid step or so (one
        # standard error): a window leaning towards its answer usually holds
        # it. That window also reads F' and F'' at its middle: if it settles
        # nothing, a float32 Newton step from there on all the data places the
        # next one (see _windows). Where the window is the nearest candidate
        # alone with its proven F', F'' and the rows' largest range (float32,
        # more than two classes), so however far off the subsample may be:
        # that read proves the answer when it lies within a few candidates
        # (12 of the 27 wide sets of bench_reads.py), and otherwise costs what
        # the float32 Newton step's read below does (one exp per logit), its
        # F'' from all the data rather than the subsample.
        at.fused = True
        return at
    # Further off: one full float32 Newton step from the subsample's answer
    # before looking at candidates. The gradient needs all the data; the
    # curvature, a smooth average, comes from the subsample.
    _, g, spread = rows.derivatives([beta0], "float32", second_moment=False)[0]
    at.passes += 1
    # The weighted mean of E_p[-d] at beta0 bounds its value at any larger
    # beta (E_p[-d] falls as beta grows); padded for the float32 rounding
    # of the pass that measured it.
    at.spread_beta, at.spread = beta0, spread * 1.001 + 1e-12
    lo, hi = _reach(cand, beta0, se)
    beta = newton_step(beta0, g, h, lo, hi)
    if beta is not None:
        at.beta = beta
        # Newton's error after a step is about the step squared (times a
        # curvature ratio, a few units on real data).
        at.newton_error = 3.0 * ((beta - beta0) / beta) ** 2
    return at


def _reach(cand: NDArray, beta0: float, se: float) -> tuple[float, float]:
    """Where a float32 Newton step may land: within 4 standard errors of the
    warm start's answer, inside the range."""
    reach = 4.0 * se if np.isfinite(se) else np.inf
    return max(beta0 - reach, 1.0 / cand[-1]), min(beta0 + reach, 1.0 / cand[0])


def _around(
    cand: NDArray, beta: float, newton_error: float, lean_past: float = math.inf
):
    """The candidate nearest to 1/beta (in log T), and a window's ends:
    ``half`` neighbours on each side, and one more on the side beta leans to
    when 1/beta lies more than ``lean_past`` candidate spacings from the
    nearest (``-inf``: always; ``inf``: never).

    The nearest candidate is the likely answer; a Newton step that may have
    missed it by more than a grid step gets a wider window (a wider first
    window costs less than a second pass).
    """
    n_cand = cand.shape[0]
    j = int(np.searchsorted(cand, 1.0 / beta))  # cand[j - 1] < 1/beta <= cand[j]
    below = j < n_cand  # 1/beta at or below cand[j]: it leans to j - 1
    if 0 < j < n_cand and math.log(cand[j] * beta) > -math.log(cand[j - 1] * beta):
        j, below = j - 1, False
    j = min(j, n_cand - 1)
    step = _log_step(cand, j)
    half = 1
    if newton_error > 0.0 and n_cand > 2:
        half = int(min(3, max(1, math.ceil(newton_error / step))))
    # (how far 1/beta lies from cand[j], in units of the local spacing)
    off = abs(math.log(cand[j] * beta)) / step if step > 0 else 0.0
    lean = off > lean_past
    left_half = half + (lean and below)
    right_half = half + (lean and not below)
    return j, max(j - left_half, 0), min(j + right_half, n_cand - 1)


def _curve(span: float, s: float, up: bool = False) -> float:
    """A lower bound on ``(exp(-R s) - 1 + R s) / R**2`` (``R = span``), the
    integral twice over ``[0, s]`` of ``exp(-R t)``, 0 unless finite; with
    ``up``, an upper bound on ``(exp(R s) - 1 - R s) / R**2``, inf unless
    finite. (1e-12 relative for the roundings here.)"""
    a = span * s
    if not math.isfinite(a) or (up and a > 700.0):
        return math.inf if up else 0.0
    if a < 0.1:  # (the series, whose remainders have known signs and sizes)
        if up:
            value = s * s * (0.5 + a / 6.0 + a * a / 24.0 * math.exp(a))
        else:
            value = max(0.0, s * s * (0.5 - a / 6.0))
    elif up:
        value = (math.expm1(a) - a) / (span * span)
    else:
        value = (math.expm1(-a) + a) / (span * span)
    return value * (1.0 + 1e-12 if up else 1.0 - 1e-12)


def _intervals(
    cand: NDArray,
    j: int,
    slope: tuple[float, float],
    curve: tuple[float, float, float],
    reach: int = 3,
) -> tuple[dict[int, float], dict[int, float]]:
    """Proven bounds ``(low, high)`` on ``F(c) - F(cand[j])`` for each
    candidate ``c`` within ``reach`` of ``j``, from one read at ``cand[j]``:
    ``F'`` there within ``e`` of ``g`` (``slope``), ``F''`` in ``[h_lo,
    h_hi]`` and the rows' largest range ``R`` (``curve``).

    Per row ``F''`` changes by at most a factor ``exp(R |t|)`` over a step
    ``t`` in ``beta`` (see :func:`~skts._numerics._steer.one_read_bracket`),
    so Taylor's theorem puts ``F(c) - F(cand[j])`` (``d = beta_c - beta_j``,
    ``s = |d|``) in ``[g d - e s + h_lo C(-s), g d + e s + h_hi C(s)]``, ``C``
    the integral twice of ``exp(-+R t)`` over ``[0, s]`` (:func:`_curve`),
    less and plus 1e-9 of the terms for the roundings here.
    """
    g, e = slope
    h_lo, h_hi, span = curve
    low, high = {}, {}
    for i in range(max(j - reach, 0), min(j + reach, cand.shape[0] - 1) + 1):
        d = 1.0 / cand[i] - 1.0 / cand[j]
        s = abs(d)
        a = max(h_lo, 0.0) * _curve(span, s * (1.0 - 1e-9))
        b = h_hi * _curve(span, s, True)
        slack = 1e-9 * (abs(g * d) + e * s + b)
        low[i] = 0.0 if i == j else g * d - e * s + a - slack
        high[i] = 0.0 if i == j else g * d + e * s + b + slack
    return low, high


def _proven(
    cand: NDArray,
    j: int,
    slope: tuple[float, float],
    curve: tuple[float, float, float],
    top: float,
    c64: float,
) -> int | None:
    """The rule's answer, proven from one read at ``cand[j]`` alone (see
    :func:`_intervals`; ``top`` bounds the loss there), or None: the
    candidate whose interval lies lowest, when both its neighbours' lie above
    it by more than the float64 values' error bounds (as `_windows`'
    `beyond` asks). By convexity every other candidate is worse too.
    """
    g, e = slope
    h_lo, h_hi, span = curve
    if not (h_lo > 0.0 and math.isfinite(h_hi) and math.isfinite(g + e + span)):
        return None
    low, high = _intervals(cand, j, slope, curve)
    best = min(low, key=lambda i: (low[i] + high[i], i))
    for out in (best - 1, best + 1):
        if out < 0 or out >= cand.shape[0]:
            continue  # (the range's end)
        if out not in low:
            return None
        rise = low[out] - high[best]
        size = top + abs(high[best]) + abs(low[out])
        if not rise > 2.0 * c64 * (2.0 * size + rise + 2.0):
            return None
    return best


def _log_step(cand: NDArray, j: int) -> float:
    """The candidates' spacing in log T around ``cand[j]`` (0 for one)."""
    a, b = max(j - 1, 0), min(j + 1, cand.shape[0] - 1)
    return math.log(cand[b] / cand[a]) / (b - a) if b > a else 0.0


def _windows(rows: Rows, cand: NDArray, at: _Start) -> SearchResult:
    """Float32 windows of candidates, with proven bounds, until convexity
    excludes every candidate outside; then the rule on the ones left."""
    n_cand = cand.shape[0]
    beta, beta0, se, passes = at.beta, at.beta0, at.se, at.passes
    fused, pending = at.fused, None
    # A window from the subsample alone leans: any minimiser within half a
    # candidate spacing of its answer then lies strictly inside. So does one
    # around a minimiser known to a tenth of a step (sharp) but past 0.3 of
    # one from the nearest candidate: that one and the next often tie within
    # float32's bound, and the window then needs the next one's outer
    # neighbour too (a candidate costs less than the read that would fetch it).
    # (A window read in float64, `Rows.float64_window`, has its bound in
    # float64 units: no near-tie to lean for.)
    sharp = at.newton_error < 0.1 * spacing(cand, beta)
    lean = sharp and not rows.float64_window
    lean_past = -math.inf if fused else 0.3 if lean else math.inf
    j, lo, hi = _around(cand, beta, at.newton_error, lean_past)
    # Windows of at most two candidates also read F' with a proven bound
    # there (float32 windows of more than two classes): by convexity a proven
    # slope at an edge bounds every candidate beyond it (see `beyond`).
    certify = _certifies(rows)
    # From the subsample alone (fused: always, for these rows), or after a
    # float32 Newton step on all the data (two classes: from a far subsample;
    # any rows: from a fused read that proved nothing), with proven slopes:
    # the nearest candidate alone, with F' and
    # F'' there and the rows' largest range, from which Taylor's theorem
    # usually proves the answer (`_proven`); else the Newton step from there
    # places the next window (fused), or the window grows from it, the slopes
    # at its edges bounding every candidate beyond them.
    curved = certify and (fused or at.spread_beta is not None)
    if curved:
        lo = hi = j
    elif not sharp:
        # After a float32 Newton step of some size, one more candidate on the
        # side of larger beta (smaller T): F'' usually falls as beta grows
        # (the forecasts sharpen), and Newton then stops short of the root
        # whichever side it starts from. A candidate costs less than a read.
        lo = max(lo - 1, 0)

    c64 = error64_factor(rows.n_samples, rows.n_classes)
    est: dict[int, float] = {}
    err: dict[int, float] = {}
    exact: dict[int, float] = {}
    slopes: dict[int, tuple[float, float]] = {}  # F' and its bound
    # F'' proven within [low, high], and the rows' largest range
    curves: dict[int, tuple[float, float, float]] = {}
    proven: int | None = None  # the answer, proven by the read at j alone
    guess = j
    # Small inputs report the float64 loss at the answer (evaluated with the
    # window); larger ones the float32 estimate, within its proven bound.
    want_exact = rows.n_samples * rows.n_classes <= EXACT_LOSS_ELEMENTS
    grow = 1
    for _ in range(10):
        todo = [i for i in range(lo, hi + 1) if i not in est]
        if todo:
            extra = [guess] if want_exact and guess not in exact else []
            usable = (
                at.spread_beta is not None and 1.0 / cand[todo].max() >= at.spread_beta
            )
            read = rows.window(
                cand[todo],
                exact=cand[extra],
                spread=at.spread if usable else None,
                deriv_at=todo.index(j) if fused and j in todo else None,
                slopes=certify and len(todo) <= 2 and proven is None,
                span=curved,
            )
            if read.slopes is not None:
                g, e = read.slopes
                slopes.update(zip(todo, zip(g, e, strict=True), strict=True))
            if read.curvature is not None:
                h, eh = read.curvature
                for i, a, b in zip(
                    todo, (h - eh).tolist(), (h + eh).tolist(), strict=True
                ):
                    curves[i] = (a, b, read.span)
            est.update(zip(todo, read.estimate.tolist(), strict=True))
            err.update(zip(todo, read.bound.tolist(), strict=True))
            exact.update(zip(extra, read.reference.tolist(), strict=True))
            passes += 1
            slope = read.slope
            pending = None if slope is None else (1.0 / cand[j], *slope)
            fused = False
        if not all(np.isfinite(est[i]) and np.isfinite(err[i]) for i in est):
            break
        if curved:
            curved = False
            if j in curves and j in slopes:
                top = abs(est[j]) + err[j]
                proven = _proven(cand, j, slopes[j], curves[j], top, c64)
            if proven is not None and proven not in est:
                lo = hi = guess = proven  # (its own loss: a read of it alone)
                continue
        window = range(lo, hi + 1) if proven is None else [proven]
        best = min(window, key=lambda i: (est[i], i))
        upper = est[best] + err[best]
        upper += c64 * (abs(upper) + 1.0)  # bound on the float64 value at best

        def lower(i: int) -> float:
            low = est[i] - err[i]
            return low - c64 * (abs(low) + 1.0)  # bound on the float64 value at i

        def beyond(edge: int, out: int) -> bool:
            """Whether every candidate past ``edge`` (``out``: the nearest of
            them) is proven worse than ``edge`` itself in float64, from the
            slope there: ``F(b) >= F(a) + |F'(a)| |b - a|`` (convexity) rises
            past both float64 values' error bounds."""
            if edge not in slopes:
                return False
            g, e = slopes[edge]
            run = abs(1.0 / cand[out] - 1.0 / cand[edge]) * (1.0 - 1e-9)
            rise = (g - e if out < edge else -g - e) * run
            top = abs(est[edge]) + err[edge]  # (F >= 0 there)
            return rise > 2.0 * c64 * (2.0 * top + rise + 2.0)

        left_ok = (
            proven is not None
            or lo == 0
            or (lo != best and lower(lo) > upper)
            or beyond(lo, lo - 1)
        )
        right_ok = (
            proven is not None
            or hi == n_cand - 1
            or (hi != best and lower(hi) > upper)
            or beyond(hi, hi + 1)
        )
        if left_ok and right_ok:
            close = [i for i in window if i == best or lower(i) <= upper]
            if len(close) == 1 and not want_exact:
                return SearchResult(
                    float(cand[best]), est[best], best in (0, n_cand - 1), passes
                )
            todo = [i for i in close if i not in exact]
            if todo:
                # Too close for float32 (or not yet known): the float64 values.
                values = rows.nll(cand[todo])
                exact.update(zip(todo, values.tolist(), strict=True))
                passes += 1
            chosen, top, hp = decide(rows, cand, {i: exact[i] for i in close})
            return SearchResult(
                float(cand[chosen]), top, chosen in (0, n_cand - 1), passes + hp
            )
        guess = best
        if pending is not None:
            # The first window did not settle it: a float32 Newton step on all
            # the data from its middle (within the subsample's reach) places
            # the next, with the candidates already known reused.
            at_beta, g, h = pending
            pending = None
            stepped = newton_step(at_beta, g, h, *_reach(cand, beta0, se))
            if stepped is not None:
                beta = stepped
                j, lo, hi = _around(cand, beta, 3.0 * ((beta - at_beta) / beta) ** 2)
                if certify:
                    # As after the float32 Newton step: the candidate nearest
                    # the step's answer alone, with its slopes and span.
                    curved, lo, hi = True, j, j
                guess = j
                continue
        # Grow by one candidate first (the usual miss: the best is at an
        # edge), then by doubling steps (plateaus).
        if not left_ok:
            lo = max(lo - grow, 0)
        if not right_ok:
            hi = min(hi + grow, n_cand - 1)
        grow *= 2
    # Degenerate data (plateaus, non-finite losses): decide everything in float64.
    result = search_grid_float64(rows, cand, start=beta)
    return SearchResult(
        result.temperature, result.loss, result.at_boundary, passes + result.n_passes
    )


def search_grid_float64(
    rows: Rows, temperatures: NDArray, *, start: float = 1.0
) -> SearchResult:
    """The exact rule, deciding every comparison in float64 (the robust path).

    ``temperatures`` are the sorted unique candidates, at least two, and the
    rows are not all constant: :func:`search_grid` has handled those cases.

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
    cand = temperatures  # sorted, unique, at least two (see search_grid)
    beta_lo, beta_hi = 1.0 / cand[-1], 1.0 / cand[0]
    beta, passes = newton_beta(
        lambda b: tuple(rows.derivatives([b])[0]),
        beta_lo,
        beta_hi,
        start,
        rtol=1e-4,
    )
    # Candidates (ascending T) on either side of T = 1/beta.
    j = int(np.searchsorted(cand, 1.0 / beta))
    left, right = max(j - 1, 0), min(j, cand.shape[0] - 1)
    losses: dict[int, float] = {}

    def evaluate(idx: list[int]) -> None:
        nonlocal passes
        todo = [i for i in idx if i not in losses]
        if todo:
            values = rows.nll(cand[todo])
            losses.update(zip(todo, values.tolist(), strict=True))
            passes += 1

    evaluate(list(range(left, right + 1)))
    width = 1
    while True:
        best = min(losses.values())
        margin = 2.0 * error_bound(best, rows.n_samples, rows.n_classes)
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

    chosen, loss, hp = decide(rows, cand, losses)
    at_boundary = chosen in (0, cand.shape[0] - 1)
    return SearchResult(float(cand[chosen]), loss, at_boundary, passes + hp)
