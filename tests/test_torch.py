"""skts.torch: calibrate(model, loader) and TemperatureScaledModule, on
real (small, CPU) PyTorch models (issue 29)."""

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is optional (pip install torch)")
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from skts import BoundaryTemperatureWarning, TemperatureScaler  # noqa: E402
from skts.torch import TemperatureScaledModule, calibrate  # noqa: E402


@pytest.fixture(scope="module")
def digits_cnn():
    """A small CNN trained (overfitted) on scikit-learn's digits in a few
    seconds, and a held-out loader."""
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    x = torch.tensor(x / 16.0, dtype=torch.float32).reshape(-1, 1, 8, 8)
    y = torch.tensor(y)
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Dropout(0.2),
        nn.Flatten(), nn.Linear(16 * 64, 10),
    )  # fmt: skip
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    train = DataLoader(TensorDataset(x[:1000], y[:1000]), batch_size=50, shuffle=True)
    for _ in range(25):
        for xb, yb in train:
            opt.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
    model.train()
    return model, TensorDataset(x[1000:], y[1000:])


def _logits(model, data, batch_size=None):
    # In batches of ``batch_size`` (as a loader gives them) or all at once:
    # torch's matrix product may block another batch size otherwise, so the
    # two can differ in the last bits (the Linear layer's outputs for 797
    # rows at once and in batches of 64, on an Intel Xeon with AVX-512).
    model.eval()
    with torch.no_grad():
        x = data.tensors[0]
        step = batch_size or len(x)
        z = torch.cat([model(x[i : i + step]) for i in range(0, len(x), step)])
        return z.numpy(), data.tensors[1].numpy()


def test_calibrate_equals_the_scaler_on_the_collected_logits(digits_cnn):
    model, held = digits_cnn
    loader = DataLoader(held, batch_size=64)
    module = calibrate(model, loader)
    assert model.training  # its mode is restored ...
    z, y = _logits(model, held, 64)  # (and dropout was off while collecting:)
    ref = TemperatureScaler().fit(z, y)
    assert float(module.temperature) == np.float32(ref.temperature_)
    assert module.scaler.temperature_ == ref.temperature_
    assert module.scaler.validation_loss_ == ref.validation_loss_
    assert ref.temperature_ > 1.2  # an overfitted network is overconfident
    model.eval()
    with torch.no_grad():
        x = held.tensors[0][:32]
        out = module(x)
        torch.testing.assert_close(out, model(x) / module.temperature)
    assert out.dtype == torch.float32
    model.train()
    model.eval()
    calibrate(model, loader)
    assert not model.training  # an eval() model stays in eval()
    model.train()


def test_dict_batches_and_token_logits_with_padding():
    torch.manual_seed(1)
    vocab, k = 50, 7

    class Tagger(nn.Module):  # Hugging Face style: kwargs in, .logits out
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, 16)
            self.head = nn.Linear(16, k)

        def forward(self, input_ids, attention_mask=None):
            return {"logits": 3.0 * self.head(self.emb(input_ids))}

    model = Tagger()
    ids = torch.randint(0, vocab, (40, 12))
    with torch.no_grad():
        labels = model(ids)["logits"].argmax(-1)
    noisy = torch.rand(labels.shape) < 0.4
    labels[noisy] = torch.randint(0, k, (int(noisy.sum()),))
    labels[:, 9:] = -100
    batches = [
        {"input_ids": ids[i : i + 8], "attention_mask": torch.ones(8, 12),
         "labels": labels[i : i + 8]}
        for i in range(0, 40, 8)
    ]  # fmt: skip
    module = calibrate(model, batches, class_axis=-1, ignore_index=-100)
    with torch.no_grad():
        z = model(ids)["logits"].numpy()
    ref = TemperatureScaler(class_axis=-1, ignore_index=-100).fit(z, labels.numpy())
    assert module.scaler.temperature_ == ref.temperature_
    out = module(input_ids=ids[:2])
    torch.testing.assert_close(
        out["logits"], model(ids[:2])["logits"] / module.temperature
    )
    # A user forward function, for any other batch format.
    seen = []

    def forward(batch):
        seen.append(batch["input_ids"].shape[0])
        return model(batch["input_ids"])["logits"], batch["labels"]

    same = calibrate(model, batches, forward=forward, class_axis=-1, ignore_index=-100)
    assert same.scaler.temperature_ == ref.temperature_ and seen == [8] * 5


