"""TemperatureScaler: temperature scaling on raw logit arrays."""

from __future__ import annotations

import sys
import warnings
from numbers import Integral, Real

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin, _fit_context
from sklearn.utils._param_validation import Interval, Options, StrOptions
from sklearn.utils.validation import (
    check_array,
    check_is_fitted,
    column_or_1d,
)

from skts import _array_api
from skts._array_api import (
    Widened,
    check_same_space,
    check_shape,
    check_widened,
    check_xp_logits,
    host_logits,
    is_foreign,
    namespace,
    on_host,
    space,
    to_numpy,
    widen,
    xp_log_softmax,
    xp_softmax,
)
from skts._temperature import (
    _blocks,
    _grid_search,
    _Rows,
    _solve_continuous,
    default_temperatures,
    log_softmax,
    softmax,
    warn_boundary,
)

__all__ = ["TemperatureScaler"]


class TemperatureScaler(ClassifierMixin, TransformerMixin, BaseEstimator):
    """Fit one temperature on held-out logits and apply it.

    For logits produced elsewhere (PyTorch, JAX, an API): ``fit`` chooses
    ``T`` by validation log-loss, ``transform`` returns ``logits / T`` and
    ``predict_proba`` returns ``softmax(logits / T)``. Predicted labels are the
    first argmax of the logits and never change.

    Parameters
    ----------
    temperatures : array-like of shape (n_candidates,), default=None
        Candidate temperatures, finite and > 0, in any order, duplicates
        allowed. ``None`` uses 1001 geometric points from 0.01 to 100 (ratio
        ``10**(1/250)``, about 0.93%, including 1 exactly).

    solver : {"grid", "continuous"}, default="grid"
        ``"grid"``: the exact rule, the smallest candidate among the minimisers
        of the validation loss. ``"continuous"``: bisection with Newton steps
        on the derivative in ``beta = 1/T`` over ``[min, max]`` of the
        candidates, to a relative tolerance ``tol``.

    tol : float, default=1e-10
        Tolerance of the continuous solver in ``beta = 1/T``, relative to its
        starting estimate of ``beta``.

    n_jobs : int, default=None
        Threads over row blocks (OpenMP threads of the compiled pass) in the
        search and in the predictions: ``None`` uses, from 2**18 logits on,
        every core (below, one), ``-1`` all cores, ``k`` k threads. The
        answer does not depend on it: every block's sums are added in block
        order. (On Dask arrays the scheduler's workers run the blocks.)

    dtype : {np.float64, np.float32}, default=np.float64
        Floating type of what :meth:`predict_proba`, :meth:`predict_log_proba`,
        :meth:`transform` and :meth:`decision_function` return for NumPy input
        (the arithmetic is float64 either way). ``None`` keeps the input's:
        float32 logits give float32 probabilities, at half the memory. Under
        ``array_api_dispatch`` the outputs keep the input's type regardless.

    Attributes
    ----------
    temperature_ : float
        The chosen temperature (an element of ``temperatures`` bit for bit
        with ``solver="grid"``).

    validation_loss_ : float
        Mean (weighted) negative log-likelihood at ``temperature_`` on the data
        passed to ``fit``.
        Computed in float64 for up to 2**18 logits; for larger inputs the
        grid search reports its float32-arithmetic value (float64
        accumulation), within a proven error bound, typically 1e-7 relative.

    at_boundary_ : bool
        Whether ``temperature_`` is an end of the candidate range (a
        :class:`~skts.BoundaryTemperatureWarning` was emitted).

    classes_ : ndarray of shape (n_classes,)
        ``np.arange(n_classes)``.

    n_features_in_ : int
        Number of logit columns (classes) seen in ``fit`` (2 for binary
        logits of one column).

    Raises
    ------
    ValueError
        On non-finite or empty logits, labels outside ``0..n_classes-1``,
        length mismatches, bad temperatures or sample weights.

    See Also
    --------
    TemperatureScaledClassifier : The same around a scikit-learn classifier.

    Notes
    -----
    The validation loss is ``L(T) = -(1/n) sum_i log softmax(z_i / T)[y_i]``,
    computed as ``(m - z_y)/T + log sum_j exp((z_j - m)/T)`` with
    ``m = max_j z_j``. It is convex in ``beta = 1/T``, which lets the grid
    search evaluate a handful of candidates and still return exactly what
    evaluating every candidate would.

    References
    ----------
    C. Guo, G. Pleiss, Y. Sun and K. Q. Weinberger, "On Calibration of Modern
    Neural Networks", ICML 2017, arXiv:1706.04599.

    Examples
    --------
    >>> import numpy as np
    >>> from skts import TemperatureScaler
    >>> logits = np.log([[9.0, 1.0]] * 4)  # every forecast says 0.9
    >>> y = np.array([0, 0, 0, 1])         # but only 3 in 4 are right
    >>> scaler = TemperatureScaler(temperatures=[0.5, 1.0, 2.0, 4.0]).fit(logits, y)
    >>> scaler.temperature_
    2.0
    >>> scaler.predict_proba(logits[:1]).round(6)
    array([[0.75, 0.25]])
    """

    _parameter_constraints: dict = {
        "temperatures": ["array-like", None],
        "solver": [StrOptions({"grid", "continuous"})],
        "tol": [Interval(Real, 0, 1, closed="neither")],
        "n_jobs": [Integral, None],
        "dtype": [Options(type, {np.float32, np.float64}), None],
    }

    def __init__(
        self,
        temperatures=None,
        *,
        solver="grid",
        tol=1e-10,
        n_jobs=None,
        dtype=np.float64,
    ):
        self.temperatures = temperatures
        self.solver = solver
        self.tol = tol
        self.n_jobs = n_jobs
        self.dtype = dtype

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, logits, y, sample_weight=None):
        """Choose the temperature on held-out logits.

        Parameters
        ----------
        logits : array-like, tensor or dask array of shape (n_samples, n_classes)
            Held-out logits (float32 stays float32 in memory). A tensor in
            host memory (also one that requires grad) is read in place;
            float16 and bfloat16 are widened block by block. Binary logits
            of shape ``(n_samples,)`` or ``(n_samples, 1)`` are the logit of
            class 1, i.e. logits ``(0, d)``. Under scikit-learn's
            ``array_api_dispatch``, arrays on a device are searched there
            (see "Deep-learning logits"). A Dask array chunked by rows is
            never gathered: each pass of the search is one Dask reduction on
            the active scheduler, and ``temperature_`` is the in-memory
            answer bit for bit (see "Calibrating at scale").

        y : array-like, tensor or dask array of shape (n_samples,)
            True class indices in ``0..n_classes-1``.

        sample_weight : array-like or dask array of shape (n_samples,), \
                default=None
            Non-negative weights of the validation loss (weighted mean).

        Returns
        -------
        self : TemperatureScaler
            The fitted scaler.

        Examples
        --------
        >>> import numpy as np
        >>> from skts import TemperatureScaler
        >>> logits = np.log([[9.0, 1.0]] * 4)  # every forecast says 0.9
        >>> y = [0, 0, 0, 1]  # but only 3 in 4 are right
        >>> scaler = TemperatureScaler(temperatures=[0.5, 1.0, 2.0]).fit(logits, y)
        >>> scaler.temperature_, round(scaler.validation_loss_, 4)
        (2.0, 0.5623)
        """
        temperatures = _check_temperatures(self.temperatures)
        fit_space = space(logits)
        if _is_dask_array(logits):
            from skts._dask import DaskRows

            rows = DaskRows(logits, y, sample_weight)
        elif (xp := _device_namespace(logits)) is not None:
            logits = _check_device_logits(logits, xp)
            y = _check_class_indices(_host_labels(y, xp), logits.shape)
            sample_weight = _check_weights(
                _host_labels(sample_weight, xp), logits.shape[0]
            )
            rows = _array_api.XpRows(logits, y, sample_weight, xp, logits.device)
        else:
            logits = _check_logits(logits, warn_probabilities=True)
            y = _check_class_indices(_host_labels(y, None), logits.shape)
            sample_weight = _check_weights(
                _host_labels(sample_weight, None), logits.shape[0]
            )
            rows = _Rows(logits, y, sample_weight, self.n_jobs)
        result = _fit_rows(rows, temperatures, self.solver, self.tol)
        self.temperature_ = result.temperature
        self._fit_space = fit_space
        self.validation_loss_ = result.loss
        self.at_boundary_ = result.at_boundary
        self.classes_ = np.arange(logits.shape[1])
        self.n_features_in_ = logits.shape[1]
        return self

    def _logits(self, logits, method: str):
        """Checked logits, and the array-API namespace to compute in (None:
        NumPy)."""
        check_is_fitted(self)
        check_same_space(self, logits, method)
        xp, _ = namespace(logits)
        if _is_dask_array(logits):
            from skts._dask import _as_logits

            logits = _as_logits(logits)
        elif xp is not None:
            logits = _check_device_logits(logits, xp)
        else:
            logits = _check_logits(logits)
        if logits.shape[1] != self.n_features_in_:
            raise ValueError(
                f"logits has {logits.shape[1]} columns, but TemperatureScaler was "
                f"fitted with {self.n_features_in_}."
            )
        return logits, xp

    def transform(self, logits):
        """Calibrated logits ``logits / temperature_``.

        Parameters
        ----------
        logits : array-like or dask array of shape (n_samples, n_classes)
            Logits to calibrate (a Dask array gives a lazy Dask array).

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            ``logits / temperature_`` in float64, or as ``dtype`` asks (an
            array-API array under ``array_api_dispatch``: in its namespace, on
            its device, in its floating type, at least float32).

        Examples
        --------
        >>> import numpy as np
        >>> from skts import TemperatureScaler
        >>> logits = np.log([[9.0, 1.0]] * 4)  # every forecast says 0.9
        >>> y = [0, 0, 0, 1]  # but only 3 in 4 are right
        >>> scaler = TemperatureScaler(temperatures=[0.5, 1.0, 2.0]).fit(logits, y)
        >>> scaler.transform(logits[:1]).round(4)  # logits / T
        array([[1.0986, 0.    ]])
        """
        logits, xp = self._logits(logits, "transform")
        if xp is not None:
            return widen(logits, xp) / self.temperature_
        if _is_dask_array(logits):
            return logits.astype(np.float64) / self.temperature_
        out = np.empty(logits.shape, dtype=self._output_dtype(logits))
        with np.errstate(over="ignore"):
            for rows in _blocks(*logits.shape):
                block = np.asarray(logits[rows], dtype=np.float64)
                out[rows] = block / self.temperature_
        return out

    def _output_dtype(self, logits):
        """The floating type of NumPy outputs (see ``dtype``)."""
        if self.dtype is None:
            wide = getattr(logits, "dtype", None) == np.float64
            return np.float64 if wide else np.float32
        return self.dtype

    def predict_proba(self, logits):
        """Calibrated probabilities ``softmax(logits / temperature_)``.

        Parameters
        ----------
        logits : array-like or dask array of shape (n_samples, n_classes)
            Logits to calibrate (a Dask array gives a lazy Dask array).

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Rows sum to 1 (float64, or as ``dtype`` asks; under
            ``array_api_dispatch``, in the input's namespace, device and
            floating type, at least float32).

        Examples
        --------
        >>> import numpy as np
        >>> from skts import TemperatureScaler
        >>> logits = np.log([[9.0, 1.0]] * 4)  # every forecast says 0.9
        >>> y = [0, 0, 0, 1]  # but only 3 in 4 are right
        >>> scaler = TemperatureScaler(temperatures=[0.5, 1.0, 2.0]).fit(logits, y)
        >>> scaler.predict_proba(logits[:1]).round(4)  # 0.9 softened to 0.75
        array([[0.75, 0.25]])
        """
        return self._softmax(logits, "predict_proba", log=False)

    def predict_log_proba(self, logits):
        """Logarithm of :meth:`predict_proba`, computed without underflow.

        Parameters
        ----------
        logits : array-like or dask array of shape (n_samples, n_classes)
            Logits to calibrate (a Dask array gives a lazy Dask array).

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Calibrated log-probabilities (float64, or as ``dtype`` asks; under
            ``array_api_dispatch``, as :meth:`predict_proba`).

        Examples
        --------
        >>> import numpy as np
        >>> from skts import TemperatureScaler
        >>> logits = np.log([[9.0, 1.0]] * 4)  # every forecast says 0.9
        >>> y = [0, 0, 0, 1]  # but only 3 in 4 are right
        >>> scaler = TemperatureScaler(temperatures=[0.5, 1.0, 2.0]).fit(logits, y)
        >>> scaler.predict_log_proba(logits[:1]).round(4)
        array([[-0.2877, -1.3863]])
        """
        return self._softmax(logits, "predict_log_proba", log=True)

    def _softmax(self, logits, method: str, *, log: bool):
        """(log-)softmax of ``logits / temperature_`` in the input's space."""
        logits, xp = self._logits(logits, method)
        if xp is not None:
            return (xp_log_softmax if log else xp_softmax)(
                logits, xp, self.temperature_
            )
        if _is_dask_array(logits):
            from skts._dask import log_softmax_lazy, softmax_lazy

            lazy = log_softmax_lazy if log else softmax_lazy
            return lazy(logits, self.temperature_)
        return (log_softmax if log else softmax)(
            logits,
            self.temperature_,
            dtype=self._output_dtype(logits),
            n_jobs=self.n_jobs,
        )

    def decision_function(self, logits):
        """Calibrated scores, as a scikit-learn classifier returns them.

        Parameters
        ----------
        logits : array-like or dask array of shape (n_samples, n_classes)
            Logits to calibrate.

        Returns
        -------
        ndarray of shape (n_samples, n_classes) or (n_samples,)
            ``logits / temperature_`` (as :meth:`transform`); for two classes
            the 1-D score ``(z_1 - z_0) / temperature_``, whose sign gives
            class 1 (``> 0``), as scikit-learn's binary classifiers do.

        Examples
        --------
        >>> import numpy as np
        >>> from skts import TemperatureScaler
        >>> d = np.array([2.0, -1.0, 0.5, 3.0, -2.0, 1.0])  # one logit per sample
        >>> y = [1, 0, 1, 1, 0, 0]
        >>> scaler = TemperatureScaler(temperatures=[0.5, 1.0, 2.0]).fit(d, y)
        >>> scaler.temperature_
        1.0
        >>> scaler.decision_function(d[:2])
        array([ 2., -1.])
        """
        scores = self.transform(logits)
        if self.n_features_in_ != 2:
            return scores
        return scores[:, 1] - scores[:, 0]

    def predict(self, logits):
        """Class index of the largest logit (first one on ties).

        Parameters
        ----------
        logits : array-like or dask array of shape (n_samples, n_classes)
            Logits (a Dask array gives a lazy Dask array).

        Returns
        -------
        ndarray of shape (n_samples,)
            Predicted class indices; dividing by ``T > 0`` never changes them.

        Examples
        --------
        >>> import numpy as np
        >>> from skts import TemperatureScaler
        >>> logits = np.log([[9.0, 1.0]] * 4)  # every forecast says 0.9
        >>> y = [0, 0, 0, 1]  # but only 3 in 4 are right
        >>> scaler = TemperatureScaler(temperatures=[0.5, 1.0, 2.0]).fit(logits, y)
        >>> scaler.predict(logits[:2])  # never changed by T
        array([0, 0])
        """
        logits, xp = self._logits(logits, "predict")
        if xp is not None:
            return xp.argmax(logits, axis=1)
        return logits.argmax(axis=1)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        tags.input_tags.one_d_array = True  # binary logits of shape (n,)
        tags.array_api_support = True
        return tags


