"""The command line on deep-learning files: .safetensors, .pt, half
precision, one binary logit per row; streamed apply/report (memory bounded
whatever the number of rows or resamples), --dtype, --seed, progress bars."""

import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios

import numpy as np
import pytest
from test_cli import assert_one_line_error, run

from skts import TemperatureScaler
from skts.metrics import calibration_report
from skts.metrics._report import streamed_reports


def _overconfident(n, k, seed=0, t_true=2.0):
    rng = np.random.default_rng(seed)
    z = (rng.normal(size=(n, k)) * 3).astype(np.float32)
    p = np.exp(z / t_true - (z / t_true).max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    y = (p.cumsum(axis=1) < rng.random(n)[:, None]).sum(axis=1).clip(0, k - 1)
    return z, y


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dl")
    z, y = _overconfident(2000, 10)
    np.save(folder / "z.npy", z)
    np.save(folder / "y.npy", y)
    return folder, z, y


def _fit_t(folder, logits, labels, *extra):
    out = folder / "c.json"
    r = run(
        "fit",
        "--logits",
        logits,
        "--labels",
        labels,
        "--out",
        out,
        "--force",
        *extra,
        cwd=folder,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(out.read_text())["temperature"], r


def test_safetensors_logits_and_labels(data):
    safetensors = pytest.importorskip("safetensors.numpy")
    folder, z, y = data
    ref = TemperatureScaler().fit(z, y).temperature_
    safetensors.save_file({"logits": z, "extra": z[:3]}, str(folder / "z.safetensors"))
    safetensors.save_file({"labels": y}, str(folder / "y.safetensors"))
    t, _ = _fit_t(folder, "z.safetensors", "y.safetensors", "--key", "logits")
    assert t == ref
    # A tensor named "logits" is the logits without --key (issue 29) ...
    r = run(
        "fit",
        "--logits",
        "z.safetensors",
        "--labels",
        "y.npy",
        "--out",
        "-",
        cwd=folder,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["temperature"] == t
    # ... and other names need it.
    safetensors.save_file({"scores": z, "extra": z[:3]}, str(folder / "s.safetensors"))
    r = run(
        "fit",
        "--logits",
        "s.safetensors",
        "--labels",
        "y.npy",
        "--out",
        "x.json",
        cwd=folder,
    )
    assert_one_line_error(r, "holds ['extra', 'scores']", "--key")
    assert not (folder / "x.json").exists()
    (folder / "bad.safetensors").write_bytes(
        b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}"
    )
    r = run(
        "fit",
        "--logits",
        "bad.safetensors",
        "--labels",
        "y.npy",
        "--out",
        "x.json",
        cwd=folder,
    )
    assert_one_line_error(r, "cannot read logits file")


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_files_give_the_widened_answer(data, dtype):
    torch = pytest.importorskip("torch")
    st = pytest.importorskip("safetensors.torch")
    folder, z, y = data
    half = torch.from_numpy(z).to(getattr(torch, dtype))
    ref = TemperatureScaler().fit(half.float().numpy(), y).temperature_
    st.save_file({"logits": half}, str(folder / f"{dtype}.safetensors"))
    torch.save(half, folder / f"{dtype}.pt")
    for name in (f"{dtype}.safetensors", f"{dtype}.pt"):
        t, _ = _fit_t(folder, name, "y.npy")
        assert t == ref, name


def test_pt_files(data):
    torch = pytest.importorskip("torch")
    folder, z, y = data
    ref = TemperatureScaler().fit(z, y).temperature_
    torch.save(
        {"logits": torch.from_numpy(z), "labels": torch.from_numpy(y)},
        folder / "both.pt",
    )
    t, _ = _fit_t(
        folder, "both.pt", "both.pt", "--key", "logits", "--labels-key", "labels"
    )
    assert t == ref
    torch.save({"note": "not a tensor"}, folder / "odd.pt")
    r = run(
        "fit", "--logits", "odd.pt", "--labels", "y.npy", "--out", "x.json", cwd=folder
    )
    assert_one_line_error(r, "odd.pt")


def test_pt_without_torch_is_a_one_line_error(data, tmp_path):
    folder, _, _ = data
    (folder / "some.pt").write_bytes(b"PK\x03\x04 whatever")
    blocker = tmp_path / "blocker"
    (blocker / "torch").mkdir(parents=True)
    (blocker / "torch" / "__init__.py").write_text("raise ImportError('no torch')\n")
    env = dict(os.environ, PYTHONPATH=str(blocker))
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "skts",
            "fit",
            "--logits",
            "some.pt",
            "--labels",
            "y.npy",
            "--out",
            "x.json",
        ],
        capture_output=True,
        text=True,
        cwd=folder,
        env=env,
        timeout=300,
    )
    assert_one_line_error(r, "needs PyTorch", "pip install torch")


