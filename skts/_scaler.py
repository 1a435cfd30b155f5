"""TemperatureScaler: temperature scaling on raw logit arrays."""

from __future__ import annotations

import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from skts._array_api import check_same_space, space
from skts._fit import apply_temperature, checked_logits, fit_temperature, rows_for
from skts._grouped import first_unseen, fit_groups, group_codes, take_rows
from skts._sklearn_compat import Interval, Options, StrOptions, fit_context
from skts._validation import check_temperatures, is_dask_array

__all__ = ["TemperatureScaler"]


def _by_temperature(logits, per_row, output: str, options: dict):
    """``apply_temperature`` with a temperature per row: the rows of each
    distinct temperature computed together, put back in their order."""
    distinct, codes = np.unique(per_row, return_inverse=True)
    if distinct.size == 1:
        return apply_temperature(logits, float(distinct[0]), output, **options)
    order = np.argsort(codes, kind="stable")
    edges = np.r_[0, np.cumsum(np.bincount(codes, minlength=distinct.size))]
    pieces = [
        apply_temperature(
            take_rows(logits, order[edges[k] : edges[k + 1]]),
            float(t),
            output,
            **options,
        )
        for k, t in enumerate(distinct.tolist())
    ]
    back = np.empty_like(order)
    back[order] = np.arange(order.size)
    xp = options["xp"]
    if xp is not None:
        joined = xp.concat(pieces, axis=0)
        return xp.take(joined, xp.asarray(back, device=joined.device), axis=0)
    if is_dask_array(logits):
        import dask.array as da

        return da.concatenate(pieces, axis=0)[back]
    return np.concatenate(pieces, axis=0)[back]


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

    dtype : {np.float64, np.float32} or None, default=None
        Floating type of what :meth:`predict_proba`, :meth:`predict_log_proba`,
        :meth:`transform` and :meth:`decision_function` return for NumPy input
        and tensors in host memory (the arithmetic is float64 either way).
        ``None`` keeps the input's precision: float32, float16 and bfloat16
        logits give float32 outputs (half the memory of float64), float64
        gives float64. Under ``array_api_dispatch`` the outputs keep the
        input's type and device regardless (scikit-learn needs the
        environment variable ``SCIPY_ARRAY_API=1`` set before SciPy is
        imported to turn that dispatch on).

    class_axis : int, default=1
        The axis of the classes in logits of more than two dimensions, as
        PyTorch's ``CrossEntropyLoss`` takes them: ``(N, K, d1, ..., dk)``
        per-pixel or per-token logits with labels ``(N, d1, ..., dk)``
        (``class_axis=-1`` for ``(batch, tokens, classes)``, as Hugging Face
        models return them). Every position is one held-out row; the logits
        are read in place, block by block, never transposed or copied whole,
        and the outputs come back in the input's layout. For 2-D logits the
        classes are the columns whatever its value.

    ignore_index : int, default=None
        A label value whose positions :meth:`fit` leaves out (``-100`` is
        PyTorch's and Hugging Face's convention for padding tokens and
        unlabelled pixels). ``None`` keeps every row. The fit equals the fit
        on the flattened, filtered ``(m, n_classes)`` array bit for bit.

    group_shrinkage : float or "cv", default="cv"
        With ``groups`` in :meth:`fit`: how far each group's temperature is
        pulled toward the pooled one, in rows. A group of ``n`` rows (by
        weight) whose own exact-rule temperature is ``T_g`` gets
        ``exp((n log T_g + s log T) / (n + s))``, the nearest candidate to
        it in ``log T`` with ``solver="grid"``: ``0`` keeps each group's own
        ``T``, ``inf`` gives every group the pooled ``T``. ``"cv"`` chooses
        ``s`` from 0, 10, 30, ..., 10000 and ``inf`` by the out-of-fold
        log-loss of the held-out rows (5 folds stratified by group; ties go
        to the stronger shrinkage).

    min_group_size : int, default=10
        With ``groups``: a group with fewer rows of positive weight takes
        the pooled temperature.

    Attributes
    ----------
    temperature_ : float
        The chosen temperature (an element of ``temperatures`` bit for bit
        with ``solver="grid"``); with ``groups``, the pooled one (the fit on
        every row).

    temperatures_by_group_ : dict or None
        With ``groups`` in :meth:`fit`: ``{group: T}``, each group's shrunk
        temperature (a candidate, with ``solver="grid"``); None without.

    group_shrinkage_ : float or None
        The shrinkage strength used (the one ``"cv"`` chose); None without
        ``groups``.

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
        "class_axis": [Integral],
        "ignore_index": [Integral, None],
        "group_shrinkage": [Interval(Real, 0, None, closed="left"), StrOptions({"cv"})],
        "min_group_size": [Interval(Integral, 0, None, closed="left")],
    }

    def __init__(
        self,
        temperatures=None,
        *,
        solver="grid",
        tol=1e-10,
        n_jobs=None,
        dtype=None,
        class_axis=1,
        ignore_index=None,
        group_shrinkage="cv",
        min_group_size=10,
    ):
        self.temperatures = temperatures
        self.solver = solver
        self.tol = tol
        self.n_jobs = n_jobs
        self.dtype = dtype
        self.class_axis = class_axis
        self.ignore_index = ignore_index
        self.group_shrinkage = group_shrinkage
        self.min_group_size = min_group_size

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, logits, y, sample_weight=None, groups=None):
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

        groups : array-like of shape (n_samples,) or "predicted", default=None
            A group label per row (metadata known at prediction time: a
            site, a device, a language), or ``"predicted"``, the predicted
            class (the first argmax of the logits). Each group gets a
            temperature of its own (see ``group_shrinkage``), in
            ``temperatures_by_group_``; every label is still kept, since a
            row's logits are divided by a positive number. Needs 2-D
            logits.

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
        temperatures = check_temperatures(self.temperatures)
        fit_space = space(logits)
        if groups is not None:
            return self._fit_groups(logits, y, sample_weight, groups, temperatures)
        rows = rows_for(
            logits,
            y,
            sample_weight,
            n_jobs=self.n_jobs,
            class_axis=self.class_axis,
            ignore_index=self.ignore_index,
        )
        result = fit_temperature(rows, temperatures, solver=self.solver, tol=self.tol)
        self.temperature_ = result.temperature
        self._fit_space = fit_space
        self.validation_loss_ = result.loss
        self.at_boundary_ = result.at_boundary
        self.classes_ = np.arange(rows.n_classes)
        self.n_features_in_ = rows.n_classes
        self.temperatures_by_group_ = None
        self.group_shrinkage_ = None
        self._groups = None
        return self

    def _fit_groups(self, logits, y, sample_weight, groups, temperatures):
        fit_space = space(logits)
        fitted = fit_groups(
            logits,
            y,
            sample_weight,
            groups,
            temperatures,
            solver=self.solver,
            tol=self.tol,
            strength=self.group_shrinkage,
            min_group_size=self.min_group_size,
            n_jobs=self.n_jobs,
        )
        pooled = fitted.pooled
        self.temperature_ = pooled.temperature
        self._fit_space = fit_space
        self.validation_loss_ = pooled.loss
        self.at_boundary_ = pooled.at_boundary
        n_classes = max(int(logits.shape[1]), 2) if len(logits.shape) == 2 else 2
        self.classes_ = np.arange(n_classes)
        self.n_features_in_ = n_classes
        self.temperatures_by_group_ = fitted.by_group()
        self.group_shrinkage_ = fitted.strength
        self._groups = (
            fitted.labels,
            fitted.temperature,
            "predicted" if isinstance(groups, str) else None,
        )
        return self

    def _logits(self, logits, method: str):
        """Checked logits (one row per position), the array-API namespace to
        compute in (None: NumPy) and the input's layout (None: 2-D)."""
        check_is_fitted(self)
        check_same_space(self, logits, method)
        logits, xp, layout = checked_logits(logits, self.class_axis)
        if logits.shape[1] != self.n_features_in_:
            raise ValueError(
                f"logits has {logits.shape[1]} columns, but TemperatureScaler was "
                f"fitted with {self.n_features_in_}."
            )
        return logits, xp, layout

    @staticmethod
    def _restore(out, xp, layout):
        return out if layout is None else layout.restore(out, xp)

    def transform(self, logits, groups=None):
        """Calibrated logits ``logits / temperature_``.

        Parameters
        ----------
        logits : array-like or dask array of shape (n_samples, n_classes)
            Logits to calibrate (a Dask array gives a lazy Dask array).

        groups : array-like of shape (n_samples,) or "predicted", default=None
            With a scaler fitted with ``groups``: each row's group, whose
            temperature divides its logits (a group not seen in ``fit``
            gets the pooled ``temperature_``, with a warning). ``None``:
            the predicted class if the scaler was fitted with
            ``groups="predicted"``, else ``temperature_`` for every row.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            ``logits / temperature_`` in the input's precision (float32 for
            float32 and half-precision logits, see ``dtype``) and layout (an
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
        return self._apply(logits, "transform", "logits", groups)

    def _output_dtype(self, logits):
        """The floating type of NumPy outputs (see ``dtype``)."""
        if self.dtype is None:
            wide = str(getattr(logits, "dtype", "")).endswith("float64")
            return np.float64 if wide else np.float32
        return self.dtype

    def predict_proba(self, logits, groups=None):
        """Calibrated probabilities ``softmax(logits / temperature_)``.

        Parameters
        ----------
        logits : array-like or dask array of shape (n_samples, n_classes)
            Logits to calibrate (a Dask array gives a lazy Dask array).

        groups : array-like of shape (n_samples,) or "predicted", default=None
            With a scaler fitted with ``groups``: each row's group, whose
            temperature divides its logits (a group not seen in ``fit``
            gets the pooled ``temperature_``, with a warning). ``None``:
            the predicted class if the scaler was fitted with
            ``groups="predicted"``, else ``temperature_`` for every row.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Rows sum to 1 (in the input's precision: float32 for float32 and
            half-precision logits, see ``dtype``; classes on ``class_axis``
            for logits of more than two dimensions; under
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
        return self._softmax(logits, "predict_proba", log=False, groups=groups)

    def predict_log_proba(self, logits, groups=None):
        """Logarithm of :meth:`predict_proba`, computed without underflow.

        Parameters
        ----------
        logits : array-like or dask array of shape (n_samples, n_classes)
            Logits to calibrate (a Dask array gives a lazy Dask array).

        groups : array-like of shape (n_samples,) or "predicted", default=None
            With a scaler fitted with ``groups``: each row's group, whose
            temperature divides its logits (a group not seen in ``fit``
            gets the pooled ``temperature_``, with a warning). ``None``:
            the predicted class if the scaler was fitted with
            ``groups="predicted"``, else ``temperature_`` for every row.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Calibrated log-probabilities (in the input's precision and
            layout, as :meth:`predict_proba`; under
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
        return self._softmax(logits, "predict_log_proba", log=True, groups=groups)

    def _apply(self, logits, method: str, output: str, groups):
        """``logits / T``, or the (log-)softmax of it, in the input's space:
        ``T`` the temperature of each row's group, or ``temperature_``."""
        logits, xp, layout = self._logits(logits, method)
        options = {"xp": xp, "dtype": self._output_dtype(logits), "n_jobs": self.n_jobs}
        fitted = getattr(self, "_groups", None)
        if groups is None and fitted is not None:
            groups = fitted[2]
        if groups is None or fitted is None:
            if groups is not None:
                raise ValueError(
                    f"groups were given to {method}, but TemperatureScaler was "
                    "fitted without groups."
                )
            out = apply_temperature(logits, self.temperature_, output, **options)
            return self._restore(out, xp, layout)
        if layout is not None:
            raise ValueError(
                "groups need 2-D logits (n_samples, n_classes): reshape per-"
                "position logits to one row per position first."
            )
        labels, temps, _ = fitted
        _, codes = group_codes(groups, logits, labels=labels)
        unseen = codes < 0
        if unseen.any():
            warnings.warn(
                "groups holds labels not seen in fit (first "
                f"{first_unseen(groups, logits, codes)}): those rows get the "
                f"pooled temperature {self.temperature_!r}.",
                UserWarning,
                stacklevel=3,
            )
        per_row = np.where(unseen, self.temperature_, temps[codes])
        return _by_temperature(logits, per_row, output, options)

    def _softmax(self, logits, method: str, *, log: bool, groups=None):
        """(log-)softmax of ``logits / T`` in the input's space."""
        return self._apply(logits, method, "log_proba" if log else "proba", groups)

    def decision_function(self, logits, groups=None):
        """Calibrated scores, as a scikit-learn classifier returns them.

        Parameters
        ----------
        logits : array-like or dask array of shape (n_samples, n_classes)
            Logits to calibrate.

        groups : array-like of shape (n_samples,) or "predicted", default=None
            With a scaler fitted with ``groups``: each row's group, whose
            temperature divides its logits (a group not seen in ``fit``
            gets the pooled ``temperature_``, with a warning). ``None``:
            the predicted class if the scaler was fitted with
            ``groups="predicted"``, else ``temperature_`` for every row.

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
        scores = self.transform(logits, groups=groups)
        if self.n_features_in_ != 2 or scores.ndim != 2:
            return scores
        return scores[:, 1] - scores[:, 0]

    def predict(self, logits, groups=None):
        """Class index of the largest logit (first one on ties).

        Parameters
        ----------
        logits : array-like or dask array of shape (n_samples, n_classes)
            Logits (a Dask array gives a lazy Dask array).

        groups : array-like of shape (n_samples,) or "predicted", default=None
            Accepted for symmetry with :meth:`predict_proba`: a temperature
            never changes a label, so it is not used.

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
        logits, xp, layout = self._logits(logits, "predict")
        if xp is not None:
            return self._restore(xp.argmax(logits, axis=1), xp, layout)
        return self._restore(logits.argmax(axis=1), xp, layout)

    def to_torch(self, model=None):
        """The fitted temperature as a PyTorch module (needs torch).

        Parameters
        ----------
        model : torch.nn.Module, default=None
            The model whose logits the temperature divides; ``None``: an
            ``nn.Identity()``, a module that divides the logits it is given.

        Returns
        -------
        skts.torch.TemperatureScaledModule
            ``model`` wrapped, ``temperature`` a buffer holding
            ``temperature_`` (float32; float64 for a float64 model).

        Examples
        --------
        >>> import numpy as np
        >>> from skts import TemperatureScaler
        >>> logits = np.log([[9.0, 1.0]] * 4)
        >>> scaler = TemperatureScaler([0.5, 1.0, 2.0]).fit(logits, [0, 0, 0, 1])
        >>> module = scaler.to_torch()  # doctest: +SKIP
        >>> float(module.temperature)  # doctest: +SKIP
        2.0
        """
        check_is_fitted(self)
        try:
            import torch
        except ImportError:
            raise ImportError(
                "TemperatureScaler.to_torch needs PyTorch: pip install torch"
            ) from None
        from skts._torch import TemperatureScaledModule

        module = TemperatureScaledModule(
            torch.nn.Identity() if model is None else model, self.temperature_
        )
        module.scaler = self
        return module

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        tags.input_tags.one_d_array = True  # binary logits of shape (n,)
        tags.array_api_support = True
        return tags
