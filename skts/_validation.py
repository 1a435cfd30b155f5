"""Every input check and its message, once: candidate temperatures, logits
(host arrays, tensors, half precision, arrays on a device), labels, sample
weights, and the same checks on one Dask chunk (positions global).

Messages are one line, name the argument, and quote the first offending
value with its position. The estimators, the metrics, the displays and the
command line all call these.
"""

from __future__ import annotations

import math
import sys
import warnings
from numbers import Real

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn import get_config
from sklearn.utils.validation import check_array, column_or_1d

from skts import _array_api
from skts._array_api import (
    Positions,
    Widened,
    host_logits,
    is_foreign,
    is_plain,
    namespace,
    on_host,
    to_numpy,
)
from skts._numerics import F32_BLOCKS, blocks, default_temperatures, kernel_threads

__all__ = [
    "Layout",
    "check_chunk",
    "check_class_indices",
    "check_dask_logits",
    "check_device_layout",
    "check_device_logits",
    "check_finite",
    "check_finite_chunk",
    "check_groups",
    "check_layout",
    "check_logits",
    "check_piece",
    "check_shape",
    "check_temperatures",
    "check_weights",
    "check_widened",
    "check_xp_logits",
    "class_axis_of",
    "device_namespace",
    "flat_positions",
    "host_labels",
    "is_dask_array",
    "kept_rows",
]


def device_namespace(logits):
    """The array-API namespace whose device the passes run on, or None.

    Under ``array_api_dispatch``, arrays in host memory are read through a
    zero-copy NumPy view by the NumPy passes (fastest, same bits); arrays on
    another device run :class:`skts._array_api.XpRows` there.
    """
    xp, _ = namespace(logits)
    if xp is None or (on_host(logits) and not _array_api.FORCE_DEVICE_PASSES):
        return None
    return xp


def host_labels(values, xp):
    """Labels or weights as a NumPy array (they are O(n): a small copy)."""
    if values is None or not is_foreign(values):
        return values
    if xp is None or on_host(values):
        return host_logits(values, "labels")
    return to_numpy(values, xp)


def check_device_logits(logits, xp, name: str = "logits"):
    """Checked logits on their device; binary ``(n,)``/``(n, 1)`` become
    ``(0, d)``."""
    if logits.ndim == 1:
        logits = xp.reshape(logits, (-1, 1))
    if logits.ndim == 2 and logits.shape[1] == 1:
        logits = xp.concat([xp.zeros_like(logits), logits], axis=1)
    return check_xp_logits(logits, xp, name)


def is_dask_array(x) -> bool:
    # Without importing dask: a Dask array can only exist once it is imported.
    module = sys.modules.get("dask.array")
    return module is not None and isinstance(x, module.Array)


