"""Numerics of temperature scaling: the search in Python, the per-block pass
compiled (``skts._kernel``: C with OpenMP threads, no BLAS).

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

import decimal
import itertools
import math
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

# GNU OpenMP reads its environment once, when it loads (here, with the
# kernel): unless the user says otherwise, idle workers spin for a few
# microseconds between passes, not for the default 300,000 spins (about a
# millisecond), then sleep. On a busy machine a spinning worker takes the time
# slices that the working ones need. The environment is restored at once.
_SPIN = {"GOMP_SPINCOUNT": "3000"}
_SET = [
    key
    for key in _SPIN
    if "OMP_WAIT_POLICY" not in os.environ and key not in os.environ
]
os.environ.update({key: _SPIN[key] for key in _SET})
try:
    from skts import _kernel
except ImportError as exc:  # pragma: no cover - a source tree without a build
    raise ImportError(
        "skts's compiled kernel (skts._kernel) is not built here. Install skts "
        "with a C compiler present: `pip install .` (from outside the source "
        "folder), or, to work in it, `pip install meson-python meson ninja "
        "cython` then `pip install --no-build-isolation -e .`."
    ) from exc
finally:
    for _key in _SET:
        os.environ.pop(_key, None)

__all__ = [
    "BoundaryTemperatureWarning",
    "SearchResult",
    "default_temperatures",
    "derivatives",
    "geometric_grid",
    "grid_search",
    "log_softmax",
    "nll",
    "nll_many",
    "softmax",
    "solve_continuous",
]

# About 64k logits per block: the unit of every sum's order (each block's sums
# are added in block order), read by the kernel in cache-sized chunks.
_BLOCK_ELEMENTS = 1 << 16
_F32_BLOCKS = 4
_EPS = float(np.finfo(np.float64).eps)
_BIG = float(np.finfo(np.float64).max)
# Exponents are clamped at -700 (see _slopes): each clamped exponential is
# off by at most exp(-700) < 1e-304, and x exp(x) by at most 2 * 700 of that.
_EXP_FLOOR = -700.0
_FLUSH = 1e-304
_FLUSH_X = 2.0 * 700.0 * _FLUSH


class BoundaryTemperatureWarning(UserWarning):
    """The chosen temperature lies on the boundary of the candidate range.

    The validation loss may keep decreasing beyond the range: the data prefer
    ``T -> 0`` (every label already has the largest logit) or ``T -> infinity``
    (uniform forecasts). Widen the candidate range or check the held-out data.

    Examples
    --------
    >>> import warnings
    >>> import numpy as np
    >>> from skts import BoundaryTemperatureWarning, TemperatureScaler
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     _ = TemperatureScaler([0.5, 1.0, 2.0]).fit(np.eye(2) * 5, [0, 1])
    >>> caught[0].category is BoundaryTemperatureWarning
    True
    """


# A geometric grid larger than this is refused (8 MB of candidates; the
# search costs the same, but building and validating it does not).
MAX_GRID_POINTS = 1_000_000


def geometric_grid(low: float, high: float, count: int) -> NDArray[np.float64]:
    """``count`` candidates from ``low`` to ``high`` (both included), evenly
    spaced in ``log10``.

    Point ``i`` is ``10 ** ((a (count - 1 - i) + b i) / (count - 1))`` with
    ``a = log10(low)``, ``b = log10(high)``: one division of an exactly computed
    numerator where ``a`` and ``b`` are integers, so
    ``geometric_grid(0.01, 100, 1001)`` is the default grid bit for bit. The
    ends are ``low`` and ``high`` exactly.
    """
    if not (0 < low <= high < np.inf) or not 1 <= count <= MAX_GRID_POINTS:
        raise ValueError(
            f"a geometric grid needs 0 < low <= high < inf and 1 <= count <= "
            f"{MAX_GRID_POINTS}; got low={low!r}, high={high!r}, count={count!r}."
        )
    if count == 1 or low == high:
        return np.full(count, float(low))
    a, b = math.log10(low), math.log10(high)
    i = np.arange(count, dtype=np.float64)
    grid = 10.0 ** ((a * (count - 1 - i) + b * i) / (count - 1))
    grid[0], grid[-1] = low, high
    return grid


def default_temperatures() -> NDArray[np.float64]:
    """Default candidate grid: 1001 geometric points from 0.01 to 100.

    The ratio between neighbours is ``10**(1/250)``, about 0.93%, and the grid
    contains 0.01, 1 and 100 exactly (``10.0**0 == 1.0``); it is
    ``geometric_grid(0.01, 100, 1001)`` (the command line's
    ``geom:0.01:100:1001``).
    """
    return geometric_grid(0.01, 100.0, 1001)


def _rows_per_block(n_classes: int) -> int:
    """Rows of one block (of the compiled pass too: ``skts/_kernel.pyx``)."""
    return max(1, _BLOCK_ELEMENTS // max(n_classes, 1))


def _blocks(n_samples: int, n_classes: int, factor: int = 1) -> Iterator[slice]:
    # The block size depends on the shape only, so the summation order (and
    # hence every bit of the result) is the same whatever the caller. Some
    # backends group ``_F32_BLOCKS`` blocks (aligned with them) per task.
    step = _rows_per_block(n_classes) * factor
    for start in range(0, n_samples, step):
        yield slice(start, min(start + step, n_samples))


def _n_threads(n_jobs: int | None, n_elements: int, n_classes: int) -> int:
    """Threads for a pass.

    ``None`` uses every core where it pays (measured: wide rows, at least 64
    classes, and at least 2**22 logits; with few classes the per-block work is
    too short for threads to win), ``-1`` every core, ``k`` k threads.
    """
    cores = os.cpu_count() or 1
    if n_elements < 1 << 18:
        return 1
    if n_jobs is None:
        return cores if n_classes >= 64 and n_elements >= 1 << 22 else 1
    if n_jobs < 0:
        return max(1, cores + 1 + n_jobs)
    return max(1, int(n_jobs))


def _map_blocks(
    fn: Callable[[slice], object],
    n_samples: int,
    n_classes: int,
    n_jobs: int | None,
    factor: int = 1,
) -> list:
    """``fn`` over the row blocks, results in block order.

    The kernel releases the GIL, so threads over blocks use several cores
    (inputs it reads block by block); callers reduce the results in block
    order, so the answer does not depend on the number of threads.
    """
    slices = list(_blocks(n_samples, n_classes, factor))
    threads = min(_n_threads(n_jobs, n_samples * n_classes, n_classes), len(slices))
    if threads <= 1:
        return [fn(rows) for rows in slices]
    # Contiguous groups of blocks per task keep the per-task overhead small.
    groups = [slices[i::threads] for i in range(threads)]
    with ThreadPoolExecutor(threads) as pool:
        parts = list(pool.map(lambda g: [fn(rows) for rows in g], groups))
    out: list = [None] * len(slices)
    for i, part in enumerate(parts):
        out[i::threads] = part
    return out


_CORES = os.cpu_count() or 1


_LOAD = {"at": -math.inf, "others": 0}


def _read(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 4096)
    finally:
        os.close(fd)


def _others_running() -> int:
    """Threads of other processes running or waiting for a core now: the
    kernel's count of runnable threads (``/proc/loadavg``) less this
    process's own (``/proc/self/task``: the calling thread, and any other
    library's workers still spinning after their work, such as BLAS's or
    PyTorch's), looked up at most every 0.1 s (the passes of one fit agree);
    0 without ``/proc``."""
    now = time.monotonic()
    if now - _LOAD["at"] >= 0.1:
        try:
            running = int(_read("/proc/loadavg").split()[3].split(b"/")[0])
            own = 0
            for tid in os.listdir("/proc/self/task"):
                try:
                    stat = _read(f"/proc/self/task/{tid}/stat")
                except OSError:  # (a thread that has just ended)
                    continue
                own += stat[stat.rindex(b")") + 2 :][:1] == b"R"
            others = max(0, running - max(own, 1))
        except (OSError, ValueError, IndexError):  # (no /proc: Windows, macOS)
            others = 0
        _LOAD.update(at=now, others=others)
    return int(_LOAD["others"])


def _kernel_threads(n_jobs: int | None, n_elements: int) -> int:
    """Threads of a compiled pass.

    ``None`` uses every core from 2**18 logits on; below, a pass takes about a
    millisecond, and threads cost more than they save. On a busy machine the
    blocks are shared out dynamically and idle workers sleep at once (see
    ``GOMP_SPINCOUNT`` above), so a thread the scheduler sets aside delays a
    long pass by a block; but a pass of under 2**20 logits (a fraction of a
    millisecond on two cores) waits for its last worker to be scheduled at
    all, often longer than the pass: there only the cores that other
    processes leave idle are used (:func:`_others_running`).
    """
    cores = _CORES
    if n_jobs is None:
        if n_elements < 1 << 18:
            return 1
        if n_elements < 1 << 20:
            return max(1, min(cores, cores - _others_running()))
        return cores
    if n_jobs < 0:
        return max(1, cores + 1 + n_jobs)
    return max(1, int(n_jobs))


def _compiled(logits) -> bool:
    """Whether the compiled kernel reads ``logits`` in place (NumPy float32
    or float64, C-contiguous, memory maps included)."""
    return _kernel.supports(logits)


def _kernel_pass(
    logits, y, sample_weight, total, betas, temperatures, mode, n_jobs, **options
):
    """One compiled pass: per-block sums, one row per block of :func:`_blocks`.

    Arrays the kernel cannot read in place (float16 blocks widened on the
    fly, strided views) are handed to it block by block, each block a
    contiguous float32 or float64 copy: the same blocks, hence the same bits.
    """
    n_samples, n_classes = logits.shape
    if _compiled(logits):
        threads = _kernel_threads(n_jobs, n_samples * n_classes)
        maxima = getattr(_LOCAL, "maxima", None)
        if maxima is not None and maxima.logits is logits:
            options.update(maxima.options())
        return _kernel.block_pass(
            logits,
            y,
            sample_weight,
            float(total),
            betas,
            temperatures,
            mode,
            n_threads=threads,
            **options,
        )

    spans = options.pop("span_out", None)

    def block(rows: slice):
        z = logits[rows]
        if z.dtype != np.float64:
            z = np.ascontiguousarray(z, dtype=np.float32)
        # (each block's own span_out, gathered below like its sums)
        own = None
        if spans is not None:
            own = np.full(-(-z.shape[0] // _rows_per_block(n_classes)), np.inf)
        out = _kernel.block_pass(
            np.ascontiguousarray(z),
            y[rows],
            None if sample_weight is None else sample_weight[rows],
            float(total),
            betas,
            temperatures,
            mode,
            **options,
            **({} if own is None else {"span_out": own}),
        )
        return out[0], out[1], own

    parts = _map_blocks(block, n_samples, n_classes, n_jobs)
    sums = np.concatenate([p[0] for p in parts])
    found = None if parts[0][1] is None else np.concatenate([p[1] for p in parts])
    if spans is not None:
        spans[:] = np.concatenate([p[2] for p in parts])
    return sums, found


_LOCAL = threading.local()


def _scratch(name: str, shape: tuple[int, ...], dtype=np.float32) -> NDArray:
    """A per-thread scratch array, reused across blocks and calls.

    Fresh block-sized temporaries cost page faults, which threads serialise;
    reusing a few per thread keeps both the time and the memory flat.
    """
    cache = getattr(_LOCAL, "buffers", None)
    if cache is None:
        cache = _LOCAL.buffers = {}
    size = math.prod(shape)
    buf = cache.get(name)
    if buf is None or buf.size < size or buf.dtype != dtype:
        buf = cache[name] = np.empty(
            max(size, _BLOCK_ELEMENTS * _F32_BLOCKS), dtype=dtype
        )
    return buf[:size].reshape(shape)


def _weights_total(
    sample_weight: NDArray | None, n_samples: int, n_classes: int
) -> float:
    """The sum of the weights, in the canonical order of every pass (per
    float32 block of :func:`_blocks`, then block after block), so that any
    backend that follows the blocks gets the same bits."""
    if sample_weight is None:
        return float(n_samples)
    return float(_fold(_add, _weight_part(sample_weight, n_classes)))


def _weight_part(sample_weight: NDArray, n_classes: int) -> list[float]:
    """Per-block sums of the weights (the blocks of the float32 passes)."""
    n_samples = sample_weight.shape[0]
    return [
        float(np.sum(sample_weight[rows], dtype=np.float64))
        for rows in _blocks(n_samples, n_classes, _F32_BLOCKS)
    ]


def _fold(combine, parts):
    """``combine`` over ``parts`` from the first, in order: the canonical
    summation order of every pass (``0 + a == a``, so starting from the first
    part gives the bits of starting from zero).

    ``parts`` stacked in an array (``_add``) or in :class:`_Stacked` are
    folded without a Python step per block, with the same bits."""
    if isinstance(parts, _Stacked):
        return parts.fold()
    if isinstance(parts, np.ndarray) and combine is _add:
        return _in_order(parts)
    it = iter(parts)
    acc = next(it)
    for part in it:
        acc = combine(acc, part)
    return acc


def _in_order(a: NDArray) -> NDArray:
    """``a[0] + a[1] + ...`` from the first, one addition after another:
    :func:`_fold` with ``_add`` over the first axis, the same bits (a
    cumulative sum adds in order; ``np.sum`` would add pairwise)."""
    return a[0] if a.shape[0] == 1 else np.cumsum(a, axis=0)[-1]


class _Stacked:
    """One pass's per-block results, stacked along a first (block) axis.

    Iterating gives the per-block results that ``combine`` folds (what a Dask
    reduction gathers, chunk after chunk); :func:`_fold` folds them here
    with :func:`_in_order`, the same bits, without a Python step per block
    (there are thousands of blocks when rows are long).
    """

    def __init__(self, block, fold, n_blocks: int):
        self._block, self._fold_all, self._n = block, fold, n_blocks

    def __len__(self) -> int:
        return self._n

    def __iter__(self):
        return (self._block(i) for i in range(self._n))

    def fold(self):
        return self._fold_all()


class _RowMaxima:
    """The row maxima of wide float32 logits, found by a fit's first read and
    given to the later ones: the kernel then reads such rows once per pass,
    as its arithmetic consumes them (no separate sweep for the maxima). The
    same bits either way (a maximum is exact)."""

    def __init__(self, logits):
        self.logits = logits
        self.values: NDArray | None = None
        self._pending: NDArray | None = None

    @staticmethod
    def wanted(logits) -> bool:
        return (
            _compiled(logits)
            and logits.dtype == np.float32
            and logits.shape[1] > 32
            and logits.shape[0] > 0
        )

    def options(self) -> dict:
        if self.values is not None:
            return {"row_max": self.values}
        self._pending = np.empty(self.logits.shape[0])
        return {"row_max_out": self._pending}

    def read(self) -> None:
        """After a pass: the maxima it wrote, if any, are known."""
        if self.values is None and self._pending is not None:
            self.values, self._pending = self._pending, None


class _Rows:
    """The held-out rows as every pass reads them.

    A pass is a *partial* function, ``partial(logits, y, sample_weight, total,
    *args, n_jobs=...)``, that returns sums over the rows it is given (block by
    block, in order, see :func:`_map_blocks`), and a ``combine`` that adds two
    such results. Here the partial runs once on all the rows (``combine`` is
    not needed); ``skts._dask`` runs the same partial on each row chunk of a
    Dask array and combines the chunks' results in order: one Dask reduction
    per pass, with the numerics and the search above it shared.

    ``sample_weight`` is normalised (:func:`_normalised_weights`) and
    ``total`` is its sum: every pass sees the same weighted mean.
    """

    # Pieces whose results are combined: every float64 sum follows the
    # blocks in order whatever the pieces (the same bits), but the
    # high-precision evaluator adds one rounding per piece.
    n_parts = 1

    def __init__(self, logits, y, sample_weight=None, n_jobs=None):
        self.logits, self.y = logits, y
        self.sample_weight = _normalised_weights(sample_weight)  # exact
        self.n_samples, self.n_classes = logits.shape
        self.total = _weights_total(self.sample_weight, self.n_samples, self.n_classes)
        self.n_jobs = n_jobs

    def row_maxima(self) -> _RowMaxima | None:
        """The rows' maxima as the fit's reads find them (wide float32 rows
        only, else None)."""
        maxima = self.__dict__.get("_maxima")
        if maxima is None and _RowMaxima.wanted(self.logits):
            maxima = self._maxima = _RowMaxima(self.logits)
        return maxima

    def reduce(self, partial, combine, *args):
        """``partial``'s per-block results over all the rows, folded in block
        order with ``combine``."""
        maxima = self.row_maxima()
        _LOCAL.maxima = maxima
        try:
            parts = partial(
                self.logits,
                self.y,
                self.sample_weight,
                self.total,
                *args,
                n_jobs=self.n_jobs,
            )
        finally:
            _LOCAL.maxima = None
        if maxima is not None:
            maxima.read()
        return _fold(combine, parts)

    def flat(self) -> bool:
        """Whether every row of positive weight has all-equal logits."""
        return _flat(self.logits, self.sample_weight)

    def subsample(self, rows: slice) -> tuple[NDArray, NDArray, NDArray | None]:
        """The rows ``rows`` (a small subsample) as in-memory arrays."""
        w = self.sample_weight
        return (
            # A copy: the rows may be a reader's scratch block (Widened).
            np.array(self.logits[rows], order="C"),
            np.asarray(self.y[rows]),
            None if w is None else np.asarray(w[rows]),
        )


def _add(a, b):
    return a + b


def _nll_part(logits, y, sample_weight, total, temperatures, *, n_jobs=None):
    """:func:`_nll`'s per-block sums (rows of shape ``(n_temperatures,)``)."""
    temperatures = np.asarray(temperatures, dtype=np.float64)
    sums, _ = _kernel_pass(
        logits,
        y,
        sample_weight,
        total,
        1.0 / temperatures,
        temperatures,
        _kernel.NLL,
        n_jobs,
    )
    return sums[:, :, 0]


