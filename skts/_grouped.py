"""Temperatures per group: each group's exact rule, shrunk toward the pooled T.

Dividing a row's logits by any positive number keeps its argmax, so a
temperature per group (metadata known at prediction time, or the predicted
class) keeps every label, as one temperature does.

How a grouped fit reads the data::

    groups -> sorted labels and an integer code per row (host)
    partition, one pass: each group's rows gathered once, in the backend
        their array calls for (host blocks scattered by code; one ``take``
        per group on the device; Dask takes persisted together, so every
        source chunk is read once)
    pooled:      fit_temperature(all rows)                  -> T_pool
    each group:  fit_temperature(its rows), the exact rule  -> T_own[g]
    shrink:      log T[g] = (n_g log T_own[g] + s log T_pool) / (n_g + s),
                 then the nearest candidate in log T (ties: the smaller T)

A group is a key of the partition, not a pass: each group's search reads its
own rows only, so a step of all the searches together reads each row once,
and each ``T_own[g]`` is the exact rule on that group's rows in every
backend.

The strength ``s`` is counted in rows (by weight): a group of ``s`` rows
sits half way, in log T, between its own ``T`` and the pooled one. ``"cv"``
picks it from :data:`STRENGTHS` by the out-of-fold log-loss of the held-out
rows (folds stratified by group; ties go to the stronger shrinkage). Groups
with fewer than ``min_group_size`` rows of positive weight take the pooled
``T``.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from skts._array_api import namespace, to_numpy
from skts._fit import checked_rows, fit_temperature, rows_of
from skts._numerics import BoundaryTemperatureWarning, SearchResult, blocks
from skts._validation import check_groups, is_dask_array

__all__ = [
    "STRENGTHS",
    "GroupFit",
    "first_unseen",
    "fit_groups",
    "group_codes",
    "shrink",
    "take_rows",
]

# Strengths "cv" tries, in rows (0: each group's own T; inf: the pooled T).
STRENGTHS = (0.0, 10.0, 30.0, 100.0, 300.0, 1000.0, 3000.0, 10000.0, math.inf)


@dataclass
class GroupFit:
    """A grouped fit: the pooled result, each group's own exact ``T``, and
    its shrunk ``T`` (a candidate, with the grid solver)."""

    labels: NDArray  # the sorted group labels
    pooled: SearchResult  # the fit on every row
    own: NDArray  # each group's exact-rule T on its rows (NaN: too small)
    own_loss: NDArray  # each group's loss at its own T
    at_boundary: NDArray  # whether a group's own T is an end of the range
    n_samples: NDArray  # rows of positive weight per group
    size: NDArray  # rows by weight: the shrinkage's unit
    strength: float
    temperature: NDArray  # each group's shrunk T
    cv_loss: dict = field(default_factory=dict)  # strength -> out-of-fold loss

    def by_group(self) -> dict:
        """``{group label: T}`` with plain Python labels."""
        return {
            (g.item() if hasattr(g, "item") else g): float(t)
            for g, t in zip(self.labels, self.temperature, strict=True)
        }


def group_codes(groups, logits, *, labels=None) -> tuple[NDArray, NDArray]:
    """``(labels, codes)``: the sorted group labels and each row's index into
    them. ``groups="predicted"`` is the first argmax of each row's logits.
    Given a fit's ``labels``, rows of a label not among them get code -1
    (:func:`first_unseen` names the first)."""
    n = int(logits.shape[0])
    if isinstance(groups, str):
        if groups != "predicted":
            raise ValueError(
                f"groups must be an array of labels or 'predicted'; got {groups!r}."
            )
        groups = _argmax(logits)
    elif is_dask_array(groups):
        groups = groups.compute()
    groups = check_groups(groups, n)
    if labels is None:
        labels, codes = np.unique(groups, return_inverse=True)
        return labels, codes.reshape(-1)
    try:
        codes = np.minimum(np.searchsorted(labels, groups), len(labels) - 1)
        seen = labels[codes] == groups
    except TypeError:  # labels of another kind than the fit's (str vs int)
        return labels, np.full(n, -1)
    return labels, np.where(seen, codes, -1)


def first_unseen(groups, logits, codes) -> str:
    """The first row whose group was not seen, for a message."""
    i = int(np.flatnonzero(codes < 0)[0])
    if isinstance(groups, str):
        return f"predicted class {int(_argmax(logits)[i])} at position {i}"
    value = np.asarray(groups.compute() if is_dask_array(groups) else groups)[i]
    return f"{value.item() if hasattr(value, 'item') else value!r} at position {i}"


def _argmax(logits) -> NDArray:
    """The first argmax of each row, on the host."""
    if is_dask_array(logits):
        return np.asarray(logits.argmax(axis=1).compute())
    xp, _ = namespace(logits)
    if xp is not None:
        return to_numpy(xp.argmax(logits, axis=1), xp)
    return np.concatenate(
        [np.asarray(logits[r]).argmax(axis=1) for r in blocks(*logits.shape)]
    )


def _partition_host(logits, codes: NDArray, counts: NDArray) -> list[NDArray]:
    """Each group's rows of host logits (an array or a block reader), in
    their order, gathered in one pass over the blocks."""
    dtype = np.asarray(logits[0:1]).dtype
    outs = [np.empty((int(c), logits.shape[1]), dtype=dtype) for c in counts]
    filled = np.zeros(len(counts), dtype=np.int64)
    for rows in blocks(*logits.shape):
        block = np.asarray(logits[rows])
        c = codes[rows]
        order = np.argsort(c, kind="stable")
        present, starts = np.unique(c[order], return_index=True)
        ends = np.r_[starts[1:], order.size]
        for g, a, b in zip(present.tolist(), starts, ends, strict=True):
            if g < 0:
                continue
            outs[g][filled[g] : filled[g] + b - a] = block[order[a:b]]
            filled[g] += b - a
    return outs


def _partition(logits, codes: NDArray, n_groups: int) -> tuple[list, list]:
    """Each group's logits, in the backend of ``logits``, and its row
    indices; one pass over the data."""
    order = np.argsort(codes, kind="stable")
    counts = np.bincount(codes[codes >= 0], minlength=n_groups)
    start = int(np.count_nonzero(codes < 0))
    edges = start + np.r_[0, np.cumsum(counts)]
    index = [order[edges[g] : edges[g + 1]] for g in range(n_groups)]
    if is_dask_array(logits):
        import dask

        return list(dask.persist(*[logits[i] for i in index])), index
    xp, _ = namespace(logits)
    if xp is not None:
        device = logits.device
        return [
            xp.take(logits, xp.asarray(i, device=device), axis=0) for i in index
        ], index
    return _partition_host(logits, codes, counts), index


def take_rows(logits, index: NDArray):
    """The rows ``index`` (ascending) of checked logits, in their backend."""
    if is_dask_array(logits) or isinstance(logits, np.ndarray):
        return logits[index]
    xp, _ = namespace(logits)
    if xp is not None:
        return xp.take(logits, xp.asarray(index, device=logits.device), axis=0)
    codes = np.full(logits.shape[0], -1)
    codes[index] = 0
    return _partition_host(logits, codes, np.array([index.size]))[0]


def group_rows(logits, y, sample_weight, codes, n_groups: int, n_jobs=None):
    """Each group's :class:`~skts._numerics.Rows`, gathered in one pass
    (None for a group without rows of positive weight), and each group's
    weight (rows, unweighted)."""
    parts, index = _partition(logits, codes, n_groups)
    rows, weight = [], np.zeros(n_groups)
    for g, (part, i) in enumerate(zip(parts, index, strict=True)):
        w = None if sample_weight is None else sample_weight[i]
        weight[g] = i.size if w is None else float(w.sum())
        rows.append(rows_of(part, y[i], w, n_jobs=n_jobs) if weight[g] > 0 else None)
    return rows, weight


def shrink(own, size, pooled: float, strength: float, candidates=None) -> NDArray:
    """Each group's ``T`` pulled toward ``pooled`` in log T by ``strength``
    rows; with ``candidates``, the nearest of them in log T (ties: the
    smaller T). A share of exactly one or zero keeps the own or the pooled
    ``T`` bit for bit; NaN in ``own`` (no fit) gives ``pooled``."""
    own = np.asarray(own, dtype=np.float64)
    size = np.asarray(size, dtype=np.float64)
    fit = ~np.isnan(own)
    if strength == math.inf:
        share = np.zeros_like(size)
    else:
        with np.errstate(invalid="ignore"):
            share = np.where(size > 0, size / (size + strength), 0.0)
    share = np.where(fit, share, 0.0)
    target = np.exp(
        share * np.log(np.where(fit, own, pooled)) + (1 - share) * math.log(pooled)
    )
    if candidates is not None:
        grid = np.unique(np.asarray(candidates, dtype=np.float64))
        logs, goal = np.log(grid), np.log(target)
        k = np.clip(np.searchsorted(logs, goal), 1, max(grid.size - 1, 1))
        if grid.size == 1:
            target = np.full_like(target, grid[0])
        else:
            upper_nearer = logs[k] - goal < goal - logs[k - 1]
            target = np.where(upper_nearer, grid[k], grid[k - 1])
    target = np.where(share == 1.0, own, target)
    return np.where(share == 0.0, pooled, target)


def _quiet_fit(rows, temperatures, solver, tol) -> SearchResult:
    with warnings.catch_warnings():
        # Reported per group (at_boundary): one warning per group would only
        # repeat it.
        warnings.simplefilter("ignore", BoundaryTemperatureWarning)
        return fit_temperature(rows, temperatures, solver=solver, tol=tol)


def _positive(sample_weight, codes, n_groups) -> NDArray:
    """Rows of positive weight per group."""
    keep = codes >= 0 if sample_weight is None else (codes >= 0) & (sample_weight > 0)
    return np.bincount(codes[keep], minlength=n_groups)


@dataclass(frozen=True)
class _Problem:
    """What every grouped fit of one call shares."""

    temperatures: NDArray
    solver: str
    tol: float
    min_group_size: int
    n_jobs: object
    n_groups: int

    @property
    def grid(self):
        """The candidates a shrunk T returns to (None: continuous)."""
        return self.temperatures if self.solver == "grid" else None

    def fit(self, logits, y, sample_weight, codes, *, quiet: bool):
        """The pooled fit, and each group's own exact-rule fit on its rows
        (one partition): ``(pooled, own, own_loss, at_boundary, positive,
        size)``, ``own`` NaN for a group under ``min_group_size`` rows."""
        rows = rows_of(logits, y, sample_weight, n_jobs=self.n_jobs)
        if quiet:
            pooled = _quiet_fit(rows, self.temperatures, self.solver, self.tol)
        else:
            pooled = fit_temperature(
                rows, self.temperatures, solver=self.solver, tol=self.tol
            )
        parts, weight = group_rows(
            logits, y, sample_weight, codes, self.n_groups, self.n_jobs
        )
        positive = _positive(sample_weight, codes, self.n_groups)
        own = np.full(self.n_groups, np.nan)
        own_loss = np.full(self.n_groups, np.nan)
        edge = np.zeros(self.n_groups, dtype=bool)
        for g, part in enumerate(parts):
            if part is None or positive[g] < max(self.min_group_size, 1):
                continue
            result = _quiet_fit(part, self.temperatures, self.solver, self.tol)
            own[g], own_loss[g] = result.temperature, result.loss
            edge[g] = result.at_boundary
        # Rows by weight: each group's weight over the mean weight of a row
        # (its row count when unweighted).
        size = weight if sample_weight is None else weight / sample_weight.mean()
        return pooled, own, own_loss, edge, positive, size


def fit_groups(
    logits,
    y,
    sample_weight,
    groups,
    temperatures: NDArray,
    *,
    solver: str = "grid",
    tol: float = 1e-10,
    strength="cv",
    min_group_size: int = 10,
    cv: int = 5,
    n_jobs=None,
    random_state=0,
) -> GroupFit:
    """The pooled ``T``, each group's own exact ``T`` and each group's shrunk
    ``T`` (see the module's docstring)."""
    logits, y, sample_weight = checked_rows(logits, y, sample_weight, n_jobs=n_jobs)
    labels, codes = group_codes(groups, logits)
    problem = _Problem(
        temperatures, solver, tol, min_group_size, n_jobs, labels.shape[0]
    )
    pooled, own, own_loss, edge, positive, size = problem.fit(
        logits, y, sample_weight, codes, quiet=False
    )
    cv_loss: dict = {}
    if strength == "cv":
        cv_loss = _cross_validate(
            problem, logits, y, sample_weight, codes, cv, random_state
        )
        strength = min(cv_loss, key=lambda s: (cv_loss[s], -s))
    return GroupFit(
        labels=labels,
        pooled=pooled,
        own=own,
        own_loss=own_loss,
        at_boundary=edge,
        n_samples=positive,
        size=size,
        strength=float(strength),
        temperature=shrink(
            own, size, pooled.temperature, float(strength), problem.grid
        ),
        cv_loss=cv_loss,
    )


def _cross_validate(
    problem: _Problem, logits, y, sample_weight, codes, cv: int, random_state
) -> dict:
    """The out-of-fold log-loss of the held-out rows at each of
    :data:`STRENGTHS`: each fold's pooled and own temperatures fitted on the
    other folds, shrunk at every strength, and each held-out group's loss
    read at all of them in one read."""
    from sklearn.model_selection import StratifiedKFold

    n = codes.shape[0]
    if min(cv, n) < 2:
        return {math.inf: 0.0}
    split = StratifiedKFold(min(cv, n), shuffle=True, random_state=random_state)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # groups smaller than cv
        folds = list(split.split(np.zeros(n), codes))
    total, seen = np.zeros(len(STRENGTHS)), 0.0
    for train, test in folds:
        w_train = None if sample_weight is None else sample_weight[train]
        w_test = None if sample_weight is None else sample_weight[test]
        if w_train is not None and not (w_train > 0).any():
            continue
        pooled, own, _, _, _, size = problem.fit(
            take_rows(logits, train), y[train], w_train, codes[train], quiet=True
        )
        shrunk = np.array(
            [shrink(own, size, pooled.temperature, s, problem.grid) for s in STRENGTHS]
        )  # (strengths, groups)
        held, held_weight = group_rows(
            take_rows(logits, test), y[test], w_test, codes[test],
            problem.n_groups, problem.n_jobs,
        )  # fmt: skip
        for g, r in enumerate(held):
            if r is None:
                continue
            distinct, back = np.unique(shrunk[:, g], return_inverse=True)
            total += r.nll(distinct)[back] * held_weight[g]
            seen += held_weight[g]
    return dict(zip(STRENGTHS, (total / seen).tolist(), strict=True))
