"""``softmax(logits / T)`` and its logarithm, row by row, without overflow."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from skts._numerics._blocks import blocks
from skts._numerics._compiled import kernel
from skts._numerics._threads import kernel_threads

__all__ = ["log_softmax", "softmax"]


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
    with np.errstate(over="ignore"):
        beta = 1.0 / temperature
    if not np.isfinite(beta):
        return _softmax_tiny(logits, temperature, log, dtype)
    threads = kernel_threads(n_jobs, n_samples * n_classes)
    if kernel.supports(logits, strided=False):
        return kernel.softmax(logits, beta, log, dtype, threads)
    # Other arrays (float16 widened on the fly, strided views): block by block.
    out = np.empty((n_samples, n_classes), dtype=dtype)
    for rows in blocks(n_samples, n_classes):
        z = logits[rows]
        z = np.require(z, np.float64 if z.dtype == np.float64 else np.float32, "CA")
        out[rows] = kernel.softmax(z, beta, log, dtype, threads)
    return out


def _softmax_tiny(logits, temperature: float, log: bool, dtype) -> NDArray:
    """(log-)softmax at a temperature whose inverse overflows float64
    (``T`` below about 5.6e-309): ``(z - m) / T`` is divided, not multiplied
    by ``1/T``, so logits that differ by subnormal amounts keep their
    finite ratios, and others become ``-inf`` (probability 0; ties at the
    row's largest logit share it)."""
    n_samples, n_classes = logits.shape
    out = np.empty((n_samples, n_classes), dtype=dtype)
    with np.errstate(over="ignore", under="ignore", divide="ignore"):
        for rows in blocks(n_samples, n_classes):
            z = np.asarray(logits[rows], dtype=np.float64)
            u = (z - z.max(axis=1, keepdims=True)) / temperature
            lse = np.log(np.exp(u).sum(axis=1, keepdims=True))
            out[rows] = (u - lse) if log else np.exp(u - lse)
    return out
