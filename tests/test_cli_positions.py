"""The command line on deep-learning files: per-pixel and per-token logits
(--class-axis), padding (--ignore-index), and .pt/.safetensors files of named
tensors read without naming the keys (issue 29)."""

import json

import numpy as np
import pytest
from test_cli import assert_one_line_error, run

from skts import TemperatureScaler
from skts import metrics as skm

torch = pytest.importorskip("torch", reason="PyTorch is optional (pip install torch)")


def _segmentation(seed=0):
    rng = np.random.default_rng(seed)
    z = (rng.normal(size=(6, 5, 12, 10)) * 3).astype(np.float32)
    p = np.exp(z / 2.5)
    p /= p.sum(axis=1, keepdims=True)
    u = rng.random((6, 1, 12, 10))
    y = (p.cumsum(axis=1) < u).sum(axis=1).clip(0, 4)
    y[:, 0, :] = -100
    return z, y


@pytest.fixture
def files(tmp_path):
    z, y = _segmentation()
    torch.save(
        {"logits": torch.from_numpy(z), "labels": torch.from_numpy(y)},
        tmp_path / "seg.pt",
    )
    return tmp_path, z, y


def test_fit_apply_report_on_segmentation_logits(files):
    tmp, z, y = files
    r = run(
        "fit",
        "--logits",
        "seg.pt",
        "--labels",
        "seg.pt",
        "--ignore-index",
        "-100",
        "--out",
        "calib.json",
        cwd=tmp,
    )
    assert r.returncode == 0, r.stderr
    calib = json.loads((tmp / "calib.json").read_text())
    ref = TemperatureScaler(ignore_index=-100).fit(z, y)
    assert calib["temperature"] == ref.temperature_
    assert calib["n_samples"] == int((y != -100).sum()) and calib["n_classes"] == 5
    r = run(
        "apply",
        "--logits",
        "seg.pt",
        "--calibration",
        "calib.json",
        "--out",
        "p.npy",
        "--labels-out",
        "l.npy",
        cwd=tmp,
    )
    assert r.returncode == 0, r.stderr
    proba = np.load(tmp / "p.npy")
    assert proba.shape == z.shape  # the input's layout
    np.testing.assert_array_equal(proba, ref.predict_proba(z))
    np.testing.assert_array_equal(np.load(tmp / "l.npy"), z.argmax(axis=1))
    r = run(
        "report",
        "--logits",
        "seg.pt",
        "--labels",
        "seg.pt",
        "--ignore-index",
        "-100",
        "--calibration",
        "calib.json",
        "--json",
        cwd=tmp,
    )
    assert r.returncode == 0, r.stderr
    after = json.loads(r.stdout)["metrics"]["after"]["values"]
    expected = skm.calibration_report(
        y, ref.predict_proba(z).astype(np.float64), ignore_index=-100, labels=range(5)
    )
    for key, value in expected.values.items():
        assert after[key] == pytest.approx(value, rel=1e-6), key


def test_token_logits_in_safetensors_bfloat16(tmp_path):
    from safetensors.torch import save_file

    rng = np.random.default_rng(1)
    z = torch.from_numpy((rng.normal(size=(5, 8, 30)) * 4).astype(np.float32)).to(
        torch.bfloat16
    )
    y = z.float().argmax(-1)
    flip = torch.from_numpy(rng.random(y.shape) < 0.3)
    y[flip] = torch.from_numpy(rng.integers(0, 30, size=int(flip.sum())))
    y[:, 6:] = -100
    save_file(
        {"logits": z, "labels": y, "attention_mask": torch.ones(5, 8)},
        tmp_path / "tok.safetensors",
    )
    r = run(
        "fit",
        "--logits",
        "tok.safetensors",
        "--labels",
        "tok.safetensors",
        "--class-axis",
        "-1",
        "--ignore-index",
        "-100",
        "--out",
        "c.json",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    ref = TemperatureScaler(class_axis=-1, ignore_index=-100).fit(z, y)
    assert (
        json.loads((tmp_path / "c.json").read_text())["temperature"] == ref.temperature_
    )


@pytest.mark.slow
def test_mistakes_are_one_line(files):
    tmp, _, y = files
    r = run(
        "fit", "--logits", "seg.pt", "--labels", "seg.pt", "--out", "c.json", cwd=tmp
    )
    assert_one_line_error(r, "class indices in [0, 5)", "pass --ignore-index -100")
    np.save(tmp / "flat.npy", y.reshape(6, -1))
    r = run(
        "fit",
        "--logits",
        "seg.pt",
        "--labels",
        "flat.npy",
        "--ignore-index",
        "-100",
        "--out",
        "c.json",
        cwd=tmp,
    )
    assert_one_line_error(r, "must have shape (6, 12, 10)", "got (6, 120)")
    r = run(
        "fit",
        "--logits",
        "seg.pt",
        "--labels",
        "seg.pt",
        "--class-axis",
        "0",
        "--out",
        "c.json",
        cwd=tmp,
    )
    assert_one_line_error(r, "class_axis=0 is not an axis")
    np.save(tmp / "pad.npy", np.full(y.shape, -100))
    r = run(
        "fit",
        "--logits",
        "seg.pt",
        "--labels",
        "pad.npy",
        "--ignore-index",
        "-100",
        "--out",
        "c.json",
        cwd=tmp,
    )
    assert_one_line_error(r, "every label", "nothing to calibrate on")
    r = run(
        "fit",
        "--logits",
        "seg.pt",
        "--labels",
        "seg.pt",
        "--ignore-index",
        "-100",
        "--out",
        "c.json",
        cwd=tmp,
    )
    assert r.returncode == 0
    r = run(
        "apply",
        "--logits",
        "seg.pt",
        "--calibration",
        "c.json",
        "--out",
        "p.csv",
        cwd=tmp,
    )
    assert_one_line_error(r, "written as .npy")
    assert not (tmp / "p.csv").exists()
