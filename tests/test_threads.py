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