def check_temperatures(temperatures: ArrayLike | None) -> NDArray[np.float64]:
    """Validated candidate temperatures (a 1-D float64 array, as given)."""
    if temperatures is None:
        return default_temperatures()
    try:
        arr = np.asarray(temperatures, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(
            f"temperatures must be numbers; got {temperatures!r}."
        ) from None
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1 or arr.shape[0] == 0:
        raise ValueError(
            "temperatures must be a non-empty 1-D array of candidates; got shape "
            f"{arr.shape!r}."
        )
    bad = ~(np.isfinite(arr) & (arr > 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"temperatures must be finite and > 0; got {float(arr[i])!r} at "
            f"position {i}."
        )
    return arr


class Layout:
    """Where the classes and positions of logits of any rank are: the input's
    shape, its class axis, and its labels' shape (all but the class axis)."""

    def __init__(self, shape: tuple[int, ...], class_axis: int):
        self.shape, self.axis = shape, class_axis
        self.n_classes = shape[class_axis]
        self.label_shape = shape[:class_axis] + shape[class_axis + 1 :]

    def restore(self, flat, xp=None):
        """An ``(m, K)`` array of one row per position back in the input's
        layout (a view for NumPy: no copy); an ``(m,)`` array of one value
        per position in the labels' shape."""
        if flat.ndim == 1:
            return flat.reshape(self.label_shape)
        if xp is None:
            return np.moveaxis(flat.reshape(*self.label_shape, -1), -1, self.axis)
        out = xp.reshape(flat, (*self.label_shape, flat.shape[1]))
        return xp.moveaxis(out, -1, self.axis)


def class_axis_of(ndim: int, class_axis: int) -> int:
    """``class_axis`` as a non-negative axis of ``ndim``-D logits."""
    if not -ndim <= class_axis < ndim or class_axis % ndim == 0:
        raise ValueError(
            f"class_axis={class_axis} is not an axis of {ndim}-D logits other "
            "than the sample axis 0."
        )
    return class_axis % ndim


def check_layout(
    logits,
    y=None,
    sample_weight=None,
    *,
    class_axis: int = 1,
    ignore_index=None,
    name: str = "logits",
    n_jobs: int | None = None,
):
    """Logits of shape ``(n, K, d1, ..., dk)`` (classes on ``class_axis``)
    and labels of shape ``(n, d1, ..., dk)``, as the 2-D rows the passes
    read, one per position whose label is not ``ignore_index``.

    Returns ``(logits, y, sample_weight, layout)``: ``logits`` a
    :class:`~skts._array_api.Positions` reader of the input (nothing
    transposed or copied whole), ``y`` and ``sample_weight`` flat over the
    kept positions (a weight of shape ``(n,)`` weighs every position of its
    sample), ``layout`` the input's :class:`Layout`. 2-D (and 1-D binary)
    logits without ``ignore_index`` are returned as given, with layout None.
    """
    raw, bits = logits, False
    if is_foreign(raw):
        raw = host_logits(raw, name)
    if isinstance(raw, Widened):
        raw, bits = raw.raw, raw.bits
    elif not isinstance(raw, np.ndarray):
        raw = np.asarray(raw)
    if raw.ndim <= 2 and (ignore_index is None or y is None):
        return logits, y, sample_weight, None
    if raw.ndim == 1:  # binary logits: (0, d) rows
        raw, bits = check_logits(raw, name), False
    if raw.ndim == 2:
        axis = 1
    else:
        axis = class_axis_of(raw.ndim, class_axis)
    if not bits and raw.dtype.kind in "iub":
        raw = raw.astype(np.float64)
    if not bits and raw.dtype.kind != "f":
        raise ValueError(f"{name} must hold floating-point logits; got {raw.dtype}.")
    layout = Layout(raw.shape, axis)
    moved = np.moveaxis(raw, axis, 1)
    n, k = layout.shape[0], layout.n_classes
    per = math.prod(layout.label_shape[1:])
    if axis == raw.ndim - 1 and raw.flags.c_contiguous:
        flat = raw.reshape(n * per, k, 1)  # one row per position: a view
    else:
        flat = moved.reshape(n, k, per)  # a view for C-contiguous input
    keep = None
    if y is not None:
        y = np.asarray(host_labels(y, None))
        if y.shape != layout.label_shape:
            hint = (
                " (tokens as (batch, tokens, classes)? pass class_axis=-1)"
                if raw.ndim == 3 and y.shape == raw.shape[:2]
                else ""
            )
            raise ValueError(
                f"{name} of shape {raw.shape} has its classes on axis {axis}, so "
                f"its labels must have shape {layout.label_shape}; got "
                f"{y.shape}{hint}."
            )
        y, sample_weight, keep = _per_position(
            y, host_labels(sample_weight, None), layout.label_shape, ignore_index
        )
    threads = kernel_threads(n_jobs, flat.size)
    reader = Positions(flat, keep, bits, threads)
    # Finite logits need no search for the first bad one (check_widened):
    # a sum in the input's own layout says so without gathering a row.
    reader.finite = not bits and _all_finite(raw)
    return reader, y, sample_weight, layout


def _per_position(
    y, extra, label_shape, ignore_index, doing="calibrate on", name="sample_weight"
):
    """Labels of shape ``label_shape`` made flat, with ``extra`` (weights or
    groups, ``name`` in errors: one per sample, or one per position) beside
    them, and the positions not labelled ``ignore_index``: ``(y, extra,
    keep)``, ``keep`` None when every position is kept."""
    y = np.asarray(y).reshape(-1)
    if extra is not None and not isinstance(extra, Real):
        e = np.asarray(extra)
        n = label_shape[0]
        if e.shape == label_shape:
            e = e.reshape(-1)
        elif e.shape == (n,):
            e = np.repeat(e, y.shape[0] // max(n, 1))
        else:
            raise ValueError(
                f"{name} must have shape ({n},) or {label_shape}; got {e.shape}."
            )
        extra = e
    keep = None
    if ignore_index is not None:
        kept = y != ignore_index
        if not kept.any():
            raise ValueError(
                f"every label is ignore_index={ignore_index!r}: nothing to {doing}."
            )
        if not kept.all():
            keep = np.flatnonzero(kept)
            y = y[keep]
            if extra is not None and not isinstance(extra, Real):
                extra = extra[keep]
    return y, extra, keep


def kept_rows(logits, keep: NDArray) -> Positions:
    """The rows ``keep`` (sorted) of checked host logits (a 2-D array, a
    :class:`~skts._array_api.Widened` or a ``Positions`` reader without
    ``keep``), as a reader: nothing is copied."""
    if isinstance(logits, Positions):
        if logits.keep is not None:
            keep = logits.keep[keep]
        rows = Positions(logits.raw, keep, logits.bits, logits.threads)
    elif isinstance(logits, Widened):
        rows = Positions(logits.raw[:, :, None], keep, logits.bits)
    else:
        rows = Positions(np.asarray(logits)[:, :, None], keep)
    rows.finite = True  # (checked already)
    layout = getattr(logits, "layout", None)
    if layout is not None:
        rows.layout = layout
    return rows


def _all_finite(raw: NDArray) -> bool:
    """Whether every entry is finite, by sums in chunks of the array as laid
    out (a sum is finite if every entry is, barring overflow; then
    ``isfinite`` decides)."""
    if raw.flags.c_contiguous:
        flat = raw.reshape(-1)
        step = 1 << 22
        chunks = (flat[i : i + step] for i in range(0, flat.shape[0], step))
    else:  # (a sample at a time: never a copy of the whole)
        chunks = (raw[i] for i in range(raw.shape[0]))
    with np.errstate(over="ignore", invalid="ignore"):
        for chunk in chunks:
            total = np.add.reduce(chunk, axis=None)
            if not np.isfinite(total) and not np.isfinite(chunk).all():
                return False
    return True


def flat_positions(
    y_true,
    y_prob,
    sample_weight=None,
    *,
    class_axis=1,
    ignore_index=None,
    name="sample_weight",
):
    """``(y_true, y_prob, sample_weight)`` with one row per position of
    ``y_prob`` of shape ``(n, K, d1, ..., dk)`` (classes on ``class_axis``)
    and the positions labelled ``ignore_index`` dropped: what the metrics
    read (their probabilities are float64 copies anyway). 2-D input without
    ``ignore_index`` is returned as given."""
    if ignore_index is None and np.ndim(y_prob) <= 2:
        return y_true, y_prob, sample_weight
    if is_foreign(y_prob):
        y_prob = np.asarray(host_logits(y_prob, "y_prob")[:])
    y_prob = np.asarray(y_prob)
    y_true = np.asarray(host_labels(y_true, None))
    label_shape = y_true.shape
    if y_prob.ndim > 2:
        layout = Layout(y_prob.shape, class_axis_of(y_prob.ndim, class_axis))
        if y_true.shape != layout.label_shape:
            raise ValueError(
                f"y_prob of shape {y_prob.shape} has its classes on axis "
                f"{layout.axis}, so y_true must have shape {layout.label_shape}; "
                f"got {y_true.shape}."
            )
        y_prob = np.moveaxis(y_prob, layout.axis, -1).reshape(-1, layout.n_classes)
    y_true, sample_weight, keep = _per_position(
        y_true,
        host_labels(sample_weight, None),
        label_shape,
        ignore_index,
        "measure",
        name,
    )
    if keep is not None:
        y_prob = y_prob[keep]
    return y_true, y_prob, sample_weight


def check_device_layout(
    logits, y, sample_weight, xp, *, class_axis=1, ignore_index=None
):
    """:func:`check_layout` for logits on a device: the rows of one position
    each, gathered there (one copy on the device; labels and weights, O(n),
    on the host)."""
    if logits.ndim <= 2 and ignore_index is None:
        return logits, y, sample_weight
    if logits.ndim == 1:
        logits = check_device_logits(logits, xp)
    shape = tuple(logits.shape)
    axis = 1 if logits.ndim == 2 else class_axis_of(logits.ndim, class_axis)
    layout = Layout(shape, axis)
    z = xp.reshape(xp.moveaxis(logits, axis, -1), (-1, layout.n_classes))
    y = np.asarray(host_labels(y, xp))
    if y.shape != layout.label_shape:
        raise ValueError(
            f"logits of shape {shape} has its classes on axis {axis}, so its "
            f"labels must have shape {layout.label_shape}; got {y.shape}."
        )
    y, sample_weight, keep = _per_position(
        y, host_labels(sample_weight, xp), layout.label_shape, ignore_index
    )
    if keep is not None:
        z = xp.take(z, xp.asarray(keep, device=z.device), axis=0)
    return z, y, sample_weight


def check_logits(
    logits,
    name: str = "logits",
    *,
    warn_probabilities: bool = False,
    stacklevel: int = 4,
    finite: bool = True,
) -> NDArray:
    """2-D float32/float64 array of finite logits with >= 2 columns.

    Tensors and other host arrays are read through a zero-copy view;
    float16/bfloat16 become :class:`~skts._array_api.Widened` (read as
    float32 block by block). Binary logits of shape ``(n,)`` or ``(n, 1)``
    are the logit of class 1: they become ``(0, d)``. With
    ``warn_probabilities``, probabilities passed as logits get a warning.
    With ``finite=False`` a NumPy array is returned without its finiteness
    test, which the caller makes (:func:`check_finite`: a fit's reads look
    at every logit, see :func:`skts._fit.rows_for`); a
    :class:`~skts._array_api.Widened` array is tested here as always.
    """
    if is_foreign(logits):
        logits = host_logits(logits, name)
    elif isinstance(logits, np.ndarray) and logits.dtype.name in (
        "float16",
        "bfloat16",
    ):
        logits = Widened(logits)
    if isinstance(logits, Widened):
        if len(logits.shape) == 2 and logits.shape[1] != 1:
            if getattr(logits, "finite", False):
                check_shape(logits.shape, name)
            else:
                logits = check_widened(logits, name)
            if warn_probabilities and _look_like_probabilities(logits):
                _warn_probabilities(name, stacklevel)
            return logits
        logits = np.array(logits[:], dtype=np.float32)  # binary: n values
    if hasattr(logits, "ndim") or isinstance(logits, (list, tuple)):
        ndim = np.ndim(logits)
        if ndim not in (1, 2):
            raise ValueError(
                f"{name} must be 2-D of shape (n_samples, n_classes), or 1-D "
                f"binary logits; got {ndim}-D input of shape {np.shape(logits)!r}."
            )
        binary = ndim == 1 or np.shape(logits)[1] == 1
    else:
        binary = False
    arr = logits
    if binary or not is_plain(logits, "f"):  # (else check_array returns it)
        # (a sum overflowing near the float range warns: noise)
        with np.errstate(over="ignore", invalid="ignore"):
            arr = check_array(
                logits,
                dtype=[np.float64, np.float32],
                input_name=name,
                ensure_min_samples=0,
                ensure_min_features=0,
                ensure_2d=False,
                ensure_all_finite=False,
            )
    if finite:
        check_finite(arr, name)
    if binary:
        d = arr.reshape(-1)
        arr = np.column_stack([np.zeros_like(d), d])
    check_shape(arr.shape, name)
    if warn_probabilities and not binary and _look_like_probabilities(arr):
        _warn_probabilities(name, stacklevel)
    return arr


def check_finite(arr: NDArray, name: str = "logits") -> None:
    """:func:`check_logits`' finiteness test on a NumPy array it returned
    with ``finite=False``: scikit-learn's (one sum, then a look at the values
    if the sum is not finite; skipped under ``assume_finite``) and its
    message (a NaN anywhere is named before an infinity), with the first
    position of what it names: ``Input logits contains NaN, first at row 3,
    column 1.`` The look goes block by block: scikit-learn's makes masks as
    large as the array (a quarter of a memory-mapped float32 file)."""
    if get_config()["assume_finite"]:
        return
    with np.errstate(over="ignore", invalid="ignore"):  # (see check_logits)
        if np.isfinite(np.sum(arr)):
            return
    table = arr.reshape(len(arr), -1) if arr.ndim == 2 else arr.reshape(-1, 1)
    found = {}  # kind: (row, column) of its first value
    for rows in blocks(*table.shape, F32_BLOCKS):
        for kind, test in (("NaN", np.isnan), ("inf", np.isinf)):
            bad = None if kind in found else test(table[rows])
            if bad is not None and bad.any():
                i, j = np.unravel_index(int(np.argmax(bad)), bad.shape)
                found[kind] = rows.start + int(i), int(j)
        if "NaN" in found:
            break
    if not found:
        return  # (every value finite: the sum overflowed)
    kind = "NaN" if "NaN" in found else "inf"
    i, j = found[kind]
    at = f"row {i}, column {j}" if arr.ndim == 2 else f"position {i}"
    named = (
        "NaN" if kind == "NaN" else f"infinity or a value too large for {arr.dtype!r}"
    )
    raise ValueError(f"Input {name} contains {named}, first at {at}.")


def _warn_probabilities(name: str, stacklevel: int) -> None:
    warnings.warn(
        f"{name} look like probabilities (every entry in [0, 1] and every "
        "row sums to 1), not logits: pass log-probabilities (np.log(p)) "
        "or the model's raw logits.",
        UserWarning,
        stacklevel=stacklevel,
    )


def _look_like_probabilities(arr: NDArray) -> bool:
    """Every entry in [0, 1] and every row summing to 1 (to 1e-3; 1e-2 in
    half precision). Real logits fail on their first block: the whole input
    is read only for data that pass it."""
    tol = 1e-2 if isinstance(arr, Widened) else 1e-3
    for rows in blocks(*arr.shape):
        block = arr[rows]
        if not (block.min() >= 0.0 and block.max() <= 1.0):
            return False
        if not np.all(np.abs(block.sum(axis=1, dtype=np.float64) - 1.0) <= tol):
            return False
    return True


def check_class_indices(y, shape: tuple[int, int], name: str = "y") -> NDArray:
    """Integer class indices in ``0..n_classes-1``, one per logit row."""
    if not (is_plain(y, "iuf") and y.ndim == 1):  # (else returned as it is)
        y = column_or_1d(y, warn=True)
    if y.shape[0] != shape[0]:
        raise ValueError(
            f"logits has {shape[0]} rows but {name} has {y.shape[0]} labels."
        )
    if y.dtype.kind not in "iubf":
        raise ValueError(
            f"{name} must contain integer class indices; got dtype {y.dtype}."
        )
    if y.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            fractional = ~np.isfinite(y) | (y != np.round(y))
        if fractional.any():
            i = int(np.flatnonzero(fractional)[0])
            raise ValueError(
                f"{name} must contain integer class indices; got {y[i].item()!r} "
                f"at position {i}."
            )
    # Checked before any cast: 1e20 must be reported as 1e20.
    i = _first_outside(y, shape[1])
    if i is not None:
        raise ValueError(
            f"{name} must contain class indices in [0, {shape[1]}); got "
            f"{y[i].item()!r} at position {i}."
        )
    return y.astype(np.intp, copy=False)


def _first_outside(y: NDArray, n_classes: int) -> int | None:
    """The position of the first label outside ``[0, n_classes)``, or None.

    Reductions first, and masks only if they find a bad label: in a fit the
    labels come from memory after the logits (1,000,000 int64 labels with
    cold caches: 0.35 to 0.39 ms for the largest of them read as unsigned,
    where a negative label is larger than any class; 1.8 to 2.1 ms for the
    masks; ``benchmarks/bench_checks.py``).
    """
    if y.size == 0:
        return None
    if y.dtype.kind == "i":
        fine = y.view(y.dtype.str.replace("i", "u")).max() < n_classes
    elif y.dtype.kind in "ub":
        fine = y.max() < n_classes
    else:
        fine = y.min() >= 0 and y.max() < n_classes
    if fine:
        return None
    hits = np.flatnonzero((y < 0) | (y >= n_classes))
    return int(hits[0]) if hits.size else None


def _first_bad_weight(w: NDArray) -> int | None:
    """The position of the first weight that is negative or not finite, or
    None; as :func:`_first_outside`, reductions first (a NaN makes the
    minimum NaN, which takes the slow look)."""
    if w.size == 0 or (w.min() >= 0 and np.isfinite(w.max())):
        return None
    hits = np.flatnonzero(~np.isfinite(w) | (w < 0))
    return int(hits[0]) if hits.size else None


def check_weights(sample_weight, n_samples: int) -> NDArray | None:
    """Non-negative finite float64 weights with a positive sum, or None."""
    if sample_weight is None:
        return None
    if isinstance(sample_weight, Real):
        sample_weight = np.full(n_samples, sample_weight, dtype=np.float64)
    if not (is_plain(sample_weight, "f") and sample_weight.dtype == np.float64):
        sample_weight = check_array(
            sample_weight,
            ensure_2d=False,
            dtype=np.float64,
            input_name="sample_weight",
            ensure_min_samples=0,
            ensure_all_finite=False,
        )
    # One minimum and one maximum decide every check when the weights pass
    # (a NaN makes both NaN); scikit-learn's finiteness test and a mask run
    # only when they fail, for the same messages in the same order.
    w = sample_weight
    lo, hi = (w.min(), w.max()) if w.size else (0, 0)
    if not hi < np.inf or not lo > -np.inf:
        check_finite(sample_weight, "sample_weight")
    if sample_weight.shape != (n_samples,):
        raise ValueError(
            f"sample_weight must have shape ({n_samples},); got {sample_weight.shape}."
        )
    if not lo >= 0:
        i = _first_bad_weight(sample_weight)
        raise ValueError(
            f"sample_weight must be non-negative; got {float(sample_weight[i])!r} "
            f"at position {i}."
        )
    # (the largest weight, not the sum, which could overflow)
    if not hi > 0:
        raise ValueError("sample_weight must have a positive sum; got all zeros.")
    return sample_weight


def check_shape(shape: tuple, name: str) -> None:
    """Logits are 2-D with at least one row and two columns (one per class)."""
    shape = tuple(int(s) if s == s else s for s in shape)  # (NaN: unknown)
    if len(shape) != 2:
        raise ValueError(
            f"{name} must be 2-D of shape (n_samples, n_classes); got "
            f"{len(shape)}-D input of shape {shape!r}."
        )
    if shape[0] == 0:
        raise ValueError(f"{name} is empty: need at least 1 row, got shape {shape}.")
    if shape[1] < 2:
        raise ValueError(
            f"{name} must have at least 2 columns (one per class); got shape {shape}."
        )


def check_widened(z: Widened, name: str) -> Widened:
    """Shape and finiteness of half-precision logits, one block at a time."""
    check_shape(z.shape, name)
    for rows in blocks(*z.shape, F32_BLOCKS):
        block = z[rows]
        bad = ~np.isfinite(block)
        if bad.any():
            i, j = np.unravel_index(int(np.argmax(bad)), block.shape)
            raise ValueError(
                f"{name} must be finite; got {float(block[i, j])!r} at row "
                f"{rows.start + int(i)}, column {int(j)}."
            )
    return z


def check_xp_logits(z, xp, name: str):
    """Shape and finiteness of logits on their device (one reduction); a
    tensor that requires grad is detached (calibration is not differentiated)."""
    if type(z).__module__.split(".")[0] == "torch":
        z = z.detach()
    check_shape(z.shape, name)
    if not xp.isdtype(z.dtype, "real floating"):
        raise ValueError(f"{name} must hold floating-point logits; got {z.dtype}.")
    finite = xp.isfinite(z)
    if not bool(xp.all(finite)):
        flat = xp.reshape(xp.astype(~finite, xp.int8), (-1,))
        k = int(xp.argmax(flat))
        i, j = divmod(k, z.shape[1])
        value = float(xp.reshape(z, (-1,))[k])
        raise ValueError(
            f"{name} must be finite; got {value!r} at row {i}, column {j}."
        )
    return z


def check_piece(z, y, w, start: int, stop: int, n_classes: int) -> str | None:
    """Whether one Dask piece (rows ``start`` to ``stop``) holds what the Dask
    arrays declare: logits of shape ``(stop - start, n_classes)``, one label
    (and weight) per row. A chunk computed by a function, read from a file
    rewritten since, or wrapped with a wrong ``shape`` can hold something
    else; its message names the array and the rows (None: as declared)."""
    rows = stop - start
    where = f"at rows {start}-{stop - 1}"
    if np.shape(z) != (rows, n_classes):
        return (
            f"logits chunk {where} has shape {tuple(np.shape(z))}; the Dask "
            f"array declares {(rows, n_classes)}."
        )
    for name, values in (("y", y), ("sample_weight", w)):
        if values is not None and np.shape(values) != (rows,):
            return (
                f"{name} chunk {where} has shape {tuple(np.shape(values))}; the "
                f"Dask array declares ({rows},)."
            )
    return None


def _first_nonfinite(z: NDArray) -> tuple[int, int] | None:
    """Where a 2-D array's first value that is not finite is, or None."""
    with np.errstate(over="ignore", invalid="ignore"):
        # One sum is finite only if every value is (scikit-learn's fast
        # check); an overflowed sum just takes the slow look.
        if np.isfinite(np.sum(z)):
            return None
    bad = ~np.isfinite(z)
    return tuple(int(v[0]) for v in np.nonzero(bad)) if bad.any() else None


def check_chunk(z, y, w, offset: int, n_classes: int) -> str | None:
    """The first problem of one Dask piece's logits, labels and weights, as
    the message the in-memory checks give (positions global: ``offset`` is
    the piece's first row), or None."""
    at = _first_nonfinite(z)
    if at is not None:
        return f"logits must be finite; got {z[at].item()!r} at row {offset + at[0]}."
    return check_chunk_labels(y, w, offset, n_classes)


def check_finite_chunk(z) -> NDArray:
    """A Dask chunk of logits to predict on, as an array, if every value is
    finite (else a ValueError naming the first other: the chunk does not
    know its rows' positions)."""
    z = np.asarray(z)
    at = _first_nonfinite(z)
    if at is not None:
        raise ValueError(f"logits must be finite; got {z[at].item()!r}.")
    return z


def check_chunk_labels(y, w, offset: int, n_classes: int) -> str | None:
    """:func:`check_chunk` of the labels and weights alone (what a Dask read
    checks before the kernel reads a piece's labels)."""
    if y.dtype.kind not in "iubf":
        return f"y must contain integer class indices; got dtype {y.dtype}."
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(y) | (y != np.round(y)) if y.dtype.kind == "f" else None
    if bad is not None and bad.any():
        i = int(np.flatnonzero(bad)[0])
        return (
            f"y must contain integer class indices; got {y[i].item()!r} at "
            f"position {offset + i}."
        )
    i = _first_outside(y, n_classes)
    if i is not None:
        return (
            f"y must contain class indices in [0, {n_classes}); got "
            f"{y[i].item()!r} at position {offset + i}."
        )
    if w is not None:
        i = _first_bad_weight(w)
        if i is not None:
            return (
                f"sample_weight must be finite and non-negative; got "
                f"{w[i].item()!r} at position {offset + i}."
            )
    return None


def check_groups(groups, n_samples: int, name: str = "groups") -> NDArray:
    """One group label per row, as a 1-D array."""
    groups = column_or_1d(np.asarray(groups), warn=True)
    if groups.shape[0] != n_samples:
        raise ValueError(
            f"{name} must have one label per sample ({n_samples}); got "
            f"{groups.shape[0]}."
        )
    if groups.dtype.kind in "fc":
        bad = ~np.isfinite(groups)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"{name} must be finite labels; got {groups[i].item()!r} at "
                f"position {i}."
            )
    elif groups.dtype.kind == "O":
        # Labels must be sortable together (one type): a None or a float NaN
        # among strings is no group label.
        kinds = {type(g) for g in groups.tolist()}
        for i, g in enumerate(groups.tolist()):
            if g is None or (isinstance(g, float) and g != g):
                raise ValueError(
                    f"{name} must not contain missing labels; got {g!r} at "
                    f"position {i}."
                )
        try:
            np.unique(groups)
        except TypeError:
            names = sorted(k.__name__ for k in kinds)
            raise ValueError(
                f"{name} must hold labels of one kind (all numbers or all "
                f"strings); got {', '.join(names)}."
            ) from None
    return groups


def check_dask_logits(logits, name: str = "logits"):
    """A Dask array of logits, 2-D, of numbers, with known row chunks, as
    float32 or float64 with every column in one chunk (rechunked, with a
    warning, when the columns are split)."""
    if logits.ndim != 2:
        check_shape(logits.shape, name)
    if logits.dtype.kind not in "fiub":
        raise ValueError(f"{name} must hold numbers; got dtype {logits.dtype}.")
    if any(c != c for c in logits.chunks[0]):  # (NaN: unknown sizes)
        raise ValueError(
            f"{name} has unknown chunk sizes; call {name}.compute_chunk_sizes() first."
        )
    check_shape(logits.shape, name)
    if logits.dtype not in (np.float32, np.float64):
        logits = logits.astype(np.float64)
    if len(logits.chunks[1]) > 1:
        warnings.warn(
            f"{name} is split into {len(logits.chunks[1])} column chunks; each "
            f"pass needs whole rows, so it was rechunked to one column chunk "
            f"(rechunk({{1: -1}}) beforehand to choose the row chunks yourself).",
            UserWarning,
            stacklevel=4,
        )
        logits = logits.rechunk({1: -1})
    return logits
