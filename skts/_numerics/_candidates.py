"""The candidate temperatures: geometric grids and the default one."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

__all__ = ["MAX_GRID_POINTS", "default_temperatures", "geometric_grid"]

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