def _device_namespace(logits):
    """The array-API namespace whose device the passes run on, or None.

    Under ``array_api_dispatch``, arrays in host memory are read through a
    zero-copy NumPy view by the NumPy passes (fastest, same bits); arrays on
    another device run :class:`skts._array_api.XpRows` there.
    """
    xp, _ = namespace(logits)
    if xp is None or (on_host(logits) and not _array_api.FORCE_DEVICE_PASSES):
        return None
    return xp


def _host_labels(values, xp):
    """Labels or weights as a NumPy array (they are O(n): a small copy)."""
    if values is None or not is_foreign(values):
        return values
    if xp is None or on_host(values):
        return host_logits(values, "labels")
    return to_numpy(values, xp)


def _check_device_logits(logits, xp, name: str = "logits"):
    """Checked logits on their device; binary ``(n,)``/``(n, 1)`` become
    ``(0, d)``."""
    if logits.ndim == 1:
        logits = xp.reshape(logits, (-1, 1))
    if logits.ndim == 2 and logits.shape[1] == 1:
        logits = xp.concat([xp.zeros_like(logits), logits], axis=1)
    logits = check_xp_logits(logits, xp, name)
    return logits


def _is_dask_array(x) -> bool:
    # Without importing dask: a Dask array can only exist once it is imported.
    module = sys.modules.get("dask.array")
    return module is not None and isinstance(x, module.Array)


