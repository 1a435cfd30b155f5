"""The one bootstrap: resamples as multinomial row weights, and percentile
intervals. Every interval skts reports (the report's metrics, the temperatures
by group, the command line's streamed report) is made here."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["percentile_interval", "resample_weights"]


def resample_weights(rng: np.random.RandomState, n: int) -> NDArray[np.float64]:
    """A resample of ``n`` rows with replacement, as row weights (how many
    times each row is drawn): a multinomial reweighting of the rows."""
    return np.bincount(rng.randint(0, n, size=n), minlength=n).astype(np.float64)


def percentile_interval(draws, confidence_level: float) -> tuple[float, float]:
    """The central ``confidence_level`` percentile interval of ``draws``."""
    alpha = (1.0 - confidence_level) / 2.0
    lo, hi = np.quantile(draws, [alpha, 1.0 - alpha])
    return float(lo), float(hi)
