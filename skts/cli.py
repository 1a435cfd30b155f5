"""Command line: ``skts demo|fit|apply|report`` (also ``python -m skts``).

Every command reads its inputs completely and checks them before it writes
anything; outputs go to a temporary file in the target folder that is renamed
into place, so a failure never leaves a truncated or half-written file. Errors
are one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import math
import os
import re
import signal
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from skts import __version__
from skts._array_api import Widened, host_logits
from skts._temperature import (
    MAX_GRID_POINTS,
    BoundaryTemperatureWarning,
    geometric_grid,
    log_softmax,
    softmax,
)


class _Lazy:
    """A module imported on first use: ``skts --help`` and ``--version`` stay
    fast (scikit-learn, which the estimators and metrics import, takes most
    of a second)."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str):
        import importlib

        return getattr(importlib.import_module(self._name), attr)


_scaler = _Lazy("skts._scaler")
_metrics = _Lazy("skts.metrics")

__all__ = ["main"]

EXIT_USAGE = 2

# The version of the JSON that ``fit`` writes and ``report --json`` prints
# (documented in docs/cli.md); a reader refuses a newer one.
SCHEMA_VERSION = 1
STDOUT = "-"


class CLIError(Exception):
    """A problem with the user's input, reported as one line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage dump
        raise CLIError(message)


# --------------------------------------------------------------------------
# Reading inputs.


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


def _choose(names: list[str], key: str | None, path: str, what: str) -> str:
    """The array ``key`` of a file holding several (or its only one)."""
    if key is None:
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
    key = _choose(names, key, str(p), what)
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
        return Widened(arr, bits=True) if arr.ndim == 2 else _bf16(arr)
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
        obj = torch.load(p, map_location="cpu", weights_only=True, mmap=True)
    except RuntimeError:  # the legacy format cannot be memory-mapped
        obj = torch.load(p, map_location="cpu", weights_only=True)
    if isinstance(obj, dict):
        names = sorted(k for k, v in obj.items() if isinstance(v, torch.Tensor))
        obj = obj[_choose(names, key, str(p), what)]
    if not isinstance(obj, torch.Tensor):
        raise CLIError(
            f"{what} file {str(p)!r} holds a {type(obj).__name__}, not a tensor "
            "(or a dict of tensors)"
        )
    if obj.dtype == torch.bfloat16 and obj.ndim != 2:
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


def _is_shards(path: str) -> bool:
    """A folder, or a glob pattern: ``.npy`` shards read lazily with Dask."""
    return os.path.isdir(path) or any(c in path for c in "*?[")


def _shard_files(spec: str, what: str) -> list[Path]:
    """The ``.npy`` files of a folder or glob, sorted by name (the order of
    the rows, and how logits and labels shards are paired)."""
    if os.path.isdir(spec):
        files = sorted(Path(spec).glob("*.npy"))
    else:
        files = sorted(Path(p) for p in glob.glob(spec))
    if not files:
        raise CLIError(f"no .npy shards found for {what} {spec!r}")
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


def _load_logits(path: str, key: str | None, lazy: bool = False, warn: bool = True):
    if lazy or _is_shards(path):
        arr = _load_lazy(path, "logits")
        if arr.ndim != 2 or arr.dtype.kind not in "fiu":
            raise CLIError(
                f"logits shards {path!r} must hold 2-D numbers; got shape "
                f"{arr.shape} and dtype {arr.dtype}"
            )
        try:
            return _dask_backend()._as_logits(arr, name=f"logits {path!r}")
        except ValueError as exc:
            raise CLIError(str(exc).rstrip(".")) from None
    arr = _load_array(path, what="logits", key=key, ndmin=2)
    if arr.dtype.kind not in "fiu":
        raise CLIError(f"logits file {path!r} must hold numbers; got dtype {arr.dtype}")
    if arr.dtype.kind in "iu":
        arr = arr.astype(np.float64)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", UserWarning)
            arr = _scaler._check_logits(
                arr, name=f"logits file {path!r}", warn_probabilities=warn
            )
    except ValueError as exc:
        raise CLIError(str(exc).rstrip(".")) from None
    for w in caught:
        print(f"skts: warning: {w.message}", file=sys.stderr)
    return arr


def _load_labels(
    path: str, key: str | None, shape: tuple[int, int], logits=None, logits_path=""
):
    if _is_shards(path) or _scaler._is_dask_array(logits):
        return _load_lazy_labels(path, key, shape, logits, logits_path)
    arr = _load_array(path, what="labels", key=key)
    if isinstance(arr, Widened):
        raise CLIError(f"labels file {path!r} must hold integers; got bfloat16")
    arr = np.asarray(arr)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise CLIError(f"labels file {path!r} must be 1-D; got shape {arr.shape}")
    if arr.shape[0] != shape[0]:
        raise CLIError(
            f"the logits file has {shape[0]} rows but labels file {path!r} has "
            f"{arr.shape[0]} labels"
        )
    try:
        return _scaler._check_class_indices(arr, shape, name=f"labels file {path!r}")
    except ValueError as exc:
        raise CLIError(str(exc).rstrip(".")) from None


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
        if not _scaler._is_dask_array(
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
    if not _scaler._is_dask_array(arr):
        try:
            return _scaler._check_class_indices(
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

    ``geom:`` is :func:`skts._temperature.geometric_grid`, so
    ``geom:0.01:100:1001`` is the library's default grid bit for bit.
    """
    if spec is None:
        return _scaler._check_temperatures(None)
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
        return _scaler._check_temperatures(values)
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


