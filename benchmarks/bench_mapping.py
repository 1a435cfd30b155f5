"""What a task's fresh mapping of a cached shard costs.

A Dask task of ``load_npy_shards`` maps only its piece's bytes and unmaps
them when it ends, so every pass maps each piece again. This measures that
cost: a file of ``--gib`` GiB of float32, in the page cache, mapped in
fresh mappings of the pieces' size (``skts._dask._MAPPED_PIECE_BYTES``,
256 MiB), the last one clipped to the file, one value read per 4 KiB page
(the page-table work alone), against reading every value (``np.sum``) of
the same mappings, several interleaved rounds, min and median.

    python benchmarks/bench_mapping.py --file /tmp/skts-mapping.bin
"""

import argparse
import mmap
import os
import statistics
import time

import numpy as np

from skts._dask import _MAPPED_PIECE_BYTES as PIECE


def through_mappings(path: str, size: int, every_value: bool) -> float:
    t = time.perf_counter()
    with open(path, "rb") as fh:
        for offset in range(0, size, PIECE):
            length = min(PIECE, size - offset)
            m = mmap.mmap(fh.fileno(), length, prot=mmap.PROT_READ, offset=offset)
            values = np.frombuffer(m, np.float32)
            (values if every_value else values[:: 4096 // 4]).sum(dtype=np.float32)
            del values
            m.close()
    return time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", required=True)
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    size = int(args.gib * (1 << 30)) // 4 * 4
    if not os.path.exists(args.file) or os.path.getsize(args.file) != size:
        np.ones(size // 4, np.float32).tofile(args.file)
    with open(args.file, "rb") as fh:  # into the page cache
        while fh.read(16 << 20):
            pass
    pages, values = [], []
    for _ in range(args.rounds):
        pages.append(through_mappings(args.file, size, every_value=False))
        values.append(through_mappings(args.file, size, every_value=True))
    print(f"load average: {open('/proc/loadavg').read().split()[:3]}")
    for name, secs in (("one value per page", pages), ("every value", values)):
        low, mid = 1e3 * min(secs), 1e3 * statistics.median(secs)
        print(
            f"{args.gib} GiB through fresh {PIECE >> 20} MiB mappings, {name}: "
            f"min {low:.1f} ms, median {mid:.1f} ms"
        )
    print(f"pages / values (min): {min(pages) / min(values):.1%}")


if __name__ == "__main__":
    main()
