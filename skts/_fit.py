"""The one backend dispatch, and fitting a temperature on the rows it gives.

:func:`rows_for` is the only place that decides where the reads of a fit run:
a Dask array gives :class:`skts._dask.DaskRows` (each read one Dask
reduction), an array on a device under ``array_api_dispatch`` gives
:class:`skts._array_api.XpRows` (the reads in its namespace), anything else
is checked and read in host memory by :class:`skts._numerics.Rows` (the
compiled kernel). :func:`fit_temperature` runs a solver on any of them;
:func:`checked_logits` and :func:`apply_temperature` do the same dispatch for
predictions. The estimators and the command line call these.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import NDArray

from skts._array_api import XpRows, namespace, widen, xp_log_softmax, xp_softmax
from skts._numerics import (
    Rows,
    SearchResult,
    blocks,
    log_softmax,
    search_continuous,
    search_grid,
    softmax,
    warn_boundary,
)
from skts._validation import (
    check_class_indices,
    check_device_logits,
    check_logits,
    check_weights,
    device_namespace,
    host_labels,
    is_dask_array,
)

__all__ = [
    "apply_temperature",
    "checked_logits",
    "fit_temperature",
    "host_rows",
    "rows_for",
]


def rows_for(logits, y, sample_weight=None, *, n_jobs=None) -> Rows:
    """Held-out rows, checked, in the backend their array calls for."""
    if is_dask_array(logits):
        from skts._dask import DaskRows

        return DaskRows(logits, y, sample_weight)
    xp = device_namespace(logits)
    if xp is not None:
        logits = check_device_logits(logits, xp)
        y = check_class_indices(host_labels(y, xp), logits.shape)
        sample_weight = check_weights(host_labels(sample_weight, xp), logits.shape[0])
        return XpRows(logits, y, sample_weight, xp, logits.device)
    logits = check_logits(logits, warn_probabilities=True, stacklevel=5)
    y = check_class_indices(host_labels(y, None), logits.shape)
    sample_weight = check_weights(host_labels(sample_weight, None), logits.shape[0])
    return Rows(logits, y, sample_weight, n_jobs)


def host_rows(logits, y, sample_weight=None, *, n_jobs=None) -> Rows:
    """Rows of host arrays that are already checked (``check_logits``,
    ``check_class_indices``, ``check_weights``), or a reader of such rows
    (anything with ``shape``, ``dtype`` and row slices)."""
    return Rows(logits, y, sample_weight, n_jobs)


def fit_temperature(
    rows: Rows,
    temperatures: NDArray,
    *,
    solver: Literal["grid", "continuous"] = "grid",
    tol: float = 1e-10,
) -> SearchResult:
    """Run the chosen solver on held-out rows (any backend); warn on a
    boundary answer. ``temperatures``: checked candidates
    (:func:`skts._validation.check_temperatures`)."""
    low, high = float(temperatures.min()), float(temperatures.max())
    if solver == "grid":
        result = search_grid(rows, temperatures)
    else:
        result = search_continuous(rows, low, high, tol=tol)
    if result.at_boundary:
        warn_boundary(result, low, high)
    return result


def checked_logits(logits):
    """Logits to predict on, checked where they live: ``(logits, xp)``, ``xp``
    the array-API namespace to compute in (None: NumPy or Dask)."""
    xp, _ = namespace(logits)
    if is_dask_array(logits):
        from skts._dask import as_logits

        return as_logits(logits), None
    if xp is not None:
        return check_device_logits(logits, xp), xp
    return check_logits(logits), None


def apply_temperature(
    logits,
    temperature: float,
    output: Literal["logits", "proba", "log_proba"],
    *,
    xp=None,
    dtype=np.float64,
    n_jobs=None,
):
    """``logits / T``, ``softmax(logits / T)`` or its logarithm, for checked
    logits (:func:`checked_logits`), in their own space: a lazy Dask array
    for a Dask array, the namespace and device of an array-API array, else
    NumPy as ``dtype``."""
    if xp is not None:
        if output == "logits":
            return widen(logits, xp) / temperature
        return (xp_log_softmax if output == "log_proba" else xp_softmax)(
            logits, xp, temperature
        )
    if is_dask_array(logits):
        if output == "logits":
            return logits.astype(np.float64) / temperature
        from skts._dask import log_softmax_lazy, softmax_lazy

        lazy = log_softmax_lazy if output == "log_proba" else softmax_lazy
        return lazy(logits, temperature)
    if output == "logits":
        out = np.empty(logits.shape, dtype=dtype)
        with np.errstate(over="ignore"):
            for rows in blocks(*logits.shape):
                block = np.asarray(logits[rows], dtype=np.float64)
                out[rows] = block / temperature
        return out
    fn = log_softmax if output == "log_proba" else softmax
    return fn(logits, temperature, dtype=dtype, n_jobs=n_jobs)
