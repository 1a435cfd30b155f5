"""The calibration report: proper scores and calibration errors in one
read, with percentile-bootstrap intervals, also streamed over rows that do not
fit in memory (the command line's ``report``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from numbers import Integral, Real

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.utils import check_random_state

from skts._sklearn_compat import Interval, validate_params
from skts._validation import check_groups, flat_positions
from skts.metrics._binned import (
    ReliabilityCurve,
    _bin_index,
    _check_targets,
    _uniform_edges,
)
from skts.metrics._bootstrap import percentile_interval, resample_weights


@dataclass(frozen=True)
class CalibrationReport:
    """Accuracy, proper scores and binned calibration errors of one forecast.

    Attributes
    ----------
    n_samples : int
        Number of samples.
    values : dict of str to float
        ``accuracy``, ``log_loss``, ``brier_score`` (multiclass, sum over
        classes, in [0, 2]), ``ece``, ``mce`` and ``classwise_ece``.
    intervals : dict of str to tuple of float
        Percentile bootstrap intervals per metric (empty without bootstrap).
    confidence_level : float
        Level of the intervals.
    n_bootstrap : int
        Number of bootstrap resamples.
    groups : dict of group label to CalibrationReport
        The same metrics on each group of rows (``calibration_report(...,
        groups=g)``); empty otherwise.

    Examples
    --------
    >>> from skts.metrics import calibration_report
    >>> report = calibration_report([0, 1, 1, 1], [0.2, 0.9, 0.8, 0.6])
    >>> sorted(report.to_dict()["values"])
    ['accuracy', 'brier_score', 'classwise_ece', 'ece', 'log_loss', 'mce']
    """

    n_samples: int
    values: dict[str, float]
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    confidence_level: float = 0.95
    n_bootstrap: int = 0
    groups: dict = field(default_factory=dict)

    def __getitem__(self, name: str) -> float:
        return self.values[name]

    def to_dict(self) -> dict:
        """Plain-JSON form of the report.

        Examples
        --------
        >>> import json
        >>> from skts.metrics import calibration_report
        >>> report = calibration_report([0, 1, 1], [[0.8, 0.2], [0.3, 0.7], [0.4, 0.6]])
        >>> d = report.to_dict()
        >>> d["n_samples"], round(d["values"]["accuracy"], 4), d["intervals"]
        (3, 1.0, {})
        >>> json.loads(json.dumps(d)) == d  # plain JSON
        True
        """
        return {
            "n_samples": self.n_samples,
            "values": dict(self.values),
            "intervals": {k: list(v) for k, v in self.intervals.items()},
            "confidence_level": self.confidence_level,
            "n_bootstrap": self.n_bootstrap,
            **(
                {"groups": {str(g): r.to_dict() for g, r in self.groups.items()}}
                if self.groups
                else {}
            ),
        }

    def __str__(self) -> str:
        if self.groups:
            return _group_table(self)
        lines = [
            f"{'metric':<15}{'value':>10}" + ("   interval" if self.intervals else "")
        ]
        for name, value in self.values.items():
            line = f"{name:<15}{value:>10.4f}"
            if name in self.intervals:
                lo, hi = self.intervals[name]
                line += f"   [{lo:.4f}, {hi:.4f}]"
            lines.append(line)
        return "\n".join(lines)


def _group_table(report: CalibrationReport) -> str:
    """The overall values beside those of each group (intervals below)."""
    heads = [f"all (n={report.n_samples})"] + [
        f"{g} (n={r.n_samples})" for g, r in report.groups.items()
    ]
    width = max(12, *(len(h) + 2 for h in heads))
    lines = [f"{'metric':<15}" + "".join(f"{h:>{width}}" for h in heads)]
    parts = [report, *report.groups.values()]
    for name in report.values:
        lines.append(
            f"{name:<15}" + "".join(f"{r.values[name]:>{width}.4f}" for r in parts)
        )
    return "\n".join(lines)


def _row_stats(idx, proba, n_bins, log_p_y=None, predicted=None) -> dict[str, NDArray]:
    """Per-row quantities behind every report metric (uniform bins).

    With ``log_p_y`` (each row's log-probability of its label, from logits:
    see :func:`_label_log_proba`) the log-loss is never clipped; without, the
    probabilities are clipped to [eps, 1 - eps] as scikit-learn's log_loss does.
    ``predicted`` (from logits: their first argmax, what ``predict`` says)
    decides correctness; without, the first argmax of ``proba``.
    """
    n = proba.shape[0]
    rows = np.arange(n)
    edges = _uniform_edges(n_bins)
    top = np.argmax(proba, axis=1) if predicted is None else predicted
    conf = proba[rows, top]
    p_y = proba[rows, idx]
    eps = np.finfo(np.float64).eps
    return {
        "hits": (top == idx).astype(np.float64),
        "conf": conf,
        "top_bin": _bin_index(conf, edges),
        "nll": (
            # Clipped to [eps, 1 - eps] exactly as sklearn.metrics.log_loss does.
            -np.log(np.clip(p_y, eps, 1 - eps)) if log_p_y is None else -log_p_y
        ),
        # sum_k (p_k - 1[y = k])**2, the multiclass Brier score of the row.
        "brier": np.einsum("ij,ij->i", proba, proba) - 2.0 * p_y + 1.0,
        # One-vs-rest bins of every class, flattened to class * n_bins + bin.
        **_class_bins(proba, edges),
        "true_bin": idx * n_bins + _bin_index(p_y, edges),
    }


def _label_log_proba(z, labels, temperature, p_y) -> NDArray[np.float64]:
    """``log p_y`` of each row, from its probability ``p_y = e_y / S`` (of
    the compiled softmax) where that is a normal float64: as accurate as the
    log-softmax's ``beta (z_y - m) - log S`` (a few units of 2^-53 either way,
    both limited by the rounding of ``S``) without a second exponential of
    every value. Rows whose ``p_y`` is below 2^-1022 (or 0) get the
    log-softmax's own value, so the log-loss is never clipped."""
    from skts._numerics import log_softmax

    with np.errstate(divide="ignore"):
        out = np.log(p_y)
    tiny = np.flatnonzero(p_y < np.finfo(np.float64).tiny)
    if tiny.size:
        log_proba = log_softmax(np.asarray(z)[tiny], temperature)
        out[tiny] = log_proba[np.arange(tiny.size), labels[tiny]]
    return out


