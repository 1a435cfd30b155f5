"""The compiled kernel (``skts._kernel``), imported once, here.

GNU OpenMP reads its environment once, when it loads (here, with the
kernel): unless the user says otherwise (``OMP_WAIT_POLICY`` or
``GOMP_SPINCOUNT`` set), idle workers spin for a few microseconds between
passes, not for the default 300,000 spins (about a millisecond), then sleep.
On a busy machine a spinning worker takes the time slices that the working
ones need. ``GOMP_SPINCOUNT`` is set for the load only and removed at once:
``os.environ`` is as the user left it (the developer page says so too).
The passes' threads are skts's own (``_Pass`` in ``skts/_kernel.pyx``);
only ``exp32_rate``, the benchmarks' measure, still runs an OpenMP team.
"""

from __future__ import annotations

import os

_SPIN = {"GOMP_SPINCOUNT": "3000"}
_SET = [
    key
    for key in _SPIN
    if "OMP_WAIT_POLICY" not in os.environ and key not in os.environ
]
os.environ.update({key: _SPIN[key] for key in _SET})
try:
    from skts import _kernel as kernel
except ImportError as exc:  # pragma: no cover - a source tree without a build
    raise ImportError(
        "skts's compiled kernel (skts._kernel) is not built here. Install skts "
        "with a C compiler present: `pip install .` (from outside the source "
        "folder), or, to work in it, `pip install meson-python meson ninja "
        "cython` then `pip install --no-build-isolation -e .`."
    ) from exc
finally:
    for _key in _SET:
        os.environ.pop(_key, None)

__all__ = ["kernel"]
