"""The command line end to end, through a subprocess, and the demo."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from skts import TemperatureScaler
from skts._numerics import default_temperatures
from skts.cli import parse_temperatures
from skts.metrics import calibration_report

from _data import DATA, MISSING


def run(*args, cwd):
    env = dict(os.environ, PYTHONWARNINGS="ignore::DeprecationWarning")
    return subprocess.run(
        [sys.executable, "-m", "skts", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
    )


def assert_one_line_error(result, *fragments):
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("logits")
    rng = np.random.RandomState(0)
    logits = rng.normal(scale=4, size=(600, 5)).astype(np.float32)
    y = np.where(rng.rand(600) < 0.6, logits.argmax(1), rng.randint(0, 5, 600))
    np.save(folder / "val.npy", logits[:300])
    np.save(folder / "val_y.npy", y[:300])
    np.save(folder / "test.npy", logits[300:])
    np.save(folder / "test_y.npy", y[300:])
    np.savez(folder / "both.npz", logits=logits[:300], labels=y[:300])
    np.savetxt(folder / "val.csv", logits[:300], delimiter=",")
    np.savetxt(folder / "val_y.txt", y[:300], fmt="%d")
    return folder, logits, y


def test_fit_apply_report_round_trip(files, tmp_path):
    folder, logits, y = files
    calib = tmp_path / "calib.json"
    r = run(
        *fit_args(folder, calib),
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    data = json.loads(calib.read_text())
    expected = TemperatureScaler().fit(logits[:300], y[:300])
    assert data["temperature"] == expected.temperature_
    assert data["validation_loss"] == expected.validation_loss_
    values = data["candidates"].pop("values")
    assert data["candidates"] == {
        "count": 1001,
        "min": 0.01,
        "max": 100.0,
        "spec": "geom:0.01:100:1001",
    }
    # The candidates used, bit for bit the library's default grid.
    assert np.array_equal(np.array(values), default_temperatures())
    assert data["at_boundary"] is False and data["n_classes"] == 5
    assert set(data["metrics"]) == {"before", "after"}
    assert data["metrics"]["after"]["values"]["log_loss"] == pytest.approx(
        expected.validation_loss_
    )
    assert data["skts_version"]

    r = run(
        "apply",
        "--logits",
        folder / "test.npy",
        "--calibration",
        calib,
        "--out",
        tmp_path / "p.npy",
        "--labels-out",
        tmp_path / "l.csv",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    proba = np.load(tmp_path / "p.npy")
    # float32 logits give float32 probabilities (--dtype float64 asks for more).
    assert proba.dtype == np.float32
    np.testing.assert_array_equal(
        proba, expected.predict_proba(logits[300:]).astype(np.float32)
    )
    labels = np.loadtxt(tmp_path / "l.csv", dtype=int)
    np.testing.assert_array_equal(labels, logits[300:].argmax(1))

    r = run(
        "apply",
        "--logits",
        folder / "test.npy",
        "--calibration",
        calib,
        "--out",
        tmp_path / "p.csv",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    np.testing.assert_allclose(np.loadtxt(tmp_path / "p.csv", delimiter=","), proba)

    r = run(
        "report",
        "--logits",
        folder / "test.npy",
        "--labels",
        folder / "test_y.npy",
        "--calibration",
        calib,
        "--json",
        "--bootstrap",
        "20",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["temperature"] == expected.temperature_
    assert report["metrics"]["before"]["values"]["accuracy"] == pytest.approx(
        np.mean(logits[300:].argmax(1) == y[300:])
    )
    assert len(report["metrics"]["after"]["intervals"]) == 6

    r = run(
        "report",
        "--logits",
        folder / "test.npy",
        "--labels",
        folder / "test_y.npy",
        "--calibration",
        calib,
        "--plot",
        tmp_path / "rel.png",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert "ece" in r.stdout and "after" in r.stdout
    assert (tmp_path / "rel.png").read_bytes()[:4] == b"\x89PNG"


def test_other_input_formats_and_options(files, tmp_path):
    folder, logits, y = files
    r = run(
        "fit",
        "--logits",
        folder / "both.npz",
        "--key",
        "logits",
        "--labels",
        folder / "both.npz",
        "--labels-key",
        "labels",
        "--temperatures",
        "0.5,1,2,4",
        "--out",
        tmp_path / "a.json",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    t = json.loads((tmp_path / "a.json").read_text())["temperature"]
    assert (
        t == TemperatureScaler([0.5, 1, 2, 4]).fit(logits[:300], y[:300]).temperature_
    )
    r = run(
        "fit",
        "--logits",
        folder / "val.csv",
        "--labels",
        folder / "val_y.txt",
        "--solver",
        "continuous",
        "--out",
        tmp_path / "b.json",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    cont = TemperatureScaler(solver="continuous").fit(
        np.loadtxt(folder / "val.csv", delimiter=","), y[:300]
    )
    assert json.loads((tmp_path / "b.json").read_text())[
        "temperature"
    ] == pytest.approx(cont.temperature_, rel=1e-9)


def test_boundary_is_reported(tmp_path):
    logits = np.array([[3.0, 0.0], [0.0, 3.0]])
    np.save(tmp_path / "z.npy", logits)
    np.save(tmp_path / "y.npy", np.array([0, 1]))
    r = run(
        "fit", "--logits", "z.npy", "--labels", "y.npy", "--out", "c.json", cwd=tmp_path
    )
    assert r.returncode == 0
    assert "warning" in r.stderr and "smallest" in r.stderr
    assert json.loads((tmp_path / "c.json").read_text())["at_boundary"] is True


@pytest.fixture
def bad(tmp_path, files):
    folder, _, _ = files
    np.save(tmp_path / "nan.npy", np.array([[0.0, 1.0], [1.0, np.nan]]))
    np.save(tmp_path / "one_d.npy", np.array([1.0, 2.0]))  # binary: fine
    np.save(tmp_path / "three_d.npy", np.zeros((2, 2, 2)))
    np.save(tmp_path / "y_out.npy", np.array([0, 7] + [0] * 298))
    np.save(tmp_path / "y_short.npy", np.array([0, 1]))
    (tmp_path / "corrupt.npy").write_bytes(b"\x93NUMPY garbage")
    (tmp_path / "garbage.npy").write_text("not numpy at all")
    (tmp_path / "corrupt.npz").write_bytes(b"PK\x03\x04 broken")
    (tmp_path / "bad.csv").write_text("1,2\n3,x\n")
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "calib.json").write_text(
        json.dumps({"temperature": 2.0, "n_classes": 5})
    )
    (tmp_path / "badcalib.json").write_text("{ not json")
    (tmp_path / "exists.npy").write_bytes(b"keep me")
    return tmp_path, folder


@pytest.mark.parametrize(
    "args, fragments",
    [
        (
            [
                "fit",
                "--logits",
                "missing.npy",
                "--labels",
                "{f}/val_y.npy",
                "--out",
                "o.json",
            ],
            ["cannot read logits file 'missing.npy': no such file"],
        ),
        (
            [
                "fit",
                "--logits",
                "nan.npy",
                "--labels",
                "y_short.npy",
                "--out",
                "o.json",
            ],
            ["contains NaN, first at row 1, column 1"],
        ),
        (
            [
                "fit",
                "--logits",
                "three_d.npy",
                "--labels",
                "y_short.npy",
                "--out",
                "o.json",
            ],
            # (3-D logits are per-position rows: their labels are 2-D)
            ["classes on axis 1", "must have shape (2, 2); got (2,)"],
        ),
        (
            [
                "fit",
                "--logits",
                "{f}/val.npy",
                "--labels",
                "y_out.npy",
                "--out",
                "o.json",
            ],
            ["class indices in [0, 5)", "got 7 at position 1"],
        ),
        (
            [
                "fit",
                "--logits",
                "{f}/val.npy",
                "--labels",
                "y_short.npy",
                "--out",
                "o.json",
            ],
            ["300 rows", "2 labels"],
        ),
        (
            [
                "fit",
                "--logits",
                "corrupt.npy",
                "--labels",
                "y_short.npy",
                "--out",
                "o.json",
            ],
            ["cannot read logits file 'corrupt.npy'"],
        ),
        (
            [
                "fit",
                "--logits",
                "garbage.npy",
                "--labels",
                "y_short.npy",
                "--out",
                "o.json",
            ],
            ["not a .npy file"],
        ),
        (
            [
                "fit",
                "--logits",
                "corrupt.npz",
                "--labels",
                "y_short.npy",
                "--out",
                "o.json",
            ],
            ["cannot read logits file 'corrupt.npz'"],
        ),
        (
            [
                "fit",
                "--logits",
                "bad.csv",
                "--labels",
                "y_short.npy",
                "--out",
                "o.json",
            ],
            ["cannot read logits file 'bad.csv'"],
        ),
        (
            [
                "fit",
                "--logits",
                "empty.csv",
                "--labels",
                "y_short.npy",
                "--out",
                "o.json",
            ],
            ["cannot read logits file 'empty.csv'"],
        ),
        (
            [
                "fit",
                "--logits",
                "{f}/both.npz",
                "--labels",
                "{f}/val_y.npy",
                "--out",
                "o.json",
            ],
            ["choose one with --key"],
        ),
        (
            [
                "fit",
                "--logits",
                "{f}/val.npy",
                "--labels",
                "{f}/val_y.npy",
                "--out",
                "o.json",
                "--temperatures",
                "0,1",
            ],
            ["--temperatures", "finite and > 0"],
        ),
        (
            [
                "fit",
                "--logits",
                "{f}/val.npy",
                "--labels",
                "{f}/val_y.npy",
                "--out",
                "o.json",
                "--temperatures",
                "geom:1:x:3",
            ],
            ["--temperatures must be"],
        ),
        (
            [
                "fit",
                "--logits",
                "{f}/val.npy",
                "--labels",
                "{f}/val_y.npy",
                "--out",
                "exists.npy",
            ],
            ["exists; pass --force"],
        ),
        (
            [
                "fit",
                "--logits",
                "{f}/val.npy",
                "--labels",
                "{f}/val_y.npy",
                "--out",
                "{f}/val.npy",
                "--force",
            ],
            ["refusing to overwrite the input"],
        ),
        (
            [
                "apply",
                "--logits",
                "{f}/test.npy",
                "--calibration",
                "badcalib.json",
                "--out",
                "p.npy",
            ],
            ["is not a skts calibration"],
        ),
        (
            [
                "apply",
                "--logits",
                "one_d.npy",
                "--calibration",
                "calib.json",
                "--out",
                "p.npy",
            ],
            ["has 2 columns", "fitted on 5 classes"],
        ),
        (
            [
                "apply",
                "--logits",
                "nan.npy",
                "--calibration",
                "calib.json",
                "--out",
                "p.npy",
            ],
            ["contains NaN, first at row 1, column 1"],
        ),
        (
            [
                "apply",
                "--logits",
                "{f}/test.npy",
                "--calibration",
                "calib.json",
                "--out",
                "p.json",
            ],
            ["unknown extension"],
        ),
        (
            ["apply", "--logits", "{f}/test.npy", "--calibration", "calib.json"],
            ["nothing to write"],
        ),
        (
            ["report", "--logits", "{f}/test.npy", "--labels", "y_out.npy"],
            ["labels file 'y_out.npy'", "got 7 at position 1"],
        ),
        (
            ["report", "--logits", "{f}/test.npy", "--labels", "y_short.npy"],
            ["300 rows", "2 labels"],
        ),
        (["fit", "--logits", "{f}/val.npy"], ["required"]),
        (["frobnicate"], ["invalid choice"]),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(bad, args, fragments):
    tmp_path, folder = bad
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    args = [a.replace("{f}", str(folder)) for a in args]
    result = run(*args, cwd=tmp_path)
    assert_one_line_error(result, *fragments)
    after = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert after == before  # nothing written, nothing truncated, no temp files


def test_apply_with_wrong_number_of_columns(bad):
    tmp_path, folder = bad
    (tmp_path / "c3.json").write_text(json.dumps({"temperature": 2.0, "n_classes": 3}))
    r = run(
        "apply",
        "--logits",
        folder / "test.npy",
        "--calibration",
        "c3.json",
        "--out",
        "p.npy",
        cwd=tmp_path,
    )
    assert_one_line_error(r, "5 columns", "3 classes")
    assert not (tmp_path / "p.npy").exists()


def test_force_overwrites_atomically(files, tmp_path):
    folder, _, _ = files
    out = tmp_path / "c.json"
    out.write_text("old")
    r = run(
        *fit_args(folder, out),
        "--force",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(out.read_text())["n_classes"] == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.json"]


def test_parse_temperatures():
    np.testing.assert_array_equal(parse_temperatures("0.5,1,2"), [0.5, 1.0, 2.0])
    grid = parse_temperatures("geom:0.01:100:1001")
    assert grid.size == 1001 and grid[0] == pytest.approx(0.01)
    assert parse_temperatures(None).size == 1001


def test_demo_runs_and_writes_figures(tmp_path):
    r = run("demo", "--out", tmp_path / "demo", "--bootstrap", "20", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    for stage in range(1, 6):
        assert f"[{stage}/5" in out
    assert "T = " in out and "inside the range" in out
    rows = {
        line.split()[0]: line.split()
        for line in out.splitlines()
        if line.split()[:1] in (["accuracy"], ["log_loss"], ["ece"])
    }
    # Accuracy unchanged, log-loss better.
    assert rows["accuracy"][1] == rows["accuracy"][4]
    assert float(rows["log_loss"][4]) < float(rows["log_loss"][1])
    for name in ("reliability.png", "temperature_curve.png"):
        assert (tmp_path / "demo" / name).read_bytes()[:4] == b"\x89PNG"


@pytest.mark.skipif(not DATA.exists(), reason=MISSING)
def test_cli_on_real_logits(tmp_path):
    data = np.load(DATA / "densenet40_cifar10.npz")
    np.save(tmp_path / "v.npy", data["val_logits"])
    np.save(tmp_path / "vy.npy", data["val_labels"])
    r = run(
        "fit",
        "--logits",
        "v.npy",
        "--labels",
        "vy.npy",
        "--out",
        "c.json",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    t = json.loads((tmp_path / "c.json").read_text())["temperature"]
    assert (
        t
        == TemperatureScaler().fit(data["val_logits"], data["val_labels"]).temperature_
    )


# --------------------------------------------------------------------------
# Edges of the command line (issue: trustworthy at the edges).


def fit_args(folder, out):
    """``skts fit`` on the fixture's validation files."""
    return (
        "fit",
        "--logits",
        folder / "val.npy",
        "--labels",
        folder / "val_y.npy",
        "--out",
        out,
    )