def _compiled_row_stats(z, labels, temperature, n_bins, weights, threads):
    """:func:`_row_stats` of ``softmax(z / T)`` (with the logits' first
    argmax and :func:`_label_log_proba`'s log-loss) from one compiled read
    of the logits, without the probabilities whole, and the column sums
    ``weights @ proba``; ``None`` where the kernel does not read ``z`` (then
    the caller takes the probabilities whole), and for rows of more than
    ``_COMPILED_CLASSES`` classes."""
    from skts._numerics import kernel

    with np.errstate(over="ignore"):
        beta = 1.0 / temperature
    if z.shape[1] > _COMPILED_CLASSES or not np.isfinite(beta):
        return None
    if not kernel.supports(z, strided=False):
        return None
    edges = _uniform_edges(n_bins)
    got = kernel.report_rows(z, beta, labels, weights, edges[1], threads)
    if got is None:
        return None
    k = z.shape[1]
    rows, cols = np.divmod(got["high_at"], k)
    p_y = got["p_y"]
    stats = {
        "hits": (got["predicted"] == labels).astype(np.float64),
        "conf": got["top"],
        "top_bin": _bin_index(got["top"], edges),
        "nll": -got["log_p_y"],
        "brier": got["sumsq"] - 2.0 * p_y + 1.0,
        "cls_row": rows,
        "cls_bin": cols * n_bins + _bin_index(got["high_p"], edges),
        "cls_conf": got["high_p"],
        "true_bin": labels * n_bins + _bin_index(p_y, edges),
    }
    return stats, got["colsum"]


