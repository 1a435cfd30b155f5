"""Temperature scaling for PyTorch models: from a model and a data loader to
a calibrated ``nn.Module``.

``import skts`` does not import this module (nor torch); ``import
skts.torch`` does. Two names:

- :func:`calibrate` runs a model over a validation loader (in ``eval()``
  mode, under ``torch.no_grad()``, its mode restored after), keeps the logits
  on the host in their own precision (bfloat16 and float16 stay 16-bit), or
  in a memory-mapped file when they would not fit, and fits the temperature
  with skts's exact rule; per-pixel and per-token logits (classes on
  ``class_axis``) and ``ignore_index`` as ``CrossEntropyLoss`` takes them.
- :class:`TemperatureScaledModule` wraps a model and divides its logits by
  ``T``, a registered buffer: ``state_dict``, ``torch.jit.script``,
  ``torch.export`` and ONNX export work on it.
  :meth:`skts.TemperatureScaler.to_torch` gives one for a scaler fitted
  elsewhere.
"""

from __future__ import annotations

import bisect
import math
import mmap
import os
import shutil
import sys
import tempfile
import threading
from collections import deque
from collections.abc import Mapping

import numpy as np
import torch
from torch import nn

from skts._array_api import Widened, widen_into
from skts._fit import fit_temperature, host_rows
from skts._numerics import scratch
from skts._torch import TemperatureScaledModule, device_and_dtype
from skts._validation import check_temperatures, class_axis_of

__all__ = ["TemperatureScaledModule", "calibrate"]


# ---------------------------------------------------------------------------
# Collecting the logits.


def _logits_of(out):
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, Mapping) and "logits" in out:
        return out["logits"]
    if isinstance(out, tuple | list) and out and isinstance(out[0], torch.Tensor):
        return out[0]
    raise TypeError(
        f"the model returned a {type(out).__name__}; pass forward= a function "
        "of a batch returning (logits, labels)."
    )


def _to(batch, device):
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, Mapping):
        return {k: _to(v, device) for k, v in batch.items()}
    if isinstance(batch, tuple | list):
        return type(batch)(_to(v, device) for v in batch)
    return batch


def _run(model, batch, forward):
    """``(logits, labels)`` of one batch."""
    if forward is not None:
        got = forward(batch)
        if not (isinstance(got, tuple | list) and len(got) == 2):
            raise TypeError("forward must return a pair (logits, labels).")
        return _logits_of(got[0]), got[1]
    if isinstance(batch, Mapping):
        key = "labels" if "labels" in batch else "label" if "label" in batch else None
        if key is None:
            raise ValueError(
                "a batch dict must hold its labels under 'labels' (or 'label'); "
                f"got keys {sorted(batch)!r}, or pass forward=."
            )
        inputs = {k: v for k, v in batch.items() if k != key}
        return _logits_of(model(**inputs)), batch[key]
    if isinstance(batch, tuple | list) and len(batch) >= 2:
        return _logits_of(model(batch[0])), batch[1]
    raise ValueError(
        f"a batch must be (inputs, labels) or a dict with 'labels'; got a "
        f"{type(batch).__name__}: pass forward= a function of a batch returning "
        "(logits, labels)."
    )


