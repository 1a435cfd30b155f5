"""The Dask backend: the same search, each pass one Dask reduction.

Clusters are started by the tests themselves, on loopback only.
"""

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array", reason="dask is not installed (skts[dask])")
dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")

from dask.callbacks import Callback  # noqa: E402

from skts import BoundaryTemperatureWarning, TemperatureScaler  # noqa: E402
from skts._numerics import (  # noqa: E402
    default_temperatures,
    grid_search,
    nll_many,
    solve_continuous,
)

from _reference import exact_choices  # noqa: E402


def _problem(n=40_000, k=10, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    z = (rng.normal(size=(n, k)) * 3).astype(dtype)
    y = rng.integers(0, k, n)
    z[np.arange(n), y] += 2.5  # an overconfident model: T > 1
    return z, y


def _weights(n, seed=1):
    rng = np.random.default_rng(seed)
    w = rng.random(n)
    w[::7] = 0.0  # zero weights count for nothing
    return w


def _fit(z, y, w=None, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BoundaryTemperatureWarning)
        return TemperatureScaler(**params).fit(z, y, w)


class _Computes(Callback):
    """Counts the Dask computations (one per pass) on the local schedulers."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def _start(self, dsk):
        self.count += 1


# --------------------------------------------------------------------------
# Threaded scheduler (the default): identical to the in-memory fit.


@pytest.mark.parametrize("solver", ["grid", "continuous"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("chunks", [1_000, 7_919, 26_212, 100_000])
def test_same_temperature_and_loss_as_in_memory_bit_for_bit(solver, weighted, chunks):
    # Chunks smaller than, unaligned with, equal to and larger than the
    # blocks of a pass (26,212 rows of 10 classes): the same bits.
    z, y = _problem()
    w = _weights(len(y)) if weighted else None
    ref = _fit(z, y, w, solver=solver)
    wd = None if w is None else da.from_array(w, chunks=chunks)
    got = _fit(
        da.from_array(z, chunks=(chunks, 10)),
        da.from_array(y, chunks),
        wd,
        solver=solver,
    )
    assert got.temperature_ == ref.temperature_
    assert got.validation_loss_ == ref.validation_loss_
    assert got.at_boundary_ == ref.at_boundary_


def test_the_slopes_window_reads_the_same_bits_in_chunks(monkeypatch):
    # Wide rows whose subsample leaves the minimum a few grid steps
    # uncertain: a float32 Newton step, then the nearest candidate alone with
    # its proven slopes, F'' and the rows' largest range (the pieces are
    # given their row maxima, not their ranges: they find those again), and
    # the windows that follow (skts._numerics._grid); chunk by chunk, the
    # same reads and the same bits.
    from _data import spy_windows

    rng = np.random.default_rng(1)
    z = rng.normal(scale=6.0, size=(12_000, 500)).astype(np.float32)
    y = np.where(rng.random(12_000) < 0.9, z.argmax(1), rng.integers(0, 500, 12_000))
    seen = spy_windows(monkeypatch)
    ref = _fit(z, y)
    assert seen[0] == (1, True)
    in_memory = list(seen)
    seen.clear()
    got = _fit(da.from_array(z, chunks=(2_777, 500)), da.from_array(y, 2_777))
    assert seen == in_memory
    assert got.temperature_ == ref.temperature_
    assert got.validation_loss_ == ref.validation_loss_


def test_one_read_at_the_nearest_candidate_reads_the_same_bits_in_chunks(
    monkeypatch,
):
    # A subsample close to the minimum: the first read is the nearest
    # candidate alone with its slopes, F'' and the rows' largest range, and
    # its proof settles the rule (skts._numerics._grid._proven). Chunk by
    # chunk, the same reads, the same F'' bits and range, the same answer.
    from skts._numerics import Rows, _grid, derivatives

    z, y = _problem(n=200_000, seed=4)
    w = _weights(len(y))
    ref_t = _fit(z, y, w).temperature_
    spacing = 0.0092  # (the default grid's)
    curvature = derivatives(z[::20], y[::20], 1.0 / ref_t, w[::20])[2]
    monkeypatch.setattr(
        _grid,
        "warm_start",
        lambda *a: (1.0 / ref_t, 0.5 * spacing / ref_t, curvature, 0),
    )
    reads = []
    window = Rows.window

    def spy(rows, temperatures, *a, **kw):
        read = window(rows, temperatures, *a, **kw)
        reads.append((len(temperatures), kw["span"], read.curvature, read.span))
        return read

    monkeypatch.setattr(Rows, "window", spy)
    ref = _fit(z, y, w)
    assert [r[:2] for r in reads] == [(1, True)]
    want = reads[:]
    reads.clear()
    got = _fit(da.from_array(z, chunks=(33_333, 10)), da.from_array(y, 33_333), w)
    assert [r[:2] for r in reads] == [(1, True)]
    assert reads[0][3] == want[0][3] == float(np.ptp(z.astype(np.float64), 1).max())
    for a, b in zip(reads[0][2], want[0][2], strict=True):
        assert np.array_equal(a, b)
    assert got.temperature_ == ref.temperature_ == ref_t
    assert got.validation_loss_ == ref.validation_loss_


def test_grid_matches_brute_force_in_real_arithmetic():
    z, y = _problem(n=600, k=5, seed=3, dtype=np.float64)
    w = _weights(600, seed=4)
    grid = np.geomspace(0.25, 8.0, 41)
    got = _fit(da.from_array(z, chunks=(97, 5)), y, w, temperatures=grid)
    assert got.temperature_ in exact_choices(z, y, grid, w)


def test_continuous_is_within_tolerance_of_the_stationary_point():
    z, y = _problem(n=3_000, k=6, seed=5, dtype=np.float64)
    got = _fit(da.from_array(z, chunks=(701, 6)), y, solver="continuous")
    # Independent check: the float64 loss is no lower a hair away on either side.
    t = got.temperature_
    losses = nll_many(z, y, [t * (1 - 1e-6), t, t * (1 + 1e-6)])
    assert losses[1] <= losses[0] and losses[1] <= losses[2]


@pytest.mark.parametrize("solver", ["grid", "continuous"])
def test_each_pass_is_one_dask_computation(solver):
    z, y = _problem(n=30_000)
    if solver == "grid":
        result = grid_search(z, y, np.geomspace(0.01, 100, 1001))
    else:
        result = solve_continuous(z, y, 0.01, 100.0)
    with _Computes() as computes:
        _fit(da.from_array(z, chunks=(4_000, 10)), y, solver=solver)
    # One computation validates the input and reads the warm start's
    # subsample; then exactly the in-memory passes.
    assert computes.count == 1 + result.n_passes


def test_predictions_are_lazy_dask_arrays_equal_to_numpy():
    z, y = _problem(n=5_000)
    zd = da.from_array(z, chunks=(1_234, 10))
    scaler = _fit(zd, y)
    proba = scaler.predict_proba(zd)
    assert isinstance(proba, da.Array)
    np.testing.assert_array_equal(proba.compute(), scaler.predict_proba(z))
    log_proba = scaler.predict_log_proba(zd)
    assert isinstance(log_proba, da.Array)
    np.testing.assert_array_equal(log_proba.compute(), scaler.predict_log_proba(z))
    np.testing.assert_array_equal(scaler.predict(zd).compute(), scaler.predict(z))
    np.testing.assert_array_equal(scaler.transform(zd).compute(), scaler.transform(z))


def test_column_chunks_are_rechunked_with_a_warning():
    z, y = _problem(n=2_000)
    ref = _fit(z, y)
    with pytest.warns(UserWarning, match=r"split into 2 column chunks.*rechunk"):
        got = TemperatureScaler().fit(da.from_array(z, chunks=(500, 5)), y)
    assert got.temperature_ == ref.temperature_


def test_flat_rows_give_the_smallest_candidate():
    z = np.zeros((1_000, 3))
    y = np.arange(1_000) % 3
    with pytest.warns(BoundaryTemperatureWarning, match="same for every"):
        got = TemperatureScaler(temperatures=[3.0, 0.5, 2.0]).fit(
            da.from_array(z, chunks=(300, 3)), y
        )
    assert got.temperature_ == 0.5


@pytest.mark.parametrize(
    "mutate, match",
    [
        (
            lambda z, y, w: z.__setitem__((1234, 3), np.nan),
            r"finite; got nan at row 1234",
        ),
        (
            lambda z, y, w: y.__setitem__(777, 10),
            r"in \[0, 10\); got 10 at position 777",
        ),
        (lambda z, y, w: w.__setitem__(901, -1.0), r"got -1.0 at position 901"),
        (lambda z, y, w: w.__setitem__(slice(None), 0.0), r"positive sum"),
    ],
)
def test_bad_input_names_the_global_position(mutate, match):
    z, y = _problem(n=2_000)
    z = z.astype(np.float64)
    w = np.ones(2_000)
    mutate(z, y, w)
    with pytest.raises(ValueError, match=match):
        TemperatureScaler().fit(
            da.from_array(z, chunks=(300, 10)),
            da.from_array(y, chunks=300),
            da.from_array(w, chunks=300),
        )


def _spaced(y_float=False):
    """300,000 rows of 10 classes: the warm start's sample is every fourth
    row, so most rows are first read by the search."""
    z, y = _problem(n=300_000, seed=21)
    return z, y.astype(np.float64) if y_float else y, np.ones(300_000)


def _set(name, row, value, col=None):
    """A mutation of ``(z, y, w)``: ``name``'s ``row`` (and column) set."""

    def mutate(z, y, w):
        arr = {"z": z, "y": y, "w": w}[name]
        arr[row if col is None else (row, col)] = value

    return mutate


@pytest.mark.parametrize(
    "mutations, match, weighted, computes",
    [
        # (the computations: the sample, with the largest weight; the
        # weights' sum; the first read; the whole check)
        ([_set("z", 1235, np.nan, 3)], r"got nan at row 1235\.", 0, 3),
        ([_set("z", 299_999, -np.inf, 9)], r"got -inf at row 299999\.", 1, 4),
        ([_set("y", 777, 10)], r"\[0, 10\); got 10 at position 777\.", 0, 3),
        ([_set("y", 150_001, -1)], r"got -1 at position 150001\.", 1, 4),
        ([_set("y", 1235, 1.5)], r"indices; got 1.5 at position 1235\.", 0, 3),
        # (the weights: found before any read of the logits)
        ([_set("w", 901, -1.0)], r"got -1.0 at position 901\.", 1, 2),
        ([_set("w", 6001, np.nan)], r"got nan at position 6001\.", 1, 2),
        # Two problems in one piece: the logits' first, as the whole check says.
        (
            [_set("y", 3, 11), _set("z", 5001, np.inf, 0)],
            r"finite; got inf at row 5001\.",
            0,
            3,
        ),
    ],
)
def test_the_first_read_checks_the_rows_the_sample_does_not_hold(
    mutations, match, weighted, computes
):
    # No pass of its own checks the inputs: the warm start's sample is
    # checked when read, the weights by the pass that finds the largest, the
    # logits and labels by the search's first read (labels before the kernel
    # reads them). Whatever finds a problem, the whole check names the first,
    # and nothing is fitted.
    from skts._numerics import subsample_rows

    z, y = _problem(n=300_000, seed=21)
    y = y.astype(np.float64) if "1.5" in match else y
    w = np.ones(len(y))
    for mutate in mutations:
        mutate(z, y, w)
    picked = range(*subsample_rows(*z.shape).indices(len(z)))
    assert picked.step == 4 and not {
        1235,
        299_999,
        777,
        150_001,
        901,
        6001,
        3,
        5001,
    } & set(picked)
    scaler = TemperatureScaler()
    args = [da.from_array(z, chunks=(50_000, 10)), da.from_array(y, chunks=50_000)]
    if weighted:
        args.append(da.from_array(w, chunks=50_000))
    with _Computes() as counted, pytest.raises(ValueError, match=match):
        scaler.fit(*args)
    assert not hasattr(scaler, "temperature_")
    assert counted.count == computes


@pytest.mark.parametrize("when", ["sample", "first read"])
def test_a_chunk_that_changes_between_reads_is_refused(when):
    # A problem one read found and the whole check does not (a chunk
    # computed again gives other values) is refused, never fitted around.
    import skts._dask as sd

    z, y = _problem(n=300_000, seed=23)
    n_parts = sd.DaskRows(da.from_array(z, chunks=z.shape), y).n_parts
    bad_call = 1 if when == "sample" else n_parts + 1  # (one call per piece)
    calls = []

    def chunk():
        calls.append(1)
        out = z.copy()
        if len(calls) == bad_call:
            out[:, 0] = np.nan
        return out

    lazy = dask.delayed(chunk, pure=False)()
    zd = da.from_delayed(lazy, shape=z.shape, dtype=z.dtype)
    scaler = TemperatureScaler()
    match = "changed" if when == "sample" else "must be finite; got nan at row"
    with (
        dask.config.set(scheduler="synchronous"),
        pytest.raises(ValueError, match=match),
    ):
        scaler.fit(zd, y)
    assert not hasattr(scaler, "temperature_")
    assert len(calls) == n_parts * (2 if when == "sample" else 3)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("flat_sample", [False, True])
def test_clean_inputs_are_checked_by_the_reads_alone(
    weighted, flat_sample, monkeypatch
):
    # The whole check runs only when a read found a problem, or when every
    # row of the sample is flat (then it decides whether every row is).
    import skts._dask as sd

    z, y = _problem(n=300_000, seed=22)
    w = _weights(len(z)) if weighted else None
    if flat_sample:
        z[::4] = 1.0  # (the sample's rows)
    chunks = (50_000, 10)
    n_parts = sd.DaskRows(da.from_array(z, chunks=chunks), y).n_parts
    calls = []
    real = sd._chunk_stats
    monkeypatch.setattr(sd, "_chunk_stats", lambda *a: calls.append(1) or real(*a))
    with dask.config.set(scheduler="synchronous"):  # (the spy sees every task)
        got = _fit(
            da.from_array(z, chunks=chunks),
            da.from_array(y, chunks=chunks[0]),
            None if w is None else da.from_array(w, chunks=chunks[0]),
        )
    assert got.temperature_ == _fit(z, y, w).temperature_
    assert len(calls) == (n_parts if flat_sample else 0)


def test_shape_errors_are_one_line():
    z, y = _problem(n=100)
    zd = da.from_array(z, chunks=(30, 10))
    with pytest.raises(ValueError, match="100 rows but y has 99"):
        TemperatureScaler().fit(zd, y[:99])
    with pytest.raises(ValueError, match="2-D"):
        TemperatureScaler().fit(zd[:, 0], y)
    unknown = zd[da.from_array(y, chunks=30) >= 0]
    with pytest.raises(ValueError, match=r"unknown chunk sizes.*compute_chunk_sizes"):
        TemperatureScaler().fit(unknown, y)
    scaler = _fit(z, y)
    with pytest.raises(ValueError, match="9 columns"):
        scaler.predict_proba(zd[:, :9])


def test_importing_skts_does_not_import_dask():
    code = "import sys, skts; print('dask' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr


# --------------------------------------------------------------------------
# A LocalCluster of two worker processes, data in shards on disk.


def _write_shards(folder, z, y, sizes):
    paths = []
    start = 0
    for i, size in enumerate(sizes):
        zp, yp = folder / f"logits_{i:03d}.npy", folder / f"labels_{i:03d}.npy"
        np.save(zp, z[start : start + size])
        np.save(yp, y[start : start + size])
        paths.append((zp, yp, size))
        start += size
    return paths


def _load(path, delay=0.0):
    # Runs on the workers: the shards are read there, never gathered.
    if delay:
        time.sleep(delay)
    return np.load(path, mmap_mode="r")


def _lazy(paths, k, dtype, delay=0.0):
    load = dask.delayed(_load, pure=True)
    z = da.concatenate(
        [da.from_delayed(load(str(zp), delay), (n, k), dtype) for zp, _, n in paths]
    )
    y = da.concatenate(
        [da.from_delayed(load(str(yp)), (n,), np.int64) for _, yp, n in paths]
    )
    return z, y


@pytest.fixture(scope="module")
def by_value():
    import cloudpickle

    # The test's own loader must reach the worker processes by value.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def _cluster():
    # Two worker processes on loopback, no dashboard.
    return distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=":0",
    )