def test_one_binary_logit_per_row(tmp_path):
    rng = np.random.default_rng(5)
    d = rng.normal(size=1500) * 4
    y = (rng.random(1500) < 1 / (1 + np.exp(-d / 2.5))).astype(int)
    ref = TemperatureScaler().fit(np.column_stack([0 * d, d]), y).temperature_
    np.save(tmp_path / "d.npy", d)
    np.savetxt(tmp_path / "d.csv", d)
    np.save(tmp_path / "y.npy", y)
    for name in ("d.npy", "d.csv"):
        t, _ = _fit_t(tmp_path, name, "y.npy")
        assert t == ref, name
    r = run(
        "apply",
        "--logits",
        "d.npy",
        "--calibration",
        "c.json",
        "--out",
        "p.npy",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    p = np.load(tmp_path / "p.npy")
    assert p.shape == (1500, 2)
    np.testing.assert_allclose(p[:, 1], 1 / (1 + np.exp(-d / ref)), rtol=1e-12)


def test_probabilities_given_as_logits_are_warned_about(data):
    folder, z, _ = data
    p = np.exp(z - z.max(axis=1, keepdims=True))
    np.save(folder / "p.npy", p / p.sum(axis=1, keepdims=True))
    _, r = _fit_t(folder, "p.npy", "y.npy")
    assert "look like probabilities" in r.stderr and "np.log(p)" in r.stderr
    _, r = _fit_t(folder, "z.npy", "y.npy")
    assert "probabilities" not in r.stderr


def test_apply_dtype(data, tmp_path):
    folder, z, _ = data
    _fit_t(folder, "z.npy", "y.npy")
    np.save(tmp_path / "z64.npy", z.astype(np.float64))
    cases = [
        ("z.npy", [], np.float32),
        ("z.npy", ["--dtype", "float64"], np.float64),
        (tmp_path / "z64.npy", [], np.float64),
        (tmp_path / "z64.npy", ["--dtype", "float32"], np.float32),
    ]
    for logits, extra, dtype in cases:
        r = run(
            "apply",
            "--logits",
            folder / logits,
            "--calibration",
            folder / "c.json",
            "--out",
            tmp_path / "p.npy",
            "--force",
            *extra,
            cwd=tmp_path,
        )
        assert r.returncode == 0, r.stderr
        p = np.load(tmp_path / "p.npy")
        assert p.dtype == dtype, (logits, extra)
        np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-5)
    r = run(
        "apply",
        "--logits",
        "z.npy",
        "--calibration",
        "c.json",
        "--out",
        "q.npy",
        "--dtype",
        "float16",
        cwd=folder,
    )
    assert_one_line_error(r, "--dtype")


# --------------------------------------------------------------------------
# The streamed bootstrap.


