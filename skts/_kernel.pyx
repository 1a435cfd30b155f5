# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled per-block pass (C in ``_kernel.c``, threads here).

Each function reads C-contiguous float32 or float64 logits once, block by
block (the blocks of ``skts._numerics._blocks``: their size depends on
the shape only). Every block writes its own row of the result; the caller
adds the rows in block order, so the answer does not depend on the number of
threads. Scratch memory is a few pages per thread, allocated by the thread
and freed when it stops.

Threads (``_Pass``): the calling thread works through the blocks itself and
helpers from a pool of Python threads join it, each taking the next block
not yet taken (an atomic counter). A pass ends when every block is done:
it waits for blocks that helpers have begun, never for a helper that has not
started (on a busy machine the scheduler may start it late; it then finds
nothing left and stops). OpenMP's parallel loop instead ends at a barrier
that every thread of the team must reach, started or not.
"""

from cython.parallel cimport prange
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memset

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

cdef extern from "_kernel.h" nogil:
    ctypedef struct skts_args:
        const void *z
        int z_f32
        Py_ssize_t n_rows
        Py_ssize_t n_classes
        Py_ssize_t ld
        const int64_t *y
        const double *w
        double inv_total
        const double *betas
        const double *temps
        Py_ssize_t nt
        int mode
        int single
        int second
        int moments
        int facts
        int first_spread
        double spread
        int deriv_at
        int slopes
        int pair
        int higher
        const double *mx_in
        double *mx_out
        double *span_out
        double *finite_out
        double *out
        unsigned char *found
    size_t skts_scratch_bytes(Py_ssize_t n_classes)
    int skts_block(const skts_args *a, void *scratch)
    double skts_exp32_sum(const float *x, Py_ssize_t n)
    int skts_varies(const void *z, int z_f32, Py_ssize_t n, Py_ssize_t k,
                    Py_ssize_t ld, const double *w)
    void skts_softmax_rows(const void *z, int z_f32, Py_ssize_t n_rows,
                           Py_ssize_t n_classes, double beta, int log_out,
                           void *out, int out_f32, void *scratch)
    size_t skts_report_bytes(Py_ssize_t n_classes)
    Py_ssize_t skts_report_rows(
        const void *z, int z_f32, Py_ssize_t n, Py_ssize_t k, double beta,
        const int64_t *y, const double *w, Py_ssize_t nw, Py_ssize_t ldw,
        double threshold, int64_t *predicted, double *top, double *p_y,
        double *log_p_y, double *sumsq, double *colsum, int64_t *high_at,
        double *high_p, Py_ssize_t cap, void *scratch)
    double skts_exp64(double x)
    float skts_exp32(float x)
    double skts_log64(double s)
    double skts_log1p64(double e)

cdef extern from *:
    """
    #ifdef _OPENMP
    #include <omp.h>
    static int skts_omp_max_threads(void) { return omp_get_max_threads(); }
    static int skts_openmp(void) { return 1; }
    #else
    static int skts_omp_max_threads(void) { return 1; }
    static int skts_openmp(void) { return 0; }
    #endif
    """
    int skts_omp_max_threads() nogil
    int skts_openmp() nogil

cdef extern from *:
    """
    /* The next block to take, and blocks done: atomic counters (GCC, Clang;
       MSVC's interlocked functions). Taking is relaxed (any order); done
       is acquire-release, so the thread that finishes the last block sees
       every other block's writes. */
    #if defined(_MSC_VER) && !defined(__clang__)
    #include <intrin.h>
    static Py_ssize_t skts_take(Py_ssize_t *c) {
        return (Py_ssize_t)_InterlockedExchangeAdd64((volatile __int64 *)c, 1);
    }
    static Py_ssize_t skts_finish(Py_ssize_t *c) {
        return (Py_ssize_t)_InterlockedExchangeAdd64((volatile __int64 *)c, 1) + 1;
    }
    #else
    static Py_ssize_t skts_take(Py_ssize_t *c) {
        return __atomic_fetch_add(c, 1, __ATOMIC_RELAXED);
    }
    static Py_ssize_t skts_finish(Py_ssize_t *c) {
        return __atomic_add_fetch(c, 1, __ATOMIC_ACQ_REL);
    }
    #endif
    """
    Py_ssize_t skts_take(Py_ssize_t *c) nogil
    Py_ssize_t skts_finish(Py_ssize_t *c) nogil

# The modes of skts_block (_kernel.h); each has its entry point below.
cdef int NLL = 0, SLOPES = 1, DERIV = 2, WINDOW = 3

# About 64k logits per block: the unit of every sum's order (each block's sums
# are added in block order). Defined here only; Python reads it
# (skts._numerics._blocks).
BLOCK_ELEMENTS = 1 << 16
cdef Py_ssize_t _BLOCK_ELEMENTS = 1 << 16
_CA = ("C", "A")  # contiguous and aligned (np.require)
_TINY = np.finfo(np.float64).tiny


cdef inline Py_ssize_t _rows_per_block(Py_ssize_t k) noexcept nogil:
    return max(1, _BLOCK_ELEMENTS // max(k, 1))


def rows_per_block(Py_ssize_t n_classes):
    """Rows of one block: ``max(1, BLOCK_ELEMENTS // n_classes)``."""
    return _rows_per_block(n_classes)


def max_threads():
    """OpenMP's ``omp_get_max_threads()`` (``OMP_NUM_THREADS``, and any
    ``threadpoolctl`` limit, lower it); 1 without OpenMP."""
    return skts_omp_max_threads()


def openmp():
    """Whether the kernel was built with OpenMP threads."""
    return bool(skts_openmp())


cpdef bint supports(logits, bint strided=True):
    """Whether the kernel reads ``logits`` in place: a NumPy float32/float64
    array, aligned for its type, C-contiguous, or (``strided``, above 32
    classes) with contiguous rows any number of elements apart (a view of
    every k-th row)."""
    if not (
        isinstance(logits, np.ndarray)
        and logits.ndim == 2
        and logits.dtype in (np.float32, np.float64)
        and logits.shape[1] >= 1
        and logits.flags.aligned
    ):
        return False
    if logits.flags.c_contiguous:
        return True
    size = logits.itemsize
    rows, cols = logits.strides
    return (
        strided
        and logits.shape[1] > 32
        and cols == size
        and rows % size == 0
        and rows >= logits.shape[1] * size
    )


cdef _check_logits(logits, bint strided):
    # Memory safety is checked here, not trusted to the caller.
    if not supports(logits, strided):
        raise ValueError(
            "skts kernel: logits must be a 2-D float32 or float64 NumPy array, "
            "aligned, with contiguous rows; got "
            f"{type(logits).__name__} {getattr(logits, 'dtype', '?')} of shape "
            f"{getattr(logits, 'shape', '?')}."
        )


cdef const void *_first(logits) except NULL:
    """The address of ``logits[0, 0]`` (checked by ``_check_logits``; the
    caller keeps ``logits`` alive while the kernel reads it)."""
    cdef const float[:, :] zf
    cdef const double[:, :] zd
    if logits.dtype == np.float32:
        zf = logits
        return &zf[0, 0]
    zd = logits
    return &zd[0, 0]


cdef _check_rows(arr, Py_ssize_t n, str name):
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(
            f"skts kernel: {name} must be 1-D with one value per row of logits "
            f"({n}); got shape {arr.shape}."
        )


cdef int _SUMS = 0, _SOFTMAX = 1, _REPORT = 2


cdef class _Pass:
    """One read of the logits, shared by the threads that do its blocks.

    Helpers hold a reference, so everything a late helper touches (the
    counters, and through ``keep`` the arrays) lives as long as it does.
    """

    cdef int kind
    cdef Py_ssize_t n, k, step, n_blocks
    cdef Py_ssize_t next_block, done
    cdef size_t scratch_bytes
    cdef int bad, no_memory
    cdef const void *z
    # (_SUMS)
    cdef skts_args base
    cdef Py_ssize_t width
    cdef const int64_t *y
    cdef const double *w
    cdef double *out
    cdef unsigned char *found
    # (_SOFTMAX)
    cdef int z_f32, out_f32, log_out
    cdef size_t isz, osz
    cdef void *o
    cdef double beta
    # (_REPORT: outputs per row, per block and per value above threshold)
    cdef Py_ssize_t nw, per_row
    cdef double threshold
    cdef int64_t *predicted
    cdef double *top
    cdef double *p_y
    cdef double *log_p_y
    cdef double *sumsq
    cdef double *colsum
    cdef int64_t *high_at
    cdef double *high_p
    cdef int64_t *counts
    cdef object keep
    cdef object finished

    cdef void block(self, Py_ssize_t b, char *scratch) noexcept nogil:
        cdef Py_ssize_t row0 = b * self.step
        cdef Py_ssize_t rows = min(self.step, self.n - row0)
        cdef skts_args a
        if self.kind == _SOFTMAX:
            skts_softmax_rows(
                <const void *>(<const char *>self.z + row0 * self.k * self.isz),
                self.z_f32, rows, self.k, self.beta, self.log_out,
                <void *>(<char *>self.o + row0 * self.k * self.osz),
                self.out_f32, scratch)
            return
        if self.kind == _REPORT:
            self.counts[b] = skts_report_rows(
                <const void *>(<const char *>self.z + row0 * self.k * self.isz),
                self.z_f32, rows, self.k, self.beta, self.y + row0,
                self.w + row0, self.nw, self.n,
                self.threshold, self.predicted + row0, self.top + row0,
                self.p_y + row0, self.log_p_y + row0, self.sumsq + row0,
                self.colsum + b * self.nw * self.k,
                self.high_at + row0 * self.per_row,
                self.high_p + row0 * self.per_row, rows * self.per_row,
                scratch)
            if self.counts[b] == -2:
                self.bad = 1
            return
        a = self.base
        a.n_rows = rows
        if a.z_f32:
            a.z = <const void *>(<const float *>self.z + row0 * a.ld)
        else:
            a.z = <const void *>(<const double *>self.z + row0 * a.ld)
        a.y = self.y + row0
        a.w = (self.w + row0) if self.w != NULL else NULL
        a.out = self.out + b * self.width
        if a.mx_in != NULL:
            a.mx_in = a.mx_in + row0
        if a.mx_out != NULL:
            a.mx_out = a.mx_out + row0
        if a.span_out != NULL:
            a.span_out = a.span_out + b
        if a.finite_out != NULL:
            a.finite_out = a.finite_out + b
        a.found = (self.found + 3 * b) if self.found != NULL else NULL
        # (the kernel checks the labels chunk by chunk, before it reads a
        # logit at one: 1 if one is not a class index)
        if skts_block(&a, scratch):
            self.bad = 1

    cdef int work(self) noexcept nogil:
        """Take blocks until none is left; 1 if this thread finished the
        pass's last block. Scratch memory is allocated at the first block
        taken (a helper that starts late takes none, and allocates none)."""
        cdef Py_ssize_t b
        cdef char *scratch = NULL
        cdef int last = 0
        while True:
            b = skts_take(&self.next_block)
            if b >= self.n_blocks:
                break
            if scratch == NULL:
                scratch = <char *>malloc(self.scratch_bytes)
            if scratch == NULL:
                self.no_memory = 1  # (the block counts as done: the caller raises)
            else:
                self.block(b, scratch)
            if skts_finish(&self.done) == self.n_blocks:
                last = 1
        free(scratch)
        return last


cdef _Pass _new_pass(int kind, Py_ssize_t n, Py_ssize_t k, Py_ssize_t step,
                     size_t scratch_bytes):
    """A pass of ``kind`` over ``n`` rows of ``k`` logits in blocks of
    ``step`` rows, each thread with ``scratch_bytes`` of scratch."""
    cdef _Pass p = _Pass.__new__(_Pass)
    p.kind = kind
    p.n = n
    p.k = k
    p.step = step
    p.n_blocks = (n + step - 1) // step
    p.scratch_bytes = scratch_bytes
    return p


def _help(_Pass p):
    cdef int last
    with nogil:
        last = p.work()
    if last:
        p.finished.set()


_POOL = {"pool": None, "size": 0, "pid": None}


def _helpers(int count):
    """The pool of helper threads (idle ones wait, without spinning),
    grown to ``count``; a new one in a forked child."""
    pool = _POOL["pool"]
    if pool is None or _POOL["size"] < count or _POOL["pid"] != os.getpid():
        if pool is not None and _POOL["pid"] == os.getpid():
            pool.shutdown(wait=False)
        pool = ThreadPoolExecutor(count, thread_name_prefix="skts-helper")
        _POOL.update(pool=pool, size=count, pid=os.getpid())
    return pool


def helper_threads():
    """The helper threads started so far (tests: ``n_jobs=1`` starts none)."""
    return sum(t.name.startswith("skts-helper") for t in threading.enumerate())


cdef _execute(_Pass p, int n_threads):
    """Every block of ``p``: on the calling thread and ``n_threads - 1``
    helpers, as many as there are blocks at most."""
    cdef int threads = <int>max(1, min(n_threads, p.n_blocks))
    cdef int last
    if threads > 1:
        p.finished = threading.Event()
        pool = _helpers(threads - 1)
        for _ in range(threads - 1):
            pool.submit(_help, p)
    with nogil:
        last = p.work()
    if not last:
        # (a block a helper began is still running: wait for it; the helper
        # that finishes the last block sets the event)
        p.finished.wait()
    if p.no_memory:
        raise MemoryError("skts: no memory for the kernel's scratch buffers.")


cdef _bad_label(y_arr, Py_ssize_t k):
    outside = np.flatnonzero((y_arr < 0) | (y_arr >= k))
    i = int(outside[0])
    raise ValueError(
        f"skts kernel: y must hold class indices in [0, {k}); got "
        f"{int(y_arr[i])} at row {i}."
    )


cdef tuple _run(
    skts_args base, int width, logits, y, sample_weight, double total, betas,
    temperatures, int n_threads, row_max, row_max_out, span_out, finite_out,
):
    """Per-block weighted sums of one read (one row per block): ``(sums,
    found)``, ``sums`` of shape ``(n_blocks, n_betas, width)`` and, with
    ``base.facts``, ``found`` of shape ``(n_blocks, 3)`` (top, bottom,
    varies). ``finite_out``: one float64 per block, where each block writes
    1 if its logits are all finite, else 0 (blocks not read: untouched)."""
    _check_logits(logits, True)
    cdef Py_ssize_t n = logits.shape[0], k = logits.shape[1]
    cdef Py_ssize_t step = _rows_per_block(k)
    cdef Py_ssize_t n_blocks = (n + step - 1) // step
    cdef bint facts = base.facts
    # (np.require: contiguous and aligned; an array unpickled from a buffer,
    # say after a Dask transfer, can be contiguous yet misaligned)
    b_arr = np.require(betas, np.float64, _CA)
    t_arr = np.require(temperatures, np.float64, _CA)
    if b_arr.ndim != 1 or t_arr.ndim != 1:
        raise ValueError("skts kernel: betas and temperatures must be 1-D.")
    if b_arr.shape[0] != t_arr.shape[0]:
        raise ValueError(
            f"skts kernel: {b_arr.shape[0]} betas but {t_arr.shape[0]} "
            "temperatures."
        )
    cdef Py_ssize_t nt = b_arr.shape[0]
    y_arr = np.require(y, np.int64, _CA)
    _check_rows(y_arr, n, "y")
    w_arr = None
    if sample_weight is not None:
        w_arr = np.require(sample_weight, np.float64, _CA)
        _check_rows(w_arr, n, "sample_weight")
    if not (total > 0.0):
        raise ValueError(f"skts kernel: total weight must be > 0; got {total!r}.")
    out = np.full((n_blocks, nt, width), np.nan)
    found = np.ones((n_blocks, 3), dtype=np.uint8)
    if n == 0 or nt == 0:
        return out, (found if facts else None)
    cdef double[:, :, ::1] out_v = out
    cdef unsigned char[:, ::1] found_v = found
    cdef const double[::1] b_v = b_arr
    cdef const double[::1] t_v = t_arr
    cdef const int64_t[::1] y_v = y_arr
    cdef const double[::1] w_v
    cdef const double *w_p = NULL
    if w_arr is not None:
        w_v = w_arr
        w_p = &w_v[0]
    cdef int z_f32 = logits.dtype == np.float32
    cdef Py_ssize_t ld = logits.strides[0] // logits.itemsize
    cdef const void *z_p = _first(logits)
    base.z = z_p
    base.z_f32 = z_f32
    base.n_classes = k
    base.ld = ld
    base.inv_total = 1.0 / total
    base.betas = &b_v[0]
    base.temps = &t_v[0]
    base.nt = nt
    base.pair = base.pair and nt >= 2 and abs(b_v[1] - b_v[0]) <= 1e-9 * b_v[0]
    # Row maxima: known (row_max, from an earlier read of the same rows) or
    # wanted (row_max_out, written here): float64 arrays of n_rows.
    cdef const double[::1] mx_v
    cdef double[::1] mx_out_v
    base.mx_in = NULL
    base.mx_out = NULL
    if row_max is not None:
        row_max = np.require(row_max, None, _CA)
        if row_max.shape != (n,) or row_max.dtype != np.float64:
            raise ValueError("row_max must be float64 of one value per row")
        mx_v = row_max
        base.mx_in = &mx_v[0]
    if row_max_out is not None:
        if (row_max_out.shape != (n,) or row_max_out.dtype != np.float64
                or not row_max_out.flags.aligned):
            raise ValueError("row_max_out must be float64 of one value per row")
        mx_out_v = row_max_out
        base.mx_out = &mx_out_v[0]
    cdef double[::1] span_v
    base.span_out = NULL
    if span_out is not None:
        if (span_out.shape != (n_blocks,) or span_out.dtype != np.float64
                or not span_out.flags.aligned):
            raise ValueError("span_out must be float64 of one value per block")
        span_v = span_out
        base.span_out = &span_v[0]
    cdef double[::1] finite_v
    base.finite_out = NULL
    if finite_out is not None:
        if (finite_out.shape != (n_blocks,) or finite_out.dtype != np.float64
                or not finite_out.flags.aligned or not finite_out.flags.writeable):
            raise ValueError("finite_out must be float64 of one value per block")
        finite_v = finite_out
        base.finite_out = &finite_v[0]
    cdef _Pass p = _new_pass(_SUMS, n, k, step, skts_scratch_bytes(k))
    p.base = base
    p.width = nt * width
    p.z = z_p
    p.y = &y_v[0]
    p.w = w_p
    p.out = &out_v[0, 0, 0]
    p.found = &found_v[0, 0] if facts else NULL
    p.keep = (logits, y_arr, w_arr, b_arr, t_arr, row_max, row_max_out,
              span_out, finite_out, out, found)
    _execute(p, n_threads)
    cdef int bad = p.bad
    if bad:
        _bad_label(y_arr, k)
    return out, (found if facts else None)


cdef skts_args _base(int mode):
    cdef skts_args a
    memset(&a, 0, sizeof(a))
    a.mode = mode
    a.second = 1
    a.moments = 1
    a.deriv_at = -1
    return a


def nll(
    logits, y, sample_weight, double total, betas, temperatures, *,
    int n_threads=1, row_max=None, row_max_out=None, span_out=None,
    finite_out=None,
):
    """Per-block weighted sums of the rows' losses at each temperature:
    shape ``(n_blocks, n_temperatures, 1)``. ``finite_out`` (every entry
    point): one float64 per block, where each block writes 1 if its logits
    are all finite, else 0. ``span_out`` (every entry point): one float64
    per block, where each block writes the largest range of its rows."""
    cdef skts_args a = _base(NLL)
    return _run(a, 1, logits, y, sample_weight, total, betas, temperatures,
                n_threads, row_max, row_max_out, span_out, finite_out)[0]


def slopes(
    logits, y, sample_weight, double total, betas, temperatures, *,
    bint moments=True, bint facts=False, bint pair=False, bint higher=False,
    int n_threads=1, row_max=None, row_max_out=None, span_out=None,
    finite_out=None,
):
    """Per-block sums of ``(F, F', F'' / T**2, bound of F', |F'|)`` (two
    more with ``higher``: the rows' third and fourth derivatives), and with
    ``facts`` the per-block ``(top, bottom, varies)``: ``(sums, found)``.
    ``higher`` needs ``moments`` and no ``pair``."""
    if higher and not (moments and not pair):
        raise ValueError("higher needs moments and no pair")
    cdef skts_args a = _base(SLOPES)
    a.moments, a.facts, a.pair, a.higher = moments, facts, pair, higher
    return _run(a, 5 + 2 * higher, logits, y, sample_weight, total, betas,
                temperatures, n_threads, row_max, row_max_out, span_out, finite_out)


def derivatives(
    logits, y, sample_weight, double total, betas, temperatures, *,
    bint single=False, bint second=True, bint facts=False, bint higher=False,
    int n_threads=1, row_max=None, row_max_out=None, span_out=None,
    finite_out=None,
):
    """Per-block sums of ``(F, F', F'')`` and the mean ``g**2`` at each beta
    (two more with ``higher``), float32 exponentials with ``single``;
    ``(sums, found)`` as :func:`slopes`."""
    cdef skts_args a = _base(DERIV)
    a.single, a.second, a.facts, a.higher = single, second, facts, higher
    return _run(a, 4 + 2 * higher, logits, y, sample_weight, total, betas,
                temperatures, n_threads, row_max, row_max_out, span_out, finite_out)


def window(
    logits, y, sample_weight, double total, betas, temperatures, *,
    int first_spread=0, double spread=0.0, int deriv_at=-1, bint slopes=False,
    int n_threads=1, row_max=None, row_max_out=None, span_out=None, finite_out=None,
):
    """Per-block float32 estimates of each loss and their proven error
    bounds (and ``(F', F'')`` at ``deriv_at``): shape ``(n_blocks,
    n_temperatures, 4)``. With ``slopes`` (more than two classes), ``(F',
    F'')`` at every temperature and a proven bound on the error of ``F'``:
    shape ``(n_blocks, n_temperatures, 5)``."""
    # (the spread measured at the first beta bounds the later, larger ones;
    # any other index would leave the earlier betas without a bound)
    if first_spread not in (-1, 0):
        raise ValueError(
            f"skts kernel: first_spread must be 0 (measure) or -1 (use spread); "
            f"got {first_spread}."
        )
    if first_spread == -1 and not (0.0 <= spread < float("inf")):
        raise ValueError(f"skts kernel: spread must be finite and >= 0; got {spread}.")
    cdef skts_args a = _base(WINDOW)
    if slopes and (logits.ndim != 2 or logits.shape[1] <= 2):
        raise ValueError("skts kernel: the window's slopes need more than two classes.")
    a.single, a.first_spread, a.spread, a.deriv_at = 1, first_spread, spread, deriv_at
    a.slopes = slopes
    return _run(a, 4 + slopes, logits, y, sample_weight, total, betas, temperatures,
                n_threads, row_max, row_max_out, span_out, finite_out)[0]


def softmax(logits, double beta, bint log, out_dtype, int n_threads=1):
    """``softmax(beta * logits)`` (``log``: its logarithm) row by row, as
    ``out_dtype`` (float32 or float64)."""
    _check_logits(logits, False)
    cdef Py_ssize_t n = logits.shape[0], k = logits.shape[1]
    out = np.empty((n, k), dtype=out_dtype)
    if n == 0:
        return out
    cdef int out_f32 = out.dtype == np.float32
    cdef int z_f32 = logits.dtype == np.float32
    cdef float[:, ::1] of
    cdef double[:, ::1] od
    cdef const void *z_p = _first(logits)
    cdef void *o_p
    if out_f32:
        of = out
        o_p = &of[0, 0]
    else:
        od = out
        o_p = &od[0, 0]
    cdef _Pass p = _new_pass(_SOFTMAX, n, k, _rows_per_block(k),
                             skts_scratch_bytes(k))
    p.z = z_p
    p.z_f32 = z_f32
    p.isz = 4 if z_f32 else 8
    p.o = o_p
    p.out_f32 = out_f32
    p.osz = 4 if out_f32 else 8
    p.beta = beta
    p.log_out = log
    p.keep = (logits, out)
    _execute(p, n_threads)
    return out


def report_rows(logits, double beta, y, weights, double threshold, int n_threads=1):
    """The calibration report's quantities of ``softmax(beta * logits)`` in
    one read (``skts_report_rows``), without the probabilities whole: a dict
    of each row's ``predicted`` (first argmax of the logits), ``top`` (its
    probability), ``p_y``, ``log_p_y`` (never clipped), ``sumsq`` (``sum_j
    p_j^2``); ``colsum`` (``weights @ proba``, ``weights`` of shape
    (n_weights, n)); ``high_at`` and ``high_p``, the flat positions and
    values of the probabilities above ``threshold`` (in (0, 1]), in order.

    The blocks (of ``ceil(2^14 / k)`` rows or an eighth of the rows) depend
    on the shape alone, and each adds its own column sums, added in order
    after: the same bits at any thread count. ``None`` if a row has more
    than ``1 + floor(1 / threshold)`` values above the threshold (rounding
    cannot make that many; the caller then takes the probabilities whole)."""
    _check_logits(logits, False)
    cdef Py_ssize_t n = logits.shape[0], k = logits.shape[1]
    y_arr = np.require(y, np.int64, _CA)
    _check_rows(y_arr, n, "y")
    w_arr = np.require(weights, np.float64, _CA)
    if w_arr.ndim != 2 or w_arr.shape[0] < 1 or w_arr.shape[1] != n:
        raise ValueError(
            f"skts kernel: weights must be 2-D, one row or more, with one column "
            f"per row of logits ({n}); got shape {w_arr.shape}."
        )
    if not (0.0 < threshold <= 1.0):
        raise ValueError(f"skts kernel: threshold must be in (0, 1]; got {threshold}.")
    if not (0.0 <= beta < float("inf")):
        raise ValueError(f"skts kernel: beta must be finite and >= 0; got {beta}.")
    cdef Py_ssize_t nw = w_arr.shape[0]
    cdef Py_ssize_t per_row = min(k, 1 + int(1.0 / threshold))
    # (at most 8 blocks, of 2^14 values at least: each adds a column sum of
    # its own)
    cdef Py_ssize_t step = max(((1 << 14) + k - 1) // k, (n + 7) // 8, 1)
    cdef Py_ssize_t n_blocks = (n + step - 1) // step
    predicted = np.empty(n, dtype=np.int64)
    top, p_y, log_p_y, sumsq = (np.empty(n) for _ in range(4))
    colsum = np.zeros((n_blocks, nw, k))
    high_at = np.empty(n * per_row, dtype=np.int64)
    high_p = np.empty(n * per_row)
    counts = np.zeros(n_blocks, dtype=np.int64)
    if n == 0:
        return {"predicted": predicted, "top": top, "p_y": p_y,
                "log_p_y": log_p_y, "sumsq": sumsq, "colsum": np.zeros((nw, k)),
                "high_at": high_at, "high_p": high_p}
    cdef int64_t[::1] v_pred = predicted, v_counts = counts, v_at = high_at
    cdef double[::1] v_top = top, v_py = p_y, v_lpy = log_p_y, v_sq = sumsq
    cdef double[::1] v_hp = high_p
    cdef double[:, :, ::1] v_cs = colsum
    cdef const int64_t[::1] yv = y_arr
    cdef const double[:, ::1] wv = w_arr
    cdef _Pass p = _new_pass(_REPORT, n, k, step, skts_report_bytes(k))
    p.z = _first(logits)
    p.z_f32 = logits.dtype == np.float32
    p.isz = 4 if p.z_f32 else 8
    p.beta = beta
    p.y = &yv[0]
    p.w = &wv[0, 0]
    p.nw = nw
    p.per_row = per_row
    p.threshold = threshold
    p.predicted = &v_pred[0]
    p.top = &v_top[0]
    p.p_y = &v_py[0]
    p.log_p_y = &v_lpy[0]
    p.sumsq = &v_sq[0]
    p.colsum = &v_cs[0, 0, 0]
    p.high_at = &v_at[0]
    p.high_p = &v_hp[0]
    p.counts = &v_counts[0]
    p.keep = (logits, y_arr, w_arr, predicted, top, p_y, log_p_y, sumsq, colsum,
              high_at, high_p, counts)
    _execute(p, n_threads)
    if p.bad:
        _bad_label(y_arr, k)
    if (counts < 0).any():
        return None
    # (each block's values above the threshold, in order; their positions
    # are within the block)
    cdef Py_ssize_t room = step * per_row
    at = [high_at[b * room : b * room + counts[b]] + b * step * k
          for b in range(n_blocks)]
    values = [high_p[b * room : b * room + counts[b]] for b in range(n_blocks)]
    out_sums = colsum[0].copy()
    for b in range(1, n_blocks):
        out_sums += colsum[b]
    return {
        "predicted": predicted,
        "top": top,
        "p_y": p_y,
        # (log p_y where p_y is a normal float64, numpy's vectorised log)
        "log_p_y": np.log(p_y, out=log_p_y, where=p_y >= _TINY),
        "sumsq": sumsq,
        "colsum": out_sums,
        "high_at": np.concatenate(at),
        "high_p": np.concatenate(values),
    }


def _elementwise(x, int which):
    """One of the kernel's elementary functions over ``x`` (tests only):
    0 exp (float64), 1 exp (float32), 2 log (x >= 1), 3 log(1 + x)."""
    single = which == 1
    x = np.ascontiguousarray(x, dtype=np.float32 if single else np.float64)
    out = np.empty_like(x)
    cdef const float[::1] xf
    cdef float[::1] of
    cdef const double[::1] xd
    cdef double[::1] od
    cdef Py_ssize_t i
    if single:
        xf, of = x.reshape(-1), out.reshape(-1)
        for i in range(xf.shape[0]):
            of[i] = skts_exp32(xf[i])
        return out
    xd, od = x.reshape(-1), out.reshape(-1)
    for i in range(xd.shape[0]):
        od[i] = (skts_exp64(xd[i]) if which == 0 else skts_log64(xd[i])
                 if which == 2 else skts_log1p64(xd[i]))
    return out


def _exp64(x):
    return _elementwise(x, 0)


def _exp32(x):
    return _elementwise(x, 1)


def _log64(x):
    return _elementwise(x, 2)


def _log1p64(x):
    return _elementwise(x, 3)


def exp32_rate(int n_threads=1, double seconds=0.2):
    """Float32 exponentials per second of the kernel's vectorised polynomial
    on ``n_threads`` threads (data in the L1 cache): the compute side of the
    hardware bound that ``benchmarks/bench_fit.py`` prints."""
    import time

    x = -np.linspace(0.0, 80.0, 4096, dtype=np.float32)
    cdef const float[::1] xv = x
    cdef Py_ssize_t reps = 1000, r
    cdef int t
    cdef double sink = 0.0
    while True:
        start = time.perf_counter()
        with nogil:
            for t in prange(n_threads, num_threads=n_threads, schedule="static"):
                for r in range(reps):
                    sink += skts_exp32_sum(&xv[0], 4096)
        elapsed = time.perf_counter() - start
        if elapsed >= seconds or reps > 10**7:
            break
        reps *= 4
    if not sink > 0:
        raise RuntimeError("exp32_rate: no work was done.")
    return n_threads * reps * 4096 / elapsed


def varies(logits, sample_weight):
    """Whether some row of positive weight has two different logits (stops
    at the first one)."""
    _check_logits(logits, True)
    cdef Py_ssize_t n = logits.shape[0], k = logits.shape[1]
    if n == 0:
        return False
    cdef int z_f32 = logits.dtype == np.float32
    cdef Py_ssize_t ld = logits.strides[0] // logits.itemsize
    cdef const void *z_p = _first(logits)
    cdef const double[::1] w_v
    cdef const double *w_p = NULL
    if sample_weight is not None:
        w_arr = np.require(sample_weight, np.float64, _CA)
        _check_rows(w_arr, n, "sample_weight")
        w_v = w_arr
        w_p = &w_v[0]
    cdef int out
    with nogil:
        out = skts_varies(z_p, z_f32, n, k, ld, w_p)
    return bool(out)
