"""What a search returns, the warning for an answer at the range's end, and
what a read of :class:`~skts._numerics._passes.Rows` returns (``slopes``,
``window``) with how its per-block parts fold."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

from numpy.typing import NDArray

from skts._numerics._blocks import add, fold, in_order

__all__ = [
    "BoundaryTemperatureWarning",
    "SearchResult",
    "Slopes",
    "Window",
    "combine_slopes",
    "combine_window",
    "warn_boundary",
]


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


# --- what a read returns ---------------------------------------------------


@dataclass(frozen=True)
class Slopes:
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
    # of F' (see model_step, skts._numerics._steps).
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


@dataclass(frozen=True)
class Window:
    """One float32 read at a few temperatures: ``estimate`` and ``bound`` with
    ``|estimate - L| <= bound`` for the exact loss ``L``, the float64 values
    (``Rows.nll``, bit for bit) at the ``exact`` temperatures, and ``(F',
    F'')`` at ``deriv_at`` (else None), and with ``slopes`` ``F'`` at each
    temperature and a proven bound on its error (else None)."""

    estimate: NDArray
    bound: NDArray
    reference: NDArray
    slope: tuple[float, float] | None
    slopes: tuple[NDArray, NDArray] | None = None
    # With slopes and span: the largest range of a row's logits, and F'' at
    # each temperature with a proven bound on its error (see Rows.window).
    span: float = math.inf
    curvature: tuple[NDArray, NDArray] | None = None

    def __iter__(self):
        return iter((self.estimate, self.bound, self.reference, self.slope))


def combine_slopes(a, b):
    """Two per-block results of ``Rows.slopes_parts`` added (blocks in order)."""
    (sums_a, (top_a, bottom_a, var_a, span_a)) = a
    (sums_b, (top_b, bottom_b, var_b, span_b)) = b
    return sums_a + sums_b, (
        top_a and top_b,
        bottom_a and bottom_b,
        var_a or var_b,
        max(span_a, span_b),
    )


def combine_window(a, b):
    """Two per-block results of ``Rows.window_parts`` added. The float64
    reference values are summed float64 block after float64 block (several
    per float32 block), as ``Rows.nll`` sums them: the same bits."""
    refs = [*a[2], *b[2]]
    ref = fold(add, refs) if refs else None
    return (
        a[0] + b[0],
        a[1] + b[1],
        [] if ref is None else [ref],
        a[3] + b[3],
        max(a[4], b[4]),
    )


def _slopes_item(arrays, i: int):
    """Block ``i``'s result of ``Rows.slopes_parts``, as ``combine_slopes``
    folds it."""
    sums, found, spans = arrays
    facts = (bool(found[i, 0]), bool(found[i, 1]), bool(found[i, 2]))
    return sums[i], (*facts, float(spans[i]))


def _slopes_total(arrays):
    sums, found, spans = arrays
    facts = (bool(found[:, 0].all()), bool(found[:, 1].all()), bool(found[:, 2].any()))
    return in_order(sums), (*facts, float(spans.max()))


def _window_item(arrays, i: int):
    """Block ``i``'s result of ``Rows.window_parts``, as ``combine_window``
    folds it."""
    est, err, refs, gh, spans = arrays
    return est[i], err[i], [] if refs is None else [refs[i]], gh[i], float(spans[i])


def _window_total(arrays):
    est, err, refs, gh, spans = arrays
    ref = [] if refs is None else [in_order(refs)]
    return in_order(est), in_order(err), ref, in_order(gh), float(spans.max())