def test_streamed_bootstrap_resamples_rows_with_replacement():
    # Accuracy of n rows with p = 0.3 correct: the bootstrap spread of the
    # accuracy is sqrt(p (1 - p) / n); a wrong resampling (too few or too
    # many draws, rows not equally likely) shows in it.
    rng = np.random.default_rng(0)
    n, k = 3000, 4
    z = rng.normal(size=(n, k))
    y = rng.integers(0, k, n)
    y[: int(0.3 * n)] = z[: int(0.3 * n)].argmax(axis=1)
    (report,) = streamed_reports(z, y, [1.0], 400, 1)
    acc = report["accuracy"]
    lo, hi = report.intervals["accuracy"]
    sd = np.sqrt(acc * (1 - acc) / n)
    assert (hi - lo) == pytest.approx(2 * 1.96 * sd, rel=0.15)
    assert lo < acc < hi
    # The same spread as the in-memory bootstrap of calibration_report.
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    lib = calibration_report(y, p, n_bootstrap=400, random_state=0)
    for metric in ("accuracy", "log_loss", "ece"):
        a, b = report.intervals[metric], lib.intervals[metric]
        assert (a[1] - a[0]) == pytest.approx(b[1] - b[0], rel=0.25), metric
    # Point values do not depend on the bootstrap.
    (plain,) = streamed_reports(z, y, [1.0], 0, 1)
    assert plain.values == report.values


def test_report_bootstrap_follows_the_seed(data):
    folder, _, _ = data
    _fit_t(folder, "z.npy", "y.npy")

    def report(*extra):
        r = run(
            "report",
            "--logits",
            "z.npy",
            "--labels",
            "y.npy",
            "--calibration",
            "c.json",
            "--json",
            "--bootstrap",
            "30",
            *extra,
            cwd=folder,
        )
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)["metrics"]

    a, b, c = report("--seed", "7"), report("--seed", "7"), report("--seed", "8")
    assert a == b
    assert a["after"]["intervals"] != c["after"]["intervals"]
    assert a["after"]["values"] == c["after"]["values"]


# --------------------------------------------------------------------------
# Memory of apply and report on a large file.


# Runs skts in a fresh process that reports its own high-water mark at the
# end (VmHWM belongs to the process's own memory map: what a fork inherited
# from the test process before exec does not count, as it would in
# ru_maxrss).
_MEASURE = """
import sys
from skts.cli import main
code = main(sys.argv[2:])
with open("/proc/self/status") as fh:
    hwm = next(line for line in fh if line.startswith("VmHWM:"))
with open(sys.argv[1], "w") as fh:
    fh.write(hwm.split()[1])
sys.exit(code)
"""


def _peak_rss(args, cwd, error: str | None = None) -> int:
    """Peak resident memory (bytes) of ``skts args`` in a fresh process
    (``error``: a fragment of the one-line error it must exit 2 with)."""
    out = cwd / "hwm.txt"
    r = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(out), *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if error is None:
        assert r.returncode == 0, r.stderr
    else:
        assert r.returncode == 2, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert error in r.stderr, r.stderr
    return int(out.read_text()) * 1024


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs Linux /proc")
def test_apply_and_report_stream_in_bounded_memory(tmp_path):
    # 1,000,000 x 100 float32 logits: 381 MiB. The process may hold the
    # memory-mapped input's pages; beyond them, 256 MiB at most (Python,
    # numpy and scikit-learn take about 110 MiB of it). Before streaming:
    # the output's 381 MiB more, and 4.5 GB for report --bootstrap 10.
    n, k = 1_000_000, 100
    z = np.lib.format.open_memmap(
        tmp_path / "z.npy", mode="w+", dtype=np.float32, shape=(n, k)
    )
    rng = np.random.default_rng(0)
    for start in range(0, n, 100_000):
        z[start : start + 100_000] = rng.normal(size=(100_000, k)) * 3
    z.flush()
    del z
    np.save(tmp_path / "y.npy", rng.integers(0, k, n))
    calib = {"temperature": 1.7, "n_classes": k, "n_samples": n}
    (tmp_path / "c.json").write_text(json.dumps(calib))
    size = (tmp_path / "z.npy").stat().st_size
    budget = size + (256 << 20)
    apply = _peak_rss(
        ["apply", "--logits", "z.npy", "--calibration", "c.json", "--out", "p.npy"],
        tmp_path,
    )
    assert apply <= budget, apply / 2**20
    assert np.load(tmp_path / "p.npy", mmap_mode="r").shape == (n, k)
    (tmp_path / "p.npy").unlink()
    report = _peak_rss(
        [
            "report",
            "--logits",
            "z.npy",
            "--labels",
            "y.npy",
            "--calibration",
            "c.json",
            "--bootstrap",
            "10",
        ],
        tmp_path,
    )
    assert report <= budget, report / 2**20
    # A value that is not finite near the end: named by its position, found
    # block by block (not with a mask as large as the file).
    z = np.load(tmp_path / "z.npy", mmap_mode="r+")
    z[n - 2, 37] = np.nan
    z.flush()
    del z
    fit = _peak_rss(
        ["fit", "--logits", "z.npy", "--labels", "y.npy", "--out", "t.json"],
        tmp_path,
        error=f"contains NaN, first at row {n - 2}, column 37",
    )
    assert fit <= budget, fit / 2**20
    assert not (tmp_path / "t.json").exists()