def test_segmentation_logits_of_a_fully_convolutional_net(monkeypatch):
    import skts.torch as st

    torch.manual_seed(2)
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 4, 1))
    x = torch.randn(24, 3, 10, 10)
    with torch.no_grad():
        z = 4.0 * net(x)
    y = z.argmax(1)
    flip = torch.rand(y.shape) < 0.3
    y[flip] = torch.randint(0, 4, (int(flip.sum()),))
    y[:, :, :2] = -100
    scaled = nn.Sequential(
        net, type("Times", (nn.Module,), {"forward": lambda s, t: 4.0 * t})()
    )
    module = calibrate(
        scaled, DataLoader(TensorDataset(x, y), batch_size=5), ignore_index=-100
    )
    ref = TemperatureScaler(ignore_index=-100).fit(z.numpy(), y.numpy())
    assert module.scaler.temperature_ == ref.temperature_
    assert module(x[:1]).shape == (1, 4, 10, 10)
    # Every pixel: the strided (classes moved last) runs copied straight into
    # chunks of 37 rows, so that runs of 100 pixels cross chunk boundaries.
    monkeypatch.setattr(st._Store, "CHUNK_BYTES", 37 * 4 * 4)
    y[:, :, :2] = z.argmax(1)[:, :, :2]
    every = calibrate(scaled, DataLoader(TensorDataset(x, y), batch_size=5))
    flat = z.movedim(1, -1).reshape(-1, 4).numpy()
    want = TemperatureScaler().fit(flat, y.reshape(-1).numpy())
    assert every.scaler.temperature_ == want.temperature_
    assert every.scaler.validation_loss_ == want.validation_loss_


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_logits_stay_16_bit(dtype, monkeypatch):
    torch.manual_seed(3)
    model = nn.Linear(6, 5).to(dtype)
    x = torch.randn(300, 6).to(dtype)
    y = torch.randint(0, 5, (300,))
    kept = []
    import skts.torch as st

    real = st._Store.add
    monkeypatch.setattr(
        st._Store,
        "add",
        lambda s, z, lab, kind: (kept.append(z.dtype), real(s, z, lab, kind))[1],
    )
    module = calibrate(model, DataLoader(TensorDataset(x, y), batch_size=64))
    assert set(kept) == {torch.int16 if dtype == torch.bfloat16 else torch.float16}
    with torch.no_grad():
        z = model(x)
    assert module.scaler.temperature_ == TemperatureScaler().fit(z, y).temperature_
    with torch.no_grad():
        out = module(x[:4])
    assert out.dtype == dtype  # the 0-d float32 buffer does not widen them
    assert module.temperature.dtype == torch.float32


def test_the_disk_store_gives_the_same_answer_and_leaves_nothing(digits_cnn, tmp_path):
    model, held = digits_cnn
    loader = DataLoader(held, batch_size=100)
    memory = calibrate(model, loader, store="memory")
    disk = calibrate(model, loader, store="disk", tmp_dir=tmp_path)
    assert disk.scaler.temperature_ == memory.scaler.temperature_
    assert os.listdir(tmp_path) == []
    with pytest.raises(ValueError, match="store must be"):
        calibrate(model, loader, store="cloud")


def test_the_file_is_written_behind_the_loop_in_order(
    digits_cnn, tmp_path, monkeypatch
):
    import skts.torch as st

    model, held = digits_cnn
    loader = DataLoader(held, batch_size=37)  # (batches of 1,480 bytes)
    memory = calibrate(model, loader, store="memory")
    monkeypatch.setattr(st._Store, "CHUNK_BYTES", 1000)  # the loop waits each batch
    threads = []
    real = st._Writer.__init__

    def spy(self, *args):
        real(self, *args)
        threads.append(self.thread)

    monkeypatch.setattr(st._Writer, "__init__", spy)
    disk = calibrate(model, loader, store="disk", tmp_dir=tmp_path)
    assert disk.scaler.temperature_ == memory.scaler.temperature_
    assert disk.scaler.validation_loss_ == memory.scaler.validation_loss_
    assert len(threads) == 1 and not threads[0].is_alive()
    assert os.listdir(tmp_path) == []


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_failed_write_is_one_error_and_leaves_nothing(
    digits_cnn, tmp_path, monkeypatch
):
    import skts.torch as st

    model, held = digits_cnn
    model.train()
    real = st._Store._spill

    opened = []

    def full(self):  # the file is a disk that is full: every write fails
        real(self)
        opened.append(open("/dev/full", "wb", buffering=0))
        self.writer.file = opened[-1]

    monkeypatch.setattr(st._Store, "_spill", full)
    with pytest.raises(
        OSError, match=r"writing the logits to .* failed: No space left"
    ):
        calibrate(
            model, DataLoader(held, batch_size=100), store="disk", tmp_dir=tmp_path
        )
    opened[0].close()
    assert model.training
    assert os.listdir(tmp_path) == []


