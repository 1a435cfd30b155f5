"""Where the real CIFAR logits are: ``$SKTS_DATA`` or ``../shared/data``
beside the repository (docs/data.md); tests that need them skip otherwise.
And ``strict_rows``: the array-API backend's rows as the tests build them;
``spy_windows``: what each window read of a fit was."""

import os
from pathlib import Path

DATA = Path(
    os.environ.get("SKTS_DATA")
    or Path(__file__).resolve().parents[2] / "shared" / "data"
)
MISSING = (
    "the real CIFAR logits are neither in ../shared/data nor in $SKTS_DATA "
    "(docs/data.md says where they come from)"
)


def strict_rows(xps, z, y, w=None):
    """``XpRows`` over ``z`` in float64 on array_api_strict's second device
    (``xps`` is the module, imported by the test that skips without it)."""
    import numpy as np

    from skts._array_api import XpRows

    device = xps.Device("device1")
    logits = xps.asarray(np.asarray(z, dtype=np.float64), device=device)
    return XpRows(logits, y, w, xps, device)


def spy_windows(monkeypatch):
    """A list that records each window read's number of candidates and
    whether it read their slopes, ``(n, slopes)``, while the test runs."""
    from skts._numerics import Rows

    windows = []
    window = Rows.window

    def spy(rows, temperatures, *a, **kw):
        windows.append((len(temperatures), kw.get("slopes", False)))
        return window(rows, temperatures, *a, **kw)

    monkeypatch.setattr(Rows, "window", spy)
    return windows
