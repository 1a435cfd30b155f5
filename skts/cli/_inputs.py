"""Reading inputs: arrays from files and shards, labels, candidate
temperatures, a calibration JSON."""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import math
import os
import pickle
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from skts import __version__
from skts._array_api import Widened, host_logits
from skts._numerics import (
    MAX_GRID_POINTS,
    geometric_grid,
)
from skts.cli._common import SCHEMA_VERSION, CLIError, _validation


def _load_array(
    path: str, *, what: str, key: str | None = None, ndmin: int = 1
) -> NDArray:
    """An array from .npy (memory-mapped), .npz (``key``), .csv or .txt
    (read as at least ``ndmin``-D: a one-row logits file is one sample)."""
    p = Path(path)
    if not p.is_file():
        raise CLIError(f"cannot read {what} file {path!r}: no such file")
    suffix = p.suffix.lower()
    _check_magic(p, suffix, what)
    try:
        if suffix == ".npy":
            return np.load(p, mmap_mode="r", allow_pickle=False)
        if suffix == ".npz":
            with np.load(p, allow_pickle=False) as archive:
                return archive[_choose(list(archive.files), key, path, what)]
        if suffix == ".safetensors":
            return _load_safetensors(p, what, key)
        if suffix == ".pt":
            return _load_torch(p, what, key)
        if suffix in (".csv", ".txt"):
            delimiter = "," if suffix == ".csv" else None
            skip = _header_rows(p, delimiter, what)
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # an empty file is an error
                return np.loadtxt(
                    p, delimiter=delimiter, ndmin=ndmin, dtype=np.float64, skiprows=skip
                )
    except CLIError:
        raise
    except Exception as exc:  # corrupt files raise many types; name the file
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise CLIError(f"cannot read {what} file {path!r}: {reason}") from None
    raise CLIError(
        f"cannot read {what} file {path!r}: unknown extension {suffix!r} "
        "(use .npy, .npz, .safetensors, .pt, .csv or .txt)"
    )


def _header_rows(p: Path, delimiter: str | None, what: str) -> int:
    """1 when the text file starts with a header row (names, no numbers),
    else 0; a first row that mixes names and numbers is refused."""
    with open(p, encoding="utf-8", errors="replace") as fh:
        first = next((line for line in fh if line.strip()), "")
    cells = [c.strip().strip('"') for c in first.strip().split(delimiter)]

    def number(cell: str) -> bool:
        try:
            float(cell)
            return True
        except ValueError:
            return False

    numeric = [number(c) for c in cells]
    if all(numeric):
        return 0
    if not any(numeric):
        return 1  # a header: column names
    raise CLIError(
        f"cannot read {what} file {str(p)!r}: its first row mixes names and "
        f"numbers ({first.strip()[:60]!r}); give a header of names only, or none"
    )


def _choose(
    names: list[str], key: str | None, path: str, what: str, by_name: bool = False
) -> str:
    """The array ``key`` of a file holding several (or its only one; with
    ``by_name``, the one named ``what``: "logits" or "labels", as PyTorch
    code names its tensors in .pt and .safetensors files)."""
    if key is None:
        if by_name and len(names) > 1 and what in names:
            return what
        if len(names) != 1:
            option = "--key" if what == "logits" else "--labels-key"
            raise CLIError(
                f"{what} file {path!r} holds {names}; choose one with {option}"
            )
        return names[0]
    if key not in names:
        raise CLIError(f"{what} file {path!r} has no array {key!r}: {names}")
    return key


# safetensors dtypes NumPy can memory-map (BF16: as its 16 bits, see Widened).
_SAFETENSORS_DTYPES = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2",
    "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
    "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?",
}  # fmt: skip