@pytest.fixture(scope="module")
def client(by_value):
    with _cluster() as cluster, distributed.Client(cluster) as c:
        yield c


@pytest.mark.parametrize("solver", ["grid", "continuous"])
def test_local_cluster_on_shards_gives_the_in_memory_answer(client, tmp_path, solver):
    z, y = _problem(n=60_000, seed=7)
    w = _weights(60_000, seed=8)
    paths = _write_shards(tmp_path, z, y, [9_000, 13_000, 20_000, 5_000, 13_000])
    zd, yd = _lazy(paths, 10, np.float32)
    ref = _fit(z, y, w, solver=solver)
    got = _fit(zd, yd, da.from_array(w, chunks=20_000), solver=solver)
    assert got.temperature_ == ref.temperature_
    assert got.validation_loss_ == ref.validation_loss_
    t = got.temperature_
    if solver == "grid":  # brute force: every candidate, in float64
        grid = default_temperatures()
        losses = nll_many(z, y, grid, w)
        assert t == grid[np.flatnonzero(losses == losses.min())[0]]
    else:  # a minimiser: no lower loss a hair away on either side
        around = nll_many(z, y, [t * (1 - 1e-6), t, t * (1 + 1e-6)], w)
        assert around[1] <= around[0] and around[1] <= around[2]
    # The tasks ran on the workers, not here.
    assert client.run(lambda: 1)  # both workers alive
    proba = got.predict_proba(zd)
    np.testing.assert_array_equal(proba[:1000].compute(), ref.predict_proba(z[:1000]))


