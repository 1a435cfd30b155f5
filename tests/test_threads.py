"""The thread policy (skts._numerics._threads): n_jobs -> threads, within
the CPUs the process may use, as OMP_NUM_THREADS, threadpoolctl and the
affinity mask say."""

import os
import subprocess
import sys

import pytest

from skts._numerics import _threads

_PROBE = (
    "import skts._numerics._threads as t; "
    "print(t.cpu_count(), t.kernel_threads(None, 1 << 22), "
    "t.kernel_threads(-1, 1 << 22), t.kernel_threads(1, 1 << 22))"
)


def _probe(env=None, code=_PROBE):
    env = {**os.environ, **(env or {})}
    run = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    return [int(v) for v in run.stdout.split()]


def test_omp_num_threads_caps_every_pass():
    cpus, none, all_, one = _probe({"OMP_NUM_THREADS": "1"})
    assert (cpus, none, all_, one) == (1, 1, 1, 1)


def test_threadpoolctl_limits_the_kernel_too():
    pytest.importorskip("threadpoolctl")
    if not _threads.kernel.openmp():
        pytest.skip("the kernel was built without OpenMP")
    code = (
        "from threadpoolctl import threadpool_limits, threadpool_info\n"
        "import skts._numerics._threads as t\n"
        "apis = {i['user_api'] for i in threadpool_info()}\n"
        "assert 'openmp' in apis, apis\n"
        "with threadpool_limits(1):\n"
        "    print(t.cpu_count(), t.kernel_threads(None, 1 << 22))\n"
        "print(t.cpu_count())\n"
    )
    inside, none, after = _probe({"OMP_NUM_THREADS": ""}, code)
    assert (inside, none) == (1, 1)
    assert after == _threads.cpu_count()


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no affinity API")
def test_the_affinity_mask_is_the_cpu_count():
    code = (
        "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); " + _PROBE
    )
    cpus, none, all_, one = _probe({"OMP_NUM_THREADS": ""}, code)
    assert (cpus, none, all_, one) == (1, 1, 1, 1)


def test_n_jobs_means_threads(monkeypatch):
    monkeypatch.setattr(_threads, "cpu_count", lambda: 4)
    monkeypatch.setattr(_threads, "others_running", lambda: 0)
    assert _threads.kernel_threads(1, 1 << 24) == 1
    assert _threads.kernel_threads(-1, 1 << 24) == 4
    assert _threads.kernel_threads(-3, 1 << 24) == 2
    assert _threads.python_threads(None, 1 << 24, 100) == 4
    assert _threads.python_threads(None, 1 << 24, 10) == 1  # (short rows)
    assert _threads.python_threads(2, 1 << 24, 10) == 2


# --- the cgroup CPU quota ---------------------------------------------------


def _fake_tree(files):
    def read(path):
        if path not in files:
            raise FileNotFoundError(path)
        return files[path]

    return read


_V1_MOUNT = (
    "32 31 0:29 {root} /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
)
_V2_MOUNT = "41 31 0:38 {root} /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw\n"


def test_a_nested_cgroup_v1_quota_is_the_smallest_on_the_way_up():
    q = "/sys/fs/cgroup/cpu"
    files = {
        "/p/cgroup": "4:cpu,cpuacct:/jobs/calibrate\n1:name=systemd:/\n",
        "/p/mountinfo": _V1_MOUNT.format(root="/"),
        f"{q}/jobs/calibrate/cpu.cfs_quota_us": "150000\n",  # (1.5 CPUs -> 2)
        f"{q}/jobs/calibrate/cpu.cfs_period_us": "100000\n",
        f"{q}/jobs/cpu.cfs_quota_us": "-1\n",  # (no quota here)
        f"{q}/jobs/cpu.cfs_period_us": "100000\n",
        f"{q}/cpu.cfs_quota_us": "300000\n",
        f"{q}/cpu.cfs_period_us": "100000\n",
    }
    assert _threads.cgroup_cpus("/p", _fake_tree(files)) == 2
    files[f"{q}/cpu.cfs_quota_us"] = "50000\n"  # (an ancestor's half CPU wins)
    assert _threads.cgroup_cpus("/p", _fake_tree(files)) == 1
    files[f"{q}/cpu.cfs_quota_us"] = "-1\n"
    files[f"{q}/jobs/calibrate/cpu.cfs_quota_us"] = "-1\n"
    assert _threads.cgroup_cpus("/p", _fake_tree(files)) is None


def test_a_cgroup_v2_quota_under_a_mount_root_that_is_not_slash():
    # (a container without a cgroup namespace: the mount's root is the
    # container's cgroup, and /proc/self/cgroup names it from the top)
    files = {
        "/p/cgroup": "0::/docker/abc/app\n",
        "/p/mountinfo": _V2_MOUNT.format(root="/docker/abc"),
        "/sys/fs/cgroup/app/cpu.max": "max 100000\n",
        "/sys/fs/cgroup/cpu.max": "250000 100000\n",
    }
    assert _threads.cgroup_cpus("/p", _fake_tree(files)) == 3
    files["/sys/fs/cgroup/app/cpu.max"] = "100000 100000\n"
    assert _threads.cgroup_cpus("/p", _fake_tree(files)) == 1
    assert _threads.cgroup_cpus("/nowhere", _fake_tree(files)) is None


def own_cpu_cgroup():
    """The folder of this process's cgroup (v1 ``cpu`` controller, or v2
    with the ``cpu`` controller), where a child cgroup with a quota can be
    made, and its version; else ``None`` and the reason. (Also used by
    ``benchmarks/bench_load.py``.)"""
    if not sys.platform.startswith("linux"):
        return None, "cgroups are Linux's"
    for _point, folder, version in _threads.cgroup_folders():
        if version == "v1":
            return (folder, version), ""
        try:
            if "cpu" in open(os.path.join(folder, "cgroup.controllers")).read().split():
                return (folder, version), ""
        except OSError:
            continue
    return None, "no cgroup with a cpu controller is mounted here"


