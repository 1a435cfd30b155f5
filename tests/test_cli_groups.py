"""``skts fit --groups``, ``skts apply --groups`` and ``skts ladder``: the
library's answers on files, one-line errors, nothing half-written."""

import json

import numpy as np
import pytest
from test_cli import assert_one_line_error, run

from skts import TemperatureScaler, calibration_ladder


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    here = tmp_path_factory.mktemp("groups")
    rng = np.random.default_rng(0)
    z = rng.normal(size=(3000, 3)) * 3
    t = np.array([0.4, 3.0, 1.0])[z.argmax(axis=1)]
    p = np.exp(z / t[:, None])
    p /= p.sum(axis=1, keepdims=True)
    y = (p.cumsum(axis=1) < rng.random((3000, 1))).sum(axis=1).clip(0, 2)
    np.save(here / "z.npy", z.astype(np.float32))
    np.save(here / "y.npy", y)
    site = np.array(["north", "south"])[rng.integers(0, 2, 3000)]
    np.savetxt(here / "site.csv", site, fmt="%s")
    return here


def _data(folder):
    z, y = np.load(folder / "z.npy"), np.load(folder / "y.npy")
    return z, y, np.loadtxt(folder / "site.csv", dtype=str)


@pytest.mark.parametrize("groups", ["predicted", "site.csv"])
def test_fit_and_apply_by_group_are_the_librarys(folder, groups, tmp_path):
    z, y, site = _data(folder)
    g = "predicted" if groups == "predicted" else site
    r = run("fit", "--logits", folder / "z.npy", "--labels", folder / "y.npy",
            "--groups", folder / groups if groups != "predicted" else groups,
            "--out", tmp_path / "c.json", cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    calib = json.loads((tmp_path / "c.json").read_text())
    scaler = TemperatureScaler().fit(z, y, groups=g)
    assert calib["temperature"] == scaler.temperature_
    assert calib["group_shrinkage"] == scaler.group_shrinkage_
    assert calib["temperatures_by_group"] == {
        str(k): v for k, v in scaler.temperatures_by_group_.items()
    }
    assert calib["groups"] == ("predicted" if groups == "predicted" else "labels")
    extra = [] if groups == "predicted" else ["--groups", folder / groups]
    r = run("apply", "--logits", folder / "z.npy", "--calibration", tmp_path / "c.json",
            "--out", tmp_path / "p.npy", *extra, cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(
        np.load(tmp_path / "p.npy"), scaler.predict_proba(z, groups=g)
    )


def test_apply_without_or_with_unseen_groups_says_so(folder, tmp_path):
    z, y, site = _data(folder)
    run("fit", "--logits", folder / "z.npy", "--labels", folder / "y.npy",
        "--groups", folder / "site.csv", "--out", tmp_path / "c.json",
        cwd=tmp_path)  # fmt: skip
    r = run("apply", "--logits", folder / "z.npy", "--calibration", tmp_path / "c.json",
            "--out", tmp_path / "p.npy", cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0 and "every row gets the pooled T" in r.stderr
    pooled = TemperatureScaler().fit(z, y).predict_proba(z)
    np.testing.assert_array_equal(np.load(tmp_path / "p.npy"), pooled)
    other = site.copy()
    other[3] = "west"
    np.savetxt(tmp_path / "other.csv", other, fmt="%s")
    r = run("apply", "--logits", folder / "z.npy", "--calibration", tmp_path / "c.json",
            "--out", tmp_path / "q.npy", "--groups", tmp_path / "other.csv",
            cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0 and "group 'west' was not seen in fit" in r.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "q.npy")[3], pooled[3])


def test_group_mistakes_are_one_line_and_write_nothing(folder, tmp_path):
    base = ["--logits", folder / "z.npy", "--labels", folder / "y.npy"]
    r = run("fit", *base, "--groups", tmp_path / "none.npy", "--out",
            tmp_path / "c.json", cwd=tmp_path)  # fmt: skip
    assert_one_line_error(r, "cannot read groups file", "no such file")
    np.save(tmp_path / "short.npy", np.zeros(10))
    r = run("fit", *base, "--groups", tmp_path / "short.npy", "--out",
            tmp_path / "c.json", cwd=tmp_path)  # fmt: skip
    assert_one_line_error(r, "3000 rows", "10 labels")
    r = run("fit", *base, "--groups", "predicted", "--group-shrinkage", "-3",
            "--out", tmp_path / "c.json", cwd=tmp_path)  # fmt: skip
    assert_one_line_error(r, "--group-shrinkage", "'-3'")
    assert not (tmp_path / "c.json").exists()
    run(
        "fit",
        *base,
        "--groups",
        "predicted",
        "--out",
        tmp_path / "c.json",
        cwd=tmp_path,
    )
    r = run("apply", "--logits", folder / "z.npy", "--calibration", tmp_path / "c.json",
            "--out", tmp_path / "p.npy", "--groups", folder / "site.csv",
            cwd=tmp_path)  # fmt: skip
    assert_one_line_error(r, "temperatures per the predicted class", "does not match")
    assert not (tmp_path / "p.npy").exists()
    run("fit", *base, "--out", tmp_path / "plain.json", cwd=tmp_path)
    r = run("apply", "--logits", folder / "z.npy", "--calibration",
            tmp_path / "plain.json", "--out", tmp_path / "p.npy", "--groups",
            "predicted", cwd=tmp_path)  # fmt: skip
    assert_one_line_error(r, "has no temperatures per group")


def test_ladder_prints_and_writes_the_librarys_verdict(folder, tmp_path):
    z, y, site = _data(folder)
    r = run("ladder", "--logits", folder / "z.npy", "--labels", folder / "y.npy",
            "--bootstrap", "40", "--out", tmp_path / "l.json",
            cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    expected = calibration_ladder(z, y, n_bootstrap=40, random_state=0)
    got = json.loads((tmp_path / "l.json").read_text())
    assert got == json.loads(json.dumps(expected.to_dict()))
    assert got["verdict"] == "group temperature"
    assert "verdict: group temperature" in r.stdout
    r = run("ladder", "--logits", folder / "z.npy", "--labels", folder / "y.npy",
            "--groups", folder / "site.csv", "--bootstrap", "40", "--out", "-",
            cwd=tmp_path)  # fmt: skip
    by_site = calibration_ladder(z, y, groups=site, n_bootstrap=40, random_state=0)
    assert json.loads(r.stdout) == json.loads(json.dumps(by_site.to_dict()))
    r = run("ladder", "--logits", folder / "z.npy", "--labels", folder / "y.npy",
            "--cv", "1", cwd=tmp_path)  # fmt: skip
    assert_one_line_error(r, "--cv", "at least 2")