def _fit_temperature(logits, y, temperatures, sample_weight, solver, tol, n_jobs=None):
    """Run the chosen solver on validated arrays; warn on a boundary answer."""
    rows = _Rows(logits, y, sample_weight, n_jobs)
    return _fit_rows(rows, temperatures, solver, tol)


def _fit_rows(rows, temperatures, solver, tol):
    """Run the chosen solver on held-out rows (in memory or Dask); warn on a
    boundary answer."""
    if solver == "grid":
        result = _grid_search(rows, temperatures)
    else:
        result = _solve_continuous(
            rows, float(temperatures.min()), float(temperatures.max()), tol=tol
        )
    if result.at_boundary:
        warn_boundary(result, float(temperatures.min()), float(temperatures.max()))
    return result


def _check_temperatures(temperatures: ArrayLike | None) -> NDArray[np.float64]:
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


def _check_logits(
    logits, name: str = "logits", *, warn_probabilities: bool = False
) -> NDArray:
    """2-D float32/float64 array of finite logits with >= 2 columns.

    Tensors and other host arrays are read through a zero-copy view;
    float16/bfloat16 become :class:`~skts._array_api.Widened` (read as
    float32 block by block). Binary logits of shape ``(n,)`` or ``(n, 1)``
    are the logit of class 1: they become ``(0, d)``. With
    ``warn_probabilities``, probabilities passed as logits get a warning.
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
            logits = check_widened(logits, name)
            if warn_probabilities and _look_like_probabilities(logits):
                _warn_probabilities(name)
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
    arr = check_array(
        logits,
        dtype=[np.float64, np.float32],
        input_name=name,
        ensure_min_samples=0,
        ensure_min_features=0,
        ensure_2d=False,
    )
    if binary:
        d = arr.reshape(-1)
        arr = np.column_stack([np.zeros_like(d), d])
    check_shape(arr.shape, name)
    if warn_probabilities and not binary and _look_like_probabilities(arr):
        _warn_probabilities(name)
    return arr


def _warn_probabilities(name: str) -> None:
    warnings.warn(
        f"{name} look like probabilities (every entry in [0, 1] and every "
        "row sums to 1), not logits: pass log-probabilities (np.log(p)) "
        "or the model's raw logits.",
        UserWarning,
        stacklevel=4,
    )


def _look_like_probabilities(arr: NDArray) -> bool:
    """Every entry in [0, 1] and every row summing to 1 (to 1e-3; 1e-2 in
    half precision). Real logits fail on their first block: the whole input
    is read only for data that pass it."""
    tol = 1e-2 if isinstance(arr, Widened) else 1e-3
    for rows in _blocks(*arr.shape):
        block = arr[rows]
        if not (block.min() >= 0.0 and block.max() <= 1.0):
            return False
        if not np.all(np.abs(block.sum(axis=1, dtype=np.float64) - 1.0) <= tol):
            return False
    return True


def _check_class_indices(y, shape: tuple[int, int], name: str = "y") -> NDArray:
    """Integer class indices in ``0..n_classes-1``, one per logit row."""
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
    bad = (y < 0) | (y >= shape[1])
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"{name} must contain class indices in [0, {shape[1]}); got "
            f"{y[i].item()!r} at position {i}."
        )
    return y.astype(np.intp, copy=False)


def _check_weights(sample_weight, n_samples: int) -> NDArray | None:
    """Non-negative finite float64 weights with a positive sum, or None."""
    if sample_weight is None:
        return None
    if isinstance(sample_weight, Real):
        sample_weight = np.full(n_samples, sample_weight, dtype=np.float64)
    sample_weight = check_array(
        sample_weight,
        ensure_2d=False,
        dtype=np.float64,
        input_name="sample_weight",
        ensure_min_samples=0,
    )
    if sample_weight.shape != (n_samples,):
        raise ValueError(
            f"sample_weight must have shape ({n_samples},); got {sample_weight.shape}."
        )
    negative = sample_weight < 0
    if negative.any():
        i = int(np.flatnonzero(negative)[0])
        raise ValueError(
            f"sample_weight must be non-negative; got {float(sample_weight[i])!r} "
            f"at position {i}."
        )
    if not np.any(sample_weight > 0):  # (a sum could overflow)
        raise ValueError("sample_weight must have a positive sum; got all zeros.")
    return sample_weight