def test_bad_batches_are_one_clear_error_and_restore_the_mode(digits_cnn):
    model, held = digits_cnn
    x, y = held.tensors
    with pytest.raises(
        ValueError, match=r"batch 0: labels must be class indices in \[0, 10\); got 10"
    ):
        calibrate(model, [(x[:4], torch.tensor([1, 2, 10, 3]))])
    assert model.training
    with pytest.raises(ValueError, match=r"need labels of shape \(4,\); got \(3,\)"):
        calibrate(model, [(x[:4], y[:3])])
    with pytest.raises(ValueError, match="a batch must be"):
        calibrate(model, [x[:4]])
    with pytest.raises(ValueError, match="'labels'"):
        calibrate(model, [{"x": x[:4]}])
    with pytest.raises(ValueError, match="gave no batch"):
        calibrate(model, [])
    broken = nn.Sequential(
        model, type("NaN", (nn.Module,), {"forward": lambda s, t: t * float("nan")})()
    )
    with pytest.raises(ValueError, match="batch 0: the logits must be finite"):
        calibrate(broken, [(x[:4], y[:4])])
    assert model.training


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_every_non_finite_logit_is_found_and_large_finite_ones_pass(dtype):
    # The check sums each batch first; the sum must neither hide a NaN or an
    # infinity nor refuse finite logits whose sum overflows.
    rng = np.random.default_rng(3)
    z = torch.tensor(rng.normal(size=(3, 64, 5)), dtype=dtype)
    y = torch.tensor(rng.integers(0, 5, size=(3, 64)))
    model = nn.Identity()
    for bad in (float("nan"), float("inf"), -float("inf")):
        spoilt = z.clone()
        spoilt[2, 17, 3] = bad
        with pytest.raises(ValueError, match="batch 2: the logits must be finite"):
            calibrate(model, [(spoilt[i], y[i]) for i in range(3)])
    opposite = z.clone()  # +inf and -inf: a NaN sum, still refused
    opposite[1, 0, 0], opposite[1, 1, 0] = float("inf"), -float("inf")
    with pytest.raises(ValueError, match="batch 1: the logits must be finite"):
        calibrate(model, [(opposite[i], y[i]) for i in range(3)])
    big = torch.finfo(dtype).max
    large = z.clone()
    large[0, :, 0] = big  # finite, but their sum overflows even in float32
    large[0, :, 1] = -big if dtype == torch.float32 else big
    with pytest.warns(BoundaryTemperatureWarning):  # (such logits want T -> inf)
        got = calibrate(model, [(large[i], y[i]) for i in range(3)])
    with pytest.warns(BoundaryTemperatureWarning):
        want = TemperatureScaler().fit(
            large.reshape(-1, 5).float().numpy(), y.reshape(-1)
        )
    assert float(got.temperature) == want.temperature_


def test_progress_bar_on_request(digits_cnn, capsys):
    pytest.importorskip("tqdm", reason="tqdm is optional")
    model, held = digits_cnn
    calibrate(model, DataLoader(held, batch_size=200), progress=True)
    assert "skts: logits" in capsys.readouterr().err
    calibrate(model, DataLoader(held, batch_size=200))  # stderr is not a terminal
    assert capsys.readouterr().err == ""


def test_module_state_dict_round_trip_and_to_torch(digits_cnn):
    model, held = digits_cnn
    z, y = _logits(model, held)
    model.train()
    scaler = TemperatureScaler().fit(z, y)
    module = scaler.to_torch(model)
    assert isinstance(module, TemperatureScaledModule) and module.scaler is scaler
    state = module.state_dict()
    assert "temperature" in state and float(state["temperature"]) == np.float32(
        scaler.temperature_
    )
    fresh = TemperatureScaledModule(model, 1.0)
    fresh.load_state_dict(state)
    assert float(fresh.temperature) == float(module.temperature)
    alone = TemperatureScaler().fit(z, y).to_torch()  # an nn.Identity inside
    got = alone(torch.from_numpy(z)).numpy()
    np.testing.assert_allclose(got, scaler.transform(z), rtol=1e-6)
    assert (
        TemperatureScaledModule(nn.Linear(2, 2).double(), 2.0).temperature.dtype
        == torch.float64
    )
    with pytest.raises(ValueError, match="temperature must be finite and > 0"):
        TemperatureScaledModule(model, 0.0)


