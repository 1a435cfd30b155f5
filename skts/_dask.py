"""Dask backend: the shared search, each pass one Dask reduction over row chunks.

The searches in :mod:`skts._numerics` read their data only through the named
reads of ``Rows`` (``nll``, ``slopes``, ...), each the fold of its per-block
sums (``Rows.nll_parts``, ...). Here each piece of a Dask array runs those
same in-memory ``*_parts`` (the kernel, block by block) as one task, and the
driver folds the pieces' small results in block order:
nothing gathers the logits, and the exact rule decides every near-tie, so
``temperature_`` is the in-memory answer whatever the chunking. Whatever
scheduler is active runs the tasks (``dask.compute``): the threaded default, a
``dask.distributed`` client (local or remote); skts never starts one.

Imported only when a Dask array is given: ``import skts`` does not import dask.
"""

from __future__ import annotations

import math
import mmap
import os
import pickle
import sys
import threading
from dataclasses import dataclass
from functools import partial

import dask
import dask.array as da
import numpy as np
from numpy.typing import NDArray

from skts._numerics import (
    F32_BLOCKS,
    HP_DIGITS,
    Rows,
    Stacked,
    Unchecked,
    add,
    blocks,
    fold,
    scaled_weights,
    subsample_rows,
    weight_exponent,
    weight_part,
)
from skts._validation import (
    check_chunk,
    check_chunk_labels,
    check_dask_logits,
    check_piece,
)

__all__ = [
    "DaskRows",
    "is_dask_array",
    "load_npy_shards",
]


def is_dask_array(x) -> bool:
    """Whether ``x`` is a Dask array (without importing dask otherwise)."""
    return isinstance(x, da.Array)


def as_logits(logits: da.Array, name: str = "logits") -> da.Array:
    """2-D float32/float64 Dask array with every column in one chunk (see
    :func:`skts._validation.check_dask_logits`)."""
    return check_dask_logits(logits, name)


def _along(x, chunks: tuple[int, ...], name: str, n_samples: int):
    """A 1-D array beside the logits: a NumPy array stays one (each task gets
    its slice), a Dask array is chunked like the logits' rows."""
    lazy = is_dask_array(x)
    if not lazy:
        x = np.asarray(x)
    if x.ndim == 2 and x.shape[1] == 1:
        x = x[:, 0]
    if x.ndim != 1:
        raise ValueError(f"{name} must be 1-D; got shape {x.shape!r}.")
    if x.shape[0] != n_samples:
        raise ValueError(
            f"logits has {n_samples} rows but {name} has {x.shape[0]} values."
        )
    return x.rechunk((chunks,)) if lazy else x


# A piece holds at most this many bytes of logits: tasks stay small whatever
# the chunks, so a worker's memory does not grow with them (a computed piece
# is this big at most). Each task costs the scheduler, the driver and the
# worker about as much as 1-2 ms of compute: at 32 MiB a 2-worker
# LocalCluster spent 29% of a fit not computing, at 64 MiB 25%
# (bench_outofcore.py).
_PIECE_BYTES = 64 << 20
# A piece of shards that load_npy_shards maps (C-ordered float32 or float64:
# the kernel reads the view as it is) is a view of the page cache and costs
# no memory of its own, so it may be larger: 174 tasks instead of 417 in
# bench_outofcore.py, and 13-16% of the workers' time not computing instead
# of 19-20%. Not larger still: a worker's RSS, which Dask's memory limit watches,
# counts the mapped pages a task holds (512 MiB was no faster).
_MAPPED_PIECE_BYTES = 256 << 20
# The arrays load_npy_shards returned, by name: their shards and graph (an
# array made from one, or persisted, has another graph), most recently
# returned last; at most _SHARDS_NAMES, so a long-lived process that opens
# many shard sets does not grow (an array dropped is read as any other: the
# same bits). Changed under _SHARDS_LOCK (threads may open shard sets at once).
_SHARDS: dict[str, tuple] = {}
_SHARDS_NAMES = 1024
_SHARDS_LOCK = threading.Lock()
# np.load parses a .npy header with ast.literal_eval. On Python 3.11 the AST
# constructor keeps one recursion count per interpreter, and the garbage
# collector may switch threads inside it: two threads parsing at once (the
# threaded scheduler's tasks, threads opening shard sets) can raise
# "SystemError: AST constructor recursion depth mismatch" (CPython
# gh-106905). A header is a few hundred bytes: parse them one at a time.
_NPY_HEADER_LOCK = threading.Lock()