def report_values(capsys, folder, logits, y, bootstrap):
    """``skts report --json`` on these logits and labels: the values before."""
    np.save(folder / "z.npy", logits)
    np.save(folder / "y.npy", y)
    code, out = main_in_process(
        capsys,
        "report",
        "--logits",
        folder / "z.npy",
        "--labels",
        folder / "y.npy",
        "--json",
        "--bootstrap",
        bootstrap,
    )
    assert code == 0, out.err
    return json.loads(out.out)["metrics"]["before"]["values"]


def main_in_process(capsys, *args):
    from skts.cli import main

    code = main([str(a) for a in args])
    return code, capsys.readouterr()


def test_geom_spec_is_the_default_grid_bit_for_bit():
    assert np.array_equal(
        parse_temperatures("geom:0.01:100:1001"), default_temperatures()
    )
    grid = parse_temperatures("geom:0.5:2:5")
    assert grid[0] == 0.5 and grid[-1] == 2.0 and grid[2] == 1.0


@pytest.mark.parametrize("tol", ["0", "1e-400", "-1", "inf", "nan", "2", "abc"])
def test_bad_tolerance_is_one_line(files, tmp_path, capsys, tol):
    folder, _, _ = files
    code, out = main_in_process(
        capsys,
        *fit_args(folder, tmp_path / "c.json"),
        "--solver",
        "continuous",
        "--tol",
        tol,
    )
    assert code == 2
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and "--tol" in lines[0] and "0 < tol < 1" in lines[0]
    assert not (tmp_path / "c.json").exists()


