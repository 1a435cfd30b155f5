"""The command line as a tool people script: help, start-up, JSON schema,
stdout, CSV headers; and the public namespace of skts.metrics."""

import json
import subprocess
import sys

import numpy as np
import pytest
from test_cli import assert_one_line_error, run

import skts.metrics
from skts import TemperatureScaler
from skts.cli._common import SCHEMA_VERSION


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tool")
    rng = np.random.default_rng(0)
    z = (rng.normal(size=(800, 4)) * 3).astype(np.float32)
    y = np.where(rng.random(800) < 0.6, z.argmax(axis=1), rng.integers(0, 4, 800))
    np.save(folder / "z.npy", z)
    np.save(folder / "y.npy", y)
    return folder, z, y


@pytest.mark.parametrize(
    "command, default",
    [
        ("fit", "(default: grid)"),
        ("apply", "(default: the input's, at least float32)"),
        ("report", "(default: 0)"),
        ("demo", "(default: skts-demo)"),
        ("ladder", "(default: 200)"),
    ],
)
def test_help_shows_defaults_and_an_example(command, default, tmp_path):
    r = run(command, "--help", cwd=tmp_path)
    assert r.returncode == 0
    text = " ".join(r.stdout.split())  # (argparse wraps lines)
    assert default in text
    assert "example" in r.stdout and f"skts {command} " in r.stdout
    assert "(default: None)" not in text and "(default: False)" not in text


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["fit", "--help"]])
def test_version_and_help_do_not_import_scikit_learn(args, tmp_path):
    # What makes them slow (most of a second): scikit-learn and SciPy. They
    # are imported only by the commands that use them.
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "skts", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert r.returncode == 0
    imported = {line.rsplit("|", 1)[-1].strip() for line in r.stderr.splitlines()}
    assert "numpy" in imported  # (the check sees imports)
    assert not {m for m in imported if m.split(".")[0] in ("sklearn", "scipy")}