def _pieces_block_by_block(row_chunks, step, max_rows):
    # The rule read one block at a time: a block inside one chunk joins the
    # piece before it if that piece's blocks are in the same chunk and the
    # piece stays within max_rows; a block across chunks is a piece alone.
    edges = np.cumsum(row_chunks)
    pieces, before = [], None
    for start in range(0, int(edges[-1]), step):
        stop = min(start + step, int(edges[-1]))
        first, last = np.searchsorted(edges, [start, stop - 1], side="right")
        owner = first if first == last else None
        if owner is not None and owner == before and stop - pieces[-1][0] <= max_rows:
            pieces[-1] = (pieces[-1][0], stop)
        else:
            pieces.append((start, stop))
        before = owner
    return pieces


def test_pieces_are_cut_as_block_by_block():
    from skts._dask import _pieces

    rng = np.random.default_rng(5)
    for _ in range(2000):  # (empty chunks, chunks shorter than a block)
        chunks = tuple(int(c) for c in rng.integers(0, 60, rng.integers(1, 8)))
        chunks = chunks if sum(chunks) else (*chunks, 1)
        step, per = int(rng.integers(1, 12)), int(rng.integers(1, 6))
        got = _pieces(chunks, step, step * per)
        assert got == _pieces_block_by_block(chunks, step, step * per)
    # the shards of docs/scale.md's table: 20 chunks of 100,000 rows
    got = _pieces((100_000,) * 20, 128, 128 * 270)
    assert got == _pieces_block_by_block((100_000,) * 20, 128, 128 * 270)
    assert len(got) == 75


