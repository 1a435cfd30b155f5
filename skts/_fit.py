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

from functools import partial
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from skts._array_api import XpRows, namespace, widen, xp_log_softmax, xp_softmax
from skts._numerics import (
    Rows,
    SearchResult,
    Unchecked,
    blocks,
    log_softmax,
    search_continuous,
    search_grid,
    softmax,
    warn_boundary,
)
from skts._validation import (
    Layout,
    check_class_indices,
    check_device_layout,
    check_device_logits,
    check_finite,
    check_finite_chunk,
    check_layout,
    check_logits,
    check_weights,
    class_axis_of,
    device_namespace,
    host_labels,
    is_dask_array,
)

__all__ = [
    "apply_temperature",
    "checked_logits",
    "checked_rows",
    "fit_temperature",
    "host_rows",
    "rows_for",
    "rows_of",
]


def rows_for(
    logits, y, sample_weight=None, *, n_jobs=None, class_axis=1, ignore_index=None
) -> Rows:
    """Held-out rows, checked, in the backend their array calls for.

    Logits of shape ``(n, K, d1, ..., dk)`` (classes on ``class_axis``) give
    one row per position, and ``ignore_index`` drops the positions whose
    label it is (:func:`skts._validation.check_layout`): the rows, and so the
    answer, of the flattened, filtered ``(m, K)`` array.
    """
    if is_dask_array(logits):
        if logits.ndim > 2 or ignore_index is not None:
            raise ValueError(
                "Dask logits must be 2-D rows (n_samples, n_classes) without "
                "ignore_index: reshape them to one row per position and drop the "
                "ignored rows first."
            )
        from skts._dask import DaskRows

        return DaskRows(logits, y, sample_weight)
    xp = device_namespace(logits)
    if xp is not None:
        logits, y, sample_weight = check_device_layout(
            logits,
            y,
            sample_weight,
            xp,
            class_axis=class_axis,
            ignore_index=ignore_index,
        )
        logits = check_device_logits(logits, xp)
        y = check_class_indices(host_labels(y, xp), logits.shape)
        sample_weight = check_weights(host_labels(sample_weight, xp), logits.shape[0])
        return XpRows(logits, y, sample_weight, xp, logits.device)
    logits, y, sample_weight, _ = check_layout(
        logits,
        y,
        sample_weight,
        class_axis=class_axis,
        ignore_index=ignore_index,
        n_jobs=n_jobs,
    )
    # The logits' finiteness test is left to the fit's reads: the first one
    # of all the rows looks at every logit as it reads it (one read fewer;
    # a logit that is not finite gets the test's own message before any read
    # is used: skts._numerics.Unchecked).
    logits = check_logits(logits, warn_probabilities=True, stacklevel=5, finite=False)
    y = check_class_indices(host_labels(y, None), logits.shape)
    sample_weight = check_weights(host_labels(sample_weight, None), logits.shape[0])
    # (half-precision logits were tested by check_logits, as it widened them)
    untested = None
    if isinstance(logits, np.ndarray):
        untested = partial(check_finite, logits, "logits")
    return host_rows(logits, y, sample_weight, n_jobs=n_jobs, untested=untested)


_ROWS_ONLY = (
    "groups need 2-D logits (n_samples, n_classes): reshape per-position "
    "logits to one row per position first."
)


def checked_rows(logits, y, sample_weight=None, *, n_jobs=None):
    """2-D held-out rows checked where they live, for a fit that reads
    subsets of them (a grouped fit): ``(logits, y, sample_weight)``, the
    logits in their own space (a Dask array stays lazy and is checked chunk
    by chunk by :class:`~skts._dask.DaskRows`), the labels and weights as
    host arrays (one value per row)."""
    if is_dask_array(logits):
        from skts._dask import as_logits

        if logits.ndim > 2:
            raise ValueError(_ROWS_ONLY)
        logits = as_logits(logits)
        shape = tuple(int(s) for s in logits.shape)
        y = np.asarray(y.compute() if is_dask_array(y) else y)
        if is_dask_array(sample_weight):
            sample_weight = sample_weight.compute()
        if y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        if y.shape != (shape[0],):
            raise ValueError(f"logits has {shape[0]} rows but y has shape {y.shape}.")
        y = check_class_indices(y, shape)
        return logits, y, check_weights(sample_weight, shape[0])
    xp = device_namespace(logits)
    if xp is not None:
        if logits.ndim > 2:
            raise ValueError(_ROWS_ONLY)
        logits, y, sample_weight = check_device_layout(logits, y, sample_weight, xp)
        logits = check_device_logits(logits, xp)
        y = check_class_indices(host_labels(y, xp), logits.shape)
        sample_weight = check_weights(host_labels(sample_weight, xp), logits.shape[0])
        return logits, y, sample_weight
    logits, y, sample_weight, layout = check_layout(
        logits, y, sample_weight, n_jobs=n_jobs
    )
    if layout is not None:
        raise ValueError(_ROWS_ONLY)
    logits = check_logits(logits, warn_probabilities=True, stacklevel=6)
    y = check_class_indices(host_labels(y, None), logits.shape)
    sample_weight = check_weights(host_labels(sample_weight, None), logits.shape[0])
    return logits, y, sample_weight


