"""``Rows``: the held-out rows and the named reads the searches make of them.

Each read is one method, one pass over the data, and the one place its
result is finished (folded in block order, error bounds applied):

=================  ==========================================================
``nll``            ``L(T)`` at a few temperatures (float64; the reference)
``derivatives``    ``(F, F', F'')`` in ``beta = 1/T`` (and ``F'''``, ``F''''``)
``slopes``         float64 ``F'`` with a proven error bound, and exact facts
``window``         float32 estimates of ``L`` with proven error bounds
``exact``          ``L(T)`` to 50 digits (near-ties only)
``flat``           whether every row of positive weight is constant
``subsample``      a few rows as host arrays (the warm start)
``moments``        the warm start's float32 steering read (in memory only)
=================  ==========================================================

Each read's per-block sums come from its ``*_parts`` method (the kernel
here); a backend (``skts._array_api.XpRows``, ``skts._dask.DaskRows``)
overrides the ``*_parts`` methods, and the base class folds and finishes
them, so every backend shares the formulas after the blocks' sums. The
searches (:mod:`skts._numerics._grid`, :mod:`skts._numerics._continuous`)
call only the named reads.
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np
from numpy.typing import NDArray

from skts._numerics._blocks import (
    Stacked,
    add,
    blocks,
    curvature_bound,
    error64_factor,
    fold,
    normalised_weights,
    rows_per_block,
    sum_error_factor,
    weights_total,
)
from skts._numerics._compiled import kernel
from skts._numerics._exact import HP_DIGITS, combine_exact, exact_part, exact_values
from skts._numerics._result import (
    Slopes,
    Window,
    _slopes_item,
    _slopes_total,
    _window_item,
    _window_total,
    combine_slopes,
    combine_window,
)
from skts._numerics._steps import model_step
from skts._numerics._threads import kernel_threads, map_blocks, python_threads

__all__ = [
    "Rows",
    "Slopes",
    "Unchecked",
    "Window",
    "combine_slopes",
    "combine_window",
    "derivatives",
    "nll",
    "nll_many",
]


def _readable(logits) -> bool:
    """Whether the compiled kernel reads ``logits`` in place (NumPy float32
    or float64, C-contiguous, memory maps included)."""
    return kernel.supports(logits)


class _RowMaxima:
    """The row maxima of wide float32 logits, found by a fit's first read and
    given to the later ones: the kernel then reads such rows once per pass,
    as its arithmetic consumes them (no separate sweep for the maxima). The
    same bits either way (a maximum is exact).

    That first read also writes each block's largest row range (its sweep
    for the maxima finds the minima alongside, in cache), which a later read
    asked for ``span_out`` is given here: otherwise that read would sweep its
    rows once more for their minima (9 ms of a 52 ms one-candidate window at
    50,000 x 1,000, one thread)."""

    def __init__(self, logits):
        self.logits = logits
        self.values: NDArray | None = None
        self.spans: NDArray | None = None
        self._pending: tuple[NDArray, NDArray] | None = None

    @staticmethod
    def wanted(logits) -> bool:
        return (
            _readable(logits)
            and logits.dtype == np.float32
            and logits.shape[1] > 32
            and logits.shape[0] > 0
        )

    def prepare(self, options: dict) -> None:
        """A read's options, with the maxima (and spans) given or wanted."""
        if self.values is not None:
            options["row_max"] = self.values
            if self.spans is not None and "span_out" in options:
                options.pop("span_out")[:] = self.spans
            return
        n, k = self.logits.shape
        spans = options.setdefault(
            "span_out", np.full(-(-n // rows_per_block(k)), np.inf)
        )
        self._pending = np.empty(n), spans
        options["row_max_out"] = self._pending[0]

    def read(self) -> None:
        """After a pass: the maxima and spans it wrote, if any, are known."""
        if self.values is None and self._pending is not None:
            self.values, spans = self._pending
            self.spans, self._pending = spans.copy(), None


class Unchecked:
    """The finiteness test of a fit's logits, left to the kernel's reads
    (:func:`skts._fit.rows_for`): the input check's own test would read all
    the logits once more before the fit's first read does.

    ``test`` runs that test on all the logits (and raises its message). Every
    compiled read of the rows, or of a sample of them, looks at each logit it
    reads; one that finds a value not finite runs ``test``, so no read's
    answer is used. The first read of all ``n_samples`` rows that finds them
    finite settles it, and the later reads do not look.
    """

    def __init__(self, test, n_samples: int):
        self.test, self.n_samples, self.settled = test, n_samples, False

    def run(self) -> None:
        """The input check's test on all the logits (it raises if one is not
        finite); then nothing is left to look at."""
        self.test()
        self.settled = True


class Rows:
    """The held-out rows as every read sees them (in memory, NumPy).

    ``sample_weight`` is normalised (:func:`~skts._numerics._blocks.normalised_weights`)
    and ``total`` is its sum: every read sees the same weighted mean. The
    reads are the public methods; ``*_parts`` give a read's per-block sums
    (what a backend overrides), folded in block order by the read.
    """

    # Pieces whose results are combined: every float64 sum follows the
    # blocks in order whatever the pieces (the same bits), but the
    # high-precision evaluator adds one rounding per piece.
    n_parts = 1
    # (None: the logits are known to be finite)
    unchecked: Unchecked | None = None

    def __init__(
        self,
        logits,
        y,
        sample_weight=None,
        n_jobs=None,
        *,
        keep_maxima=True,
        unchecked: Unchecked | None = None,
    ):
        weights = normalised_weights(sample_weight)  # exact
        # Labels and weights contiguous (a copy only if they are not): the
        # kernel would copy strided ones again on each read (every k-th label
        # of the warm start's sample, read six or seven times).
        y = np.ascontiguousarray(y)
        weights = None if weights is None else np.ascontiguousarray(weights)
        n_samples, n_classes = logits.shape
        self._set(
            logits, y, weights, weights_total(weights, n_samples, n_classes), n_jobs
        )
        # (the warm start's subsamples are read a few times only: no maxima)
        wanted = keep_maxima and _RowMaxima.wanted(logits)
        self._maxima = _RowMaxima(logits) if wanted else None
        self.unchecked = unchecked

    @classmethod
    def piece(
        cls,
        logits,
        y,
        sample_weight,
        total: float,
        n_jobs=1,
        row_max=None,
        unchecked: Unchecked | None = None,
    ) -> Rows:
        """Some rows of a larger set whose weights are already normalised and
        whose ``total`` is the whole set's (a Dask task's piece); ``row_max``:
        their row maxima and each block's largest range if an earlier read
        found them (:meth:`row_maxima`); ``unchecked``: as for the
        constructor."""
        rows = cls.__new__(cls)
        rows._set(logits, y, sample_weight, total, n_jobs)
        rows.unchecked = unchecked
        rows._maxima = _RowMaxima(logits) if _RowMaxima.wanted(logits) else None
        if rows._maxima is not None and row_max is not None:
            rows._maxima.values, rows._maxima.spans = row_max
        return rows

    def row_maxima(self) -> tuple[NDArray, NDArray] | None:
        """The row maxima and each block's largest row range that a read of
        all the rows has found (wide float32 rows only), or None: a piece's
        later reads are given them."""
        maxima = self._maxima
        if maxima is None or maxima.values is None:
            return None
        return maxima.values, maxima.spans

    @property
    def float64_window(self) -> bool:
        """Whether :meth:`window` gives float64 values (bounds in float64
        units: no float32 near-ties); the kernel's two-class read does."""
        return self.n_classes <= 2

    def _set(self, logits, y, weights, total, n_jobs) -> None:
        self.logits, self.y, self.sample_weight = logits, y, weights
        self.n_samples, self.n_classes = logits.shape
        self.total = total
        self.n_jobs = n_jobs

    # -- the named reads -----------------------------------------------------

    def nll(self, temperatures) -> NDArray[np.float64]:
        """``L(T)`` at each of ``temperatures``, float64, in one read: the
        reference of every decision (``nll_many``)."""
        temperatures = np.asarray(temperatures, dtype=np.float64).reshape(-1)
        with np.errstate(over="ignore", invalid="ignore"):
            return fold(add, self.nll_parts(temperatures))

    def derivatives(
        self,
        betas,
        precision: str = "float64",
        *,
        second_moment: bool = True,
        higher: bool = False,
    ) -> NDArray[np.float64]:
        """``(F, F', F'')`` at each of ``betas`` (rows), in one read; with
        ``higher``, the third and fourth derivatives too (five columns).
        ``precision="float32"``: float32 exponentials (to steer, never to
        decide). ``second_moment=False``: the third column is the mean of
        ``E_p[-d]`` (a bound of the window's spread) instead of ``F''``."""
        betas = [float(b) for b in betas]
        with np.errstate(over="ignore", invalid="ignore"):
            return fold(
                add, self.derivatives_parts(betas, precision, second_moment, higher)
            )

    def slopes(
        self,
        temperatures,
        *,
        moments: bool = True,
        facts: bool = True,
        higher: bool = False,
        span: bool = False,
    ) -> Slopes:
        """``F``, ``F'`` and ``F''`` at ``beta = 1/T`` for each of ``temperatures``,
        in float64, with a proven bound on the error of ``F'``; one read.

        ``F`` is :func:`nll_many`'s formula, blocks and summation order (exponents
        clamped at -700 as there), bit for bit but at the second point of a pair
        (see the Notes). With ``moments=False`` only ``F`` and the exact facts are
        computed (about half the work); ``F'`` and ``F''`` are
        then NaN and their bound infinite. With ``facts=False`` the exact facts
        are not computed (both reported False): reads inside the range need none.
        With ``higher`` (and ``moments``), the steps use the third and fourth
        derivatives too
        (:func:`~skts._numerics._steps.model_step`; no pair is formed then).

        Notes
        -----
        Per row, with ``d_j = z_j - m <= 0``, ``p = softmax(beta d)``,
        ``M1 = E_p[-d]``, ``M2 = E_p[d**2]`` and the gap ``g = m - z_y``, the
        slope is ``g - M1``. Each exponential carries at most 4 ulp of its own
        (the kernel's polynomial, ``skts/_kernel.h``: below 3.2u; at the second
        of two points within 1e-9 relative of each other, read as a pair, the
        first's exponential times the quadratic Taylor polynomial in ``(beta_2 -
        beta_1) d``: two more roundings, below 5.2u) and
        ``3 u beta |d_j|`` from the roundings of ``d_j``, ``beta = 1/T`` and
        ``x_j = beta d_j``; ``log S`` stays within 5u; the sums of the ``K``
        same-signed terms add ``K u``.
        Hence ``|computed - exact| <= u (2 g + (2K + 12) M1 + 4 beta (M2 + M1**2))``
        per row (first order; doubled below), plus ``K T (1.4e-301 + 1e-304
        E_p[-x])`` for exponents clamped at -700 (the kernel's exponential is
        exact in its scaling only for normal results), plus the weighted
        accumulation: at most one relative rounding per row of a block and one
        per block, as in :func:`~skts._numerics._blocks.error_bound`.
        """
        temperatures = [float(t) for t in temperatures]
        n_samples, n_classes = self.n_samples, self.n_classes
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            totals, (all_top, all_bottom, varies, widest) = fold(
                combine_slopes,
                self.slopes_parts(temperatures, moments, facts, higher, span),
            )
            # The weighted sums add at most one relative rounding per row of a
            # block and one per block to the sum of |row slope|.
            accumulate = sum_error_factor(n_samples, n_classes)
            bound = (totals[:, 3] + accumulate * totals[:, 4]) * (1.0 + 1e-6)
            values = totals[:, :3].copy()
            ts = np.asarray(temperatures)
            # The Newton step F'/F'' in beta, in an order that does not overflow
            # where F'' alone does (T near 1e200): (F' / T) / T / mean(var x).
            steps = values[:, 1] / ts / ts / values[:, 2]
            values[:, 2] *= ts * ts
        steps = np.where(np.isfinite(steps) & (totals[:, 2] > 0), steps, np.inf)
        orders = np.full(len(temperatures), 2)
        if higher and moments:
            for i in range(len(temperatures)):
                h = model_step(*(float(v) for v in (*values[i, 1:3], *totals[i, 5:7])))
                if np.isfinite(h) and np.isfinite(steps[i]):
                    steps[i], orders[i] = -h, 4
        return Slopes(
            values,
            bound,
            all_top and varies,
            all_bottom and varies,
            steps,
            orders,
            float(widest) if span else math.inf,
            float(totals[0, 5])
            if higher and moments and len(temperatures)
            else math.nan,
        )

    def window(
        self,
        temperatures,
        *,
        exact=None,
        spread: float | None = None,
        deriv_at: int | None = None,
        slopes: bool = False,
        span: bool = False,
    ) -> Window:
        """Float32 estimates of ``L`` at a few temperatures, with rigorous error bounds.

        One read of the data. The exponentials run in float32 (16 per vector
        instruction), their row sums in float64 (after float32 sums of groups
        of at most 4 classes: see below) and everything else per row in
        float64. Returns
        ``(estimate, bound)`` with ``|estimate - L| <= bound`` for the exact loss
        ``L``. The float64 reference values (``nll_many``, bit for
        bit) at the temperatures ``exact`` come from the same read, as a third
        array. With ``deriv_at`` (an index into ``temperatures``), the same read
        also gives ``(F', F'')`` in ``beta`` there (float32 exponentials, as
        :func:`derivatives` with ``"float32"``), else ``None``. With ``slopes``
        (more than two classes, float32 windows), ``F'`` in ``beta`` at every
        temperature and a proven bound on its error (see the Notes' end);
        with ``span`` too, the rows' largest range and ``F''`` at every
        temperature with a proven bound on its error (:func:`curvature_bound`).

        Notes
        -----
        Per row, with ``u_j = beta * d_j`` and ``S = sum_j exp(u_j)``, the float32
        ``S`` has a relative error of at most ``u * (8 + r + log2 K + 3
        E_p|u|)`` (``u = 2**-24``): 4 ulp per exponential (the kernel's float32
        polynomial: below 4.4u), the row sum (below ``log2 K`` float32 units:
        in float64 for any ``K`` below 2**29; at 4 to 32 classes each group of
        ``g`` classes, 4 from 8 classes and 2 from 4, is first added in float32
        as a balanced tree, within ``log2 g <= log2 K - 1`` units, and at most
        8 groups in float64 add below 1e-7 of one; plus ``r = 7`` above 32
        classes, whose rows add float32 runs of at most 8 positive terms per
        lane first), and
        the roundings of ``d``, ``beta``
        and their product, each amplified by ``|u_j|`` through the exponential.
        ``log S``, in float64, adds an error of a few float64 units of itself,
        far inside the float32 units counted; unweighted rows of at most 32
        classes take one logarithm of the product of up to 8 rows' ``S``
        (each in ``[1, K]``), within ``8 + 40 log K`` float64 units of those
        rows' ``log S`` (a logarithm per row cost as much as the
        exponentials at 10 classes). (The first, NumPy, version of
        this read summed and took the log in float32, and counted ``24 u`` for
        NumPy's pairwise sum and ``8 u log S`` for the log; neither applies to
        the kernel's ``S`` and float64 ``log S``.) Exponents
        are clamped at -87 (float32 results stay normal): 1.7e-38 per class at
        most, inside the ``4e-38 K`` added per block. The
        bound is doubled for safety. ``E_p|u|`` decreases with ``beta``, so it is
        measured at the smallest ``beta`` of the call and used for all; a caller
        that knows an upper bound ``spread`` of its weighted mean at a smaller
        ``beta`` may pass it instead (the bound is linear in it), which saves a
        sweep.

        ``F'_row = g - M1`` (``M1 = E_p[-d]``, ``M2 = E_p[d**2]``, ``g = m -
        z_y``): each term ``e x`` of ``M1``'s float32 sum is within ``u (8.4 +
        3.01 |u_j|)`` of its exact value (the exponential's 4.4u, the
        roundings of ``d``, ``beta`` and two products), the sum of ``c``
        same-signed terms (``ceil(K / 16)`` per lane above 32 classes, else
        ``K``) adds ``c u``, and ``S`` as above; so ``|computed M1 - M1| <= u
        (M1 (20 + c + r + log2 K + 3 beta M1) + 3.01 beta M2)``, plus ``4 u64 (g
        + M1)`` for the float64 roundings (``g``'s, the three of ``M1 =
        s1 (1 / (S beta))`` and ``F'_row``'s), and for the clamped
        exponents ``K T 1e-35`` (each ``e x`` below ``87 exp(-87)``) and ``M1 K
        1e-37`` (``S``'s ``K exp(-87)``); doubled, and the weighted sum's
        roundings added as :meth:`slopes` adds them.
        """
        temperatures = np.asarray(temperatures, dtype=np.float64)
        exact_t = np.zeros(0) if exact is None else np.asarray(exact, dtype=np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            est, err, refs, gh, widest = fold(
                combine_window,
                self.window_parts(
                    temperatures, exact_t, spread, deriv_at, slopes, span
                ),
            )
            ref = fold(add, refs) if refs else np.zeros(exact_t.shape[0])
        # float64 roundings of the per-row terms and of the accumulation.
        c64 = error64_factor(self.n_samples, self.n_classes)
        err = err + c64 * (np.abs(est) + 1.0)
        slope = (
            None
            if deriv_at is None
            else (float(gh[deriv_at, 0]), float(gh[deriv_at, 1]))
        )
        if not (slopes and self.n_classes > 2 and not self.float64_window):
            return Window(est, err, ref, slope)
        # sum |F'_row| <= F' + 2 sum M1, and each row's bound is at least
        # 40 u32 M1; the weighted sums' roundings as in `slopes`.
        accumulate = sum_error_factor(self.n_samples, self.n_classes)
        size = np.abs(gh[:, 0]) + 2.0 * gh[:, 2] / (40.0 * 2.0**-24)
        bound = (gh[:, 2] + accumulate * size) * (1.0 + 1e-6)
        found = (gh[:, 0].copy(), bound)
        if not span:
            return Window(est, err, ref, slope, found)
        h = gh[:, 1].copy()
        # (the weighted sums' roundings: the sums of the bounds of F' and of
        # the rows' F'', both of terms >= 0)
        eh = curvature_bound(
            h, gh[:, 2] * (1.0 + accumulate), temperatures, widest, self.n_classes
        )
        eh = eh + accumulate * h
        return Window(est, err, ref, slope, found, widest, (h, eh * (1.0 + 1e-6)))

    def exact(self, temperatures, digits: int = HP_DIGITS):
        """``L(T)`` at each of ``temperatures`` to about ``digits``
        significant digits, and ``rel``, a proven bound on their relative
        error (see :func:`~skts._numerics._exact.exact_values`)."""
        temperatures = [float(t) for t in temperatures]
        totals, weight_sum = fold(
            partial(combine_exact, digits=digits),
            self.exact_parts(temperatures, digits),
        )
        return exact_values(
            totals, weight_sum, self.n_samples, self.n_classes, self.n_parts, digits
        )

    def flat(self) -> bool:
        """Whether every row of positive weight has all-equal logits.

        Then each row's loss is ``log(n_classes)`` for every ``T``, exactly:
        the rule gives the smallest candidate without any floating-point
        comparison. Stops at the first block with a non-constant row.
        """
        logits, w = self.logits, self.sample_weight
        if _readable(logits):
            return not kernel.varies(logits, w)
        for rows in blocks(self.n_samples, self.n_classes):
            block = logits[rows]
            varies = block.max(axis=1) != block.min(axis=1)
            if w is not None:
                varies &= w[rows] > 0
            if np.any(varies):
                return False
        return True

    def subsample(self, rows: slice) -> tuple[NDArray, NDArray, NDArray | None]:
        """The rows ``rows`` (a small subsample) as in-memory arrays."""
        w = self.sample_weight
        z = self.logits
        if isinstance(z, np.ndarray) and z.flags.c_contiguous and z.size:
            # Every k-th row of contiguous rows, each copied as one item (a
            # row-sized void): NumPy's copy of a 2-D strided view loops over
            # each row's few values, and took 1.6 to 1.8 times as long at
            # 1,000,000 x 10 float32 (benchmarks/bench_subsample.py; 1 to 2
            # ms of a 22 ms fit). The same values.
            z = np.asarray(z)  # (a memory map's copy is a plain array)
            whole = z.view(np.dtype((np.void, z.itemsize * z.shape[1])))
            copied = whole.reshape(-1)[rows].copy().view(z.dtype)
            sub = copied.reshape(-1, z.shape[1])
        else:
            # A copy: the rows may be a reader's scratch block (Widened).
            sub = np.array(z[rows], order="C")
        return (
            sub,
            np.asarray(self.y[rows]),
            None if w is None else np.asarray(w[rows]),
        )

    def readable(self) -> bool:
        """Whether the kernel reads these rows in place (then the warm start
        reads them directly: :meth:`moments`)."""
        return _readable(self.logits)

    def view(self, rows: slice) -> tuple[NDArray, NDArray, NDArray | None] | None:
        """The rows ``rows`` without a copy when the kernel reads them in
        place (a view of every k-th row), else None."""
        z = self.logits[rows]
        if not _readable(z):
            return None
        w = self.sample_weight
        return z, self.y[rows], None if w is None else w[rows]

    def moments(
        self, beta: float, *, facts: bool = False, higher: bool = False
    ) -> tuple[list[float], tuple[bool, bool] | None]:
        """The warm start's steering read at one ``beta`` (float32
        exponentials): ``[F, F', F'', mean g**2]`` (and ``F'''``, ``F''''``
        with ``higher``), and with ``facts`` whether every label has its
        row's largest / smallest logit. In-memory rows only."""
        sums, found = self._pass(
            kernel.derivatives,
            [beta],
            [1.0 / beta],
            single=True,
            facts=facts,
            higher=higher,
        )
        values = [float(v) for v in fold(add, sums[:, 0, :])]
        if found is None:
            return values, None
        return values, (bool(np.all(found[:, 0])), bool(np.all(found[:, 1])))

    # -- the per-block sums of each read (what backends override) ------------

    def nll_parts(self, temperatures: NDArray):
        """:meth:`nll`'s per-block sums (rows of shape ``(n_temperatures,)``)."""
        sums, _ = self._pass(kernel.nll, 1.0 / temperatures, temperatures)
        return sums[:, :, 0]

    def derivatives_parts(self, betas, precision, second_moment, higher=False):
        """:meth:`derivatives`' per-block sums (rows of shape ``(n_betas, 3)``,
        ``(n_betas, 5)`` with ``higher``)."""
        betas = np.asarray(betas, dtype=np.float64)
        sums, _ = self._pass(
            kernel.derivatives,
            betas,
            1.0 / betas,
            single=precision == "float32",
            second=second_moment,
            higher=higher,
        )
        return sums[:, :, [0, 1, 2, 4, 5]] if higher else sums[:, :, :3]

    def slopes_parts(self, temperatures, moments, facts, higher=False, span=False):
        """:meth:`slopes`' per-block ``(sums, (top, bottom, varies, span))``
        (``span``: the block's largest row range if asked for, else inf)."""
        ts = np.asarray(temperatures, dtype=np.float64)
        order, pair = np.arange(ts.shape[0]), False
        betas = 1.0 / ts
        for i in range(ts.shape[0] - 1 if moments and not higher else 0):
            if abs(betas[i + 1] - betas[i]) <= 1e-9 * betas[i]:
                # Two points that close (a straddle) share their exponentials:
                # the kernel reads them first, as a pair.
                rest = [q for q in range(ts.shape[0]) if q not in (i, i + 1)]
                order, pair = np.array([i, i + 1, *rest]), True
                break
        n_blocks = -(-self.n_samples // rows_per_block(self.n_classes))
        spans = np.full(n_blocks, np.inf)
        sums, found = self._pass(
            kernel.slopes,
            betas[order] if pair else betas,
            ts[order] if pair else ts,
            moments=moments,
            facts=facts,
            pair=pair,
            higher=higher and moments,
            **({"span_out": spans} if span else {}),
        )
        if pair:
            sums[:, order] = sums.copy()  # (back in the order asked)
        if not moments:
            sums[:, :, 1:3] = np.nan
            sums[:, :, 3:] = np.inf
        if found is None:
            found = np.zeros((sums.shape[0], 3), dtype=bool)
        return Stacked(_slopes_item, _slopes_total, (sums, found.astype(bool), spans))

    def window_parts(
        self, temperatures, exact_t, spread, deriv_at=None, slopes=False, span=False
    ):
        """:meth:`window`'s per-block ``(est, err, [float64 values], (F', F'',
        mean of the rows' bounds of F') at each temperature, span)`` (``span``:
        the block's largest row range if asked for, else inf)."""
        order = np.argsort(-temperatures, kind="stable")  # ascending beta: the
        ts = temperatures[order]  # reference comes first
        measure = spread is None or self.n_classes == 2  # (binary: its own)
        spans = np.full(-(-self.n_samples // rows_per_block(self.n_classes)), np.inf)
        sums, _ = self._pass(
            kernel.window,
            1.0 / ts,
            ts,
            first_spread=0 if measure else -1,
            spread=0.0 if measure else float(spread),
            deriv_at=-1
            if deriv_at is None
            else int(np.flatnonzero(order == deriv_at)[0]),
            slopes=bool(slopes) and self.n_classes > 2,
            **({"span_out": spans} if span else {}),
        )
        est = np.empty(sums.shape[:2])
        err = np.empty(sums.shape[:2])
        est[:, order], err[:, order] = sums[:, :, 0], sums[:, :, 1]
        # (zeros where not asked for)
        gh = np.zeros((*sums.shape[:2], 3))
        gh[:, order, : sums.shape[2] - 2] = sums[:, :, 2:]
        # The float64 values (nll's, bit for bit: the same blocks and kernel).
        refs = self.nll_parts(exact_t) if exact_t.size else None
        assert refs is None or refs.shape[0] == est.shape[0]  # the same blocks
        return Stacked(_window_item, _window_total, (est, err, refs, gh, spans))

    def exact_parts(self, temperatures, digits: int = HP_DIGITS):
        """:meth:`exact`'s weighted sums over the rows and their weight."""
        if self.unchecked is not None and not self.unchecked.settled:
            self.unchecked.run()  # (not the kernel: the test first)
        return exact_part(
            self.logits, self.y, self.sample_weight, self.total, temperatures, digits
        )

    # -- the kernel ----------------------------------------------------------

    def _pass(self, entry, betas, temperatures, **options):
        """One compiled read (``entry``: one of the kernel's entry points):
        per-block sums, one row per block, and the facts if asked. While the
        logits are not known to be finite (:class:`Unchecked`), the read
        also looks at every logit it reads, and one that is not finite runs
        the input check's test, which raises."""
        unchecked = self.unchecked
        if unchecked is None or unchecked.settled:
            return self._read(entry, betas, temperatures, None, **options)
        n_blocks = -(-self.n_samples // rows_per_block(self.n_classes))
        finite = np.zeros(n_blocks)  # (1 where a block found them all finite)
        out = self._read(entry, betas, temperatures, finite, **options)
        if not finite.all():  # (or a block not read: the test decides)
            unchecked.run()
        elif self.n_samples == unchecked.n_samples:  # (all the rows)
            unchecked.settled = True
        return out

    def _read(self, entry, betas, temperatures, finite, **options):
        """:meth:`_pass`'s read; ``finite``: None, or one float64 per block
        where the kernel writes whether the block's logits are all finite.

        Arrays the kernel cannot read in place (float16 blocks widened on the
        fly, strided views) are handed to it block by block, each block a
        contiguous float32 or float64 copy: the same blocks, hence the same
        bits.
        """
        logits, y, w, total = self.logits, self.y, self.sample_weight, self.total
        n_samples, n_classes = self.n_samples, self.n_classes
        if _readable(logits):
            threads = kernel_threads(self.n_jobs, n_samples * n_classes)
            maxima = self._maxima
            if maxima is not None:
                maxima.prepare(options)
            if finite is not None:
                options["finite_out"] = finite
            out = entry(
                logits, y, w, float(total), betas, temperatures,
                n_threads=threads, **options,
            )  # fmt: skip
            if maxima is not None:
                maxima.read()
            return out if isinstance(out, tuple) else (out, None)

        spans = options.pop("span_out", None)

        def block(rows: slice):
            z = logits[rows]
            # (a contiguous, aligned copy: np.require, since ascontiguousarray
            # keeps a misaligned array as it is)
            z = np.require(z, np.float64 if z.dtype == np.float64 else np.float32, "CA")
            # (each block's own span_out and finite_out, gathered below like
            # its sums)
            n_own = -(-z.shape[0] // rows_per_block(n_classes))
            own = None if spans is None else np.full(n_own, np.inf)
            own_finite = None if finite is None else np.zeros(n_own)
            out = entry(
                z,
                y[rows],
                None if w is None else w[rows],
                float(total),
                betas,
                temperatures,
                **options,
                **({} if own is None else {"span_out": own}),
                **({} if own_finite is None else {"finite_out": own_finite}),
                n_threads=inner,
            )
            sums, found = out if isinstance(out, tuple) else (out, None)
            return sums, found, own, own_finite

        # Where Python threads over blocks do not pay (few classes), one call
        # reads several blocks and the kernel's own threads share them: the
        # same blocks, hence the same bits.
        n_elements = n_samples * n_classes
        inner = 1
        if python_threads(self.n_jobs, n_elements, n_classes) <= 1:
            inner = kernel_threads(self.n_jobs, n_elements)
        factor = 8 * inner if inner > 1 else 1
        parts = map_blocks(block, n_samples, n_classes, self.n_jobs, factor)
        sums = np.concatenate([p[0] for p in parts])
        found = None if parts[0][1] is None else np.concatenate([p[1] for p in parts])
        if spans is not None:
            spans[:] = np.concatenate([p[2] for p in parts])
        if finite is not None:
            finite[:] = np.concatenate([p[3] for p in parts])
        return sums, found


# -- the reads on plain arrays -------------------------------------------------


def nll_many(
    logits: NDArray,
    y: NDArray,
    temperatures,
    sample_weight: NDArray | None = None,
    *,
    n_jobs: int | None = None,
) -> NDArray[np.float64]:
    """Validation loss ``L(T)`` at each of ``temperatures``, in one read of the data.

    The value for one temperature does not depend on which other temperatures
    are evaluated with it, nor on ``n_jobs``:
    ``nll_many(z, y, [a, b])[0] == nll(z, y, a)`` bit for bit. This float64
    routine is the reference of every decision in skts ("brute force" is this
    routine at every candidate).
    """
    return Rows(logits, y, sample_weight, n_jobs).nll(temperatures)


def nll(
    logits: NDArray,
    y: NDArray,
    temperature: float,
    sample_weight: NDArray | None = None,
    *,
    n_jobs: int | None = None,
) -> float:
    """Validation loss ``L(T)`` (mean negative log-likelihood) at one temperature."""
    return float(nll_many(logits, y, [temperature], sample_weight, n_jobs=n_jobs)[0])


def derivatives(
    logits: NDArray,
    y: NDArray,
    beta: float,
    sample_weight: NDArray | None = None,
    *,
    n_jobs: int | None = None,
    precision: str = "float64",
) -> tuple[float, float, float]:
    """``F(beta)``, ``F'(beta)`` and ``F''(beta)`` with ``F(beta) = L(1/beta)``.

    ``F'`` is the mean of ``E_p[z] - z_y`` and ``F''`` the mean variance of ``z``
    under ``p = softmax(beta z)``, which is why ``F`` is convex in ``beta``.
    ``precision="float32"`` does the per-element arithmetic in float32 (about
    7 times cheaper exponentials, relative error ~1e-6) and accumulates in
    float64: good enough to steer a search, never used to decide one.
    """
    rows = Rows(logits, y, sample_weight, n_jobs)
    f, g, h = rows.derivatives([beta], precision)[0]
    return float(f), float(g), float(h)
