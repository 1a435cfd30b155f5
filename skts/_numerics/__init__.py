"""The numerics of temperature scaling: the searches in Python, the reads of
the data behind one named contract, the per-block pass compiled.

Everything here works on validated arrays (``skts._validation`` checks them):
``logits`` of shape ``(n_samples, n_classes)`` (float32 or float64, any
finite values), ``y`` integer class indices, ``sample_weight`` non-negative
floats or ``None``, and candidate temperatures that are finite and positive.
It imports NumPy, ``decimal`` and the kernel only (joblib for the CPU count).

The rule is

    L(T)  = -(1/n) sum_i log softmax(z_i / T)[y_i]      (weighted mean with weights)
    T*    = min argmin_{T in candidates} L(T)

and ``-log p_T(y|z)`` is always computed as ``(m - z_y)/T + log sum_j exp((z_j - m)/T)``
with ``m = max_j z_j``: the largest exponent is exactly 0, so nothing overflows.
``F(beta) = L(1/beta)`` is convex, so the sorted grid is unimodal and a search
needs a handful of reads, each decided by proven error bounds (50 digits for
near-ties): threads, blocks, chunks and backends never change ``T``.

How it fits together (imports point down)::

      search_grid (_grid)         search_continuous (_continuous)
              \\                      /
               warm_start, one_read_bracket (_steer)
                       |        model_step, newton_* (_steps)
                       v
      Rows (_passes): the named reads --------------------------------.
        nll  derivatives  slopes  window  exact  flat  subsample       |
        each = fold(the read's *_parts, in block order) + its finish   |
          |                         |                          |       |
      Rows: the kernel        XpRows (skts._array_api)   DaskRows (skts._dask)
      (skts._kernel: one      the parts in the array's   each part one Dask task
       entry point per read)  namespace, on its device   per piece: Rows.piece
          |                                                            |
      _blocks: block geometry, summation order, weights, error bounds -'
      _threads: n_jobs -> threads     _exact: the 50-digit evaluator, decide

The search calls ``rows.slopes(...)`` the way scikit-learn's solvers call
``loss.gradient_hessian(...)``: no backend has a search of its own, and a
backend is a ``Rows`` subclass overriding the ``*_parts`` methods (the
per-block sums of each read), so every formula after the blocks' sums is
shared. Backends that cut rows at the same block boundaries give the same
bits. ``docs/developers.md`` ("How skts works") tells the same story at
more length.
"""

from skts._numerics._blocks import (
    BIG,
    BLOCK_ELEMENTS,
    EPS,
    EXP_FLOOR,
    F32_BLOCKS,
    FLUSH,
    FLUSH_X,
    Stacked,
    add,
    blocks,
    fold,
    normalised_weights,
    rows_per_block,
    scaled_weights,
    scratch,
    slope_error,
    weight_exponent,
    weight_part,
    weights_total,
)
from skts._numerics._candidates import (
    MAX_GRID_POINTS,
    default_temperatures,
    geometric_grid,
)
from skts._numerics._compiled import kernel
from skts._numerics._continuous import search_continuous, solve_continuous
from skts._numerics._exact import HP_DIGITS, MAX_DIGITS, exact_part, exact_rule
from skts._numerics._grid import grid_search, search_grid
from skts._numerics._passes import (
    Rows,
    Slopes,
    Unchecked,
    Window,
    derivatives,
    nll,
    nll_many,
)
from skts._numerics._result import (
    BoundaryTemperatureWarning,
    SearchResult,
    warn_boundary,
)
from skts._numerics._softmax import log_softmax, softmax
from skts._numerics._steer import one_read_bracket, subsample_rows
from skts._numerics._steps import model_step
from skts._numerics._threads import cpu_count, kernel_threads

__all__ = [
    "BIG",
    "BLOCK_ELEMENTS",
    "EPS",
    "EXP_FLOOR",
    "F32_BLOCKS",
    "FLUSH",
    "FLUSH_X",
    "HP_DIGITS",
    "MAX_DIGITS",
    "MAX_GRID_POINTS",
    "BoundaryTemperatureWarning",
    "Rows",
    "SearchResult",
    "Slopes",
    "Stacked",
    "Unchecked",
    "Window",
    "add",
    "blocks",
    "cpu_count",
    "default_temperatures",
    "derivatives",
    "exact_part",
    "exact_rule",
    "fold",
    "geometric_grid",
    "grid_search",
    "kernel",
    "kernel_threads",
    "log_softmax",
    "model_step",
    "nll",
    "nll_many",
    "normalised_weights",
    "one_read_bracket",
    "rows_per_block",
    "scaled_weights",
    "scratch",
    "search_continuous",
    "search_grid",
    "slope_error",
    "softmax",
    "solve_continuous",
    "subsample_rows",
    "warn_boundary",
    "weight_exponent",
    "weight_part",
    "weights_total",
]