class _Chunks:
    """Rows kept as the batches gave them (no concatenation), read as one
    2-D ``(m, K)`` array, block by block (the ``Widened`` contract: a block
    within one chunk is a view, or widened into this thread's scratch)."""

    ndim = 2

    def __init__(self, chunks: list, k: int, kind: str):
        self.chunks = chunks
        self.bits = kind == "bfloat16"
        self.half = kind in ("bfloat16", "float16")
        self.starts = [0]
        for c in chunks:
            self.starts.append(self.starts[-1] + c.shape[0])
        self.shape = (self.starts[-1], k)
        self.dtype = np.dtype(np.float64 if kind == "float64" else np.float32)

    def __len__(self) -> int:
        return self.shape[0]

    def _widen(self, block):
        """A block within one chunk: a view, or widened into scratch."""
        if not self.half:
            return block
        out = scratch("chunks", block.shape, np.float32)
        return widen_into(block, out, self.bits)

    def __getitem__(self, key):
        m = self.shape[0]
        if not isinstance(key, slice):
            pos = np.arange(m)[key]
            return self._gather(np.atleast_1d(pos)).reshape((*np.shape(pos), -1))
        start, stop, step = key.indices(m)
        stop = max(start, stop)
        if step != 1:
            return self._gather(np.arange(start, stop, step))
        i = bisect.bisect_right(self.starts, start) - 1
        if i < len(self.chunks) and stop <= self.starts[i + 1]:
            c0 = self.starts[i]
            return self._widen(self.chunks[i][start - c0 : stop - c0])
        out = np.empty((stop - start, self.shape[1]), self.dtype)
        at = start
        while at < stop:
            i = bisect.bisect_right(self.starts, at) - 1
            end = min(stop, self.starts[i + 1])
            c0 = self.starts[i]
            part = self.chunks[i][at - c0 : end - c0]
            widen_into(part, out[at - start : end - start], self.bits)
            at = end
        return out

    def _gather(self, pos):
        out = np.empty((pos.shape[0], self.shape[1]), self.dtype)
        which = np.searchsorted(self.starts, pos, side="right") - 1
        for i in np.unique(which):
            sel = which == i
            part = self.chunks[i][pos[sel] - self.starts[i]]
            out[sel] = (
                widen_into(part, np.empty(part.shape, np.float32), True)
                if self.bits
                else part
            )
        return out

    def argmax(self, axis: int = 1):
        return Widened.argmax(self, axis)


def _host(z: torch.Tensor) -> torch.Tensor:
    """A host tensor of the logits' values in their own precision (bfloat16
    as its 16 bits, int16), as a view where they are already on the host:
    a strided view (classes moved last) is copied once, into the store."""
    z = z.detach()
    if z.device.type != "cpu":
        z = z.contiguous().to("cpu")  # (one transfer, of contiguous rows)
    if z.dtype == torch.bfloat16:
        return z.view(torch.int16)
    if z.dtype not in (torch.float16, torch.float32, torch.float64):
        return z.to(torch.float32)
    return z


class _Writer:
    """Writes the store's file on a thread of its own, so that the model runs
    its next batches while the disk takes this one (the loop waits only when
    more than ``budget`` bytes are queued). The queued arrays are the
    batches' own host tensors (no copy). A failed write is raised by the
    next ``put`` or by ``finish``, as an ``OSError`` naming the file."""

    def __init__(self, file, path: str, budget: int):
        self.file, self.path, self.budget = file, path, budget
        self.items, self.pending = deque(), 0
        self.error, self.closed = None, False
        self.cond = threading.Condition()
        self.thread = threading.Thread(
            target=self._run, name="skts-store-writer", daemon=True
        )
        self.thread.start()

    def put(self, array: np.ndarray) -> None:
        with self.cond:
            while self.pending and self.pending + array.nbytes > self.budget:
                if self.error is not None:
                    break
                self.cond.wait()
            self._raise()
            self.items.append(array)
            self.pending += array.nbytes
            self.cond.notify_all()

    def _run(self) -> None:
        while True:
            with self.cond:
                while not self.items and not self.closed:
                    self.cond.wait()
                if not self.items:
                    return
                array = self.items[0]
            if self.error is None:  # (after a failure: drained, not written)
                try:
                    self.file.write(memoryview(array).cast("B"))
                except BaseException as exc:  # (kept, raised by the loop)
                    self.error = exc
            with self.cond:
                self.items.popleft()
                self.pending -= array.nbytes
                self.cond.notify_all()

    def finish(self) -> None:
        """Every queued array written (or the first failure raised)."""
        with self.cond:
            self.closed = True
            self.cond.notify_all()
        self.thread.join()
        self._raise()

    def _raise(self) -> None:
        if self.error is not None:
            raise OSError(
                f"writing the logits to {self.path!r} failed: "
                f"{getattr(self.error, 'strerror', None) or self.error}"
            ) from self.error