@pytest.mark.parametrize("lazy_labels", [True, False])
def test_each_pass_is_one_task_per_piece_reading_where_it_runs(
    client, tmp_path, lazy_labels
):
    # Shards read from files: each task of a pass reads its own rows (the
    # reading travels inside the task), so no task waits for data moved from
    # another worker. 30,000 rows of 10 classes make 2 pieces: the first
    # block of 26,212 rows (across the three shards) and the rest.
    z, y = _problem(n=30_000, seed=12)
    paths = _write_shards(tmp_path, z, y, [10_000, 10_000, 10_000])
    zd, yd = _lazy(paths, 10, np.float32)
    passes = grid_search(z, y, np.geomspace(0.01, 100, 1001)).n_passes
    with distributed.get_task_stream(client) as stream:
        got = _fit(zd, yd if lazy_labels else y)  # NumPy labels: sliced per task
    runs = [t for t in stream.data if str(t["key"]).find("_inline_call") >= 0]
    # the warm start's sample (only its rows read), then every pass
    assert len(runs) == 2 * (1 + passes)
    assert not [
        t for t in runs if any(s["action"] == "transfer" for s in t["startstops"])
    ]
    assert got.temperature_ == _fit(z, y).temperature_


def test_the_sample_of_mapped_shards_is_read_by_the_driver(client, tmp_path):
    # Of shards load_npy_shards maps, the warm start's sample is a few pages
    # of each piece: the driver reads them itself (a task per piece cost a
    # 2-worker LocalCluster 5% of a fit); the passes run on the workers.
    import skts._dask as sd

    z, y = _problem(n=30_000, seed=13)
    paths = _write_shards(tmp_path, z, y, [10_000, 10_000, 10_000])
    zd = sd.load_npy_shards([zp for zp, _, _ in paths])
    yd = sd.load_npy_shards([yp for _, yp, _ in paths], what="labels")
    passes = grid_search(z, y, np.geomspace(0.01, 100, 1001)).n_passes
    n_parts = sd.DaskRows(zd, yd).n_parts
    with distributed.get_task_stream(client) as stream:
        got = _fit(zd, yd)
    runs = [t for t in stream.data if str(t["key"]).find("_inline_call") >= 0]
    assert n_parts > 1 and len(runs) == n_parts * passes
    assert got.temperature_ == _fit(z, y).temperature_
    # The same arrays computed from the shards: not mapped, the sample is read
    # by tasks (one more computation).
    with distributed.get_task_stream(client) as stream:
        again = _fit(zd * 1, yd)
    runs = [t for t in stream.data if str(t["key"]).find("_inline_call") >= 0]
    assert len(runs) == sd.DaskRows(zd * 1, yd).n_parts * (1 + passes)
    assert again.temperature_ == got.temperature_


def _same_bits(a, b):
    if isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b)
        for u, v in zip(a, b, strict=True):
            _same_bits(u, v)
    else:
        np.testing.assert_array_equal(a, b, strict=True)