# --------------------------------------------------------------------------
# Progress bars: on a terminal only, silenced by --quiet.


def _stderr_on_a_terminal(args, cwd) -> str:
    pytest.importorskip("tqdm")
    leader, follower = pty.openpty()
    # A terminal of 100 x 30 (a new pty has 0 columns: nothing would fit).
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "skts", *map(str, args)],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=follower,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the terminal closed: the process is done
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert proc.wait(timeout=300) == 0
    return b"".join(chunks).decode(errors="replace")


def test_progress_bars_on_a_terminal_and_quiet(data):
    folder, _, _ = data
    fit = [
        "fit",
        "--logits",
        "z.npy",
        "--labels",
        "y.npy",
        "--out",
        "t.json",
        "--force",
        "--bootstrap",
        "5",
    ]
    shown = _stderr_on_a_terminal(fit, folder)
    assert "fit pass 1" in shown and "report" in shown and "rows" in shown
    assert _stderr_on_a_terminal([*fit, "--quiet"], folder) == ""
    # Not a terminal (a pipe): nothing but what the command prints anyway.
    r = run(*fit, cwd=folder)
    assert r.returncode == 0 and r.stderr == ""


@pytest.mark.parametrize("legacy", [False, True])
def test_a_pt_file_with_other_pickled_objects_is_one_line(data, legacy):
    # (issue 25) torch.load(weights_only=True) refuses them: one plain line
    # that says why, not torch's multi-line advice.
    import fractions

    torch = pytest.importorskip("torch")
    folder, z, _ = data
    torch.save(
        {"logits": torch.from_numpy(z), "note": fractions.Fraction(1, 3)},
        folder / "pickled.pt",
        _use_new_zipfile_serialization=not legacy,
    )
    r = run(
        "fit", "--logits", "pickled.pt", "--labels", "y.npy", "--out", "x.json",
        cwd=folder,
    )  # fmt: skip
    assert_one_line_error(r, "pickled.pt' holds pickled objects other than tensors")
    assert "\x1b" not in r.stderr


def test_the_report_counts_correct_as_predict_does():
    # (issue 25) a near-tie of 1e-17 rounds both probabilities to 0.5: the
    # report's accuracy follows the logits' first argmax, as predict does.
    z = np.array([[0.0, 1e-17]] * 10)
    y = np.ones(10, dtype=np.intp)
    assert np.all(TemperatureScaler(temperatures=[1.0]).fit(z, y).predict(z) == 1)
    (report,) = streamed_reports(z, y, [1.0])
    assert report.values["accuracy"] == 1.0
