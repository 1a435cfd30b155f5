"""Writing outputs: refuse to clobber, never half-write."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import socket
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np

from skts._numerics import rows_per_block
from skts.cli import _signals
from skts.cli._common import STDOUT, CLIError
from skts.cli._progress import _NoBar


def _check_outputs(outputs: Sequence[str | None], inputs: Sequence[str], force: bool):
    given = [o for o in outputs if o is not None]
    if len(set(map(os.path.realpath, given))) != len(given):
        raise CLIError("the output files must be distinct")
    resolved_inputs = {os.path.realpath(i) for i in inputs}
    for out in given:
        if os.path.realpath(out) in resolved_inputs:
            raise CLIError(f"refusing to overwrite the input file {out!r}")
        if os.path.isdir(out):
            raise CLIError(f"output {out!r} is a directory; name a file")
        if os.path.islink(out) and not os.path.exists(out):
            target = os.readlink(out)
            raise CLIError(
                f"output {out!r} is a symbolic link to {target!r}, which does not "
                "exist; remove the link or name another file"
            )
        if os.path.lexists(out) and not force:
            raise CLIError(f"output file {out!r} exists; pass --force to overwrite it")
        folder = os.path.dirname(os.path.abspath(out))
        if not os.path.isdir(folder):
            raise CLIError(f"cannot write {out!r}: folder {folder!r} does not exist")


# Temporary outputs are hidden files named after the writing process, so that
# a later run can tell (and remove) those of a process that was killed.
_TEMP_PATTERN = re.compile(r"\.skts-([0-9a-f]{12})-(\d+)-")


def _host_token() -> str:
    """Who writes a temporary: this machine, boot and PID namespace (a pid
    means something only there). A folder shared between machines or
    containers (NFS, a volume, a job array) holds other hosts' temporaries,
    whose pids say nothing here."""
    parts = [socket.gethostname()]
    for path in ("/proc/sys/kernel/random/boot_id", "/etc/machine-id"):
        with contextlib.suppress(OSError):
            parts.append(Path(path).read_text().strip())
    with contextlib.suppress(OSError):
        parts.append(str(os.stat("/proc/self/ns/pid").st_ino))
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:12]


def _temp_prefix() -> str:
    return f".skts-{_host_token()}-{os.getpid()}-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, not ours
        return True
    return True


def _remove_stale_temporaries(folder: str) -> None:
    """Remove ``.skts-<host>-<pid>-*`` files of this host's processes that no
    longer run (left by a SIGKILL, which no program can clean up after).
    Other hosts' temporaries, and ones without a host, are left alone."""
    host = _host_token()
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            found = _TEMP_PATTERN.match(entry.name)
            if not found or found.group(1) != host:
                continue
            pid = int(found.group(2))
            if pid != os.getpid() and not _alive(pid):
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
    on any failure or signal, no output and no temporary file is left.

    The temporaries are created and removed with SIGINT and SIGTERM held
    back, and publishing them is the command's commit: from then on the
    signals are held until the command ends (``skts.cli._signals``), which
    takes the outputs back if one arrived."""
    temps: list[str] = []
    published: list[str] = []
    try:
        for path in paths:
            folder = os.path.dirname(os.path.abspath(path))
            _remove_stale_temporaries(folder)
            with _signals.deferred():
                fd, tmp = tempfile.mkstemp(
                    prefix=_temp_prefix(), suffix=Path(path).suffix, dir=folder
                )
                os.close(fd)
                temps.append(tmp)
        yield temps
        _signals.hold()
        for tmp, path in zip(temps, paths, strict=True):
            _publish(tmp, path, force)
            published.append(path)
            _signals.published(path)
        temps = []
    finally:
        with _signals.deferred():
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
    layout=None,
):
    """Write ``rows_of(slice)`` block by block (``step`` rows) as .npy or .csv.

    ``layout`` (per-pixel or per-token logits, one row per position): the
    .npy file has the input's shape, the classes on its class axis (labels:
    the labels' shape), written a few whole samples at a time.
    """
    suffix = Path(out).suffix.lower()
    if step is None:
        step = rows_per_block(n_cols or 1)
    if layout is not None:
        if out == STDOUT or suffix != ".npy":
            raise CLIError(
                f"cannot write {out!r}: outputs of {len(layout.shape)}-D logits "
                "are written as .npy (in the input's shape)"
            )
        per = n_rows // layout.shape[0]
        step = per * max(1, step // per)
        rows_of = _in_layout(rows_of, layout, per, n_cols is not None)
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
        if layout is not None:
            shape = layout.label_shape if n_cols is None else layout.shape
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


def _in_layout(rows_of: Callable, layout, per: int, classes: bool) -> Callable:
    """``rows_of`` for whole samples, as the bytes of the input's layout."""
    if not classes:
        return rows_of  # (one label per position, in C order already)

    def of(rows: slice):
        block = rows_of(rows)
        count = (rows.stop - rows.start) // per
        moved = block.reshape(count, *layout.label_shape[1:], block.shape[1])
        return np.moveaxis(moved, -1, layout.axis)

    return of


def _check_out_suffix(path: str | None, allowed: tuple[str, ...]) -> None:
    if path is not None and Path(path).suffix.lower() not in allowed:
        raise CLIError(
            f"cannot write {path!r}: unknown extension {Path(path).suffix!r} "
            f"(use {' or '.join(allowed)})"
        )
