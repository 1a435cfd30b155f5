"""The reliability diagram's panels: the Wilson error bars, the smoothed
curve and its band, and below the diagram where the predictions are (the
share per bin, equal-mass bins' edges, or a density).

A mixin of :class:`~skts._display._reliability.ReliabilityDisplay`: the
methods read its fitted values (``edges``, ``counts``, ``accuracy``,
``confidence``, ``lower``, ``upper``, ``strategy``, ``confidence_level``)
and set its artists (``band_``, ``line_``, ``hist_``).
"""

from __future__ import annotations

import numpy as np

from skts._display._common import _has_label


class _Panels:
    def _band_label(self, ax, what: str):
        label = f"{self.confidence_level:.0%} {what}"
        return None if _has_label(ax, label) else label

    def _plot_error_bars(self, ax, color, kind) -> None:
        """Each bin's Wilson interval, as an error bar at the bin's centre
        (bars) or at its mean confidence (line)."""
        full = self.counts > 0
        x = (self.edges[:-1] + self.edges[1:]) / 2 if kind == "bar" else self.confidence
        acc = self.accuracy[full]
        self.band_ = ax.errorbar(
            x[full],
            acc,
            yerr=[acc - self.lower[full], self.upper[full] - acc],
            fmt="none",
            ecolor="black" if kind == "bar" else color,
            elinewidth=1,
            capsize=2,
            label=self._band_label(ax, "interval (Wilson)"),
        )

    def _plot_smooth(self, ax, label, color, show_band, kwargs):
        """The smoothed accuracy over the confidences the predictions can
        take, and its bootstrap band."""
        low = self._axis_low()
        keep = self.confidence >= low - 1e-12
        t = self.confidence[keep]
        if show_band:
            self.band_ = ax.fill_between(
                t,
                self.lower[keep],
                self.upper[keep],
                color=color,
                alpha=0.25,
                linewidth=0,
                label=self._band_label(ax, "band (bootstrap)"),
            )
        line_kwargs = {"linewidth": 2, "label": label}
        line_kwargs.update(kwargs)
        (self.line_,) = ax.plot(t, self.accuracy[keep], color=color, **line_kwargs)
        self.bars_ = self.gap_bars_ = None
        return low, self._xlabel()

    def _plot_density(self, hist_ax, name, color, low, xlabel) -> None:
        """Where the predictions are: the kernel density of the forecasts."""
        keep = self.confidence >= low - 1e-12
        self.hist_ = hist_ax.fill_between(
            self.confidence[keep],
            self.counts[keep],
            color=color,
            alpha=0.35,
            label=name,
        )
        hist_ax.set(ylabel="Density", xlabel=xlabel, xlim=(low, 1))
        hist_ax.set_ylim(bottom=0)
        _, names = hist_ax.get_legend_handles_labels()
        if len([n for n in names if n]) > 1:
            hist_ax.legend(fontsize="small", loc="upper left")

    def _plot_histogram(self, hist_ax, name, color, low, xlabel, kind="bar"):
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
                f"{int(np.sum(full))} equal-mass bins of about {per_bin:.4g} samples",
                fontsize="small",
                loc="left",
            )
        else:
            # (kind="line": outlines, readable over another display's bars)
            style = (
                {"fill": False, "edgecolor": color, "linewidth": 1.5}
                if kind == "line"
                else {"alpha": 0.5, "color": color, "edgecolor": "black"}
            )
            self.hist_ = hist_ax.bar(
                lefts, share, width=widths, align="edge", label=name, **style
            )
            hist_label = "Share of samples"
        hist_ax.set(ylabel=hist_label, xlabel=xlabel, xlim=(low, 1))
        _, names = hist_ax.get_legend_handles_labels()
        if len([n for n in names if n]) > 1:
            # On the side away from the mass of the predictions.
            centre = np.average(lefts + widths / 2, weights=self.counts + 1e-12)
            side = "upper left" if centre > (low + 1.0) / 2 else "upper right"
            hist_ax.legend(fontsize="small", loc=side)