def _load_safetensors(p: Path, what: str, key: str | None):
    """One tensor of a ``.safetensors`` file, memory-mapped (no pickle, no
    copy). The ``safetensors`` package checks the file; its JSON header gives
    where the tensor's bytes are."""
    try:
        from safetensors import safe_open
    except ImportError:
        raise CLIError(
            f"reading {what} file {str(p)!r} needs safetensors: "
            "pip install 'skts[files]'"
        ) from None
    with safe_open(str(p), framework="numpy") as fh:  # validates the header
        names = sorted(fh.keys())
    key = _choose(names, key, str(p), what, by_name=True)
    with open(p, "rb") as fh:
        size = int.from_bytes(fh.read(8), "little")
        header = json.loads(fh.read(size))
    info = header[key]
    dtype = _SAFETENSORS_DTYPES.get(info["dtype"])
    if dtype is None:
        raise CLIError(
            f"{what} file {str(p)!r}: array {key!r} has dtype {info['dtype']}, "
            "which skts does not read"
        )
    shape = tuple(info["shape"])
    start, end = info["data_offsets"]
    if end == start:
        arr = np.zeros(shape, dtype=dtype)
    else:
        arr = np.memmap(p, dtype=dtype, mode="r", offset=8 + size + start, shape=shape)
    if info["dtype"] == "BF16":
        return Widened(arr, bits=True) if arr.ndim >= 2 else _bf16(arr)
    return arr


def _bf16(bits: NDArray) -> NDArray[np.float32]:
    """bfloat16 bits as float32 values (exact)."""
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)