def _nll(rows: _Rows, temperatures) -> NDArray[np.float64]:
    """:func:`nll_many` on held-out rows (one pass)."""
    temperatures = np.asarray(temperatures, dtype=np.float64).reshape(-1)
    with np.errstate(over="ignore", invalid="ignore"):
        return rows.reduce(_nll_part, _add, temperatures)


def nll_many(
    logits: NDArray,
    y: NDArray,
    temperatures: ArrayLike,
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
    return _nll(_Rows(logits, y, sample_weight, n_jobs), temperatures)


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
    rows = _Rows(logits, y, sample_weight, n_jobs)
    f, g, h = _derivatives(rows, [beta], precision)[0]
    return float(f), float(g), float(h)


def _derivatives_part(
    logits,
    y,
    sample_weight,
    total,
    betas,
    precision,
    second_moment,
    higher=False,
    *,
    n_jobs=None,
):
    """:func:`_derivatives`' per-block sums (rows of shape ``(n_betas, 3)``,
    ``(n_betas, 5)`` with ``higher``)."""
    betas = np.asarray(betas, dtype=np.float64)
    sums, _ = _kernel_pass(
        logits,
        y,
        sample_weight,
        total,
        betas,
        1.0 / betas,
        _kernel.DERIV,
        n_jobs,
        single=precision == "float32",
        second=second_moment,
        higher=higher,
    )
    return sums[:, :, [0, 1, 2, 4, 5]] if higher else sums[:, :, :3]


def _derivatives(
    rows: _Rows,
    betas,
    precision: str = "float64",
    second_moment: bool = True,
    higher: bool = False,
) -> NDArray[np.float64]:
    """``(F, F', F'')`` at each of ``betas`` (rows), in one read of the data;
    with ``higher``, the third and fourth derivatives too (five columns)."""
    betas = [float(b) for b in betas]
    with np.errstate(over="ignore", invalid="ignore"):
        return rows.reduce(
            _derivatives_part, _add, betas, precision, second_moment, higher
        )


def _one_read_bracket(
    x: float, read: _Slopes, n_samples: int, n_classes: int, half: float
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
    eg, span = float(read.bound[0]), read.span * (1.0 + 4.0 * _EPS)
    beta, big = x, abs(g) + eg  # (x is a beta)
    if not (
        math.isfinite(span) and span * beta <= 600.0 and abs(g) > eg and h > 0.0
    ):
        return None
    unit = _EPS / 2.0
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


def _model_step(g1: float, g2: float, g3: float = 0.0, g4: float = 0.0) -> float:
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


def _normalised_weights(sample_weight: NDArray | None) -> NDArray | None:
    """Weights scaled by the power of two that brings the largest into [0.5, 1).

    Scaling by a power of two is exact (the rule sees the very same weighted
    mean), the sum of ``n`` weights is then below ``n`` (no overflow, however
    large the weights), and ``c * w`` gives the same numbers as ``w`` for
    every power of two ``c``. (Weights below ``2**-1022`` times the largest
    become subnormal and may round: a relative change below 1e-300.)
    """
    if sample_weight is None:
        return None
    top = float(np.max(sample_weight))
    if not 0.0 < top < np.inf:
        return sample_weight
    exponent = math.frexp(top)[1]
    if exponent == 0:
        return sample_weight
    return np.ldexp(sample_weight, -exponent)


def _flat(logits: NDArray, sample_weight: NDArray | None) -> bool:
    """Whether every row of positive weight has all-equal logits.

    Then each row's loss is ``log(n_classes)`` for every ``T``, exactly: the
    rule gives the smallest candidate without any floating-point comparison.
    Stops at the first block with a non-constant row (almost free on real data).
    """
    n_samples, n_classes = logits.shape
    if _compiled(logits):
        return not _kernel.varies(logits, sample_weight)
    for rows in _blocks(n_samples, n_classes):
        block = logits[rows]
        varies = block.max(axis=1) != block.min(axis=1)
        if sample_weight is not None:
            varies &= sample_weight[rows] > 0
        if np.any(varies):
            return False
    return True


@dataclass(frozen=True)
class _Slopes:
    """One float64 read at a few ``beta``: ``(F, F', F'')`` per beta (rows of
    ``values``), a rigorous bound on the error of each computed ``F'``, and
    two exact facts about the rows of positive weight."""

    values: NDArray  # shape (n_betas, 3)
    bound: NDArray  # shape (n_betas,)
    # Every label has the largest logit of its row (and some row varies):
    # F' < 0 for every beta, exactly, so the smallest T is the unique answer.
    separable: bool
    # Every label has the smallest logit of its row (and some row varies):
    # F' > 0 for every beta, so the largest T is the unique answer.
    anti_separable: bool
    # The step to the root of F' in beta per beta, to subtract (inf where F''
    # is 0 or unknown): Newton's F'/F'', or (orders 4) from the cubic model
    # of F' (see _model_step).
    steps: NDArray
    orders: NDArray | None = None
    # The largest range (max - min) of a row's logits, when asked for (else
    # inf): F'' changes by at most a factor exp(span |h|) over a step h.
    span: float = math.inf
    # F''' at the first beta, from a higher read (else NaN)
    third: float = math.nan

    def decreasing(self, k: int) -> bool:
        """``F' < 0`` at the k-th beta, proven (hence on every smaller beta too)."""
        return self.separable or self.values[k, 1] < -self.bound[k]

    def increasing(self, k: int) -> bool:
        """``F' > 0`` at the k-th beta, proven (hence on every larger beta too)."""
        return self.anti_separable or self.values[k, 1] > self.bound[k]


def _slopes_part(
    logits,
    y,
    sample_weight,
    total,
    temperatures,
    moments,
    facts,
    higher=False,
    span=False,
    *,
    n_jobs=None,
):
    """:func:`_slopes`' per-block ``(sums, (top, bottom, varies, span))``
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
    spans = np.full(-(-logits.shape[0] // _rows_per_block(logits.shape[1])), np.inf)
    sums, found = _kernel_pass(
        logits,
        y,
        sample_weight,
        total,
        betas[order] if pair else betas,
        ts[order] if pair else ts,
        _kernel.SLOPES,
        n_jobs,
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
    found = found.astype(bool)
    return _Stacked(
        lambda i: (
            sums[i],
            (bool(found[i, 0]), bool(found[i, 1]), bool(found[i, 2]), float(spans[i])),
        ),
        lambda: (
            _in_order(sums),
            (
                bool(found[:, 0].all()),
                bool(found[:, 1].all()),
                bool(found[:, 2].any()),
                float(spans.max()),
            ),
        ),
        sums.shape[0],
    )


def _combine_slopes(a, b):
    (sums_a, (top_a, bottom_a, var_a, span_a)) = a
    (sums_b, (top_b, bottom_b, var_b, span_b)) = b
    return sums_a + sums_b, (
        top_a and top_b,
        bottom_a and bottom_b,
        var_a or var_b,
        max(span_a, span_b),
    )


def _slopes(
    rows: _Rows,
    temperatures,
    *,
    moments: bool = True,
    facts: bool = True,
    higher: bool = False,
    span: bool = False,
) -> _Slopes:
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
    (:func:`_model_step`; no pair is formed then).

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
    per block, as in :func:`_error_bound`.
    """
    temperatures = [float(t) for t in temperatures]
    n_samples, n_classes = rows.n_samples, rows.n_classes
    unit = _EPS / 2.0
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        totals, (all_top, all_bottom, varies, widest) = rows.reduce(
            _slopes_part, _combine_slopes, temperatures, moments, facts, higher, span
        )
        # The weighted sums add at most one relative rounding per row of a
        # block and one per block to the sum of |row slope|.
        rows_per_block = _rows_per_block(n_classes)
        n_blocks = 1 + n_samples // rows_per_block
        accumulate = (min(rows_per_block, n_samples) + n_blocks + 4) * unit
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
            h = _model_step(*(float(v) for v in (*values[i, 1:3], *totals[i, 5:7])))
            if np.isfinite(h) and np.isfinite(steps[i]):
                steps[i], orders[i] = -h, 4
    return _Slopes(
        values,
        bound,
        all_top and varies,
        all_bottom and varies,
        steps,
        orders,
        float(widest) if span else math.inf,
        float(totals[0, 5]) if higher and moments and len(temperatures) else math.nan,
    )


# Digits of the evaluator that decides near-ties (Python's decimal module:
# correctly rounded exp and ln).
_HP_DIGITS = 50


def _exact_losses(
    rows: _Rows, temperatures
) -> tuple[list[decimal.Decimal], decimal.Decimal]:
    """``L(T)`` at each of ``temperatures`` to about 50 significant digits.

    Returns the values and ``rel``, a proven bound on their relative error.

    Notes
    -----
    Per row, ``S = 1 + r`` with ``r`` the sum of the exponentials other than
    one at the row's maximum, and the loss is ``g beta + ln(1 + r)``: every
    term is non-negative and computed to a relative error of a few units of
    the ``_HP_DIGITS``-th digit (Python's decimal rounds ``exp``, ``ln`` and
    the arithmetic correctly), so relative errors add up linearly over the
    terms, the rows and the weights: ``rel = (n_classes + n_samples + 40 + c)
    * 10**(1 - digits)``, ``c`` the number of pieces combined (1 in memory,
    see :class:`_Rows`), below 1e-30 for any input that fits a computer.
    ``ln(1 + r)`` keeps that relative accuracy when ``r`` is tiny (a series
    below 1e-20, 22 more digits above). Exponentials below ``10**-(digits +
    5) / n_classes`` of the row's largest term are skipped. Values below
    about ``10**-(10**18)`` underflow even here (only on data where every
    label wins by a margin near 1e17 times ``T``).

    About 10 microseconds per logit and temperature: only near-ties use it.
    """
    temperatures = [float(t) for t in temperatures]
    totals, weight_sum = rows.reduce(_exact_part, _combine_exact, temperatures)
    ctx = _hp_context()
    values = [ctx.divide(t, weight_sum) for t in totals]
    extra = rows.n_classes + rows.n_samples + 40 + rows.n_parts
    rel = decimal.Decimal(extra).scaleb(1 - _HP_DIGITS)
    return values, rel


def _hp_context() -> decimal.Context:
    return decimal.Context(
        prec=_HP_DIGITS, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN
    )


def _combine_exact(a, b):
    ctx = _hp_context()
    totals = [ctx.add(u, v) for u, v in zip(a[0], b[0], strict=True)]
    return totals, ctx.add(a[1], b[1])


def _exact_part(logits, y, sample_weight, total, temperatures, *, n_jobs=None):
    """:func:`_exact_losses`' weighted sums over some rows and their weight."""
    ctx = _hp_context()
    wide = ctx.copy()
    wide.prec = _HP_DIGITS + 22
    dec = decimal.Decimal
    n_samples, n_classes = logits.shape
    inverse = [ctx.divide(1, dec(float(t))) for t in temperatures]
    margin = dec((_HP_DIGITS + 5) * math.log(10.0) + math.log(n_classes))
    small = dec("1e-20")
    totals = [dec(0)] * len(inverse)
    weight_sum = dec(0)
    for rows in _blocks(n_samples, n_classes):
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


def _decide(
    rows: _Rows, cand: NDArray, values: dict[int, float]
) -> tuple[int, float, bool]:
    """The exact rule among candidates (indices into the ascending ``cand``)
    whose float64 losses are ``values``; every other candidate is known to
    be worse.

    Candidates whose float64 values cannot be told apart from the best one
    within the evaluator's proven error bound are decided by
    :func:`_exact_losses`; values that agree within its (about 1e-47
    relative) bound count as equal, and equal losses go to the smallest
    temperature. Returns the chosen index, its float64 loss, and whether the
    high-precision evaluator ran.
    """
    c64 = _error64_factor(rows)

    def slack(v: float) -> float:
        return c64 * (abs(v) + 1.0)

    best = min(values, key=lambda i: (values[i], i))
    top = values[best]
    if np.isfinite(top):
        tied = [i for i, v in values.items() if v - slack(v) <= top + slack(top)]
    else:  # every loss overflowed float64: only the exact values can tell
        tied = [i for i, v in values.items() if not v < np.inf]
    if len(tied) == 1:
        return best, top, False
    tied.sort()
    exact, rel = _exact_losses(rows, cand[tied])
    low = min(exact)
    # In the evaluator's precision: decimal's default context keeps 28 digits,
    # which would merge losses that differ in the 35th.
    ctx = _hp_context()
    top = ctx.multiply(low, ctx.add(1, rel))
    chosen = next(
        i
        for i, v in zip(tied, exact, strict=True)
        if ctx.multiply(v, ctx.subtract(1, rel)) <= top
    )
    loss = values[chosen]
    if not np.isfinite(loss):
        loss = float(exact[tied.index(chosen)])
    return chosen, loss, True


def _error_bound(loss: float, n_samples: int, n_classes: int) -> float:
    """Generous bound on ``|computed L - exact L|`` for the float64 evaluator.

    Each row costs a handful of roundings relative to its loss plus about
    ``n_classes`` absolute ones in ``log(sum exp)`` (whose argument is >= 1);
    the weighted sum of the non-negative row losses adds at most one relative
    rounding per row of a block (whatever order BLAS uses) and one per block.
    A larger bound only widens the set of candidates evaluated exactly, never
    the answer.
    """
    rows_per_block = _rows_per_block(n_classes)
    n_blocks = 1 + n_samples // rows_per_block
    terms = n_classes + 16 + min(rows_per_block, n_samples) + n_blocks
    return 8.0 * _EPS * terms * (abs(loss) + 1.0)


@dataclass(frozen=True)
class SearchResult:
    """Outcome of a temperature search."""

    temperature: float
    loss: float
    at_boundary: bool
    n_passes: int
    # The loss is the same for every temperature (every row of positive
    # weight has all-equal logits): the smallest one was chosen by the rule.
    flat: bool = False


def _newton_beta(
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


def _grid_search_float64(
    rows: _Rows, temperatures: NDArray, *, start: float = 1.0
) -> SearchResult:
    """The exact rule, deciding every comparison in float64 (the robust path).

    ``temperatures`` are the sorted unique candidates, at least two, and the
    rows are not all constant: :func:`grid_search` has handled those cases.

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
    cand = temperatures  # sorted, unique, at least two (see grid_search)
    beta_lo, beta_hi = 1.0 / cand[-1], 1.0 / cand[0]
    beta, passes = _newton_beta(
        lambda b: tuple(_derivatives(rows, [b])[0]),
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
            values = _nll(rows, cand[todo])
            losses.update(zip(todo, values.tolist(), strict=True))
            passes += 1

    evaluate(list(range(left, right + 1)))
    width = 1
    while True:
        best = min(losses.values())
        margin = 2.0 * _error_bound(best, rows.n_samples, rows.n_classes)
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

    chosen, loss, hp = _decide(rows, cand, losses)
    at_boundary = chosen in (0, cand.shape[0] - 1)
    return SearchResult(float(cand[chosen]), loss, at_boundary, passes + hp)


# Up to this many logits, the reported loss is the float64 value (cheap there).
_EXACT_LOSS_ELEMENTS = 1 << 18


def _error64_factor(rows: _Rows) -> float:
    """``c`` with ``|computed L - exact L| <= c * (|L| + 1)`` for ``_nll``."""
    return _error_bound(0.0, rows.n_samples, rows.n_classes)


def _window_pass32(
    rows: _Rows,
    temperatures: NDArray,
    exact: NDArray | None = None,
    spread: float | None = None,
    deriv_at: int | None = None,
) -> tuple[NDArray, NDArray, NDArray, tuple[float, float] | None]:
    """Float32 estimates of ``L`` at a few temperatures, with rigorous error bounds.

    One read of the data. The exponentials run in float32 (16 per vector
    instruction), their row sums and everything per row in float64. Returns
    ``(estimate, bound)`` with ``|estimate - L| <= bound`` for the exact loss
    ``L``. The float64 reference values (``nll_many``, bit for
    bit) at the temperatures ``exact`` come from the same read, as a third
    array. With ``deriv_at`` (an index into ``temperatures``), the same read
    also gives ``(F', F'')`` in ``beta`` there (float32 exponentials, as
    :func:`derivatives` with ``"float32"``), else ``None``.

    Notes
    -----
    Per row, with ``u_j = beta * d_j`` and ``S = sum_j exp(u_j)``, the float32
    ``S`` has a relative error of at most ``u * (8 + 24 + r + log2 K + 3
    E_p|u|)`` (``u = 2**-24``): 4 ulp per exponential (the kernel's float32
    polynomial: below 4.4u), the row sum (below ``log2 K`` float32 units for
    any ``K`` below 2**29 in float64, plus ``r = 7`` above 32 classes, whose
    rows add float32 runs of at most 8 positive terms per lane first), and
    the roundings of ``d``, ``beta``
    and their product, each amplified by ``|u_j|`` through the exponential.
    ``log S``, in float64, adds far less than the 4 ulp counted. Exponents
    are clamped at -87 (float32 results stay normal): 1.7e-38 per class at
    most, inside the ``4e-38 K`` added per block. The
    bound is doubled for safety. ``E_p|u|`` decreases with ``beta``, so it is
    measured at the smallest ``beta`` of the call and used for all; a caller
    that knows an upper bound ``spread`` of its weighted mean at a smaller
    ``beta`` may pass it instead (the bound is linear in it), which saves a
    sweep.
    """
    temperatures = np.asarray(temperatures, dtype=np.float64)
    exact_t = np.zeros(0) if exact is None else np.asarray(exact, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        est, err, refs, gh = rows.reduce(
            _window_part, _combine_window, temperatures, exact_t, spread, deriv_at
        )
        ref = _fold(_add, refs) if refs else np.zeros(exact_t.shape[0])
    # float64 roundings of the per-row terms and of the accumulation.
    err = err + _error64_factor(rows) * (np.abs(est) + 1.0)
    slope = None if deriv_at is None else (float(gh[0]), float(gh[1]))
    return est, err, ref, slope


def _window_part(
    logits,
    y,
    sample_weight,
    total,
    temperatures,
    exact_t,
    spread,
    deriv_at=None,
    *,
    n_jobs=None,
):
    """:func:`_window_pass32`'s per-block ``(est, err, [float64 values], (F',
    F''))``."""
    order = np.argsort(-temperatures, kind="stable")  # ascending beta: the
    ts = temperatures[order]  # reference comes first
    measure = spread is None or logits.shape[1] == 2  # (binary: always its own)
    sums, _ = _kernel_pass(
        logits,
        y,
        sample_weight,
        total,
        1.0 / ts,
        ts,
        _kernel.WINDOW,
        n_jobs,
        single=True,
        first_spread=0 if measure else -1,
        spread=0.0 if measure else float(spread),
        deriv_at=-1 if deriv_at is None else int(np.flatnonzero(order == deriv_at)[0]),
    )
    est = np.empty(sums.shape[:2])
    err = np.empty(sums.shape[:2])
    est[:, order], err[:, order] = sums[:, :, 0], sums[:, :, 1]
    # (zeros without deriv_at)
    gh = sums[:, :, 2:].sum(axis=1)
    # The float64 values (nll's, bit for bit: the same blocks and kernel).
    refs = (
        _nll_part(logits, y, sample_weight, total, exact_t, n_jobs=n_jobs)
        if exact_t.size
        else None
    )
    assert refs is None or refs.shape[0] == est.shape[0]  # the same blocks
    return _Stacked(
        lambda i: (est[i], err[i], [] if refs is None else [refs[i]], gh[i]),
        lambda: (
            _in_order(est),
            _in_order(err),
            [] if refs is None else [_in_order(refs)],
            _in_order(gh),
        ),
        est.shape[0],
    )


def _combine_window(a, b):
    # The float64 reference values are summed float64 block after float64
    # block (several per float32 block), as _nll sums them: the same bits.
    refs = [*a[2], *b[2]]
    ref = _fold(_add, refs) if refs else None
    return a[0] + b[0], a[1] + b[1], [] if ref is None else [ref], a[3] + b[3]


def _spacing(cand: NDArray, beta: float) -> float:
    """The log-spacing of the sorted candidates ``cand`` around ``1/beta``."""
    if cand.shape[0] < 2:
        return 0.0
    j = min(max(int(np.searchsorted(cand, 1.0 / beta)), 1), cand.shape[0] - 1)
    return math.log(cand[j] / cand[j - 1])


def _float32_range(beta_lo: float, beta_hi: float) -> bool:
    """Whether the float32 passes (and their error bounds) apply to every
    ``beta`` in ``[beta_lo, beta_hi]``: ``beta`` and ``beta * d`` must stay far
    from float32 underflow and overflow (``d`` is clipped at -3.4e38, which
    changes nothing once ``beta >= 1e-30``: both exponentials are 0)."""
    return 1e-30 <= beta_lo and beta_hi <= 1e30


def _warm_start(
    data: _Rows, lo: float, hi: float, start: float
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
    m = min(n_samples, max(256, min((1 << 20) // n_classes, 1 << 16)))
    step = max(1, n_samples // m)
    if type(data) is _Rows and _compiled(data.logits[: step * m : step]):
        # The data itself, or a view of every step-th row: no copy.
        rows = slice(0, step * m, step)
        sub, sub_y = data.logits[rows], data.y[rows]
        sub_w = None if data.sample_weight is None else data.sample_weight[rows]
    else:
        sub, sub_y, sub_w = data.subsample(slice(0, step * m, step))
        if not _compiled(sub):  # (e.g. a device or Dask subsample)
            dtype = np.float64 if sub.dtype == np.float64 else np.float32
            sub = np.ascontiguousarray(sub, dtype=dtype)
    if sub_w is not None and not sub_w.sum() > 0:
        sub_w = None
    whole = sub.shape[0] >= n_samples
    # Newton first on every k-th row of the sample (about 2**14 values, at
    # least 64 rows) to 1%, then one step on every j-th row (about 2**17
    # values), then one on the sample: each step starts within the sampling
    # noise of the one before, where Newton converges quadratically.

    def every(stride: int) -> _Rows:
        small = sub[::stride] if stride > 1 else sub
        small_rows = _Rows(
            small if _compiled(small) else np.ascontiguousarray(small),
            sub_y[::stride],
            None if sub_w is None else sub_w[::stride],
        )
        if small_rows.sample_weight is not None and not small_rows.total > 0:
            small_rows = _Rows(small_rows.logits, small_rows.y)
        return small_rows

    stride = max(1, min(sub.shape[0] // 64, sub.shape[0] * n_classes >> 17))
    tiny_stride = max(1, min(sub.shape[0] // 64, sub.shape[0] * n_classes >> 14))
    small_rows = every(stride)
    sample = _Rows(sub, sub_y, sub_w)
    found: list[int] = []

    def moments(
        rows: _Rows, seen: dict, want_facts: bool = True, higher: bool = False
    ):
        """``deriv(beta)`` on ``rows``; with ``want_facts``, its first read also
        records which end the rows point to (in ``found``); with ``higher``,
        ``seen`` also gets the third and fourth derivatives (last)."""

        def deriv(b: float):
            if b in seen:
                return tuple(seen[b][:3])
            # (a read of all the data records its row maxima for the fit)
            maxima = rows.row_maxima() if rows is data else None
            _LOCAL.maxima = maxima
            try:
                sums, facts = _kernel_pass(
                    rows.logits,
                    rows.y,
                    rows.sample_weight,
                    rows.total,
                    [b],
                    [1.0 / b],
                    _kernel.DERIV,
                    None,
                    single=True,
                    facts=want_facts and not found,
                    higher=higher,
                )
            finally:
                _LOCAL.maxima = None
            if maxima is not None:
                maxima.read()
            if facts is not None:
                top, bottom = bool(np.all(facts[:, 0])), bool(np.all(facts[:, 1]))
                found.append(1 if top else -1 if bottom else 0)
            seen[b] = [float(v) for v in _fold(_add, sums[:, 0, :])]
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
            beta0, _ = _newton_beta(tiny, lo, hi, beta0, rtol=3e-2)
        else:
            beta0, _ = _newton_beta(moments(sample, {}), lo, hi, beta0, rtol=1e-2)
        seen: dict = {}
        # (the data itself when it can be read in place: the same values, and
        # its row maxima are then known to the fit's later reads)
        rows = data if type(data) is _Rows and _compiled(data.logits) else sample
        moments(rows, seen, higher=True)(beta0)
        edge = found[0]
        if edge:
            return (hi if edge == 1 else lo), np.inf, np.nan, edge
        _, g, h, _, g3, g4 = seen[beta0]
        step = _model_step(g, h, g3, g4)
        beta = min(max(beta0 + step, lo), hi) if np.isfinite(step) else beta0
        # (se 0; the curvature slot carries the last step's relative size)
        return beta, 0.0, abs(beta - beta0) / beta, edge
    seen_small: dict = {}
    deriv = moments(small_rows, seen_small)
    if tiny_stride > stride:
        # (the exact facts come from the first read of small_rows below)
        tiny = moments(every(tiny_stride), {}, want_facts=False)
        beta0, _ = _newton_beta(tiny, lo, hi, beta0, rtol=1e-2)
    _, g, h = deriv(beta0)
    edge = found[0]
    if edge:
        # The subsample's own minimum is at that end; Newton would only crawl
        # there (the derivatives decay exponentially on separable rows).
        return (hi if edge == 1 else lo), np.inf, np.nan, edge
    if tiny_stride > stride:
        beta = beta0
        if np.isfinite(g) and np.isfinite(h) and h > 0:
            beta = min(max(beta0 - g / h, lo), hi)
    else:
        beta, _ = _newton_beta(deriv, lo, hi, beta0, rtol=1e-2)
    # Then one Newton step on the whole sample, not evaluated: from within
    # 1%, Newton's quadratic convergence leaves about 1e-4, a hundredth of the
    # default grid's spacing.
    seen = seen_small if stride == 1 else {}
    _, g, h = moments(sample, seen)(beta)
    at = beta
    if np.isfinite(g) and np.isfinite(h) and h > 0:
        beta = min(max(beta - g / h, lo), hi)
    # Standard error of the root of the mean gradient: sd(g_i) / (sqrt(m) F'').
    _, mean_g, curvature, mean_g2 = seen[at]
    sd = math.sqrt(max(mean_g2 - mean_g * mean_g, 0.0))
    if not curvature > 0 or not np.isfinite(sd):
        return beta, np.inf, curvature, edge
    return beta, sd / (math.sqrt(sub.shape[0]) * curvature), curvature, edge


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
    (see :func:`_grid_search`)."""
    rows = _Rows(logits, y, sample_weight, n_jobs)
    return _grid_search(rows, temperatures, start=start)


def _grid_search(
    rows: _Rows, temperatures: NDArray, *, start: float = 1.0
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
    n_samples = rows.n_samples
    n_cand = cand.shape[0]
    if n_cand == 1 or rows.flat():
        # One candidate, or L(T) = log(n_classes) exactly for every T: the rule
        # gives the smallest candidate without any floating-point comparison.
        loss = float(_nll(rows, cand[:1])[0])
        return SearchResult(float(cand[0]), loss, n_cand > 1, 1, flat=n_cand > 1)

    beta_lo, beta_hi = 1.0 / cand[-1], 1.0 / cand[0]
    if not _float32_range(beta_lo, beta_hi):
        return _grid_search_float64(rows, cand, start=start)
    beta0, se, h, edge = _warm_start(rows, beta_lo, beta_hi, start)
    passes = 0
    beta = beta0
    spread_beta = spread = None
    newton_error = 0.0  # relative, of a float32 Newton step on all the data
    fused = False  # whether the first window reads the derivatives too
    newton_from = None
    if edge:
        # Every subsample label has its row's largest (smallest) logit: read
        # the loss at the matching end and the exact facts of every row. If
        # all the data are like that, the answer is proven without any
        # floating-point comparison.
        t = cand[0] if edge == 1 else cand[-1]
        facts = _slopes(rows, [t], moments=False)
        passes += 1
        if facts.separable if edge == 1 else facts.anti_separable:
            return SearchResult(float(t), float(facts.values[0, 0]), True, passes)
    near_hi = edge != -1 and not beta0 + 4.0 * se < beta_hi
    near_lo = edge != 1 and not beta0 - 4.0 * se > beta_lo
    if near_hi or near_lo:
        # The subsample puts the minimum at (or near) an end of the range. By
        # convexity one proven sign of F' at that end settles it: F'(beta_hi)
        # < 0 means F decreases on the whole range, so the smallest candidate
        # is the unique minimiser (and symmetrically at beta_lo). One read.
        ends = [t for t, near in ((cand[0], near_hi), (cand[-1], near_lo)) if near]
        check = _slopes(rows, ends)
        passes += 1
        for k, t in enumerate(ends):
            if t == cand[0] and check.decreasing(k):
                return SearchResult(float(t), float(check.values[k, 0]), True, passes)
            if t == cand[-1] and check.increasing(k):
                return SearchResult(float(t), float(check.values[k, 0]), True, passes)
        if check.separable or check.anti_separable:
            # Proven, but the loss was read at the other end only.
            t = cand[0] if check.separable else cand[-1]
            loss = float(_nll(rows, [t])[0])
            return SearchResult(float(t), loss, True, passes + 1)
        # Not settled: one float64 Newton step from the end nearer the
        # subsample's answer replaces the float32 gradient pass below.
        k = 0 if near_hi else len(ends) - 1
        end_beta = 1.0 / ends[k]
        beta = end_beta
        if np.isfinite(check.steps[k]):
            beta = min(max(end_beta - check.steps[k], beta_lo), beta_hi)
        se = 0.0
    elif not 3.0 * se <= 0.01 * beta0 and se <= _spacing(cand, beta0) * beta0:
        # The subsample leaves the minimum uncertain by a grid step or so (one
        # standard error): a window leaning towards its answer usually holds
        # it. That window also reads F' and F'' at its middle: if it settles
        # nothing, a float32 Newton step from there on all the data places the
        # next one (below).
        fused = True
    elif not 3.0 * se <= 0.01 * beta0:
        # Further off: one full float32 Newton step from the subsample's
        # answer before looking at candidates. The gradient needs all the
        # data; the curvature, a smooth average, comes from the subsample.
        _, g, spread = _derivatives(rows, [beta0], "float32", second_moment=False)[0]
        passes += 1
        # The weighted mean of E_p[-d] at beta0 bounds its value at any larger
        # beta (E_p[-d] falls as beta grows); padded for the float32 rounding
        # of the pass that measured it.
        spread_beta, spread = beta0, spread * 1.001 + 1e-12
        if np.isfinite(g) and np.isfinite(h) and h > 0:
            reach = 4.0 * se if np.isfinite(se) else np.inf
            beta = min(
                max(beta0 - g / h, beta0 - reach, beta_lo), beta0 + reach, beta_hi
            )
            # Newton's error after a step is about the step squared (times a
            # curvature ratio, a few units on real data).
            newton_error = 3.0 * ((beta - beta0) / beta) ** 2

    # The candidate nearest to 1/beta (in log T) is the likely answer; look at
    # it and its neighbours: one on each side, more when the Newton step may
    # have missed it by more than a grid step (a wider first window costs
    # less than a second pass).
    def around(beta: float, newton_error: float, lean: bool = False):
        """The candidate nearest to 1/beta, and the window's ends: ``half``
        neighbours on each side, one more on the side beta leans to."""
        j = int(np.searchsorted(cand, 1.0 / beta))  # cand[j - 1] < 1/beta <= cand[j]
        below = j < n_cand  # 1/beta at or below cand[j]: it leans to j - 1
        if 0 < j < n_cand and math.log(cand[j] * beta) > -math.log(cand[j - 1] * beta):
            j, below = j - 1, False
        j = min(j, n_cand - 1)
        half = 1
        if newton_error > 0.0 and n_cand > 2:
            a, b = max(j - 1, 0), min(j + 1, n_cand - 1)
            spacing = math.log(cand[b] / cand[a]) / (b - a)
            half = int(min(3, max(1, math.ceil(newton_error / spacing))))
        left_half = half + (lean and below)
        right_half = half + (lean and not below)
        return j, max(j - left_half, 0), min(j + right_half, n_cand - 1)

    # A window from the subsample alone leans: any minimiser within half a
    # candidate spacing of its answer then lies strictly inside.
    j, lo, hi = around(beta, newton_error, lean=fused)
    if newton_error >= 0.1 * _spacing(cand, beta):
        # After a float32 Newton step of some size, one more candidate on the
        # side of larger beta (smaller T): F'' usually falls as beta grows
        # (the forecasts sharpen), and Newton then stops short of the root
        # whichever side it starts from. A candidate costs less than a read.
        lo = max(lo - 1, 0)

    c64 = _error64_factor(rows)
    est: dict[int, float] = {}
    err: dict[int, float] = {}
    exact: dict[int, float] = {}
    guess = j
    # Small inputs report the float64 loss at the answer (evaluated with the
    # window); larger ones the float32 estimate, within its proven bound.
    want_exact = n_samples * rows.n_classes <= _EXACT_LOSS_ELEMENTS
    grow = 1
    for _ in range(10):
        todo = [i for i in range(lo, hi + 1) if i not in est]
        if todo:
            extra = [guess] if want_exact and guess not in exact else []
            usable = spread_beta is not None and 1.0 / cand[todo].max() >= spread_beta
            e, b, r, slope = _window_pass32(
                rows,
                cand[todo],
                exact=cand[extra],
                spread=spread if usable else None,
                deriv_at=todo.index(j) if fused and j in todo else None,
            )
            est.update(zip(todo, e.tolist(), strict=True))
            err.update(zip(todo, b.tolist(), strict=True))
            exact.update(zip(extra, r.tolist(), strict=True))
            passes += 1
            newton_from = None if slope is None else (1.0 / cand[j], *slope)
            fused = False
        if not all(np.isfinite(est[i]) and np.isfinite(err[i]) for i in est):
            break
        window = range(lo, hi + 1)
        best = min(window, key=lambda i: (est[i], i))
        upper = est[best] + err[best]
        upper += c64 * (abs(upper) + 1.0)  # bound on the float64 value at best

        def lower(i: int) -> float:
            low = est[i] - err[i]
            return low - c64 * (abs(low) + 1.0)  # bound on the float64 value at i

        left_ok = lo == 0 or (lo != best and lower(lo) > upper)
        right_ok = hi == n_cand - 1 or (hi != best and lower(hi) > upper)
        if left_ok and right_ok:
            close = [i for i in window if i == best or lower(i) <= upper]
            if len(close) == 1 and not want_exact:
                return SearchResult(
                    float(cand[best]), est[best], best in (0, n_cand - 1), passes
                )
            todo = [i for i in close if i not in exact]
            if todo:
                # Too close for float32 (or not yet known): the float64 values.
                values = _nll(rows, cand[todo])
                exact.update(zip(todo, values.tolist(), strict=True))
                passes += 1
            chosen, top, hp = _decide(rows, cand, {i: exact[i] for i in close})
            return SearchResult(
                float(cand[chosen]), top, chosen in (0, n_cand - 1), passes + hp
            )
        guess = best
        if newton_from is not None:
            # The first window did not settle it: a float32 Newton step on all
            # the data from its middle (within the subsample's reach) places
            # the next, with the candidates already known reused.
            at, g, h = newton_from
            newton_from = None
            if np.isfinite(g) and np.isfinite(h) and h > 0:
                reach = 4.0 * se if np.isfinite(se) else np.inf
                beta = min(
                    max(at - g / h, beta0 - reach, beta_lo), beta0 + reach, beta_hi
                )
                j, lo, hi = around(beta, 3.0 * ((beta - at) / beta) ** 2)
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
    result = _grid_search_float64(rows, cand, start=beta)
    return SearchResult(
        result.temperature, result.loss, result.at_boundary, passes + result.n_passes
    )


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
    :func:`_solve_continuous`)."""
    rows = _Rows(logits, y, sample_weight, n_jobs)
    return _solve_continuous(rows, t_min, t_max, tol=tol, start=start)


def _solve_continuous(
    rows: _Rows,
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
    with it, :func:`_model_step`): from 3% off it lands within about 2e-6, and
    from there Newton lands within tau. Each
    read adds, beside Newton's points, equally spaced points in any gap
    (between the bracket ends and the points) wider than ``tau * 4**(r - 1)``,
    ``r`` the reads left (at most three per gap), so whatever the signs the
    bracket is at most ``tau`` wide when the budget is spent; on smooth data
    that costs no point until the budget is nearly spent. A read of one
    point near the root usually ends it: a bracket of width 0.9 tau about
    its target is proven from that read alone
    (:func:`_one_read_bracket`: the rows' largest range bounds how fast
    ``F''`` can change). Where it is not, Newton steps (two points
    straddling the target, in one read, once the step's error is below tau;
    read as a pair, they cost little more than one) end it after one float64
    read more. The search also stops at a point where
    ``|F'|`` is within its proven rounding bound: float64 cannot tell on which
    side of it the minimiser lies.
    """
    lo, hi = 1.0 / t_max, 1.0 / t_min
    width = hi - lo
    if width <= 0.0 or rows.flat():
        # One point, or the same loss everywhere: the lower end of T.
        loss = float(_nll(rows, [t_min])[0])
        return SearchResult(float(t_min), loss, width > 0, 1, flat=width > 0)
    steer = _float32_range(lo, hi)
    edge = 0
    if steer:
        x, se, last, edge = _warm_start(rows, lo, hi, start)
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

    def read(points: list[float], higher: bool = False) -> _Slopes:
        nonlocal passes, a, b, neg_seen, pos_seen, settled
        ends = lo in points or hi in points  # the exact facts matter at the ends
        one = len(points) == 1 and not ends  # (its span: see _one_read_bracket)
        res = _slopes(
            rows, [1.0 / p for p in points], facts=ends, higher=higher, span=one
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
        facts = _slopes(rows, [1.0 / end], moments=False)
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
        # Newton from the end nearer the subsample's answer.
        p = hi if abs(x - hi) < abs(x - lo) else lo
        step = info[p][2]
        x = min(max(p - step, lo), hi) if np.isfinite(step) else x
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
        _, g, h, g3, g4 = _derivatives(rows, [x], "float32", higher=True)[0]
        passes += 1
        step = _model_step(g, h, g3, g4)
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
            elif (
                step * step <= tau * p
                if order == 2
                else 30.0 * step**4 <= tau * p**3
            ):
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
            found = _one_read_bracket(
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
        loss = float(_nll(rows, [temperature])[0])
        passes += 1
    return SearchResult(float(temperature), float(loss), at_boundary, passes)


def warn_boundary(result: SearchResult, low: float, high: float) -> None:
    """Emit :class:`BoundaryTemperatureWarning` for a boundary choice."""
    if result.flat:
        message = (
            f"The validation loss is the same for every temperature (every row "
            f"of positive weight has all-equal logits): the rule chose the "
            f"smallest one, {result.temperature!r}."
        )
    else:
        low_end = result.temperature == low
        side = "smallest" if low_end else "largest"
        hint = "T -> 0" if low_end else "T -> infinity"
        message = (
            f"The chosen temperature {result.temperature!r} is the {side} "
            f"candidate (range [{low!r}, {high!r}]); the validation loss may keep "
            f"decreasing beyond it: the data may prefer {hint}."
        )
    warnings.warn(message, BoundaryTemperatureWarning, stacklevel=3)


def log_softmax(
    logits: NDArray, temperature: float, *, dtype=np.float64, n_jobs: int | None = None
) -> NDArray:
    """``log softmax(logits / T)`` row by row, in blocks, without overflow.

    ``dtype`` is the output's (float64 or float32; the arithmetic is float64
    either way). NumPy float32/float64 arrays are read by the compiled kernel.
    """
    return _softmax(logits, temperature, True, dtype, n_jobs)


def softmax(
    logits: NDArray, temperature: float, *, dtype=np.float64, n_jobs: int | None = None
) -> NDArray:
    """``softmax(logits / T)`` row by row, in blocks, without overflow (see
    :func:`log_softmax`)."""
    return _softmax(logits, temperature, False, dtype, n_jobs)


def _softmax(logits, temperature: float, log: bool, dtype, n_jobs) -> NDArray:
    n_samples, n_classes = logits.shape
    threads = _kernel_threads(n_jobs, n_samples * n_classes)
    if _kernel.supports(logits, strided=False):
        return _kernel.softmax(logits, 1.0 / temperature, log, dtype, threads)
    # Other arrays (float16 widened on the fly, strided views): block by block.
    out = np.empty((n_samples, n_classes), dtype=dtype)
    for rows in _blocks(n_samples, n_classes):
        z = logits[rows]
        z = np.ascontiguousarray(
            z, dtype=np.float64 if z.dtype == np.float64 else np.float32
        )
        out[rows] = _kernel.softmax(z, 1.0 / temperature, log, dtype, threads)
    return out