@pytest.mark.parametrize("read", ["nll", "window", "derivatives", "slopes"])
def test_a_piece_sends_its_per_block_results_as_one_buffer(read):
    # Sent as a list, each small array of each block is a message part of
    # its own, and the driver took longer to decode them than the workers
    # took to compute (benchmarks/bench_outofcore.py). Stacked, a piece's
    # results are a few arrays, and they are the in-memory pass's per-block
    # results bit for bit.
    import pickle

    from skts._dask import _run
    from skts._numerics import Rows, Stacked

    z, y = _problem(n=90_000, seed=14)
    ts = np.array([1.5, 2.0, 2.5])
    parts, args = {
        "nll": (Rows.nll_parts, (ts,)),
        "window": (Rows.window_parts, (ts, ts[1:2], None, 1, True, True)),
        "derivatives": (Rows.derivatives_parts, (list(1 / ts), "float64", True)),
        "slopes": (Rows.slopes_parts, (ts, 1, True, False, True)),
    }[read]
    want = list(parts(Rows(z, y), *args))
    assert len(want) == 14  # (blocks of 6,553 rows)
    for check in (True, False):  # (the first read checks as it reads)
        sent, found, problem = _run(
            z, y, None, 0, len(y), None, check, 10, parts, 0, float(len(y)), *args
        )
        assert found is None and problem is None  # (10 classes: no row maxima)
        assert isinstance(sent, (np.ndarray, Stacked))  # a few arrays, stacked
        back = pickle.loads(pickle.dumps(sent, protocol=5))  # (as a cluster sends)
        _same_bits(list(back), want)


@pytest.mark.parametrize("solver", ["grid", "continuous"])
def test_later_reads_of_a_piece_are_given_its_row_maxima(solver, monkeypatch):
    # In memory, a fit's first read of wide float32 rows records their
    # maxima (and each block's largest row range) and the later reads read
    # each row once. On Dask each piece's first read sends its maxima and
    # ranges back and the driver gives them to its later reads: the same
    # bits, a third less time per read at 1,000 classes
    # (benchmarks/bench_outofcore.py).
    import skts._dask as sd
    from skts._numerics._blocks import rows_per_block

    # (the warm start a subsample; two reads with the grid)
    z, y = _problem(n=40_000, k=64, seed=17)
    given, found = [], []
    real = sd._run

    def spy(z, y, w, start, stop, row_max, *rest):
        given.append(row_max)
        out = real(z, y, w, start, stop, row_max, *rest)
        found.append((start, out[1]))
        return out

    monkeypatch.setattr(sd, "_run", spy)
    with dask.config.set(scheduler="synchronous"):  # (the spy sees every task)
        n_pieces = sd.DaskRows(da.from_array(z, chunks=(13_000, 64)), y).n_parts
        got = _fit(da.from_array(z, chunks=(13_000, 64)), y, solver=solver)
    assert n_pieces > 1
    assert got.temperature_ == _fit(z, y, solver=solver).temperature_
    first, later = given[:n_pieces], given[n_pieces:]
    assert later and all(m is None for m in first)
    # (every later read, every piece: its maxima and ranges)
    assert all(m is not None and m[1] is not None for m in later)
    maxima = np.concatenate([m[0] for _, m in sorted(found[:n_pieces])])
    np.testing.assert_array_equal(maxima, z.max(axis=1).astype(np.float64))
    spans = np.concatenate([m[1] for _, m in sorted(found[:n_pieces])])
    z64, step = z.astype(np.float64), rows_per_block(64)
    ranges = z64.max(axis=1) - z64.min(axis=1)
    want = [ranges[i : i + step].max() for i in range(0, len(y), step)]
    np.testing.assert_array_equal(spans, want)
    assert all(m is None for _, m in found[n_pieces:])  # (sent once)


def test_persisted_arrays_are_read_from_the_workers_memory(client, tmp_path):
    z, y = _problem(n=20_000, seed=13)
    paths = _write_shards(tmp_path, z, y, [5_000, 15_000])
    zd, yd = _lazy(paths, 10, np.float32)
    zd, yd = client.persist([zd, yd])
    assert _fit(zd, yd, solver="continuous").temperature_ == (
        _fit(z, y, solver="continuous").temperature_
    )


def test_local_cluster_grid_matches_brute_force(client, tmp_path):
    z, y = _problem(n=900, k=4, seed=9, dtype=np.float64)
    grid = np.geomspace(0.3, 9.0, 31)
    paths = _write_shards(tmp_path, z, y, [300, 250, 350])
    zd, yd = _lazy(paths, 4, np.float64)
    got = _fit(zd, yd, temperatures=grid)
    assert got.temperature_ in exact_choices(z, y, grid)


@pytest.mark.slow
def test_a_worker_killed_during_the_fit_changes_nothing(by_value, tmp_path):
    z, y = _problem(n=48_000, seed=11)
    paths = _write_shards(tmp_path, z, y, [6_000] * 8)
    ref = _fit(z, y)
    with _cluster() as cluster, distributed.Client(cluster) as c:
        # Each shard takes 0.25 s to read: every pass lasts about a second.
        zd, yd = _lazy(paths, 10, np.float32, delay=0.25)
        pids = c.run(os.getpid)
        result = {}

        def fit():
            result["scaler"] = _fit(zd, yd)

        worker = threading.Thread(target=fit)
        worker.start()
        time.sleep(1.5)  # inside the fit: validation, then the passes
        assert worker.is_alive()
        victim = sorted(pids.values())[0]
        os.kill(victim, signal.SIGKILL)
        worker.join(timeout=120)
        assert not worker.is_alive()
        # The nanny restarted the killed worker; Dask re-ran its tasks.
        assert victim not in c.run(os.getpid).values()
    assert result["scaler"].temperature_ == ref.temperature_
    assert result["scaler"].validation_loss_ == ref.validation_loss_


# -- chunks that lie about their shapes (issue 25) -----------------------------


def _declared(arr, shape):
    """One Dask chunk computing ``arr`` while declaring ``shape``."""
    return da.from_delayed(dask.delayed(lambda: arr)(), shape=shape, dtype=arr.dtype)


