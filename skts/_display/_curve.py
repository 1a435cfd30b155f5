"""The validation loss over the candidate temperatures."""

from __future__ import annotations

import numpy as np

from skts._classifier import TemperatureScaledClassifier
from skts._display._common import _check_artist_kwargs, _next_color, _pyplot
from skts._numerics import default_temperatures, nll_many
from skts._responses import encode_seen
from skts._scaler import TemperatureScaler
from skts._validation import (
    check_class_indices,
    check_layout,
    check_logits,
    check_temperatures,
)


class TemperatureCurveDisplay:
    """Validation loss over the candidate temperatures, the chosen one marked.

    A chosen temperature at an end of the range (a
    :class:`~skts.BoundaryTemperatureWarning`) shows at once as a marker on
    the edge of the curve.

    Parameters
    ----------
    temperatures : ndarray of shape (n_candidates,)
        Sorted candidate temperatures.
    losses : ndarray of shape (n_candidates,)
        Validation loss at each candidate.
    temperature : float, default=None
        The chosen temperature.
    estimator_name : str, default=None
        Name shown in the legend.

    Attributes
    ----------
    ax_ : matplotlib Axes
        Axes of the plot (:class:`matplotlib.axes.Axes`).
    figure_ : matplotlib Figure
        Figure holding the axes (:class:`matplotlib.figure.Figure`).
    line_ : matplotlib Line2D
        The loss curve.
    marker_ : matplotlib Line2D or None
        The chosen temperature.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> from skts import TemperatureCurveDisplay
    >>> logits = np.log([[9.0, 1.0]] * 4)
    >>> y = [0, 0, 0, 1]
    >>> disp = TemperatureCurveDisplay.from_logits(logits, y)
    >>> disp.ax_.get_xscale(), disp.marker_.get_label()
    ('log', 'chosen T = 1.995')
    """

    def __init__(self, *, temperatures, losses, temperature=None, estimator_name=None):
        self.temperatures = temperatures
        self.losses = losses
        self.temperature = temperature
        self.estimator_name = estimator_name

    def plot(self, ax=None, *, name=None, **kwargs):
        """Draw the curve.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Axes to draw on; ``None`` makes a new figure.
        name : str, default=None
            Legend name; default ``estimator_name``.
        **kwargs : dict
            Passed to ``Axes.plot`` for the curve.

        Returns
        -------
        display : TemperatureCurveDisplay
            ``self``, with the artists set.

        Examples
        --------
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> import numpy as np
        >>> from skts import TemperatureCurveDisplay
        >>> disp = TemperatureCurveDisplay(
        ...     temperatures=np.array([0.5, 1.0, 2.0]),
        ...     losses=np.array([0.9, 0.6, 0.7]),
        ...     temperature=1.0,
        ... ).plot()
        >>> disp.marker_.get_label()
        'chosen T = 1'
        """
        plt = _pyplot("TemperatureCurveDisplay")
        _check_artist_kwargs(kwargs, "line", "TemperatureCurveDisplay.plot")
        if ax is None:
            _, ax = plt.subplots(figsize=(5.5, 3.8), layout="constrained")
        name = self.estimator_name if name is None else name
        color = kwargs.pop("color", None) or _next_color(ax)
        temps = np.asarray(self.temperatures, dtype=np.float64)
        losses = np.asarray(self.losses, dtype=np.float64)
        (self.line_,) = ax.plot(
            temps, losses, label=name or "validation NLL", color=color, **kwargs
        )
        self.marker_ = None
        if self.temperature is not None:
            t = float(self.temperature)
            loss = np.interp(np.log(t), np.log(temps), losses)
            edge = t <= temps[0] or t >= temps[-1]
            label = f"chosen T = {t:.4g}"
            if edge:
                # At an end of the grid the loss may keep falling beyond it:
                # say so, and mark the edge, so the choice cannot be missed.
                label += " (edge of the grid)"
                ax.axvline(t, color="tab:red", linestyle=":", linewidth=1)
            (self.marker_,) = ax.plot(
                [t],
                [loss],
                "D" if edge else "o",
                color="tab:red",
                markersize=7 if edge else 6,
                label=label,
                zorder=3,
            )
        ax.set_xscale("log")
        # A logarithmic loss axis shows the minimum when the loss explodes as
        # T -> 0; a loss that falls to 0 (separable data) would vanish from
        # it, so that curve keeps a linear axis.
        finite = losses[np.isfinite(losses)]
        if finite.size and finite.min() > 0 and finite.max() > 10 * finite.min():
            ax.set_yscale("log")
        ax.set(xlabel="Temperature T", ylabel="Validation log-loss")
        ax.legend(loc="best", fontsize="small")
        self.ax_ = ax
        self.figure_ = ax.figure
        return self

    @classmethod
    def from_logits(
        cls,
        logits,
        y,
        *,
        temperatures=None,
        temperature=None,
        name=None,
        ax=None,
        class_axis=1,
        ignore_index=None,
        **kwargs,
    ):
        """Loss curve of held-out logits with class indices ``y``.

        Parameters
        ----------
        logits : array-like or tensor of shape (n_samples, n_classes)
            Held-out logits. Binary logits may be one column, shape
            ``(n_samples,)``: the logit of class 1, i.e. logits ``(0, d)``.
        y : array-like of shape (n_samples,)
            Class indices in ``0..n_classes-1``.
        temperatures : array-like of shape (n_candidates,), default=None
            Candidates; default the 1001-point grid of skts.
        temperature : float, default=None
            Temperature to mark; default the one skts's rule chooses from
            these logits and candidates (as :class:`~skts.TemperatureScaler`
            fitted on them would, with its
            :class:`~skts.BoundaryTemperatureWarning` when that is an end of
            the grid, which the plot then marks).
        name : str, default=None
            Legend name.
        ax : matplotlib Axes, default=None
            Axes to draw on.
        class_axis : int, default=1
            Axis of the classes of logits of more than two dimensions
            (``(n_samples, n_classes, d1, ..., dk)``, ``y`` of shape
            ``(n_samples, d1, ..., dk)``; as :class:`~skts.TemperatureScaler`).
        ignore_index : int, default=None
            A label whose positions are left out (``-100``: padding).
        **kwargs : dict
            Passed to :meth:`plot`.

        Returns
        -------
        display : TemperatureCurveDisplay
            The drawn display.

        Examples
        --------
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> import numpy as np
        >>> from skts import TemperatureCurveDisplay
        >>> logits = np.log([[9.0, 1.0]] * 4)
        >>> disp = TemperatureCurveDisplay.from_logits(
        ...     logits, [0, 0, 0, 1], temperatures=[0.5, 1.0, 2.0, 4.0], temperature=2.0
        ... )
        >>> disp.losses.round(4)
        array([1.1109, 0.6547, 0.5623, 0.5931])
        >>> chosen = TemperatureCurveDisplay.from_logits(logits, [0, 0, 0, 1])
        >>> chosen.marker_.get_label()
        'chosen T = 1.995'
        """
        if temperature is None:  # the rule's choice on these logits
            temperature = (
                TemperatureScaler(
                    temperatures=temperatures,
                    class_axis=class_axis,
                    ignore_index=ignore_index,
                )
                .fit(logits, y)
                .temperature_
            )

        logits, y, _, _ = check_layout(
            logits, y, class_axis=class_axis, ignore_index=ignore_index
        )
        logits = check_logits(logits, warn_probabilities=True)
        y = check_class_indices(y, logits.shape)
        grid = np.unique(check_temperatures(temperatures))
        losses = nll_many(logits, y, grid)
        display = cls(
            temperatures=grid,
            losses=losses,
            temperature=temperature,
            estimator_name=name,
        )
        return display.plot(ax=ax, **kwargs)

    @classmethod
    def from_estimator(cls, estimator, X, y, *, name=None, ax=None, **kwargs):
        """Loss curve of a fitted :class:`~skts.TemperatureScaledClassifier` or
        :class:`~skts.TemperatureScaler` on held-out ``(X, y)``.

        Parameters
        ----------
        estimator : TemperatureScaledClassifier or TemperatureScaler
            Fitted; its candidates and ``temperature_`` are used.
        X : array-like
            Held-out inputs (logits for a ``TemperatureScaler``).
        y : array-like of shape (n_samples,)
            True labels (class indices for a ``TemperatureScaler``).
        name : str, default=None
            Legend name.
        ax : matplotlib Axes, default=None
            Axes to draw on.
        **kwargs : dict
            Passed to :meth:`plot`.

        Returns
        -------
        display : TemperatureCurveDisplay
            The drawn display.

        Examples
        --------
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> import numpy as np
        >>> from skts import TemperatureCurveDisplay
        >>> from skts import TemperatureScaler
        >>> logits = np.log([[9.0, 1.0]] * 4)
        >>> scaler = TemperatureScaler(temperatures=[0.5, 1.0, 2.0, 4.0]).fit(
        ...     logits, [0, 0, 0, 1]
        ... )
        >>> disp = TemperatureCurveDisplay.from_estimator(scaler, logits, [0, 0, 0, 1])
        >>> disp.marker_.get_xdata()[0] == scaler.temperature_
        np.True_
        """
        if isinstance(estimator, TemperatureScaledClassifier):
            logits = estimator._uncalibrated_logits(X)
            y = encode_seen(np.asarray(y), estimator.classes_)
        elif isinstance(estimator, TemperatureScaler):
            estimator._logits(X, "predict_proba")  # (fitted, and X fits it)
            logits = X  # (read as the scaler reads it: classes, ignore_index)
            kwargs.setdefault("class_axis", estimator.class_axis)
            kwargs.setdefault("ignore_index", estimator.ignore_index)
        else:
            raise ValueError(
                "estimator must be a fitted TemperatureScaledClassifier or "
                f"TemperatureScaler; got {type(estimator).__name__}."
            )
        temperatures = (
            default_temperatures()
            if estimator.temperatures is None
            else estimator.temperatures
        )
        return cls.from_logits(
            logits,
            y,
            temperatures=temperatures,
            temperature=estimator.temperature_,
            name=name,
            ax=ax,
            **kwargs,
        )
