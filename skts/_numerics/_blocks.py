"""Block geometry, the canonical summation order, weight normalisation and
the float64 evaluator's error bound: what every backend must agree on to
give the same bits (and the bound on the float32 window's ``F''``).

The block size is the kernel's (``skts._kernel.BLOCK_ELEMENTS``, defined
there only): a block holds about 64k logits, its rows depend on the shape
only, and every sum adds the blocks' sums in block order, so the answer
does not depend on threads, chunks or the backend.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator

import numpy as np
from numpy.typing import NDArray

from skts._numerics._compiled import kernel

__all__ = [
    "BIG",
    "BLOCK_ELEMENTS",
    "EPS",
    "EXP_FLOOR",
    "F32_BLOCKS",
    "FLUSH",
    "FLUSH_X",
    "Stacked",
    "add",
    "blocks",
    "curvature_bound",
    "error64_factor",
    "error_bound",
    "fold",
    "in_order",
    "normalised_weights",
    "rows_per_block",
    "scaled_weights",
    "scratch",
    "slope_error",
    "weight_exponent",
    "weight_part",
    "weights_total",
]

BLOCK_ELEMENTS: int = kernel.BLOCK_ELEMENTS
# Float32 passes, and the pieces of the Dask backend, group this many blocks.
F32_BLOCKS = 4
EPS = float(np.finfo(np.float64).eps)
BIG = float(np.finfo(np.float64).max)
# Exponents are clamped at -700 (see Rows.slopes): each clamped exponential
# is off by at most exp(-700) < 1e-304, and x exp(x) by at most 2 * 700 of
# that.
EXP_FLOOR = -700.0
FLUSH = 1e-304
FLUSH_X = 2.0 * 700.0 * FLUSH


def rows_per_block(n_classes: int) -> int:
    """Rows of one block (the kernel's formula, read from the kernel)."""
    return kernel.rows_per_block(n_classes)


def blocks(n_samples: int, n_classes: int, factor: int = 1) -> Iterator[slice]:
    """The row blocks, in order (``factor`` blocks per slice, aligned).

    The block size depends on the shape only, so the summation order (and
    hence every bit of the result) is the same whatever the caller. Some
    backends group ``F32_BLOCKS`` blocks (aligned with them) per task.
    """
    step = rows_per_block(n_classes) * factor
    for start in range(0, n_samples, step):
        yield slice(start, min(start + step, n_samples))


def add(a, b):
    return a + b


def fold(combine, parts):
    """``combine`` over ``parts`` from the first, in order: the canonical
    summation order of every pass (``0 + a == a``, so starting from the first
    part gives the bits of starting from zero).

    ``parts`` stacked in an array (``add``) or in :class:`Stacked` are
    folded without a Python step per block, with the same bits."""
    if isinstance(parts, Stacked):
        return parts.fold()
    if isinstance(parts, np.ndarray) and combine is add:
        return in_order(parts)
    it = iter(parts)
    acc = next(it)
    for part in it:
        acc = combine(acc, part)
    return acc


def in_order(a: NDArray) -> NDArray:
    """``a[0] + a[1] + ...`` from the first, one addition after another:
    :func:`fold` with ``add`` over the first axis, the same bits (a
    cumulative sum adds in order; ``np.sum`` would add pairwise)."""
    return a[0] if a.shape[0] == 1 else np.cumsum(a, axis=0)[-1]


class Stacked:
    """One pass's per-block results, stacked along a first (block) axis.

    ``arrays`` hold them (each with the block axis first, or None);
    ``item(arrays, i)`` is block ``i``'s result, what ``combine`` folds (what
    a Dask reduction gathers, chunk after chunk), and ``total(arrays)`` all of
    them folded with :func:`in_order`: the same bits, without a Python step
    per block (there are thousands of blocks when rows are long). Plain
    arrays and module-level functions: it pickles as a few arrays (what a
    Dask task sends back), and :meth:`joined` puts the pieces' results back
    in block order.
    """

    def __init__(self, item, total, arrays: tuple):
        self.item, self.total, self.arrays = item, total, arrays
        self._n = arrays[0].shape[0]

    def __len__(self) -> int:
        return self._n

    def __iter__(self):
        return (self.item(self.arrays, i) for i in range(self._n))

    def fold(self):
        return self.total(self.arrays)

    @classmethod
    def joined(cls, parts: list[Stacked]) -> Stacked:
        """The per-block results of consecutive pieces, in order, as one."""
        first = parts[0]
        arrays = tuple(
            None if a is None else np.concatenate([p.arrays[j] for p in parts])
            for j, a in enumerate(first.arrays)
        )
        return cls(first.item, first.total, arrays)


def weight_exponent(top: float) -> int:
    """The power of two ``e`` with ``top * 2**-e`` in [0.5, 1) (0 when ``top``
    is not positive and finite): the one normalisation of the weights."""
    if not 0.0 < top < np.inf:
        return 0
    return math.frexp(top)[1]


def scaled_weights(sample_weight, exponent: int) -> NDArray:
    """``sample_weight * 2**-exponent``, exactly (element by element)."""
    return np.ldexp(np.asarray(sample_weight, dtype=np.float64), -exponent)


def normalised_weights(sample_weight: NDArray | None) -> NDArray | None:
    """Weights scaled by the power of two that brings the largest into [0.5, 1).

    Scaling by a power of two is exact (the rule sees the very same weighted
    mean), the sum of ``n`` weights is then below ``n`` (no overflow, however
    large the weights), and ``c * w`` gives the same numbers as ``w`` for
    every power of two ``c``. (Weights below ``2**-1022`` times the largest
    become subnormal and may round: a relative change below 1e-300.)
    """
    if sample_weight is None:
        return None
    exponent = weight_exponent(float(np.max(sample_weight)))
    if exponent == 0:
        return sample_weight
    return scaled_weights(sample_weight, exponent)


def weight_part(sample_weight: NDArray, n_classes: int) -> list[float]:
    """Per-block sums of the weights (the blocks of the float32 passes)."""
    n_samples = sample_weight.shape[0]
    return [
        float(np.sum(sample_weight[rows], dtype=np.float64))
        for rows in blocks(n_samples, n_classes, F32_BLOCKS)
    ]


def weights_total(
    sample_weight: NDArray | None, n_samples: int, n_classes: int
) -> float:
    """The sum of the weights, in the canonical order of every pass (per
    float32 block of :func:`blocks`, then block after block), so that any
    backend that follows the blocks gets the same bits."""
    if sample_weight is None:
        return float(n_samples)
    return float(fold(add, weight_part(sample_weight, n_classes)))


def error_bound(loss: float, n_samples: int, n_classes: int) -> float:
    """Generous bound on ``|computed L - exact L|`` for the float64 evaluator.

    Each row costs a handful of roundings relative to its loss plus about
    ``n_classes`` absolute ones in ``log(sum exp)`` (whose argument is >= 1);
    the weighted sum of the non-negative row losses adds at most one relative
    rounding per row of a block (whatever order BLAS uses) and one per block.
    A larger bound only widens the set of candidates evaluated exactly, never
    the answer.
    """
    per_block = rows_per_block(n_classes)
    n_blocks = 1 + n_samples // per_block
    terms = n_classes + 16 + min(per_block, n_samples) + n_blocks
    return 8.0 * EPS * terms * (abs(loss) + 1.0)


def error64_factor(n_samples: int, n_classes: int) -> float:
    """``c`` with ``|computed L - exact L| <= c * (|L| + 1)`` for ``Rows.nll``."""
    return error_bound(0.0, n_samples, n_classes)


def sum_error_factor(n_samples: int, n_classes: int) -> float:
    """``c`` with ``|computed - exact| <= c * sum |v_row|`` for a pass's
    weighted sum of per-row values ``v_row`` (exact per row): at most one
    relative rounding per row of a block and one per block."""
    per_block = rows_per_block(n_classes)
    n_blocks = 1 + n_samples // per_block
    return (min(per_block, n_samples) + n_blocks + 4) * (EPS / 2.0)


def slope_error(gap, m1x, m2x, t: float, n_classes: int):
    """Per row, the proven bound on the float64 error of ``F'`` (the
    formula of :meth:`skts._numerics.Rows.slopes`' Notes): ``gap = m - z_y``,
    ``m1x = E_p[-x]``, ``m2x = E_p[x**2]`` with ``x = d / T``. The kernel
    computes the same expression in C (``skts_block``, mode SLOPES); the
    array-API backend calls this one on device arrays."""
    unit = EPS / 2.0
    return 2.0 * unit * (
        2.0 * gap + (2.0 * n_classes + 12.0) * (m1x * t) + 4.0 * t * (m2x + m1x * m1x)
    ) + n_classes * t * (FLUSH_X + FLUSH * m1x)


_LOCAL = threading.local()


def scratch(name: str, shape: tuple[int, ...], dtype=np.float32) -> NDArray:
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
            max(size, BLOCK_ELEMENTS * F32_BLOCKS), dtype=dtype
        )
    return buf[:size].reshape(shape)