def _lying_inputs(z, y, w, liar: str, by: int, chunk: int):
    """Honest chunks of ``chunk`` rows, but the first chunk of ``liar``
    computes ``by`` rows (or, for ``logits_cols``, columns) more or fewer
    than it declares."""
    n, k = z.shape
    arrays = {"logits": z, "y": y, "sample_weight": w}
    out = {}
    for name, arr in arrays.items():
        pieces = []
        for start in range(0, n, chunk):
            part = arr[start : start + chunk]
            shape = part.shape
            if start == 0 and liar.startswith(name) and by:
                if liar == "logits_cols":
                    real = (
                        np.concatenate(
                            [part, np.zeros((part.shape[0], max(by, -k + 1)))], axis=1
                        )
                        if by > 0
                        else part[:, : k + by]
                    )
                else:
                    extra = np.resize(part, (max(part.shape[0] + by, 0), *shape[1:]))
                    real = extra.astype(part.dtype)
                pieces.append(_declared(np.ascontiguousarray(real), shape))
            else:
                pieces.append(da.from_array(part, chunks=shape))
        out[name] = da.concatenate(pieces, axis=0)
    return out["logits"], out["y"], out["sample_weight"]


@pytest.mark.parametrize(
    ("liar", "by", "match"),
    [
        ("y", -900, r"y chunk at rows 0-999 has shape \(100,\)"),  # (a segfault)
        ("y", 7, r"y chunk at rows 0-999 has shape \(1007,\)"),
        ("logits", -500, r"logits chunk at rows 0-999 has shape \(500, 3\)"),
        ("logits", 3, r"logits chunk at rows 0-999 has shape \(1003, 3\)"),
        ("logits_cols", 5, r"logits chunk at rows 0-999 has shape \(1000, 8\)"),
        ("logits_cols", -1, r"logits chunk at rows 0-999 has shape \(1000, 2\)"),
        ("sample_weight", -10, r"sample_weight chunk at rows 0-999 has shape \(990,\)"),
    ],
)
def test_a_chunk_that_lies_about_its_shape_is_refused(liar, by, match):
    rng = np.random.default_rng(0)
    z = rng.normal(size=(3000, 3)) * 2.0
    y = rng.integers(0, 3, 3000)
    w = rng.uniform(0.5, 1.5, 3000)
    # (the message names the chunk, in a piece of all 3000 rows)
    logits, labels, weights = _lying_inputs(z, y, w, liar, by, 1000)
    for solver in ("grid", "continuous"):
        with pytest.raises(ValueError, match=match):
            TemperatureScaler(solver=solver).fit(logits, labels, weights)


def test_a_shard_rewritten_after_the_scan_is_refused(tmp_path):
    from skts._dask import load_npy_shards

    rng = np.random.default_rng(1)
    z = rng.normal(size=(2000, 4))
    y = rng.integers(0, 4, 2000)
    paths = []
    for i in range(2):
        np.save(tmp_path / f"y{i}.npy", y[i * 1000 : (i + 1) * 1000])
        paths.append(tmp_path / f"y{i}.npy")
    labels = load_npy_shards(paths, what="labels")
    np.save(tmp_path / "y1.npy", y[1000:1100])  # shorter, after the scan
    with pytest.raises(ValueError, match=r"labels shard .*y1.npy' now has shape"):
        TemperatureScaler().fit(da.from_array(z, chunks=(1000, 4)), labels)


def test_a_shard_cut_short_after_the_scan_is_refused(tmp_path):
    # The same header, fewer bytes: a mapping past the end of the file would
    # fault when read (SIGBUS), so the read is refused first.
    from skts._dask import load_npy_shards

    z, y = _problem(n=3_000, k=6, seed=16)
    paths = _write_shards(tmp_path, z, y, [1_000, 2_000])
    logits = load_npy_shards([zp for zp, _, _ in paths])
    labels = load_npy_shards([yp for _, yp, _ in paths], what="labels")
    cut = paths[1][0]
    os.truncate(cut, os.path.getsize(cut) - 4 * 6 * 10)  # ten rows fewer
    with pytest.raises(ValueError, match=r"logits shard .* now holds \d+ bytes"):
        TemperatureScaler().fit(logits, labels)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_shard_rows_are_the_files_rows(tmp_path, dtype):
    # Each read maps only the rows it asks for (offsets off the page
    # boundary, ranges across shards, 1-D and 2-D): the same values as np.load.
    from skts._dask import _NpyShards

    rng = np.random.default_rng(17)
    for ndim in (1, 2):
        whole = (rng.normal(size=(997, 7) if ndim == 2 else 997) * 50).astype(dtype)
        cuts = [0, 1, 300, 301, 997]
        paths = []
        for i, (a, b) in enumerate(itertools.pairwise(cuts)):
            paths.append(tmp_path / f"{ndim}-{i}.npy")
            np.save(paths[-1], whole[a:b])
        shards = _NpyShards(paths, "logits")
        for a, b in [(0, 997), (0, 1), (1, 300), (5, 301), (299, 302), (301, 997)]:
            got = shards[a:b]
            assert got.dtype == whole.dtype
            np.testing.assert_array_equal(got, whole[a:b])