def _class_bins(proba, edges) -> dict[str, NDArray]:
    """Each class's forecasts in one-vs-rest bins, for :func:`_report_sums`:
    the probabilities beyond the first bin (at most ``n_bins - 1`` of a row:
    a row adds up to 1), their rows, flat bins (class * n_bins + bin) and
    values, and all of them (``cls_all``: the first bin's sums are the rest).
    Binning every probability of a row of many classes, almost all of them
    in the first bin, was most of a report's time."""
    n_bins = len(edges) - 1
    flat = np.flatnonzero(proba > edges[1])  # (faster than the 2-D nonzero)
    rows, cols = np.divmod(flat, proba.shape[1])
    values = proba.reshape(-1)[flat]
    return {
        "cls_all": proba,
        "cls_row": rows,
        "cls_bin": cols * n_bins + _bin_index(values, edges),
        "cls_conf": values,
    }


def _report_sums(
    stats, w, n_classes, n_bins, out=None, column_sums=None
) -> NDArray[np.float64]:
    """Weighted sums of the row quantities (additive over rows), added to
    ``out`` (zeros if None) and returned. The class-wise sums (``n_classes *
    n_bins`` each) are added where the rows have values: a group of a few
    rows of 50,000 classes touches few of them. ``column_sums``: ``w @
    proba`` if known (else from ``stats["cls_all"]``)."""
    m = n_bins
    km = n_classes * m
    if out is None:
        out = np.zeros(4 + 3 * m + 2 * km)
    top = stats["top_bin"]
    out[:4] += (
        w.sum(),
        np.dot(w, stats["hits"]),
        np.dot(w, stats["nll"]),
        np.dot(w, stats["brier"]),
    )
    out[4 : 4 + m] += np.bincount(top, weights=w, minlength=m)
    out[4 + m : 4 + 2 * m] += np.bincount(top, weights=w * stats["conf"], minlength=m)
    out[4 + 2 * m : 4 + 3 * m] += np.bincount(
        top, weights=w * stats["hits"], minlength=m
    )
    # Each class's forecasts in each of its bins: beyond the first one by
    # one; the first, the class's whole sum less the others (an error of a
    # few units of the whole, inside the error of summing it).
    conf = out[4 + 3 * m : 4 + 3 * m + km]
    high = w[stats["cls_row"]] * stats["cls_conf"]
    np.add.at(conf, stats["cls_bin"], high)
    if column_sums is None:
        column_sums = w @ stats["cls_all"]
    conf[::m] += column_sums - np.bincount(
        stats["cls_bin"] // m, weights=high, minlength=n_classes
    )
    np.add.at(out[4 + 3 * m + km :], stats["true_bin"], w)
    return out


def report_from_sums(sums, n_classes, n_bins) -> dict[str, float]:
    m = n_bins
    km = n_classes * m
    total, hits, nll, brier = sums[:4]
    counts, conf, hit = (
        sums[4 : 4 + m],
        sums[4 + m : 4 + 2 * m],
        sums[4 + 2 * m : 4 + 3 * m],
    )
    cls_conf = sums[4 + 3 * m : 4 + 3 * m + km].reshape(n_classes, m)
    cls_hit = sums[4 + 3 * m + km :].reshape(n_classes, m)
    # The top-label bins as a ReliabilityCurve: ECE and MCE have one definition.
    with np.errstate(invalid="ignore", divide="ignore"):
        curve = ReliabilityCurve(
            conf / counts, hit / counts, counts, np.linspace(0.0, 1.0, m + 1)
        )
    # scikit-learn's brier_score_loss: summed over classes, and halved for a
    # binary problem (then it is the usual (p_1 - y)**2, in [0, 1]).
    half = 0.5 if n_classes == 2 else 1.0
    return {
        "accuracy": float(hits / total),
        "log_loss": float(nll / total),
        "brier_score": float(half * brier / total),
        "ece": curve.calibration_error(),
        "mce": curve.maximum_error(),
        "classwise_ece": float(np.mean(np.abs(cls_hit - cls_conf).sum(axis=1) / total)),
    }


