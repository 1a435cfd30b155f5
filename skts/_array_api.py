"""Logits where deep-learning code keeps them: tensors and array-API arrays.

Two ways in, both without copying the logits:

- :func:`host_logits` reads an array that lives in host memory (a CPU
  PyTorch tensor, also one that requires grad; a JAX or ``array_api_strict``
  CPU array; a NumPy float16 array) through a zero-copy NumPy view. float32
  stays float32. float16 and bfloat16 become :class:`Widened`, which hands
  each block of rows to the passes as float32 and is never widened whole.
- :class:`XpRows` runs the passes of the search in the array's own namespace
  on its own device (scikit-learn's ``array_api_dispatch=True`` with CuPy, a
  CUDA tensor, ...): one float64 read per pass, as the NumPy float64 passes
  read them, with the same error bounds. Only per-block sums, a row
  subsample (the warm start) and, for near-ties, the rows the high-precision
  evaluator reads one block at a time reach the host.

Neither module-level import pulls in torch or any array library: they are
recognised by their type's module and their ``__dlpack__``/``device``.
"""

from __future__ import annotations

import itertools
import math
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numpy.typing import NDArray

from skts._numerics import (
    BIG,
    BLOCK_ELEMENTS,
    EXP_FLOOR,
    F32_BLOCKS,
    HP_DIGITS,
    Rows,
    blocks,
    exact_part,
    normalised_weights,
    scratch,
    slope_error,
    weights_total,
)

_HALF = ("float16", "bfloat16")

# Tests set this to run the device passes on host arrays too.
FORCE_DEVICE_PASSES = False


def _module(x) -> str:
    return type(x).__module__.split(".")[0]


def is_plain(a, kinds: str) -> bool:
    """Whether ``a`` is a C-contiguous NumPy array (no subclass) of a native
    dtype of a kind in ``kinds`` (floats: float32 or float64 only), which
    scikit-learn's input checks return as it is (the estimators skip them)."""
    if type(a) is not np.ndarray or not a.flags.c_contiguous:
        return False
    if a.dtype.kind == "f":
        return "f" in kinds and a.dtype in (np.float32, np.float64)
    return a.dtype.kind in kinds and a.dtype.isnative


def is_foreign(x) -> bool:
    """Whether ``x`` is an array of another library (not NumPy, not a list)."""
    if isinstance(x, np.ndarray | list | tuple):
        return False
    return hasattr(x, "__dlpack__") or hasattr(x, "__array_namespace__")


def dtype_name(x) -> str:
    """``'float32'``, ``'bfloat16'``, ... of any array (torch says
    ``torch.float32``)."""
    return str(getattr(x, "dtype", "")).rsplit(".", 1)[-1]


def on_host(x) -> bool:
    """Whether the foreign array ``x`` lives in host memory (NumPy can view it)."""
    mod = _module(x)
    if mod == "torch":
        return x.device.type == "cpu"
    if mod == "array_api_strict":
        import array_api_strict

        return x.device == array_api_strict.Device("CPU_DEVICE")
    if mod in ("jax", "jaxlib"):
        return all(d.platform == "cpu" for d in x.devices())
    dev = getattr(x, "device", "cpu")
    return str(getattr(dev, "type", dev)).lower() == "cpu"


def widen_into(block: NDArray, out: NDArray, bits: bool) -> NDArray:
    """``block`` copied into ``out`` (same shape; float32, or its uint32 view
    for ``bits``, or float64), widened: with ``bits``, ``block`` holds
    bfloat16's 16 bits, shifted into the top of a float32 (exactly its
    value); otherwise NumPy converts (float16 to float32 is exact). Returns
    ``out`` as float."""
    if bits:
        wide = out.view(np.uint32)
        np.copyto(wide, block.view(np.uint16), casting="unsafe")
        np.left_shift(wide, 16, out=wide)
        return wide.view(np.float32)
    np.copyto(out, block, casting="unsafe")
    return out


