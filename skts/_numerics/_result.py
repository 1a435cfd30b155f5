"""What a search returns, and the warning for an answer at the range's end."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

__all__ = ["BoundaryTemperatureWarning", "SearchResult", "warn_boundary"]


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