# --------------------------------------------------------------------------
# Writing outputs: refuse to clobber, never half-write.


def _check_outputs(outputs: Sequence[str | None], inputs: Sequence[str], force: bool):
    given = [o for o in outputs if o is not None]
    if len(set(map(os.path.realpath, given))) != len(given):
        raise CLIError("the output files must be distinct")
    resolved_inputs = {os.path.realpath(i) for i in inputs}
    for out in given:
        if os.path.realpath(out) in resolved_inputs:
            raise CLIError(f"refusing to overwrite the input file {out!r}")
        if os.path.exists(out) and not force:
            raise CLIError(f"output file {out!r} exists; pass --force to overwrite it")
        folder = os.path.dirname(os.path.abspath(out))
        if not os.path.isdir(folder):
            raise CLIError(f"cannot write {out!r}: folder {folder!r} does not exist")


# Temporary outputs are hidden files named after the writing process, so that
# a later run can tell (and remove) those of a process that was killed.
_TEMP_PATTERN = re.compile(r"\.skts-(\d+)-")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, not ours
        return True
    return True


def _remove_stale_temporaries(folder: str) -> None:
    """Remove ``.skts-<pid>-*`` files of processes that no longer run (left by
    a SIGKILL, which no program can clean up after)."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            found = _TEMP_PATTERN.match(entry.name)
            if found and int(found.group(1)) != os.getpid():
                if not _alive(int(found.group(1))):
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)


def _publish(tmp: str, path: str, force: bool) -> None:
    """Move a finished temporary file to ``path``. Without ``force`` the last
    step is no-clobber (a hard link fails if ``path`` appeared meanwhile, say
    from a concurrent run), so nothing is silently replaced."""
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(tmp, 0o666 & ~mask)  # mkstemp makes 0600; outputs get the usual mode
    if force:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise CLIError(
            f"output file {path!r} appeared while writing (another run?); pass "
            "--force to overwrite it"
        ) from None
    except OSError:  # no hard links on this file system: check, then rename
        if os.path.exists(path):
            raise CLIError(
                f"output file {path!r} appeared while writing (another run?); "
                "pass --force to overwrite it"
            ) from None
        os.replace(tmp, path)
        return
    os.unlink(tmp)


@contextlib.contextmanager
def _atomic_outputs(paths: Sequence[str], force: bool = False) -> Iterator[list[str]]:
    """Temporary files beside ``paths``, moved over them only if all succeed;
    on any failure or signal, no output and no temporary file is left."""
    temps: list[str] = []
    published: list[str] = []
    try:
        for path in paths:
            folder = os.path.dirname(os.path.abspath(path))
            _remove_stale_temporaries(folder)
            fd, tmp = tempfile.mkstemp(
                prefix=f".skts-{os.getpid()}-", suffix=Path(path).suffix, dir=folder
            )
            os.close(fd)
            temps.append(tmp)
        yield temps
        for tmp, path in zip(temps, paths, strict=True):
            _publish(tmp, path, force)
            published.append(path)
        temps = []
    finally:
        for tmp in temps:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        if temps:  # failed part-way: take back what this run had published
            for path in published:
                with contextlib.suppress(OSError):
                    os.unlink(path)


def _write_rows(
    tmp: str,
    out: str,
    n_rows: int,
    n_cols: int | None,
    dtype,
    rows_of: Callable,
    step: int | None = None,
    bar=None,
):
    """Write ``rows_of(slice)`` block by block (``step`` rows) as .npy or .csv."""
    suffix = Path(out).suffix.lower()
    if step is None:
        step = max(1, (1 << 16) // max(n_cols or 1, 1))
    bar = bar if bar is not None else _NoBar()
    if out == STDOUT:  # CSV on stdout, block by block
        fmt = "%d" if np.dtype(dtype).kind in "iu" else "%.9g"
        if np.dtype(dtype) == np.float64:
            fmt = "%.17g"
        for start in range(0, n_rows, step):
            rows = slice(start, min(start + step, n_rows))
            np.savetxt(sys.stdout, rows_of(rows), fmt=fmt, delimiter=",")
            bar.update(rows.stop - rows.start)
        sys.stdout.flush()
    elif suffix == ".npy":
        # Plain writes after the header, not a memory map: the written pages
        # of a map stay in the process's memory until the kernel flushes them.
        shape = (n_rows,) if n_cols is None else (n_rows, n_cols)
        header = {
            "descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
            "fortran_order": False,
            "shape": shape,
        }
        with open(tmp, "wb") as fh:
            np.lib.format.write_array_header_2_0(fh, header)
            for start in range(0, n_rows, step):
                rows = slice(start, min(start + step, n_rows))
                # (fh.write, not ndarray.tofile: with numpy 2.0, a SIGINT
                # inside tofile surfaced as a TypeError, not an interrupt.)
                fh.write(np.ascontiguousarray(rows_of(rows), dtype=dtype).data)
                bar.update(rows.stop - rows.start)
    elif suffix in (".csv", ".txt"):
        fmt = "%d" if np.dtype(dtype).kind in "iu" else "%.17g"
        delimiter = "," if suffix == ".csv" else " "
        with open(tmp, "w", encoding="utf-8") as fh:
            for start in range(0, n_rows, step):
                rows = slice(start, min(start + step, n_rows))
                np.savetxt(fh, rows_of(rows), fmt=fmt, delimiter=delimiter)
                bar.update(rows.stop - rows.start)
    else:
        raise CLIError(
            f"cannot write {out!r}: unknown extension {suffix!r} (use .npy or .csv)"
        )


def _check_out_suffix(path: str | None, allowed: tuple[str, ...]) -> None:
    if path is not None and Path(path).suffix.lower() not in allowed:
        raise CLIError(
            f"cannot write {path!r}: unknown extension {Path(path).suffix!r} "
            f"(use {' or '.join(allowed)})"
        )


# --------------------------------------------------------------------------
# Progress on stderr (a terminal only; --quiet silences it).


class _NoBar:
    """What a progress bar does when none is shown: nothing."""

    n = 0

    def update(self, n: int = 1) -> None:
        pass

    def reset(self, total=None) -> None:
        pass

    def set_description(self, desc: str) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass


def _progress_for(args: argparse.Namespace) -> Callable:
    """``bar(total, desc)``: a tqdm bar on stderr when it is a terminal (and
    tqdm is installed), else :class:`_NoBar`."""
    show = not getattr(args, "quiet", False) and sys.stderr.isatty()
    if show:
        try:
            from tqdm import tqdm
        except ImportError:
            show = False

    def bar(total: int, desc: str):
        if not show:
            return _NoBar()
        return tqdm(
            total=total,
            desc=desc,
            unit="rows",
            unit_scale=True,
            file=sys.stderr,
            leave=False,
            dynamic_ncols=True,
        )

    return bar


class _Counted:
    """Logits whose reads advance a progress bar, one bar length per pass
    over the rows (every pass of the search reads ``logits[rows]`` by
    blocks)."""

    ndim = 2

    def __init__(self, logits, bar, desc: str):
        self.logits, self.bar, self.desc = logits, bar, desc
        self.shape, self.dtype = logits.shape, logits.dtype
        self.passes = 1
        bar.set_description(f"{desc} pass 1")

    def __getitem__(self, rows):
        block = self.logits[rows]
        whole = isinstance(rows, slice) and rows.step in (None, 1)
        if whole and rows.start in (0, None) and self.bar.n:
            self.passes += 1  # a new pass starts at the first row
            self.bar.reset()
            self.bar.set_description(f"{self.desc} pass {self.passes}")
        self.bar.update(block.shape[0])
        return block


# --------------------------------------------------------------------------
# Commands.


def _report_pair(
    logits,
    y,
    temperature: float | None,
    n_bootstrap: int,
    groups=None,
    *,
    seed: int = 0,
    progress=None,
) -> dict:
    """Metrics before (T = 1) and after calibration, as plain dicts (with
    ``groups``, each group's metrics too, under ``"groups"``).

    Streamed: the rows are read block by block, bootstrap included, so a
    large memory-mapped file is never held in memory as probabilities.
    """
    temps = {"before": 1.0}
    if temperature is not None:
        temps["after"] = temperature
    if _scaler._is_dask_array(logits):
        return _report_pair_lazy(logits, y, temps)
    progress = progress or (lambda total, desc: _NoBar())

    def reports(z, labels, desc: str) -> dict[str, dict]:
        with progress(z.shape[0], desc) as bar:
            parts = _metrics._streamed_reports(
                z, labels, list(temps.values()), n_bootstrap, seed, bar
            )
        return {name: r.to_dict() for name, r in zip(temps, parts, strict=True)}

    out = reports(logits, y, "report")
    if groups is not None:
        for g in np.unique(groups):
            idx = np.flatnonzero(groups == g)
            part = reports(_Take(logits, idx), y[idx], f"group {g}")
            for name, r in part.items():
                out[name].setdefault("groups", {})[str(g)] = r
    return out


class _Take:
    """The rows ``idx`` of ``logits``, read block by block."""

    def __init__(self, logits, idx: NDArray):
        self.logits, self.idx = logits, idx
        self.shape = (idx.shape[0], logits.shape[1])

    def __getitem__(self, rows):
        return self.logits[self.idx[rows]]


def _load_groups(path: str, n_samples: int) -> NDArray:
    """A group label per row: any values (numbers or text) in .npy, .npz,
    .csv or .txt, one per line."""
    p = Path(path)
    if p.suffix.lower() in (".csv", ".txt") and p.is_file():
        try:
            arr = np.loadtxt(p, dtype=str, ndmin=1, delimiter=",")
        except (OSError, ValueError) as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise CLIError(f"cannot read groups file {path!r}: {reason}") from None
    else:
        arr = np.asarray(_load_array(path, what="groups"))
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise CLIError(f"groups file {path!r} must be 1-D; got shape {arr.shape}")
    if arr.shape[0] != n_samples:
        raise CLIError(
            f"the logits have {n_samples} rows but groups file {path!r} has "
            f"{arr.shape[0]} labels"
        )
    return arr


def _check_lazy_options(args: argparse.Namespace) -> None:
    """Options that need the rows in memory, refused before any work."""
    lazy = args.scheduler is not None or _is_shards(args.logits)
    if not lazy:
        return
    if getattr(args, "bootstrap", 0):
        raise CLIError(
            "--bootstrap resamples rows in memory; it is not available with "
            "shards or --scheduler"
        )
    if getattr(args, "plot", None):
        raise CLIError("--plot needs the rows in memory; not available with shards")
    if getattr(args, "groups", None):
        raise CLIError("--groups needs the rows in memory; not available with shards")


def _report_pair_lazy(logits, y, temps: dict) -> dict:
    """:func:`_report_pair` on a Dask array: one reduction over the chunks,
    both temperatures at once (the inputs were checked by the fit's pass;
    ``--bootstrap`` was refused by :func:`_check_lazy_options`)."""
    import dask

    backend = _dask_backend()
    n, k = logits.shape
    y = backend._along(y, logits.chunks[0], "labels", n)
    if not _scaler._is_dask_array(y):  # one labels file beside shards of logits
        import dask.array as da

        y = da.from_array(y, chunks=(logits.chunks[0],))
    pairs = list(zip(logits.to_delayed().ravel(), y.to_delayed().ravel(), strict=True))
    part = dask.delayed(_metrics._report_sums_from_logits, pure=True)
    tasks = {name: [part(z, yy, t) for z, yy in pairs] for name, t in temps.items()}
    computed = dask.compute(tasks)[0]
    return {
        name: _metrics.CalibrationReport(
            n, _metrics._report_from_sums(sum(parts), k, 15)
        ).to_dict()
        for name, parts in computed.items()
    }


def _fit(args: argparse.Namespace) -> int:
    files = [o for o in [args.out] if o != STDOUT]
    _check_outputs(files, [args.logits, args.labels], args.force)
    for o in files:
        _check_out_suffix(o, (".json",))
    temperatures = parse_temperatures(args.temperatures)
    _check_lazy_options(args)
    progress = _progress_for(args)
    with _scheduler(args.scheduler), _dask_errors("reading the shards"):
        lazy = args.scheduler is not None
        logits = _load_logits(args.logits, args.key, lazy=lazy)
        y = _load_labels(
            args.labels, args.labels_key, logits.shape, logits, args.logits
        )
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", BoundaryTemperatureWarning)
            if _scaler._is_dask_array(logits):
                rows = _dask_backend().DaskRows(logits, y)
                result = _scaler._fit_rows(rows, temperatures, args.solver, args.tol)
            else:
                with progress(logits.shape[0], "fit") as bar:
                    result = _scaler._fit_temperature(
                        _Counted(logits, bar, "fit"),
                        y,
                        temperatures,
                        None,
                        args.solver,
                        args.tol,
                    )
        metrics = _report_pair(
            logits,
            y,
            result.temperature,
            args.bootstrap,
            seed=args.seed,
            progress=progress,
        )
    for w in caught:
        print(f"skts fit: warning: {w.message}", file=sys.stderr)
    grid = np.unique(temperatures)
    calib = {
        "schema_version": SCHEMA_VERSION,
        "skts_version": __version__,
        "temperature": result.temperature,
        "solver": args.solver,
        "validation_loss": result.loss,
        "at_boundary": bool(result.at_boundary),
        "n_samples": int(logits.shape[0]),
        "n_classes": int(logits.shape[1]),
        "candidates": {
            "count": int(grid.size),
            "min": float(grid[0]),
            "max": float(grid[-1]),
            "spec": args.temperatures or "geom:0.01:100:1001",
            # The candidates used, sorted and unique (floats round-trip JSON).
            "values": grid.tolist(),
        },
        "metrics": metrics,
    }
    if args.out == STDOUT:
        json.dump(calib, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        with _atomic_outputs([args.out], args.force) as (tmp,):
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(calib, fh, indent=2)
                fh.write("\n")
    print(
        f"T = {result.temperature:.6g} (validation NLL {result.loss:.6g}, "
        f"{logits.shape[0]} samples, {logits.shape[1]} classes) -> "
        f"{'stdout' if args.out == STDOUT else args.out}",
        file=sys.stderr if args.out == STDOUT else sys.stdout,
    )
    return 0


def _apply(args: argparse.Namespace) -> int:
    outputs = [args.out, args.labels_out]
    if args.out is None and args.labels_out is None:
        raise CLIError("nothing to write: give --out and/or --labels-out")
    if outputs.count(STDOUT) > 1:
        raise CLIError("only one of --out and --labels-out can be '-' (stdout)")
    files = [o for o in outputs if o not in (None, STDOUT)]
    _check_outputs(files, [args.logits, args.calibration], args.force)
    for o in files:
        _check_out_suffix(o, (".npy", ".csv", ".txt"))
    calib = _load_calibration(args.calibration)
    with _scheduler(args.scheduler), _dask_errors("reading the shards"):
        logits = _load_logits(
            args.logits, args.key, lazy=args.scheduler is not None, warn=False
        )
        return _apply_to(args, calib, logits, outputs)


def _apply_to(args, calib, logits, outputs) -> int:
    if logits.shape[1] != calib["n_classes"]:
        raise CLIError(
            f"logits file {args.logits!r} has {logits.shape[1]} columns but the "
            f"calibration was fitted on {calib['n_classes']} classes"
        )
    t = calib["temperature"]
    n, k = logits.shape
    paths = [o for o in outputs if o not in (None, STDOUT)]
    step = None
    read = logits.__getitem__
    if _scaler._is_dask_array(logits):
        # Rows come from the shards in pieces of about 4M values, each
        # checked as the in-memory reader checks a whole file.
        step = max(1, (1 << 22) // k)

        def read(rows):
            try:
                return _scaler._check_logits(
                    np.asarray(logits[rows]), name=f"logits {args.logits!r}"
                )
            except ValueError as exc:
                raise CLIError(str(exc).rstrip(".")) from None

    # The input's precision, at least float32, unless --dtype says otherwise.
    dtype = np.dtype(
        args.dtype or (np.float64 if logits.dtype == np.float64 else np.float32)
    )
    progress = _progress_for(args)
    with _atomic_outputs(paths, args.force) as temps:
        tmp_of = dict(zip(paths, temps, strict=True))
        tmp_of[STDOUT] = STDOUT
        if args.out is not None:
            fn = softmax if not args.log else log_softmax
            with progress(n, "probabilities") as bar:
                _write_rows(
                    tmp_of[args.out],
                    args.out,
                    n,
                    k,
                    dtype,
                    lambda rows: fn(read(rows), t),
                    step,
                    bar,
                )
        if args.labels_out is not None:
            with progress(n, "labels") as bar:
                _write_rows(
                    tmp_of[args.labels_out],
                    args.labels_out,
                    n,
                    None,
                    np.int64,
                    lambda rows: np.argmax(read(rows), axis=1),
                    step,
                    bar,
                )
    where = paths + (["stdout"] if STDOUT in outputs else [])
    print(
        f"applied T = {t:.6g} to {n} rows -> {', '.join(where)}",
        file=sys.stderr if STDOUT in outputs else sys.stdout,
    )
    return 0


def _format_table(metrics: dict) -> str:
    """Metrics before (and after) as a text table, with intervals when present."""
    parts = [("before", metrics["before"])]
    if "after" in metrics:
        parts.append(("after", metrics["after"]))
    level = metrics["before"].get("confidence_level", 0.95)
    with_ci = bool(metrics["before"]["intervals"])
    head = f"{'metric':<15}"
    for label, _ in parts:
        head += f"{label:>10}"
        if with_ci:
            head += f"  {f'{level:.0%} interval':<18}"
    lines = [head.rstrip()]
    for name in metrics["before"]["values"]:
        line = f"{name:<15}"
        for _, part in parts:
            line += f"{part['values'][name]:>10.4f}"
            if with_ci:
                lo, hi = part["intervals"][name]
                line += f"  [{lo:.4f}, {hi:.4f}]"
        lines.append(line)
    return "\n".join(lines)


def _format_groups(metrics: dict) -> str:
    """Each group's metrics (after calibration, when there is one) beside
    those of all rows."""
    when = "after" if "after" in metrics else "before"
    part = metrics[when]
    heads = [f"all (n={part['n_samples']})"] + [
        f"{g} (n={r['n_samples']})" for g, r in part["groups"].items()
    ]
    width = max(12, *(len(h) + 2 for h in heads))
    lines = [
        f"by group ({when})",
        f"{'metric':<15}" + "".join(f"{h:>{width}}" for h in heads),
    ]
    for name in part["values"]:
        values = [part["values"][name]] + [
            r["values"][name] for r in part["groups"].values()
        ]
        lines.append(f"{name:<15}" + "".join(f"{v:>{width}.4f}" for v in values))
    return "\n".join(lines)


def _report(args: argparse.Namespace) -> int:
    inputs = (
        [args.logits, args.labels]
        + ([args.calibration] if args.calibration else [])
        + ([args.groups] if args.groups else [])
    )
    _check_outputs([args.plot], inputs, args.force)
    _check_out_suffix(args.plot, (".png", ".pdf", ".svg"))
    calib = _load_calibration(args.calibration) if args.calibration else None
    _check_lazy_options(args)
    with _scheduler(args.scheduler), _dask_errors("reading the shards"):
        logits = _load_logits(args.logits, args.key, lazy=args.scheduler is not None)
        y = _load_labels(
            args.labels, args.labels_key, logits.shape, logits, args.logits
        )
        if calib is not None and logits.shape[1] != calib["n_classes"]:
            raise CLIError(
                f"logits file {args.logits!r} has {logits.shape[1]} columns but the "
                f"calibration was fitted on {calib['n_classes']} classes"
            )
        if _scaler._is_dask_array(logits):
            _dask_backend().DaskRows(logits, y)  # checks the rows: one pass
        t = None if calib is None else calib["temperature"]
        groups = None
        if args.groups:
            groups = _load_groups(args.groups, logits.shape[0])
        metrics = _report_pair(
            logits,
            y,
            t,
            args.bootstrap,
            groups,
            seed=args.seed,
            progress=_progress_for(args),
        )
    if args.plot:
        _plot_reliability(args.plot, logits, y, t, args.force, groups)
    if args.json:
        out = {
            "schema_version": SCHEMA_VERSION,
            "skts_version": __version__,
            "temperature": t,
            "n_samples": int(logits.shape[0]),
            "n_classes": int(logits.shape[1]),
            "metrics": metrics,
        }
        print(json.dumps(out, indent=2))
    else:
        if t is not None:
            print(f"temperature: {t:.6g}")
        print(_format_table(metrics))
        if groups is not None:
            print(_format_groups(metrics))
        if args.plot:
            print(f"reliability diagram -> {args.plot}")
    return 0


def _plot_reliability(
    path: str, logits, y, temperature, force: bool, groups=None
) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise CLIError(
            "--plot needs matplotlib: pip install matplotlib (skts's 'plot' extra)"
        ) from None
    from skts._display import ReliabilityDisplay

    labels = np.arange(logits.shape[1])
    if groups is not None:
        # One diagram (calibrated when there is a temperature), a line per group.
        t = 1.0 if temperature is None else temperature
        disp = ReliabilityDisplay.from_predictions(
            y,
            softmax(logits, t),
            labels=labels,
            name="uncalibrated" if temperature is None else f"T = {t:.4g}",
            groups=groups,
        )
    else:
        disp = ReliabilityDisplay.from_predictions(
            y, softmax(logits, 1.0), labels=labels, name="uncalibrated"
        )
    if temperature is not None and groups is None:
        ReliabilityDisplay.from_predictions(
            y,
            softmax(logits, temperature),
            labels=labels,
            name=f"T = {temperature:.4g}",
            kind="line",
            ax=disp.ax_,
            hist_ax=disp.hist_ax_,
        )
    with _atomic_outputs([path], force) as (tmp,):
        disp.figure_.savefig(tmp, format=Path(path).suffix.lstrip(".").lower())
    plt.close(disp.figure_)


def run_demo(out: str = "skts-demo", *, n_bootstrap: int = 200) -> int:
    """The main job: train, calibrate and judge a real model, write the figures.

    Digits (1,797 8x8 images, shipped with scikit-learn) are split 50/25/25
    into train, validation and test. A logistic regression with almost no
    regularisation (``C=1000``) on the raw pixels is accurate but overconfident;
    :class:`~skts.TemperatureScaledClassifier` around the frozen model fits T on
    the validation part, and the test part judges both.
    """
    import time

    from sklearn.datasets import load_digits
    from sklearn.frozen import FrozenEstimator
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split

    from skts._classifier import TemperatureScaledClassifier

    start = time.perf_counter()

    def stage(i: int, text: str) -> None:
        print(f"[{i}/5 {time.perf_counter() - start:5.1f}s] {text}", flush=True)

    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise CLIError(f"--out {out!r} exists and is not a folder")
    stage(1, "loading digits (1797 images of 8x8 pixels, 10 classes) ...")
    X, y = load_digits(return_X_y=True)
    X_train, X_rest, y_train, y_rest = train_test_split(
        X, y, train_size=0.5, random_state=0, stratify=y
    )
    X_val, X_test, y_val, y_test = train_test_split(
        X_rest, y_rest, test_size=0.5, random_state=0, stratify=y_rest
    )
    print(f"        train {len(y_train)}, validation {len(y_val)}, test {len(y_test)}")
    stage(2, "training LogisticRegression(C=1000) on the training part ...")
    model = LogisticRegression(C=1000, max_iter=10000).fit(X_train, y_train)
    stage(3, "fitting the temperature on the validation part ...")
    calibrated = TemperatureScaledClassifier(FrozenEstimator(model))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", BoundaryTemperatureWarning)
        calibrated.fit(X_val, y_val)
    grid = np.unique(_scaler._check_temperatures(None))
    position = int(np.searchsorted(grid, calibrated.temperature_)) + 1
    where = "at the boundary!" if caught else "inside the range"
    print(
        f"        T = {calibrated.temperature_:.4f}: candidate {position} of "
        f"{grid.size} in [{grid[0]:g}, {grid[-1]:g}], {where}"
    )
    stage(4, f"judging on the test part ({n_bootstrap} bootstrap resamples) ...")
    p_before = model.predict_proba(X_test)
    p_after = calibrated.predict_proba(X_test)
    kw = {"n_bootstrap": n_bootstrap, "random_state": 0, "labels": model.classes_}
    before = _metrics.calibration_report(y_test, p_before, **kw).to_dict()
    after = _metrics.calibration_report(y_test, p_after, **kw).to_dict()
    print()
    print(_format_table({"before": before, "after": after}))
    print()
    print(
        "Accuracy is unchanged by construction; for the rest lower is better. "
        "Intervals: percentile bootstrap over test rows."
    )
    stage(5, f"writing figures into {folder}/ ...")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("        no figures: matplotlib is missing (skts's 'plot' extra)")
        return 0
    from skts._display import ReliabilityDisplay, TemperatureCurveDisplay

    folder.mkdir(parents=True, exist_ok=True)
    disp = ReliabilityDisplay.from_predictions(
        y_test, p_before, labels=model.classes_, name="LogisticRegression"
    )
    ReliabilityDisplay.from_predictions(
        y_test,
        p_after,
        labels=model.classes_,
        name=f"T = {calibrated.temperature_:.3g}",
        kind="line",
        ax=disp.ax_,
        hist_ax=disp.hist_ax_,
    )
    disp.figure_.suptitle("Digits, test part: before and after")
    curve = TemperatureCurveDisplay.from_estimator(calibrated, X_val, y_val)
    curve.ax_.set_title("Validation log-loss over the candidates")
    paths = [folder / "reliability.png", folder / "temperature_curve.png"]
    with _atomic_outputs([str(p) for p in paths], force=True) as temps:
        disp.figure_.savefig(temps[0], format="png", dpi=100)
        curve.figure_.savefig(temps[1], format="png", dpi=100)
    plt.close("all")
    for p in paths:
        print(f"        wrote {p}")
    print(f"done in {time.perf_counter() - start:.1f}s")
    return 0


def _demo(args: argparse.Namespace) -> int:
    return run_demo(args.out, n_bootstrap=args.bootstrap)


# --------------------------------------------------------------------------


class _Formatter(
    argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter
):
    """Help with each option's default (where it has one), and examples kept
    as written."""

    def _get_help_string(self, action) -> str:
        text = action.help or ""
        quiet = any(action.default is v for v in (None, False, argparse.SUPPRESS))
        if action.required or quiet or "%(default)" in text:
            return text
        return text + " (default: %(default)s)"


_EXAMPLES = {
    "fit": "examples:\n  skts fit --logits val_logits.npy --labels val_labels.npy "
    "--out calib.json\n  skts fit --logits val.safetensors --key logits "
    "--labels val_labels.npy \\\n      --temperatures geom:0.05:20:401 --out "
    "calib.json",
    "apply": "example:\n  skts apply --logits test_logits.npy --calibration "
    "calib.json --out probs.npy --labels-out labels.csv",
    "report": "example:\n  skts report --logits test_logits.npy --labels "
    "test_labels.npy --calibration calib.json --bootstrap 200 --plot rel.png",
    "demo": "example:\n  skts demo --out skts-demo",
}


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="skts",
        formatter_class=_Formatter,
        epilog="examples:\n"
        "  skts fit --logits val_logits.npy --labels val_labels.npy --out calib.json\n"
        "  skts apply --logits test_logits.npy --calibration calib.json --out p.npy\n"
        "  skts report --logits test_logits.npy --labels test_labels.npy "
        "--calibration calib.json\n"
        "  skts demo\n"
        "'skts COMMAND --help' tells more.",
        description="Temperature-scaling calibration for logit files.",
    )
    parser.add_argument("--version", action="version", version=f"skts {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def inputs(p, labels: bool):
        p.add_argument(
            "--logits",
            required=True,
            help=".npy, .npz, .safetensors, .pt, .csv or .txt (binary: one "
            "column, the logit of class 1); or a folder or glob of .npy shards "
            "(read lazily with Dask, in sorted order)",
        )
        p.add_argument(
            "--key",
            help="the array of a logits file holding several (.npz, .safetensors, .pt)",
        )
        if labels:
            p.add_argument(
                "--labels",
                required=True,
                help="integer class indices 0..K-1 (a file, or shards paired "
                "with the logits' shards by sorted name)",
            )
            p.add_argument(
                "--labels-key", help="the array of a labels file holding several"
            )
        p.add_argument(
            "--scheduler",
            metavar="ADDRESS",
            help="run on this running dask.distributed scheduler (.npy inputs)",
        )
        p.add_argument("--force", action="store_true", help="overwrite outputs")
        p.add_argument(
            "--quiet",
            action="store_true",
            help="no progress bars (shown on stderr only when it is a terminal)",
        )

    def command(name: str, summary: str, description: str):
        """A subcommand whose --help shows its defaults and an example."""
        return sub.add_parser(
            name,
            help=summary,
            description=description,
            epilog=_EXAMPLES[name],
            formatter_class=_Formatter,
        )

    p = command(
        "demo",
        "run the whole story on a real model",
        "Train a real model, calibrate it, print a before/after\n"
        "table and write the figures.",
    )
    p.add_argument("--out", default="skts-demo", help="folder for the figures")
    p.add_argument("--bootstrap", type=int, default=200, help="bootstrap resamples")
    p.set_defaults(func=_demo)

    p = command(
        "fit",
        "choose T on validation logits",
        "Choose the temperature T on held-out (validation) logits\n"
        "and write it, with the metrics before and after, as JSON.",
    )
    inputs(p, labels=True)
    p.add_argument(
        "--temperatures",
        help="candidates, '0.5,1,2' or 'geom:LOW:HIGH:COUNT' (default: "
        "geom:0.01:100:1001, the library's 1001-point grid)",
    )
    p.add_argument(
        "--solver",
        choices=["grid", "continuous"],
        default="grid",
        help="the exact rule over the candidates, or a continuous minimiser "
        "over their range",
    )
    p.add_argument(
        "--tol", type=_tolerance, default=1e-10, help="continuous tolerance, in (0, 1)"
    )
    p.add_argument("--bootstrap", type=int, default=0, help="bootstrap resamples")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    p.add_argument(
        "--out", required=True, help="calibration JSON to write ('-': stdout)"
    )
    p.set_defaults(func=_fit)

    p = command(
        "apply",
        "write calibrated probabilities",
        "Write softmax(logits / T) (or its log) and/or the\n"
        "predicted classes, block by block.",
    )
    inputs(p, labels=False)
    p.add_argument("--calibration", required=True, help="JSON from 'skts fit'")
    p.add_argument("--out", help="probabilities, .npy or .csv ('-': CSV on stdout)")
    p.add_argument("--log", action="store_true", help="write log-probabilities")
    p.add_argument(
        "--dtype",
        choices=["float32", "float64"],
        help="of the written probabilities (default: the input's, at least float32)",
    )
    p.add_argument(
        "--labels-out", help="predicted class indices, .npy or .csv ('-': stdout)"
    )
    p.set_defaults(func=_apply)

    p = command(
        "report",
        "calibration metrics, before (and after)",
        "Calibration metrics of the logits as they are (T = 1)\n"
        "and, with --calibration, after dividing them by T.",
    )
    inputs(p, labels=True)
    p.add_argument("--calibration", help="JSON from 'skts fit'")
    p.add_argument("--plot", help="write a reliability diagram (.png/.pdf/.svg)")
    p.add_argument(
        "--groups",
        help="a group label per row (.npy, .npz, .csv or .txt): each group's "
        "metrics beside the overall ones",
    )
    p.add_argument("--json", action="store_true", help="print JSON, not a table")
    p.add_argument(
        "--bootstrap",
        type=int,
        default=0,
        help="bootstrap resamples (streamed: any number, bounded memory)",
    )
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    p.set_defaults(func=_report)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code.

    Parameters
    ----------
    argv : sequence of str, default=None
        Arguments without the program name; default ``sys.argv[1:]``.

    Returns
    -------
    int
        0 on success, 2 on bad input (one line on stderr).

    Examples
    --------
    >>> from skts.cli import main
    >>> main(["fit", "--logits", "missing.npy", "--labels", "y.npy", "--out", "c.json"])
    2
    """
    parser = _build_parser()
    command = "skts"
    previous = _catch_sigterm()
    try:
        args = parser.parse_args(argv)
        command = f"skts {args.command}"
        if getattr(args, "bootstrap", 0) < 0:
            raise CLIError("--bootstrap must be >= 0")
        return int(args.func(args))
    except CLIError as exc:
        print(f"{command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ValueError as exc:  # validation errors from skts itself
        print(f"{command}: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # The reader of stdout went away (``skts apply --out - | head``): the
        # usual quiet exit of a Unix filter. Python would complain when it
        # flushes stdout at exit; point stdout at /dev/null first.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except OSError as exc:
        print(f"{command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"{command}: interrupted", file=sys.stderr)
        return 130
    except _Terminated:
        print(f"{command}: terminated", file=sys.stderr)
        return 128 + signal.SIGTERM
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


class _Terminated(BaseException):
    """SIGTERM, raised as an exception so that outputs are cleaned up."""


def _raise_terminated(signum, frame):
    raise _Terminated


def _catch_sigterm():
    """Turn SIGTERM into an exception (like SIGINT's KeyboardInterrupt) so the
    ``finally`` blocks remove temporary files; returns the previous handler."""
    try:
        return signal.signal(signal.SIGTERM, _raise_terminated)
    except ValueError:  # not the main thread: leave signals alone
        return None