class Widened:
    """Half-precision logits that the passes read as float32, block by block.

    Behaves as the 2-D float32 array for what the search and ``softmax`` do
    with logits: ``shape``, ``dtype`` and ``logits[rows]`` (a float32 copy of
    those rows only). bfloat16 is kept as its 16 bits: shifted into the top
    of a float32, exactly its value.
    """

    ndim = 2
    dtype = np.dtype(np.float32)

    def __init__(self, raw: NDArray, bits: bool = False):
        self.raw, self.bits = raw, bits
        self.shape = raw.shape

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, key) -> NDArray[np.float32]:
        block = self.raw[key]
        if isinstance(key, slice) and key.step in (None, 1) and block.ndim == 2:
            # A block of rows, as the passes read them: widened into this
            # thread's scratch buffer (valid until its next block; every
            # pass consumes a block before it reads the next). A fresh array
            # per block costs 3-4 times the conversion itself.
            out = scratch("widened", block.shape, np.float32)
        else:
            out = np.empty(block.shape, dtype=np.float32)
        return widen_into(block, out, self.bits)

    def argmax(self, axis: int = 1) -> NDArray:
        """Row argmax, block by block (``axis`` must be 1)."""
        if axis != 1:
            raise ValueError("Widened logits only take the row argmax (axis=1).")
        out = np.empty(self.shape[0], dtype=np.intp)
        for rows in blocks(*self.shape, F32_BLOCKS):
            out[rows] = self[rows].argmax(axis=1)
        return out