def test_script_export_and_onnx(digits_cnn, tmp_path):
    model, held = digits_cnn
    model.eval()
    module = calibrate(model, DataLoader(held, batch_size=128))
    x = held.tensors[0][:8]
    with torch.no_grad():
        expected = module(x)
    scripted = torch.jit.script(module)
    torch.testing.assert_close(scripted(x), expected)
    path = tmp_path / "calibrated.pt"
    scripted.save(str(path))
    torch.testing.assert_close(torch.jit.load(str(path))(x), expected)
    exported = torch.export.export(module, (x,))
    torch.testing.assert_close(exported.module()(x), expected)
    onnx = pytest.importorskip("onnx", reason="onnx is optional")
    from onnx.reference import ReferenceEvaluator

    onnx_path = tmp_path / "calibrated.onnx"
    torch.onnx.export(module, (x,), str(onnx_path), dynamo=False, input_names=["x"])
    got = ReferenceEvaluator(onnx.load(str(onnx_path))).run(None, {"x": x.numpy()})[0]
    np.testing.assert_allclose(got, expected.numpy(), rtol=1e-5, atol=1e-5)
    model.train()


def test_onnx_export_of_the_dynamo_exporter(digits_cnn, tmp_path):
    onnx = pytest.importorskip("onnx", reason="onnx is optional")
    pytest.importorskip(
        "onnxscript", reason="torch.onnx's dynamo exporter needs onnxscript"
    )
    from onnx.reference import ReferenceEvaluator

    model, held = digits_cnn
    module = TemperatureScaledModule(model, 1.7).eval()
    x = held.tensors[0][:8]
    program = torch.onnx.export(module, (x,), dynamo=True)
    program.save(str(tmp_path / "calibrated.onnx"))
    graph = onnx.load(str(tmp_path / "calibrated.onnx"))
    name = graph.graph.input[0].name
    got = ReferenceEvaluator(graph).run(None, {name: x.numpy()})[0]
    with torch.no_grad():
        expected = model.eval()(x) / 1.7
    np.testing.assert_allclose(got, expected.numpy(), rtol=1e-5, atol=1e-5)
    model.train()


@pytest.mark.parametrize("kind", ["float32", "float16", "bfloat16", "float64"])
def test_the_store_reads_across_its_chunks_exactly(kind, monkeypatch):
    import skts.torch as st

    monkeypatch.setattr(st._Store, "CHUNK_BYTES", 168)  # chunks of 3 to 12 rows
    rng = np.random.default_rng(5)
    dtype = getattr(torch, kind)
    batches = [
        torch.from_numpy(rng.normal(size=(n, 7)) * 3).to(dtype) for n in (5, 40, 1, 23)
    ]
    # Images whose classes are moved last: strided runs of 6 positions.
    images = torch.from_numpy(rng.normal(size=(4, 7, 2, 3)) * 3).to(dtype)
    moved = images.movedim(1, -1)
    assert not moved.is_contiguous()
    store = st._Store("memory", 1 << 30, None)
    for b in batches:
        store.add(st._host(b)[None], np.zeros(b.shape[0], np.uint8), kind)
    store.add(st._host(moved).flatten(1, -2), np.zeros(24, np.uint8), kind)
    batches.append(moved.reshape(-1, 7))
    assert len(store.chunks) >= 5
    reader, _ = store.rows()
    every = torch.cat(batches).to(torch.float64).numpy()
    assert reader.shape == every.shape == (93, 7)
    for key in (slice(0, 93), slice(3, 50), slice(10, 12), slice(2, 90, 7)):
        np.testing.assert_array_equal(reader[key], every[key])
    np.testing.assert_array_equal(reader[np.array([0, 68, 5])], every[[0, 68, 5]])
    np.testing.assert_array_equal(reader.argmax(), every.argmax(axis=1))
    assert reader.dtype == (np.float64 if kind == "float64" else np.float32)


def test_auto_store_spills_to_disk_and_cleans_up(digits_cnn, tmp_path, monkeypatch):
    import skts.torch as st

    model, held = digits_cnn
    monkeypatch.setattr(st, "_available_memory", lambda: 40_000)  # spill at 20 kB
    loader = DataLoader(held, batch_size=100)
    spilled = calibrate(model, loader, tmp_dir=tmp_path)
    assert (
        spilled.scaler.temperature_
        == calibrate(model, loader, store="memory").scaler.temperature_
    )
    assert os.listdir(tmp_path) == []