def test_the_sample_of_a_mapped_piece_is_read_without_read_around(
    tmp_path, monkeypatch
):
    # The warm start's sample is every k-th row: a fault of each, in a file
    # not in the page cache, would read around it up to the disk's
    # read-ahead (8 MiB on the CI machine), nearly the whole file. A piece of
    # mapped shards, a mapping of its own, is advised to be read at random.
    import mmap

    import skts._dask as sd

    z, y = _problem(n=30_000, seed=24)
    paths = _write_shards(tmp_path, z, y, [10_000, 20_000])
    shards = sd._NpyShards([zp for zp, _, _ in paths], "logits")
    piece = shards[12_000:30_000]
    assert isinstance(sd._mapping(piece), mmap.mmap)  # (what is advised)
    assert sd._mapping(np.asarray(z)) is None
    advised = []

    class Mapping:
        def madvise(self, advice):
            advised.append(advice)

    monkeypatch.setattr(sd, "_mapping", lambda a: Mapping())
    sample = sd._sample_part(
        piece, y[12_000:], None, 12_000, 30_000, 10, slice(0, 30_000, 7)
    )
    rows = np.arange(0, 30_000, 7)
    np.testing.assert_array_equal(sample[0][0], z[rows[rows >= 12_000]])
    assert advised == [mmap.MADV_RANDOM]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pieces_of_mapped_shards_are_larger_and_give_the_same_bits(
    tmp_path, monkeypatch, dtype
):
    # A piece of C-ordered shards that load_npy_shards maps is a view of the
    # page cache (no memory of its own), so it may hold more rows: fewer
    # tasks. The same rows from anything else (an array computed from the
    # shards, big-endian or Fortran-ordered shards, an in-memory array) keep
    # the small pieces. Every way gives the in-memory temperature.
    import skts._dask as sd

    per_row = 256 * np.dtype(dtype).itemsize  # (blocks of 1,024 rows)
    monkeypatch.setattr(sd, "_PIECE_BYTES", 1_024 * per_row)
    monkeypatch.setattr(sd, "_MAPPED_PIECE_BYTES", 8_192 * per_row)
    z, y = _problem(n=12_000, k=256, seed=23, dtype=dtype)
    sizes = [8_192, 3_808]
    paths = _write_shards(tmp_path, z, y, sizes)
    labels = sd.load_npy_shards([yp for _, yp, _ in paths], what="labels")
    mapped = sd.load_npy_shards([zp for zp, _, _ in paths])
    others = {
        "computed": mapped * 1,
        "in memory": da.from_array(z, chunks=(sizes, 256)),
    }
    for name, layout in (
        ("big-endian", z.astype(z.dtype.newbyteorder())),
        ("fortran", np.asfortranarray(z)),
    ):
        files = []
        for i, (a, b) in enumerate(itertools.pairwise([0, *np.cumsum(sizes)])):
            files.append(tmp_path / f"{name}-{i}.npy")
            np.save(
                files[-1],
                np.asfortranarray(layout[a:b]) if name == "fortran" else layout[a:b],
            )
        others[name] = sd.load_npy_shards(files)
    n_mapped = sd.DaskRows(mapped, labels).n_parts
    n_other = {name: sd.DaskRows(x, labels).n_parts for name, x in others.items()}
    # At most 1,024 or 8,192 rows a piece: one piece per shard against 12.
    assert n_mapped == 2
    assert all(n == 12 for n in n_other.values()), n_other
    want = _fit(z, y).temperature_
    assert _fit(mapped, labels).temperature_ == want
    for name, x in others.items():
        assert _fit(x, labels).temperature_ == want, name


def test_a_piece_of_shards_reads_its_rows_with_no_graph(tmp_path, monkeypatch):
    # A piece of the arrays load_npy_shards returned reads its rows of the
    # shards itself: no Dask graph built on the driver, shipped and run in
    # the task (they cost the driver 0.15-0.35 s of a fit). An
    # array with another graph (computed from the shards, or persisted under
    # the same name), or shards opened again since, is read through its
    # graph. Every way gives the in-memory temperature.
    import skts._dask as sd

    z, y = _problem(n=12_000, k=64, seed=37, dtype=np.float32)
    paths = _write_shards(tmp_path, z, y, [5_000, 7_000])
    zd = sd.load_npy_shards([zp for zp, _, _ in paths])
    yd = sd.load_npy_shards([yp for _, yp, _ in paths], what="labels")
    want = _fit(z, y).temperature_
    reads, graphs = [], []  # (each part a task reads: its own read or not)
    given, run = sd._given, sd.dask.get

    def noted(part):
        if part is not None:  # (no weights)
            reads.append(callable(part))
        return given(part)

    monkeypatch.setattr(sd, "_given", noted)
    monkeypatch.setattr(
        sd.dask, "get", lambda g, keys, **kw: graphs.append(keys) or run(g, keys, **kw)
    )
    assert _fit(zd, yd).temperature_ == want
    assert reads and all(reads) and graphs == []
    again = sd.load_npy_shards([zp for zp, _, _ in paths])
    again_y = sd.load_npy_shards([yp for _, yp, _ in paths], what="labels")
    assert again.name == zd.name and again.dask is not zd.dask
    for name, (zx, yx) in {
        "computed": (zd * 1, yd * 1),
        "persisted": (zd.persist(), yd.persist()),
        "opened again since": (zd, yd),
    }.items():
        reads.clear()
        assert _fit(zx, yx).temperature_ == want, name
        assert not any(reads), name
    reads.clear()
    assert _fit(again, again_y).temperature_ == want
    assert reads and all(reads)


def test_the_names_of_mapped_shard_sets_are_bounded(tmp_path, monkeypatch):
    # A process that opens many shard sets remembers only the most recent
    # few (reopening one makes it recent again); an array whose name was
    # dropped is read as any other, in the smaller pieces, with the same bits.
    import skts._dask as sd

    per_row = 256 * 4  # (blocks of 1,024 rows)
    monkeypatch.setattr(sd, "_SHARDS", {})
    monkeypatch.setattr(sd, "_SHARDS_NAMES", 3)
    monkeypatch.setattr(sd, "_PIECE_BYTES", 1_024 * per_row)
    monkeypatch.setattr(sd, "_MAPPED_PIECE_BYTES", 8_192 * per_row)
    z, y = _problem(n=8_192, k=256, seed=29, dtype=np.float32)
    arrays = []
    for i in range(5):
        folder = tmp_path / str(i)
        folder.mkdir()
        # (another folder and other values: another shard set and name)
        paths = _write_shards(folder, z + np.float32(i), y, [8_192])
        arrays.append(sd.load_npy_shards([zp for zp, _, _ in paths]))
    names = [a.name for a in arrays]
    assert len(set(names)) == 5
    assert list(sd._SHARDS) == names[2:]
    labels = da.from_array(y, chunks=8_192)
    assert sd.DaskRows(arrays[0], labels).n_parts == 8  # forgotten: 1,024 rows
    assert sd.DaskRows(arrays[4], labels).n_parts == 1  # remembered: 8,192
    sd.load_npy_shards([tmp_path / "2" / "logits_000.npy"])
    assert list(sd._SHARDS) == [names[3], names[4], names[2]]
    assert _fit(arrays[0], labels).temperature_ == _fit(z, y).temperature_