def test_a_cgroup_quota_of_one_cpu_is_one_thread():
    """A real cgroup with a quota of one CPU (made here, where the machine
    allows it): the process inside counts one CPU, and its passes use one."""
    found, reason = own_cpu_cgroup()
    if found is None:
        pytest.skip(reason)
    parent, version = found
    child = os.path.join(parent, f"skts-test-{os.getpid()}")
    try:
        os.mkdir(child)
        if version == "v1":
            with open(os.path.join(child, "cpu.cfs_quota_us"), "w") as f:
                f.write("100000")
            with open(os.path.join(child, "cpu.cfs_period_us"), "w") as f:
                f.write("100000")
        else:
            with open(os.path.join(child, "cpu.max"), "w") as f:
                f.write("100000 100000")
    except OSError as exc:
        pytest.skip(f"this machine does not let the tests make a cgroup: {exc}")
    try:
        procs = "tasks" if version == "v1" else "cgroup.procs"
        code = (
            "import os\n"
            f"open({os.path.join(child, procs)!r}, 'w').write(str(os.getpid()))\n"
            + _PROBE
        )
        cpus, none, all_, one = _probe({"OMP_NUM_THREADS": ""}, code)
        assert (cpus, none, all_, one) == (1, 1, 1, 1)
    finally:
        os.rmdir(child)


# --- one thread means one thread; a late helper is not waited for ------------

_ONE_THREAD = """
import os, sys
import numpy as np
from skts import TemperatureScaler, _kernel
rng = np.random.default_rng(0)
z = (rng.normal(size=(300_000, 10)) * 3).astype(np.float32)
y = z.argmax(1)
y[::3] = rng.integers(0, 10, y[::3].size)
def tasks():
    here = "/proc/self/task"
    return len(os.listdir(here)) if os.path.isdir(here) else 0
before = tasks()
how = sys.argv[1]
n_jobs = int(how) if how.isdigit() else None
def fits():
    TemperatureScaler(n_jobs=n_jobs).fit(z, y)
    TemperatureScaler(n_jobs=n_jobs, solver="continuous").fit(z, y)
if how == "limits":
    from threadpoolctl import threadpool_limits
    with threadpool_limits(1):
        fits()
else:
    fits()
print(_kernel.helper_threads(), tasks() - before)
"""


@pytest.mark.parametrize(
    "how, env", [("1", {}), ("env", {"OMP_NUM_THREADS": "1"}), ("limits", {})]
)
def test_one_thread_means_no_other_thread_works(how, env):
    """``n_jobs=1``, ``OMP_NUM_THREADS=1`` and ``threadpool_limits(1)``: the
    fits (the grid with its warm start on a sample, and the continuous
    solver) start no thread at all."""
    if how == "limits":
        pytest.importorskip("threadpoolctl")
        if not _threads.kernel.openmp():
            pytest.skip("threadpoolctl limits OpenMP, and this build has none")
    run = subprocess.run(
        [sys.executable, "-c", _ONE_THREAD, how],
        env={**os.environ, "OMP_NUM_THREADS": "", **env},
        capture_output=True, text=True,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    helpers, new_threads = map(int, run.stdout.split())
    assert helpers == 0
    assert new_threads <= 0


def test_two_jobs_start_one_helper():
    # (the contrast: the count above does see threads when there are some)
    run = subprocess.run(
        [sys.executable, "-c", _ONE_THREAD, "2"],
        env={**os.environ, "OMP_NUM_THREADS": ""}, capture_output=True, text=True,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    helpers, new_threads = map(int, run.stdout.split())
    assert helpers == 1
    if os.path.isdir("/proc/self/task"):
        assert new_threads >= 1


def test_a_pass_does_not_wait_for_a_helper_that_has_not_started():
    """Every helper is kept busy, so the pass's helper cannot start: the
    calling thread does every block itself, the pass returns, and its bits
    are those of one thread. The late helper then finds nothing to do."""
    import gc
    import threading

    import numpy as np

    from skts import _kernel

    rng = np.random.default_rng(1)
    z = (rng.normal(size=(200_000, 10)) * 3).astype(np.float32)
    y = rng.integers(0, 10, z.shape[0])
    args = (z, y, None, float(z.shape[0]), [0.5, 1.0], [2.0, 1.0])
    alone = _kernel.nll(*args, n_threads=1)
    release = threading.Event()
    pool = _kernel._helpers(3)
    blockers = [pool.submit(release.wait, 60) for _ in range(_kernel._POOL["size"])]
    try:
        done = {}
        caller = threading.Thread(
            target=lambda: done.update(sums=_kernel.nll(*args, n_threads=4))
        )
        caller.start()
        caller.join(30)
        assert not caller.is_alive(), "the pass waited for helpers that never started"
        np.testing.assert_array_equal(done["sums"], alone)
        soft = _kernel.softmax(z, 0.5, False, np.float32, n_threads=4)
        np.testing.assert_array_equal(soft, _kernel.softmax(z, 0.5, False, np.float32))
        done.clear()
        soft = None
        gc.collect()
    finally:
        release.set()
    for b in blockers:
        b.result(60)
    # (the late helpers ran after the arrays of their pass were dropped)
    pool.submit(lambda: None).result(60)
    np.testing.assert_array_equal(_kernel.nll(*args, n_threads=4), alone)