def test_import_skts_is_light_until_a_name_is_used():
    code = (
        "import sys, skts; print('sklearn' in sys.modules); "
        "skts.TemperatureScaler; print('sklearn' in sys.modules)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.stdout.split() == ["False", "True"], r.stderr


def test_fit_and_report_json_share_one_schema(files):
    folder, z, _ = files
    r = run(
        "fit",
        "--logits",
        "z.npy",
        "--labels",
        "y.npy",
        "--out",
        "c.json",
        "--force",
        cwd=folder,
    )
    assert r.returncode == 0, r.stderr
    fit = json.loads((folder / "c.json").read_text())
    r = run(
        "report",
        "--logits",
        "z.npy",
        "--labels",
        "y.npy",
        "--calibration",
        "c.json",
        "--json",
        cwd=folder,
    )
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    shared = [
        "schema_version",
        "skts_version",
        "temperature",
        "n_samples",
        "n_classes",
        "metrics",
    ]
    # (2: report --compare's "comparison"; 3: fit --groups's temperatures per
    # group; older files still read)
    assert fit["schema_version"] == report["schema_version"] == SCHEMA_VERSION == 3
    for key in shared:
        assert key in fit and key in report, key
    assert report["temperature"] == fit["temperature"]
    assert (report["n_samples"], report["n_classes"]) == z.shape
    # The same data: the same metrics, in the same layout.
    assert report["metrics"] == fit["metrics"]
    r = run("report", "--logits", "z.npy", "--labels", "y.npy", "--json", cwd=folder)
    uncalibrated = json.loads(r.stdout)
    assert uncalibrated["temperature"] is None
    assert set(uncalibrated["metrics"]) == {"before"}


def test_a_newer_schema_is_refused(files):
    folder, _, _ = files
    calib = {"schema_version": SCHEMA_VERSION + 1, "temperature": 2.0, "n_classes": 4}
    (folder / "new.json").write_text(json.dumps(calib))
    r = run(
        "apply",
        "--logits",
        "z.npy",
        "--calibration",
        "new.json",
        "--out",
        "p.npy",
        cwd=folder,
    )
    assert_one_line_error(r, f"schema_version {SCHEMA_VERSION + 1}", "upgrade skts")
    assert not (folder / "p.npy").exists()


@pytest.mark.parametrize("schema", [1, 2])
def test_older_schemas_are_read(files, schema, tmp_path):
    # Versions 2 and 3 only added keys (report's "comparison", fit's
    # temperatures per group): older calibration files still apply.
    folder, z, _ = files
    calib = {"schema_version": schema, "temperature": 2.0, "n_classes": 4}
    (tmp_path / "old.json").write_text(json.dumps(calib))
    r = run("apply", "--logits", folder / "z.npy", "--calibration",
            tmp_path / "old.json", "--out", tmp_path / "p.npy", cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    expected = TemperatureScaler(temperatures=[2.0]).fit(z[:8], np.arange(8) % 4)
    np.testing.assert_allclose(
        np.load(tmp_path / "p.npy"), expected.predict_proba(z), rtol=1e-6
    )


def test_dash_writes_to_stdout(files):
    folder, z, y = files
    r = run("fit", "--logits", "z.npy", "--labels", "y.npy", "--out", "-", cwd=folder)
    assert r.returncode == 0, r.stderr
    calib = json.loads(r.stdout)  # only the JSON on stdout
    assert calib["temperature"] == TemperatureScaler().fit(z, y).temperature_
    assert "-> stdout" in r.stderr
    (folder / "c.json").write_text(r.stdout)
    r = run(
        "apply",
        "--logits",
        "z.npy",
        "--calibration",
        "c.json",
        "--out",
        "-",
        "--dtype",
        "float64",
        cwd=folder,
    )
    assert r.returncode == 0, r.stderr
    proba = np.loadtxt(r.stdout.splitlines(), delimiter=",")
    expected = TemperatureScaler(dtype=np.float64).fit(z, y).predict_proba(z)
    np.testing.assert_allclose(proba, expected, rtol=1e-15)
    r = run(
        "apply",
        "--logits",
        "z.npy",
        "--calibration",
        "c.json",
        "--labels-out",
        "-",
        cwd=folder,
    )
    np.testing.assert_array_equal(np.loadtxt(r.stdout.splitlines()), z.argmax(axis=1))
    r = run(
        "apply",
        "--logits",
        "z.npy",
        "--calibration",
        "c.json",
        "--out",
        "-",
        "--labels-out",
        "-",
        cwd=folder,
    )
    assert_one_line_error(r, "only one of --out and --labels-out")


def test_a_closed_pipe_ends_quietly(files, tmp_path):
    folder, _, _ = files
    run(
        "fit",
        "--logits",
        "z.npy",
        "--labels",
        "y.npy",
        "--out",
        str(tmp_path / "c.json"),
        cwd=folder,
    )
    # Far more output than a pipe holds (64 KiB on Linux, at most 1 MiB), so
    # the program is still writing when the reader goes away; 800 rows fit in
    # the pipe and the program could finish, exit 0, before the close.
    z = np.random.default_rng(1).normal(size=(200_000, 4)).astype(np.float32)
    np.save(tmp_path / "z.npy", z)
    folder = tmp_path
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "skts",
            "apply",
            "--logits",
            "z.npy",
            "--calibration",
            "c.json",
            "--out",
            "-",
        ],
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.readline()
    proc.stdout.close()  # as `| head -1` does
    assert proc.wait(timeout=120) == 141
    assert proc.stderr.read() == b""


def test_csv_with_a_header_row(files, tmp_path):
    _, z, y = files
    with open(tmp_path / "z.csv", "w") as fh:
        fh.write(",".join(f"logit_{j}" for j in range(4)) + "\n")
        np.savetxt(fh, z, delimiter=",", fmt="%.9g")
    with open(tmp_path / "y.csv", "w") as fh:
        fh.write('"label"\n')
        np.savetxt(fh, y, fmt="%d")
    r = run(
        "fit", "--logits", "z.csv", "--labels", "y.csv", "--out", "c.json", cwd=tmp_path
    )
    assert r.returncode == 0, r.stderr
    t = json.loads((tmp_path / "c.json").read_text())["temperature"]
    assert t == TemperatureScaler().fit(z.astype(np.float64), y).temperature_
    (tmp_path / "mixed.csv").write_text("id,1.5,2.5\n3,4,5\n")
    r = run(
        "fit",
        "--logits",
        "mixed.csv",
        "--labels",
        "y.csv",
        "--out",
        "m.json",
        cwd=tmp_path,
    )
    assert_one_line_error(r, "first row mixes names and numbers")


def test_metrics_exposes_only_its_public_names():
    public = [name for name in dir(skts.metrics) if not name.startswith("__")]
    assert public == sorted(skts.metrics.__all__)
    assert "np" not in public and "log_loss" not in public


def test_scorer_names_are_listed_and_named_in_errors():
    names = skts.metrics.get_scorer_names()
    assert names == sorted(names)
    assert {"neg_expected_calibration_error", "neg_log_loss"} <= set(names)
    for name in names:
        assert skts.metrics.get_scorer(name) is not None
    with pytest.raises(ValueError, match="'neg_ece' is not a scorer") as info:
        skts.metrics.get_scorer("neg_ece")
    assert str(names) in str(info.value)
    assert skts.metrics.get_scorer("accuracy") is not None  # scikit-learn's