@pytest.mark.parametrize("spec", ["geom:1:2:99999999999", "geom:1:2:1000001"])
def test_huge_geom_counts_are_refused(files, tmp_path, capsys, spec):
    folder, _, _ = files
    code, out = main_in_process(
        capsys,
        *fit_args(folder, tmp_path / "c.json"),
        "--temperatures",
        spec,
    )
    assert code == 2
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and "at most 1000000 candidates" in lines[0]


@pytest.mark.parametrize("suffix, sep", [(".csv", ","), (".txt", " ")])
def test_one_row_text_logits_file_is_one_sample(tmp_path, capsys, suffix, sep):
    (tmp_path / f"z{suffix}").write_text(sep.join(["2.0", "0.5", "-1.0"]) + "\n")
    (tmp_path / "y.txt").write_text("1\n")
    code, out = main_in_process(
        capsys,
        "fit",
        "--logits",
        tmp_path / f"z{suffix}",
        "--labels",
        tmp_path / "y.txt",
        "--out",
        tmp_path / "c.json",
    )
    assert code == 0, out.err
    data = json.loads((tmp_path / "c.json").read_text())
    assert data["n_samples"] == 1 and data["n_classes"] == 3


def test_outputs_get_the_usual_permissions(files, tmp_path):
    folder, _, _ = files
    old = os.umask(0o027)
    try:
        r = run(
            "fit",
            "--logits",
            folder / "val.npy",
            "--labels",
            folder / "val_y.npy",
            "--out",
            tmp_path / "c.json",
            cwd=tmp_path,
        )
        assert r.returncode == 0, r.stderr
        r = run(
            "apply",
            "--logits",
            folder / "test.npy",
            "--calibration",
            tmp_path / "c.json",
            "--out",
            tmp_path / "p.npy",
            cwd=tmp_path,
        )
        assert r.returncode == 0, r.stderr
    finally:
        os.umask(old)
    for name in ("c.json", "p.npy"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o640


@pytest.fixture(scope="module")
def big_logits(tmp_path_factory):
    """Large enough that `apply` runs for a while (about a second or more)."""
    folder = tmp_path_factory.mktemp("big")
    rng = np.random.RandomState(0)
    np.save(folder / "z.npy", rng.normal(size=(3_000_000, 10)).astype(np.float32))
    (folder / "c.json").write_text(json.dumps({"temperature": 1.5, "n_classes": 10}))
    return folder


def _apply_in_background(big_logits, out, **popen):
    """``skts apply`` as a shell starts a background job: SIGINT ignored
    (which Python keeps: issue 28's Ctrl-C that was lost, exit 0)."""
    import signal

    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "skts",
            "apply",
            "--logits",
            big_logits / "z.npy",
            "--calibration",
            big_logits / "c.json",
            "--out",
            out,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
        **popen,
    )