def report_sums_from_logits(logits, y_idx, temperature: float, n_bins: int = 15):
    """The additive sums behind the report of ``softmax(logits / T)`` (a
    chunk's part of a distributed report): see :func:`_streamed_sums`."""
    sums, _ = _streamed_sums(logits, y_idx, [temperature], 0, None, n_bins)
    return sums[0]


# A streamed report reads whole blocks of rows, as many as fit in about
# 2^18 values and 2^13 rows (one block of 6,553 rows at 10 classes, 4 of 65
# at 1,000): numpy's per-call costs are paid per group, and a group's few
# float64 arrays (2 MiB each) stay in the cache. Larger groups were a
# little faster on an idle machine and up to three times slower beside two
# busy processes (benchmarks/bench_report.py --load 2).
_GROUP_VALUES = 1 << 18
_GROUP_ROWS = 1 << 13
# Rows of at most 2^12 classes are read by the kernel's report pass; wider
# ones take the probabilities whole (then each row's float64 arrays leave the
# cache, and the pass was 4% slower at 50,000 classes: docs/scale.md).
_COMPILED_CLASSES = 1 << 12


def _streamed_sums(
    logits,
    y_idx,
    temperatures,
    n_bootstrap: int,
    seed,
    n_bins: int = 15,
    bar=None,
    others=(),
):
    """The report's sums for each of ``temperatures``, and those of
    ``n_bootstrap`` resamples, in one read of the rows, group by group.

    Memory stays one group of rows (and one count vector) however many rows
    and resamples: the command line uses this on memory-mapped files. The
    log-loss is never clipped (see :func:`_label_log_proba`).

    A resample with replacement is a multinomial count per row. It is drawn
    block by block: the block's share of the draws left is binomial, then
    those draws fall uniformly on its rows. That is the distribution of
    drawing all ``n`` indices at once, and every sum is additive over rows.
    The resamples depend only on ``seed``, ``n_bootstrap`` and the shape.

    ``others``: more forecasts on the same rows, as ``(logits, T)`` pairs
    (a comparison), drawn with the same resamples: paired.

    Returns ``(sums, boot)``: arrays of shape ``(n_forecasts, width)`` and
    ``(n_forecasts, n_bootstrap, width)``, the temperatures first.
    """
    from skts._numerics import blocks, rows_per_block, softmax
    from skts._numerics._threads import kernel_threads

    n, k = logits.shape
    # (the threads of the whole read: a group of rows is a part of it)
    threads = kernel_threads(None, n * k)
    forecasts = [(logits, t) for t in temperatures] + list(others)
    width = 4 + 3 * n_bins + 2 * k * n_bins
    sums = np.zeros((len(forecasts), width))
    boot = np.zeros((len(forecasts), n_bootstrap, width))
    rng = np.random.default_rng(seed)
    draws_left = np.full(n_bootstrap, n, dtype=np.int64)
    rows_left = n
    step = rows_per_block(k)
    # (groups of blocks; the draws still block by block)
    factor = max(1, min(_GROUP_VALUES // (step * k), _GROUP_ROWS // step))
    for rows in blocks(n, k, factor):
        labels = y_idx[rows]
        m = labels.shape[0]
        drawn: list[list[NDArray]] = [[] for _ in range(n_bootstrap)]
        for start in range(rows.start, rows.stop, step) if n_bootstrap else ():
            size = min(step, rows.stop - start)
            share = rng.binomial(draws_left, size / rows_left)
            draws_left -= share
            rows_left -= size
            for b, c in enumerate(share):
                drawn[b].append(
                    np.bincount(rng.integers(0, size, size=c), minlength=size)
                )
        counts = [np.concatenate(d).astype(float) for d in drawn]
        weights = np.vstack([np.ones(m), *counts])
        read = {}
        for i, (source, t) in enumerate(forecasts):
            if id(source) not in read:
                read[id(source)] = [source[rows], None]
            z = read[id(source)][0]
            compiled = _compiled_row_stats(z, labels, t, n_bins, weights, threads)
            if compiled is not None:
                stats, column_sums = compiled
            else:
                # Correct means what predict says: the first argmax of the
                # logits (rounded probabilities of a near-tie may differ).
                if read[id(source)][1] is None:
                    read[id(source)][1] = np.asarray(z).argmax(axis=1)
                proba = softmax(z, t)
                log_p_y = _label_log_proba(z, labels, t, proba[np.arange(m), labels])
                stats = _row_stats(labels, proba, n_bins, log_p_y, read[id(source)][1])
                column_sums = [None] * len(weights)
            for b, w in enumerate(weights):
                out = sums[i] if b == 0 else boot[i, b - 1]
                _report_sums(stats, w, k, n_bins, out=out, column_sums=column_sums[b])
        if bar is not None:
            bar.update(m)
    return sums, boot


def streamed_reports(
    logits, y_idx, temperatures, n_bootstrap: int = 0, seed=0, bar=None, n_bins=15
) -> list[CalibrationReport]:
    """:func:`calibration_report` of ``softmax(logits / T)`` for each of
    ``temperatures``, streamed (see :func:`_streamed_sums`), with 95%
    percentile-bootstrap intervals when ``n_bootstrap > 0``."""
    n, k = logits.shape
    sums, boot = _streamed_sums(logits, y_idx, temperatures, n_bootstrap, seed,
                                n_bins, bar)  # fmt: skip
    level = 0.95
    out = []
    for i in range(len(temperatures)):
        values = report_from_sums(sums[i], k, n_bins)
        intervals = {}
        if n_bootstrap:
            draws = [report_from_sums(b, k, n_bins) for b in boot[i]]
            for metric in values:
                intervals[metric] = percentile_interval(
                    [d[metric] for d in draws], level
                )
        out.append(CalibrationReport(n, values, intervals, level, n_bootstrap))
    return out


@validate_params(
    {
        "y_true": ["array-like"],
        "y_prob": ["array-like"],
        "n_bins": [Interval(Integral, 1, None, closed="left")],
        "n_bootstrap": [Interval(Integral, 0, None, closed="left")],
        "confidence_level": [Interval(Real, 0, 1, closed="neither")],
        "random_state": ["random_state"],
        "labels": ["array-like", None],
        "groups": ["array-like", None],
        "class_axis": [Integral],
        "ignore_index": [Integral, None],
    },
    prefer_skip_nested_validation=True,
)
def calibration_report(
    y_true: ArrayLike,
    y_prob: ArrayLike,
    *,
    n_bins: int = 15,
    n_bootstrap: int = 0,
    confidence_level: float = 0.95,
    random_state=None,
    labels: ArrayLike | None = None,
    class_axis: int = 1,
    ignore_index: int | None = None,
    groups: ArrayLike | None = None,
) -> CalibrationReport:
    """Accuracy, log-loss, Brier score, ECE, MCE and class-wise ECE in one object.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities (1-D: positive-class column of a binary problem).
    n_bins : int, default=15
        Number of equal-width bins of the binned metrics.
    n_bootstrap : int, default=0
        Number of bootstrap resamples of the rows; with ``> 0`` every metric
        gets a percentile interval (the ECE is a noisy estimate: show it).
    confidence_level : float, default=0.95
        Level of the bootstrap intervals.
    random_state : int, RandomState instance or None, default=None
        Seed of the bootstrap.
    labels : array-like of shape (n_classes,), default=None
        Labels of the columns of ``y_prob``; default sorted unique ``y_true``.
    groups : array-like of shape (n_samples,), default=None
        A group label per row (a subpopulation, a site, a predicted class):
        the report then also holds the metrics of each group, in
        ``report.groups``, beside the overall ones. One temperature can leave
        the whole calibrated and each group wrong (see
        :func:`temperature_by_group`).
    class_axis : int, default=1
        Axis of the classes of ``y_prob`` of more than two dimensions:
        ``(n_samples, n_classes, d1, ..., dk)`` per-pixel or per-token
        probabilities with ``y_true`` of shape ``(n_samples, d1, ..., dk)``,
        every position one sample (``-1``: the classes last).
    ignore_index : int, default=None
        A label whose positions are left out (``-100``: PyTorch's and
        Hugging Face's padding); ``None`` keeps every sample.

    Returns
    -------
    CalibrationReport
        ``values`` and, with bootstrap, ``intervals`` (and ``groups``).

    Notes
    -----
    ``log_loss`` and ``brier_score`` equal scikit-learn's
    :func:`~sklearn.metrics.log_loss` and the multiclass (unscaled, sum over
    classes) :func:`~sklearn.metrics.brier_score_loss`; they are computed here
    per row so that the bootstrap does not recompute them from scratch.

    Examples
    --------
    >>> from skts.metrics import calibration_report
    >>> report = calibration_report([0, 1, 1, 1], [0.9, 0.9, 0.9, 0.9])
    >>> report["accuracy"], round(report["ece"], 6)
    (0.75, 0.15)

    Two groups that share the forecast 0.75 but not its truth (rates 0.6 and
    0.9): calibrated overall, off by 0.15 in each group.

    >>> y = [1] * 6 + [0] * 4 + [1] * 9 + [0] * 1
    >>> report = calibration_report(y, [0.75] * 20, groups=["a"] * 10 + ["b"] * 10)
    >>> print(report)
    metric           all (n=20)    a (n=10)    b (n=10)
    accuracy             0.7500      0.6000      0.9000
    log_loss             0.5623      0.7271      0.3975
    brier_score          0.1875      0.2625      0.1125
    ece                  0.0000      0.1500      0.1500
    mce                  0.0000      0.1500      0.1500
    classwise_ece        0.0000      0.1500      0.1500
    """
    # (groups, like weights, are one per sample or one per position)
    y_true, y_prob, groups = flat_positions(
        y_true,
        y_prob,
        groups,
        name="groups",
        class_axis=class_axis,
        ignore_index=ignore_index,
    )
    idx, proba = _check_targets(y_true, y_prob, labels)
    rng = check_random_state(random_state)
    report = _report(idx, proba, n_bins, n_bootstrap, confidence_level, rng)
    if groups is None:
        return report
    groups = check_groups(groups, idx.shape[0])
    per_group = {}
    for g in np.unique(groups):
        rows = groups == g
        per_group[g.item() if hasattr(g, "item") else g] = _report(
            idx[rows], proba[rows], n_bins, n_bootstrap, confidence_level, rng
        )
    return CalibrationReport(
        report.n_samples,
        report.values,
        report.intervals,
        report.confidence_level,
        report.n_bootstrap,
        per_group,
    )


def _report(
    idx, proba, n_bins, n_bootstrap, confidence_level, random_state, log_proba=None
) -> CalibrationReport:
    n, n_classes = proba.shape
    stats = _row_stats(idx, proba, n_bins, log_proba)
    values = report_from_sums(
        _report_sums(stats, np.ones(n), n_classes, n_bins), n_classes, n_bins
    )
    intervals: dict[str, tuple[float, float]] = {}
    if n_bootstrap > 0:
        rng = check_random_state(random_state)
        draws = {k: [] for k in values}
        for _ in range(n_bootstrap):
            sums = _report_sums(stats, resample_weights(rng, n), n_classes, n_bins)
            for k, v in report_from_sums(sums, n_classes, n_bins).items():
                draws[k].append(v)
        for k, v in draws.items():
            intervals[k] = percentile_interval(v, confidence_level)
    return CalibrationReport(n, values, intervals, confidence_level, n_bootstrap)