class _Store:
    """The validation rows, in host memory or (``"disk"``, or ``"auto"``
    once they pass ``limit`` bytes) in one file that is memory-mapped to
    read them and deleted after the fit.

    In memory, the batches are copied into chunks of 64 MiB (:func:`_fresh`):
    the model's own buffers are then reused batch after batch (keeping them
    instead fragments the heap: measured, 0.65 GiB lost per GiB kept), the
    fit reads long runs, and the memory is the logits themselves (the
    unused tail of the last chunk is never touched, so never resident). The
    file is written by a thread (:class:`_Writer`) while the model runs the
    next batches, at most a quarter of ``CHUNK_BYTES`` of them waiting.
    """

    CHUNK_BYTES = 64 << 20

    def __init__(self, store: str, limit: int, tmp_dir):
        self.mode, self.limit, self.tmp_dir = store, limit, tmp_dir
        self.chunks, self.labels = [], []
        self.k = self.kind = None
        self.buf, self.filled = None, 0
        self.nbytes = 0
        self.path = self.file = self.folder = self.writer = None

    def add(self, z: torch.Tensor, y: np.ndarray, kind: str) -> None:
        """One batch: ``z`` a host tensor ``(n, p, K)`` (``n`` runs of ``p``
        rows each: ``(1, rows, K)`` for rows, ``(N, H*W, K)`` for images
        whose classes were moved last, a strided view) and ``y`` its labels,
        in the same order."""
        k = z.shape[-1]
        if self.k is None:
            self.k, self.kind = k, kind
        elif k != self.k or kind != self.kind:
            raise ValueError(
                f"the batches' logits changed from {self.k} classes ({self.kind}) "
                f"to {k} ({kind})."
            )
        self.labels.append(y)
        self.nbytes += z.numel() * z.element_size()
        if self.file is None and (
            self.mode == "disk" or (self.mode == "auto" and self.nbytes > self.limit)
        ):
            self._spill()
        if self.file is not None:
            self.writer.put(z.contiguous().numpy())
            return
        for run in z:  # (p, K), copied chunk by chunk
            at, p = 0, run.shape[0]
            while at < p:
                if self.buf is None:
                    rows = max(1, self.CHUNK_BYTES // (k * z.element_size()))
                    dtype = torch.empty((), dtype=z.dtype).numpy().dtype
                    self.buf, self.filled = _fresh((rows, k), dtype), 0
                take = min(p - at, self.buf.shape[0] - self.filled)
                dst = torch.from_numpy(self.buf[self.filled : self.filled + take])
                dst.copy_(run[at : at + take])
                self.filled += take
                at += take
                if self.filled == self.buf.shape[0]:
                    self._close_buf()

    def _close_buf(self) -> None:
        if self.buf is not None and self.filled:
            self.chunks.append(self.buf[: self.filled])
        self.buf, self.filled = None, 0

    def _filled(self) -> list:
        self._close_buf()
        return self.chunks

    def _spill(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="skts-logits-", dir=self.tmp_dir)
        self.path = os.path.join(self.folder, "logits.bin")
        self.file = open(self.path, "wb")  # (closed by rows() or close())
        self.writer = _Writer(self.file, self.path, self.CHUNK_BYTES // 4)
        for c in self._filled():
            self.writer.put(c)
        self.chunks, self.buf, self.filled = [], None, 0

    def rows(self):
        """``(logits reader, labels)``."""
        if self.k is None:
            raise ValueError("the loader gave no batch with a labelled position.")
        y = np.concatenate(self.labels)
        self.labels = []
        if self.file is not None:
            self.writer.finish()
            self.file.close()
            dtype = np.int16 if self.kind == "bfloat16" else np.dtype(self.kind)
            mapped = np.memmap(
                self.path, dtype=dtype, mode="r", shape=(y.shape[0], self.k)
            )
            return _Chunks([mapped], self.k, self.kind), y
        return _Chunks(self._filled(), self.k, self.kind), y

    def close(self) -> None:
        self.chunks, self.buf = [], None
        if self.writer is not None and self.writer.thread.is_alive():
            try:
                self.writer.finish()
            except OSError:
                pass  # (already raised, or the fit's own error is raised)
        if self.file is not None and not self.file.closed:
            self.file.close()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)


def _fresh(shape: tuple, dtype) -> np.ndarray:
    """An uninitialised array in an anonymous private map of its own.

    NumPy asks for transparent huge pages for its large arrays (``madvise``);
    where the kernel then compacts memory at the first touch (THP ``defrag``
    set to ``madvise``, a common default), filling fresh memory measured 2.8
    s per GiB, against 0.56 s on plain pages: the store writes every byte of
    the logits once, so it takes plain pages.
    """
    count = math.prod(shape)
    try:
        flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
        area = mmap.mmap(-1, max(1, count * np.dtype(dtype).itemsize), flags=flags)
    except (AttributeError, TypeError, OSError, ValueError):  # (not POSIX)
        return np.empty(shape, dtype)
    return np.frombuffer(area, dtype=dtype, count=count).reshape(shape)


def _available_memory() -> int:
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 4 << 30


def _finite(z: torch.Tensor) -> bool:
    """Whether every logit is finite: a NaN or an infinity makes the sum
    non-finite, so a finite sum (one pass, no mask: measured 28x cheaper than
    ``isfinite(z).all()`` on a batch of 1024 x 100) settles it; only a
    non-finite sum (which large finite logits can also give) is checked
    element by element."""
    wide = torch.float64 if z.dtype == torch.float64 else torch.float32
    if bool(torch.isfinite(z.sum(dtype=wide))):
        return True
    return bool(torch.isfinite(z).all())


def _label_dtype(k: int):
    return np.uint8 if k <= 256 else np.uint16 if k <= 65536 else np.int32


def calibrate(
    model: nn.Module,
    loader,
    *,
    temperatures=None,
    solver: str = "grid",
    device=None,
    ignore_index: int | None = None,
    class_axis: int = 1,
    forward=None,
    store: str = "auto",
    tmp_dir=None,
    progress: bool | None = None,
    n_jobs: int | None = None,
) -> TemperatureScaledModule:
    """Fit a temperature on a validation loader and return the calibrated model.

    The model runs in ``eval()`` mode under ``torch.no_grad()`` (its mode is
    restored after, also on an error) over every batch of ``loader``; the
    logits are kept on the host in their own precision (never gathered as
    float64: bfloat16 and float16 stay 16-bit), and ``T`` is chosen by the
    exact rule of :class:`skts.TemperatureScaler` on all of them.

    Parameters
    ----------
    model : torch.nn.Module
        The trained model.

    loader : iterable of batches
        A ``torch.utils.data.DataLoader`` (or any iterable) yielding
        ``(inputs, labels)`` pairs (``model(inputs)``), or dicts holding
        ``"labels"`` (Hugging Face style: ``model(**the_rest)``). A model
        output may be a tensor of logits, a mapping with ``"logits"`` or a
        tuple whose first element is the logits.

    temperatures, solver
        As :class:`skts.TemperatureScaler`'s.

    device : torch.device or str, default=None
        Where batches are moved before the model sees them; ``None``: the
        device of the model's first parameter.

    ignore_index : int, default=None
        Positions labelled so are left out (``-100``: PyTorch's and Hugging
        Face's padding convention), on the device, before anything reaches
        the host.

    class_axis : int, default=1
        Axis of the classes in logits of more than two dimensions
        (``(N, K, d1, ..., dk)``, as ``CrossEntropyLoss`` takes them;
        ``-1`` for ``(batch, tokens, classes)``).

    forward : callable, default=None
        ``forward(batch) -> (logits, labels)`` for any other batch format
        (the batch is moved to ``device`` first).

    store : {"auto", "memory", "disk"}, default="auto"
        Where the logits wait for the fit: host memory, or one file in
        ``tmp_dir`` memory-mapped for the fit and deleted after it.
        ``"auto"`` moves to the file once the logits pass half of the
        memory available when the call starts.

    tmp_dir : str or path, default=None
        Folder of that file (default: the system's temporary folder).

    progress : bool, default=None
        A tqdm progress bar over the loader; ``None``: when stderr is a
        terminal and tqdm is installed.

    n_jobs : int, default=None
        Threads of the fit (as :class:`skts.TemperatureScaler`'s).

    Returns
    -------
    TemperatureScaledModule
        The model wrapped, with ``temperature`` set and ``scaler`` the
        fitted :class:`skts.TemperatureScaler` (``temperature_``,
        ``validation_loss_``, ``at_boundary_``).

    Examples
    --------
    >>> import torch
    >>> from torch.utils.data import DataLoader, TensorDataset
    >>> from skts.torch import calibrate
    >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
    <torch._C.Generator object at ...>
    >>> x = torch.randn(512, 4)
    >>> y = (x[:, 0] + 0.5 * torch.randn(512) > 0).long()
    >>> model = torch.nn.Linear(4, 2)
    >>> with torch.no_grad():
    ...     _ = model.weight.copy_(torch.tensor([[-4.0, 0, 0, 0], [4.0, 0, 0, 0]]))
    >>> calibrated = calibrate(model, DataLoader(TensorDataset(x, y), batch_size=128))
    >>> round(float(calibrated.temperature), 2)  # the model was overconfident
    2.17
    >>> model.training  # its mode is restored
    True
    """
    from skts._scaler import TemperatureScaler

    if store not in ("auto", "memory", "disk"):
        raise ValueError(f"store must be 'auto', 'memory' or 'disk'; got {store!r}.")
    candidates = check_temperatures(temperatures)
    scaler = TemperatureScaler(
        temperatures, solver=solver, n_jobs=n_jobs, class_axis=class_axis,
        ignore_index=ignore_index,
    )  # fmt: skip
    scaler._validate_params()
    if device is None:
        device = device_and_dtype(model)[0]
    if progress is None:
        progress = sys.stderr.isatty()
    batches = loader
    if progress:
        try:
            from tqdm.auto import tqdm
        except ImportError:
            tqdm = None
        if tqdm is not None:
            total = len(loader) if hasattr(loader, "__len__") else None
            batches = tqdm(loader, total=total, desc="skts: logits", unit="batch")
    holder = _Store(store, _available_memory() // 2, tmp_dir)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for b, batch in enumerate(batches):
                logits, labels = _run(model, _to(batch, device), forward)
                _keep(holder, logits, labels, b, class_axis, ignore_index)
        z, y = holder.rows()
        rows = host_rows(z, y, None, n_jobs=n_jobs)
        result = fit_temperature(rows, candidates, solver=solver, tol=scaler.tol)
    finally:
        model.train(was_training)
        holder.close()
    scaler.temperature_ = result.temperature
    scaler.validation_loss_ = result.loss
    scaler.at_boundary_ = result.at_boundary
    scaler.classes_ = np.arange(z.shape[1])
    scaler.n_features_in_ = z.shape[1]
    scaler._fit_space = None
    module = TemperatureScaledModule(model, result.temperature)
    module.scaler = scaler
    return module


def _keep(holder: _Store, logits, labels, b: int, class_axis, ignore_index) -> None:
    """One batch's labelled positions, checked on the device, to the host."""
    if not isinstance(logits, torch.Tensor):
        raise TypeError(
            f"batch {b}: the logits are a {type(logits).__name__}, not a tensor."
        )
    labels = torch.as_tensor(labels, device=logits.device)
    z = logits.detach()
    if z.ndim == 1:  # binary: the logit of class 1
        z = torch.stack([torch.zeros_like(z), z], dim=1)
    if z.ndim > 2:
        axis = class_axis_of(z.ndim, class_axis)
        z = z.movedim(axis, -1)
    k = z.shape[-1]
    if tuple(labels.shape) != tuple(z.shape[:-1]):
        raise ValueError(
            f"batch {b}: logits of shape {tuple(logits.shape)} (classes on axis "
            f"{class_axis if logits.ndim > 2 else 1}) need labels of shape "
            f"{tuple(z.shape[:-1])}; got {tuple(labels.shape)}."
        )
    if ignore_index is not None:
        kept = labels != ignore_index
        z, labels = z[kept], labels[kept]  # (M, K): gathered once
    y = labels.reshape(-1)
    # Runs of rows, as views: (1, rows, K) where the rows are contiguous,
    # else (N, positions, K) strided, copied once, into the store.
    if z.is_contiguous():
        z = z.reshape(1, -1, k)
    else:
        z = z.flatten(1, -2) if z.ndim > 2 else z[None]
    if y.numel() == 0:
        return
    if not _finite(z):
        raise ValueError(f"batch {b}: the logits must be finite.")
    low, high = torch.aminmax(y)
    if low.item() < 0 or high.item() >= k:
        value = y[(y < 0) | (y >= k)][0].item()
        raise ValueError(
            f"batch {b}: labels must be class indices in [0, {k}); got {value!r}."
        )
    kind = str(z.dtype).rsplit(".", 1)[-1]
    if kind not in ("float16", "bfloat16", "float32", "float64"):
        kind = "float32"
    holder.add(_host(z), y.to("cpu").numpy().astype(_label_dtype(k)), kind)