@pytest.mark.parametrize("sig, code", [("SIGTERM", 143), ("SIGINT", 130)])
def test_a_signal_during_apply_leaves_no_file(big_logits, tmp_path, sig, code):
    import signal
    import time

    proc = _apply_in_background(big_logits, tmp_path / "p.npy")
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(".skts-*")) and time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"apply ended before it was signalled: {proc.stderr.read()}")
        time.sleep(0.005)
    assert list(tmp_path.glob(".skts-*")), "apply never started writing"
    proc.send_signal(getattr(signal, sig))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []  # no output, no temporary file


@pytest.mark.slow
def test_a_ctrl_c_at_any_moment_of_apply_exits_130_or_finishes(big_logits, tmp_path):
    """Ctrl-C at moments spread over a whole run, the last ones after it has
    written everything: every run either exits 130 with nothing left, or
    (signalled after it ended) exits 0 with its whole output."""
    import signal
    import time

    start = time.monotonic()
    proc = _apply_in_background(big_logits, tmp_path / "whole.npy")
    assert proc.wait(timeout=300) == 0
    whole = time.monotonic() - start
    expected = np.load(tmp_path / "whole.npy", mmap_mode="r")
    codes = []
    for i, fraction in enumerate(np.linspace(0.05, 1.1, 12)):
        folder = tmp_path / f"run{i}"
        folder.mkdir()
        proc = _apply_in_background(big_logits, folder / "p.npy")
        time.sleep(whole * fraction)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=300)
        codes.append(proc.returncode)
        if proc.returncode == 130:
            assert list(folder.iterdir()) == [], fraction
            assert err.strip() == "skts apply: interrupted", err
        else:
            assert proc.returncode == 0, err
            got = np.load(folder / "p.npy", mmap_mode="r")
            assert got.shape == expected.shape
            assert np.array_equal(got[-1000:], expected[-1000:])
            assert [p.name for p in folder.iterdir()] == ["p.npy"]
    assert 130 in codes  # (the early signals did interrupt)


def _fitted(files, tmp_path):
    """A calibration fitted on the validation logits (``tmp_path / "c.json"``)
    and an empty output folder: the files folder and that folder."""
    from skts.cli import main

    folder, _, _ = files
    assert main(["fit", "--logits", str(folder / "val.npy"), "--labels",
                 str(folder / "val_y.npy"), "--out",
                 str(tmp_path / "c.json")]) == 0
    out = tmp_path / "out"
    out.mkdir()
    return folder, out


@pytest.mark.parametrize("sig, code", [("SIGINT", 130), ("SIGTERM", 143)])
@pytest.mark.parametrize("when", ["publishing", "after publishing"])
def test_a_signal_while_publishing_takes_every_output_back(
    files, tmp_path, monkeypatch, capsys, sig, code, when
):
    """The commit window: a signal that arrives while apply's two outputs
    are being renamed into place, or while it prints its summary, leaves
    neither output (nor a temporary), and the exit code says so."""
    import signal

    from skts.cli import _apply, _outputs, main

    folder, out = _fitted(files, tmp_path)
    publish = _outputs._publish

    def publish_then_signal(tmp, path, force):
        publish(tmp, path, force)
        if path.endswith("p.npy"):
            os.kill(os.getpid(), getattr(signal, sig))

    def print_then_signal(*args, **kwargs):
        os.kill(os.getpid(), getattr(signal, sig))
        print(*args, **kwargs)

    if when == "publishing":
        monkeypatch.setattr(_outputs, "_publish", publish_then_signal)
    else:
        monkeypatch.setattr(_apply, "print", print_then_signal, raising=False)
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    capsys.readouterr()
    # Another thread alive (as OpenMP's and PyTorch's are): the kernel may
    # hand it the signal, which a signal mask on the main thread would miss.
    import threading

    stop = threading.Event()
    other = threading.Thread(target=stop.wait, daemon=True)
    other.start()
    args = ["apply", "--logits", str(folder / "test.npy"), "--calibration",
            str(tmp_path / "c.json"), "--out", str(out / "p.npy"),
            "--labels-out", str(out / "y.npy")]
    try:
        assert main(args) == code
    finally:
        stop.set()
    assert list(out.iterdir()) == []
    assert capsys.readouterr().err.strip().endswith(
        "interrupted" if sig == "SIGINT" else "terminated"
    )
    # The handlers are given back, and no signal is left pending.
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
    assert not signal.sigpending()
    monkeypatch.undo()
    assert main(args) == 0  # and the next run, unsignalled, writes both
    assert sorted(p.name for p in out.iterdir()) == ["p.npy", "y.npy"]


