"""The reliability diagram: binned (bars or a line, with Wilson bands) or
kernel-smoothed (with bootstrap bands), and the share of predictions below."""

from __future__ import annotations

import numpy as np

from skts._display._common import (
    _check_artist_kwargs,
    _has_label,
    _next_color,
    _pyplot,
    _resolve_class,
)
from skts._display._panels import _Panels
from skts._validation import flat_positions
from skts.metrics import reliability_curve, smooth_reliability_curve

# The gap's two directions, as the legend names them.
_OVER = "overconfident (confidence > accuracy)"
_UNDER = "underconfident (confidence < accuracy)"


class ReliabilityDisplay(_Panels):
    """Reliability diagram: accuracy per confidence bin against the diagonal.

    Build it with :meth:`from_estimator` or :meth:`from_predictions`; call
    :meth:`plot` to draw it again elsewhere. The top panel shows the accuracy
    of each bin as a bar, the gap from it to the bin's mean confidence as a
    hatched bar (red where the model is overconfident, the mean confidence
    above the accuracy; navy where it is underconfident) and the ECE in the
    legend; the bottom panel shows the share of samples per bin, which the
    bars alone hide. A second display drawn on the same axes is a line
    through its bins' (mean confidence, accuracy) points, with its share of
    samples as outlined bars, so both stay readable. With ``kind="smooth"``
    the top panel is instead the kernel-smoothed accuracy (no bins; Błasiok
    & Nakkiran's smooth reliability diagram) with a bootstrap band, the
    legend gives the smooth ECE, and the bottom panel the density of the
    predictions.

    Parameters
    ----------
    confidence, accuracy, counts : ndarray of shape (n_bins,)
        Per-bin data from :func:`skts.metrics.reliability_curve`; for a
        smooth diagram, the grid, the smoothed accuracy and the density of a
        :class:`skts.metrics.SmoothCurve`.
    edges : ndarray of shape (n_bins + 1,) or None
        Bin edges; ``None`` for a smooth diagram.
    ece : float
        Expected calibration error of the curve (shown in the legend); the
        smooth ECE for a smooth diagram.
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
    lower, upper : ndarray of shape (n_bins,) or (n_points,), default=None
        A band around the accuracy: Wilson intervals per bin
        (:meth:`skts.metrics.ReliabilityCurve.interval`) or the smooth
        curve's bootstrap band.
    confidence_level : float, default=0.95
        Level of the band (shown in its legend entry).
    bandwidth : float, default=None
        Kernel standard deviation of a smooth diagram.

    Attributes
    ----------
    ax_ : matplotlib Axes
        Axes of the diagram (:class:`matplotlib.axes.Axes`).
    hist_ax_ : matplotlib Axes or None
        Axes of the histogram panel.
    figure_ : matplotlib Figure
        Figure holding the axes (:class:`matplotlib.figure.Figure`).
    bars_ : matplotlib BarContainer or None
        Accuracy bars (``kind="bar"``).
    gap_bars_ : matplotlib BarContainer or None
        Bars from accuracy to mean confidence, overconfident bins' and
        underconfident bins'.
    line_ : matplotlib Line2D or None
        Accuracy against mean confidence, one point per bin (``kind="line"``),
        or the smooth curve.
    hist_ : matplotlib BarContainer, LineCollection, PolyCollection or None
        Share of samples per bin (bars; outlined for ``kind="line"``); for
        equal-mass bins, whose shares are equal by construction, their edges
        (lines); for a smooth diagram, the density (a filled curve).
    band_ : matplotlib artist or None
        The band: error bars (binned) or a filled region (smooth).

    See Also
    --------
    skts.metrics.reliability_curve : The data behind the diagram.
    skts.metrics.smooth_reliability_curve : The data of a smooth diagram.

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
        lower=None,
        upper=None,
        confidence_level=0.95,
        bandwidth=None,
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
        self.lower = lower
        self.upper = upper
        self.confidence_level = confidence_level
        self.bandwidth = bandwidth

    def plot(
        self,
        ax=None,
        *,
        hist_ax=None,
        name=None,
        kind=None,
        show_gap=None,
        show_band=None,
        **kwargs,
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
        kind : {"bar", "line", "smooth"}, default=None
            Accuracy as bars over the bins, or as a line through the bin means
            (easier to read when several displays share one axes); default
            ``"bar"`` on empty axes and ``"line"`` on axes that already hold
            a diagram. A smooth diagram (``edges is None``) is drawn only as
            ``"smooth"``, its default.
        show_gap : bool, default=None
            Draw hatched bars from the accuracy to the mean confidence;
            default: with ``kind="bar"``. Red, above the accuracy: the bin's
            predictions were more confident than right (overconfident); navy,
            below it: less (underconfident). Each direction has its legend
            entry.
        show_band : bool, default=None
            Draw the band (``lower``, ``upper``) when there is one: error bars
            on the bins, a shaded region around a smooth curve; default: for
            a smooth diagram only.
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
        >>> disp.ax_.get_legend().get_texts()[0].get_text()
        'my model (ECE = 0.2750)'
        """
        plt = _pyplot("ReliabilityDisplay")
        smooth = self.edges is None
        if kind is None:
            # A second diagram on the same axes: a line over the first's bars.
            second = ax is not None and _has_label(ax, "Perfectly calibrated")
            kind = "smooth" if smooth else ("line" if second else "bar")
        if smooth and kind != "smooth":
            raise ValueError(
                f"a smooth diagram (edges=None) is drawn with kind='smooth'; got "
                f"{kind!r} (use from_predictions(..., kind={kind!r}) for bins)."
            )
        if not smooth and kind not in ("bar", "line"):
            raise ValueError(
                f"kind must be 'bar' or 'line' for binned data (or 'smooth' "
                f"from from_predictions/from_estimator); got {kind!r}."
            )
        _check_artist_kwargs(
            kwargs, "line" if smooth else kind, "ReliabilityDisplay.plot"
        )
        if show_band is None:
            show_band = smooth and self.lower is not None
        if show_band and self.lower is None:
            raise ValueError(
                "show_band=True needs a band: this display has no lower/upper "
                "(from_predictions computes one)."
            )
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
        label = f"{'smECE' if smooth else 'ECE'} = {self.ece:.4f}"
        if name is not None:
            label = f"{name} ({label})"
        # Each display on the same axes gets its own colour.
        color = kwargs.pop("color", None) or _next_color(ax)
        self.band_ = None
        if smooth:
            low, xlabel = self._plot_smooth(ax, label, color, show_band, kwargs)
        else:
            low, xlabel = self._plot_diagram(ax, label, color, kind, show_gap, kwargs)
            if show_band:
                self._plot_error_bars(ax, color, kind)
        self._finish_axes(ax, low, label)
        self.hist_ = None
        if hist_ax is not None:
            if smooth:
                self._plot_density(hist_ax, name, color, low, xlabel)
            else:
                self._plot_histogram(hist_ax, name, color, low, xlabel, kind)
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
        self.bars_ = self.line_ = None
        if kind == "bar":
            # (no marker at the bin means: the gap bar's far end is the
            # bin's mean confidence)
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
        else:
            line_kwargs = {"marker": "o", "label": label}
            line_kwargs.update(kwargs)
            (self.line_,) = ax.plot(
                self.confidence[full], self.accuracy[full], color=color, **line_kwargs
            )
        self.gap_bars_ = None
        if show_gap if show_gap is not None else kind == "bar":
            from matplotlib.container import BarContainer

            gap = self.confidence - self.accuracy
            patches = []
            for over, hatch, edge, text in (
                (True, "//", "tab:red", _OVER),
                (False, "\\\\", "navy", _UNDER),
            ):
                side = full & ((gap > 0) if over else (gap <= 0))
                if not side.any():
                    continue
                patches += ax.bar(
                    lefts[side],
                    gap[side],
                    bottom=self.accuracy[side],
                    width=widths[side],
                    align="edge",
                    fill=False,
                    hatch=hatch,
                    edgecolor=edge,
                    linewidth=0.5,
                    label=None if _has_label(ax, text) else text,
                ).patches
            self.gap_bars_ = BarContainer(patches)
        return self._axis_low(), self._xlabel()

    def _axis_low(self) -> float:
        # The top-label confidence is at least 1/K: the axis starts there.
        if self.class_ is None and self.n_classes:
            return 1.0 / self.n_classes
        return 0.0

    def _xlabel(self) -> str:
        if self.class_ is None:
            return "Confidence (top-label probability)"
        shown = self.class_ if self.class_label is None else self.class_label
        return f"p(class {shown})"

    def _finish_axes(self, ax, low, label) -> None:
        """The diagonal, the limits, the y label and the legend."""
        if not _has_label(ax, "Perfectly calibrated"):
            ax.plot(
                [low, 1], [low, 1], "k--", linewidth=1, label="Perfectly calibrated"
            )
        if self.class_ is None:
            ylabel = "Accuracy"
        else:
            shown = self.class_ if self.class_label is None else self.class_label
            ylabel = f"Frequency of class {shown}"
        ax.set(xlim=(low, 1), ylim=(0, 1), ylabel=ylabel)
        # One entry per display, in the order they were drawn (matplotlib
        # would list lines before bars), then the diagonal, gaps and bands.
        drawn = ax.__dict__.setdefault("_skts_legend_order", [])
        drawn.append(label)
        handles, labels = ax.get_legend_handles_labels()
        rank = {name: i for i, name in enumerate(drawn)}
        order = sorted(
            range(len(labels)), key=lambda i: (rank.get(labels[i], len(rank)), i)
        )
        # The legend goes above the diagram, never over the data.
        ax.legend(
            [handles[i] for i in order],
            [labels[i] for i in order],
            loc="lower left",
            bbox_to_anchor=(0.0, 1.02, 1.0, 0.2),
            mode="expand",
            borderaxespad=0.0,
            fontsize="small",
        )

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
        n_bootstrap=200,
        confidence_level=0.95,
        random_state=None,
        class_axis=1,
        ignore_index=None,
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
        n_bootstrap : int, default=200
            ``kind="smooth"``: resamples of the rows behind the band (the
            percentile band of the resampled smoothed curves at the same
            bandwidth, as relplot draws it); 0 for none.
        confidence_level : float, default=0.95
            Level of the band: the smooth curve's bootstrap band, or the
            binned diagram's Wilson intervals (``show_band=True``).
        random_state : int, RandomState instance or None, default=None
            Seed of the smooth band's resamples.
        class_axis : int, default=1
            Axis of the classes of ``y_prob`` of more than two dimensions
            (per-pixel or per-token probabilities, ``y_true`` of shape
            ``(n_samples, d1, ..., dk)``; every position one sample).
        ignore_index : int, default=None
            A label whose positions are left out (``-100``: padding).
        **kwargs : dict
            Passed to :meth:`plot` (unknown names are a ``TypeError``):
            ``kind`` (``"bar"``, ``"line"``, or ``"smooth"``: the
            kernel-smoothed diagram of
            :func:`skts.metrics.smooth_reliability_curve`, with the smooth
            ECE in the legend; bins are then not used), ``show_gap``,
            ``show_band`` (for binned diagrams, the Wilson interval of each
            bin's accuracy as an error bar), and artist properties.

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
        >>> texts[0]
        'all (n=20) (ECE = 0.0000)'
        >>> texts[1:3]
        ['a (n=10) (ECE = 0.1500)', 'b (n=10) (ECE = 0.1500)']
        >>> texts[3], sorted(disp.group_displays_)
        ('Perfectly calibrated', ['a', 'b'])
        """
        kind = kwargs.get("kind")
        plot_kw = {
            k: kwargs[k] for k in ("kind", "show_gap", "show_band") if k in kwargs
        }
        _check_artist_kwargs(
            {k: v for k, v in kwargs.items() if k not in plot_kw},
            "line" if kind == "smooth" else kind or "bar",
            "ReliabilityDisplay.from_predictions",
        )
        if groups is not None:  # (one per sample, or one per position)
            _, _, groups = flat_positions(
                y_true, y_prob, groups, class_axis=class_axis, ignore_index=ignore_index
            )
        y_true, y_prob, sample_weight = flat_positions(
            y_true,
            y_prob,
            sample_weight,
            class_axis=class_axis,
            ignore_index=ignore_index,
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
                n_bootstrap=n_bootstrap,
                confidence_level=confidence_level,
                random_state=random_state,
                **kwargs,
            )
        common = dict(
            estimator_name=name,
            class_=column,
            n_classes=n_columns,
            class_label=class_label,
            confidence_level=confidence_level,
        )
        if kind == "smooth":
            band = kwargs.get("show_band") is not False
            smooth = smooth_reliability_curve(
                y_true,
                y_prob,
                class_=column,
                n_bootstrap=n_bootstrap if band else 0,
                confidence_level=confidence_level,
                random_state=random_state,
                sample_weight=sample_weight,
                labels=labels,
            )
            display = cls(
                confidence=smooth.confidence,
                accuracy=smooth.accuracy,
                counts=smooth.density,
                edges=None,
                ece=smooth.error,
                lower=smooth.lower,
                upper=smooth.upper,
                bandwidth=smooth.bandwidth,
                **common,
            )
        else:
            curve = reliability_curve(
                y_true,
                y_prob,
                n_bins=n_bins,
                strategy=strategy,
                class_=column,
                sample_weight=sample_weight,
                labels=labels,
            )
            lower, upper = curve.interval(confidence_level)
            display = cls(
                confidence=curve.confidence,
                accuracy=curve.accuracy,
                counts=curve.counts,
                edges=curve.edges,
                ece=curve.calibration_error(),
                strategy=strategy,
                lower=lower,
                upper=upper,
                **common,
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
        smooth = kw.get("kind") == "smooth"
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
                kind="smooth" if smooth else "line",
                show_band=False,
                color=f"C{i + 1}",
                **plot_kw,
            )
            hist = everything.group_displays_[label].hist_
            if smooth:
                if hist is not None:
                    # The group's density as an outline over the whole's.
                    hist.set(facecolor="none", edgecolor=f"C{i + 1}", linewidth=1.5)
                continue
            if hist is not None and not hasattr(hist, "patches"):
                # Equal-mass bins: the group's bin edges, dashed over the whole's.
                hist.set(color=f"C{i + 1}", linestyle="--", linewidth=1.0)
                continue
            for bar in [] if hist is None else hist.patches:
                # Outlines: the groups' shares stay readable over the whole's.
                bar.set(fill=False, edgecolor=f"C{i + 1}", linewidth=1.5, alpha=1.0)
        if smooth and everything.hist_ax_ is not None:
            # (the legend again: its entries were copied before the outlines)
            everything.hist_ax_.legend(fontsize="small", loc="upper left")
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
            ``n_bootstrap``, ``confidence_level``, ``random_state`` as in
            :meth:`from_predictions`; the rest passed to :meth:`plot`
            (``kind="smooth"`` for the kernel-smoothed diagram, ``show_band``;
            unknown names are a ``TypeError``).
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
