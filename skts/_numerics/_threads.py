"""Threads: ``n_jobs`` -> the threads of a pass.

The CPUs this process may use are counted as scikit-learn's
``_openmp_effective_n_threads`` counts them: ``joblib.cpu_count()`` (the
affinity mask and the cgroup CPU quota of a container), capped by the CPU
quota of the process's own cgroup and its ancestors (:func:`cgroup_cpus`:
joblib reads only the quota at the root of the cgroup mount, which a
process in a nested cgroup, a systemd slice or a container without a cgroup
namespace, does not see), and by OpenMP's
``omp_get_max_threads()``, which ``OMP_NUM_THREADS`` sets and
``threadpoolctl.threadpool_limits`` lowers (the kernel's OpenMP runtime is
the one threadpoolctl sees); with ``OMP_NUM_THREADS`` set, that value alone.
``n_jobs=None`` then uses them where threads pay, ``-1`` all of them, ``-k``
all but ``k - 1``, ``k`` exactly ``k``. Threads never change a bit: every
block's sums are added in block order.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from skts._numerics._blocks import blocks
from skts._numerics._compiled import kernel

__all__ = ["cpu_count", "kernel_threads", "map_blocks", "python_threads"]

_CPUS: dict[str, int] = {}
_OPENMP = kernel.openmp()


def _text(path: str) -> str:
    with open(path, encoding="ascii", errors="replace") as f:
        return f.read()


def cgroup_folders(
    proc: str = "/proc/self", read: Callable[[str], str] = _text
) -> list[tuple[str, str, str]]:
    """This process's cgroups that carry a CPU quota: ``(mount point,
    folder, version)`` for the v1 ``cpu`` controller (``"v1"``) and the v2
    hierarchy (``"v2"``), from ``<proc>/cgroup`` and ``<proc>/mountinfo``
    (the folder is the cgroup's path below the mount's root, under the mount
    point); empty without cgroups. ``read`` reads a file (tests pass a fake
    tree)."""
    try:
        own = {}
        for line in read(f"{proc}/cgroup").splitlines():
            hierarchy, controllers, path = line.split(":", 2)
            if hierarchy == "0":
                own["v2"] = path
            elif "cpu" in controllers.split(","):
                own["v1"] = path
        found = []
        for line in read(f"{proc}/mountinfo").splitlines():
            left, _, right = line.partition(" - ")
            fields, (fstype, _source, options) = left.split(), right.split()[:3]
            root, point = fields[3].rstrip("/"), fields[4].rstrip("/")
            version = {"cgroup2": "v2", "cgroup": "v1"}.get(fstype)
            if version not in own or (
                version == "v1" and "cpu" not in options.split(",")
            ):
                continue
            path = own[version]
            if root and not (path == root or path.startswith(root + "/")):
                continue  # (a mount of another part of the hierarchy)
            found.append((point, point + path[len(root) :].rstrip("/"), version))
        return found
    except (OSError, ValueError):
        return []


def cgroup_cpus(
    proc: str = "/proc/self", read: Callable[[str], str] = _text
) -> int | None:
    """CPUs allowed by the CFS quota of this process's cgroup: the smallest
    over the cgroup and its ancestors up to the mount (v1 ``cpu.cfs_quota_us``
    over ``cpu.cfs_period_us``, v2 ``cpu.max``), rounded up; ``None``
    without a quota or without cgroups."""
    best = None
    for point, folder, version in cgroup_folders(proc, read):
        while True:
            try:
                if version == "v2":
                    quota, period = read(f"{folder}/cpu.max").split()[:2]
                else:
                    quota = read(f"{folder}/cpu.cfs_quota_us").strip()
                    period = read(f"{folder}/cpu.cfs_period_us").strip()
                if quota != "max" and int(quota) > 0 and int(period) > 0:
                    cpus = max(1, math.ceil(int(quota) / int(period)))
                    best = cpus if best is None else min(best, cpus)
            except (OSError, ValueError):
                pass
            if len(folder) <= len(point):
                break
            folder = folder.rsplit("/", 1)[0]
    return best


def _usable_cpus() -> int:
    """CPUs the process may use (affinity, cgroup quotas), looked up once."""
    if "usable" not in _CPUS:
        from joblib import cpu_count as joblib_cpu_count

        usable = max(1, int(joblib_cpu_count(only_physical_cores=False)))
        quota = cgroup_cpus()
        _CPUS["usable"] = usable if quota is None else min(usable, quota)
    return _CPUS["usable"]


def _omp_num_threads() -> int | None:
    """``OMP_NUM_THREADS`` as OpenMP reads it (its first level), if valid."""
    value = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    return int(value) if value.isdigit() and int(value) >= 1 else None


def cpu_count() -> int:
    """The threads a pass may use at most (see the module header)."""
    if not _OPENMP:
        # (a build without OpenMP: the same helper threads, and
        # OMP_NUM_THREADS still caps them; threadpoolctl sees no runtime)
        limit = _omp_num_threads()
        return limit if limit is not None else _usable_cpus()
    openmp = max(1, int(kernel.max_threads()))
    if os.environ.get("OMP_NUM_THREADS"):
        return openmp
    return min(_usable_cpus(), openmp)


def _resolve(n_jobs: int | None, cores: int) -> int:
    if n_jobs is None:
        return cores
    if n_jobs < 0:
        return max(1, cores + 1 + n_jobs)
    return max(1, int(n_jobs))


def python_threads(n_jobs: int | None, n_elements: int, n_classes: int) -> int:
    """Python threads over blocks (arrays the kernel reads a block at a
    time: half precision widened, strided views).

    ``None`` uses every CPU where it pays (measured: wide rows, at least 64
    classes, and at least 2**22 logits; with few classes the per-block work is
    too short for threads to win).
    """
    if n_elements < 1 << 18 or n_jobs == 1:
        return 1
    if n_jobs is None and not (n_classes >= 64 and n_elements >= 1 << 22):
        return 1
    return _resolve(n_jobs, cpu_count())


def map_blocks(
    fn: Callable[[slice], object],
    n_samples: int,
    n_classes: int,
    n_jobs: int | None,
    factor: int = 1,
) -> list:
    """``fn`` over the row blocks, results in block order.

    The kernel releases the GIL, so threads over blocks use several cores
    (inputs it reads block by block); callers reduce the results in block
    order, so the answer does not depend on the number of threads.
    """
    slices = list(blocks(n_samples, n_classes, factor))
    threads = min(python_threads(n_jobs, n_samples * n_classes, n_classes), len(slices))
    if threads <= 1:
        return [fn(rows) for rows in slices]
    # Contiguous groups of blocks per task keep the per-task overhead small.
    groups = [slices[i::threads] for i in range(threads)]
    with ThreadPoolExecutor(threads) as pool:
        parts = list(pool.map(lambda g: [fn(rows) for rows in g], groups))
    out: list = [None] * len(slices)
    for i, part in enumerate(parts):
        out[i::threads] = part
    return out


_LOAD = {"at": -math.inf, "others": 0}


def _read(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 4096)
    finally:
        os.close(fd)


def others_running() -> int:
    """Threads of other processes running or waiting for a core now: the
    kernel's count of runnable threads (``/proc/loadavg``) less this
    process's own (``/proc/self/task``: the calling thread, and any other
    library's workers still spinning after their work, such as BLAS's or
    PyTorch's), looked up at most every 0.1 s (the passes of one fit agree);
    0 without ``/proc``."""
    now = time.monotonic()
    if now - _LOAD["at"] >= 0.1:
        try:
            running = int(_read("/proc/loadavg").split()[3].split(b"/")[0])
            own = 0
            for tid in os.listdir("/proc/self/task"):
                try:
                    stat = _read(f"/proc/self/task/{tid}/stat")
                except OSError:  # (a thread that has just ended)
                    continue
                own += stat[stat.rindex(b")") + 2 :][:1] == b"R"
            others = max(0, running - max(own, 1))
        except (OSError, ValueError, IndexError):  # (no /proc: Windows, macOS)
            others = 0
        _LOAD.update(at=now, others=others)
    return int(_LOAD["others"])


def kernel_threads(n_jobs: int | None, n_elements: int) -> int:
    """Threads of a compiled pass.

    ``None`` uses every CPU from 2**18 logits on; below, a pass takes about a
    millisecond, and threads cost more than they save. A pass never waits for
    a helper thread that has not started (``_Pass`` in ``skts/_kernel.pyx``:
    the blocks it has not taken are done by the others), so a thread the
    scheduler sets aside delays a pass by at most the block it has begun.
    A pass of under 2**20 logits (a fraction of a millisecond on two cores)
    uses only the CPUs that other processes leave idle
    (:func:`others_running`): waking a helper that will find nothing left
    costs more than it can save there.
    """
    if n_jobs == 1 or (n_jobs is None and n_elements < 1 << 18):
        return 1  # (without asking: a small pass runs often)
    cores = cpu_count()
    if n_jobs is None:
        if n_elements < 1 << 20:
            return max(1, min(cores, cores - others_running()))
        return cores
    return _resolve(n_jobs, cores)