def test_stale_temporaries_of_dead_runs_are_removed(files, tmp_path):
    # Only this host's: a shared folder holds other machines' temporaries,
    # whose pids mean nothing here (issue 25: one run deleted another
    # machine's half-written output).
    from skts.cli._outputs import _host_token

    folder, _, _ = files
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
    )
    host = _host_token()
    stale = tmp_path / f".skts-{host}-{int(dead.stdout)}-abcd.npy"
    alive = tmp_path / f".skts-{host}-{os.getpid()}-efgh.npy"  # a live process's
    elsewhere = tmp_path / f".skts-{'0' * 12}-{int(dead.stdout)}-ijkl.npy"
    older = tmp_path / f".skts-{int(dead.stdout)}-mnop.npy"  # (no host: kept)
    for path in (stale, alive, elsewhere, older):
        path.write_bytes(b"x" * 1000)
    r = run(
        *fit_args(folder, tmp_path / "c.json"),
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert not stale.exists()
    assert alive.exists() and elsewhere.exists() and older.exists()
    assert host != "0" * 12


def test_an_output_that_appears_meanwhile_is_not_clobbered(tmp_path):
    from skts.cli._common import CLIError
    from skts.cli._outputs import _atomic_outputs

    target = tmp_path / "p.json"
    with pytest.raises(CLIError, match="appeared while writing"):
        with _atomic_outputs([str(target)], force=False) as (tmp,):
            Path(tmp).write_text("mine")
            target.write_text("theirs")  # a concurrent run finished first
    assert target.read_text() == "theirs"
    assert [p.name for p in tmp_path.iterdir()] == ["p.json"]
    # Two outputs, the second taken meanwhile: the first is taken back too.
    first, second = tmp_path / "a.npy", tmp_path / "b.npy"
    with pytest.raises(CLIError):
        with _atomic_outputs([str(first), str(second)], force=False) as temps:
            for t in temps:
                Path(t).write_text("mine")
            second.write_text("theirs")
    assert not first.exists() and second.read_text() == "theirs"
    with _atomic_outputs([str(target)], force=True) as (tmp,):
        Path(tmp).write_text("forced")
    assert target.read_text() == "forced"


@pytest.mark.parametrize("bootstrap", ["0", "5"])
def test_report_log_loss_from_logits_is_exact(tmp_path, capsys, bootstrap):
    rng = np.random.RandomState(0)
    logits = rng.normal(size=(100, 3))
    y = rng.randint(0, 3, 100)
    logits[0] = [0.0, 53.0, 0.0]  # p(y=0) = 9e-24: clipping would say 36.04
    y[0] = 0
    got = report_values(capsys, tmp_path, logits, y, bootstrap)["log_loss"]
    m = logits.max(1)
    exact = np.mean(
        m - logits[np.arange(100), y] + np.log(np.exp(logits - m[:, None]).sum(1))
    )
    assert got == pytest.approx(exact, rel=1e-12)


def test_no_numpy_runtime_warnings_reach_users(tmp_path):
    rng = np.random.RandomState(0)
    cases = {
        "ordinary": rng.normal(scale=4, size=(400, 5)).astype(np.float32),
        "huge": rng.normal(size=(400, 5)) * 1e300,
        "separable": np.eye(5, dtype=np.float32)[np.arange(400) % 5] * 60,
    }
    for name, z in cases.items():
        y = z.argmax(1) if name == "separable" else rng.randint(0, 5, 400)
        np.save(tmp_path / f"{name}.npy", z)
        np.save(tmp_path / f"{name}_y.npy", y)
        for args in (
            [
                "fit",
                "--logits",
                f"{name}.npy",
                "--labels",
                f"{name}_y.npy",
                "--out",
                f"{name}.json",
                "--solver",
                "continuous",
            ],
            [
                "report",
                "--logits",
                f"{name}.npy",
                "--labels",
                f"{name}_y.npy",
                "--calibration",
                f"{name}.json",
                "--bootstrap",
                "3",
            ],
        ):
            r = subprocess.run(
                [sys.executable, "-W", "error::RuntimeWarning", "-m", "skts", *args],
                capture_output=True,
                text=True,
                cwd=tmp_path,
                timeout=300,
            )
            assert r.returncode == 0, r.stderr
            assert "RuntimeWarning" not in r.stderr
            assert all("the validation loss" in line for line in r.stderr.splitlines())


def test_bad_label_in_a_file_names_the_value_and_position(files, tmp_path, capsys):
    folder, _, y = files
    labels = y[:300].astype(float)
    labels[17] = 1e20
    np.save(tmp_path / "y.npy", labels)
    code, out = main_in_process(
        capsys,
        "fit",
        "--logits",
        folder / "val.npy",
        "--labels",
        tmp_path / "y.npy",
        "--out",
        tmp_path / "c.json",
    )
    assert code == 2
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and "got 1e+20 at position 17" in lines[0]


@pytest.mark.parametrize("bootstrap", ["0", "4"])
def test_report_when_the_labels_lack_a_class(tmp_path, capsys, bootstrap):
    # Logit columns are class indices by definition: nothing to guess even
    # when the labels never mention class 2.
    from skts._numerics import softmax
    from skts.metrics import expected_calibration_error

    rng = np.random.RandomState(0)
    logits = rng.normal(scale=2, size=(200, 3))
    y = rng.randint(0, 2, 200)
    got = report_values(capsys, tmp_path, logits, y, bootstrap)["ece"]
    expected = expected_calibration_error(y, softmax(logits, 1.0), labels=[0, 1, 2])
    assert got == pytest.approx(expected, rel=1e-12)


# --------------------------------------------------------------------------
# Shards (a folder or glob of .npy files, read lazily with Dask) and a running
# dask.distributed scheduler.


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    pytest.importorskip("dask.array", reason="dask is not installed (skts[dask])")
    folder = tmp_path_factory.mktemp("shards")
    rng = np.random.default_rng(3)
    n, k = 30_000, 10
    logits = (rng.normal(size=(n, k)) * 3).astype(np.float32)
    y = rng.integers(0, k, n)
    logits[np.arange(n), y] += 2.5
    (folder / "z").mkdir()
    (folder / "y").mkdir()
    for i, (a, b) in enumerate([(0, 7_000), (7_000, 19_000), (19_000, n)]):
        np.save(folder / "z" / f"part{i}.npy", logits[a:b])
        np.save(folder / "y" / f"part{i}.npy", y[a:b])
    np.save(folder / "all.npy", logits)
    np.save(folder / "all_y.npy", y)
    return folder, logits, y


def _json(path):
    return json.loads(Path(path).read_text())


def test_shards_fit_report_apply_equal_the_single_file(shards, tmp_path):
    folder, logits, y = shards
    one, lazy = tmp_path / "one.json", tmp_path / "lazy.json"
    r = run(
        "fit",
        "--logits",
        folder / "all.npy",
        "--labels",
        folder / "all_y.npy",
        "--out",
        one,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    # A folder for the logits, a glob for the labels, paired by sorted name.
    r = run(
        "fit",
        "--logits",
        folder / "z",
        "--labels",
        f"{folder}/y/part*.npy",
        "--out",
        lazy,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    a, b = _json(one), _json(lazy)
    assert (
        b["temperature"]
        == a["temperature"]
        == TemperatureScaler().fit(logits, y).temperature_
    )
    assert b["validation_loss"] == a["validation_loss"]
    assert b["n_samples"] == 30_000
    for when in ("before", "after"):
        for name, value in a["metrics"][when]["values"].items():
            assert b["metrics"][when]["values"][name] == pytest.approx(value, 1e-12)
    # Shards of logits beside one labels file: the same.
    r = run(
        "fit",
        "--logits",
        folder / "z",
        "--labels",
        folder / "all_y.npy",
        "--out",
        tmp_path / "mixed.json",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert _json(tmp_path / "mixed.json")["metrics"] == b["metrics"]
    r = run(
        "apply",
        "--logits",
        folder / "z",
        "--calibration",
        lazy,
        "--out",
        tmp_path / "p.npy",
        "--labels-out",
        tmp_path / "l.npy",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    expected = TemperatureScaler().fit(logits, y)
    np.testing.assert_array_equal(
        np.load(tmp_path / "p.npy"), expected.predict_proba(logits).astype(np.float32)
    )
    np.testing.assert_array_equal(np.load(tmp_path / "l.npy"), logits.argmax(1))
    r = run(
        "report",
        "--logits",
        folder / "z",
        "--labels",
        folder / "y",
        "--calibration",
        lazy,
        "--json",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["metrics"] == b["metrics"]


@pytest.mark.slow
def test_shard_errors_are_one_line_and_write_nothing(shards, tmp_path):
    folder, logits, y = shards
    out = tmp_path / "c.json"
    r = run(
        "fit",
        "--logits",
        tmp_path / "none*.npy",
        "--labels",
        folder / "y",
        "--out",
        out,
        cwd=tmp_path,
    )
    assert_one_line_error(r, "no .npy shards found for logits")
    r = run(
        "fit",
        "--logits",
        folder / "z",
        "--labels",
        folder / "y",
        "--bootstrap",
        "3",
        "--out",
        out,
        cwd=tmp_path,
    )
    assert_one_line_error(r, "--bootstrap", "not available with shards")
    # Labels shards cut differently from the logits shards.
    bad = tmp_path / "ybad"
    bad.mkdir()
    np.save(bad / "a.npy", y[:10_000])
    np.save(bad / "b.npy", y[10_000:])
    r = run(
        "fit", "--logits", folder / "z", "--labels", bad, "--out", out, cwd=tmp_path
    )
    assert_one_line_error(r, "are 2 shards but the logits are 3")
    np.save(bad / "b.npy", y[10_000:20_000])
    np.save(bad / "c.npy", y[20_000:])
    r = run(
        "fit", "--logits", folder / "z", "--labels", bad, "--out", out, cwd=tmp_path
    )
    assert_one_line_error(r, "labels shard 0", "10000 labels", "7000 rows")
    # A label out of range, reported at its row in the whole data set.
    y_bad = tmp_path / "ybad2"
    y_bad.mkdir()
    for i, (a, b) in enumerate([(0, 7_000), (7_000, 19_000), (19_000, 30_000)]):
        part = y[a:b].copy()
        if i == 1:
            part[5] = 12
        np.save(y_bad / f"part{i}.npy", part)
    r = run(
        "fit", "--logits", folder / "z", "--labels", y_bad, "--out", out, cwd=tmp_path
    )
    assert_one_line_error(r, "got 12 at position 7005")
    # Shards of different widths.
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    np.save(mixed / "a.npy", logits[:10, :5])
    np.save(mixed / "b.npy", logits[10:20])
    r = run(
        "fit",
        "--logits",
        mixed,
        "--labels",
        folder / "all_y.npy",
        "--out",
        out,
        cwd=tmp_path,
    )
    assert_one_line_error(r, "logits shard", "b.npy", "first shard")
    r = run(
        "fit",
        "--logits",
        folder / "z",
        "--labels",
        folder / "y",
        "--out",
        out,
        "--scheduler",
        "tcp://127.0.0.1:9",
        cwd=tmp_path,
    )
    assert_one_line_error(r, "cannot connect to the Dask scheduler")
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".skts-")]


def test_scheduler_runs_the_fit_on_a_running_cluster(shards, tmp_path):
    distributed = pytest.importorskip("distributed")
    folder, logits, y = shards
    out = tmp_path / "c.json"
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=":0",
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        before = client.run(
            lambda dask_worker: len(dask_worker.data) + len(dask_worker.state.log),
        )
        r = run(
            "fit",
            "--logits",
            folder / "z",
            "--labels",
            folder / "y",
            "--solver",
            "continuous",
            "--out",
            out,
            "--scheduler",
            cluster.scheduler_address,
            cwd=tmp_path,
        )
        assert r.returncode == 0, r.stderr
        # The workers did the work: their task logs grew.
        after = client.run(
            lambda dask_worker: len(dask_worker.data) + len(dask_worker.state.log),
        )
        assert sum(after.values()) > sum(before.values())
    expected = TemperatureScaler(solver="continuous").fit(logits, y)
    assert _json(out)["temperature"] == expected.temperature_


def test_report_groups_beside_the_whole(files, tmp_path):
    folder, logits, y = files
    groups = np.where(np.arange(300) % 3 == 0, "left", "right")
    np.savetxt(tmp_path / "groups.txt", groups, fmt="%s")
    np.save(tmp_path / "groups.npy", (np.arange(300) % 3 == 0).astype(np.int64))
    calib = tmp_path / "calib.json"
    assert run(*fit_args(folder, calib), cwd=tmp_path).returncode == 0
    t = json.loads(calib.read_text())["temperature"]
    r = run(
        "report",
        "--logits",
        folder / "val.npy",
        "--labels",
        folder / "val_y.npy",
        "--calibration",
        calib,
        "--groups",
        tmp_path / "groups.txt",
        "--json",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    metrics = json.loads(r.stdout)["metrics"]
    scaler = TemperatureScaler(temperatures=[t], dtype=np.float64).fit(
            logits[:300], y[:300]
        )
    proba = scaler.predict_proba(logits[:300])
    for name, p in (
        ("after", proba),
        # (float64: a float32 array times t would round to float32.)
        ("before", scaler.predict_proba(logits[:300].astype(np.float64) * t)),
    ):
        parts = metrics[name]["groups"]
        assert sorted(parts) == ["left", "right"]
        for g in ("left", "right"):
            rows = groups == g
            expected = calibration_report(y[:300][rows], p[rows], labels=range(5))
            assert parts[g]["n_samples"] == rows.sum()
            for key, value in expected.values.items():
                assert parts[g]["values"][key] == pytest.approx(value, rel=1e-9)
    # The table: a column per group, with its size.
    r = run(
        "report",
        "--logits",
        folder / "val.npy",
        "--labels",
        folder / "val_y.npy",
        "--groups",
        tmp_path / "groups.npy",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert "by group (before)" in r.stdout
    assert "0 (n=200)" in r.stdout and "1 (n=100)" in r.stdout
    np.save(tmp_path / "short.npy", np.zeros(299))
    r = run(
        "report",
        "--logits",
        folder / "val.npy",
        "--labels",
        folder / "val_y.npy",
        "--groups",
        tmp_path / "short.npy",
        cwd=tmp_path,
    )
    assert_one_line_error(r, "300 rows", "299 labels")


@pytest.mark.parametrize("force", [False, True])
def test_an_output_that_cannot_be_written_is_refused_before_any_work(
    files, tmp_path, force
):
    # (issue 25) a dangling symbolic link, or a directory, as --out: one line
    # up front, naming what it is, and nothing is written.
    folder, _, _ = files
    link = tmp_path / "c.json"
    link.symlink_to(tmp_path / "nowhere" / "c.json")
    extra = ("--force",) if force else ()
    r = run(*fit_args(folder, link), *extra, cwd=tmp_path)
    assert_one_line_error(r, "is a symbolic link to", "which does not exist")
    folder_out = tmp_path / "out.json"
    folder_out.mkdir()
    r = run(*fit_args(folder, folder_out), *extra, cwd=tmp_path)
    assert_one_line_error(r, "out.json' is a directory")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".skts-")]


def test_nan_group_labels_are_one_line(files, tmp_path):
    folder, _, _ = files
    groups = np.ones(300)
    groups[7] = np.nan
    np.save(tmp_path / "g.npy", groups)
    r = run(
        "report",
        "--logits",
        folder / "test.npy",
        "--labels",
        folder / "test_y.npy",
        "--groups",
        tmp_path / "g.npy",
        cwd=tmp_path,
    )
    assert_one_line_error(r, "g.npy' must be finite labels; got nan at position 7")


@pytest.mark.parametrize("count", ["-1", "1000000000000"])
def test_a_bootstrap_count_out_of_range_is_refused_up_front(files, tmp_path, count):
    # (issue 25) a huge count failed after reading, as "Unable to allocate
    # 1.20 PiB": the option is named, before any work.
    folder, _, _ = files
    r = run(
        "report", "--logits", folder / "test.npy", "--labels", folder / "test_y.npy",
        "--bootstrap", count, cwd=tmp_path,
    )  # fmt: skip
    assert_one_line_error(r, "--bootstrap must be between 0 and 1,000,000; got")


def test_relative_shard_paths_reach_workers_in_another_folder(shards, tmp_path):
    # (issue 25) the shards' paths are resolved before they travel: workers
    # whose working folder differs from the client's read the same files.
    distributed = pytest.importorskip("distributed")
    folder, logits, y = shards
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with (
        distributed.LocalCluster(
            n_workers=1,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=":0",
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        client.run(os.chdir, str(elsewhere))
        assert set(client.run(os.getcwd).values()) == {str(elsewhere)}
        r = run(
            "fit", "--logits", "z", "--labels", "y", "--out", tmp_path / "c.json",
            "--scheduler", cluster.scheduler_address, cwd=folder,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
    expected = TemperatureScaler().fit(logits, y)
    assert _json(tmp_path / "c.json")["temperature"] == expected.temperature_


def test_a_folder_named_like_a_file_is_said_to_be_a_folder(files, tmp_path):
    folder, _, _ = files
    (tmp_path / "adir.npy").mkdir()
    r = run(
        "fit", "--logits", "adir.npy", "--labels", folder / "val_y.npy",
        "--out", "c.json", cwd=tmp_path,
    )  # fmt: skip
    assert_one_line_error(r, "logits 'adir.npy' is a directory, not a .npy file")


@pytest.mark.parametrize(
    ("spec", "want"), [("5e-324,1", 1.0), ("1e-320,1e-319", 1e-319)]
)
def test_subnormal_candidates_follow_the_rule_on_the_command_line(tmp_path, spec, want):
    # (issue 25) the smallest candidate and numpy's "overflow encountered in
    # scalar divide" were printed; the rule's answer, no numpy warning.
    np.save(tmp_path / "z.npy", np.array([[0.4, -0.4], [1.9, 0.3]]))
    np.save(tmp_path / "y.npy", np.array([0, 1]))
    r = run(
        "fit", "--logits", "z.npy", "--labels", "y.npy", "--temperatures", spec,
        "--out", "c.json", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "RuntimeWarning" not in r.stderr and "overflow" not in r.stderr
    assert _json(tmp_path / "c.json")["temperature"] == want


@pytest.mark.parametrize("sig, code", [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_signal_a_library_reports_as_its_own_error_still_interrupts(
    files, tmp_path, monkeypatch, capsys, sig, code
):
    """A library may turn the signal's exception into one of its own (pybind11
    makes a KeyboardInterrupt during a module's import, which scipy does
    lazily, an ``ImportError: initialization failed``; CI saw a Ctrl-C end
    ``skts apply`` with "reading the shards failed: initialization failed"
    and exit 2). The command still exits 130 (143), with nothing written;
    the same error without a signal stays an error."""
    import signal

    from skts.cli import _apply, _signals, main

    folder, out = _fitted(files, tmp_path)
    args = ["apply", "--logits", str(folder / "test.npy"), "--calibration",
            str(tmp_path / "c.json"), "--out", str(out / "p.npy")]

    def import_interrupted(*a, **kw):
        try:
            os.kill(os.getpid(), getattr(signal, sig))
        except (KeyboardInterrupt, _signals.Terminated):
            raise ImportError("initialization failed") from None
        raise AssertionError("the signal was not raised")

    def import_failed(*a, **kw):
        raise ImportError("initialization failed")

    for load, want, message in (
        (import_interrupted, code, "interrupted" if code == 130 else "terminated"),
        (import_failed, 2, "reading the shards failed: initialization failed"),
    ):
        monkeypatch.setattr(_apply, "_load_logits", load)
        capsys.readouterr()
        assert main(args) == want
        assert capsys.readouterr().err.strip().endswith(message)
        assert list(out.iterdir()) == []
    monkeypatch.undo()
    assert main(args) == 0  # (no signal left over from the first run)


def test_fit_leaves_the_finiteness_test_to_its_reads(tmp_path, capsys, monkeypatch):
    # `skts fit` on a file leaves the logits' finiteness test to the fit's
    # reads (one read of the file fewer): finite logits never run it; a NaN
    # or an infinity outside the warm start's sample, in a memory-mapped
    # file, still gives the check's one-line message and writes nothing.
    import skts._validation
    from skts._numerics import subsample_rows

    tests = []
    real = skts._validation.check_finite

    def counted(arr, name="logits"):
        tests.append(name)
        real(arr, name)

    monkeypatch.setattr(skts._validation, "check_finite", counted)
    rng = np.random.default_rng(5)
    n, k = 300_000, 10
    z = (rng.normal(size=(n, k)) * 3).astype(np.float32)
    y = np.argmax(z + rng.gumbel(size=(n, k)) * 2, axis=1)
    np.save(tmp_path / "y.npy", y)
    np.save(tmp_path / "z.npy", z)
    args = ("fit", "--logits", tmp_path / "z.npy", "--labels", tmp_path / "y.npy")
    code, out = main_in_process(capsys, *args, "--out", tmp_path / "ok.json")
    assert code == 0, out.err
    assert json.loads((tmp_path / "ok.json").read_text())["temperature"] == (
        TemperatureScaler().fit(z, y).temperature_
    )
    assert tests == []
    outside = np.setdiff1d(np.arange(n), np.arange(n)[subsample_rows(n, k)])
    path = str(tmp_path / "bad.npy")
    for value, words in ((np.nan, "NaN"), (-np.inf, "infinity or a value too large")):
        bad = z.copy()
        row, column = rng.choice(outside), rng.integers(k)
        bad[row, column] = value
        np.save(path, bad)
        out_file = tmp_path / "bad.json"
        bad_args = (*args[:2], path, *args[3:], "--out", out_file)
        code, out = main_in_process(capsys, *bad_args)
        assert code == 2
        # (the line the check at load gave: no trailing full stop)
        assert out.err.strip().splitlines() == [
            f"skts fit: error: Input logits file {path!r} contains {words}"
            + ("" if value != value else " for dtype('float32')")
            + f", first at row {row}, column {column}"
        ], out.err
        assert not out_file.exists()
    assert len(tests) == 2