def curvature_bound(h, slope_bounds, temperatures, span: float, n_classes: int):
    """A proven bound on the error of the float32 window's ``F''`` (``h``, in
    ``beta``) at each of ``temperatures``, from the weighted mean of its rows'
    bounds of ``F'`` (``slope_bounds``, each row's ``v`` of
    :meth:`Rows.window`'s Notes) and the rows' largest range ``span``.

    Notes
    -----
    Per row (``d_j = z_j - m``, ``M1 = E_p[-d] <= R``, ``M2 = E_p[d**2]``,
    ``R`` the row's range, at most ``span``), ``F''_row = M2 - M1**2``. Each
    float32 term ``e x**2`` of ``M2``'s sum (``x = beta d``, computed as ``(e
    x) x``) is within ``u (12.4 + 3.01 |x_j|)`` of its value: the
    exponential's 4.4u and its argument's roundings amplified by ``|x_j|``,
    as in ``M1``'s terms, ``x**2``'s twice 3u and two products. The sum adds
    ``c u`` and ``S`` its ``u (8 + r + log2 K + 3 beta M1)``, as for ``M1``,
    and ``E_p |d|**3 <= R M2``; so, doubled, ``|dM2| <= 2 u M2 (slack + 1 +
    6.01 beta R)``, ``slack = 20 + c + r + log2 K`` as in ``v`` (its float64
    roundings inside the 1). Since ``v >= 6.02 u beta M2`` (every term of
    ``v`` is >= 0), ``|dM2| <= v (slack + 1 + 6.01 beta R) / (3.01 beta)``.
    ``|d(M1**2)| <= 2 M1 |dM1| + dM1**2 <= v (2 R + D)`` with ``|dM1| <= v
    <= D = 2 u (R (slack + 3 beta R) + 3.01 beta R**2) + 8 u64 R + K (T 1e-35
    + R 1e-37)`` (``g, M1 <= R``, ``M2 <= R**2``). The clamped exponents
    (below -87) add at most ``K (T**2 1.3e-34 + M2 1.7e-38)`` per row,
    doubled. The mean over the rows: the same with ``v`` its mean, times
    1.001 for the first-order terms left out. Infinite if ``span`` is not
    finite.
    """
    ts = np.asarray(temperatures, dtype=np.float64)
    if not math.isfinite(span):
        return np.full(ts.shape[0], np.inf)
    k = n_classes
    unit, unit64 = 2.0**-24, 2.0**-53
    r = span * (1.0 + 1e-15)
    beta = (1.0 / ts) * (1.0 + 1e-15)
    chain = k if k <= 32 else -(-k // 16)  # (SKTS_TRANSPOSE_MAX, lanes)
    slack = 20.0 + chain + (7.0 if k > 32 else 0.0) + math.log2(max(k, 2))
    d = (
        2.0 * unit * (r * (slack + 3.0 * beta * r) + 3.01 * beta * r * r)
        + 8.0 * unit64 * r
        + k * (ts * 1e-35 + r * 1e-37)
    )
    factor = (slack + 1.0 + 6.01 * beta * r) / (3.01 * beta) + 2.0 * r + d
    clamped = 2.0 * k * (ts * ts * 1.3e-34 + r * r * 1.7e-38)
    return (np.asarray(slope_bounds) * factor + clamped) * 1.001