class Positions(Widened):
    """Logits with their classes on axis 1 of ``raw`` (shape ``(n, K, s)``:
    ``s`` positions per sample, a pixel or a token each), read as the 2-D
    ``(m, K)`` array of one row per position, in C order (sample, then
    position), block by block; ``keep`` (sorted flat positions) drops the
    others (``ignore_index``). Never transposed or copied whole: a block of
    rows is gathered into this thread's scratch buffer (``Widened``'s
    contract), in float32 (float16 and bfloat16 widened: ``bits`` says
    ``raw`` holds bfloat16's 16 bits) or float64.
    """

    def __init__(
        self,
        raw: NDArray,
        keep: NDArray | None = None,
        bits: bool = False,
        threads: int = 1,
    ):
        self.raw, self.keep, self.bits, self.threads = raw, keep, bits, threads
        n, k, per = raw.shape
        self.per = per
        self.shape = (n * per if keep is None else int(keep.shape[0]), k)
        wide = raw.dtype == np.float64 and not bits
        self.dtype = np.dtype(np.float64 if wide else np.float32)

    def __getitem__(self, key) -> NDArray:
        m = self.shape[0]
        if isinstance(key, slice):
            start, stop, step = key.indices(m)
            if self.keep is None and step == 1:
                return self._range(start, max(start, stop))
            if self.keep is None and step > 1 and stop > start:
                return self._every(start, stop, step)
            if step == 1 and stop > start:
                pos = self.keep[start:stop]
                first, last = int(pos[0]), int(pos[-1]) + 1
                if last - first <= 4 * (stop - start):
                    # Mostly kept: the run's rows, then the kept ones (cheaper
                    # than gathering element by element).
                    run = self._range(first, last, "positions-run")
                    out = scratch("positions", (stop - start, self.shape[1]), run.dtype)
                    # (mode="clip": the indices are in range, and "raise" buffers out)
                    return np.take(run, pos - first, axis=0, out=out, mode="clip")
            pos = (
                np.arange(start, stop, step)
                if self.keep is None
                else self.keep[start:stop:step]
            )
        else:
            pos = np.arange(m)[key] if self.keep is None else self.keep[key]
        pos = np.asarray(pos, dtype=np.intp)
        threads = self.threads if threading.current_thread() is _MAIN else 1
        if pos.ndim != 1 or threads <= 1 or pos.size * self.shape[1] < 1 << 17:
            n, s = np.divmod(pos, self.per)
            return self._cast(self.raw[n, :, s], None)
        out = np.empty((pos.size, self.shape[1]), self._kind)

        def gather(part: slice) -> None:
            n, s = np.divmod(pos[part], self.per)
            block = self.raw[n, :, s]
            np.copyto(
                out[part],
                block.view(np.uint16) if self.bits else block,
                casting="unsafe",
            )

        cuts = np.linspace(0, pos.size, threads + 1).astype(np.intp)
        pool = _gather_pool(threads)
        for f in [
            pool.submit(gather, slice(a, b)) for a, b in itertools.pairwise(cuts)
        ]:
            f.result()
        return self._shifted(out)

    def _range(self, start: int, stop: int, name: str = "positions") -> NDArray:
        """Rows ``start:stop`` of every position (``keep`` not applied)."""
        k, per = self.shape[1], self.per
        if per == 1:
            block = self.raw[start:stop, :, 0]
            if self.raw.dtype == self.dtype and not self.bits:
                return block  # rows of a (n, K) array: a view
            return self._cast(block, scratch(name, block.shape, self._kind))
        out = scratch(name, (stop - start, k), self._kind)
        threads = self.threads if threading.current_thread() is _MAIN else 1
        if threads > 1 and (stop - start) * k >= 1 << 17:
            # (numpy's copies release the GIL: the two halves at once)
            cuts = np.linspace(start, stop, threads + 1).astype(np.intp)
            pool = _gather_pool(threads)
            done = [
                pool.submit(self._fill, out, start, int(a), int(b))
                for a, b in itertools.pairwise(cuts)
            ]
            for f in done:
                f.result()
        else:
            self._fill(out, start, start, stop)
        return self._shifted(out)

    def _every(self, start: int, stop: int, step: int) -> NDArray:
        """Rows ``start:stop:step`` (no ``keep``): each sample's positions
        among them are a strided slice of its plane."""
        k, per = self.shape[1], self.per
        count = len(range(start, stop, step))
        out = np.empty((count, k), self._kind)
        first = start // per
        last = (start + (count - 1) * step) // per

        def fill(samples) -> None:
            for n in samples:
                # the first row of sample n in the progression, and its index
                lo = max(start, n * per)
                j = -(-(lo - start) // step)
                i = start + j * step
                hi = min(stop, (n + 1) * per)
                if i >= hi:
                    continue
                seg = self.raw[n, :, i - n * per : hi - n * per : step]
                seg = seg.view(np.uint16) if self.bits else seg
                np.copyto(out[j : j + seg.shape[1]], seg.T, casting="unsafe")

        samples = range(first, last + 1)
        threads = self.threads if threading.current_thread() is _MAIN else 1
        if threads > 1 and count * k >= 1 << 17 and len(samples) > 1:
            pool = _gather_pool(threads)
            done = [pool.submit(fill, samples[t::threads]) for t in range(threads)]
            for f in done:
                f.result()
        else:
            fill(samples)
        return self._shifted(out)

    def _fill(self, out: NDArray, base: int, start: int, stop: int) -> None:
        """Rows ``start:stop`` into ``out[start - base : stop - base]``,
        through a contiguous ``(K, run)`` copy: the K source rows of a run lie
        one plane apart, and transposing from them directly costs 2.5x."""
        k, per = self.shape[1], self.per
        # (runs of at most one block's elements: the plane stays in cache)
        most = max(1, min(stop - start, per, BLOCK_ELEMENTS // k))
        plane = scratch("positions-plane", (k, most), self.raw.dtype)
        i = start
        while i < stop:  # one sample's run of positions at a time
            n, s = divmod(i, per)
            end = min(stop, (n + 1) * per, i + most)
            src = plane[:, : end - i]
            np.copyto(src, self.raw[n, :, s : s + end - i])
            src = src.T.view(np.uint16) if self.bits else src.T
            np.copyto(out[i - base : end - base], src, casting="unsafe")
            i = end

    @property
    def _kind(self):
        return np.uint32 if self.bits else self.dtype

    def _cast(self, block: NDArray, out: NDArray | None) -> NDArray:
        if block.dtype == self.dtype and not self.bits:
            return block
        if out is None:
            out = np.empty(block.shape, self._kind)
        return widen_into(block, out, self.bits)

    def _shifted(self, out: NDArray) -> NDArray:
        """``out`` gathered in ``_kind``, as float: bfloat16's bits shifted
        into place."""
        if self.bits:
            np.left_shift(out, 16, out=out)
            return out.view(np.float32)
        return out


_MAIN = threading.main_thread()
_POOLS: dict = {}


def _gather_pool(threads: int) -> ThreadPoolExecutor:
    """A pool that :class:`Positions` gathers blocks with (kept: a pass asks
    for one per block)."""
    pool = _POOLS.get(threads)
    if pool is None:
        pool = _POOLS[threads] = ThreadPoolExecutor(threads, "skts-gather")
    return pool


def host_logits(x, name: str):
    """A NumPy view (or :class:`Widened`) of a host array; errors for one on
    a device, with what to do."""
    if not on_host(x):
        raise ValueError(
            f"{name} lives on device {getattr(x, 'device', '?')}: enable "
            "sklearn.set_config(array_api_dispatch=True) to calibrate it there "
            "(with SCIPY_ARRAY_API=1 set before SciPy is imported), or move it "
            "to the CPU."
        )
    kind = dtype_name(x)
    if _module(x) == "torch":
        import torch

        x = x.detach()
        if kind == "bfloat16":
            return Widened(x.view(torch.int16).numpy(), bits=True)
        if x.is_conj() or x.is_neg():
            x = x.resolve_conj().resolve_neg()
        arr = x.numpy()
    else:
        try:
            arr = np.from_dlpack(x)
        except (TypeError, BufferError, RuntimeError, AttributeError):
            arr = np.asarray(x)
    if arr.dtype.name in _HALF:
        return Widened(arr)
    return arr


# --------------------------------------------------------------------------
# The passes in the array's own namespace.


def namespace(*arrays):
    """``(xp, device)`` of foreign arrays under ``array_api_dispatch=True``,
    else ``(None, None)``."""
    from sklearn import get_config

    if not get_config().get("array_api_dispatch", False):
        return None, None
    present = [a for a in arrays if a is not None and is_foreign(a)]
    if not present:
        return None, None
    from skts._sklearn_compat import get_namespace

    xp, _ = get_namespace(*present)
    return xp, present[0].device


def to_numpy(x, xp) -> NDArray:
    from skts._sklearn_compat import convert_to_numpy

    return convert_to_numpy(x, xp)


def widen(z, xp):
    """Logits in a floating type of at least float32 (half precision widened)."""
    if z.dtype in (xp.float32, xp.float64):
        return z
    return xp.astype(z, xp.float32)


def xp_log_softmax(z, xp, temperature: float):
    z = widen(z, xp)
    u = (z - xp.max(z, axis=1, keepdims=True)) / temperature
    return u - xp.log(xp.sum(xp.exp(u), axis=1, keepdims=True))


def xp_softmax(z, xp, temperature: float):
    z = widen(z, xp)
    e = xp.exp((z - xp.max(z, axis=1, keepdims=True)) / temperature)
    return e / xp.sum(e, axis=1, keepdims=True)


def _cumulants(xp, e, d, s):
    """Each row's third and fourth cumulants of ``d`` under ``p = e / s`` (the
    third and fourth derivatives of its ``log S`` in ``beta``), to steer."""
    ed = e * d
    m1 = xp.sum(ed, axis=1) / s
    ed2 = ed * d
    m2 = xp.sum(ed2, axis=1) / s
    ed3 = ed2 * d
    m3 = xp.sum(ed3, axis=1) / s
    m4 = xp.sum(ed3 * d, axis=1) / s
    mm = m1 * m1
    k3 = m3 - m1 * (3.0 * m2 - 2.0 * mm)
    k4 = m4 - 4.0 * m1 * m3 - 3.0 * m2 * m2 + mm * (12.0 * m2 - 6.0 * mm)
    return [k3, k4]


class _HostBlocks:
    """The logits as the high-precision evaluator reads them: one block of
    rows at a time, copied to the host."""

    def __init__(self, logits, xp):
        self.logits, self.xp = logits, xp
        self.shape = tuple(logits.shape)

    def __getitem__(self, rows):
        return to_numpy(self.logits[rows, :], self.xp)


class XpRows(Rows):
    """Held-out rows in an array-API namespace: the search's passes run
    there, block by block, in float64 (the NumPy float64 passes' formulas,
    blocks and error bounds; the float32 passes of the NumPy backend are
    replaced by float64 ones, whose bounds are tighter).

    The grid answer is the exact rule, hence the NumPy answer, bit for bit;
    the continuous answer agrees to its tolerance.
    """

    # (every read is float64: so are the windows, at any number of classes)
    float64_window = True

    def __init__(self, logits, y, sample_weight, xp, device):
        from skts._sklearn_compat import max_precision_float_dtype

        self.xp, self.device = xp, device
        self.logits = logits
        self.n_samples, self.n_classes = (int(s) for s in logits.shape)
        self.n_jobs = None
        self._maxima = None
        self.y_host = y
        self.w_host = normalised_weights(sample_weight)
        self.total = weights_total(self.w_host, self.n_samples, self.n_classes)
        self.float = max_precision_float_dtype(xp, device)
        if self.float != xp.float64:
            raise ValueError(
                f"device {device} has no float64, which the exact search needs; "
                "move the logits to the CPU."
            )
        self.y = xp.asarray(y.astype(np.int64), device=device)
        w = self.w_host
        self.scale = (
            None
            if w is None
            else xp.asarray(w / self.total, dtype=xp.float64, device=device)
        )
        self.sample_weight = self.w_host  # the host evaluator's weights

    # -- per block ----------------------------------------------------------

    def _terms(self, rows: slice):
        """Centred float64 logits, the gap, the row weights and the logits."""
        xp = self.xp
        z = xp.astype(self.logits[rows, :], xp.float64)
        n = z.shape[0]
        m = xp.max(z, axis=1)
        d = xp.clip(z - m[:, None], min=-BIG)
        flat = xp.arange(n, device=self.device) * self.n_classes + self.y[rows]
        zy = xp.take(xp.reshape(z, (-1,)), flat)
        gap = xp.clip(m - zy, max=BIG)
        if self.scale is None:
            scale = xp.full(
                (n,), 1.0 / self.total, dtype=xp.float64, device=self.device
            )
        else:
            scale = self.scale[rows]
        return z, d, gap, scale, m, zy

    def _sum(self, scale, r):
        xp = self.xp
        return xp.sum(scale * xp.where(scale > 0, r, xp.zeros_like(r)))

    def _row_loss(self, d, gap, t: float):
        xp = self.xp
        x = xp.clip(d / t, min=EXP_FLOOR)
        return gap / t + xp.log(xp.sum(xp.exp(x), axis=1))

    def _host(self, values) -> NDArray:
        return to_numpy(self.xp.stack(values), self.xp)

    def _nll_block(self, rows, temperatures) -> NDArray:
        _, d, gap, scale, _, _ = self._terms(rows)
        return self._host(
            [self._sum(scale, self._row_loss(d, gap, float(t))) for t in temperatures]
        )

    def _each(self, fn, *args):
        return [fn(rows, *args) for rows in blocks(self.n_samples, self.n_classes)]

    # -- each read's per-block sums (Rows' *_parts) ---------------------------

    def nll_parts(self, temperatures):
        return self._each(self._nll_block, temperatures)

    def window_parts(
        self, temperatures, exact_t, spread, deriv_at=None, slopes=False, span=False
    ):
        # (float64 windows: no slopes, hence no span; see Rows.window)
        def block(rows):
            est = self._nll_block(rows, temperatures)
            ref = [self._nll_block(rows, exact_t)] if exact_t.size else []
            return est, np.zeros_like(est), ref

        parts = self._each(block)
        gh = np.zeros((len(parts), len(temperatures), 3))
        if deriv_at is not None:
            # (F', F'') at one of them: a second read, in float64, here.
            beta = 1.0 / float(temperatures[deriv_at])
            sums = self.derivatives_parts([beta], "float64", True)
            for i, g in enumerate(sums):
                gh[i, deriv_at, :2] = np.asarray(g)[0, 1:3]
        return [(*p, g, math.inf) for p, g in zip(parts, gh, strict=True)]

    def derivatives_parts(self, betas, precision, second_moment, higher=False):
        xp = self.xp

        def block(rows):
            _, d, gap, scale, _, _ = self._terms(rows)
            out = []
            for beta in betas:
                e = xp.exp(d * beta)
                s = xp.sum(e, axis=1)
                ed = e * d
                mean_d = xp.sum(ed, axis=1) / s
                if second_moment:
                    second = xp.sum(ed * d, axis=1) / s
                    third = xp.clip(second - mean_d * mean_d, min=0.0)
                else:
                    third = -mean_d
                loss = gap * beta + xp.log(s)
                terms = [loss, mean_d + gap, third]
                if higher:
                    terms += _cumulants(xp, e, d, s)
                out.append(xp.stack([self._sum(scale, r) for r in terms]))
            return self._host(out)

        return self._each(block)

    def slopes_parts(self, temperatures, moments, facts, higher=False, span=False):
        """:meth:`Rows.slopes_parts` in the array's namespace."""
        xp = self.xp
        k_classes = self.n_classes

        def block(rows):
            z, d, gap, scale, m, zy = self._terms(rows)
            live = scale > 0
            found = (False, False, False)
            if facts:
                low = xp.min(z, axis=1)
                found = (
                    bool(xp.all((zy == m) | ~live)),
                    bool(xp.all((zy == low) | ~live)),
                    bool(xp.any((m > low) & live)),
                )
            # (the block's largest row range, as the kernel's span_out)
            found += (float(xp.max(m - xp.min(z, axis=1))) if span else math.inf,)
            out = []
            for t in temperatures:
                x = xp.clip(d / t, min=EXP_FLOOR)
                e = xp.exp(x)
                s = xp.sum(e, axis=1)
                loss = gap / t + xp.log(s)
                if not moments:
                    out.append(xp.stack([self._sum(scale, loss)]))
                    continue
                ex = e * x
                m1x = -xp.sum(ex, axis=1) / s
                m2x = xp.sum(ex * x, axis=1) / s
                slope = gap - m1x * t
                var_x = xp.clip(m2x - m1x * m1x, min=0.0)
                err = slope_error(gap, m1x, m2x, t, k_classes)
                terms = [loss, slope, var_x, err, xp.abs(slope)]
                if higher:
                    terms += _cumulants(xp, e, d, s)
                out.append(xp.stack([self._sum(scale, r) for r in terms]))
            sums = self._host(out)
            if not moments:
                nan = np.full(len(temperatures), np.nan)
                inf = np.full(len(temperatures), np.inf)
                sums = np.column_stack([sums[:, 0], nan, nan, inf, inf])
            return sums, found

        return self._each(block)

    def exact_parts(self, temperatures, digits=HP_DIGITS):
        return exact_part(
            _HostBlocks(self.logits, self.xp),
            self.y_host,
            self.w_host,
            self.total,
            temperatures,
            digits,
        )

    # -- the rest of Rows ----------------------------------------------------

    def readable(self) -> bool:
        return False  # (on a device: the warm start copies a subsample)

    def view(self, rows: slice):
        return None

    def flat(self) -> bool:
        xp = self.xp
        for rows in blocks(self.n_samples, self.n_classes):
            z = self.logits[rows, :]
            varies = xp.max(z, axis=1) != xp.min(z, axis=1)
            if self.scale is not None:
                varies = varies & (self.scale[rows] > 0)
            if bool(xp.any(varies)):
                return False
        return True

    def subsample(self, rows: slice):
        z = to_numpy(self.logits[rows, :], self.xp)
        if z.dtype.name in _HALF:
            z = z.astype(np.float32)
        w = self.w_host
        return (
            np.require(z, None, "CA"),
            np.asarray(self.y_host[rows]),
            None if w is None else np.asarray(w[rows]),
        )


def space(x) -> tuple[str, str] | None:
    """The namespace and device ``x`` computes in under ``array_api_dispatch``
    (None: NumPy, or dispatch off)."""
    xp, device = namespace(x)
    if xp is None:
        return None
    return xp.__name__, str(device)


def check_same_space(estimator, x, method: str) -> None:
    """Under ``array_api_dispatch``, ``x`` must live where the fit's data did
    (scikit-learn's rule and message)."""
    from sklearn import get_config

    if not get_config().get("array_api_dispatch", False):
        return
    fitted = getattr(estimator, "_fit_space", None)
    here = space(x)
    if fitted == here:
        return
    name = type(estimator).__name__
    where = lambda s: "numpy" if s is None else f"{s[0]} on {s[1]}"  # noqa: E731
    raise ValueError(
        f"Inputs passed to {name}.{method}() must use the same namespace and the "
        f"same device as those passed to fit(): fit used {where(fitted)}, "
        f"{method} got {where(here)}."
    )