def test_shard_sets_opened_from_several_threads_keep_the_bound(tmp_path, monkeypatch):
    # Threads opening shard sets at once: no error, and at most the bound's
    # names, each one of a set that was opened.
    import concurrent.futures

    import skts._dask as sd

    monkeypatch.setattr(sd, "_SHARDS", {})
    monkeypatch.setattr(sd, "_SHARDS_NAMES", 2)
    z, y = _problem(n=64, k=3, seed=31, dtype=np.float32)
    sets = []
    for i in range(8):
        folder = tmp_path / str(i)
        folder.mkdir()
        sets.append([zp for zp, _, _ in _write_shards(folder, z, y, [64])])

    def open_all(first: int) -> set:
        return {sd.load_npy_shards(sets[(first + j) % 8]).name for j in range(40)}

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        opened = set().union(*pool.map(open_all, range(4)))
    assert len(opened) == 8
    assert 1 <= len(sd._SHARDS) <= 2
    assert set(sd._SHARDS) <= opened

    # The list changes only under its lock: an open waits while it is held.
    monkeypatch.setattr(sd, "_SHARDS", {})
    late = []
    with sd._SHARDS_LOCK:
        opener = threading.Thread(target=lambda: late.append(open_all(0)))
        opener.start()
        opener.join(0.5)
        assert opener.is_alive() and sd._SHARDS == {} and late == []
    opener.join(60)
    assert not opener.is_alive() and len(sd._SHARDS) == 2
    assert late == [opened]  # (the same 8 sets, opened once the lock is free)


_HEADERS_FROM_THREADS = """
import concurrent.futures, contextlib, gc, sys
import numpy as np
import skts._dask as sd

folder, lock = sys.argv[1:]
if lock == "none":  # (to see the error this guards against)
    sd._NPY_HEADER_LOCK = contextlib.nullcontext()
paths = [f"{folder}/{i}.npy" for i in range(8)]
for i, path in enumerate(paths):
    np.save(path, np.full((8, 3), i, dtype=np.float32))


class Finalized:  # Python code the collector runs, where threads may switch
    def __del__(self):
        sum(range(50))


def read(first):
    for j in range(200):
        i = (first + j) % 8
        assert sd._load_mapped(paths[i])[0, 0] == i
        garbage = [Finalized(), Finalized()]
        garbage.append(garbage)


gc.set_threshold(5)
sys.setswitchinterval(1e-6)
errors = 0
for _ in range(10):
    try:
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            list(pool.map(read, range(4)))
    except SystemError:
        errors += 1
print(errors)
"""


def test_shard_headers_are_parsed_one_thread_at_a_time(tmp_path):
    # Python 3.11's AST constructor (np.load parses a .npy header with it)
    # counts its recursion once per interpreter; threads parsing at once,
    # the collector switching threads inside it, raised SystemError (on
    # 3.11.7, in 2 to 6 of the 10 rounds of this script run with the lock
    # "none"). In a fresh process: the collector and switch settings stay
    # there.
    run = subprocess.run(
        [sys.executable, "-c", _HEADERS_FROM_THREADS, str(tmp_path), "lock"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["0"]

    # Opening shard sets (their headers parsed) and a task's read of a shard
    # through np.load both wait while another thread parses a header.
    import skts._dask as sd

    z, _ = _problem(n=64, k=3, seed=32, dtype=np.float32)
    paths = [tmp_path / "f0.npy", tmp_path / "f1.npy"]
    # (Fortran-ordered: a task reads them through np.load, header and all)
    np.save(paths[0], np.asfortranarray(z[:30]))
    np.save(paths[1], np.asfortranarray(z[30:]))
    arrays = []
    with sd._NPY_HEADER_LOCK:
        opener = threading.Thread(
            target=lambda: arrays.append(sd.load_npy_shards(paths))
        )
        opener.start()
        opener.join(0.5)
        assert opener.is_alive() and arrays == []
    opener.join(60)
    out = []
    with sd._NPY_HEADER_LOCK:
        reader = threading.Thread(
            target=lambda: out.append(arrays[0].compute(scheduler="sync"))
        )
        reader.start()
        reader.join(0.5)
        assert reader.is_alive() and out == []
    reader.join(60)
    np.testing.assert_array_equal(out[0], z)


hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    n=st.integers(1, 2500),
    k=st.integers(2, 6),
    chunk=st.integers(1, 1200),
    liar=st.sampled_from(["none", "logits", "logits_cols", "y", "sample_weight"]),
    by=st.integers(-40, 40),
    seed=st.integers(0, 2**16),
)
@pytest.mark.slow
def test_fuzz_chunks_that_lie_give_an_error_never_a_crash_or_a_wrong_answer(
    n, k, chunk, liar, by, seed
):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * 3.0
    y = rng.integers(0, k, n)
    w = rng.uniform(0.1, 2.0, n)
    first = min(chunk, n)
    lies = liar != "none" and by != 0
    if liar == "logits_cols":
        lies = lies and k + by >= 1
    elif lies:
        lies = first + by >= 0
    logits, labels, weights = _lying_inputs(
        z, y, w, liar if lies else "none", by, chunk
    )
    if lies:
        with pytest.raises(ValueError, match="chunk at rows"):
            TemperatureScaler().fit(logits, labels, weights)
    else:
        got = TemperatureScaler().fit(logits, labels, weights)
        want = TemperatureScaler().fit(z, y, w)
        assert got.temperature_ == want.temperature_
