"""What the displays share: matplotlib imported lazily, artist keyword
checks, one colour per display on shared axes, and which column a
one-vs-rest diagram draws."""

from __future__ import annotations

import numpy as np


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