def _load_mapped(path: str):
    """``np.load(path, mmap_mode="r")``, one thread at a time."""
    with _NPY_HEADER_LOCK:
        return np.load(path, mmap_mode="r", allow_pickle=False)


def _pieces(
    row_chunks: tuple[int, ...], step: int, max_rows: int
) -> list[tuple[int, int]]:
    """Row ranges covering every row, in order, each cut at multiples of
    ``step`` (the float32 blocks of every pass) or at the last row: a
    stretch of whole blocks inside one chunk is one piece (of at most
    ``max_rows`` rows), and a block that straddles chunks is a piece of its
    own (its rows gathered from them).

    Each piece's passes then see the very blocks of the in-memory pass, and
    their results are folded in the same order: the same bits.
    """
    edges = np.cumsum(row_chunks)
    n = int(edges[-1]) if len(edges) else 0
    starts = np.arange(0, n, step)
    # The chunk holding each block, -1 where it straddles two.
    first = np.searchsorted(edges, starts, side="right")
    last = np.searchsorted(edges, np.minimum(starts + step, n) - 1, side="right")
    owner = np.where(first == last, first, -1)
    # A run: blocks inside one chunk, one after another; cut every
    # ``max_rows`` rows from its start (a multiple of ``step``).
    i = np.arange(len(starts))
    run = (owner < 0) | (np.roll(owner, 1) != owner)
    begun = np.maximum.accumulate(np.where(run, i, 0))
    cut = run | ((i - begun) % max(1, max_rows // step) == 0)
    begin = starts[cut].tolist()
    return list(zip(begin, [*begin[1:], n], strict=True))


@dataclass(frozen=True)
class _Declared:
    """What the chunks of one lazy part of a piece declare: the array's name,
    the piece's first row and each chunk's shape."""

    name: str
    start: int
    shapes: tuple


def _shards(x: da.Array) -> _NpyShards | None:
    """The shards of an array as :func:`load_npy_shards` returned it."""
    found = _SHARDS.get(x.name)
    return found[0] if found is not None and found[1] is x.dask else None


def _lazy_part(x, name: str, start: int, stop: int):
    """A piece's part of ``x``: a NumPy slice as it is; of shards as
    :func:`load_npy_shards` returned them, the read of its rows, which the
    task calls (:func:`_given`; no Dask graph to build, ship or run); for
    another Dask array, ``(declared, chunks)``: its delayed chunks and the
    shapes they declare, checked when the task reads them (:func:`_assemble`)."""
    if not is_dask_array(x):
        return x[start:stop]
    shards = _shards(x)
    if shards is not None:
        return partial(shards.__getitem__, slice(start, stop))
    x = x[start:stop]
    if x.ndim == 2 and x.numblocks[1] > 1:
        x = x.rechunk({1: -1})
    shapes = tuple((int(r), *(int(c) for c in x.shape[1:])) for r in x.chunks[0])
    return _Declared(name, start, shapes), list(x.to_delayed().ravel())


def _given(part):
    """A piece's part that is not lazy: an array, None, or the read of rows of
    shards (:func:`_lazy_part`), done here."""
    return part() if callable(part) else part


def _assemble(declared: _Declared, chunks: list) -> NDArray:
    """A piece's part from its chunks, each checked against the shape it
    declares (a chunk computed by a function, read from a file rewritten
    since, or wrapped with a wrong shape can hold anything): a ValueError
    naming the array and the rows, never a wrong or unsafe read."""
    row = declared.start
    for chunk, shape in zip(chunks, declared.shapes, strict=True):
        got = tuple(np.shape(chunk))
        if got != shape:
            raise ValueError(
                f"{declared.name} chunk at rows {row}-{row + shape[0] - 1} has "
                f"shape {got}; the Dask array declares {shape}."
            )
        row += shape[0]
    return np.asarray(chunks[0]) if len(chunks) == 1 else np.concatenate(chunks)


def _chunk_stats(z, y, w, start: int, stop: int, n_classes: int) -> dict:
    """The whole check of one piece (:func:`skts._validation.check_piece` and
    :func:`~skts._validation.check_chunk`), and whether a row of positive
    weight varies: what decides a message once a read found a problem (and
    whether every row is flat, when the warm start's sample is)."""
    z = np.asarray(z)
    y = np.asarray(y)
    w = None if w is None else np.asarray(w, dtype=np.float64)
    error = check_piece(z, y, w, start, stop, n_classes)
    out: dict = {"error": error or check_chunk(z, y, w, start, n_classes)}
    out["varies"] = out["error"] is None and _varies(z, w)
    return out


def _varies(z: NDArray, w: NDArray | None) -> bool:
    """Whether a row of positive weight is not flat (almost always one in
    the first block: the look stops there)."""
    live = np.ones(z.shape[0], dtype=bool) if w is None else w > 0
    for rows in blocks(z.shape[0], z.shape[1]):
        block = z[rows]
        if np.any((block.max(axis=1) > block.min(axis=1)) & live[rows]):
            return True
    return False


def _sample_part(z, y, w, start: int, stop: int, n_classes: int, picked: slice):
    """One piece's rows of the warm start's subsample ``picked`` (copies,
    which the driver checks) and its largest weight; None if the piece is not
    what the arrays declare or a weight is refused (the whole check then
    names the problem). Of mapped shards, only the sample's pages are read."""
    z, y = np.asarray(z), np.asarray(y)
    w = None if w is None else np.asarray(w, dtype=np.float64)
    if check_piece(z, y, w, start, stop, n_classes) is not None:
        return None
    top = None
    if w is not None:
        top = float(w.max())
        if not (float(w.min()) >= 0 and top < np.inf):
            return None
    # (every picked.step-th row from picked.start, those of this piece)
    first = max(picked.start, start)
    first += -(first - picked.start) % picked.step
    local = slice(
        first - start, max(min(picked.stop, stop), first) - start, picked.step
    )
    mapped = _mapping(z)  # (mapped shards: the task's own mapping)
    if mapped is not None and hasattr(mmap, "MADV_RANDOM"):
        # Each fault of a file not in the page cache would read around its
        # page up to the disk's read-ahead (8 MiB on the CI machine): nearly
        # the whole file for every k-th row, one fault at a time.
        mapped.madvise(mmap.MADV_RANDOM)
    return tuple(None if a is None else np.array(a[local]) for a in (z, y, w)), top


def _mapping(z: NDArray) -> mmap.mmap | None:
    """The mapping an array is a view of, or None."""
    base = z
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, memoryview):
        base = base.obj
    return base if isinstance(base, mmap.mmap) else None


class _Found(Exception):
    """A piece's problem, found by its first read (the message)."""


def _test(z, y, w, start: int, n_classes: int) -> None:
    """The whole check of a piece whose read found a logit not finite."""
    found = check_chunk(z, y, w, start, n_classes)
    if found is not None:
        raise _Found(found)


def _weight_sums(z, y, w, exponent: int, n_classes: int) -> list[float]:
    return weight_part(scaled_weights(w, exponent), n_classes)


# Up to this size (pickled), the graph that reads a piece travels inside the
# piece's task: one task per piece and pass, no intermediate results to hold
# or move between workers. Larger graphs embed data (an in-memory array
# wrapped by from_array): those run as ordinary dependencies.
_INLINE_BYTES = 1 << 16


def _is_lazy(part) -> bool:
    """Whether a piece's part is ``(declared, delayed chunks)``."""
    return isinstance(part, tuple) and isinstance(part[0], _Declared)


def _inline_graph(z, y, w) -> bytes | None:
    """The low-level graph computing a piece's lazy parts of ``(z, y, w)``,
    pickled, when it is small (reads from files or stores), else ``None``."""
    import cloudpickle

    graph: dict = {}
    keys = []
    for part in (z, y, w):
        if not _is_lazy(part):
            keys.append(None)  # a NumPy slice or None: passed as it is
            continue
        for chunk in part[1]:
            graph.update(dict(chunk.__dask_graph__()))
        keys.append([chunk.key for chunk in part[1]])
    wanted = {k for ks in keys if ks for k in ks}
    if not wanted <= graph.keys() or not _self_contained(graph):
        return None  # e.g. persisted data: its chunks live on the workers
    blob = cloudpickle.dumps((graph, keys))
    return blob if len(blob) <= _INLINE_BYTES else None


def _self_contained(graph: dict) -> bool:
    """Whether every key the graph's tasks refer to is computed by the graph
    (any doubt, such as a change of Dask's task API, answers no: the
    ordinary path is always correct)."""
    future = getattr(sys.modules.get("distributed"), "Future", None)
    if future is not None and any(isinstance(v, future) for v in graph.values()):
        return False  # (persisted chunks: their data live on the workers)
    try:
        from dask._task_spec import convert_legacy_graph

        nodes = convert_legacy_graph(graph)
        return all(node.dependencies <= nodes.keys() for node in nodes.values())
    except Exception:
        return False


class _Opaque:
    """A task's arguments that hold no Dask collection, passed as they are:
    Dask does not look inside (its search of every argument cost the driver
    about 1 ms a task)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def _inline_call(func, blob: bytes, packed: _Opaque):
    """``func(z, y, w, *args)`` with the piece's lazy parts read here,
    synchronously; ``packed`` holds ``(declared, given, args)``, ``given``
    the other parts (NumPy slices or None)."""
    import cloudpickle

    declared, given, args = packed.value

    graph, keys = cloudpickle.loads(blob)
    wanted = [k for ks in keys if ks for k in ks]
    values = iter(dask.get(graph, wanted) if wanted else ())
    parts = [
        _given(g) if ks is None else _assemble(d, [next(values) for _ in ks])
        for d, g, ks in zip(declared, given, keys, strict=True)
    ]
    return func(*parts, *args)


def _lazy_call(func, packed: _Opaque, zc, yc, wc):
    """``func(z, y, w, *args)`` with the piece's lazy parts computed by Dask
    (the chunk lists ``zc``, ``yc``, ``wc``) and checked here; ``packed``
    as for :func:`_inline_call`."""
    declared, given, args = packed.value
    parts = [
        _given(g) if d is None else _assemble(d, chunks)
        for d, g, chunks in zip(declared, given, (zc, yc, wc), strict=True)
    ]
    return func(*parts, *args)


def _run(
    z, y, w, start, stop, row_max, check, n_classes, parts, exponent, total, *args
):
    """One piece of one read: ``parts`` (one of ``Rows``' ``*_parts``
    methods) on the piece's rows, in memory, on one thread; ``row_max``: the
    piece's row maxima and block ranges found by an earlier read, or None.
    The piece's arrays are checked against the shapes the Dask arrays
    declare at every read (a chunk computed again may differ from the one
    validated). With ``check`` (the fit's first read of all the rows) the
    labels and weights are checked before the kernel reads them, and the
    kernel looks at every logit it reads (:class:`~skts._numerics.Unchecked`):
    a problem is returned, not raised, so that the driver names the first in
    row order.

    Returns the per-block results, the row maxima and block ranges this
    read found (None if it was given them or found none), and the piece's
    problem (None)."""
    z, y = np.asarray(z), np.asarray(y)
    error = check_piece(z, y, w, start, stop, n_classes)
    unchecked = None
    if error is None and check:
        given = (z, y, None if w is None else np.asarray(w, dtype=np.float64))
        if check_chunk_labels(*given[1:], start, n_classes) is not None:
            error = check_chunk(*given, start, n_classes)  # (the logits' first)
        unchecked = Unchecked(partial(_test, *given, start, n_classes), len(z))
    if error is not None:
        if check:
            return None, None, error
        raise ValueError(error)
    y = y.astype(np.intp, copy=False)
    if w is not None:
        w = scaled_weights(w, exponent)
    rows = Rows.piece(
        np.asarray(z), y, w, total, n_jobs=1, row_max=row_max, unchecked=unchecked
    )
    # The per-block results, what the driver folds, stacked: a few arrays.
    # Sent as a list, each small array of each block (a piece has hundreds of
    # blocks, thousands with long rows) was a message part of its own, and
    # decoding them kept the driver busy longer than the workers took to
    # compute. Other results (a few per piece) as one pickled buffer.
    try:
        got = parts(rows, *args)
    except _Found as found:
        return None, None, str(found)
    if not isinstance(got, (np.ndarray, Stacked)):
        got = pickle.dumps(list(got), protocol=pickle.HIGHEST_PROTOCOL)
    return got, None if row_max is not None else rows.row_maxima(), None


class DaskRows(Rows):
    """Held-out rows in a Dask array: each pass is one Dask reduction.

    The rows are cut into pieces aligned with the blocks of the in-memory
    passes (:func:`_pieces`), so every float64 value, and hence every step
    of either solver, is the in-memory one bit for bit. One first, small
    computation reads the warm start's subsample (and, with weights, checks
    them and finds the largest); with weights, a second one (weights only)
    sums them. The search's first read of all the rows checks the logits and
    labels as it reads them, as the in-memory fit does: no pass of its own.
    Whatever finds a problem, the whole check (:func:`_chunk_stats`, one
    more reduction) names the first in row order, with the message the
    in-memory checks give.
    """

    def __init__(self, logits, y, sample_weight=None):
        logits = as_logits(logits)
        row_chunks = logits.chunks[0]
        n_samples, n_classes = logits.shape
        y = _along(y, row_chunks, "y", n_samples)
        if sample_weight is not None:
            if np.ndim(sample_weight) == 0:
                sample_weight = np.full(n_samples, float(sample_weight))
            sample_weight = _along(
                sample_weight, row_chunks, "sample_weight", n_samples
            )
        self.logits, self.y, self._weights = logits, y, sample_weight
        self.n_samples, self.n_classes = n_samples, n_classes
        self.n_jobs = 1
        self._maxima = None
        step = next(iter(blocks(n_samples, n_classes, F32_BLOCKS))).stop
        mapped = getattr(_shards(logits), "mapped", False)
        size = _MAPPED_PIECE_BYTES if mapped else _PIECE_BYTES
        per_piece = size // logits.dtype.itemsize
        max_rows = max(step, per_piece // n_classes // step * step)
        pieces = _pieces(row_chunks, step, max_rows)
        self.n_parts = len(pieces)
        self._parts = [
            (
                _lazy_part(logits, "logits", a, b),
                _lazy_part(y, "y", a, b),
                None
                if sample_weight is None
                else _lazy_part(sample_weight, "sample_weight", a, b),
            )
            for a, b in pieces
        ]
        self._bounds = pieces
        # Each piece's row maxima and block ranges (wide float32 rows), once a
        # read found them: given to its later reads, the kernel reads such
        # rows once per pass as in memory (8 bytes a row on the driver; the
        # same bits).
        self._row_max: list[tuple | None] = [None] * len(pieces)
        self._inline = [_inline_graph(*part) for part in self._parts]
        # One small computation: the warm start's subsample (the pieces'
        # rows of it) and the largest weight.
        self._sample_rows = picked = subsample_rows(n_samples, n_classes)
        self._exponent = 0
        self.sample_weight = None
        self.total = float(n_samples)
        self._unchecked = True  # (until a read of all the rows found no problem)
        # Of mapped shards, a piece's sample is a few pages: read here, not
        # in a task (58 tasks were 5% of a fit on a 2-worker LocalCluster).
        here = mapped and None not in self._inline
        got = self._tasks(_sample_part, n_classes, picked, each=pieces, here=here)
        got = got if here else dask.compute(*got)
        if any(part is None for part in got):
            self._refuse("the Dask arrays changed between two reads.")
        sample = [
            None if parts[0] is None else np.concatenate(parts)
            for parts in zip(*(part[0] for part in got), strict=True)
        ]
        # (each piece as declared: the sample is; positions the sample's)
        if check_chunk(*sample, 0, n_classes) is not None:
            self._refuse("the warm start's sample of the Dask arrays changed.")
        self._sample = [np.ascontiguousarray(sample[0]), *sample[1:]]
        # Every row flat is decided by the whole check (as rare as it is).
        self._flat = not _varies(sample[0], sample[2]) and not self._full_check()
        if sample_weight is not None:
            top = max(part[1] for part in got)
            if not top > 0:
                self._full_check()  # (a problem elsewhere is named first)
                raise ValueError(
                    "sample_weight must have a positive sum; got all zeros."
                )
            self._exponent = weight_exponent(top)
            sums = dask.compute(
                *self._tasks(_weight_sums, self._exponent, n_classes, weights_only=True)
            )
            self.total = float(fold(add, [s for part in sums for s in part]))
            self.sample_weight = sample_weight  # normalised inside each task

    def _full_check(self) -> bool:
        """The whole check of every piece (one Dask reduction): raises the
        first problem in row order, else returns whether a row of positive
        weight varies (and the rows need no other check)."""
        stats = dask.compute(
            *self._tasks(_chunk_stats, self.n_classes, each=self._bounds)
        )
        for st in stats:
            if st["error"] is not None:
                raise ValueError(st["error"])
        self._unchecked = False
        return any(st["varies"] for st in stats)

    def _refuse(self, problem: str) -> None:
        """A read found a problem: the whole check names the first; if it
        finds none (chunks that changed between reads), ``problem``."""
        self._full_check()
        raise ValueError(problem)

    def _tasks(
        self, func, *args, each=None, weights_only: bool = False, here: bool = False
    ) -> list:
        """One task per piece, ``func(z, y, w, *each[i], *args)`` (``each``:
        one tuple of arguments per piece, or None): the piece's reads run
        inside the task where they are small to ship (see
        :func:`_inline_graph`), else as its dependencies. With ``here``
        (every piece's reads inline), the results, computed in this thread."""
        tasks = []
        for i, (parts, blob) in enumerate(zip(self._parts, self._inline, strict=True)):
            extra = args if each is None else (*each[i], *args)
            if weights_only:  # (the logits and labels are not read)
                parts, blob = (None, None, parts[2]), None
            declared = tuple(p[0] if _is_lazy(p) else None for p in parts)
            given = tuple(None if _is_lazy(p) else p for p in parts)
            packed = _Opaque((declared, given, extra))
            if blob is not None:
                call = _inline_call if here else dask.delayed(_inline_call, pure=False)
                tasks.append(call(func, blob, packed))
            else:
                chunks = [p[1] if _is_lazy(p) else [] for p in parts]
                call = dask.delayed(_lazy_call, pure=False)
                tasks.append(call(func, packed, *chunks))
        return tasks

    def _each_piece(self, parts, *args) -> list:
        """``parts`` on every piece (one Dask computation): the per-block
        results in block order, which the read folds on the driver."""
        check = self._unchecked
        each = [
            (*b, m, check) for b, m in zip(self._bounds, self._row_max, strict=True)
        ]
        tasks = self._tasks(
            _run, self.n_classes, parts, self._exponent, self.total, *args, each=each
        )
        got = dask.compute(*tasks)
        problems = [problem for _, _, problem in got if problem is not None]
        if problems:
            self._refuse(problems[0])
        self._unchecked = False
        for i, (_, found, _) in enumerate(got):
            if found is not None:
                self._row_max[i] = found
        got = [g for g, _, _ in got]
        if all(isinstance(g, np.ndarray) for g in got):
            return np.concatenate(got)  # (fold adds its rows in order)
        if all(isinstance(g, Stacked) for g in got):
            return Stacked.joined(list(got))
        return [r for part in got for r in pickle.loads(part)]

    def nll_parts(self, temperatures):
        return self._each_piece(Rows.nll_parts, temperatures)

    def derivatives_parts(self, betas, precision, second_moment, higher=False):
        return self._each_piece(
            Rows.derivatives_parts, betas, precision, second_moment, higher
        )

    def slopes_parts(self, temperatures, moments, facts, higher=False, span=False):
        return self._each_piece(
            Rows.slopes_parts, temperatures, moments, facts, higher, span
        )

    def window_parts(
        self, temperatures, exact_t, spread, deriv_at=None, slopes=False, span=False
    ):
        return self._each_piece(
            Rows.window_parts, temperatures, exact_t, spread, deriv_at, slopes, span
        )

    def exact_parts(self, temperatures, digits=HP_DIGITS):
        return self._each_piece(Rows.exact_parts, temperatures, digits)

    def readable(self) -> bool:
        return False  # (the warm start gathers a small subsample)

    def view(self, rows: slice):
        return None

    def flat(self) -> bool:
        return self._flat

    def subsample(self, rows: slice) -> tuple[NDArray, NDArray, NDArray | None]:
        if rows == self._sample_rows:
            got = self._sample  # (read by the first computation)
        else:
            parts = [self.logits[rows], self.y[rows]]
            if self._weights is not None:
                parts.append(self._weights[rows])
            got = dask.compute(*parts)
        w = None if self._weights is None else scaled_weights(got[2], self._exponent)
        return np.ascontiguousarray(got[0]), np.asarray(got[1]).astype(np.intp), w


class _NpyShards:
    """``.npy`` shards, concatenated along rows, as a lazy array for
    ``dask.array.from_array``: small to send to a worker, and a task reads
    only the rows it asks for (memory-mapped: the mapping lives as long as
    the task's piece). One object over all the shards, not a concatenation
    of arrays, so that Dask hands each task's row range to ``__getitem__``.
    """

    def __init__(self, paths, what: str):
        self.paths = [str(p) for p in paths]
        self.what = what
        sizes = []
        first = None
        # Each shard's header bytes and where its data start, for C-ordered
        # shards (Fortran-ordered ones are read through np.load).
        self._heads: list[tuple[bytes, int] | None] = []
        for path in self.paths:
            head = _load_mapped(path)
            if not isinstance(head, np.ndarray) or head.ndim == 0:
                raise ValueError(f"{what} shard {path!r} is not a .npy array.")
            shape, dtype = head.shape, head.dtype
            start = getattr(head, "offset", None)
            c_order = head.flags.c_contiguous and not dtype.hasobject
            del head
            if c_order and start is not None:
                with open(path, "rb") as fh:
                    self._heads.append((fh.read(start), start))
            else:
                self._heads.append(None)
            if first is None:
                first = (shape[1:], dtype)
            if (shape[1:], dtype) != first:
                raise ValueError(
                    f"{what} shard {path!r} has shape {shape} and dtype {dtype}; "
                    f"the first shard has rows of shape {first[0]} and dtype "
                    f"{first[1]}."
                )
            sizes.append(shape[0])
        self.sizes = tuple(sizes)
        # Whether a task's rows of one shard are a view of its mapped pages
        # that the kernel reads as it is (no copy of any size).
        self.mapped = all(h is not None for h in self._heads) and (
            first[1] in (np.float32, np.float64) and first[1].isnative
        )
        self.starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.shape = (int(self.starts[-1]), *first[0])
        self.dtype = first[1]
        self.ndim = len(self.shape)

    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        rows, rest = key[0], key[1:]
        if isinstance(rows, slice) and rows.step in (None, 1):
            start, stop, _ = rows.indices(self.shape[0])
            index = None
        else:  # strided or fancy rows (the warm start's subsample)
            index = np.arange(self.shape[0])[rows].reshape(-1)
            start, stop = (
                (int(index.min()), int(index.max()) + 1) if index.size else (0, 0)
            )
        parts = []
        for i, path in enumerate(self.paths):
            lo, hi = max(start, self.starts[i]), min(stop, self.starts[i + 1])
            if lo >= hi:
                continue
            if index is None:
                local = slice(int(lo - self.starts[i]), int(hi - self.starts[i]))
                # A view of the mapped file, not a copy: the task reads the
                # pages from the page cache, with no fresh memory to fault in.
                mapped = self._map_rows(i, local)
                if mapped is not None:
                    parts.append(mapped[(slice(None), *rest)])
                    continue
            else:
                mine = index[(index >= lo) & (index < hi)]
                local = mine - self.starts[i]
            data = _load_mapped(path)
            self._check_unchanged(i, data)
            parts.append(data[(local, *rest)])
            del data
        if not parts:
            empty = np.empty((0, *self.shape[1:]), dtype=self.dtype)
            return empty[(slice(None), *rest)]
        out = np.concatenate(parts) if len(parts) > 1 else parts[0]
        if index is not None and index.size and np.any(np.diff(index) < 0):
            out = out[np.argsort(np.argsort(index, kind="stable"), kind="stable")]
        return out

    def _map_rows(self, i: int, rows: slice) -> NDArray | None:
        """Rows ``rows`` of shard ``i``, mapping only their bytes, if the
        file still starts with the header it had when scanned (None
        otherwise: then read through np.load, which names what changed); a
        ValueError if it no longer holds the data its header declares.
        Cheaper than np.load for a task's piece: no header parsed, and only
        the piece's pages mapped and unmapped."""
        head = self._heads[i]
        if head is None:
            return None
        header, data_start = head
        row_bytes = self.dtype.itemsize * math.prod(self.shape[1:])
        n_rows = rows.stop - rows.start
        with open(self.paths[i], "rb") as fh:
            if fh.read(len(header)) != header:
                return None  # (np.load names the shape or dtype now there)
            whole = data_start + self.sizes[i] * row_bytes
            size = os.fstat(fh.fileno()).st_size
            if size < whole:  # (a mapping past the end would fault on a read)
                raise ValueError(
                    f"{self.what} shard {self.paths[i]!r} now holds {size} bytes; "
                    f"its header declares {whole}."
                )
            if n_rows == 0 or row_bytes == 0:
                return np.empty((n_rows, *self.shape[1:]), dtype=self.dtype)
            begin = data_start + rows.start * row_bytes
            skip = begin % mmap.ALLOCATIONGRANULARITY
            mapped = mmap.mmap(
                fh.fileno(),
                skip + n_rows * row_bytes,
                access=mmap.ACCESS_READ,
                offset=begin - skip,
            )
        values = np.frombuffer(
            mapped, self.dtype, n_rows * math.prod(self.shape[1:]), skip
        )
        return values.reshape(n_rows, *self.shape[1:])

    def _check_unchanged(self, i: int, data) -> None:
        """A shard read by a task still has the shape and dtype it had when
        the shards were scanned (a file rewritten since would make the
        pieces lie about their rows)."""
        want = (self.sizes[i], *self.shape[1:])
        if data.shape != want or data.dtype != self.dtype:
            raise ValueError(
                f"{self.what} shard {self.paths[i]!r} now has shape {data.shape} "
                f"and dtype {data.dtype}; it had shape {want} and dtype "
                f"{self.dtype} when the shards were scanned."
            )


def load_npy_shards(paths, *, what: str = "logits") -> da.Array:
    """One lazy Dask array over ``.npy`` shards, concatenated along rows in
    the given order, one chunk per shard; each task reads only the rows it
    needs, on the worker that runs it, so nothing is gathered."""
    shards = _NpyShards(paths, what)
    chunks = (shards.sizes, *((n,) for n in shards.shape[1:]))
    array = da.from_array(shards, chunks=chunks, inline_array=True, asarray=False)
    with _SHARDS_LOCK:
        _SHARDS.pop(array.name, None)
        _SHARDS[array.name] = shards, array.dask
        while len(_SHARDS) > _SHARDS_NAMES:
            del _SHARDS[next(iter(_SHARDS))]
    return array
