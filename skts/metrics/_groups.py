"""Temperatures by group: what one temperature cannot fix, measured per
group (metadata, or the predicted class)."""

from __future__ import annotations

import warnings
from numbers import Integral, Real

import numpy as np
from numpy.typing import ArrayLike
from sklearn.utils import Bunch, check_random_state

from skts._fit import fit_temperature
from skts._grouped import group_codes, group_rows
from skts._numerics import BoundaryTemperatureWarning, Rows
from skts._sklearn_compat import Interval, StrOptions, validate_params
from skts._validation import (
    check_class_indices,
    check_logits,
    check_temperatures,
)
from skts.metrics._bootstrap import percentile_interval, resample_weights


@validate_params(
    {
        "y_true": ["array-like"],
        "logits": ["array-like"],
        "groups": ["array-like", StrOptions({"predicted"})],
        "temperatures": ["array-like", None],
        "n_bootstrap": [Interval(Integral, 0, None, closed="left")],
        "confidence_level": [Interval(Real, 0, 1, closed="neither")],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def temperature_by_group(
    y_true: ArrayLike,
    logits: ArrayLike,
    groups,
    *,
    temperatures: ArrayLike | None = None,
    n_bootstrap: int = 0,
    confidence_level: float = 0.95,
    random_state=None,
) -> Bunch:
    """The temperature each group of rows would choose, beside the overall one.

    One temperature cannot calibrate groups that share logits but differ in
    how often they are right (two subpopulations with different label noise,
    or classes the model is over- or under-confident about): it calibrates
    their mixture and leaves each group wrong. Fitting ``T`` on each group
    shows whether the groups want different temperatures; with bootstrap, how
    sure that is.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True class indices in ``0..n_classes-1`` (as for
        :class:`~skts.TemperatureScaler`).
    logits : array-like or tensor of shape (n_samples, n_classes)
        Held-out logits. Binary logits may be one column, shape
        ``(n_samples,)``: the logit of class 1, i.e. logits ``(0, d)``.
    groups : array-like of shape (n_samples,) or "predicted"
        A group label per row, or ``"predicted"``: the predicted class (the
        first argmax of the logits). Do not group by the true class: within
        a true class every label is that class, so its logit always looks
        right and that group's ``T`` is biased towards 0.
    temperatures : array-like of shape (n_candidates,), default=None
        Candidates, as for :class:`~skts.TemperatureScaler` (default: 1001
        geometric points from 0.01 to 100).
    n_bootstrap : int, default=0
        Bootstrap resamples of each group's rows; with ``> 0`` each group's
        ``T`` gets a percentile interval.
    confidence_level : float, default=0.95
        Level of the intervals.
    random_state : int, RandomState instance or None, default=None
        Seed of the bootstrap.

    Returns
    -------
    result : :class:`~sklearn.utils.Bunch`
        - ``groups``: ndarray of shape (n_groups,), the sorted group labels;
        - ``temperature``: each group's ``T`` (the exact grid rule on its rows);
        - ``loss``: each group's mean log-loss at its own ``T``;
        - ``loss_at_overall``: each group's mean log-loss at the overall ``T``
          (the gap is what one temperature costs that group);
        - ``n_samples``: rows per group;
        - ``at_boundary``: whether a group's ``T`` is an end of the range
          (its loss may keep falling beyond);
        - ``interval``: ndarray of shape (n_groups, 2), bootstrap percentile
          intervals of ``T`` (NaN without bootstrap);
        - ``overall_temperature``, ``overall_loss``: the fit on all rows.

    See Also
    --------
    calibration_report : The metrics of each group (``groups=``).
    skts.TemperatureScaler : The fit on all rows.

    Examples
    --------
    Two groups share the logit gap ``log 9`` (forecast 0.9) but are right 60%
    and 90% of the time; one temperature gives 0.75 to both:

    >>> import numpy as np
    >>> from skts.metrics import temperature_by_group
    >>> logits = np.tile([0.0, np.log(9.0)], (20, 1))
    >>> y = np.array([1] * 6 + [0] * 4 + [1] * 9 + [0] * 1)
    >>> groups = np.array(["a"] * 10 + ["b"] * 10)
    >>> result = temperature_by_group(y, logits, groups, temperatures=[1, 2, 4, 8])
    >>> result.overall_temperature, result.temperature.tolist()
    (2.0, [8.0, 1.0])
    """
    logits = check_logits(logits, warn_probabilities=True)
    y = check_class_indices(y_true, logits.shape, name="y_true")
    labels, codes = group_codes(groups, logits)
    temperatures = check_temperatures(temperatures)
    rng = check_random_state(random_state)

    def fit(rows):
        with warnings.catch_warnings():
            # Reported as at_boundary: a per-group warning would only repeat it.
            warnings.simplefilter("ignore", BoundaryTemperatureWarning)
            return fit_temperature(rows, temperatures)

    everything = fit(Rows(logits, y))
    # Each group's rows, gathered in one pass (skts._grouped).
    parts, _ = group_rows(logits, y, None, codes, labels.shape[0])
    temps, losses, at_overall, counts, edge = [], [], [], [], []
    interval = np.full((labels.shape[0], 2), np.nan)
    for k, rows in enumerate(parts):
        result = fit(rows)
        temps.append(result.temperature)
        losses.append(result.loss)
        at_overall.append(float(rows.nll([everything.temperature])[0]))
        counts.append(rows.n_samples)
        edge.append(result.at_boundary)
        if n_bootstrap:
            draws = [
                fit(
                    Rows(rows.logits, rows.y, resample_weights(rng, rows.n_samples))
                ).temperature
                for _ in range(n_bootstrap)
            ]
            interval[k] = percentile_interval(draws, confidence_level)
    return Bunch(
        groups=labels,
        temperature=np.asarray(temps),
        loss=np.asarray(losses),
        loss_at_overall=np.asarray(at_overall),
        n_samples=np.asarray(counts),
        at_boundary=np.asarray(edge),
        interval=interval,
        overall_temperature=everything.temperature,
        overall_loss=everything.loss,
    )