def _load_torch(p: Path, what: str, key: str | None):
    """A tensor of a ``.pt`` file (``torch.load(weights_only=True)``, which
    refuses arbitrary pickled code; memory-mapped where the file allows)."""
    try:
        import torch
    except ImportError:
        raise CLIError(
            f"reading {what} file {str(p)!r} needs PyTorch (pip install torch); "
            "or save the tensor as .npy or .safetensors"
        ) from None
    try:
        try:
            obj = torch.load(p, map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError:  # the legacy format cannot be memory-mapped
            obj = torch.load(p, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        raise CLIError(
            f"{what} file {str(p)!r} holds pickled objects other than tensors, "
            "which skts does not load (torch.load(weights_only=True) refuses "
            "them); save the tensors alone, or as .npy or .safetensors"
        ) from None
    if isinstance(obj, dict):
        names = sorted(k for k, v in obj.items() if isinstance(v, torch.Tensor))
        obj = obj[_choose(names, key, str(p), what, by_name=True)]
    if not isinstance(obj, torch.Tensor):
        raise CLIError(
            f"{what} file {str(p)!r} holds a {type(obj).__name__}, not a tensor "
            "(or a dict of tensors)"
        )
    if obj.dtype == torch.bfloat16 and obj.ndim < 2:
        return _bf16(obj.view(torch.int16).numpy())
    try:
        return host_logits(obj, f"{what} file {str(p)!r}")
    except (TypeError, RuntimeError) as exc:
        raise CLIError(f"cannot read {what} file {str(p)!r}: {exc}") from None


def _check_magic(p: Path, suffix: str, what: str) -> None:
    """Reject a file whose header is not that of its extension (numpy would
    otherwise try to unpickle a non-.npy file, with a misleading message)."""
    expected = {".npy": b"\x93NUMPY", ".npz": b"PK\x03\x04"}.get(suffix)
    if expected is None:
        return
    try:
        with open(p, "rb") as fh:
            head = fh.read(len(expected))
    except OSError as exc:
        raise CLIError(f"cannot read {what} file {str(p)!r}: {exc.strerror}") from None
    if head != expected:
        raise CLIError(
            f"cannot read {what} file {str(p)!r}: not a {suffix} file (bad header)"
        )


_FILE_SUFFIXES = (".npy", ".npz", ".safetensors", ".pt", ".csv", ".txt")


def _is_shards(path: str) -> bool:
    """A folder, or a glob pattern: ``.npy`` shards read lazily with Dask."""
    return os.path.isdir(path) or any(c in path for c in "*?[")


def _shard_files(spec: str, what: str) -> list[Path]:
    """The ``.npy`` files of a folder or glob, sorted by name (the order of
    the rows, and how logits and labels shards are paired)."""
    if os.path.isdir(spec) and Path(spec).suffix.lower() in _FILE_SUFFIXES:
        raise CLIError(
            f"{what} {spec!r} is a directory, not a {Path(spec).suffix} file (a "
            "folder of .npy shards is named without a file extension)"
        )
    if os.path.isdir(spec):
        files = sorted(Path(spec).glob("*.npy"))
    else:
        files = sorted(Path(p) for p in glob.glob(spec))
    if not files:
        raise CLIError(f"no .npy shards found for {what} {spec!r}")
    # Absolute: the paths travel to workers whose working folder may differ.
    files = [f.resolve() for f in files]
    for f in files:
        if f.suffix.lower() != ".npy" or not f.is_file():
            raise CLIError(
                f"{what} shards {spec!r} include {str(f)!r}, which is not a .npy file"
            )
        _check_magic(f, ".npy", what)
    return files


def _dask_backend():
    try:
        from skts import _dask
    except ImportError:
        raise CLIError(
            "shards and --scheduler need dask: pip install 'skts[dask]'"
        ) from None
    return _dask


def _load_lazy(path: str, what: str):
    """A lazy Dask array over the shards of ``path`` (or the one .npy file)."""
    if _is_shards(path):
        files = _shard_files(path, what)
    else:
        p = Path(path)
        if not p.is_file():
            raise CLIError(f"cannot read {what} file {path!r}: no such file")
        if p.suffix.lower() != ".npy":
            raise CLIError(
                f"--scheduler reads .npy {what} (a file, a folder or a glob of "
                f"shards); got {path!r}"
            )
        _check_magic(p, ".npy", what)
        files = [p]
    backend = _dask_backend()
    try:
        return backend.load_npy_shards(files, what=what)
    except (ValueError, OSError) as exc:
        raise CLIError(str(exc).splitlines()[0].rstrip(".")) from None


def _load_logits(
    path: str,
    key: str | None,
    lazy: bool = False,
    warn: bool = True,
    class_axis: int = 1,
    finite: bool = True,
):
    """The logits at ``path``, checked (``finite=False``: all but their
    finiteness, which a fit's reads test, see ``host_rows``)."""
    if lazy or _is_shards(path):
        arr = _load_lazy(path, "logits")
        if arr.ndim != 2 or arr.dtype.kind not in "fiu":
            raise CLIError(
                f"logits shards {path!r} must hold 2-D numbers; got shape "
                f"{arr.shape} and dtype {arr.dtype}"
            )
        try:
            return _dask_backend().as_logits(arr, name=f"logits {path!r}")
        except ValueError as exc:
            raise CLIError(str(exc).rstrip(".")) from None
    arr = _load_array(path, what="logits", key=key, ndmin=2)
    layout = None
    if len(arr.shape) > 2:
        # Per-pixel or per-token logits: one row per position, read in place.
        try:
            arr, _, _, layout = _validation.check_layout(arr, class_axis=class_axis)
        except ValueError as exc:
            raise CLIError(f"logits file {path!r}: {str(exc).rstrip('.')}") from None
    elif arr.dtype.kind not in "fiu":
        raise CLIError(f"logits file {path!r} must hold numbers; got dtype {arr.dtype}")
    if arr.dtype.kind in "iu":
        arr = arr.astype(np.float64)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", UserWarning)
            arr = _validation.check_logits(
                arr, name=logits_name(path), warn_probabilities=warn, finite=finite
            )
    except ValueError as exc:
        raise CLIError(str(exc).rstrip(".")) from None
    for w in caught:
        print(f"skts: warning: {w.message}", file=sys.stderr)
    if layout is not None:
        arr.layout = layout  # (the labels' shape, and apply's output's)
    return arr


def _load_labels(
    path: str,
    key: str | None,
    shape: tuple[int, int],
    logits=None,
    logits_path="",
    ignore_index: int | None = None,
):
    """The labels of ``logits``, checked: ``(labels, logits, keep)``, both
    without the rows labelled ``ignore_index`` (``keep``: the rows kept, or
    None for all)."""
    if _is_shards(path) or _validation.is_dask_array(logits):
        if ignore_index is not None:
            raise CLIError("--ignore-index reads files, not shards or --scheduler")
        return _load_lazy_labels(path, key, shape, logits, logits_path), logits, None
    arr = _load_array(path, what="labels", key=key)
    if isinstance(arr, Widened):
        raise CLIError(f"labels file {path!r} must hold integers; got bfloat16")
    arr = np.asarray(arr)
    layout = getattr(logits, "layout", None)
    if layout is not None:
        if arr.shape != layout.label_shape:
            raise CLIError(
                f"logits file {logits_path!r} of shape {layout.shape} has its "
                f"classes on axis {layout.axis}, so labels file {path!r} must "
                f"have shape {layout.label_shape}; got {arr.shape}"
            )
        arr = arr.reshape(-1)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise CLIError(f"labels file {path!r} must be 1-D; got shape {arr.shape}")
    if arr.shape[0] != shape[0]:
        raise CLIError(
            f"the logits file has {shape[0]} rows but labels file {path!r} has "
            f"{arr.shape[0]} labels"
        )
    keep = None
    if ignore_index is not None:
        kept = arr != ignore_index
        if not kept.any():
            raise CLIError(
                f"every label of labels file {path!r} is --ignore-index "
                f"{ignore_index}: nothing to calibrate on"
            )
        if not kept.all():
            keep = np.flatnonzero(kept)
            arr, logits = arr[keep], _validation.kept_rows(logits, keep)
            shape = logits.shape
    try:
        y = _validation.check_class_indices(arr, shape, name=f"labels file {path!r}")
    except ValueError as exc:
        hint = ""
        if ignore_index is None and arr.dtype.kind in "if" and arr.min() < 0:
            hint = f" (padding? pass --ignore-index {arr.min().item()!r})"
        raise CLIError(str(exc).rstrip(".") + hint) from None
    return y, logits, keep


def logits_name(path: str) -> str:
    """The logits at ``path`` as the checks' messages name them."""
    return f"logits file {path!r}"


def finiteness_test(logits, path: str):
    """The finiteness test of logits loaded with ``finite=False``, for a fit's
    reads to run (``host_rows(..., untested=...)``): the check's message as
    a one-line error; None for logits already tested (half precision)."""
    if not isinstance(logits, np.ndarray):
        return None

    def test() -> None:
        try:
            _validation.check_finite(logits, logits_name(path))
        except ValueError as exc:
            raise CLIError(str(exc).rstrip(".")) from None

    return test


def _load_pair(args, finite: bool = True):
    """The logits and labels ``fit`` and ``report`` read (``--logits``,
    ``--key``, ``--labels``, ``--labels-key``, ``--class-axis``,
    ``--ignore-index``, lazily under ``--scheduler``): ``(labels, logits,
    keep, rows)``, ``rows`` the logits' rows before ``--ignore-index``
    (``finite``: as in ``_load_logits``)."""
    logits = _load_logits(
        args.logits,
        args.key,
        lazy=args.scheduler is not None,
        class_axis=args.class_axis,
        finite=finite,
    )
    rows = logits.shape[0]
    y, logits, keep = _load_labels(
        args.labels,
        args.labels_key,
        logits.shape,
        logits,
        args.logits,
        ignore_index=args.ignore_index,
    )
    return y, logits, keep, rows


def _check_pairs(labels_rows, logits_rows, path: str) -> None:
    """Shards pair by sorted name: the i-th labels shard holds the labels of
    the i-th logits shard, row for row."""
    if len(labels_rows) != len(logits_rows):
        raise CLIError(
            f"labels {path!r} are {len(labels_rows)} shards but the logits are "
            f"{len(logits_rows)}; shards pair by sorted name"
        )
    for i, (a, b) in enumerate(zip(labels_rows, logits_rows, strict=True)):
        if a != b:
            raise CLIError(
                f"labels shard {i} of {path!r} has {a} labels but logits shard "
                f"{i} has {b} rows"
            )


def _load_lazy_labels(path: str, key: str | None, shape, logits, logits_path):
    """Labels beside lazy logits: shards (paired with the logits' shards by
    sorted name) or one file; checked with the logits by the Dask pass."""
    if not _is_shards(path):
        arr = np.asarray(_load_array(path, what="labels", key=key))
        if arr.ndim == 2 and arr.shape[1] == 1:
            arr = arr[:, 0]
        if arr.ndim != 1:
            raise CLIError(f"labels file {path!r} must be 1-D; got shape {arr.shape}")
    else:
        arr = _load_lazy(path, "labels")
        if arr.ndim != 1:
            raise CLIError(f"labels shards {path!r} must be 1-D; got shape {arr.shape}")
        if not _validation.is_dask_array(
            logits
        ):  # in-memory logits: bring the labels here
            arr = np.asarray(arr)
        elif _is_shards(logits_path):
            _check_pairs(arr.chunks[0], logits.chunks[0], path)
    if arr.shape[0] != shape[0]:
        raise CLIError(
            f"the logits have {shape[0]} rows but labels {path!r} have "
            f"{arr.shape[0]} labels"
        )
    if not _validation.is_dask_array(arr):
        try:
            return _validation.check_class_indices(
                arr, shape, name=f"labels file {path!r}"
            )
        except ValueError as exc:
            raise CLIError(str(exc).rstrip(".")) from None
    return arr


@contextlib.contextmanager
def _scheduler(address: str | None) -> Iterator[None]:
    """Use the running ``dask.distributed`` scheduler at ``address`` (skts
    never starts one); without it, shards are streamed on this machine."""
    if address is None:
        yield
        return
    _dask_backend()
    try:
        from distributed import Client
    except ImportError:
        raise CLIError(
            "--scheduler needs dask.distributed: pip install 'skts[dask]'"
        ) from None
    try:
        client = Client(address, timeout="10s")
    except Exception as exc:  # OSError, TimeoutError, ValueError, ...
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise CLIError(
            f"cannot connect to the Dask scheduler at {address!r}: {reason}"
        ) from None
    try:
        yield
    finally:
        client.close()


@contextlib.contextmanager
def _dask_errors(what: str) -> Iterator[None]:
    """Failures inside Dask tasks (a shard gone, a worker lost for good) as
    one line; validation errors pass through as they are."""
    try:
        yield
    except (CLIError, ValueError, OSError, KeyboardInterrupt):
        raise
    except Exception as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise CLIError(f"{what} failed: {reason}") from None


def parse_temperatures(spec: str | None) -> NDArray[np.float64]:
    """Candidate temperatures from ``"0.5,1,2"`` or ``"geom:LOW:HIGH:COUNT"``.

    ``geom:`` is :func:`skts._numerics.geometric_grid`, so
    ``geom:0.01:100:1001`` is the library's default grid bit for bit.
    """
    if spec is None:
        return _validation.check_temperatures(None)
    usage = (
        "--temperatures must be a list like '0.5,1,2' or 'geom:LOW:HIGH:COUNT' "
        f"with 0 < LOW <= HIGH and 1 <= COUNT <= {MAX_GRID_POINTS}; got {spec!r}"
    )
    try:
        if spec.startswith("geom:"):
            parts = spec.split(":")
            if len(parts) != 4:
                raise ValueError
            low, high, count = float(parts[1]), float(parts[2]), int(parts[3])
            if count > MAX_GRID_POINTS:
                raise CLIError(
                    f"--temperatures: at most {MAX_GRID_POINTS} candidates; got "
                    f"COUNT = {count} in {spec!r}"
                )
            values = geometric_grid(low, high, count)
        else:
            values = np.array([float(v) for v in spec.split(",")])
    except ValueError:
        raise CLIError(usage) from None
    try:
        return _validation.check_temperatures(values)
    except ValueError as exc:
        raise CLIError(f"--temperatures: {exc}".rstrip(".")) from None


def _tolerance(text: str) -> float:
    """``--tol``: a number with 0 < tol < 1, as the estimators require."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(
            f"must be a number with 0 < tol < 1; got {text!r}"
        )
    return value


def _load_calibration(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as fh:
            calib = json.load(fh)
        t = float(calib["temperature"])
        n_classes = int(calib["n_classes"])
    except FileNotFoundError:
        raise CLIError(f"cannot read calibration file {path!r}: no such file") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CLIError(
            f"calibration file {path!r} is not a skts calibration: {exc}"
        ) from None
    schema = calib.get("schema_version", 1)  # (files before schemas: 1)
    if not isinstance(schema, int) or schema > SCHEMA_VERSION:
        raise CLIError(
            f"calibration file {path!r} has schema_version {schema!r}; this skts "
            f"({__version__}) reads schema {SCHEMA_VERSION}: upgrade skts"
        )
    if not (np.isfinite(t) and t > 0):
        raise CLIError(f"calibration file {path!r} has a bad temperature {t!r}")
    calib["temperature"], calib["n_classes"] = t, n_classes
    return calib