def rows_of(logits, y, sample_weight=None, *, n_jobs=None) -> Rows:
    """The :class:`~skts._numerics.Rows` of rows checked by
    :func:`checked_rows` (or a subset of them), in their backend."""
    if is_dask_array(logits):
        from skts._dask import DaskRows

        return DaskRows(logits, y, sample_weight)
    xp = device_namespace(logits)
    if xp is not None:
        return XpRows(logits, y, sample_weight, xp, logits.device)
    return Rows(logits, y, sample_weight, n_jobs)


def host_rows(logits, y, sample_weight=None, *, n_jobs=None, untested=None) -> Rows:
    """Rows of host arrays that are already checked (``check_logits``,
    ``check_class_indices``, ``check_weights``), or a reader of such rows
    (anything with ``shape``, ``dtype`` and row slices).

    ``untested``: when ``check_logits`` left out the finiteness test
    (``finite=False``), the test itself (a function that raises if a logit
    is not finite), which the fit's reads then run if they find one
    (:class:`skts._numerics.Unchecked`).
    """
    unchecked = None if untested is None else Unchecked(untested, logits.shape[0])
    return Rows(logits, y, sample_weight, n_jobs, unchecked=unchecked)


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


def checked_logits(logits, class_axis: int = 1):
    """Logits to predict on, checked where they live: ``(logits, xp,
    layout)``, ``xp`` the array-API namespace to compute in (None: NumPy or
    Dask), ``layout`` None for 2-D rows, else the input's
    :class:`~skts._validation.Layout` (``logits`` is then one row per
    position, and ``layout.restore`` puts results back in place)."""
    xp, _ = namespace(logits)
    if is_dask_array(logits):
        from skts._dask import as_logits

        if logits.ndim > 2:
            raise ValueError(
                "Dask logits must be 2-D rows (n_samples, n_classes): reshape "
                "them to one row per position first."
            )
        return as_logits(logits), None, None
    if xp is not None:
        layout = None
        if logits.ndim > 2:
            layout = Layout(tuple(logits.shape), class_axis_of(logits.ndim, class_axis))
            logits = xp.reshape(
                xp.moveaxis(logits, layout.axis, -1), (-1, layout.n_classes)
            )
        return check_device_logits(logits, xp), xp, layout
    logits, _, _, layout = check_layout(logits, class_axis=class_axis)
    return check_logits(logits), None, layout


def _softmax_chunk(z, temperature: float, dtype=np.float64) -> NDArray:
    return softmax(check_finite_chunk(z), temperature, dtype=dtype)


def _log_softmax_chunk(z, temperature: float, dtype=np.float64) -> NDArray:
    return log_softmax(check_finite_chunk(z), temperature, dtype=dtype)


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
            return (logits.astype(np.float64) / temperature).astype(dtype)
        from skts._dask import as_logits

        chunk = _log_softmax_chunk if output == "log_proba" else _softmax_chunk
        return as_logits(logits).map_blocks(chunk, temperature, dtype, dtype=dtype)
    if output == "logits":
        out = np.empty(logits.shape, dtype=dtype)
        with np.errstate(over="ignore"):
            for rows in blocks(*logits.shape):
                block = np.asarray(logits[rows], dtype=np.float64)
                out[rows] = block / temperature
        return out
    fn = log_softmax if output == "log_proba" else softmax
    return fn(logits, temperature, dtype=dtype, n_jobs=n_jobs)
