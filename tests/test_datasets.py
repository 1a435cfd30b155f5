"""skts.datasets: fetchers against a real HTTP server on 127.0.0.1 (started
here; no test needs the internet), the checksum, the cache, the offline
error, the restricted unpickler, and the shipped digits logits."""

import dataclasses
import hashlib
import http.server
import io
import os
import pickle
import re
import subprocess
import sys
import threading
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from skts import TemperatureScaler, datasets

from _data import DATA, MISSING

ROOT = Path(__file__).resolve().parents[1]


class _Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # (quiet)
        pass

    def do_GET(self):
        self.server.requests.append(self.path)
        super().do_GET()


@pytest.fixture
def mirror(tmp_path, monkeypatch):
    """A real HTTP server on 127.0.0.1 serving ``{repo}/{commit}/{path}``
    from a folder, set as the fetchers' mirror; ``publish(name, bytes)``
    puts a file where a remote is and makes its bytes the published ones."""
    root = tmp_path / "served"
    root.mkdir()
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0),
        lambda *a: _Handler(*a, directory=str(root)),
    )
    server.requests = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("SKTS_DATA_MIRROR", f"http://127.0.0.1:{server.server_port}")
    home = tmp_path / "home"
    monkeypatch.setenv("SKTS_DATA", str(home))

    def publish(name, payload, published=True):
        remote = datasets.REMOTES[name]
        path = root / remote.repo / remote.commit / remote.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(payload)
        if published:
            sha = hashlib.sha256(payload).hexdigest()
            monkeypatch.setitem(
                datasets.REMOTES, name, dataclasses.replace(remote, sha256=sha)
            )

    publish.server = server
    publish.home = home
    yield publish
    server.shutdown()
    server.server_close()


def _npy(array):
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def _probs(n, k, seed):
    rng = np.random.RandomState(seed)
    logits = rng.normal(scale=3, size=(n, k))
    p = np.exp(logits - logits.max(1, keepdims=True))
    return (p / p.sum(1, keepdims=True)).astype(np.float32), rng.randint(0, k, n)


