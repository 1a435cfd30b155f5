"""Progress on stderr (a terminal only; --quiet silences it)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable


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
