"""Reliability diagrams and validation-loss curves (matplotlib imported lazily)."""

from __future__ import annotations

import numpy as np

from skts._classifier import TemperatureScaledClassifier
from skts._numerics import default_temperatures, nll_many
from skts._responses import encode_seen
from skts._scaler import TemperatureScaler
from skts._validation import check_class_indices, check_logits, check_temperatures
from skts.metrics import reliability_curve

__all__ = ["ReliabilityDisplay", "TemperatureCurveDisplay"]


def _pyplot(what: str):
    """``matplotlib.pyplot``, or an ImportError naming the ``plot`` extra."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - exercised without matplotlib
        raise ImportError(
            f"{what} needs matplotlib: pip install matplotlib (skts's 'plot' extra)"
        ) from exc
    return plt


def _has_label(ax, label: str) -> bool:
    _, labels = ax.get_legend_handles_labels()
    return label in labels


def _check_artist_kwargs(kwargs: dict, artist: str, where: str) -> None:
    """Keyword arguments for a matplotlib artist: unknown ones are a
    TypeError that names them (not an error deep inside matplotlib)."""
    if not kwargs:
        return
    from matplotlib.artist import ArtistInspector
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle

    cls = {"bar": Rectangle, "line": Line2D}[artist]
    known = set(ArtistInspector(cls).get_setters()) | {"color", "label"}
    unknown = sorted(k for k in kwargs if k not in known)
    if unknown:
        raise TypeError(
            f"{where} got unexpected keyword argument(s) {unknown}; the rest "
            f"are passed to matplotlib's {cls.__name__} (e.g. color, alpha, "
            "linewidth)."
        )


def _next_color(ax) -> str:
    """The next colour of skts's displays on ``ax``: every display drawn on
    the same axes gets its own (C0, C1, ...)."""
    n = getattr(ax, "_skts_displays", 0)
    ax._skts_displays = n + 1
    return f"C{n % 10}"


def _resolve_class(class_, pos_label, labels, y_true, n_columns):
    """The column of a one-vs-rest diagram: ``class_`` is a class label (as
    in ``labels``, else the sorted labels of ``y_true``) or else a column
    index; ``pos_label`` names the positive class of a binary problem."""
    if pos_label is not None:
        if class_ is not None:
            raise ValueError("give class_ or pos_label, not both.")
        if n_columns != 2:
            raise ValueError(
                f"pos_label is for binary problems; y_prob has {n_columns} columns "
                "(use class_ for a one-vs-rest diagram)."
            )
        class_ = pos_label
    if class_ is None:
        return None, None
    names = np.asarray(labels) if labels is not None else np.unique(y_true)
    if len(names) == n_columns:
        match = np.flatnonzero(names == class_)
        if match.size:
            return int(match[0]), names[match[0]].item()
    if isinstance(class_, (int, np.integer)) and 0 <= class_ < n_columns:
        label = names[class_].item() if len(names) == n_columns else class_
        return int(class_), label
    raise ValueError(
        f"class_ must be a class label or a column index in [0, {n_columns}); "
        f"got {class_!r}."
    )


class ReliabilityDisplay:
    """Reliability diagram: accuracy per confidence bin against the diagonal.

    Build it with :meth:`from_estimator` or :meth:`from_predictions`; call
    :meth:`plot` to draw it again elsewhere. The top panel shows the accuracy
    of each bin as a bar, the gap to the diagonal as a hatched bar and the ECE
    in the legend; the bottom panel shows the share of samples per bin, which
    the bars alone hide.

    Parameters
    ----------
    confidence, accuracy, counts : ndarray of shape (n_bins,)
        Per-bin data from :func:`skts.metrics.reliability_curve`.
    edges : ndarray of shape (n_bins + 1,)
        Bin edges.
    ece : float
        Expected calibration error of the curve (shown in the legend).
    estimator_name : str, default=None
        Name shown in the legend.
    class_ : int, default=None
        Column of a one-vs-rest diagram, ``None`` for the top-label diagram.
    n_classes : int, default=None
        Number of classes: the top-label axis starts at ``1 / n_classes``
        (no confidence is lower).
    class_label : object, default=None
        Label of the class ``class_``, shown on the axis.
    strategy : {"uniform", "quantile"}, default="uniform"
        How the bins were made; quantile bins hold equal shares by
        construction, so their histogram shows the density instead.

    Attributes
    ----------
    ax_ : matplotlib Axes
        Axes of the diagram.
    hist_ax_ : matplotlib Axes or None
        Axes of the histogram panel.
    figure_ : matplotlib Figure
        Figure holding the axes.
    bars_ : matplotlib BarContainer
        Accuracy bars.
    gap_bars_ : matplotlib BarContainer or None
        Bars from accuracy to mean confidence.
    line_ : matplotlib Line2D
        Mean confidence against accuracy (markers at bin means).
    hist_ : matplotlib BarContainer, LineCollection or None
        Share of samples per bin (bars); for equal-mass bins, whose shares
        are equal by construction, their edges (lines).

    See Also
    --------
    skts.metrics.reliability_curve : The data behind the diagram.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from skts import ReliabilityDisplay
    >>> disp = ReliabilityDisplay.from_predictions([0, 1, 1, 1], [0.2, 0.9, 0.8, 0.6])
    >>> disp.hist_ax_.get_xlabel(), disp.ax_.get_ylabel()
    ('Confidence (top-label probability)', 'Accuracy')
    """

    def __init__(
        self,
        *,
        confidence,
        accuracy,
        counts,
        edges,
        ece,
        estimator_name=None,
        class_=None,
        n_classes=None,
        class_label=None,
        strategy="uniform",
    ):
        self.confidence = confidence
        self.accuracy = accuracy
        self.counts = counts
        self.edges = edges
        self.ece = ece
        self.estimator_name = estimator_name
        self.class_ = class_
        self.n_classes = n_classes
        self.class_label = class_label
        self.strategy = strategy

    def plot(
        self, ax=None, *, hist_ax=None, name=None, kind="bar", show_gap=None, **kwargs
    ):
        """Draw the diagram.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Axes to draw on. ``None`` makes a new figure with a histogram panel
            below the diagram. Passing the ``ax_`` (and ``hist_ax_``) of another
            display draws both on the same axes, to compare them.
        hist_ax : matplotlib Axes, default=None
            Axes of the histogram panel, when ``ax`` is given.
        name : str, default=None
            Legend name; default ``estimator_name``.
        kind : {"bar", "line"}, default="bar"
            Accuracy as bars over the bins, or as a line through the bin means
            (easier to read when several displays share one axes).
        show_gap : bool, default=None
            Draw hatched bars from accuracy to mean confidence; default: with
            ``kind="bar"``.
        **kwargs : dict
            Passed to ``Axes.bar`` (``kind="bar"``) or ``Axes.plot``.

        Returns
        -------
        display : ReliabilityDisplay
            ``self``, with the artists set.

        Examples
        --------
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> from skts import ReliabilityDisplay
        >>> from skts.metrics import reliability_curve
        >>> curve = reliability_curve([0, 1, 1, 1], [0.9, 0.9, 0.9, 0.6], n_bins=5)
        >>> disp = ReliabilityDisplay(
        ...     confidence=curve.confidence, accuracy=curve.accuracy,
        ...     counts=curve.counts, edges=curve.edges, ece=curve.calibration_error(),
        ... )
        >>> disp = disp.plot(name="my model")
        >>> disp.ax_.get_legend().get_texts()[1].get_text()
        'my model (ECE = 0.2750)'
        """
        plt = _pyplot("ReliabilityDisplay")
        if kind not in ("bar", "line"):
            raise ValueError(f"kind must be 'bar' or 'line'; got {kind!r}.")
        _check_artist_kwargs(kwargs, kind, "ReliabilityDisplay.plot")
        if ax is None:
            _, (ax, hist_ax) = plt.subplots(
                2,
                1,
                sharex=True,
                figsize=(5.5, 6.5),
                gridspec_kw={"height_ratios": [3, 1]},
                layout="constrained",  # no label is cut
            )
        name = self.estimator_name if name is None else name
        label = f"ECE = {self.ece:.4f}"
        if name is not None:
            label = f"{name} ({label})"
        # Each display on the same axes gets its own colour.
        color = kwargs.pop("color", None) or _next_color(ax)
        low, xlabel = self._plot_diagram(ax, label, color, kind, show_gap, kwargs)
        self.hist_ = None
        if hist_ax is not None:
            self._plot_histogram(hist_ax, name, color, low, xlabel)
        else:
            ax.set_xlabel(xlabel)
        self.ax_ = ax
        self.hist_ax_ = hist_ax
        self.figure_ = ax.figure
        return self

    def _plot_diagram(self, ax, label, color, kind, show_gap, kwargs):
        """The reliability diagram on ``ax``: accuracy per bin (bars or a
        line), the gap to the mean confidence, the diagonal, the legend.
        Returns the confidence axis' low end and its label."""
        full = self.counts > 0
        widths = np.diff(self.edges)
        lefts = self.edges[:-1]
        self.bars_ = None
        if kind == "bar":
            bar_kwargs = {"alpha": 0.7, "edgecolor": "black", "label": label}
            bar_kwargs.update(kwargs)
            self.bars_ = ax.bar(
                lefts[full],
                self.accuracy[full],
                width=widths[full],
                align="edge",
                color=color,
                **bar_kwargs,
            )
            (self.line_,) = ax.plot(
                self.confidence[full],
                self.accuracy[full],
                "o",
                color=color,
                markersize=3,
            )
        else:
            line_kwargs = {"marker": "o", "label": label}
            line_kwargs.update(kwargs)
            (self.line_,) = ax.plot(
                self.confidence[full], self.accuracy[full], color=color, **line_kwargs
            )
        self.gap_bars_ = None
        if show_gap if show_gap is not None else kind == "bar":
            self.gap_bars_ = ax.bar(
                lefts[full],
                self.confidence[full] - self.accuracy[full],
                bottom=self.accuracy[full],
                width=widths[full],
                align="edge",
                fill=False,
                hatch="//",
                edgecolor="tab:red",
                linewidth=0.5,
                label="gap" if not _has_label(ax, "gap") else None,
            )
        # The top-label confidence is at least 1/K: the axis starts there.
        low = 0.0
        if self.class_ is None and self.n_classes:
            low = 1.0 / self.n_classes
        if not _has_label(ax, "Perfectly calibrated"):
            ax.plot(
                [low, 1], [low, 1], "k--", linewidth=1, label="Perfectly calibrated"
            )
        if self.class_ is None:
            xlabel, ylabel = "Confidence (top-label probability)", "Accuracy"
        else:
            shown = self.class_ if self.class_label is None else self.class_label
            xlabel, ylabel = f"p(class {shown})", f"Frequency of class {shown}"
        ax.set(xlim=(low, 1), ylim=(0, 1), ylabel=ylabel)
        # The legend goes above the diagram, never over the data.
        ax.legend(
            loc="lower left",
            bbox_to_anchor=(0.0, 1.02, 1.0, 0.2),
            mode="expand",
            borderaxespad=0.0,
            fontsize="small",
        )
        return low, xlabel

    def _plot_histogram(self, hist_ax, name, color, low, xlabel):
        """How many predictions each bin holds, on ``hist_ax`` (a diagram
        alone hides it): the share per bin, or, for equal-mass bins, their
        edges."""
        full = self.counts > 0
        widths = np.diff(self.edges)
        lefts = self.edges[:-1]
        share = self.counts / self.counts.sum()
        if self.strategy == "quantile":
            # Equal-mass bins hold equal shares by construction: a bar per
            # bin would say nothing. Their edges say where the predictions
            # are (close edges: many predictions).
            per_bin = self.counts.sum() / max(int(np.sum(full)), 1)
            self.hist_ = hist_ax.vlines(
                self.edges,
                0,
                1,
                color=color,
                linewidth=1,
                label=name,
            )
            hist_ax.set(ylim=(0, 1), yticks=[])
            hist_label = "Bin edges"
            hist_ax.set_title(
                f"{int(np.sum(full))} equal-mass bins of about {per_bin:.4g} "
                "samples",
                fontsize="small",
                loc="left",
            )
        else:
            self.hist_ = hist_ax.bar(
                lefts,
                share,
                width=widths,
                align="edge",
                alpha=0.5,
                color=color,
                edgecolor="black",
                label=name,
            )
            hist_label = "Share of samples"
        hist_ax.set(ylabel=hist_label, xlabel=xlabel, xlim=(low, 1))
        _, names = hist_ax.get_legend_handles_labels()
        if len([n for n in names if n]) > 1:
            # On the side away from the mass of the predictions.
            centre = np.average(lefts + widths / 2, weights=self.counts + 1e-12)
            side = "upper left" if centre > (low + 1.0) / 2 else "upper right"
            hist_ax.legend(fontsize="small", loc=side)

    @classmethod
    def from_predictions(
        cls,
        y_true,
        y_prob,
        *,
        n_bins=15,
        strategy="uniform",
        class_=None,
        labels=None,
        sample_weight=None,
        name=None,
        ax=None,
        hist_ax=None,
        groups=None,
        pos_label=None,
        **kwargs,
    ):
        """Reliability diagram of given probabilities.

        Parameters
        ----------
        y_true : array-like of shape (n_samples,)
            True labels.
        y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
            Predicted probabilities (1-D: positive-class column of a binary
            problem).
        n_bins : int, default=15
            Number of bins.
        strategy : {"uniform", "quantile"}, default="uniform"
            Equal-width or equal-mass bins.
        class_ : label or int, default=None
            ``None``: the top-label diagram (its axis starts at
            ``1 / n_classes``); a class label (of ``labels``, else of the
            sorted labels of ``y_true``), or else a column index: the
            one-vs-rest diagram of that class.
        labels : array-like of shape (n_classes,), default=None
            Labels of the columns of ``y_prob``.
        sample_weight : array-like of shape (n_samples,), default=None
            Sample weights.
        name : str, default=None
            Legend name.
        ax, hist_ax : matplotlib Axes, default=None
            See :meth:`plot`.
        groups : array-like of shape (n_samples,), default=None
            A group label per row: the diagram of all rows (bars) gets one
            line per group on top, in its own colour, named with the group's
            size and ECE. One temperature can calibrate the whole and leave
            each group wrong; this shows it (see
            :func:`skts.metrics.temperature_by_group`).
        pos_label : label, default=None
            For a binary problem, scikit-learn's ``CalibrationDisplay``
            convention: the curve of the positive class ``pos_label`` (the
            same as ``class_=pos_label``).
        **kwargs : dict
            Passed to :meth:`plot` (unknown names are a ``TypeError``).

        Returns
        -------
        display : ReliabilityDisplay
            The drawn display (of all rows); with ``groups``, the groups'
            displays are in its ``group_displays_`` (group label to display).

        Examples
        --------
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> from skts import ReliabilityDisplay
        >>> y = [1] * 6 + [0] * 4 + [1] * 9 + [0] * 1
        >>> disp = ReliabilityDisplay.from_predictions(
        ...     y, [0.75] * 20, groups=["a"] * 10 + ["b"] * 10
        ... )
        >>> texts = [t.get_text() for t in disp.ax_.get_legend().get_texts()]
        >>> texts[1:3]
        ['a (n=10) (ECE = 0.1500)', 'b (n=10) (ECE = 0.1500)']
        >>> texts[3], sorted(disp.group_displays_)
        ('all (n=20) (ECE = 0.0000)', ['a', 'b'])
        """
        plot_kw = {k: kwargs[k] for k in ("kind", "show_gap") if k in kwargs}
        _check_artist_kwargs(
            {k: v for k, v in kwargs.items() if k not in plot_kw},
            kwargs.get("kind", "bar"),
            "ReliabilityDisplay.from_predictions",
        )
        n_columns = 2 if np.ndim(y_prob) == 1 else np.shape(y_prob)[1]
        column, class_label = _resolve_class(
            class_, pos_label, labels, y_true, n_columns
        )
        if groups is not None:
            return cls._from_groups(
                y_true,
                y_prob,
                groups,
                n_bins=n_bins,
                strategy=strategy,
                # (the label: each group resolves it against the same labels)
                class_=class_ if pos_label is None else pos_label,
                labels=labels,
                sample_weight=sample_weight,
                name=name,
                ax=ax,
                hist_ax=hist_ax,
                **kwargs,
            )
        curve = reliability_curve(
            y_true,
            y_prob,
            n_bins=n_bins,
            strategy=strategy,
            class_=column,
            sample_weight=sample_weight,
            labels=labels,
        )
        display = cls(
            confidence=curve.confidence,
            accuracy=curve.accuracy,
            counts=curve.counts,
            edges=curve.edges,
            ece=curve.calibration_error(),
            estimator_name=name,
            class_=column,
            n_classes=n_columns,
            class_label=class_label,
            strategy=strategy,
        )
        return display.plot(ax=ax, hist_ax=hist_ax, **kwargs)

    @classmethod
    def _from_groups(cls, y_true, y_prob, groups, *, labels, sample_weight, **kw):
        from skts._validation import check_groups

        y_true = np.asarray(y_true)
        y_prob = np.asarray(y_prob)
        groups = check_groups(groups, y_true.shape[0])
        if labels is None:
            # The columns of the whole, named once: a group may lack a class.
            labels = np.unique(y_true)
        w = None if sample_weight is None else np.asarray(sample_weight)
        name = kw.pop("name")
        ax, hist_ax = kw.pop("ax"), kw.pop("hist_ax")
        everything = cls.from_predictions(
            y_true,
            y_prob,
            labels=labels,
            sample_weight=w,
            name=f"{'all' if name is None else name} (n={y_true.shape[0]})",
            ax=ax,
            hist_ax=hist_ax,
            **kw,
        )
        plot_kw = {k: kw.pop(k) for k in ("n_bins", "strategy", "class_")}
        everything.group_displays_ = {}
        for i, g in enumerate(np.unique(groups)):
            rows = groups == g
            label = g.item() if hasattr(g, "item") else g
            everything.group_displays_[label] = cls.from_predictions(
                y_true[rows],
                y_prob[rows],
                labels=labels,
                sample_weight=None if w is None else w[rows],
                name=f"{label} (n={int(rows.sum())})",
                ax=everything.ax_,
                hist_ax=everything.hist_ax_,
                kind="line",
                color=f"C{i + 1}",
                **plot_kw,
            )
            hist = everything.group_displays_[label].hist_
            if hist is not None and not hasattr(hist, "patches"):
                # Equal-mass bins: the group's bin edges, dashed over the whole's.
                hist.set(color=f"C{i + 1}", linestyle="--", linewidth=1.0)
                continue
            for bar in [] if hist is None else hist.patches:
                # Outlines: the groups' shares stay readable over the whole's.
                bar.set(fill=False, edgecolor=f"C{i + 1}", linewidth=1.5, alpha=1.0)
        return everything

    @classmethod
    def from_estimator(
        cls,
        estimator,
        X,
        y,
        *,
        n_bins=15,
        strategy="uniform",
        class_=None,
        sample_weight=None,
        name=None,
        ax=None,
        hist_ax=None,
        groups=None,
        pos_label=None,
        **kwargs,
    ):
        """Reliability diagram of a fitted classifier's ``predict_proba`` on ``(X, y)``.

        Parameters
        ----------
        estimator : fitted classifier
            Any classifier with ``predict_proba`` and ``classes_``.
        X : array-like of shape (n_samples, n_features)
            Input data (held out from the fits).
        y : array-like of shape (n_samples,)
            True labels.
        n_bins, strategy, class_, sample_weight, ax, hist_ax, groups, pos_label
            See :meth:`from_predictions` (class labels are those of
            ``classes_``).
        **kwargs : dict
            Passed to :meth:`plot` (unknown names are a ``TypeError``).
        name : str, default=None
            Legend name; default the estimator's class name.

        Returns
        -------
        display : ReliabilityDisplay
            The drawn display.

        Examples
        --------
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> from skts import ReliabilityDisplay
        >>> from sklearn.datasets import load_iris
        >>> from sklearn.linear_model import LogisticRegression
        >>> X, y = load_iris(return_X_y=True)
        >>> model = LogisticRegression(max_iter=1000).fit(X[::2], y[::2])
        >>> disp = ReliabilityDisplay.from_estimator(model, X[1::2], y[1::2], n_bins=5)
        >>> disp.ax_.get_ylabel(), len(disp.counts)
        ('Accuracy', 5)
        """
        if not hasattr(estimator, "predict_proba"):
            raise ValueError(
                "estimator must have predict_proba; "
                f"{type(estimator).__name__} has none."
            )
        y_prob = estimator.predict_proba(X)
        name = type(estimator).__name__ if name is None else name
        return cls.from_predictions(
            y,
            y_prob,
            n_bins=n_bins,
            strategy=strategy,
            class_=class_,
            labels=getattr(estimator, "classes_", None),
            sample_weight=sample_weight,
            name=name,
            ax=ax,
            hist_ax=hist_ax,
            groups=groups,
            pos_label=pos_label,
            **kwargs,
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
        Axes of the plot.
    figure_ : matplotlib Figure
        Figure holding the axes.
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
    >>> disp = TemperatureCurveDisplay.from_logits(logits, y, temperature=2.0)
    >>> disp.ax_.get_xscale()
    'log'
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
            Temperature to mark.
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
        >>> logits = np.log([[9.0, 1.0]] * 4)
        >>> disp = TemperatureCurveDisplay.from_logits(
        ...     logits, [0, 0, 0, 1], temperatures=[0.5, 1.0, 2.0, 4.0], temperature=2.0
        ... )
        >>> disp.losses.round(4)
        array([1.1109, 0.6547, 0.5623, 0.5931])
        """

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
            logits, _ = estimator._logits(X, "predict_proba")
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