def test_download_checksum_and_cache(mirror):
    rng = np.random.RandomState(0)
    val = rng.normal(size=(50, 10)).astype(np.float32), rng.randint(0, 10, (50, 1))
    test = rng.normal(size=(80, 10)).astype(np.float32), rng.randint(0, 10, (80, 1))
    mirror("densenet40_cifar10", pickle.dumps((val, test), protocol=2))
    data = datasets.fetch_densenet40_cifar10()
    assert len(mirror.server.requests) == 1
    np.testing.assert_array_equal(data.val_logits, val[0])
    np.testing.assert_array_equal(data.test_labels, test[1].ravel())
    assert data.val_labels.dtype == np.int64 and data.val_labels.shape == (50,)
    cached = mirror.home / datasets.REMOTES["densenet40_cifar10"].filename
    assert cached.exists()
    assert sorted(p.name for p in mirror.home.iterdir()) == [cached.name]
    # The second call reads the cache: no request.
    again = datasets.fetch_densenet40_cifar10(return_X_y=True)
    assert len(mirror.server.requests) == 1
    np.testing.assert_array_equal(again[2], test[0])
    # A cached file that changed is refused, not read.
    payload = bytearray(cached.read_bytes())
    payload[len(payload) // 2] ^= 1
    cached.write_bytes(bytes(payload))
    with pytest.raises(OSError, match="is not the published file"):
        datasets.fetch_densenet40_cifar10()
    datasets.clear_data_home()
    assert list(mirror.home.iterdir()) == []


def test_a_wrong_checksum_keeps_nothing_and_is_never_unpickled(mirror, monkeypatch):
    mirror("densenet40_cifar10", b"not the published bytes", published=False)

    def never(path):
        raise AssertionError("unpickled before the checksum matched")

    monkeypatch.setattr(datasets, "_unpickle_arrays", never)
    with pytest.raises(OSError) as info:
        datasets.fetch_densenet40_cifar10()
    message = str(info.value)
    assert "\n" not in message and "not the published" in message
    assert list(mirror.home.iterdir()) == []  # no file, no temporary


def test_offline_is_one_line_naming_the_url_and_where_to_save(tmp_path, monkeypatch):
    import socket

    with socket.socket() as s:  # a port with nobody listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("SKTS_DATA_MIRROR", f"http://127.0.0.1:{port}")
    home = tmp_path / "home"
    with pytest.raises(OSError) as info:
        datasets.fetch_vgg16_cifar10(data_home=home)
    message = str(info.value)
    remote = datasets.REMOTES["vgg16_cifar10"]
    assert "\n" not in message
    assert f"127.0.0.1:{port}/{remote.repo}/{remote.commit}/{remote.path}" in message
    assert str(home / remote.filename) in message
    assert list(home.iterdir()) == []
    with pytest.raises(OSError, match="download_if_missing=False"):
        datasets.fetch_vgg16_cifar10(data_home=home, download_if_missing=False)


def test_the_unpickler_admits_arrays_only(mirror, tmp_path):
    witness = tmp_path / "ran"

    class Exploit:
        def __reduce__(self):
            return (os.system, (f"touch {witness}",))

    mirror("vgg16_cifar10", pickle.dumps((Exploit(), np.zeros(3))))
    with pytest.raises(pickle.UnpicklingError, match="refusing to unpickle"):
        datasets.fetch_vgg16_cifar10()
    assert not witness.exists()


@pytest.mark.parametrize(
    "fetch, name, k",
    [
        ("fetch_wideresnet16_cifar10", "wideresnet16_cifar10", 10),
        ("fetch_densenet100_cifar100", "densenet100_cifar100", 100),
    ],
)
def test_probability_files_become_log_probabilities(mirror, fetch, name, k):
    probs, labels = _probs(10_000, k, 1)
    buffer = io.BytesIO()
    np.savez(buffer, predictions=probs, ground_truth=labels.astype(np.int64))
    mirror(name, buffer.getvalue())
    data = getattr(datasets, fetch)()
    order = np.random.RandomState(0).permutation(10_000)
    assert data.val_logits.shape == (5000, k) and data.test_logits.shape == (5000, k)
    np.testing.assert_allclose(np.exp(data.val_logits), probs[order[:5000]], rtol=1e-5)
    np.testing.assert_array_equal(data.test_labels, labels[order[5000:]])


def test_vgg_pickle_and_cleanlab_pair(mirror):
    probs, labels = _probs(10_000, 10, 2)
    mirror("vgg16_cifar10", pickle.dumps((probs, labels.reshape(-1, 1)), protocol=4))
    vgg = datasets.fetch_vgg16_cifar10()
    order = np.random.RandomState(0).permutation(10_000)
    np.testing.assert_array_equal(vgg.val_labels, labels[order[:5000]])
    mirror("cleanlab_cifar10_probs", _npy(probs.astype(np.float64)))
    mirror("cleanlab_cifar10_labels", _npy(labels.astype(np.uint16)))
    clean = datasets.fetch_cleanlab_cifar10()
    assert len(mirror.server.requests) == 3
    np.testing.assert_allclose(clean.test_logits, vgg.test_logits, rtol=1e-6)
    assert clean.test_labels.dtype == np.int64


def test_a_zero_probability_is_a_finite_logit(mirror):
    probs, labels = _probs(10_000, 10, 3)
    probs[0] = 0
    probs[0, 3] = 1
    mirror("cleanlab_cifar10_probs", _npy(probs))
    mirror("cleanlab_cifar10_labels", _npy(labels.astype(np.uint16)))
    data = datasets.fetch_cleanlab_cifar10(return_X_y=True)
    assert all(np.isfinite(part).all() for part in data)


def test_data_home(tmp_path, monkeypatch):
    monkeypatch.setenv("SKTS_DATA", str(tmp_path / "a"))
    assert datasets.get_data_home() == str(tmp_path / "a")
    assert (tmp_path / "a").is_dir()
    monkeypatch.delenv("SKTS_DATA")
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    assert datasets.get_data_home() == str(tmp_path / "h" / "skts_data")


def test_the_checksums_are_the_published_table():
    readme = DATA / "README.md"
    if not readme.exists():
        pytest.skip(MISSING)
    text = readme.read_text(encoding="utf-8")
    for remote in datasets.REMOTES.values():
        row = next(line for line in text.splitlines() if remote.sha256 in line)
        assert f"{remote.repo} @ {remote.commit}" in row
        assert f"`{remote.path}`" in row
    assert len(re.findall(r"\b[0-9a-f]{64}\b", text)) == len(datasets.REMOTES)


def test_an_already_present_copy_is_read_without_download(monkeypatch):
    if not (DATA / "densenet40_cifar10.npz").exists():
        pytest.skip(MISSING)
    monkeypatch.setenv("SKTS_DATA_MIRROR", "http://127.0.0.1:9")  # (never asked)
    data = datasets.fetch_densenet40_cifar10(data_home=DATA)
    with np.load(DATA / "densenet40_cifar10.npz") as f:
        np.testing.assert_array_equal(data.test_logits, f["test_logits"])
    assert data.val_logits.shape == (5000, 10)


def test_the_shipped_digits_logits_are_what_the_script_makes(tmp_path):
    made = tmp_path / "digits_logits.npz"
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "make_digits_logits.py"), str(made)],
        check=True,
        capture_output=True,
    )
    # (the installed package's copy: the source tree's, or a wheel's)
    shipped = resources.files("skts").joinpath("data", "digits_logits.npz")
    with np.load(made) as new, shipped.open("rb") as fh, np.load(fh) as old:
        if list(new["made_with"]) == list(old["made_with"]):
            assert made.read_bytes() == shipped.read_bytes()
        else:  # other versions: other last bits, the same network
            np.testing.assert_array_equal(new["test_labels"], old["test_labels"])
            agree = new["test_logits"].argmax(1) == old["test_logits"].argmax(1)
            assert agree.mean() > 0.98


def test_the_digits_network_is_overconfident_and_scaling_helps():
    from sklearn.metrics import log_loss

    data = datasets.load_digits_logits()
    assert (data.test_logits.argmax(1) == data.test_labels).mean() > 0.9
    ts = TemperatureScaler().fit(data.val_logits, data.val_labels)
    assert ts.temperature_ > 1.5
    before = log_loss(
        data.test_labels,
        TemperatureScaler(temperatures=[1.0])
        .fit(data.val_logits, data.val_labels)
        .predict_proba(data.test_logits),
    )
    after = log_loss(data.test_labels, ts.predict_proba(data.test_logits))
    assert after < 0.9 * before
